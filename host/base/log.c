/* log.c: every line the host prints (see log.h for which call is which).
 * Text: "LEVEL prefix: message" for diagnostics; JSON: one object a line
 * with ts, level, migration and msg, built with cJSON so a message can hold
 * any character, and always valid UTF-8. Diagnostics go to stderr, results
 * to stdout. A script's output is data: escaped in text, a value under
 * `output` (or a log line rebuilt from its level and msg) in JSON, never
 * keys of its own. In text, every line is one line: control bytes in what
 * it carries (a record's reason, a Lease holder's identity, an annotation,
 * any text from the cluster) are escaped here, the one place every line
 * passes, so none can start a line of its own or move the cursor. Must
 * never let another part of the host pick a format or a stream of its own.
 * The `log` Lua module over it is lua/lualog.c.
 * Prefixes: out_ (a result on stdout, beside log_'s diagnostics). */
#include "base/log.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/termlog.h"
#include "base/util.h"

static int json_mode;
static enum log_level min_level = LOG_INFO;
static char prefix[128];

void log_set_json(int on) { json_mode = on; }
int log_json(void) { return json_mode; }
void log_set_prefix(const char *p) { snprintf(prefix, sizeof prefix, "%s", p ? p : ""); }

static const char *names[] = {"debug", "info", "warn", "error"};

/* s[0..n) as one line of text: itself when it has nothing to escape (the
 * common case costs a scan), else escaped into *own (malloc'd; the caller
 * frees it) by text_escape. Never NULL: without memory, a placeholder. */
static const char *plain(const char *s, size_t n, char **own)
{
    *own = NULL;
    size_t i = 0;
    while (i < n && ((unsigned char)s[i] >= 0x20 || s[i] == '\t') && (unsigned char)s[i] < 0x7f)
        i++;
    if (i == n && !s[n])
        return s;
    size_t cap = 6 * n + 1;
    if (!(*own = malloc(cap)))
        return "(a line that could not be escaped: out of memory)";
    text_escape(s, n, *own, cap, 0);
    return *own;
}

/* The printed text of v, made valid UTF-8 (cJSON copies string bytes as
 * they are, and a script's output may hold any): malloc'd, or NULL. */
static char *print_json(const cJSON *v, int pretty)
{
    char *s = pretty ? cJSON_Print(v) : cJSON_PrintUnformatted(v);
    char *r = s ? utf8_repair(s, strlen(s)) : NULL;
    cJSON_free(s);
    return r;
}

/* One JSON object as one line on fd, in one write. */
static void json_line(int fd, cJSON *o)
{
    char *s = o ? print_json(o, 0) : NULL;
    if (s) {
        size_t n = strlen(s);
        char *line = malloc(n + 2);
        if (line) {
            memcpy(line, s, n);
            line[n] = '\n';
            (void)util_write_all(fd, line, n + 1); /* a closed stream must not stop a run */
            free(line);
        }
    }
    free(s);
}

/* {"ts":..,"level":..,["migration":..,]KEY:TEXT} */
static cJSON *json_record(const char *level, const char *migration, const char *key,
                          const char *text, size_t n)
{
    char ts[32];
    now_rfc3339(ts);
    cJSON *o = cJSON_CreateObject();
    char *copy = malloc(n + 1);
    if (copy) {
        memcpy(copy, text, n);
        copy[n] = '\0';
    }
    if (!o || !copy || !cJSON_AddStringToObject(o, "ts", ts) ||
        (level && !cJSON_AddStringToObject(o, "level", level)) ||
        (migration && *migration && !cJSON_AddStringToObject(o, "migration", migration)) ||
        !cJSON_AddStringToObject(o, key, copy)) {
        cJSON_Delete(o);
        o = NULL;
    }
    free(copy);
    return o;
}

static void emit_line(enum log_level l, const char *msg, size_t n)
{
    char *own;
    const char *line = plain(msg, n, &own);
    if (*prefix)
        fprintf(stderr, "%s %s: %s\n", names[l], prefix, line);
    else
        fprintf(stderr, "%s: %s\n", names[l], line);
    free(own);
}

/* split: a message of several lines (a script's log call) is said as that
 * many lines, each with its level; otherwise it is one line. */
static void emit(enum log_level l, const char *msg, int split)
{
    if (l < min_level)
        return;
    if (json_mode) {
        cJSON *o = json_record(names[l], prefix, "msg", msg, strlen(msg));
        fflush(stderr);
        json_line(STDERR_FILENO, o);
        cJSON_Delete(o);
        return;
    }
    for (const char *p = msg;;) {
        size_t n = split ? strcspn(p, "\n") : strlen(p);
        emit_line(l, p, n);
        if (!p[n])
            break;
        p += n + 1;
    }
    fflush(stderr);
}

void log_fatal(const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    termlog_fatal(buf); /* where `kubectl describe` shows it (termlog.h) */
    if (json_mode) {
        cJSON *o = json_record("error", prefix, "msg", buf, strlen(buf));
        json_line(STDERR_FILENO, o);
        cJSON_Delete(o);
        return;
    }
    char *own;
    fprintf(stderr, "cozy-migrate: %s\n", plain(buf, strlen(buf), &own));
    free(own);
    fflush(stderr);
}

void log_usage(const char *cmd, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    termlog_fatal(buf);
    if (json_mode) {
        cJSON *o = json_record("error", NULL, "msg", buf, strlen(buf));
        if (o && cmd)
            cJSON_AddStringToObject(o, "command", cmd);
        if (o)
            cJSON_AddStringToObject(o, "kind", "usage");
        json_line(STDERR_FILENO, o);
        cJSON_Delete(o);
        return;
    }
    char *own;
    const char *line = plain(buf, strlen(buf), &own);
    if (cmd)
        fprintf(stderr, "cozy-migrate: %s: %s (see 'cozy-migrate %s --help')\n", cmd, line, cmd);
    else
        fprintf(stderr, "cozy-migrate: %s (see 'cozy-migrate --help')\n", line);
    free(own);
    fflush(stderr);
}

/* A Lua child logs in the parent's format already: a line that is a log
 * object of this very migration is taken as that log line, and rebuilt from
 * its level and message alone, so a script printing such a line can say
 * no more than log.info could: never a key of the runner's own lines
 * (outcome, step, detail, ...). */
static int own_log_line(const char *slug, const char *s, size_t n)
{
    if (n < 2 || s[0] != '{')
        return 0;
    cJSON *o = cJSON_ParseWithLength(s, n);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "migration");
    const cJSON *lv = cJSON_GetObjectItemCaseSensitive(o, "level");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(o, "msg");
    const char *level = NULL;
    for (size_t i = 0; cJSON_IsString(lv) && i < sizeof names / sizeof *names; i++)
        if (strcmp(lv->valuestring, names[i]) == 0)
            level = names[i];
    int own = cJSON_IsString(m) && strcmp(m->valuestring, slug) == 0 && level &&
              cJSON_IsString(msg);
    if (own) {
        cJSON *line = json_record(level, slug, "msg", msg->valuestring, strlen(msg->valuestring));
        json_line(STDERR_FILENO, line);
        cJSON_Delete(line);
    }
    cJSON_Delete(o);
    return own;
}

void log_script_line(const char *slug, const char *s, size_t n)
{
    if (json_mode) {
        if (own_log_line(slug, s, n))
            return;
        cJSON *o = json_record("info", slug, "output", s, n);
        json_line(STDERR_FILENO, o);
        cJSON_Delete(o);
        return;
    }
    /* What a script prints is data: a CR or an escape sequence of its own
     * could erase the prefix and paint a line of the runner's. */
    char out[8192];
    size_t sl = strlen(slug);
    if (sl > 200)
        sl = 200;
    size_t at = 0;
    out[at++] = '[';
    memcpy(out + at, slug, sl);
    at += sl;
    out[at++] = ']';
    out[at++] = ' ';
    at += text_escape(s, n, out + at, sizeof out - at - 1, 0);
    out[at++] = '\n';
    (void)util_write_all(STDERR_FILENO, out, at);
}

void out_line(const char *fmt, ...)
{
    char buf[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (json_mode) {
        fflush(stdout);
        cJSON *o = json_record(NULL, NULL, "msg", buf, strlen(buf));
        json_line(STDOUT_FILENO, o);
        cJSON_Delete(o);
        return;
    }
    char *own;
    fputs(plain(buf, strlen(buf), &own), stdout);
    free(own);
    fputc('\n', stdout);
    fflush(stdout);
}

void out_json(const cJSON *v, int pretty)
{
    char *s = print_json(v, pretty && !json_mode);
    if (!s) {
        log_error("out of memory printing a result");
        return;
    }
    fputs(s, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    free(s);
}

void log_msg(enum log_level l, const char *msg)
{
    emit(l, msg, 1);
}

void log_say(const char *line)
{
    emit(LOG_WARN, line, 1);
}

void log_write(enum log_level l, const char *fmt, ...)
{
    if (l < min_level)
        return;
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    emit(l, buf, 0);
}

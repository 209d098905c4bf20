/* header.c: parses a script's `cozystack-migration:` header lines.
 *
 * Owns the header grammar: the lines sit in the leading comment block (after
 * an optional #! line), one `key=value` each, keys on-error (required:
 * abort|warn), requires (comma-separated slugs), timeout (a duration),
 * dry-run (shell only: the variable a dry run sets to 1).
 * Must never guess: an unknown key, a repeated key, a bad value, a header
 * line after the first code line, a line that looks like a header line but
 * is spelt otherwise (case, dashes, a space before the colon), a header line
 * over 1023 bytes (refused, never cut), a NUL byte in a header or leading
 * comment line, or a UTF-8 byte order mark is an error naming the file and
 * line. */
#include "formats/header.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/defaults.h"
#include "base/mem.h"
#include "base/util.h"
#include "formats/manifest.h"

#define TAG "cozystack-migration:"
#define STR_(x) #x
#define STR(x) STR_(x)

const char *header_on_error_name(enum on_error e)
{
    return e == ON_ERROR_ABORT ? "abort" : e == ON_ERROR_WARN ? "warn" : "unset";
}

void header_free(struct header *h)
{
    for (size_t i = 0; i < h->nrequires; i++)
        free(h->requires[i]);
    free(h->requires);
    memset(h, 0, sizeof *h);
}

const char *header_timeout_why(const struct header *h, const char *path, double override,
                               char *buf, size_t len)
{
    char d[64];
    if (override > 0) {
        format_duration(override, d, sizeof d);
        snprintf(buf, len, "--timeout %s", d);
    } else if (h && h->timeout > 0 && h->timeout_line > 0) {
        format_duration(h->timeout, d, sizeof d);
        snprintf(buf, len, "timeout=%s, %s:%d", d, path ? path : "the header", h->timeout_line);
    } else {
        format_duration(DEFAULT_TIMEOUT_S, d, sizeof d);
        if (path)
            snprintf(buf, len, "the default %s: %s sets no timeout=", d, path);
        else
            snprintf(buf, len, "the default %s", d);
    }
    return buf;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

static int parse_requires(struct header *h, char *v, const char *path, int line, char *err,
                          size_t errlen)
{
    for (char *save = NULL, *tok = strtok_r(v, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *s = trim(tok);
        if (!slug_valid(s)) {
            snprintf(err, errlen, "%s:%d: requires: '%s' is not a valid slug", path, line, s);
            return -1;
        }
        char **nr = mem_grow(h->requires, h->nrequires + 1, sizeof *nr);
        if (!nr || !(nr[h->nrequires] = strdup(s))) {
            if (nr)
                h->requires = nr;
            snprintf(err, errlen, "%s: out of memory", path);
            return -1;
        }
        h->requires = nr;
        h->nrequires++;
    }
    if (h->nrequires == 0) {
        snprintf(err, errlen, "%s:%d: requires: no slug given", path, line);
        return -1;
    }
    return 0;
}

/* [A-Za-z_][A-Za-z0-9_]*: what a shell script can read as $NAME. */
static int shell_name_valid(const char *s)
{
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
        return 0;
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return 0;
    return 1;
}

static int parse_line(struct header *h, char *kv, const char *path, int line, unsigned *seen,
                      char *err, size_t errlen)
{
    char *eq = strchr(kv, '=');
    if (!eq) {
        snprintf(err, errlen, "%s:%d: header line '%s' is not key=value", path, line, kv);
        return -1;
    }
    *eq = '\0';
    char *key = trim(kv), *val = trim(eq + 1);
    static const char *const keys[] = {"on-error", "requires", "timeout", "dry-run"};
    int k = -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(key, keys[i]) == 0)
            k = i;
    if (k < 0) {
        snprintf(err, errlen, "%s:%d: unknown header key '%s' (on-error, requires, timeout, dry-run)",
                 path, line, key);
        return -1;
    }
    if (*seen & (1u << k)) {
        snprintf(err, errlen, "%s:%d: header key '%s' given twice", path, line, key);
        return -1;
    }
    *seen |= 1u << k;
    switch (k) {
    case 0:
        if (strcmp(val, "abort") == 0)
            h->on_error = ON_ERROR_ABORT;
        else if (strcmp(val, "warn") == 0)
            h->on_error = ON_ERROR_WARN;
        else {
            snprintf(err, errlen, "%s:%d: on-error=%s: expected abort or warn", path, line, val);
            return -1;
        }
        return 0;
    case 1:
        return parse_requires(h, val, path, line, err, errlen);
    case 3:
        if (!shell_name_valid(val) || strlen(val) >= sizeof h->dry_run_var) {
            snprintf(err, errlen, "%s:%d: dry-run=%s: expected a shell variable name like "
                     "DRY_RUN", path, line, val);
            return -1;
        }
        snprintf(h->dry_run_var, sizeof h->dry_run_var, "%s", val);
        return 0;
    default:
        if (parse_duration(val, &h->timeout) != 0) {
            snprintf(err, errlen, "%s:%d: timeout=%s: not a duration like 90s, 5m or 1h", path,
                     line, val);
            return -1;
        }
        h->timeout_line = line;
        return 0;
    }
}

/* The longest header line, in bytes without its newline. */
#define LINE_MAX_BYTES 1023

/* Whether a comment line reads as an attempt at the tag: the comment's
 * marks and blanks, then "cozystack-migration" in any case, with any blanks,
 * dashes or underscores, before a colon ("--- cozystack-migration:",
 * "-- Cozystack-Migration:", "-- cozystack-migration :"). */
static int looks_like_tag(const char *s, char mark)
{
    while (*s == mark || *s == ' ' || *s == '\t')
        s++;
    char word[64];
    size_t n = 0;
    for (; *s && *s != ':' && n + 1 < sizeof word; s++) {
        char c = *s;
        if (c == ' ' || c == '\t' || c == '-' || c == '_')
            continue;
        word[n++] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    word[n] = '\0';
    return *s == ':' && strcmp(word, "cozystackmigration") == 0;
}

int header_parse(const char *path, const char *text, size_t len, int lua, struct header *h,
                 char *err, size_t errlen)
{
    memset(h, 0, sizeof *h);
    const char *prefix = lua ? "--" : "#";
    size_t plen = strlen(prefix);
    unsigned seen = 0;
    int lines = 0, in_code = 0, near_miss = 0;
    const char *p = text, *end = text + len;
    /* Neither Lua (from a buffer) nor a #! line survives one, and the
     * first line would not read as a header: said for what it is. */
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) {
        snprintf(err, errlen, "%s:1: the file starts with a UTF-8 byte order mark (EF BB BF): "
                 "save it without one", path);
        return -1;
    }
    for (int line = 1; p < end; line++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t full = nl ? (size_t)(nl - p) : (size_t)(end - p);
        size_t l = full;
        char buf[LINE_MAX_BYTES + 1];
        /* The start of a line is enough to tell a header line; one that
         * is too long is refused below, never cut. */
        if (l > LINE_MAX_BYTES)
            l = LINE_MAX_BYTES;
        memcpy(buf, p, l);
        buf[l] = '\0';
        const char *raw = p;
        p = nl ? nl + 1 : end;
        char *s = trim(buf);
        if (line == 1 && strncmp(s, "#!", 2) == 0)
            continue;
        if (!*s && !memchr(raw, '\0', full))
            continue;
        int comment = strncmp(s, prefix, plen) == 0;
        char *body = comment ? trim(s + plen) : NULL;
        int exact = comment && strncmp(body, TAG, strlen(TAG)) == 0;
        int tagged = exact || (comment && looks_like_tag(s, prefix[0]));
        if (tagged || (comment && !in_code)) {
            const char *why = memchr(raw, '\0', full) ? "holds a NUL byte"
                              : tagged && full > LINE_MAX_BYTES ? "is longer than "
                                                                  STR(LINE_MAX_BYTES) " bytes"
                                                                : NULL;
            if (why) {
                snprintf(err, errlen, "%s:%d: %s line %s", path, line,
                         tagged ? "header" : "comment", why);
                header_free(h);
                return -1;
            }
        }
        if (tagged && !exact) {
            snprintf(err, errlen, "%s:%d: '%.60s' looks like a header line but is not spelt "
                     "'%s " TAG " key=value' (lower case, no space before the colon)",
                     path, line, s, prefix);
            header_free(h);
            return -1;
        }
        if (exact) {
            if (in_code) {
                snprintf(err, errlen, "%s:%d: header line after the first line of code", path,
                         line);
                header_free(h);
                return -1;
            }
            lines++;
            if (parse_line(h, trim(body + strlen(TAG)), path, line, &seen, err, errlen) != 0) {
                header_free(h);
                return -1;
            }
        } else if (!comment) {
            in_code = 1;
        } else if (strstr(body, "migration:")) {
            near_miss = 1;
        }
    }
    if (!lines) {
        h->missing = 1;
        snprintf(err, errlen,
                 "%s: missing header: a migration starts with the line '%s " TAG
                 " on-error=abort' (or on-error=warn)%s",
                 path, prefix, near_miss ? "; other spellings are not a header" : "");
        return -1;
    }
    if (lua && *h->dry_run_var) {
        snprintf(err, errlen, "%s: dry-run=%s is for shell migrations (a Lua migration's writes "
                 "are always dry-run with --dry-run)", path, h->dry_run_var);
        header_free(h);
        return -1;
    }
    if (h->on_error == ON_ERROR_UNSET) {
        snprintf(err, errlen, "%s: header has no on-error (abort or warn)", path);
        header_free(h);
        return -1;
    }
    return 0;
}

/* header.c: parses a script's `cozystack-migration:` header lines.
 *
 * Owns the header grammar: the lines sit in the leading comment block (after
 * an optional #! line), one `key=value` each, keys on-error (required:
 * abort|warn), requires (comma-separated slugs), timeout (a duration),
 * dry-run (shell only: the variable a dry run sets to 1).
 * Must never guess: an unknown key, a repeated key, a bad value or a header
 * line after the first code line is an error naming the file and line. */
#include "header.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"
#include "util.h"

#define TAG "cozystack-migration:"

const char *on_error_name(enum on_error e)
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
        char **nr = realloc(h->requires, (h->nrequires + 1) * sizeof *nr);
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
        return 0;
    }
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
    for (int line = 1; p < end; line++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
        char buf[1024];
        if (l >= sizeof buf) {
            /* A long line cannot be a header line; it ends the header block
             * unless it is a comment. */
            l = sizeof buf - 1;
        }
        memcpy(buf, p, l);
        buf[l] = '\0';
        p = nl ? nl + 1 : end;
        char *s = trim(buf);
        if (line == 1 && strncmp(s, "#!", 2) == 0)
            continue;
        if (!*s)
            continue;
        int comment = strncmp(s, prefix, plen) == 0;
        char *body = comment ? trim(s + plen) : NULL;
        if (comment && strncmp(body, TAG, strlen(TAG)) == 0) {
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

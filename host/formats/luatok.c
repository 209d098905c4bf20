/* luatok.c: Lua 5.4 source as tokens (see luatok.h). Owns the lexical
 * rules the api lint needs to tell code from comments and strings: long
 * brackets of any level, short strings with escapes (\z included), names,
 * numbers, and the multi-character operators. Must never read past the end
 * of the text, whatever it holds. */
#include "formats/luatok.h"

#include <string.h>

void luatok_init(struct luatok_reader *r, const char *src, size_t len)
{
    r->src = r->p = src;
    r->end = src + len;
    r->line = 1;
}

int luatok_is(const struct luatok *t, const char *s)
{
    return (t->kind == LT_OP || t->kind == LT_NAME) && strcmp(t->text, s) == 0;
}

static int is_name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_name_char(char c)
{
    return is_name_start(c) || (c >= '0' && c <= '9');
}

/* At '[': the level of a long bracket "[==[" (its '=' count), or -1. */
static int long_open(const struct luatok_reader *r)
{
    const char *q = r->p + 1;
    int level = 0;
    while (q < r->end && *q == '=') {
        level++;
        q++;
    }
    return q < r->end && *q == '[' ? level : -1;
}

/* Skips a long bracket of `level` starting at r->p; 0, or -1 unfinished. */
static int skip_long(struct luatok_reader *r, int level)
{
    r->p += level + 2;
    while (r->p < r->end) {
        if (*r->p == '\n')
            r->line++;
        if (*r->p == ']') {
            const char *q = r->p + 1;
            int n = 0;
            while (q < r->end && *q == '=') {
                n++;
                q++;
            }
            if (n == level && q < r->end && *q == ']') {
                r->p = q + 1;
                return 0;
            }
        }
        r->p++;
    }
    return -1;
}

static void set_text(struct luatok *t, const char *s, size_t n)
{
    if (n >= sizeof t->text)
        n = sizeof t->text - 1;
    memcpy(t->text, s, n);
    t->text[n] = '\0';
}

enum luatok_kind luatok_next(struct luatok_reader *r, struct luatok *t)
{
    static const char *const ops[] = {"...", "..", "==", "~=", "<=", ">=", "//", "::", "<<", ">>",
                                      NULL};
    memset(t, 0, sizeof *t);
    for (;;) {
        while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\r' || *r->p == '\n' ||
                                 *r->p == '\f' || *r->p == '\v')) {
            if (*r->p == '\n')
                r->line++;
            r->p++;
        }
        if (r->p + 1 < r->end && r->p[0] == '-' && r->p[1] == '-') {
            r->p += 2;
            int level = r->p < r->end && *r->p == '[' ? long_open(r) : -1;
            if (level >= 0) {
                int line = r->line;
                if (skip_long(r, level) != 0) {
                    t->kind = LT_ERROR;
                    t->line = line;
                    return t->kind;
                }
            } else {
                while (r->p < r->end && *r->p != '\n')
                    r->p++;
            }
            continue;
        }
        break;
    }
    t->line = r->line;
    t->p = r->p;
    if (r->p >= r->end)
        return t->kind = LT_EOF;
    char c = *r->p;
    if (is_name_start(c)) {
        while (r->p < r->end && is_name_char(*r->p))
            r->p++;
        t->kind = LT_NAME;
    } else if ((c >= '0' && c <= '9') || (c == '.' && r->p + 1 < r->end && r->p[1] >= '0' &&
                                           r->p[1] <= '9')) {
        while (r->p < r->end) {
            char d = *r->p;
            if ((d == '+' || d == '-') && r->p > t->p &&
                (r->p[-1] == 'e' || r->p[-1] == 'E' || r->p[-1] == 'p' || r->p[-1] == 'P'))
                r->p++;
            else if (is_name_char(d) || d == '.')
                r->p++;
            else
                break;
        }
        t->kind = LT_NUMBER;
    } else if (c == '\'' || c == '"') {
        int plain = 1;
        r->p++;
        while (r->p < r->end && *r->p != c) {
            if (*r->p == '\n') {
                t->kind = LT_ERROR;
                return t->kind;
            }
            if (*r->p == '\\') {
                plain = 0;
                r->p++;
                if (r->p < r->end && *r->p == '\n')
                    r->line++;
                if (r->p < r->end && *r->p == 'z') {
                    r->p++;
                    while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\t' ||
                                             *r->p == '\r')) {
                        if (*r->p == '\n')
                            r->line++;
                        r->p++;
                    }
                    continue;
                }
            }
            if (r->p < r->end)
                r->p++;
        }
        if (r->p >= r->end) {
            t->kind = LT_ERROR;
            return t->kind;
        }
        r->p++;
        t->kind = LT_STRING;
        t->len = (size_t)(r->p - t->p);
        if (plain && t->len - 2 < sizeof t->text)
            set_text(t, t->p + 1, t->len - 2);
        return t->kind;
    } else if (c == '[' && long_open(r) >= 0) {
        if (skip_long(r, long_open(r)) != 0) {
            t->kind = LT_ERROR;
            return t->kind;
        }
        t->kind = LT_STRING;
        t->len = (size_t)(r->p - t->p);
        return t->kind;
    } else {
        size_t n = 1;
        for (int i = 0; ops[i]; i++) {
            size_t l = strlen(ops[i]);
            if ((size_t)(r->end - r->p) >= l && memcmp(r->p, ops[i], l) == 0) {
                n = l;
                break;
            }
        }
        r->p += n;
        t->kind = LT_OP;
    }
    t->len = (size_t)(r->p - t->p);
    set_text(t, t->p, t->len);
    return t->kind;
}

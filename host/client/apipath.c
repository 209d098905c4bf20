/* apipath.c: reads an apiserver request path (see apipath.h). Owns the
 * path grammar /api/<v>[/namespaces/<ns>]/<resource>[/<name>[/<sub>]] and
 * its /apis/<group>/<v> twin. Must never decide anything about a request:
 * it only says what the path names. */
#include "client/apipath.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"

static int hexv(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                        : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Splits path into decoded segments (at most max). */
static int segments(const char *path, char seg[][256], int max)
{
    int n = 0;
    const char *p = path;
    while (*p == '/')
        p++;
    while (*p && *p != '?' && n < max) {
        size_t o = 0;
        while (*p && *p != '/' && *p != '?') {
            int c = (unsigned char)*p;
            if (c == '%' && hexv(p[1]) >= 0 && hexv(p[2]) >= 0) {
                c = hexv(p[1]) * 16 + hexv(p[2]);
                p += 2;
            }
            if (o + 1 < 256)
                seg[n][o++] = (char)c;
            p++;
        }
        seg[n][o] = '\0';
        n++;
        while (*p == '/')
            p++;
    }
    return n;
}

int apipath_parse(const char *path, struct apipath *r)
{
    char s[12][256];
    int n = segments(path, s, 12), i;
    memset(r, 0, sizeof *r);
    if (n >= 2 && strcmp(s[0], "api") == 0) {
        snprintf(r->prefix, sizeof r->prefix, "/api/%.255s", s[1]);
        i = 2;
    } else if (n >= 3 && strcmp(s[0], "apis") == 0) {
        snprintf(r->prefix, sizeof r->prefix, "/apis/%.255s/%.255s", s[1], s[2]);
        snprintf(r->group, sizeof r->group, "%s", s[1]);
        i = 3;
    } else {
        return -1;
    }
    /* /namespaces/<ns>/<resource>...: a namespaced resource; a lone
     * /namespaces/<name> is the Namespace object itself. */
    if (n - i >= 3 && strcmp(s[i], "namespaces") == 0) {
        snprintf(r->ns, sizeof r->ns, "%s", s[i + 1]);
        i += 2;
    }
    if (i >= n)
        return -1;
    snprintf(r->resource, sizeof r->resource, "%s", s[i]);
    if (i + 1 < n)
        snprintf(r->name, sizeof r->name, "%s", s[i + 1]);
    if (i + 2 < n)
        snprintf(r->sub, sizeof r->sub, "%s", s[i + 2]);
    return 0;
}

void apipath_key(const struct apipath *p, const char *ns, const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s|%s|%s|%s", p->prefix, ns ? ns : "", p->resource, name ? name : "");
}

static int add_escaped(struct buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        int plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_' || c == '~';
        char enc[3] = {'%', hex[c >> 4], hex[c & 15]};
        if ((plain ? buf_add(b, s, 1) : buf_add(b, enc, 3)) != 0)
            return -1;
    }
    return 0;
}

int apipath_add_query(struct buf *b, const char *key, const char *value)
{
    int first = !b->p || !strchr(b->p, '?');
    if (buf_adds(b, first ? "?" : "&") != 0 || add_escaped(b, key) != 0 || buf_adds(b, "=") != 0)
        return -1;
    return add_escaped(b, value);
}

char *apipath_query_value(const char *path, const char *key)
{
    const char *q = strchr(path, '?');
    size_t kl = strlen(key);
    for (const char *p = q ? q + 1 : NULL; p && *p;) {
        size_t n = strcspn(p, "&");
        if (n > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
            char *v = malloc(n - kl);
            size_t o = 0;
            for (size_t i = kl + 1; v && i < n; i++) {
                int c = (unsigned char)p[i];
                if (c == '%' && i + 2 < n && hexv(p[i + 1]) >= 0 && hexv(p[i + 2]) >= 0) {
                    c = hexv(p[i + 1]) * 16 + hexv(p[i + 2]);
                    i += 2;
                } else if (c == '+') {
                    c = ' ';
                }
                v[o++] = (char)c;
            }
            if (v)
                v[o] = '\0';
            return v;
        }
        p += n + (p[n] == '&');
    }
    return NULL;
}

/* manifest.c: parses slugs, order.d/ batch files, `revoked`, `legacy-map`
 * and the legacy set's digest list.
 *
 * Owns the grammar of each line format and the error message for each way a
 * line can be wrong ("FILE:LINE: what"). Cross-file rules (a slug in two
 * batches, a revoked slug nobody ships) belong to tree.c, which sees
 * everything. Must never skip a line it does not understand.
 * Prefixes: slug_ revoked_ legacy_ digest_ (each line format's own). */
#include "formats/manifest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/mem.h"
#include "base/util.h"

int slug_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > SLUG_MAX || s[0] == '-' || s[n - 1] == '-')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '-') {
            if (s[i + 1] == '-')
                return 0;
        } else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) {
            return 0;
        }
    }
    return 1;
}

/* Iterates the lines of a text, stripping comments, CR and surrounding
 * blanks. Returns the next non-empty line (in buf) or NULL at the end;
 * `bad` then says why a line cannot be read as it is (a NUL byte, too long,
 * a byte order mark): the caller refuses it rather than read part of it. */
struct lines {
    const char *p, *end;
    int line;
    char buf[512];
    const char *bad;
};

static char *next_line(struct lines *it, int allow_comment)
{
    while (it->p < it->end) {
        const char *start = it->p;
        const char *nl = memchr(it->p, '\n', (size_t)(it->end - it->p));
        size_t l = nl ? (size_t)(nl - it->p) : (size_t)(it->end - it->p), full = l;
        it->line++;
        it->bad = NULL;
        if (l >= sizeof it->buf)
            l = sizeof it->buf - 1;
        memcpy(it->buf, it->p, l);
        it->buf[l] = '\0';
        it->p = nl ? nl + 1 : it->end;
        if (memchr(start, '\0', full))
            it->bad = "holds a NUL byte";
        else if (it->line == 1 && full >= 3 &&
                 memcmp(start, "\xEF\xBB\xBF", 3) == 0)
            it->bad = "starts the file with a UTF-8 byte order mark (EF BB BF): save it without one";
        /* Only what comes before a comment must fit: a long comment is fine. */
        else if (full >= sizeof it->buf && !(allow_comment && strchr(it->buf, '#')))
            it->bad = "is longer than 511 bytes";
        if (it->bad)
            return it->buf;
        if (allow_comment) {
            char *hash = strchr(it->buf, '#');
            if (hash)
                *hash = '\0';
        }
        char *s = it->buf;
        while (*s == ' ' || *s == '\t')
            s++;
        size_t n = strlen(s);
        while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
            s[--n] = '\0';
        if (*s)
            return s;
    }
    return NULL;
}

/* "PATH:LINE: line ..." when the line next_line returned cannot be read. */
static int line_bad(const struct lines *it, const char *path, struct buf *err)
{
    if (!it->bad)
        return 0;
    buf_setf(err, "%s:%d: the line %s", path, it->line, it->bad);
    return -1;
}

/* Splits s into at most 3 blank-separated words; returns the count. */
static int words(char *s, char *w[3])
{
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(s, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
        if (n == 3)
            return 4;
        w[n++] = t;
    }
    return n;
}

static int batch_name_valid(const char *name)
{
    for (int i = 0; i < 5; i++)
        if (name[i] < '0' || name[i] > '9')
            return 0;
    if (name[5] != '-' || !name[6])
        return 0;
    for (const char *p = name + 6; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '-' || *p == '_' || *p == '+'))
            return 0;
    return 1;
}

int manifest_parse_batch(const char *name, const char *path, const char *text, size_t len,
                         struct batch *b, struct buf *err)
{
    memset(b, 0, sizeof *b);
    if (!batch_name_valid(name)) {
        buf_setf(err, "%s: '%s' is not a batch name (NNNNN-<release>)", path, name);
        return -1;
    }
    if (!(b->name = strdup(name)) || !(b->path = strdup(path)))
        goto oom;
    struct lines it = {.p = text, .end = text + len};
    char *s;
    while ((s = next_line(&it, 1))) {
        char *w[3];
        if (line_bad(&it, path, err))
            goto fail;
        int n = words(s, w);
        if (n < 1 || n > 2 || (n == 2 && strcmp(w[1], "retired") != 0)) {
            buf_setf(err, "%s:%d: malformed manifest line (expected '<slug>' or '<slug> retired')",
                     path, it.line);
            goto fail;
        }
        if (!slug_valid(w[0])) {
            buf_setf(err, "%s:%d: '%s' is not a valid slug", path, it.line, w[0]);
            goto fail;
        }
        struct batch_entry *ne = mem_grow(b->e, b->n + 1, sizeof *ne);
        if (!ne)
            goto oom;
        b->e = ne;
        if (!(ne[b->n].slug = strdup(w[0])))
            goto oom;
        ne[b->n].retired = n == 2;
        ne[b->n].line = it.line;
        b->n++;
    }
    return 0;
oom:
    buf_setf(err, "%s: out of memory", path);
fail:
    for (size_t i = 0; i < b->n; i++)
        free(b->e[i].slug);
    free(b->e);
    free(b->name);
    free(b->path);
    memset(b, 0, sizeof *b);
    return -1;
}

int manifest_load(const char *dir, struct manifest *m, struct buf *err)
{
    memset(m, 0, sizeof *m);
    char **names;
    size_t n;
    if (util_list_dir_all(dir, &names, &n) != 0) {
        buf_setf(err, "%s: %s (generate the manifest with 'cozy-migrate order')", dir,
                 strerror(errno));
        return -1;
    }
    int rc = 0;
    if (n && !(m->b = calloc(n, sizeof *m->b))) {
        rc = -1;
        buf_setf(err, "%s: out of memory", dir);
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (names[i][0] == '.') {
            buf_setf(err, "%s: not a batch file (NNNNN-<release>): order.d/ holds "
                     "nothing else, dotfiles included", path);
            rc = -1;
            break;
        }
        size_t len;
        char *text = util_read_file(path, &len);
        if (!text) {
            buf_setf(err, "%s: %s", path, strerror(errno));
            rc = -1;
            break;
        }
        rc = manifest_parse_batch(names[i], path, text, len, &m->b[m->n], err);
        free(text);
        if (rc == 0)
            m->n++;
    }
    util_free_names(names, n);
    if (rc != 0)
        manifest_free(m);
    return rc;
}

void manifest_free(struct manifest *m)
{
    for (size_t i = 0; i < m->n; i++) {
        for (size_t j = 0; j < m->b[i].n; j++)
            free(m->b[i].e[j].slug);
        free(m->b[i].e);
        free(m->b[i].name);
        free(m->b[i].path);
    }
    free(m->b);
    memset(m, 0, sizeof *m);
}

void slug_list_free(struct slug_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->slug[i]);
    free(l->slug);
    free(l->line);
    memset(l, 0, sizeof *l);
}

int revoked_parse(const char *path, const char *text, size_t len, struct slug_list *l,
                  struct buf *err)
{
    memset(l, 0, sizeof *l);
    struct lines it = {.p = text, .end = text + len};
    char *s;
    while ((s = next_line(&it, 1))) {
        char *w[3];
        if (line_bad(&it, path, err)) {
            slug_list_free(l);
            return -1;
        }
        int n = words(s, w);
        if (n != 1) {
            buf_setf(err, "%s:%d: expected one slug per line", path, it.line);
            slug_list_free(l);
            return -1;
        }
        if (!slug_valid(w[0])) {
            buf_setf(err, "%s:%d: '%s' is not a valid slug (lower-case letters, digits "
                     "and single dashes, at most %d characters)", path, it.line, w[0], SLUG_MAX);
            slug_list_free(l);
            return -1;
        }
        for (size_t i = 0; i < l->n; i++) {
            if (strcmp(l->slug[i], w[0]) == 0) {
                buf_setf(err, "%s:%d: '%s' is already revoked at line %d", path, it.line,
                         w[0], l->line[i]);
                slug_list_free(l);
                return -1;
            }
        }
        char **ns = mem_grow(l->slug, l->n + 1, sizeof *ns);
        if (ns)
            l->slug = ns;
        int *nl = mem_grow(l->line, l->n + 1, sizeof *nl);
        if (nl)
            l->line = nl;
        if (!ns || !nl || !(l->slug[l->n] = strdup(w[0]))) {
            buf_setf(err, "%s: out of memory", path);
            slug_list_free(l);
            return -1;
        }
        l->line[l->n++] = it.line;
    }
    return 0;
}

/* Reads a whole optional file: 1 = read, 0 = absent, -1 = error. */
static int read_optional(const char *path, char **text, size_t *len, struct buf *err)
{
    *text = util_read_file(path, len);
    if (*text)
        return 1;
    if (errno == ENOENT)
        return 0;
    buf_setf(err, "%s: %s", path, strerror(errno));
    return -1;
}

int revoked_load(const char *path, struct slug_list *l, struct buf *err)
{
    char *text;
    size_t len;
    memset(l, 0, sizeof *l);
    int r = read_optional(path, &text, &len, err);
    if (r < 0)
        return r;
    /* Absent is not "nothing revoked": a tree packaged without the list
     * would run the slugs it names. */
    if (r == 0) {
        buf_setf(err, "%s: missing: a packaged tree has this file (empty when nothing is "
                 "revoked; 'cozy-migrate new' creates it)", path);
        return -1;
    }
    int rc = revoked_parse(path, text, len, l, err);
    free(text);
    return rc;
}

void legacy_map_free(struct legacy_map *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->e[i].slug);
    free(m->e);
    memset(m, 0, sizeof *m);
}

int legacy_map_parse(const char *path, const char *text, size_t len, struct legacy_map *m,
                     struct buf *err)
{
    memset(m, 0, sizeof *m);
    struct lines it = {.p = text, .end = text + len};
    char *s;
    while ((s = next_line(&it, 1))) {
        char *w[3];
        if (line_bad(&it, path, err)) {
            legacy_map_free(m);
            return -1;
        }
        int n = words(s, w);
        long num = 0;
        if (n != 2 || parse_decimal(w[0], LEGACY_NUMBER_MAX, &num) != 0 || num < 1) {
            buf_setf(err, "%s:%d: expected '<number> <slug>', the number decimal from 1 to %d",
                     path, it.line, LEGACY_NUMBER_MAX);
            legacy_map_free(m);
            return -1;
        }
        if (!slug_valid(w[1])) {
            buf_setf(err, "%s:%d: '%s' is not a valid slug", path, it.line, w[1]);
            legacy_map_free(m);
            return -1;
        }
        for (size_t i = 0; i < m->n; i++) {
            if (strcmp(m->e[i].slug, w[1]) == 0 || m->e[i].number == num) {
                buf_setf(err, "%s:%d: %s repeats line %d", path, it.line,
                         m->e[i].number == num ? "the number" : "the slug", m->e[i].line);
                legacy_map_free(m);
                return -1;
            }
        }
        if (m->n && num < m->e[m->n - 1].number) {
            buf_setf(err, "%s:%d: %ld comes after %ld: the map must be in order", path,
                     it.line, num, m->e[m->n - 1].number);
            legacy_map_free(m);
            return -1;
        }
        struct legacy_entry *ne = mem_grow(m->e, m->n + 1, sizeof *ne);
        if (!ne || !(ne[m->n].slug = strdup(w[1]))) {
            if (ne)
                m->e = ne;
            buf_setf(err, "%s: out of memory", path);
            legacy_map_free(m);
            return -1;
        }
        m->e = ne;
        ne[m->n].number = num;
        ne[m->n].line = it.line;
        m->n++;
    }
    return 0;
}

int legacy_map_load(const char *path, struct legacy_map *m, struct buf *err)
{
    char *text;
    size_t len;
    memset(m, 0, sizeof *m);
    int r = read_optional(path, &text, &len, err);
    if (r <= 0)
        return r;
    int rc = legacy_map_parse(path, text, len, m, err);
    free(text);
    return rc;
}

void digest_list_free(struct digest_list *d)
{
    for (size_t i = 0; i < d->n; i++)
        free(d->e[i].path);
    free(d->e);
    memset(d, 0, sizeof *d);
}

const struct digest_entry *digest_list_find(const struct digest_list *d, const char *path)
{
    for (size_t i = 0; i < d->n; i++)
        if (strcmp(d->e[i].path, path) == 0)
            return &d->e[i];
    return NULL;
}

/* A path as the list may name one: relative, every component a plain name. */
static int digest_path_ok(const char *p)
{
    if (!*p || *p == '/' || strchr(p, '\\'))
        return 0;
    for (const char *c = p; *c;) {
        size_t n = strcspn(c, "/");
        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return 0;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)c[i] < 0x20 || c[i] == 0x7f)
                return 0;
        c += n;
        if (*c == '/' && !*++c)
            return 0;
    }
    return 1;
}

int digest_list_parse(const char *path, const char *text, size_t len, struct digest_list *d,
                      struct buf *err)
{
    memset(d, 0, sizeof *d);
    struct lines it = {.p = text, .end = text + len};
    int last = 0;
    char *s;
    while ((s = next_line(&it, 0))) {
        if (line_bad(&it, path, err)) {
            digest_list_free(d);
            return -1;
        }
        /* sha256sum writes no blank line: one here was put by hand */
        if (it.line != last + 1) {
            buf_setf(err, "%s:%d: a blank line: the list is sha256sum's output, one "
                     "'<sha256>  <path>' a line", path, last + 1);
            digest_list_free(d);
            return -1;
        }
        last = it.line;
        size_t hexn = strspn(s, "0123456789abcdef");
        const char *p = s + 64;
        if (hexn != 64 || p[0] != ' ' || (p[1] != ' ' && p[1] != '*') || !digest_path_ok(p + 2)) {
            buf_setf(err, "%s:%d: expected '<sha256>  <path>' (64 lower-case hex digits, "
                     "two spaces, a path inside legacy-sh/), as sha256sum writes it", path, it.line);
            digest_list_free(d);
            return -1;
        }
        p += 2;
        const struct digest_entry *dup = digest_list_find(d, p);
        if (dup) {
            buf_setf(err, "%s:%d: %s repeats line %d", path, it.line, p, dup->line);
            digest_list_free(d);
            return -1;
        }
        struct digest_entry *ne = mem_grow(d->e, d->n + 1, sizeof *ne);
        if (!ne || !(ne[d->n].path = strdup(p))) {
            if (ne)
                d->e = ne;
            buf_setf(err, "%s: out of memory", path);
            digest_list_free(d);
            return -1;
        }
        d->e = ne;
        memcpy(ne[d->n].sha256, s, 64);
        ne[d->n].sha256[64] = '\0';
        ne[d->n].line = it.line;
        d->n++;
    }
    return 0;
}

int digest_list_load(const char *path, struct digest_list *d, int *present, struct buf *err)
{
    char *text;
    size_t len;
    memset(d, 0, sizeof *d);
    int r = read_optional(path, &text, &len, err);
    *present = r > 0;
    if (r <= 0)
        return r;
    int rc = digest_list_parse(path, text, len, d, err);
    free(text);
    return rc;
}

/* gitread.c: reads git for the release commands (order, lint, new).
 *
 * Owns the release tag grammar (vX.Y.Z, vX.Y.Z-rc.N) and its order, the
 * parsing of `git ls-tree -r -z` output, and every git invocation: plumbing
 * commands only, argv only (tool.c), paths given relative to the tree root
 * the user named. Must never write to the repository, never read the
 * working tree except to hash a working file, and never guess: a git
 * failure is an error carrying git's own first line.
 * Prefixes: git_ (every git invocation). */
#include "release/gitread.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/mem.h"
#include "release/tool.h"

/* A decimal number without leading zeros (a lone 0 is fine), < 10^9. */
static const char *number(const char *p, long *out)
{
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9'))
        return NULL;
    long n = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (++digits > 9)
            return NULL;
        n = n * 10 + (*p - '0');
    }
    *out = n;
    return p;
}

int release_version_parse(const char *tag, struct release_version *v)
{
    memset(v, 0, sizeof *v);
    const char *p = tag;
    if (*p++ != 'v')
        return -1;
    if (!(p = number(p, &v->major)) || *p++ != '.' || !(p = number(p, &v->minor)) ||
        *p++ != '.' || !(p = number(p, &v->patch)))
        return -1;
    if (!*p)
        return 0;
    if (strncmp(p, "-rc.", 4) != 0 || !(p = number(p + 4, &v->rc)) || *p || v->rc < 1)
        return -1;
    return 0;
}

static int cmp_long(long a, long b) { return a < b ? -1 : a > b; }

int release_version_cmp(const struct release_version *a, const struct release_version *b)
{
    int c;
    if ((c = cmp_long(a->major, b->major)) || (c = cmp_long(a->minor, b->minor)) ||
        (c = cmp_long(a->patch, b->patch)))
        return c;
    /* The release itself (rc 0) comes after every candidate. */
    if (a->rc == b->rc)
        return 0;
    if (a->rc == 0)
        return 1;
    if (b->rc == 0)
        return -1;
    return cmp_long(a->rc, b->rc);
}

/* Runs git -C dir ARGS; 0 with the output in res, or -1 with err. */
static int git(const struct git_repo *g, const char *dir, const char *const *args,
               struct tool_result *res, struct buf *err)
{
    const char *argv[32];
    size_t n = 0;
    argv[n++] = "git";
    argv[n++] = "-C";
    argv[n++] = g ? g->dir : dir;
    /* Output must not depend on the user's configuration. */
    argv[n++] = "-c";
    argv[n++] = "core.quotepath=off";
    for (size_t i = 0; args[i] && n < 31; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    if (tool_run(argv, NULL, res) != 0) {
        buf_setf(err, "%s", res->not_found ? "git is not installed" : "cannot run git");
        return res->not_found ? GIT_MISSING : GIT_ERROR;
    }
    if (res->status != 0) {
        /* git's own first line, whole */
        int l = res->err ? (int)strcspn(res->err, "\n") : 0;
        if (l)
            buf_setf(err, "git %s: %.*s", args[0], l, res->err);
        else
            buf_setf(err, "git %s: failed", args[0]);
        tool_result_free(res);
        return GIT_ERROR;
    }
    return GIT_OK;
}

static void chomp(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
}

int git_open(const char *dir, struct git_repo *g, struct buf *err)
{
    memset(g, 0, sizeof *g);
    struct tool_result res;
    static const char *const args[] = {"rev-parse", "--show-prefix", NULL};
    int rc = git(NULL, dir, args, &res, err);
    if (rc == GIT_MISSING)
        return rc;
    if (rc != GIT_OK) {
        buf_setf(err, "%s: not in a git repository", dir);
        return GIT_NOT_REPO;
    }
    chomp(res.out);
    g->dir = strdup(dir);
    g->prefix = strdup(res.out);
    tool_result_free(&res);
    if (!g->dir || !g->prefix) {
        git_close(g);
        buf_setf(err, "out of memory");
        return GIT_ERROR;
    }
    return GIT_OK;
}

void git_close(struct git_repo *g)
{
    free(g->dir);
    free(g->prefix);
    memset(g, 0, sizeof *g);
}

int git_is_shallow(const struct git_repo *g, struct buf *err)
{
    struct tool_result res;
    static const char *const args[] = {"rev-parse", "--is-shallow-repository", NULL};
    if (git(g, NULL, args, &res, err) != GIT_OK)
        return -1;
    chomp(res.out);
    int r = strcmp(res.out, "true") == 0 ? 1 : strcmp(res.out, "false") == 0 ? 0 : -1;
    if (r < 0)
        buf_setf(err, "git rev-parse --is-shallow-repository: unexpected '%s'", res.out);
    tool_result_free(&res);
    return r;
}

int git_has_remote(const struct git_repo *g, struct buf *err)
{
    struct tool_result res;
    static const char *const args[] = {"remote", NULL};
    if (git(g, NULL, args, &res, err) != GIT_OK)
        return -1;
    int r = res.out_len > 0 && res.out[0] != '\n';
    tool_result_free(&res);
    return r;
}

int git_commit_of(const struct git_repo *g, const char *rev, char oid[65], struct buf *err)
{
    char spec[512];
    snprintf(spec, sizeof spec, "%s^{commit}", rev);
    const char *args[] = {"rev-parse", "--verify", "--quiet", "--end-of-options", spec, NULL};
    struct tool_result res;
    if (git(g, NULL, args, &res, err) != GIT_OK) {
        buf_setf(err, "%s: '%s' is not a commit in this repository", g->dir, rev);
        return -1;
    }
    chomp(res.out);
    snprintf(oid, 65, "%s", res.out);
    tool_result_free(&res);
    return 0;
}

void git_release_tags_free(struct rtag *tags, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(tags[i].name);
    free(tags);
}

static int cmp_rtag(const void *a, const void *b)
{
    const struct rtag *x = a, *y = b;
    int c = release_version_cmp(&x->v, &y->v);
    return c ? c : strcmp(x->name, y->name);
}

int git_release_tags(const struct git_repo *g, const char *merged, const char *points_at,
                     struct rtag **tags, size_t *n, struct buf *err)
{
    *tags = NULL;
    *n = 0;
    char m[600], p[600];
    const char *args[8];
    size_t a = 0;
    args[a++] = "for-each-ref";
    args[a++] = "--format=%(refname:strip=2)";
    if (merged) {
        snprintf(m, sizeof m, "--merged=%s", merged);
        args[a++] = m;
    }
    if (points_at) {
        snprintf(p, sizeof p, "--points-at=%s", points_at);
        args[a++] = p;
    }
    args[a++] = "refs/tags/";
    args[a] = NULL;
    struct tool_result res;
    if (git(g, NULL, args, &res, err) != GIT_OK)
        return -1;
    int rc = 0;
    char *save = NULL;
    for (char *line = strtok_r(res.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        struct release_version v;
        if (release_version_parse(line, &v) != 0)
            continue;
        struct rtag *nt = mem_grow(*tags, *n + 1, sizeof *nt);
        if (!nt || !(nt[*n].name = strdup(line))) {
            if (nt)
                *tags = nt;
            buf_setf(err, "out of memory");
            rc = -1;
            break;
        }
        *tags = nt;
        nt[*n].v = v;
        (*n)++;
    }
    tool_result_free(&res);
    if (rc != 0) {
        git_release_tags_free(*tags, *n);
        *tags = NULL;
        *n = 0;
        return -1;
    }
    if (*n > 1)
        qsort(*tags, *n, sizeof **tags, cmp_rtag);
    return 0;
}

void git_entries_free(struct git_entry *e, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(e[i].path);
    free(e);
}

int git_tree_parse(const char *buf, size_t len, struct git_entry **e, size_t *n, struct buf *err)
{
    *e = NULL;
    *n = 0;
    const char *p = buf, *end = buf + len;
    while (p < end) {
        const char *z = memchr(p, '\0', (size_t)(end - p));
        if (!z) {
            buf_setf(err, "git ls-tree: an entry is not NUL-terminated");
            goto fail;
        }
        const char *tab = memchr(p, '\t', (size_t)(z - p));
        const char *sp1 = tab ? memchr(p, ' ', (size_t)(tab - p)) : NULL;
        const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(tab - sp1 - 1)) : NULL;
        size_t oidlen = sp2 ? (size_t)(tab - sp2 - 1) : 0;
        if (!sp2 || tab == z - 1 || (oidlen != 40 && oidlen != 64)) {
            buf_setf(err, "git ls-tree: malformed entry");
            goto fail;
        }
        for (const char *c = sp2 + 1; c < tab; c++)
            if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f'))) {
                buf_setf(err, "git ls-tree: malformed object id");
                goto fail;
            }
        if ((size_t)(sp2 - sp1 - 1) == 4 && memcmp(sp1 + 1, "blob", 4) == 0) {
            struct git_entry *ne = mem_grow(*e, *n + 1, sizeof *ne);
            if (!ne) {
                buf_setf(err, "out of memory");
                goto fail;
            }
            *e = ne;
            if (!(ne[*n].path = strndup(tab + 1, (size_t)(z - tab - 1)))) {
                buf_setf(err, "out of memory");
                goto fail;
            }
            memcpy(ne[*n].oid, sp2 + 1, oidlen);
            ne[*n].oid[oidlen] = '\0';
            (*n)++;
        }
        p = z + 1;
    }
    return 0;
fail:
    git_entries_free(*e, *n);
    *e = NULL;
    *n = 0;
    return -1;
}

int git_ls_tree(const struct git_repo *g, const char *rev, const char *const *paths,
                struct git_entry **e, size_t *n, struct buf *err)
{
    *e = NULL;
    *n = 0;
    const char *args[32];
    char *owned[24];
    size_t a = 0, no = 0;
    args[a++] = "ls-tree";
    args[a++] = "-r";
    args[a++] = "-z";
    args[a++] = "--full-tree";
    args[a++] = "--end-of-options";
    args[a++] = rev;
    args[a++] = "--";
    int rc = 0;
    for (size_t i = 0; paths[i] && no < 24 && a < 30; i++) {
        size_t l = strlen(g->prefix) + strlen(paths[i]) + 1;
        if (!(owned[no] = malloc(l))) {
            buf_setf(err, "out of memory");
            rc = -1;
            break;
        }
        snprintf(owned[no], l, "%s%s", g->prefix, paths[i]);
        args[a++] = owned[no++];
    }
    args[a] = NULL;
    struct tool_result res;
    if (rc == 0 && git(g, NULL, args, &res, err) != GIT_OK)
        rc = -1;
    for (size_t i = 0; i < no; i++)
        free(owned[i]);
    if (rc != 0)
        return -1;
    rc = git_tree_parse(res.out, res.out_len, e, n, err);
    tool_result_free(&res);
    if (rc != 0)
        return -1;
    size_t pl = strlen(g->prefix);
    for (size_t i = 0; i < *n && pl; i++) {
        char *p = (*e)[i].path;
        if (strncmp(p, g->prefix, pl) == 0)
            memmove(p, p + pl, strlen(p + pl) + 1);
    }
    return 0;
}

int git_blob(const struct git_repo *g, const char *oid, char **text, size_t *len, struct buf *err)
{
    const char *args[] = {"cat-file", "blob", oid, NULL};
    struct tool_result res;
    if (git(g, NULL, args, &res, err) != GIT_OK)
        return -1;
    *text = res.out;
    *len = res.out_len;
    mem_free(res.err);
    return 0;
}

int git_tracked(const struct git_repo *g, const char *path, size_t *count, struct buf *err)
{
    const char *args[] = {"ls-files", "-z", "--", path, NULL};
    struct tool_result res;
    if (git(g, NULL, args, &res, err) != GIT_OK)
        return -1;
    *count = 0;
    for (size_t i = 0; i < res.out_len; i++)
        if (res.out[i] == '\0')
            (*count)++;
    tool_result_free(&res);
    return 0;
}

int git_hash_files(const struct git_repo *g, const char *const *paths, size_t n, char (*oids)[65],
                   struct buf *err)
{
    /* A batch at a time keeps argv bounded. */
    for (size_t at = 0; at < n; at += 20) {
        const char *args[32];
        size_t a = 0;
        args[a++] = "hash-object";
        args[a++] = "--";
        size_t k = n - at < 20 ? n - at : 20;
        for (size_t i = 0; i < k; i++)
            args[a++] = paths[at + i];
        args[a] = NULL;
        struct tool_result res;
        if (git(g, NULL, args, &res, err) != GIT_OK)
            return -1;
        char *save = NULL, *line = strtok_r(res.out, "\n", &save);
        for (size_t i = 0; i < k; i++) {
            if (!line || (strlen(line) != 40 && strlen(line) != 64)) {
                buf_setf(err, "git hash-object: unexpected output");
                tool_result_free(&res);
                return -1;
            }
            snprintf(oids[at + i], 65, "%s", line);
            line = strtok_r(NULL, "\n", &save);
        }
        tool_result_free(&res);
    }
    return 0;
}

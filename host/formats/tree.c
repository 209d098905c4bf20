/* tree.c: loads the migrations tree and enforces its cross-file rules.
 *
 * Owns: finding scripts (migrations/<tier>/<slug>.lua, legacy-sh/<slug>.sh),
 * checksums, and every fatal packaging condition: a script in no batch, a
 * batch entry neither shipped nor retired, a slug in two batches or two
 * tiers, a bad header, a revoked or legacy slug the manifest does not know,
 * a `requires` on a slug that is absent, ordered later, itself, revoked or
 * in the other tier (a bad header only fails its own migration under
 * tree_load_with), a legacy script the legacy-map does not number or an
 * 00000-legacy batch that is not the map in its order, a missing
 * `revoked`, and any entry of a script directory that is not a readable
 * script (a subdirectory, a dotfile, a dangling or looping symlink, an
 * unreadable file), or shared code (the stdlib that runs, legacy-sh/lib/)
 * it cannot read. Must never touch
 * the cluster: this runs before the lock, and a bad tree exits before any
 * script runs.
 * Prefixes: sha256_ (the tree's checksums). */
#include "formats/tree.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "base/mem.h"
#include "base/paths.h"
#include "base/util.h"

static void hex(const unsigned char *d, unsigned n, char out[65])
{
    static const char x[] = "0123456789abcdef";
    for (unsigned i = 0; i < n && i < 32; i++) {
        out[2 * i] = x[d[i] >> 4];
        out[2 * i + 1] = x[d[i] & 15];
    }
    out[64] = '\0';
}

int sha256_text(const char *buf, size_t len, char out[65])
{
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned dn = 0;
    if (!EVP_Digest(buf, len, d, &dn, EVP_sha256(), NULL))
        return -1;
    hex(d, dn, out);
    return 0;
}

int sha256_file(const char *path, char out[65])
{
    size_t len;
    char *buf = util_read_file(path, &len);
    if (!buf)
        return -1;
    int rc = sha256_text(buf, len, out);
    free(buf);
    return rc;
}

/* A script read once for both its header and its checksum. partial: a
 * header that does not parse is kept in m->header_err, not a failure. */
static int read_script(const char *path, int lua, int partial, struct migration *m, char *err,
                       size_t errlen)
{
    size_t len;
    char *text = util_read_file(path, &len);
    if (!text) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    int rc = header_parse(path, text, len, lua, &m->h, err, errlen);
    if (rc != 0 && partial) {
        if (!(m->header_err = strdup(err))) {
            snprintf(err, errlen, "out of memory");
            free(text);
            return -1;
        }
        *err = '\0';
        rc = 0;
    }
    if (rc == 0 && sha256_text(text, len, m->sha256) != 0) {
        snprintf(err, errlen, "%s: cannot compute its checksum", path);
        rc = -1;
    }
    free(text);
    return rc;
}

static int cmp_path(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Collects regular files below dir (relative paths) into *list. Anything
 * it cannot read (a dangling or looping symlink, a directory it may not
 * list, a file it may not open) fails, naming the path in err. */
static int list_files(const char *base, const char *rel, char ***list, size_t *n, char *err,
                size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s%s%s", base, *rel ? "/" : "", rel);
    char **names;
    size_t nn;
    /* Every file a script could source counts, dotfiles too. */
    if (util_list_dir_all(path, &names, &nn) != 0) {
        if (errno == ENOENT && !*rel)
            return 0;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < nn; i++) {
        char sub[4096], full[8200];
        snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", names[i]);
        snprintf(full, sizeof full, "%s/%s", base, sub);
        struct stat st;
        if (stat(full, &st) != 0) {
            snprintf(err, errlen, "%s: %s", full,
                     errno == ENOENT ? "dangling symlink" : errno == ELOOP ? "symlink loop"
                                                                           : strerror(errno));
            rc = -1;
        } else if (S_ISDIR(st.st_mode)) {
            rc = list_files(base, sub, list, n, err, errlen);
        } else if (S_ISREG(st.st_mode)) {
            char **nl = mem_grow(*list, *n + 1, sizeof *nl);
            if (!nl || !(nl[*n] = strdup(sub))) {
                if (nl)
                    *list = nl;
                snprintf(err, errlen, "out of memory");
                rc = -1;
            } else {
                *list = nl;
                (*n)++;
            }
        }
    }
    util_free_names(names, nn);
    return rc;
}
/* Hex sha256 of a directory's regular files (sorted relative paths and
 * contents). 0 on success. A missing directory's is the digest of nothing;
 * anything below it that cannot be read fails, with "PATH: why" in err. */
static int sha256_dir(const char *dir, char out[65], char *err, size_t errlen)
{
    char **list = NULL;
    size_t n = 0;
    int rc = list_files(dir, "", &list, &n, err, errlen);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (rc == 0 && (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL))) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    }
    /* Each directory's names come sorted, but "a/x" and "a-b" must sort as
     * whole paths, the same on every machine. */
    if (rc == 0 && n)
        qsort(list, n, sizeof *list, cmp_path);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char full[8200];
        snprintf(full, sizeof full, "%s/%s", dir, list[i]);
        size_t len;
        char *buf = util_read_file(full, &len);
        if (!buf) {
            snprintf(err, errlen, "%s: %s", full, strerror(errno));
            rc = -1;
        } else if (!EVP_DigestUpdate(ctx, list[i], strlen(list[i]) + 1) ||
                   !EVP_DigestUpdate(ctx, buf, len)) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
        }
        free(buf);
    }
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned dn = 0;
    if (rc == 0 && !EVP_DigestFinal_ex(ctx, d, &dn)) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    }
    if (rc == 0)
        hex(d, dn, out);
    EVP_MD_CTX_free(ctx);
    util_free_names(list, n);
    return rc;
}

int tree_list_files(const char *dir, char ***list, size_t *n, char *err, size_t errlen)
{
    *list = NULL;
    *n = 0;
    int rc = list_files(dir, "", list, n, err, errlen);
    if (rc == 0 && *n > 1)
        qsort(*list, *n, sizeof **list, cmp_path);
    if (rc != 0) {
        util_free_names(*list, *n);
        *list = NULL;
        *n = 0;
    }
    return rc;
}

void tree_free(struct tree *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->m[i].slug);
        free(t->m[i].path);
        free(t->m[i].header_err);
        header_free(&t->m[i].h);
    }
    free(t->m);
    free(t->root);
    free(t->by_slug);
    free(t->places);
    manifest_free(&t->man);
    slug_list_free(&t->revoked);
    legacy_map_free(&t->legacy);
    memset(t, 0, sizeof *t);
}

const struct migration *tree_find(const struct tree *t, const char *slug)
{
    if (t->by_slug) {
        size_t lo = 0, hi = t->n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            int c = strcmp(t->by_slug[mid]->slug, slug);
            if (c == 0)
                return t->by_slug[mid];
            if (c < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        return NULL;
    }
    /* While the scripts are still being read (the index comes after). */
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->m[i].slug, slug) == 0)
            return &t->m[i];
    return NULL;
}

/* By slug, then in the order loaded, so of two scripts with one slug the
 * one read first comes first. */
static int cmp_by_slug(const void *a, const void *b)
{
    const struct migration *x = *(const struct migration *const *)a;
    const struct migration *y = *(const struct migration *const *)b;
    int c = strcmp(x->slug, y->slug);
    return c ? c : (x > y) - (x < y);
}

static int cmp_place(const void *a, const void *b)
{
    const struct tree_place *x = a, *y = b;
    int c = strcmp(x->slug, y->slug);
    return c ? c : (x->order > y->order) - (x->order < y->order);
}

static long locate(const struct tree *t, const char *slug, size_t *bi, size_t *ei);

long tree_locate(const struct tree *t, const char *slug, size_t *bi, size_t *ei)
{
    return locate(t, slug, bi, ei);
}

int tree_revoked(const struct tree *t, const char *slug)
{
    for (size_t i = 0; i < t->revoked.n; i++)
        if (strcmp(t->revoked.slug[i], slug) == 0)
            return 1;
    return 0;
}

int tree_scan_dir(const char *root, const char *rel, int shell, tree_visit_fn fn, void *ud,
                  char *err, size_t errlen)
{
    const char *ext = shell ? ".sh" : ".lua";
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", root, rel);
    char **all = NULL;
    size_t na = 0;
    if (util_list_dir_all(dir, &all, &na) != 0) {
        if (errno == ENOENT)
            return 0;
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        return -1;
    }
    char *keep = na ? calloc(na, 1) : NULL;
    if (na && !keep) {
        util_free_names(all, na);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = 0;
    char why[600], full[8200], relpath[4400];
    /* First every entry that is no file a script could be (or, in
     * legacy-sh/, lib/): nothing is passed over in silence. */
    for (size_t i = 0; rc == 0 && i < na; i++) {
        snprintf(full, sizeof full, "%s/%s", dir, all[i]);
        snprintf(relpath, sizeof relpath, "%s/%s", rel, all[i]);
        struct stat st;
        *why = '\0';
        if (all[i][0] == '.') {
            snprintf(why, sizeof why, "not a migration (a dotfile); %s/ holds only <slug>%s%s", rel,
                     ext, shell ? ", legacy-map, " LEGACY_DIGESTS " and lib/" : "");
        } else if (stat(full, &st) != 0) {
            struct stat lst;
            int link = lstat(full, &lst) == 0 && S_ISLNK(lst.st_mode);
            snprintf(why, sizeof why, "%s",
                     link && errno == ENOENT ? "dangling symlink"
                     : errno == ELOOP        ? "symlink loop"
                                             : strerror(errno));
        } else if (S_ISDIR(st.st_mode)) {
            if (!(shell && strcmp(all[i], "lib") == 0))
                snprintf(why, sizeof why, "a directory; migrations sit directly in %s/ as <slug>%s",
                         rel, ext);
        } else if (!S_ISREG(st.st_mode)) {
            snprintf(why, sizeof why, "not a regular file");
        } else {
            keep[i] = 1;
        }
        if (*why) {
            struct tree_entry e = {TREE_STRAY, full, relpath, all[i], "", why, 0};
            rc = fn(ud, &e);
        }
    }
    /* Then the regular files: each a <slug><ext> (legacy-sh/ also holds
     * legacy-map and the digest list of its import). */
    for (size_t i = 0; rc == 0 && i < na; i++) {
        if (!keep[i] || (shell && (strcmp(all[i], "legacy-map") == 0 ||
                                   strcmp(all[i], LEGACY_DIGESTS) == 0)))
            continue;
        snprintf(full, sizeof full, "%s/%s", dir, all[i]);
        snprintf(relpath, sizeof relpath, "%s/%s", rel, all[i]);
        struct tree_entry e = {TREE_SCRIPT, full, relpath, all[i], "", "", 0};
        if (!util_ends_with(all[i], ext)) {
            snprintf(why, sizeof why, "not a migration (expected <slug>%s)", ext);
            e.kind = TREE_STRAY;
            e.why = why;
            e.misnamed = 1;
        } else {
            snprintf(e.slug, sizeof e.slug, "%.*s", (int)(strlen(all[i]) - strlen(ext)), all[i]);
        }
        rc = fn(ud, &e);
    }
    free(keep);
    util_free_names(all, na);
    return rc;
}

struct loading {
    struct tree *t;
    const char *tier;
    int shell;
    int partial;
    char *err;
    size_t errlen;
};

/* The loader's visitor: a stray fails the load; a script is read, its slug
 * checked and its header parsed. */
static int load_entry(void *ud, const struct tree_entry *e)
{
    struct loading *ld = ud;
    struct tree *t = ld->t;
    if (e->kind == TREE_STRAY) {
        /* a file that is no script names its whole path; a misnamed one,
         * its path in the tree */
        snprintf(ld->err, ld->errlen, "%s: %s", e->misnamed ? e->rel : e->path, e->why);
        return -1;
    }
    if (!slug_valid(e->slug)) {
        snprintf(ld->err, ld->errlen,
                 "%s: '%s' is not a valid slug (lower-case letters, digits and single "
                 "dashes, at most %d characters)",
                 e->rel, e->slug, SLUG_MAX);
        return -1;
    }
    struct migration *nm = mem_grow(t->m, t->n + 1, sizeof *nm);
    if (!nm) {
        snprintf(ld->err, ld->errlen, "out of memory");
        return -1;
    }
    t->m = nm;
    struct migration *m = &t->m[t->n];
    memset(m, 0, sizeof *m);
    m->slug = strdup(e->slug);
    m->path = strdup(e->path);
    m->tier = ld->tier;
    m->is_shell = ld->shell;
    if (!m->slug || !m->path) {
        free(m->slug);
        free(m->path);
        snprintf(ld->err, ld->errlen, "out of memory");
        return -1;
    }
    t->n++;
    int rc = read_script(e->path, !ld->shell, ld->partial, m, ld->err, ld->errlen);
    if (rc == 0 && m->header_err)
        t->nbad++;
    return rc;
}

/* Adds every script of one directory. */
static int scan(struct tree *t, const char *rel, const char *tier, int shell, int partial,
                char *err, size_t errlen)
{
    struct loading ld = {t, tier, shell, partial, err, errlen};
    return tree_scan_dir(t->root, rel, shell, load_entry, &ld, err, errlen);
}

static int load_scripts(const char *root, struct tree *t, int partial, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    *err = '\0';
    if (!(t->root = strdup(root))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (scan(t, "migrations/pre-apply", "pre-apply", 0, partial, err, errlen) != 0 ||
        scan(t, "migrations/background", "background", 0, partial, err, errlen) != 0 ||
        scan(t, "legacy-sh", "pre-apply", 1, partial, err, errlen) != 0) {
        tree_free(t);
        return -1;
    }
    if (t->n && !(t->by_slug = malloc(t->n * sizeof *t->by_slug))) {
        snprintf(err, errlen, "out of memory");
        tree_free(t);
        return -1;
    }
    for (size_t i = 0; i < t->n; i++)
        t->by_slug[i] = &t->m[i];
    if (t->n)
        qsort(t->by_slug, t->n, sizeof *t->by_slug, cmp_by_slug);
    /* A slug shipped twice is found once all are read, next to each other in
     * the index: asking the growing list for each script made loading 2,000
     * scripts quadratic. */
    for (size_t i = 1; i < t->n; i++) {
        const struct migration *a = t->by_slug[i - 1], *b = t->by_slug[i];
        if (strcmp(a->slug, b->slug) == 0) {
            size_t skip = strlen(t->root) + 1;
            snprintf(err, errlen, "slug '%s' is shipped twice: %s and %s", a->slug, a->path,
                     strlen(b->path) > skip ? b->path + skip : b->path);
            tree_free(t);
            return -1;
        }
    }
    /* The shared code every record names by digest: what cannot be read
     * cannot be recorded, so it is a packaging error like a bad script.
     * For Lua that is the stdlib the sandbox loads (paths_stdlib), wherever
     * the tree is: a stdlib/ inside ROOT does not run and is not named. */
    char path[4096];
    int rc = sha256_dir(paths_stdlib(), t->lib_lua, err, errlen);
    if (rc == 0) {
        snprintf(path, sizeof path, "%s/legacy-sh/lib", root);
        rc = sha256_dir(path, t->lib_sh, err, errlen);
    }
    if (rc != 0)
        tree_free(t);
    return rc;
}

/* Indexes the manifest's entries by slug (places). 0, or -1 on memory. */
static int index_places(struct tree *t)
{
    size_t n = 0;
    for (size_t i = 0; i < t->man.n; i++)
        n += t->man.b[i].n;
    if (n && !(t->places = malloc(n * sizeof *t->places)))
        return -1;
    long order = 0;
    for (size_t i = 0; i < t->man.n; i++)
        for (size_t j = 0; j < t->man.b[i].n; j++, order++)
            t->places[order] = (struct tree_place){t->man.b[i].e[j].slug, i, j, order};
    t->nplaces = n;
    if (n)
        qsort(t->places, n, sizeof *t->places, cmp_place);
    return 0;
}

int tree_reindex(struct tree *t)
{
    free(t->by_slug);
    free(t->places);
    t->by_slug = NULL;
    t->places = NULL;
    t->nplaces = 0;
    if (t->n && !(t->by_slug = malloc(t->n * sizeof *t->by_slug)))
        return -1;
    for (size_t i = 0; i < t->n; i++)
        t->by_slug[i] = &t->m[i];
    if (t->n)
        qsort(t->by_slug, t->n, sizeof *t->by_slug, cmp_by_slug);
    return index_places(t);
}

/* Where a slug first sits in the manifest: batch index and entry, and its
 * position in the whole manifest; or -1. */
static long locate(const struct tree *t, const char *slug, size_t *bi, size_t *ei)
{
    if (!t->places)
        return -1;
    size_t lo = 0, hi = t->nplaces;
    while (lo < hi) { /* the first place whose slug is not below slug */
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(t->places[mid].slug, slug) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == t->nplaces || strcmp(t->places[lo].slug, slug) != 0)
        return -1;
    *bi = t->places[lo].batch;
    *ei = t->places[lo].entry;
    return t->places[lo].order;
}

/* Legacy packaging as the generator writes it: every legacy-sh/<slug>.sh has
 * its number in legacy-map, and order.d/00000-legacy is exactly the map's
 * slugs in its (numeric) order. Anything else would run a script the map
 * does not number, or run them out of order and stamp `version` backwards. */
static int validate_legacy(const struct tree *t, char *err, size_t errlen)
{
    for (size_t k = 0; k < t->n; k++) {
        const struct migration *m = &t->m[k];
        int mapped = 0;
        for (size_t i = 0; i < t->legacy.n && !mapped; i++)
            mapped = strcmp(t->legacy.e[i].slug, m->slug) == 0;
        if (m->is_shell && !mapped) {
            snprintf(err, errlen, "%s: '%s' is not in legacy-sh/legacy-map: every legacy script "
                     "has its old number there", m->path, m->slug);
            return -1;
        }
    }
    const struct batch *lb = NULL;
    for (size_t i = 0; i < t->man.n && !lb; i++)
        if (strcmp(t->man.b[i].name, LEGACY_BATCH) == 0)
            lb = &t->man.b[i];
    if (!lb && !t->legacy.n)
        return 0;
    if (!lb) {
        snprintf(err, errlen, "%s/legacy-sh/legacy-map: lists %zu legacy migration%s but the "
                 "manifest has no order.d/00000-legacy (generate it with 'cozy-migrate order')",
                 t->root, t->legacy.n, t->legacy.n == 1 ? "" : "s");
        return -1;
    }
    for (size_t i = 0; i < lb->n || i < t->legacy.n; i++) {
        const struct batch_entry *e = i < lb->n ? &lb->e[i] : NULL;
        const struct legacy_entry *le = i < t->legacy.n ? &t->legacy.e[i] : NULL;
        if (e && le && strcmp(e->slug, le->slug) == 0)
            continue;
        if (!le)
            snprintf(err, errlen, "%s:%d: '%s' is not in legacy-sh/legacy-map: 00000-legacy holds "
                     "the map's slugs and nothing else", lb->path, e->line, e->slug);
        else if (!e)
            snprintf(err, errlen, "%s: ends before '%s' (legacy-map line %d, number %ld): "
                     "00000-legacy holds every slug of the map, in its order", lb->path,
                     le->slug, le->line, le->number);
        else
            snprintf(err, errlen, "%s:%d: '%s' where legacy-map has '%s' (line %d, number %ld): "
                     "00000-legacy lists the map's slugs in its numeric order", lb->path, e->line,
                     e->slug, le->slug, le->line, le->number);
        return -1;
    }
    return 0;
}

static int validate(struct tree *t, char *err, size_t errlen)
{
    struct manifest *man = &t->man;
    /* Every entry once, and shipped unless retired. */
    for (size_t i = 0; i < man->n; i++) {
        for (size_t j = 0; j < man->b[i].n; j++) {
            const struct batch_entry *e = &man->b[i].e[j];
            size_t bi, ei;
            locate(t, e->slug, &bi, &ei);
            if (bi != i || ei != j) {
                snprintf(err, errlen, "%s:%d: slug '%s' is already listed at %s:%d", man->b[i].path,
                         e->line, e->slug, man->b[bi].path, man->b[bi].e[ei].line);
                return -1;
            }
            const struct migration *m = tree_find(t, e->slug);
            if (!m && !e->retired) {
                snprintf(err, errlen, "%s:%d: '%s' is neither shipped nor retired", man->b[i].path,
                         e->line, e->slug);
                return -1;
            }
            if (m && e->retired) {
                snprintf(err, errlen, "%s:%d: '%s' is marked retired but %s is shipped",
                         man->b[i].path, e->line, e->slug, m->path);
                return -1;
            }
        }
    }
    for (size_t k = 0; k < t->n; k++) {
        struct migration *m = &t->m[k];
        size_t bi, ei;
        long order = locate(t, m->slug, &bi, &ei);
        if (order < 0) {
            snprintf(err, errlen, "%s: slug '%s' is in no batch of the manifest: `cozy-migrate "
                     "order` makes migrations/order.d from HEAD, so commit the script, then run "
                     "order again (a --local run needs neither: it puts what no commit carries "
                     "in the untagged batch)", m->path, m->slug);
            return -1;
        }
        m->batch = bi;
        m->order = (size_t)order;
    }
    for (size_t k = 0; k < t->n; k++) {
        const struct migration *m = &t->m[k];
        for (size_t r = 0; r < m->h.nrequires; r++) {
            size_t bi, ei;
            long order = locate(t, m->h.requires[r], &bi, &ei);
            if (order < 0) {
                snprintf(err, errlen, "%s: requires '%s', which is in no batch", m->path,
                         m->h.requires[r]);
                return -1;
            }
            if ((size_t)order > m->order) {
                snprintf(err, errlen, "%s: requires '%s', which runs after it (%s)", m->path,
                         m->h.requires[r], man->b[bi].name);
                return -1;
            }
            if (strcmp(m->h.requires[r], m->slug) == 0) {
                snprintf(err, errlen, "%s: requires '%s', itself", m->path, m->slug);
                return -1;
            }
            if (tree_revoked(t, m->h.requires[r])) {
                snprintf(err, errlen, "%s: requires '%s', which is revoked and never runs",
                         m->path, m->h.requires[r]);
                return -1;
            }
            const struct migration *req = tree_find(t, m->h.requires[r]);
            if (req && strcmp(req->tier, m->tier) != 0) {
                snprintf(err, errlen, "%s: requires '%s', which is in the %s tier, not %s",
                         m->path, m->h.requires[r], req->tier, m->tier);
                return -1;
            }
        }
    }
    for (size_t i = 0; i < t->revoked.n; i++) {
        size_t bi, ei;
        if (locate(t, t->revoked.slug[i], &bi, &ei) < 0) {
            snprintf(err, errlen, "%s/migrations/revoked:%d: revoked slug '%s' is in no batch",
                     t->root, t->revoked.line[i], t->revoked.slug[i]);
            return -1;
        }
    }
    for (size_t i = 0; i < t->legacy.n; i++) {
        size_t bi, ei;
        const char *slug = t->legacy.e[i].slug;
        if (locate(t, slug, &bi, &ei) < 0) {
            snprintf(err, errlen, "%s/legacy-sh/legacy-map:%d: legacy slug '%s' is in no batch",
                     t->root, t->legacy.e[i].line, slug);
            return -1;
        }
        const struct migration *m = tree_find(t, slug);
        if (m && !m->is_shell) {
            snprintf(err, errlen, "%s/legacy-sh/legacy-map:%d: '%s' is not a legacy shell script",
                     t->root, t->legacy.e[i].line, slug);
            return -1;
        }
    }
    return validate_legacy(t, err, errlen);
}

const char *tree_order_d(const char *root, char *buf, size_t len)
{
    snprintf(buf, len, "%s/migrations/order.d", root);
    return buf;
}

/* A copy of m (0, or -1 when out of memory, dst then empty). */
static int manifest_copy(struct manifest *dst, const struct manifest *m)
{
    memset(dst, 0, sizeof *dst);
    if (m->n && !(dst->b = calloc(m->n, sizeof *dst->b)))
        return -1;
    for (size_t b = 0; b < m->n; b++, dst->n++) {
        struct batch *d = &dst->b[b];
        const struct batch *sb = &m->b[b];
        if (!(d->name = strdup(sb->name)) || !(d->path = strdup(sb->path)) ||
            (sb->n && !(d->e = calloc(sb->n, sizeof *d->e)))) {
            dst->n++;
            manifest_free(dst);
            return -1;
        }
        for (size_t i = 0; i < sb->n; i++, d->n++) {
            d->e[i] = sb->e[i];
            if (!(d->e[i].slug = strdup(sb->e[i].slug))) {
                dst->n++;
                manifest_free(dst);
                return -1;
            }
        }
    }
    return 0;
}

int tree_load_scripts(const char *root, struct tree *t, char *err, size_t errlen)
{
    return load_scripts(root, t, 0, err, errlen);
}

const struct migration *tree_first_bad(const struct tree *t)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->m[i].header_err)
            return &t->m[i];
    return NULL;
}

static int load(const char *root, const struct manifest *m, struct tree *t, int partial,
                char *err, size_t errlen)
{
    if (load_scripts(root, t, partial, err, errlen) != 0)
        return -1;
    char path[4096];
    /* manifest.h says why in a buffer; tree.h's callers still read a char[] */
    struct buf why = BUF_INIT;
    int rc = m ? manifest_copy(&t->man, m) : manifest_load(tree_order_d(root, path, sizeof path),
                                                          &t->man, &why);
    if (rc != 0 && m)
        buf_setf(&why, "out of memory");
    if (rc == 0) {
        snprintf(path, sizeof path, "%s/migrations/revoked", root);
        rc = revoked_load(path, &t->revoked, &why);
    }
    if (rc == 0) {
        snprintf(path, sizeof path, "%s/legacy-sh/legacy-map", root);
        rc = legacy_map_load(path, &t->legacy, &why);
    }
    if (rc != 0)
        snprintf(err, errlen, "%s", buf_str(&why));
    buf_release(&why);
    if (rc == 0)
        rc = index_places(t) == 0 ? validate(t, err, errlen)
                                  : (snprintf(err, errlen, "out of memory"), -1);
    if (rc != 0)
        tree_free(t);
    return rc;
}

int tree_load(const char *root, struct tree *t, char *err, size_t errlen)
{
    return load(root, NULL, t, 0, err, errlen);
}

int tree_load_with(const char *root, const struct manifest *m, struct tree *t, char *err,
                   size_t errlen)
{
    return load(root, m, t, 1, err, errlen);
}

/* order_walk.c: the tag walk of the manifest generator (order.h).
 *
 * Owns which release tags form this line (those reachable from the
 * revision, from the first whose tree has the engine's layout), which
 * gaps in it are worth a word (one a fetch could fill), and for each slug
 * the first and last tag that carry it, read from each tag's tree through
 * git objects (gitread.c) alone. order.c makes the batches from what it
 * finds. Must never read the working tree: the same revision always gives
 * the same walk. */
#include "release/order.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/exitcodes.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/util.h"
#include "formats/manifest.h"

static const char *const script_dirs[] = {"migrations/pre-apply", "migrations/background",
                                          "legacy-sh", NULL};

void order_rev_scripts_free(struct rev_script *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(s[i].slug);
        free(s[i].path);
    }
    free(s);
}

const struct rev_script *order_rev_script_find(const struct rev_script *s, size_t n, const char *slug)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s[i].slug, slug) == 0)
            return &s[i];
    return NULL;
}

int order_scripts_at(const struct git_repo *g, const char *rev, struct rev_script **out,
                     size_t *nout, struct buf *err)
{
    *out = NULL;
    *nout = 0;
    struct git_entry *e;
    size_t n;
    if (git_ls_tree(g, rev, script_dirs, &e, &n, err) != 0)
        return EXIT_HISTORY;
    int rc = 0;
    struct rev_script *s = NULL;
    size_t ns = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const char *path = e[i].path, *name = NULL, *tier = NULL, *ext = NULL;
        for (int d = 0; script_dirs[d]; d++) {
            size_t l = strlen(script_dirs[d]);
            if (strncmp(path, script_dirs[d], l) == 0 && path[l] == '/') {
                name = path + l + 1;
                tier = d == 0 ? "pre-apply" : d == 1 ? "background" : "legacy";
                ext = d == 2 ? ".sh" : ".lua";
            }
        }
        /* lib/, nested directories, dotfiles; legacy-sh/ also holds
         * legacy-map and whatever else its scripts need. */
        if (!name || strchr(name, '/') || name[0] == '.')
            continue;
        if (!util_ends_with(name, ext)) {
            if (strcmp(tier, "legacy") == 0)
                continue;
            buf_setf(err, "%s:%s: not a migration (expected <slug>%s)", rev, path, ext);
            rc = EXIT_PACKAGING;
            break;
        }
        char slug[256];
        snprintf(slug, sizeof slug, "%.*s", (int)(strlen(name) - strlen(ext)), name);
        if (!slug_valid(slug)) {
            buf_setf(err, "%s:%s: '%s' is not a valid slug (lower-case letters, digits and single "
                     "dashes, at most %d characters)",
                     rev, path, slug, SLUG_MAX);
            rc = EXIT_PACKAGING;
            break;
        }
        const struct rev_script *dup = order_rev_script_find(s, ns, slug);
        if (dup) {
            buf_setf(err, "%s: slug '%s' is shipped twice: %s and %s", rev, slug,
                     dup->path, path);
            rc = EXIT_PACKAGING;
            break;
        }
        struct rev_script *nsn = mem_grow(s, ns + 1, sizeof *nsn);
        if (!nsn) {
            rc = EXIT_FAILED;
            buf_setf(err, "out of memory");
            break;
        }
        s = nsn;
        s[ns].slug = strdup(slug);
        s[ns].path = strdup(path);
        s[ns].tier = tier;
        snprintf(s[ns].oid, sizeof s[ns].oid, "%s", e[i].oid);
        ns++;
        if (!s[ns - 1].slug || !s[ns - 1].path) {
            rc = EXIT_FAILED;
            buf_setf(err, "out of memory");
        }
    }
    git_entries_free(e, n);
    if (rc != 0) {
        order_rev_scripts_free(s, ns);
        return rc;
    }
    *out = s;
    *nout = ns;
    return 0;
}

void order_walk_free(struct walk *w)
{
    git_release_tags_free(w->tags, w->ntags);
    for (size_t i = 0; i < w->n; i++) {
        free(w->s[i].slug);
        free(w->s[i].path);
    }
    free(w->s);
    order_rev_scripts_free(w->at, w->nat);
    memset(w, 0, sizeof *w);
}

const struct walk_slug *order_walk_find(const struct walk *w, const char *slug)
{
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->s[i].slug, slug) == 0)
            return &w->s[i];
    return NULL;
}

static const struct rtag *find_version(const struct rtag *t, size_t n,
                                       const struct release_version *v)
{
    for (size_t i = 0; i < n; i++)
        if (release_version_cmp(&t[i].v, v) == 0)
            return &t[i];
    return NULL;
}

static void version_name(const struct release_version *v, char *buf, size_t n)
{
    if (v->rc)
        snprintf(buf, n, "v%ld.%ld.%ld-rc.%ld", v->major, v->minor, v->patch, v->rc);
    else
        snprintf(buf, n, "v%ld.%ld.%ld", v->major, v->minor, v->patch);
}

/* What makes a tree the engine's: any of these (relative to the tree's
 * place in the repository). A release tag whose tree has none of them
 * predates the engine there. */
static const char *const layout_paths[] = {"migrations/revoked", "migrations/pre-apply",
                                           "migrations/background", "legacy-sh/legacy-map", NULL};

/* 1 when rev's tree has the engine's layout, 0 when not, -1 (err) when git fails. */
static int has_layout(const struct git_repo *g, const char *rev, struct buf *err)
{
    struct git_entry *e;
    size_t n;
    if (git_ls_tree(g, rev, layout_paths, &e, &n, err) != 0)
        return -1;
    git_entries_free(e, n);
    return n > 0;
}

/* Drops the line's tags older than the first whose tree has the engine's
 * layout: releases from before the engine (years of a platform's history)
 * play no part, so their gaps and branches do not either, and the first
 * engine release is batch 00001 wherever the tree was added. */
int order_walk_drop_pre_engine(const struct git_repo *g, struct walk *w, struct buf *err)
{
    size_t first = 0;
    int yes = 0;
    while (first < w->ntags && (yes = has_layout(g, w->tags[first].name, err)) == 0)
        first++;
    if (yes < 0)
        return EXIT_HISTORY;
    if (first == 0) /* also: no tag at all (tags is NULL) */
        return 0;
    for (size_t i = 0; i < first; i++)
        free(w->tags[i].name);
    memmove(w->tags, w->tags + first, (w->ntags - first) * sizeof *w->tags);
    w->ntags -= first;
    return 0;
}

/* The release that must come before v in a line, or 0 when none must:
 * rc.N follows rc.N-1; X.Y.Z (or its rc.1) follows X.Y.Z-1; X.Y.0 and
 * X.Y.0-rc.1 open a series. */
static int predecessor(const struct release_version *v, struct release_version *want)
{
    *want = *v;
    if (v->rc > 1) {
        want->rc--;
        return 1;
    }
    if (v->patch == 0)
        return 0;
    want->patch--;
    want->rc = 0;
    return 1;
}

/* Gaps in the walked line are the platform's past, not errors: the first
 * engine release has no predecessor in the walk; a patch cut on a release
 * branch that this line does not contain (v1.6.1 on release-1.6, then
 * v1.6.2 merged into main) is another line's; a number never tagged is
 * skipped. The one gap a clone can cause is a tag in this line that was
 * not fetched: git follows the tags of what it fetches, so that needs a
 * remote to fetch from and a release between two that are here (an
 * earlier walked tag, and one without its predecessor anywhere in the
 * clone). Only then is there a warning, with the hint to fetch every tag:
 * the clone cannot tell an unfetched tag from a skipped number. */
static int check_gaps(const struct git_repo *g, const char *rev, const struct rtag *line,
                      size_t n, struct buf *err)
{
    struct rtag *all = NULL;
    size_t nall = 0;
    int loaded = 0, remote = -2;
    for (size_t i = 1; i < n; i++) {
        struct release_version want;
        if (!predecessor(&line[i].v, &want) || find_version(line, n, &want))
            continue;
        /* X.Y.Z after one of its own release candidates follows it */
        const struct release_version *p = &line[i - 1].v, *v = &line[i].v;
        if (v->rc == 0 && p->major == v->major && p->minor == v->minor && p->patch == v->patch)
            continue;
        if (!loaded && git_release_tags(g, NULL, NULL, &all, &nall, err) != 0)
            return EXIT_HISTORY;
        loaded = 1;
        if (find_version(all, nall, &want))
            continue; /* another line's tag */
        if (remote == -2 && (remote = git_has_remote(g, err)) < 0) {
            git_release_tags_free(all, nall);
            return EXIT_HISTORY;
        }
        char name[64];
        version_name(&want, name, sizeof name);
        if (remote)
            log_warn("order: %s follows %s in %s's history, but %s is not in this clone: if it "
                     "was released, fetch every tag (git fetch --tags) and run order again, or "
                     "its slugs go to %s's batch; a skipped number needs nothing",
                     line[i].name, line[i - 1].name, rev, name, line[i].name);
    }
    git_release_tags_free(all, nall);
    return 0;
}

int order_walk(const struct git_repo *g, const char *rev, struct walk *w, struct buf *err)
{
    memset(w, 0, sizeof *w);
    int sh = git_is_shallow(g, err);
    if (sh < 0)
        return EXIT_HISTORY;
    if (sh) {
        buf_setf(err, "%s: shallow clone: the manifest needs every release tag's tree (git fetch "
                 "--unshallow --tags)",
                 g->dir);
        return EXIT_HISTORY;
    }
    char oid[65];
    if (git_commit_of(g, rev, oid, err) != 0)
        return EXIT_HISTORY;
    struct rtag *at_rev = NULL;
    size_t nat_rev = 0;
    if (git_release_tags(g, oid, NULL, &w->tags, &w->ntags, err) != 0 ||
        git_release_tags(g, NULL, oid, &at_rev, &nat_rev, err) != 0) {
        order_walk_free(w);
        return EXIT_HISTORY;
    }
    w->rev_tagged = nat_rev > 0;
    git_release_tags_free(at_rev, nat_rev);
    int rc = order_walk_drop_pre_engine(g, w, err);
    if (rc == 0)
        rc = check_gaps(g, rev, w->tags, w->ntags, err);
    if (rc == 0)
        rc = order_scripts_at(g, oid, &w->at, &w->nat, err);
    if (rc == EXIT_PACKAGING) {
        /* Name the revision as the user did, not by its id. */
        char *was = buf_detach(err, NULL);
        const char *colon = was ? strchr(was, ':') : NULL;
        buf_setf(err, "%s%s", colon ? rev : "", colon ? colon : was ? was : "");
        mem_free(was);
    }
    for (size_t t = 0; rc == 0 && t < w->ntags; t++) {
        struct rev_script *s;
        size_t ns;
        if ((rc = order_scripts_at(g, w->tags[t].name, &s, &ns, err)) != 0)
            break;
        for (size_t i = 0; rc == 0 && i < ns; i++) {
            if (strcmp(s[i].tier, "legacy") == 0)
                continue;
            struct walk_slug *ws = (struct walk_slug *)order_walk_find(w, s[i].slug);
            if (ws) {
                ws->last = t;
                ws->count++;
                continue;
            }
            struct walk_slug *nw = mem_grow(w->s, w->n + 1, sizeof *nw);
            if (!nw) {
                buf_setf(err, "out of memory");
                rc = EXIT_FAILED;
                break;
            }
            w->s = nw;
            ws = &w->s[w->n++];
            memset(ws, 0, sizeof *ws);
            ws->slug = strdup(s[i].slug);
            ws->path = strdup(s[i].path);
            ws->tier = s[i].tier;
            ws->first = ws->last = t;
            ws->count = 1;
            snprintf(ws->oid, sizeof ws->oid, "%s", s[i].oid);
            if (!ws->slug || !ws->path) {
                buf_setf(err, "out of memory");
                rc = EXIT_FAILED;
            }
        }
        order_rev_scripts_free(s, ns);
    }
    if (rc != 0)
        order_walk_free(w);
    return rc;
}

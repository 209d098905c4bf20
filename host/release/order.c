/* order.c: the manifest generator, `cozy-migrate order`.
 *
 * Owns turning the tag walk (order_walk.c: this line's release tags and
 * the first tag that carries each slug) into order.d/: their version
 * order as batches, `retired` for a slug a tag carried and the revision
 * does not, 99999-untagged, 00000-legacy from legacy-map, ordering within
 * a batch by `requires`, and the prefix rule against the previous release.
 * Reads only git objects (gitread.c), never the working tree, so the same
 * revision always gives the same bytes; the one exception is the manifest
 * of a --local run (order_local), which is what `order` would write if the
 * working tree were committed, and is never written. Must never write
 * anything but the batch files of the directory it is given, and never
 * emit a manifest tree_load would refuse: it reads back what it writes. */
#include "release/order.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/exitcodes.h"
#include "base/fsutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/util.h"
#include "formats/header.h"
#include "formats/tree.h"

/* ---- generation ---------------------------------------------------------- */

struct node {
    char *slug;
    size_t batch;               /* index into the output batches */
    int retired;
    const char *label;          /* "REV:path" for errors (points into labels) */
    struct header h;
    int has_header;
    int placed;
};

struct gen {
    struct node *n;
    size_t nn;
    char **labels;
    size_t nlabels;
    char (*names)[128];         /* batch names */
    size_t nbatches;
};

static void gen_free(struct gen *gn)
{
    for (size_t i = 0; i < gn->nn; i++) {
        free(gn->n[i].slug);
        header_free(&gn->n[i].h);
    }
    free(gn->n);
    for (size_t i = 0; i < gn->nlabels; i++)
        free(gn->labels[i]);
    free(gn->labels);
    free(gn->names);
    memset(gn, 0, sizeof *gn);
}

static struct node *gen_find(struct gen *gn, const char *slug)
{
    for (size_t i = 0; i < gn->nn; i++)
        if (strcmp(gn->n[i].slug, slug) == 0)
            return &gn->n[i];
    return NULL;
}

static int add_batch(struct gen *gn, const char *name)
{
    char(*nb)[128] = mem_grow(gn->names, gn->nbatches + 1, sizeof *nb);
    if (!nb)
        return -1;
    gn->names = nb;
    snprintf(nb[gn->nbatches++], 128, "%s", name);
    return 0;
}

static struct node *add_node(struct gen *gn, const char *slug, int retired)
{
    struct node *nn = mem_grow(gn->n, gn->nn + 1, sizeof *nn);
    if (!nn)
        return NULL;
    gn->n = nn;
    struct node *x = &nn[gn->nn];
    memset(x, 0, sizeof *x);
    if (!(x->slug = strdup(slug)))
        return NULL;
    x->batch = gn->nbatches - 1;
    x->retired = retired;
    gn->nn++;
    return x;
}

/* formats/ still says why in a char[] of its own (its turn is to come):
 * when rc says the call failed, fe's text goes whole into err. rc. */
static int fixed_err(int rc, const char *fe, struct buf *err)
{
    if (rc != 0)
        buf_setf(err, "%s", fe);
    return rc;
}

/* Reads and parses the header of blob oid, labelled "rev:path"; an empty
 * oid is a working-tree file (worktree/path, labelled path). */
static int load_header(const struct git_repo *g, struct gen *gn, struct node *x, const char *rev,
                       const char *path, const char *oid, const char *worktree, struct buf *err)
{
    char **nl = mem_grow(gn->labels, gn->nlabels + 1, sizeof *nl);
    if (!nl)
        return EXIT_FAILED;
    gn->labels = nl;
    size_t l = strlen(rev) + strlen(path) + 2;
    if (!(nl[gn->nlabels] = malloc(l)))
        return EXIT_FAILED;
    if (*oid)
        snprintf(nl[gn->nlabels], l, "%s:%s", rev, path);
    else
        snprintf(nl[gn->nlabels], l, "%s", path);
    x->label = nl[gn->nlabels++];
    char *text;
    size_t len;
    if (!*oid) {
        char full[8400];
        snprintf(full, sizeof full, "%s/%s", worktree, path);
        if (!(text = util_read_file(full, &len))) {
            buf_setf(err, "%s: %s", full, strerror(errno));
            return EXIT_PACKAGING;
        }
    } else if (git_blob(g, oid, &text, &len, err) != 0) {
        return EXIT_HISTORY;
    }
    char fe[2048];
    int rc = fixed_err(header_parse(x->label, text, len, util_ends_with(path, ".lua"), &x->h, fe,
                                    sizeof fe), fe, err);
    (*oid ? mem_free : free)(text); /* git_blob's text is mem_*'s, util_read_file's malloc's */
    if (rc != 0)
        return EXIT_PACKAGING;
    x->has_header = 1;
    return 0;
}

static int cmp_node_slug(const void *a, const void *b)
{
    return strcmp(((const struct node *)a)->slug, ((const struct node *)b)->slug);
}

/* The first unplaced node of batch b that x requires, or NULL: one step
 * along the cycle describe_cycle walks. */
static struct node *cycle_next(struct gen *gn, const struct node *x, size_t b)
{
    for (size_t r = 0; r < x->h.nrequires; r++) {
        struct node *y = gen_find(gn, x->h.requires[r]);
        if (y && y->batch == b && !y->placed)
            return y;
    }
    return NULL;
}

/* Describes a cycle among the unplaced nodes of batch b. */
static void describe_cycle(struct gen *gn, size_t from, size_t to, size_t b, struct buf *err)
{
    struct node *start = NULL;
    for (size_t i = from; i < to && !start; i++)
        if (!gn->n[i].placed)
            start = &gn->n[i];
    /* Walk unplaced requires edges; after nn steps we are on the cycle. */
    struct node *x = start;
    for (size_t step = 0; x && step < gn->nn; step++)
        x = cycle_next(gn, x, b);
    if (!x) {
        buf_setf(err, "order.d/%s: requires form a cycle", gn->names[b]);
        return;
    }
    /* Name the cycle from its alphabetically first member, so the message
     * does not depend on where the walk entered it. */
    struct node *y = x, *first = x;
    do {
        y = cycle_next(gn, y, b);
        if (y && strcmp(y->slug, first->slug) < 0)
            first = y;
    } while (y && y != x);
    x = first;
    buf_setf(err, "%s: requires form a cycle: %s", x->label, x->slug);
    y = x;
    do {
        y = cycle_next(gn, y, b);
        if (y)
            buf_addf(err, " -> %s", y->slug);
    } while (y && y != x);
}

/* One generation: the history walked, the batches being built, the legacy
 * map. The steps below return 0, an exit code with err said, or OOM. */
#define OOM (-1)
struct ordering {
    const struct git_repo *g;
    const char *rev;
    const char *worktree;       /* order_local: the scripts and legacy-map are this
                                 * directory's, not rev's (w.at holds them) */
    struct walk w;
    struct gen gn;
    struct legacy_map lm;
    size_t first_new;           /* nodes before it are 00000-legacy's */
    struct buf *err;
};

static int in_legacy_map(const struct legacy_map *lm, const char *slug)
{
    for (size_t k = 0; k < lm->n; k++)
        if (strcmp(lm->e[k].slug, slug) == 0)
            return 1;
    return 0;
}

/* 00000-legacy: legacy-map's order, a missing script retired; every legacy
 * script of rev must be in the map. */
static int legacy_batch(struct ordering *o)
{
    char label[4300];
    snprintf(label, sizeof label, "%s:legacy-sh/legacy-map", o->rev);
    struct git_entry *le = NULL;
    size_t nle = 0;
    static const char *const lm_path[] = {"legacy-sh/legacy-map", NULL};
    int rc = 0;
    if (o->worktree) {
        char path[4200];
        snprintf(path, sizeof path, "%s/legacy-sh/legacy-map", o->worktree);
        if (legacy_map_load(path, &o->lm, o->err) != 0)
            rc = EXIT_PACKAGING;
        snprintf(label, sizeof label, "%s", path);
    } else if (git_ls_tree(o->g, o->rev, lm_path, &le, &nle, o->err) != 0) {
        return EXIT_HISTORY;
    }
    if (nle == 1) {
        char *text;
        size_t len;
        if (git_blob(o->g, le[0].oid, &text, &len, o->err) != 0) {
            rc = EXIT_HISTORY;
        } else {
            if (legacy_map_parse(label, text, len, &o->lm, o->err) != 0)
                rc = EXIT_PACKAGING;
            mem_free(text);
        }
    }
    git_entries_free(le, nle);
    if (rc != 0)
        return rc;
    if (o->lm.n && add_batch(&o->gn, LEGACY_BATCH) != 0)
        return OOM;
    for (size_t i = 0; i < o->lm.n; i++) {
        const struct rev_script *s = order_rev_script_find(o->w.at, o->w.nat, o->lm.e[i].slug);
        if (s && strcmp(s->tier, "legacy") != 0) {
            buf_setf(o->err, "%s:%d: '%s' is a legacy slug, but %s is not a shell script",
                     label, o->lm.e[i].line, o->lm.e[i].slug, s->path);
            return EXIT_PACKAGING;
        }
        struct node *x = add_node(&o->gn, o->lm.e[i].slug, !s);
        if (!x)
            return OOM;
        if (s && (rc = load_header(o->g, &o->gn, x, o->rev, s->path, s->oid, o->worktree,
                                   o->err)) != 0)
            return rc;
    }
    for (size_t i = 0; i < o->w.nat; i++) {
        if (strcmp(o->w.at[i].tier, "legacy") == 0 && !in_legacy_map(&o->lm, o->w.at[i].slug)) {
            buf_setf(o->err, "%s:%s: not in legacy-sh/legacy-map (every legacy script has "
                     "its old number there)", o->rev, o->w.at[i].path);
            return EXIT_PACKAGING;
        }
    }
    o->first_new = o->gn.nn;
    return 0;
}

/* One batch per tag that first carries a slug. Legacy slugs stay out. */
static int tag_batches(struct ordering *o)
{
    const struct walk *w = &o->w;
    for (size_t t = 0; t < w->ntags; t++) {
        int opened = 0;
        for (size_t i = 0; i < w->n; i++) {
            const struct walk_slug *ws = &w->s[i];
            if (ws->first != t || in_legacy_map(&o->lm, ws->slug))
                continue;
            if (!opened) {
                char name[128];
                snprintf(name, sizeof name, "%05zu-%s", t + 1, w->tags[t].name);
                if (add_batch(&o->gn, name) != 0)
                    return OOM;
                opened = 1;
            }
            const struct rev_script *now = order_rev_script_find(w->at, w->nat, ws->slug);
            if (now && strcmp(now->tier, "legacy") == 0) {
                buf_setf(o->err, "%s:%s: slug '%s' was shipped as %s in %s: a slug is "
                         "never reused", o->rev, now->path, ws->slug, ws->path, w->tags[t].name);
                return EXIT_PACKAGING;
            }
            struct node *x = add_node(&o->gn, ws->slug, !now);
            if (!x)
                return OOM;
            int rc = load_header(o->g, &o->gn, x, w->tags[t].name, ws->path, ws->oid, NULL,
                                 o->err);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

/* Slugs no tag carries yet, in UNTAGGED_BATCH (none when rev is tagged). */
static int untagged_batch(struct ordering *o)
{
    int opened = 0;
    for (size_t i = 0; i < o->w.nat; i++) {
        const struct rev_script *s = &o->w.at[i];
        if (strcmp(s->tier, "legacy") == 0 || order_walk_find(&o->w, s->slug) ||
            in_legacy_map(&o->lm, s->slug))
            continue;
        if (o->w.rev_tagged) {
            /* The tag at rev carries every script rev holds. */
            buf_setf(o->err, "%s:%s: '%s' is in no release tag although %s is tagged",
                     o->rev, s->path, s->slug, o->rev);
            return EXIT_FAILED;
        }
        if (!opened) {
            if (add_batch(&o->gn, UNTAGGED_BATCH) != 0)
                return OOM;
            opened = 1;
        }
        struct node *x = add_node(&o->gn, s->slug, 0);
        if (!x)
            return OOM;
        int rc = load_header(o->g, &o->gn, x, o->rev, s->path, s->oid, o->worktree, o->err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* requires: present, not later, and within a batch an order. */
static int check_requires(struct ordering *o)
{
    struct gen *gn = &o->gn;
    for (size_t i = 0; i < gn->nn; i++) {
        struct node *x = &gn->n[i];
        for (size_t r = 0; x->has_header && r < x->h.nrequires; r++) {
            struct node *y = gen_find(gn, x->h.requires[r]);
            if (!y) {
                buf_setf(o->err, "%s: requires '%s', which no release carries and %s does "
                         "not hold (dangling requires)", x->label, x->h.requires[r], o->rev);
                return EXIT_PACKAGING;
            }
            if (y->batch > x->batch) {
                buf_setf(o->err, "%s: requires '%s', which first ships in a later batch "
                         "(%s, after %s)", x->label, y->slug, gn->names[y->batch],
                         gn->names[x->batch]);
                return EXIT_PACKAGING;
            }
            if (y == x) {
                buf_setf(o->err, "%s: requires form a cycle: %s -> %s", x->label,
                         x->slug, x->slug);
                return EXIT_PACKAGING;
            }
            if (i < o->first_new && y > x) {
                buf_setf(o->err, "%s: requires '%s', which comes after it in legacy-map",
                         x->label, y->slug);
                return EXIT_PACKAGING;
            }
        }
    }
    return 0;
}

/* Batch b (nodes from .. to) into ob: alphabetical, except where requires
 * demand otherwise: always the first slug (alphabetically) whose same-batch
 * requires are placed. Legacy keeps the map's order. */
static int emit_batch(struct ordering *o, size_t b, size_t from, size_t to, struct batch *ob)
{
    struct gen *gn = &o->gn;
    char path[200];
    snprintf(path, sizeof path, "order.d/%s", gn->names[b]);
    if (!(ob->name = strdup(gn->names[b])) || !(ob->path = strdup(path)) ||
        !(ob->e = calloc(to - from ? to - from : 1, sizeof *ob->e)))
        return OOM;
    int legacy = b == 0 && o->first_new > 0;
    if (!legacy && to - from > 1)
        qsort(gn->n + from, to - from, sizeof *gn->n, cmp_node_slug);
    for (size_t k = from; k < to; k++) {
        struct node *pick = NULL;
        for (size_t i = from; i < to && !pick; i++) {
            struct node *x = &gn->n[i];
            if (x->placed)
                continue;
            int ready = 1;
            for (size_t r = 0; !legacy && r < x->h.nrequires && ready; r++) {
                struct node *y = gen_find(gn, x->h.requires[r]);
                if (y && y->batch == b && !y->placed)
                    ready = 0;
            }
            if (ready)
                pick = x;
        }
        if (!pick) {
            describe_cycle(gn, from, to, b, o->err);
            return EXIT_PACKAGING;
        }
        pick->placed = 1;
        struct batch_entry *be = &ob->e[ob->n];
        if (!(be->slug = strdup(pick->slug)))
            return OOM;
        be->retired = pick->retired;
        be->line = (int)++ob->n;
    }
    return 0;
}

static int emit_batches(struct ordering *o, struct manifest *m)
{
    if (!(m->b = calloc(o->gn.nbatches ? o->gn.nbatches : 1, sizeof *m->b)))
        return OOM;
    size_t at = 0;
    for (size_t b = 0; b < o->gn.nbatches; b++) {
        size_t from = at, to = at;
        while (to < o->gn.nn && o->gn.n[to].batch == b)
            to++;
        at = to;
        int rc = emit_batch(o, b, from, to, &m->b[m->n++]);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Generates rev's manifest. An exit code (0, EXIT_PACKAGING for a cycle, a
 * dangling `requires`, a `requires` on a later batch, a bad header or
 * legacy-map; EXIT_HISTORY) with one line in err. */
static int order_generate(const struct git_repo *g, const char *rev, struct manifest *m,
                          struct buf *err)
{
    memset(m, 0, sizeof *m);
    struct ordering o = {.g = g, .rev = rev, .err = err};
    int rc = order_walk(g, rev, &o.w, err);
    if (rc != 0)
        return rc;
    if ((rc = legacy_batch(&o)) == 0 && (rc = tag_batches(&o)) == 0 &&
        (rc = untagged_batch(&o)) == 0 && (rc = check_requires(&o)) == 0)
        rc = emit_batches(&o, m);
    if (rc == OOM) {
        buf_setf(err, "out of memory");
        rc = EXIT_FAILED;
    }
    if (rc != 0)
        manifest_free(m);
    legacy_map_free(&o.lm);
    gen_free(&o.gn);
    order_walk_free(&o.w);
    return rc;
}

/* ---- the manifest of a --local run ----------------------------------------- */

struct wt_scan {
    struct rev_script *s;
    size_t n;
    const char *tier;
    int oom;
};

/* tree_scan_dir's visitor: every script with a valid slug, once (what the
 * loader refuses, it says itself when it loads the tree). */
static int wt_entry(void *ud, const struct tree_entry *e)
{
    struct wt_scan *w = ud;
    if (e->kind != TREE_SCRIPT || !slug_valid(e->slug) || order_rev_script_find(w->s, w->n, e->slug))
        return 0;
    struct rev_script *ns = mem_grow(w->s, w->n + 1, sizeof *ns);
    if (!ns) {
        w->oom = 1;
        return -1;
    }
    w->s = ns;
    memset(&ns[w->n], 0, sizeof *ns);
    ns[w->n].slug = strdup(e->slug);
    ns[w->n].path = strdup(e->rel);
    ns[w->n].tier = w->tier;
    w->n++;
    if (!ns[w->n - 1].slug || !ns[w->n - 1].path) {
        w->oom = 1;
        return -1;
    }
    return 0;
}

/* The working tree's scripts, as order_scripts_at gives a revision's (an
 * empty oid: read from the file). */
static int worktree_scripts(const char *dir, struct rev_script **out, size_t *nout, struct buf *err)
{
    static const struct { const char *rel, *tier; int shell; } dirs[] = {
        {"migrations/pre-apply", "pre-apply", 0},
        {"migrations/background", "background", 0},
        {"legacy-sh", "legacy", 1},
    };
    struct wt_scan w = {0};
    int rc = 0;
    char fe[2048];
    for (size_t i = 0; rc == 0 && i < sizeof dirs / sizeof dirs[0]; i++) {
        w.tier = dirs[i].tier;
        if (fixed_err(tree_scan_dir(dir, dirs[i].rel, dirs[i].shell, wt_entry, &w, fe, sizeof fe),
                      fe, err) != 0)
            rc = w.oom ? EXIT_FAILED : EXIT_PACKAGING;
    }
    if (w.oom)
        buf_setf(err, "out of memory");
    if (rc != 0) {
        order_rev_scripts_free(w.s, w.n);
        return rc;
    }
    *out = w.s;
    *nout = w.n;
    return 0;
}

static int in_manifest(const struct manifest *m, const char *slug)
{
    for (size_t b = 0; b < m->n; b++)
        for (size_t i = 0; i < m->b[b].n; i++)
            if (strcmp(m->b[b].e[i].slug, slug) == 0)
                return 1;
    return 0;
}

/* "N scripts (a, b, ...)" into buf. */
static void name_slugs(char *buf, size_t len, const char *const *slugs, size_t n)
{
    size_t at = (size_t)snprintf(buf, len, "%zu script%s (", n, n == 1 ? "" : "s");
    for (size_t i = 0; i < n && i <= 8 && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? ", " : "", i < 8 ? slugs[i] : "...");
    if (at < len)
        snprintf(buf + at, len - at, ")");
}

/* order.d/ is there: what it lacks of the working tree goes to the untagged
 * batch, in the generator's order (alphabetical, then requires), after what
 * that batch holds; an untagged entry whose script is gone is dropped (it
 * was never released). */
static int local_from_order_d(const char *dir, struct manifest *m, char *note, size_t notelen,
                              struct buf *err)
{
    char od[4200];
    if (manifest_load(tree_order_d(dir, od, sizeof od), m, err) != 0)
        return EXIT_PACKAGING;
    struct rev_script *wt;
    size_t nwt;
    int rc = worktree_scripts(dir, &wt, &nwt, err);
    if (rc != 0)
        return rc;
    struct ordering o = {.rev = "worktree", .worktree = dir, .err = err};
    struct batch *ub = NULL;
    for (size_t b = 0; b < m->n; b++)
        if (strcmp(m->b[b].name, UNTAGGED_BATCH) == 0)
            ub = &m->b[b];
    const char *added[64];
    size_t nadded = 0, ndropped = 0;
    /* untagged entries without a script: never released, so never retired */
    for (size_t i = 0; ub && i < ub->n;) {
        struct batch_entry *e = &ub->e[i];
        if (e->retired || order_rev_script_find(wt, nwt, e->slug)) {
            i++;
            continue;
        }
        ndropped++;
        free(e->slug);
        memmove(e, e + 1, (ub->n - i - 1) * sizeof *e);
        ub->n--;
    }
    if (add_batch(&o.gn, UNTAGGED_BATCH) != 0)
        rc = OOM;
    for (size_t i = 0; rc == 0 && i < nwt; i++) {
        if (strcmp(wt[i].tier, "legacy") == 0 || in_manifest(m, wt[i].slug))
            continue;
        struct node *x = add_node(&o.gn, wt[i].slug, 0);
        if (!x)
            rc = OOM;
        else
            rc = load_header(NULL, &o.gn, x, o.rev, wt[i].path, "", dir, err);
        nadded += rc == 0;
    }
    struct batch nb;
    memset(&nb, 0, sizeof nb);
    if (rc == 0 && o.gn.nn)
        rc = emit_batch(&o, 0, 0, o.gn.nn, &nb);
    if (rc == 0 && nb.n) {
        if (!ub) {
            struct batch *mb = mem_grow(m->b, m->n + 1, sizeof *mb);
            char path[4300];
            snprintf(path, sizeof path, "%s/" UNTAGGED_BATCH, od);
            if (!mb || !(mb[m->n].name = strdup(UNTAGGED_BATCH)) ||
                !(mb[m->n].path = strdup(path))) {
                if (mb)
                    m->b = mb;
                rc = OOM;
            } else {
                m->b = mb;
                ub = &m->b[m->n++];
                ub->e = NULL;
                ub->n = 0;
            }
        }
        struct batch_entry *ne = rc == 0 ? mem_grow(ub->e, ub->n + nb.n, sizeof *ne) : NULL;
        if (rc == 0 && !ne)
            rc = OOM;
        for (size_t i = 0; rc == 0 && i < nb.n; i++) {
            ub->e = ne;
            ne[ub->n] = nb.e[i];
            ne[ub->n].line = ub->n ? ne[ub->n - 1].line + 1 : 1;
            nb.e[i].slug = NULL;
            ub->n++;
        }
        for (size_t i = 0; i < nadded && i < 64; i++) /* in the order they run */
            added[i] = ub->e[ub->n - nb.n + i].slug;
    }
    for (size_t i = 0; i < nb.n; i++)
        free(nb.e[i].slug);
    free(nb.e);
    free(nb.name);
    free(nb.path);
    if (rc == 0 && (nadded || ndropped)) {
        char what[700] = "", gone[200] = "";
        if (nadded)
            name_slugs(what, sizeof what, added, nadded < 64 ? nadded : 64);
        if (ndropped)
            snprintf(gone, sizeof gone, "%s%zu untagged entr%s whose script is gone left out "
                     "(never released)", nadded ? "; " : "", ndropped, ndropped == 1 ? "y" : "ies");
        snprintf(note, notelen, "local: %s%s%s", what,
                 nadded ? " that migrations/order.d does not list (uncommitted, or made after "
                          "`cozy-migrate order`) run in " UNTAGGED_BATCH : "", gone);
    }
    if (rc == OOM) {
        buf_setf(err, "out of memory");
        rc = EXIT_FAILED;
    }
    gen_free(&o.gn);
    order_rev_scripts_free(wt, nwt);
    if (rc != 0)
        manifest_free(m);
    return rc;
}

int order_local(const char *dir, struct manifest *m, char *note, size_t notelen, struct buf *err)
{
    memset(m, 0, sizeof *m);
    *note = '\0';
    char od[4200];
    struct stat st;
    if (stat(tree_order_d(dir, od, sizeof od), &st) == 0)
        return local_from_order_d(dir, m, note, notelen, err);
    struct ordering o = {.rev = "worktree", .worktree = dir, .err = err};
    struct git_repo g;
    char oid[65];
    int rc = 0, have_git = 0;
    /* no repository, or no commit, is no error here: err is only read on one */
    int gr = git_open(dir, &g, err);
    if (gr == GIT_MISSING) {
        buf_setf(err, "git is not installed: without migrations/order.d, a --local run "
                 "makes its manifest from the release tags");
        return EXIT_TOOL;
    }
    if (gr == GIT_OK) {
        have_git = 1;
        o.g = &g;
        if (git_commit_of(&g, "HEAD", oid, err) == 0 &&
            (rc = order_walk(&g, "HEAD", &o.w, err)) == 0) {
            /* the working tree in HEAD's place: its scripts, never tagged as such */
            order_rev_scripts_free(o.w.at, o.w.nat);
            o.w.at = NULL;
            o.w.nat = 0;
            o.w.rev_tagged = 0;
        }
    }
    if (rc == 0)
        rc = worktree_scripts(dir, &o.w.at, &o.w.nat, err);
    if (rc == 0 && (rc = legacy_batch(&o)) == 0 && (rc = tag_batches(&o)) == 0 &&
        (rc = untagged_batch(&o)) == 0 && (rc = check_requires(&o)) == 0)
        rc = emit_batches(&o, m);
    if (rc == OOM) {
        buf_setf(err, "out of memory");
        rc = EXIT_FAILED;
    }
    if (rc == 0) {
        size_t untagged = 0;
        for (size_t b = 0; b < m->n; b++)
            if (strcmp(m->b[b].name, UNTAGGED_BATCH) == 0)
                untagged = m->b[b].n;
        snprintf(note, notelen, "local: no migrations/order.d, so the manifest is what `cozy-migrate "
                 "order` would make of the working tree%s: %zu batch%s, %zu untagged script%s "
                 "(committed or not)", !have_git ? " (not in a git repository: no release tags)"
                 : o.w.ntags ? "" : " (no release tag yet)", m->n, m->n == 1 ? "" : "es",
                 untagged, untagged == 1 ? "" : "s");
    } else {
        manifest_free(m);
    }
    legacy_map_free(&o.lm);
    gen_free(&o.gn);
    order_walk_free(&o.w);
    if (have_git)
        git_close(&g);
    return rc;
}

/* The text of one batch file. NULL when out of memory. */
static char *order_batch_text(const struct batch *b, size_t *len)
{
    size_t cap = 1;
    for (size_t i = 0; i < b->n; i++)
        cap += strlen(b->e[i].slug) + 10;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    size_t off = 0;
    for (size_t i = 0; i < b->n; i++)
        off += (size_t)snprintf(s + off, cap - off, "%s%s\n", b->e[i].slug,
                                b->e[i].retired ? " retired" : "");
    *len = off;
    return s;
}

/* Checks that the previous release's manifest (regenerated from its tag)
 * is a prefix of m: the same batch files, byte for byte, except that a
 * slug may since have been retired. 0 (note says what was compared),
 * EXIT_RELEASED, or EXIT_HISTORY. */
static int order_check_prefix(const struct git_repo *g, const char *rev, const struct manifest *m,
                              char *note, size_t notelen, struct buf *err)
{
    char oid[65];
    if (git_commit_of(g, rev, oid, err) != 0)
        return EXIT_HISTORY;
    /* the walk's line: this line's tags from the engine's first release */
    struct walk line;
    memset(&line, 0, sizeof line);
    struct rtag *here = NULL;
    size_t nhere = 0;
    int rc = 0;
    if (git_release_tags(g, oid, NULL, &line.tags, &line.ntags, err) != 0 ||
        git_release_tags(g, NULL, oid, &here, &nhere, err) != 0 ||
        order_walk_drop_pre_engine(g, &line, err) != 0) {
        rc = EXIT_HISTORY;
        goto out;
    }
    const struct rtag *prev = NULL;
    for (size_t i = 0; i < line.ntags; i++) {
        int at_rev = 0;
        for (size_t k = 0; k < nhere && !at_rev; k++)
            at_rev = strcmp(here[k].name, line.tags[i].name) == 0;
        if (!at_rev)
            prev = &line.tags[i];
    }
    if (!prev) {
        /* The first release of the engine's tree in this line; tags of
         * other lines (release branches) are theirs to compare. */
        snprintf(note, notelen, "no earlier release of this tree in %s's line: nothing to compare "
                 "with", rev);
        goto out;
    }
    struct manifest pm;
    if ((rc = order_generate(g, prev->name, &pm, err)) != 0) {
        char *why = buf_detach(err, NULL);
        buf_setf(err, "regenerating %s's manifest: %s", prev->name, why ? why : "");
        mem_free(why);
        goto out;
    }
    for (size_t b = 0; b < pm.n && rc == 0; b++) {
        const struct batch *pb = &pm.b[b];
        const struct batch *cb = b < m->n ? &m->b[b] : NULL;
        if (!cb || strcmp(cb->name, pb->name) != 0) {
            buf_setf(err, "order.d/%s: %s's manifest has it as batch %zu, this one %s%s: "
                     "the manifest would rewrite a released one", pb->name, prev->name, b + 1,
                     cb ? "has " : "ends before it", cb ? cb->name : "");
            rc = EXIT_RELEASED;
            break;
        }
        for (size_t i = 0; i < pb->n || i < cb->n; i++) {
            const struct batch_entry *pe = i < pb->n ? &pb->e[i] : NULL;
            const struct batch_entry *ce = i < cb->n ? &cb->e[i] : NULL;
            /* Retiring a slug (deleting its script) is the one change a
             * released line may see. */
            if (pe && ce && strcmp(pe->slug, ce->slug) == 0 && (pe->retired == ce->retired ||
                                                                  ce->retired))
                continue;
            buf_setf(err, "order.d/%s:%zu: %s's manifest has %s%s%s here, this one %s%s%s: "
                     "the manifest would rewrite a released one", pb->name, i + 1, prev->name,
                     pe ? "'" : "nothing", pe ? pe->slug : "", pe ? (pe->retired ? " retired'" : "'") : "",
                     ce ? "'" : "nothing", ce ? ce->slug : "",
                     ce ? (ce->retired ? " retired'" : "'") : "");
            rc = EXIT_RELEASED;
            break;
        }
    }
    if (rc == 0)
        snprintf(note, notelen, "%s's manifest (%zu batch%s) is a prefix of this one",
                 prev->name, pm.n, pm.n == 1 ? "" : "es");
    manifest_free(&pm);
out:
    git_release_tags_free(line.tags, line.ntags);
    git_release_tags_free(here, nhere);
    return rc;
}

static int batch_like(const char *name)
{
    for (int i = 0; i < 5; i++)
        if (name[i] < '0' || name[i] > '9')
            return 0;
    return name[5] == '-';
}

/* Replaces the batch files in dir with m's, then reads them back with
 * manifest_load and fails unless they are what was written. 0,
 * EXIT_USAGE (dir is not a directory, or holds something other than batch
 * files) or EXIT_FAILED (a write failed). */
static int order_write(const struct manifest *m, const char *dir, struct buf *err)
{
    /* A destination that is no directory of batches is a wrong --out (or
     * tree), said as usage; only a failing write is an I/O error. */
    struct stat dst;
    if (stat(dir, &dst) == 0 && !S_ISDIR(dst.st_mode)) {
        buf_setf(err, "%s: not a directory: the manifest is a directory of batch files "
                 "(give --out a directory)", dir);
        return EXIT_USAGE;
    }
    if (fs_mkdirs(dir, 0755) != 0) {
        buf_setf(err, "%s: %s", dir, strerror(errno));
        return errno == ENOTDIR || errno == EEXIST ? EXIT_USAGE : EXIT_FAILED;
    }
    DIR *d = opendir(dir);
    if (!d) {
        buf_setf(err, "%s: %s", dir, strerror(errno));
        return EXIT_FAILED;
    }
    /* Stale batches from an earlier generation would change the order;
     * anything that is not a batch is not ours to delete. */
    struct dirent *de;
    int rc = 0;
    while (rc == 0 && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(st.st_mode) || !batch_like(de->d_name)) {
            buf_setf(err, "%s/%s: not a batch file; refusing to replace %s", dir, de->d_name, dir);
            rc = EXIT_USAGE;
        }
    }
    closedir(d);
    if (rc == 0 && (d = opendir(dir))) {
        while (rc == 0 && (de = readdir(d))) {
            if (batch_like(de->d_name) && unlinkat(dirfd(d), de->d_name, 0) != 0) {
                buf_setf(err, "%s/%s: %s", dir, de->d_name, strerror(errno));
                rc = EXIT_FAILED;
            }
        }
        closedir(d);
    }
    for (size_t b = 0; rc == 0 && b < m->n; b++) {
        size_t len;
        char *text = order_batch_text(&m->b[b], &len);
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, m->b[b].name);
        if (!text || fs_write(path, text, len, 0644) != 0) {
            buf_setf(err, "%s: %s", path, text ? strerror(errno) : "out of memory");
            rc = EXIT_FAILED;
        }
        free(text);
    }
    if (rc != 0)
        return rc;
    /* The runner must read exactly what was written. */
    struct manifest back;
    if (manifest_load(dir, &back, err) != 0)
        return EXIT_FAILED;
    int same = back.n == m->n;
    for (size_t b = 0; same && b < m->n; b++) {
        same = strcmp(back.b[b].name, m->b[b].name) == 0 && back.b[b].n == m->b[b].n;
        for (size_t i = 0; same && i < m->b[b].n; i++)
            same = strcmp(back.b[b].e[i].slug, m->b[b].e[i].slug) == 0 &&
                   back.b[b].e[i].retired == m->b[b].e[i].retired;
    }
    manifest_free(&back);
    if (!same) {
        buf_setf(err, "%s: reading the written manifest back gave something else", dir);
        return EXIT_FAILED;
    }
    return 0;
}

int order_cmd(const char *repo, const char *rev, const char *out, int check_prefix)
{
    struct buf err = BUF_INIT;
    struct git_repo g;
    int r = git_open(repo, &g, &err);
    if (r != GIT_OK) {
        log_fatal("order: %s", buf_str(&err));
        buf_release(&err);
        return r == GIT_MISSING ? EXIT_TOOL : EXIT_HISTORY;
    }
    struct manifest m;
    char note[512] = "", dir[4096];
    if (out)
        snprintf(dir, sizeof dir, "%s", out);
    else
        tree_order_d(repo, dir, sizeof dir);
    int rc = order_generate(&g, rev, &m, &err);
    if (rc == 0 && check_prefix)
        rc = order_check_prefix(&g, rev, &m, note, sizeof note, &err);
    if (rc == 0)
        rc = order_write(&m, dir, &err);
    if (rc != 0) {
        log_fatal("order: %s", buf_str(&err));
    } else {
        size_t slugs = 0, retired = 0;
        for (size_t b = 0; b < m.n; b++)
            for (size_t i = 0; i < m.b[b].n; i++, slugs++)
                retired += m.b[b].e[i].retired;
        out_line("order: %zu batch%s, %zu slug%s (%zu retired) in %s%s%s", m.n,
               m.n == 1 ? "" : "es", slugs, slugs == 1 ? "" : "s", retired, dir,
               *note ? "; " : "", note);
    }
    buf_release(&err);
    manifest_free(&m);
    git_close(&g);
    return rc;
}

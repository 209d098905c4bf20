/* lint_history.c: the rules that read the release tags: `history` (a slug
 * is never reused: not shipped as another kind of script by any release,
 * not back after this line dropped it) and `changed` (a shipped script, and
 * legacy-sh/lib/, byte for byte what REV and every release that carried it
 * shipped). Reads git objects only, through gitread.c and order.c; the
 * tags' scripts are read once for both rules. An unanswerable question is
 * EXIT_HISTORY, never a silent pass. */
#include "release/lint_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "base/exitcodes.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/util.h"

/* REV (with --against) and every release tag, oldest first, with the
 * scripts each tree holds, and the blob ids the working scripts have: read
 * once, for both rules. */
struct tagset {
    int loaded, rc;
    struct rtag *all;
    size_t nall;
    long first;                 /* -1 when REV (--against) comes first */
    struct rev_script **rs;     /* [t - first]; NULL: a broken tag (order's to report) */
    size_t *nrs;
    char (*oids)[65];           /* of l->s[i] in the working tree */
};

static const char *rev_name(const struct lint *l, const struct tagset *ts, long t)
{
    return t < 0 ? l->o->against : ts->all[t].name;
}

/* l->tags, loaded on first use. NULL when out of memory. */
static struct tagset *tags_of(struct lint *l)
{
    if (!l->tags && !(l->tags = calloc(1, sizeof *l->tags)))
        l->oom = 1;
    return l->tags;
}

static int load_tags(struct lint *l, struct tagset *ts)
{
    if (!ts)
        return EXIT_FAILED;
    if (ts->loaded)
        return ts->rc;
    ts->loaded = 1;
    struct buf err = BUF_INIT;
    const char **rels = calloc(l->ns ? l->ns : 1, sizeof *rels);
    ts->oids = calloc(l->ns ? l->ns : 1, sizeof *ts->oids);
    if (!rels || !ts->oids) {
        free(rels);
        l->oom = 1;
        return ts->rc = EXIT_FAILED;
    }
    for (size_t i = 0; i < l->ns; i++)
        rels[i] = l->s[i].rel;
    if (git_hash_files(&l->g, rels, l->ns, ts->oids, &err) != 0 ||
        git_release_tags(&l->g, NULL, NULL, &ts->all, &ts->nall, &err) != 0) {
        free(rels);
        log_fatal("lint: %s", buf_str(&err));
        buf_release(&err);
        return ts->rc = EXIT_HISTORY;
    }
    free(rels);
    ts->first = l->o->against ? -1 : 0;
    size_t n = (size_t)((long)ts->nall - ts->first);
    ts->rs = calloc(n ? n : 1, sizeof *ts->rs);
    ts->nrs = calloc(n ? n : 1, sizeof *ts->nrs);
    if (!ts->rs || !ts->nrs) {
        l->oom = 1;
        buf_release(&err);
        return ts->rc = EXIT_FAILED;
    }
    for (long t = ts->first; t < (long)ts->nall; t++) {
        size_t k = (size_t)(t - ts->first);
        int r2 = order_scripts_at(&l->g, rev_name(l, ts, t), &ts->rs[k], &ts->nrs[k], &err);
        if (r2 == EXIT_HISTORY) {
            log_fatal("lint: %s", buf_str(&err));
            buf_release(&err);
            return ts->rc = EXIT_HISTORY;
        }
        if (r2 != 0) /* a broken tag is order's to report */
            ts->rs[k] = NULL;
    }
    buf_release(&err);
    return ts->rc = 0;
}

/* Frees what load_tags read (lint_run calls it once the rules ran). */
void lint_history_free(struct lint *l)
{
    struct tagset *ts = l->tags;
    if (!ts)
        return;
    size_t n = ts->rs ? (size_t)((long)ts->nall - ts->first) : 0;
    for (size_t k = 0; k < n; k++)
        if (ts->rs[k])
            order_rev_scripts_free(ts->rs[k], ts->nrs[k]);
    free(ts->rs);
    free(ts->nrs);
    free(ts->oids);
    git_release_tags_free(ts->all, ts->nall);
    free(ts);
    l->tags = NULL;
}

/* A move between the Lua tiers keeps the slug and its record (DESIGN.md,
 * "tier"): the same script elsewhere is the same migration. Another kind
 * (Lua <-> shell) is a reuse. */
static int same_kind(const struct rev_script *x, const struct script *s)
{
    return (strcmp(x->tier, "legacy") == 0) == s->shell;
}

int lint_rule_history(struct lint *l)
{
    if (!l->o->history || !l->have_git)
        return 0;
    struct tagset *ts = tags_of(l);
    int rc = load_tags(l, ts);
    if (rc != 0)
        return rc;
    char *reused = calloc(l->ns ? l->ns : 1, 1);
    if (!reused) {
        l->oom = 1;
        return EXIT_FAILED;
    }
    /* REV (--against) too, then every release tag, oldest first. */
    for (long t = ts->first; t < (long)ts->nall; t++) {
        size_t k = (size_t)(t - ts->first);
        for (size_t i = 0; ts->rs[k] && i < l->ns; i++) {
            const struct rev_script *x = order_rev_script_find(ts->rs[k], ts->nrs[k], l->s[i].slug);
            if (!x || reused[i] || same_kind(x, &l->s[i]))
                continue;
            lint_add(l, l->s[i].rel, 1, "history", "slug '%s' was shipped as %s in %s: a slug "
                     "is never reused", l->s[i].slug, x->path, rev_name(l, ts, t));
            reused[i] = 1;
        }
    }
    /* Retired in this line and back again. */
    for (size_t i = 0; i < l->ns; i++) {
        const struct walk_slug *ws = l->have_walk ? order_walk_find(&l->w, l->s[i].slug) : NULL;
        if (!ws || reused[i])
            continue;
        if (ws->last + 1 < l->w.ntags || ws->count != ws->last - ws->first + 1)
            lint_add(l, l->s[i].rel, 1, "history", "slug '%s' was retired: shipped in %s, absent "
                     "from %s: a retired slug is never reused", l->s[i].slug,
                     l->w.tags[ws->first].name,
                     ws->last + 1 < l->w.ntags ? l->w.tags[ws->last + 1].name : "a later release");
    }
    free(reused);
    return 0;
}

/* Working-tree files below rel (relative to the tree root), dotfiles too,
 * appended to *list. */
static void files_below(struct lint *l, const char *rel, char ***list, size_t *n)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", l->o->dir, rel);
    char **names;
    size_t nn;
    if (util_list_dir_all(dir, &names, &nn) != 0)
        return;
    for (size_t i = 0; i < nn && !l->oom; i++) {
        char sub[1200], full[5500];
        snprintf(sub, sizeof sub, "%s/%s", rel, names[i]);
        snprintf(full, sizeof full, "%s/%s", l->o->dir, sub);
        struct stat st;
        if (stat(full, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            files_below(l, sub, list, n);
            continue;
        }
        char **nl = mem_grow(*list, *n + 1, sizeof *nl);
        if (!nl || !(nl[*n] = strdup(sub))) {
            if (nl)
                *list = nl;
            l->oom = 1;
            break;
        }
        *list = nl;
        (*n)++;
    }
    util_free_names(names, nn);
}

/* legacy-sh/lib/ is frozen like the scripts (its digest is every shell
 * record's lib_sha256): byte for byte the lib/ of every release tag that
 * shipped one, and of REV with --against: no file changed, added or
 * removed. Findings under the rule `changed`. An exit code. */
static int check_lib(struct lint *l, const struct git_repo *g, const struct rtag *tags,
                     size_t ntags, const char *against)
{
    struct buf err = BUF_INIT;
    static const char *const libdir[] = {"legacy-sh/lib", NULL};
    char **now = NULL;
    size_t nnow = 0;
    files_below(l, "legacy-sh/lib", &now, &nnow);
    char(*oids)[65] = calloc(nnow ? nnow : 1, sizeof *oids);
    char *reported = calloc(nnow + 1, 1);
    int rc = 0;
    if (!oids || !reported) {
        l->oom = 1;
    } else if (nnow && git_hash_files(g, (const char *const *)now, nnow, oids, &err) != 0) {
        log_fatal("lint: %s", buf_str(&err));
        rc = EXIT_HISTORY;
    }
    int gone_reported = 0;
    for (long t = against ? -1 : 0; rc == 0 && !l->oom && t < (long)ntags; t++) {
        const char *rev = t < 0 ? against : tags[t].name;
        struct git_entry *e;
        size_t ne;
        if (git_ls_tree(g, rev, libdir, &e, &ne, &err) != 0) {
            log_fatal("lint: %s", buf_str(&err));
            rc = EXIT_HISTORY;
            break;
        }
        /* A release that shipped no lib/ froze nothing. */
        for (size_t i = 0; i < nnow && ne; i++) {
            const struct git_entry *x = NULL;
            for (size_t k = 0; k < ne && !x; k++)
                if (strcmp(e[k].path, now[i]) == 0)
                    x = &e[k];
            if (reported[i] || (x && strcmp(x->oid, oids[i]) == 0))
                continue;
            lint_add(l, now[i], 1, "changed", "%s %s: shipped shared code never changes (its "
                "digest is every shell record's lib_sha256)",
                x ? t < 0 ? "differs from the file at" : "differs from the file shipped in"
                  : "is not in legacy-sh/lib/ as shipped in", rev);
            reported[i] = 1;
        }
        for (size_t k = 0; k < ne && !gone_reported; k++) {
            int present = 0;
            for (size_t i = 0; i < nnow && !present; i++)
                present = strcmp(e[k].path, now[i]) == 0;
            if (!present) {
                lint_add(l, e[k].path, 1, "changed", "shipped in %s and removed since: shipped shared "
                    "code never changes (every shell record's lib_sha256 names it)", rev);
                gone_reported = 1;
            }
        }
        git_entries_free(e, ne);
    }
    free(reported);
    free(oids);
    util_free_names(now, nnow);
    buf_release(&err);
    return rc;
}

int lint_rule_changed(struct lint *l)
{
    if ((!l->o->against && !l->o->history) || !l->have_git)
        return 0;
    struct tagset *ts = tags_of(l);
    int rc = load_tags(l, ts);
    if (rc != 0)
        return rc;
    if (l->o->against) {
        char *changed = calloc(l->ns ? l->ns : 1, 1);
        if (!changed) {
            l->oom = 1;
            return EXIT_FAILED;
        }
        /* REV first, then every release tag, oldest first. */
        for (long t = ts->first; t < (long)ts->nall; t++) {
            size_t k = (size_t)(t - ts->first);
            for (size_t i = 0; ts->rs[k] && i < l->ns; i++) {
                const struct rev_script *x = order_rev_script_find(ts->rs[k], ts->nrs[k], l->s[i].slug);
                if (!x || changed[i] || !same_kind(x, &l->s[i]) || strcmp(x->oid, ts->oids[i]) == 0)
                    continue;
                lint_add(l, l->s[i].rel, 1, "changed", "differs from the script %s %s%s%s: a "
                         "shipped script never changes (repair is a new slug; revoke this one)",
                         t < 0 ? "at" : "shipped in", rev_name(l, ts, t),
                         strcmp(x->path, l->s[i].rel) != 0 ? " as " : "",
                         strcmp(x->path, l->s[i].rel) != 0 ? x->path : "");
                changed[i] = 1;
            }
        }
        free(changed);
    }
    return l->oom ? EXIT_FAILED : check_lib(l, &l->g, ts->all, ts->nall, l->o->against);
}

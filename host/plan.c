/* plan.c: decides what a run does (DESIGN.md "What run does", steps 3-8).
 *
 * Owns the order of the decisions: fresh install, legacy seeding, the
 * retention floor, checksum reports, the walk (recorded, revoked, retired,
 * pending, background retries) and --only. Pure: no I/O, no clock (the
 * caller passes `now`), so every rule is testable on data. Must never plan
 * to overwrite an `ok` record except for an explicit --only re-run. */
#include "plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "defaults.h"
#include "exitcodes.h"

const char *step_kind_name(enum step_kind k)
{
    return k == STEP_RUN ? "run" : k == STEP_RECORD_REVOKED ? "record-revoked" : "skip";
}

void plan_free(struct plan *p)
{
    for (size_t i = 0; i < p->nseed; i++)
        free(p->seed[i].slug);
    free(p->seed);
    free(p->s);
    for (size_t i = 0; i < p->nwarnings; i++)
        free(p->warnings[i]);
    free(p->warnings);
    memset(p, 0, sizeof *p);
}

static int warn(struct plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int warn(struct plan *p, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char **nw = realloc(p->warnings, (p->nwarnings + 1) * sizeof *nw);
    if (!nw)
        return -1;
    p->warnings = nw;
    if (!(nw[p->nwarnings] = strdup(buf)))
        return -1;
    p->nwarnings++;
    return 0;
}

static struct step *add_step(struct plan *p, enum step_kind k, const char *slug,
                             const struct migration *m, const char *batch, const char *tier)
{
    struct step *ns = realloc(p->s, (p->n + 1) * sizeof *ns);
    if (!ns)
        return NULL;
    p->s = ns;
    struct step *s = &ns[p->n++];
    memset(s, 0, sizeof *s);
    s->kind = k;
    s->slug = slug;
    s->m = m;
    s->batch = batch;
    s->tier = tier;
    return s;
}

static int seed_record(struct plan *p, const char *slug, enum rec_state st, const char *batch,
                       const char *tier, const struct plan_opts *o)
{
    struct ledger_entry *ns = realloc(p->seed, (p->nseed + 1) * sizeof *ns);
    if (!ns)
        return -1;
    p->seed = ns;
    if (!(ns[p->nseed].slug = strdup(slug)))
        return -1;
    record_init(&ns[p->nseed].rec, st, o->now, batch, tier, o->image, NULL, NULL);
    p->nseed++;
    return 0;
}

void plan_record(const struct tree *t, const struct step *s, const struct plan_opts *o,
                 enum rec_state st, struct record *r)
{
    const struct migration *m = s->m;
    record_init(r, st, o->now, s->batch, s->tier, o->image, m ? m->sha256 : NULL,
                m ? (m->is_shell ? t->lib_sh : t->lib_lua) : NULL);
}

/* The record for slug, looking at what this plan seeds too. */
static enum rec_state state_of(const struct plan *p, const struct ledger *l, const char *slug,
                               const struct record **rec)
{
    *rec = ledger_find(l, slug);
    if (*rec)
        return (*rec)->state;
    for (size_t i = 0; i < p->nseed; i++)
        if (strcmp(p->seed[i].slug, slug) == 0) {
            *rec = &p->seed[i].rec;
            return p->seed[i].rec.state;
        }
    return REC_NONE;
}

static const char *tier_of(const struct migration *m) { return m ? m->tier : "pre-apply"; }

int plan_check_only(const struct tree *t, const char *only, char *msg, size_t len)
{
    if (tree_revoked(t, only)) {
        snprintf(msg, len, "--only %s: the slug is revoked and must never run", only);
        return EXIT_USAGE;
    }
    if (!tree_find(t, only)) {
        snprintf(msg, len, "--only %s: no such migration in this image", only);
        return EXIT_USAGE;
    }
    return 0;
}

int plan_build(const struct tree *t, const struct ledger *l, const struct plan_opts *o,
               struct plan *p)
{
    memset(p, 0, sizeof *p);
    const char *tier = o->tier ? o->tier : "pre-apply";
    int max_attempts = o->max_attempts > 0 ? o->max_attempts : DEFAULT_MAX_ATTEMPTS;
    const struct manifest *man = &t->man;

    /* --only is checked first: a request for something the image cannot do
     * is refused whatever the ledger says. */
    const struct migration *only = NULL;
    if (o->only) {
        if ((p->refuse = plan_check_only(t, o->only, p->refuse_msg, sizeof p->refuse_msg)))
            return 0;
        only = tree_find(t, o->only);
    }

    /* 3. Fresh install: record everything, run nothing (but an explicit
     * --only still runs its one slug). */
    if (!l->exists) {
        p->fresh_install = 1;
        for (size_t i = 0; i < man->n; i++)
            for (size_t j = 0; j < man->b[i].n; j++) {
                const struct batch_entry *e = &man->b[i].e[j];
                if (seed_record(p, e->slug, REC_SKIPPED_FRESH, man->b[i].name,
                                tier_of(tree_find(t, e->slug)), o) != 0)
                    return -1;
            }
        if (only) {
            struct step *s = add_step(p, STEP_RUN, only->slug, only, man->b[only->batch].name,
                                      only->tier);
            if (!s)
                return -1;
            snprintf(s->why, sizeof s->why, "re-run requested (--only)");
        }
        return 0;
    }

    /* Unparseable records are reported and left alone. */
    for (size_t i = 0; i < l->n; i++)
        if (l->e[i].rec.state == REC_UNKNOWN) {
            p->corrupt = 1;
            if (warn(p, "record m.%s cannot be read (%s): treated as recorded, state unknown; "
                        "re-run it with --only %s to rewrite it",
                     l->e[i].slug, l->e[i].rec.problem, l->e[i].slug) != 0)
                return -1;
        }

    /* 4. Legacy seeding, before the floor check. */
    if (l->has_version) {
        for (size_t i = 0; i < t->legacy.n; i++) {
            const struct legacy_entry *e = &t->legacy.e[i];
            if (e->number < l->version && !ledger_find(l, e->slug) &&
                seed_record(p, e->slug, REC_LEGACY, "00000-legacy", "pre-apply", o) != 0)
                return -1;
        }
    }

    /* 5. Retention floor. */
    for (size_t i = 0; i < man->n; i++)
        for (size_t j = 0; j < man->b[i].n; j++) {
            const struct batch_entry *e = &man->b[i].e[j];
            const struct record *rec;
            if (!e->retired || tree_revoked(t, e->slug) || state_of(p, l, e->slug, &rec) != REC_NONE)
                continue;
            const char *release = strcmp(man->b[i].name, "00000-legacy") == 0
                                      ? "the last release that ships the legacy migrations"
                                      : strchr(man->b[i].name, '-') + 1;
            p->refuse = EXIT_FLOOR;
            snprintf(p->refuse_msg, sizeof p->refuse_msg,
                     "this cluster has no record of '%s', retired in %s: it is older than this "
                     "release accepts; upgrade through %s first",
                     e->slug, man->b[i].name, release);
            return 0;
        }

    /* 6. Checksums of what ran. */
    for (size_t k = 0; k < t->n; k++) {
        const struct record *rec = ledger_find(l, t->m[k].slug);
        if (rec && rec->state == REC_OK && *rec->sha256 &&
            strcmp(rec->sha256, t->m[k].sha256) != 0 &&
            warn(p, "%s: recorded sha256 %.12s differs from the shipped script %.12s (a shipped "
                    "script must not change; repair is a new slug)",
                 t->m[k].slug, rec->sha256, t->m[k].sha256) != 0)
            return -1;
    }

    /* 8. Re-run one. */
    if (only) {
        const struct record *rec = ledger_find(l, only->slug);
        struct step *s = add_step(p, STEP_RUN, only->slug, only, man->b[only->batch].name,
                                  only->tier);
        if (!s)
            return -1;
        s->prev_attempts = rec ? rec->attempts : 0;
        snprintf(s->why, sizeof s->why, "re-run requested (--only)%s%s",
                 rec ? ", was " : "", rec ? rec_state_name(rec->state) : "");
        return 0;
    }

    /* 7. The walk. */
    for (size_t i = 0; i < man->n; i++)
        for (size_t j = 0; j < man->b[i].n; j++) {
            const struct batch_entry *e = &man->b[i].e[j];
            const struct migration *m = tree_find(t, e->slug);
            const char *bname = man->b[i].name;
            const struct record *rec;
            enum rec_state st = state_of(p, l, e->slug, &rec);
            struct step *s;
            if (tree_revoked(t, e->slug)) {
                s = add_step(p, st == REC_NONE ? STEP_RECORD_REVOKED : STEP_SKIP, e->slug, m,
                             bname, tier_of(m));
                if (!s)
                    return -1;
                if (st != REC_NONE)
                    snprintf(s->why, sizeof s->why, "revoked; recorded %s", rec_state_name(st));
                continue;
            }
            if (m && strcmp(m->tier, tier) != 0) {
                if (!(s = add_step(p, STEP_SKIP, e->slug, m, bname, m->tier)))
                    return -1;
                snprintf(s->why, sizeof s->why, "%s tier", m->tier);
                continue;
            }
            if (st == REC_FAILED && m && strcmp(m->tier, "background") == 0 &&
                rec->attempts < max_attempts) {
                if (!(s = add_step(p, STEP_RUN, e->slug, m, bname, m->tier)))
                    return -1;
                s->prev_attempts = rec->attempts;
                snprintf(s->why, sizeof s->why, "retry %ld of %d", rec->attempts + 1, max_attempts);
                continue;
            }
            if (st != REC_NONE) {
                if (!(s = add_step(p, STEP_SKIP, e->slug, m, bname, tier_of(m))))
                    return -1;
                if (st == REC_FAILED && rec->attempts >= max_attempts && m &&
                    strcmp(m->tier, "background") == 0)
                    snprintf(s->why, sizeof s->why, "failed %ld times; only --only re-runs it",
                             rec->attempts);
                else
                    snprintf(s->why, sizeof s->why, "recorded %s", rec_state_name(st));
                continue;
            }
            if (e->retired) {
                if (!(s = add_step(p, STEP_SKIP, e->slug, NULL, bname, "pre-apply")))
                    return -1;
                snprintf(s->why, sizeof s->why, "retired");
                continue;
            }
            if (!add_step(p, STEP_RUN, e->slug, m, bname, m->tier))
                return -1;
        }
    return 0;
}

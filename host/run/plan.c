/* plan.c: decides what a run does (DESIGN.md "What run does", steps 3-8).
 *
 * Owns the order of the decisions: fresh install, whether the ledger can be
 * trusted (every bad key, and the command that repairs it), operator skips,
 * legacy seeding, the retention floor, checksum reports, the walk (recorded,
 * revoked, retired, blocked by `requires`, pending, background retries) and
 * --only (with --force for a legacy slug that would stamp an older
 * `version`). Pure: no I/O, no clock (the caller passes `now`), so every
 * rule is testable on data. Must never plan to overwrite an `ok` record
 * except for an explicit --only re-run, nor run anything on a ledger it
 * cannot trust.
 * Prefixes: step_ (a plan's steps). */
#include "run/plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/defaults.h"
#include "base/exitcodes.h"
#include "base/mem.h"
#include "formats/manifest.h"

const char *step_kind_name(enum step_kind k)
{
    switch (k) {
    case STEP_RUN: return "run";
    case STEP_RECORD_REVOKED: return "record-revoked";
    case STEP_BLOCKED: return "blocked";
    case STEP_RECORD_SKIPPED: return "record-skipped";
    case STEP_SKIP: break;
    }
    return "skip";
}

void plan_free(struct plan *p)
{
    for (size_t i = 0; i < p->nseed; i++) {
        free(p->seed[i].slug);
        record_free(&p->seed[i].rec);
    }
    free(p->seed);
    free(p->s);
    for (size_t i = 0; i < p->nwarnings; i++)
        free(p->warnings[i]);
    free(p->warnings);
    for (size_t i = 0; i < p->nproblems; i++)
        free(p->problems[i]);
    free(p->problems);
    memset(p, 0, sizeof *p);
}

static int add_line(char ***v, size_t *n, const char *fmt, va_list ap)
{
    char buf[512];
    vsnprintf(buf, sizeof buf, fmt, ap);
    char **nv = mem_grow(*v, *n + 1, sizeof *nv);
    if (!nv)
        return -1;
    *v = nv;
    if (!(nv[*n] = strdup(buf)))
        return -1;
    (*n)++;
    return 0;
}

static int warn(struct plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int warn(struct plan *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = add_line(&p->warnings, &p->nwarnings, fmt, ap);
    va_end(ap);
    return rc;
}

static int problem(struct plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int problem(struct plan *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = add_line(&p->problems, &p->nproblems, fmt, ap);
    va_end(ap);
    p->corrupt = 1;
    return rc;
}

static void refuse(struct plan *p, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void refuse(struct plan *p, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->refuse_msg, sizeof p->refuse_msg, fmt, ap);
    va_end(ap);
    p->refuse = code;
}

static struct step *add_step(struct plan *p, enum step_kind k, const char *slug,
                             const struct migration *m, const char *batch, const char *tier)
{
    struct step *ns = mem_grow(p->s, p->n + 1, sizeof *ns);
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
    struct ledger_entry *ns = mem_grow(p->seed, p->nseed + 1, sizeof *ns);
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

/* The record for slug, looking at what this plan seeds and skips too (a
 * planned skip has no record yet: rec is then NULL). */
static enum rec_state state_of(const struct plan *p, const struct ledger *l, const char *slug,
                               const struct record **rec)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->s[i].kind == STEP_RECORD_SKIPPED && strcmp(p->s[i].slug, slug) == 0) {
            *rec = NULL;
            return REC_SKIPPED;
        }
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

/* A state that lets a slug requiring it run. */
static int state_done(enum rec_state st)
{
    return st == REC_OK || st == REC_LEGACY || st == REC_SKIPPED_FRESH;
}

int plan_blocked(const struct plan *p, const struct ledger *l, const struct migration *m,
                 plan_ran_fn ran, void *ud, char *why, size_t len)
{
    for (size_t r = 0; m && r < m->h.nrequires; r++) {
        const char *req = m->h.requires[r];
        const char *did = ran ? ran(ud, req) : NULL;
        if (did && strcmp(did, "ok") == 0)
            continue;
        const struct record *rec;
        enum rec_state st = state_of(p, l, req, &rec);
        if (!did && state_done(st))
            continue;
        snprintf(why, len, "blocked: requires %s (%s)", req,
                 did                    ? did
                 : st == REC_NONE       ? "not run"
                 : st == REC_UNKNOWN    ? "record unreadable"
                                        : rec_state_name(st));
        return 1;
    }
    return 0;
}

/* In the planner, a slug "ran" when an earlier step runs it: it is assumed
 * to succeed (the runner asks again with what happened). */
static const char *planned(void *ud, const char *slug)
{
    const struct plan *p = ud;
    for (size_t i = 0; i < p->n; i++) {
        if (strcmp(p->s[i].slug, slug) != 0)
            continue;
        if (p->s[i].kind == STEP_RUN)
            return "ok";
        if (p->s[i].kind == STEP_BLOCKED)
            return "blocked";
    }
    return NULL;
}

static const struct legacy_entry *legacy_of(const struct tree *t, const char *slug)
{
    for (size_t i = 0; i < t->legacy.n; i++)
        if (strcmp(t->legacy.e[i].slug, slug) == 0)
            return &t->legacy.e[i];
    return NULL;
}

static const char *tier_of(const struct migration *m) { return m ? m->tier : "pre-apply"; }

int plan_check_only(const struct tree *t, const char *only, const char *tier, char *msg,
                    size_t len)
{
    if (tree_revoked(t, only)) {
        snprintf(msg, len, "--only %s: the slug is revoked and must never run", only);
        return EXIT_USAGE;
    }
    const struct migration *m = tree_find(t, only);
    if (!m) {
        snprintf(msg, len, "--only %s: no such migration in this image", only);
        return EXIT_USAGE;
    }
    if (tier && strcmp(tier, m->tier) != 0) {
        snprintf(msg, len, "--only %s: it is in the %s tier, not the --tier %s asked for: drop "
                 "--tier (--only runs the slug in its own tier) or ask for --tier %s", only,
                 m->tier, tier, m->tier);
        return EXIT_USAGE;
    }
    return 0;
}

int plan_check_skip(const struct tree *t, const char *slug, char *msg, size_t len)
{
    if (tree_revoked(t, slug)) {
        snprintf(msg, len, "skip %s: the slug is revoked: it never runs, there is nothing to skip",
                 slug);
        return EXIT_USAGE;
    }
    if (!tree_find(t, slug)) {
        snprintf(msg, len, "skip %s: no such migration in this image", slug);
        return EXIT_USAGE;
    }
    return 0;
}

const char *plan_kubectl_remove(const struct plan_opts *o, const char *path, char *buf,
                                size_t len)
{
    snprintf(buf, len, "kubectl -n %s patch configmap %s --type=json -p "
             "'[{\"op\":\"remove\",\"path\":\"%s\"}]'",
             o->ns ? o->ns : "cozy-system", o->ledger ? o->ledger : "cozystack-version", path);
    return buf;
}

void plan_repair(const struct tree *t, const struct plan_opts *o, const char *slug, char *buf,
                 size_t len)
{
    char path[200], cmd[400];
    snprintf(path, sizeof path, "/data/m.%s", slug);
    size_t bi, ei;
    int listed = t && slug_valid(slug) && tree_locate(t, slug, &bi, &ei) >= 0;
    if (slug_valid(slug) && (!t || (tree_find(t, slug) && !tree_revoked(t, slug)))) {
        snprintf(buf, len, "repair it with 'cozy-migrate run --only %s' or 'cozy-migrate skip %s "
                 "--reason TEXT'", slug, slug);
    } else if (listed && !tree_revoked(t, slug)) {
        /* Retired: removing the key would leave the cluster below the
         * retention floor, so a valid record takes its place. */
        snprintf(buf, len, "this image no longer ships '%s' (retired), so only a person can "
                 "repair it: write a valid record by hand, e.g. kubectl -n %s patch configmap %s "
                 "--type=merge -p '{\"data\":{\"m.%s\":\"{\\\"state\\\":\\\"skipped\\\","
                 "\\\"reason\\\":\\\"Operator\\\",\\\"message\\\":\\\"record repaired by "
                 "hand\\\"}\"}}'", slug, o->ns ? o->ns : "cozy-system",
                 o->ledger ? o->ledger : "cozystack-version", slug);
    } else {
        snprintf(buf, len, "%s, so no --only or skip can rewrite it: remove the key by hand (the "
                 "engine never deletes keys): %s",
                 !slug_valid(slug) ? "it is not m.<slug>"
                 : listed          ? "the slug is revoked (the next run records it so)"
                                   : "no migration of this image has that slug",
                 plan_kubectl_remove(o, path, cmd, sizeof cmd));
    }
}

/* Lists every key that makes the ledger untrustworthy. A bad `version` or
 * binaryData cannot be repaired by this engine (it never writes them); a
 * bad record is repaired by re-running or skipping its slug, or, when no
 * command can name it, by a person (the repair says how). */
static int find_problems(const struct tree *t, const struct ledger *l,
                         const struct plan_opts *o, struct plan *p)
{
    long last = t->legacy.n ? t->legacy.e[t->legacy.n - 1].number : 0;
    if (l->version_bad &&
        problem(p, "key 'version' is \"%s\", not a plain decimal from 0 to %ld (a person sets "
                   "it: the last legacy migration that ran plus one)",
                l->version_raw, last ? last + 1 : LEGACY_NUMBER_MAX + 1L) != 0)
        return -1;
    if (l->has_version && t->legacy.n && l->version > last + 1 &&
        problem(p, "key 'version' is %ld, above the last legacy migration (%ld) plus one (a "
                   "person sets it: the last legacy migration that ran plus one)",
                l->version, last) != 0)
        return -1;
    char cmd[400];
    if (l->binary_keys &&
        problem(p, "key '%s'%s under binaryData, where the engine never looks: move each into "
                   "data, or remove binaryData by hand: %s",
                l->binary_key, l->binary_keys > 1 ? " (and more) are" : " is",
                plan_kubectl_remove(o, "/binaryData", cmd, sizeof cmd)) != 0)
        return -1;
    p->nversion = p->nproblems;
    char repair[800];
    for (size_t i = 0; i < l->n; i++) {
        if (l->e[i].rec.state != REC_UNKNOWN)
            continue;
        plan_repair(t, o, l->e[i].slug, repair, sizeof repair);
        if (problem(p, "m.%s cannot be read (%s): %s", l->e[i].slug, l->e[i].rec.problem,
                    repair) != 0)
            return -1;
    }
    return 0;
}

/* Whether this invocation rewrites slug's record (--only, or a skip). */
static int repairs(const struct plan_opts *o, const char *slug)
{
    if (o->only && strcmp(o->only, slug) == 0)
        return 1;
    for (size_t i = 0; i < o->nskip; i++)
        if (strcmp(o->skip[i], slug) == 0)
            return 1;
    return 0;
}

/* Refuses when the ledger cannot be trusted for what this plan does. A bad
 * `version` stops everything but the skip command (which runs nothing). A
 * bad record stops a walk and an --only of another slug; --only or a skip
 * of that slug is its repair, and other bad records are then reported. */
static int check_trust(const struct tree *t, const struct ledger *l, const struct plan_opts *o,
                       struct plan *p)
{
    if (find_problems(t, l, o, p) != 0)
        return -1;
    if (!p->nproblems || o->survey)
        return 0;
    size_t nversion = 0, nleft = 0;
    int repairing = 0;
    nversion = p->nversion;
    for (size_t i = 0; i < l->n; i++) {
        if (l->e[i].rec.state != REC_UNKNOWN)
            continue;
        if (repairs(o, l->e[i].slug))
            repairing = 1;
        else
            nleft++;
    }
    int tolerate_records = o->skip_only || (o->only && repairing);
    if (o->skip_only || (!nversion && (!nleft || tolerate_records))) {
        for (size_t i = 0; i < l->n; i++) {
            if (l->e[i].rec.state != REC_UNKNOWN || repairs(o, l->e[i].slug))
                continue;
            char repair[800];
            plan_repair(t, o, l->e[i].slug, repair, sizeof repair);
            if (warn(p, "record m.%s cannot be read (%s); it stays as it is: %s", l->e[i].slug,
                     l->e[i].rec.problem, repair) != 0)
                return -1;
        }
        for (size_t i = 0; i < nversion; i++)
            if (warn(p, "%s", p->problems[i]) != 0)
                return -1;
        return 0;
    }
    /* Every key in the way, on one line: the version first, then the
     * records this run does not rewrite. */
    size_t at, cap = sizeof p->refuse_msg, listed = 0;
    at = (size_t)snprintf(p->refuse_msg, cap, "the ledger cannot be trusted, so nothing runs: ");
    for (size_t i = 0; i < nversion && at < cap; i++, listed++)
        at += (size_t)snprintf(p->refuse_msg + at, cap - at, "%s%s", listed ? "; " : "",
                               p->problems[i]);
    for (size_t i = 0, k = nversion; i < l->n && at < cap; i++) {
        if (l->e[i].rec.state != REC_UNKNOWN)
            continue;
        const char *pr = p->problems[k++];
        if (repairs(o, l->e[i].slug))
            continue;
        at += (size_t)snprintf(p->refuse_msg + at, cap - at, "%s%s", listed++ ? "; " : "", pr);
    }
    if (at >= cap)
        memcpy(p->refuse_msg + cap - 4, "...", 4);
    p->refuse = EXIT_LEDGER;
    return 0;
}

/* Operator skips: refused for a slug that ran (or counts as run), planned
 * as a record-skipped step otherwise (a skip already recorded with the same
 * message is left as it is). */
static int plan_skips(const struct tree *t, const struct ledger *l, const struct plan_opts *o,
                      struct plan *p)
{
    const struct manifest *man = &t->man;
    for (size_t i = 0; i < o->nskip; i++) {
        const struct migration *m = tree_find(t, o->skip[i]);
        const struct record *rec;
        enum rec_state st = state_of(p, l, m->slug, &rec);
        const struct legacy_entry *le = legacy_of(t, m->slug);
        if (st == REC_NONE && le && l->has_version && le->number < l->version)
            st = REC_LEGACY; /* seeded on the next run */
        if (state_done(st)) {
            refuse(p, EXIT_REFUSED,
                   "skip %s: it is recorded %s; a migration that ran (or counts as run) is never "
                   "skipped",
                   m->slug, rec_state_name(st));
            return 0;
        }
        struct step *s;
        if (st == REC_SKIPPED && rec && o->skip_reason && strcmp(rec->message, o->skip_reason) == 0) {
            if (!(s = add_step(p, STEP_SKIP, m->slug, m, man->b[m->batch].name, m->tier)))
                return -1;
            snprintf(s->why, sizeof s->why, "recorded skipped, by %.120s", *rec->by ? rec->by : "?");
            continue;
        }
        if (!(s = add_step(p, STEP_RECORD_SKIPPED, m->slug, m, man->b[m->batch].name, m->tier)))
            return -1;
        s->prev_attempts = rec ? rec->attempts : 0;
        snprintf(s->why, sizeof s->why, "skipped by the operator%s%s", rec ? ", was " : "",
                 rec ? rec_state_name(st) : "");
    }
    return 0;
}

/* 3. Fresh install: record everything, run nothing (but an explicit
 * --only still runs its one slug). A skip has nothing to skip. -1 when out
 * of memory. */
static int plan_fresh(const struct tree *t, const struct ledger *l, const struct plan_opts *o,
                      struct plan *p, const struct migration *only)
{
    const struct manifest *man = &t->man;
    if (o->skip_only) {
        refuse(p, EXIT_REFUSED,
               "skip %s: there is no ledger yet; the first run of a fresh install records "
               "every migration skipped-fresh-install",
               o->skip[0]);
        return 0;
    }
    p->fresh_install = 1;
    for (size_t i = 0; i < man->n; i++)
        for (size_t j = 0; j < man->b[i].n; j++) {
            const struct batch_entry *e = &man->b[i].e[j];
            if (seed_record(p, e->slug, REC_SKIPPED_FRESH, man->b[i].name,
                            tier_of(tree_find(t, e->slug)), o) != 0)
                return -1;
        }
    if (o->nskip && warn(p, "fresh install: every migration is recorded "
                            "skipped-fresh-install; SKIP has nothing to skip") != 0)
        return -1;
    if (only) {
        struct step *s = add_step(p, STEP_RUN, only->slug, only, man->b[only->batch].name,
                                  only->tier);
        if (!s)
            return -1;
        snprintf(s->why, sizeof s->why, "re-run requested (--only)");
    }
    return 0;
}

/* The batch --as-installed-at names in t's manifest: its index (the seeds
 * are every batch up to it), -1 for "none" (nothing seeded), or -2 when no
 * batch is so called (then msg lists those that are). */
static long plan_installed_batch(const struct tree *t, const char *at, char *msg, size_t len)
{
    const struct manifest *man = &t->man;
    if (strcmp(at, "none") == 0)
        return -1;
    if (strcmp(at, "latest") == 0) {
        long last = -1;
        for (size_t i = 0; i < man->n; i++)
            if (strcmp(man->b[i].name, UNTAGGED_BATCH) != 0)
                last = (long)i;
        return last;
    }
    for (size_t i = 0; i < man->n; i++)
        if (strcmp(man->b[i].name, at) == 0 || strcmp(strchr(man->b[i].name, '-') + 1, at) == 0)
            return (long)i;
    size_t off = (size_t)snprintf(msg, len, "--as-installed-at %.100s: no batch of the manifest is "
                                  "that release; it has: ", at);
    for (size_t i = 0; i < man->n && off < len; i++)
        off += (size_t)snprintf(msg + off, len - off, "%s, ", strchr(man->b[i].name, '-') + 1);
    if (off < len)
        snprintf(msg + off, len - off, "latest (the last but the untagged one) and none");
    return -2;
}

/* 3, for a local run (--as-installed-at): the seeds of a fresh install at
 * that release; the walk then runs what came after it. -1 when out of
 * memory. */
static int plan_installed_at(const struct tree *t, const struct plan_opts *o, struct plan *p)
{
    const struct manifest *man = &t->man;
    long last = plan_installed_batch(t, o->installed_at, p->refuse_msg, sizeof p->refuse_msg);
    if (last == -2) {
        p->refuse = EXIT_USAGE;
        return 0;
    }
    p->fresh_install = 1;
    snprintf(p->installed_at, sizeof p->installed_at, "%s", last < 0 ? "none" : man->b[last].name);
    for (long i = 0; i <= last; i++)
        for (size_t j = 0; j < man->b[i].n; j++) {
            const struct batch_entry *e = &man->b[i].e[j];
            if (seed_record(p, e->slug, REC_SKIPPED_FRESH, man->b[i].name,
                            tier_of(tree_find(t, e->slug)), o) != 0)
                return -1;
        }
    return 0;
}

/* 4. Legacy seeding, before the floor check. -1 when out of memory. */
static int plan_legacy(const struct tree *t, const struct ledger *l, const struct plan_opts *o,
                       struct plan *p)
{
    if (l->has_version) {
        for (size_t i = 0; i < t->legacy.n; i++) {
            const struct legacy_entry *e = &t->legacy.e[i];
            if (e->number < l->version && !ledger_find(l, e->slug) && !repairs(o, e->slug) &&
                seed_record(p, e->slug, REC_LEGACY, LEGACY_BATCH, "pre-apply", o) != 0)
                return -1;
        }
    }

    return 0;
}

/* 5. Retention floor: a refusal when the cluster is older than this release
 * accepts. */
static int plan_floor(const struct tree *t, const struct ledger *l, const struct plan_opts *o,
                      struct plan *p)
{
    const struct manifest *man = &t->man;
    for (size_t i = 0; i < man->n; i++)
        for (size_t j = 0; j < man->b[i].n; j++) {
            const struct batch_entry *e = &man->b[i].e[j];
            const struct record *rec;
            if (!e->retired || tree_revoked(t, e->slug) || state_of(p, l, e->slug, &rec) != REC_NONE ||
                o->survey)
                continue;
            const char *release = strcmp(man->b[i].name, LEGACY_BATCH) == 0
                                      ? "the last release that ships the legacy migrations"
                                      : strchr(man->b[i].name, '-') + 1;
            refuse(p, EXIT_FLOOR,
                   "this cluster has no record of '%s', retired in %s: it is older than this "
                   "release accepts; upgrade through %s first",
                   e->slug, man->b[i].name, release);
            return 0;
        }

    return 0;
}

/* 6. Checksums of what ran, and of the shared code it ran with: warnings.
 * -1 when out of memory. */
static int plan_checksums(const struct tree *t, const struct ledger *l, const struct plan_opts *o,
                          struct plan *p)
{
    for (size_t k = 0; k < t->n; k++) {
        const struct record *rec = ledger_find(l, t->m[k].slug);
        int untagged = strcmp(t->man.b[t->m[k].batch].name, UNTAGGED_BATCH) == 0;
        if (untagged && o->only && strcmp(o->only, t->m[k].slug) == 0)
            continue; /* the edited script is what this run runs again */
        if (rec && rec->state == REC_OK && *rec->sha256 &&
            strcmp(rec->sha256, t->m[k].sha256) != 0 &&
            warn(p, "%s: recorded sha256 %.12s differs from the %s script %.12s (%s%s%s)",
                 t->m[k].slug, rec->sha256, untagged ? "untagged" : "shipped", t->m[k].sha256,
                 untagged ? "edited since it ran; no release carries it yet, so on a development "
                            "cluster 'cozy-migrate run --local --only "
                          : "a shipped script must not change; repair is a new slug",
                 untagged ? t->m[k].slug : "", untagged ? "' runs it again" : "") != 0)
            return -1;
    }

    /* ... and of the shared code they ran with (legacy-sh/lib/ for shell,
     * the stdlib that runs for Lua): one line per kind, since one change of
     * it concerns every record of that kind. */
    for (int shell = 1; shell >= 0; shell--) {
        const char *lib = shell ? t->lib_sh : t->lib_lua;
        char names[200] = "";
        size_t n = 0, at = 0;
        for (size_t k = 0; k < t->n; k++) {
            const struct record *rec = ledger_find(l, t->m[k].slug);
            if (t->m[k].is_shell != shell || !rec || rec->state != REC_OK || !*rec->lib_sha256 ||
                strcmp(rec->lib_sha256, lib) == 0)
                continue;
            if (n++ < 5 && at < sizeof names)
                at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", n > 1 ? ", " : "",
                                       t->m[k].slug);
        }
        if (n && warn(p, "%zu ok record%s (%s%s) ran with shared code other than the %s shipped "
                         "now (recorded lib_sha256 differs from %.12s); not re-run: repair is a "
                         "new slug",
                      n, n == 1 ? "" : "s", names, n > 5 ? ", ..." : "",
                      shell ? "legacy-sh/lib/" : "stdlib/", lib) != 0)
            return -1;
    }

    return 0;
}

/* 8. Re-run one (--only). -1 when out of memory. */
static int plan_only(const struct tree *t, const struct ledger *l, const struct plan_opts *o,
                     struct plan *p, const struct migration *only)
{
    const struct manifest *man = &t->man;
    const struct record *rec = ledger_find(l, only->slug);
    const struct legacy_entry *le = legacy_of(t, only->slug);
    /* A legacy script stamps `version` with its number plus one. */
    if (le && l->has_version && le->number + 1 < l->version && !o->force) {
        refuse(p, EXIT_REFUSED,
               "--only %s: legacy migration %ld stamps version %ld when it runs, older than "
               "the ledger's %ld (older tooling reads it); add --force to run it anyway",
               only->slug, le->number, le->number + 1, l->version);
        return 0;
    }
    char why[160];
    int blocked = plan_blocked(p, l, only, NULL, NULL, why, sizeof why);
    struct step *s = add_step(p, blocked && !o->force ? STEP_BLOCKED : STEP_RUN, only->slug,
                              only, man->b[only->batch].name, only->tier);
    if (!s)
        return -1;
    s->prev_attempts = rec ? rec->attempts : 0;
    if (s->kind == STEP_BLOCKED)
        snprintf(s->why, sizeof s->why, "%s", why);
    else
        snprintf(s->why, sizeof s->why, "re-run requested (--only)%s%s%s",
                 rec ? ", was " : "", rec ? rec_state_name(rec->state) : "",
                 blocked ? ", --force past its requires" : "");
    return 0;
}

/* 7. The walk: every manifest entry of the tier, in order. In the
 * background tier a failed on-error=abort slug past its attempts holds
 * every background slug after it (DESIGN.md step 7) until it is recorded ok
 * or skipped. -1 when out of memory. */
static int plan_walk(const struct tree *t, const struct ledger *l, const struct plan_opts *o,
                     struct plan *p, const char *tier, int max_attempts)
{
    const struct manifest *man = &t->man;
    const char *held_by = NULL;
    long held_attempts = 0;
    /* the operator's skips, planned before the walk (only they can repeat a
     * slug of it: asking every step so far made the walk quadratic) */
    size_t skips = p->n;
    for (size_t i = 0; i < man->n; i++)
        for (size_t j = 0; j < man->b[i].n; j++) {
            const struct batch_entry *e = &man->b[i].e[j];
            const struct migration *m = tree_find(t, e->slug);
            const char *bname = man->b[i].name;
            const struct record *rec;
            enum rec_state st = state_of(p, l, e->slug, &rec);
            struct step *s;
            char why[160];
            int already = 0;
            for (size_t k = 0; k < skips && !already; k++)
                already = strcmp(p->s[k].slug, e->slug) == 0;
            if (already)
                continue; /* an operator skip, planned above */
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
            if (held_by && m && st != REC_NONE && st != REC_FAILED) {
                /* recorded: nothing to hold */
            } else if (held_by && m && !e->retired) {
                if (!(s = add_step(p, STEP_BLOCKED, e->slug, m, bname, m->tier)))
                    return -1;
                s->prev_attempts = rec ? rec->attempts : 0;
                snprintf(s->why, sizeof s->why, "held: %.60s failed %ld times, on-error=abort, "
                         "until recorded ok or skipped", held_by, held_attempts);
                continue;
            }
            if (st == REC_FAILED && m && strcmp(m->tier, "background") == 0 &&
                rec->attempts < max_attempts) {
                int blocked = plan_blocked(p, l, m, planned, p, why, sizeof why);
                if (!(s = add_step(p, blocked ? STEP_BLOCKED : STEP_RUN, e->slug, m, bname, m->tier)))
                    return -1;
                s->prev_attempts = rec->attempts;
                if (blocked)
                    snprintf(s->why, sizeof s->why, "%s", why);
                else
                    snprintf(s->why, sizeof s->why, "retry %ld of %d", rec->attempts + 1,
                             max_attempts);
                continue;
            }
            if (st != REC_NONE) {
                if (!(s = add_step(p, STEP_SKIP, e->slug, m, bname, tier_of(m))))
                    return -1;
                if (st == REC_FAILED && rec->attempts >= max_attempts && m &&
                    strcmp(m->tier, "background") == 0) {
                    snprintf(s->why, sizeof s->why, "failed %ld times; only --only re-runs it",
                             rec->attempts);
                    if (m->h.on_error == ON_ERROR_ABORT && !held_by) {
                        held_by = m->slug;
                        held_attempts = rec->attempts;
                    }
                }
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
            int blocked = plan_blocked(p, l, m, planned, p, why, sizeof why);
            if (!(s = add_step(p, blocked ? STEP_BLOCKED : STEP_RUN, e->slug, m, bname, m->tier)))
                return -1;
            if (blocked)
                snprintf(s->why, sizeof s->why, "%s", why);
        }
    return 0;
}

int plan_build(const struct tree *t, const struct ledger *l, const struct plan_opts *o,
               struct plan *p)
{
    memset(p, 0, sizeof *p);
    const char *tier = o->tier ? o->tier : "pre-apply";
    int max_attempts = o->max_attempts > 0 ? o->max_attempts : DEFAULT_MAX_ATTEMPTS;

    /* --only and the skips are checked first: a request for something the
     * image cannot do is refused whatever the ledger says. */
    const struct migration *only = NULL;
    if (o->only) {
        if ((p->refuse = plan_check_only(t, o->only, o->tier_given ? tier : NULL, p->refuse_msg,
                                         sizeof p->refuse_msg)))
            return 0;
        only = tree_find(t, o->only);
    }
    for (size_t i = 0; i < o->nskip; i++) {
        if ((p->refuse = plan_check_skip(t, o->skip[i], p->refuse_msg, sizeof p->refuse_msg)))
            return 0;
        if (only && strcmp(o->skip[i], only->slug) == 0) {
            refuse(p, EXIT_USAGE, "%s is both skipped and requested with --only", only->slug);
            return 0;
        }
    }

    /* 3. (A local run told how the cluster was installed seeds that much,
     * then goes on as on a ledger that records it.) */
    if (!l->exists && !o->installed_at)
        return plan_fresh(t, l, o, p, only);
    if (!l->exists && o->installed_at && !o->skip_only) {
        if (plan_installed_at(t, o, p) != 0)
            return -1;
        if (p->refuse)
            return 0;
    }
    /* Every bad key is named; a ledger that cannot be trusted runs nothing. */
    if (check_trust(t, l, o, p) != 0)
        return -1;
    if (p->refuse)
        return 0;

    /* Operator skips, before the walk, which then sees them as recorded. */
    if (plan_skips(t, l, o, p) != 0)
        return -1;
    if (p->refuse || o->skip_only)
        return 0;

    /* 4, 5, 6: legacy seeding, the retention floor, the checksums. */
    if (plan_legacy(t, l, o, p) != 0 || plan_floor(t, l, o, p) != 0)
        return -1;
    if (p->refuse)
        return 0;
    if (plan_checksums(t, l, o, p) != 0)
        return -1;
    /* 8 (a re-run of one slug replaces the walk), else 7. */
    return only ? plan_only(t, l, o, p, only) : plan_walk(t, l, o, p, tier, max_attempts);
}

/* runner.c: executes a plan against the cluster.
 *
 * Owns the order of effects in `run`: validate the tree, take the lease,
 * read the ledger fresh, seed, then for each step run the migration in a
 * child and record the outcome (the parent alone writes the ledger, after
 * the child has ended), with a progress line and an Event each. Also the
 * read-only `plan` and `status`. Must never record a migration that did not
 * succeed as ok, record anything after an abort, or write in dry run. */
#include "runner.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "exitcodes.h"
#include "ledger.h"
#include "lock.h"
#include "log.h"
#include "plan.h"
#include "rest.h"
#include "tree.h"
#include "util.h"

#define DEFAULT_TIMEOUT 600.0

static const char *prog = "cozy-migrate";

static void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fatal(const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s\n", prog, buf);
}

struct ctx {
    const struct runner_opts *o;
    struct rest_client *rest;
    struct tree t;
    struct ledger l;
    struct lock lk;
    size_t ledger_bytes;
    int size_warned;        /* the 80% warning is given once a run */
    int lock_lost;
};

static struct rest_client *connect_cluster(const struct runner_opts *o)
{
    char err[1024];
    struct rest_policy p = {o->k.request_timeout, o->k.max_attempts, o->k.retry_budget};
    struct rest_client *c = rest_new(&o->k.cfg, &p, err, sizeof err);
    if (!c)
        fatal("%s", err);
    return c;
}

/* ---- output ------------------------------------------------------------- */

static void progress(const struct ctx *c, size_t k, size_t n, const char *tier, const char *slug,
                     const char *outcome, long ms, const char *detail)
{
    if (c->o->json_output) {
        cJSON *j = cJSON_CreateObject();
        char ts[32];
        now_rfc3339(ts);
        if (j && cJSON_AddStringToObject(j, "ts", ts) && cJSON_AddNumberToObject(j, "step", (double)k) &&
            cJSON_AddNumberToObject(j, "steps", (double)n) && cJSON_AddStringToObject(j, "tier", tier) &&
            cJSON_AddStringToObject(j, "migration", slug) &&
            cJSON_AddStringToObject(j, "outcome", outcome) &&
            (ms < 0 || cJSON_AddNumberToObject(j, "duration_ms", (double)ms)) &&
            (!detail || cJSON_AddStringToObject(j, "detail", detail))) {
            char *s = cJSON_PrintUnformatted(j);
            if (s)
                printf("%s\n", s);
            cJSON_free(s);
        }
        cJSON_Delete(j);
    } else {
        printf("[%zu/%zu] %s %s ... %s", k, n, tier, slug, outcome);
        if (ms >= 0)
            printf(" (%ld ms)", ms);
        if (detail)
            printf(": %s", detail);
        printf("\n");
    }
    fflush(stdout);
}

/* An Event on the ledger ConfigMap, so `kubectl describe` shows the history.
 * Best effort: a failed Event is logged, never fatal. */
static void event(struct ctx *c, const char *type, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void event(struct ctx *c, const char *type, const char *reason, const char *fmt, ...)
{
    if (c->o->k.dry_run || !c->l.exists)
        return;
    char msg[1024], ts[32], gen[160], path[512], host[128] = "cozy-migrate";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    utf8_clip(msg);
    now_rfc3339(ts);
    gethostname(host, sizeof host - 1);
    const char *ns = c->o->k.ledger_namespace, *name = c->o->k.ledger_name;
    snprintf(gen, sizeof gen, "%s.", name);
    cJSON *e = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(e, "metadata");
    cJSON *inv = cJSON_AddObjectToObject(e, "involvedObject");
    cJSON *src = cJSON_AddObjectToObject(e, "source");
    if (!meta || !inv || !src || !cJSON_AddStringToObject(e, "apiVersion", "v1") ||
        !cJSON_AddStringToObject(e, "kind", "Event") ||
        !cJSON_AddStringToObject(meta, "generateName", gen) ||
        !cJSON_AddStringToObject(meta, "namespace", ns) ||
        !cJSON_AddStringToObject(inv, "apiVersion", "v1") ||
        !cJSON_AddStringToObject(inv, "kind", "ConfigMap") ||
        !cJSON_AddStringToObject(inv, "name", name) ||
        !cJSON_AddStringToObject(inv, "namespace", ns) ||
        (*c->l.uid && !cJSON_AddStringToObject(inv, "uid", c->l.uid)) ||
        !cJSON_AddStringToObject(e, "reason", reason) || !cJSON_AddStringToObject(e, "message", msg) ||
        !cJSON_AddStringToObject(e, "type", type) ||
        !cJSON_AddStringToObject(src, "component", "cozy-migrate") ||
        !cJSON_AddStringToObject(e, "firstTimestamp", ts) ||
        !cJSON_AddStringToObject(e, "lastTimestamp", ts) || !cJSON_AddNumberToObject(e, "count", 1) ||
        !cJSON_AddStringToObject(e, "reportingComponent", "cozy-migrate") ||
        !cJSON_AddStringToObject(e, "reportingInstance", host)) {
        cJSON_Delete(e);
        return;
    }
    char *body = cJSON_PrintUnformatted(e);
    cJSON_Delete(e);
    if (!body)
        return;
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/events", ns);
    struct rest_result r;
    if (rest_do(c->rest, "POST", path, NULL, "application/json", body, strlen(body), 0, 30, &r) != 0) {
        char m[2300];
        rest_error_string(&r.err, m, sizeof m);
        log_warn("could not record an Event on the ledger: %s", m);
    }
    rest_result_free(&r);
    free(body);
}

/* ---- ledger access ------------------------------------------------------ */

static int read_ledger(struct ctx *c)
{
    long code;
    char err[2600];
    ledger_free(&c->l);
    if (ledger_read(c->rest, c->o->k.ledger_namespace, c->o->k.ledger_name, &c->l, &code, err,
                    sizeof err) != 0) {
        fatal("%s", err);
        return code == -2 ? EXIT_LEDGER : EXIT_CLUSTER;
    }
    c->ledger_bytes = c->l.bytes;
    return 0;
}

static int write_record(struct ctx *c, const char *slug, const struct record *r)
{
    if (c->o->k.dry_run)
        return 0;
    char err[2600];
    if (ledger_put(c->rest, c->o->k.ledger_namespace, c->o->k.ledger_name, slug, r, err,
                   sizeof err) != 0) {
        fatal("recording %s: %s", slug, err);
        return -1;
    }
    char *v = record_format(r);
    c->ledger_bytes += strlen(slug) + 2 + (v ? strlen(v) : 0);
    free(v);
    if (!c->size_warned && c->ledger_bytes > LEDGER_LIMIT * 8 / 10) {
        c->size_warned = 1;
        log_warn("the ledger %s/%s holds about %zu KiB, past 80%% of the 1 MiB object limit",
                 c->o->k.ledger_namespace, c->o->k.ledger_name, c->ledger_bytes / 1024);
    }
    return 0;
}

static void base_record(const struct ctx *c, struct record *r, enum rec_state st, const struct step *s)
{
    memset(r, 0, sizeof *r);
    r->state = st;
    now_rfc3339(r->at);
    snprintf(r->batch, sizeof r->batch, "%s", s->batch);
    snprintf(r->tier, sizeof r->tier, "%s", s->tier);
    snprintf(r->image, sizeof r->image, "%s", c->o->image ? c->o->image : "");
    if (s->m) {
        snprintf(r->sha256, sizeof r->sha256, "%s", s->m->sha256);
        snprintf(r->lib_sha256, sizeof r->lib_sha256, "%s",
                 s->m->is_shell ? c->t.lib_sh : c->t.lib_lua);
    }
}

static void renew_tick(void *ud)
{
    struct ctx *c = ud;
    char err[2600];
    if (lock_renew(&c->lk, err, sizeof err) != 0 && !c->lock_lost) {
        c->lock_lost = 1;
        log_error("%s", err);
    }
}

/* ---- run ---------------------------------------------------------------- */

static int execute(struct ctx *c, const struct step *s, size_t k, size_t n, int *failed_warn)
{
    const struct runner_opts *o = c->o;
    const struct migration *m = s->m;
    if (o->k.dry_run && m->is_shell) {
        progress(c, k, n, s->tier, s->slug, "not dry-runnable (shell), not executed", -1, NULL);
        return 0;
    }
    char env_ns[256], env_slug[128], env_dry[32];
    snprintf(env_ns, sizeof env_ns, "NAMESPACE=%s", o->k.ledger_namespace);
    snprintf(env_slug, sizeof env_slug, "MIGRATION_SLUG=%s", s->slug);
    snprintf(env_dry, sizeof env_dry, "DRY_RUN=%s", o->k.dry_run ? "1" : "");
    char *env[] = {env_ns, env_slug, env_dry, NULL};
    char workdir[4096];
    snprintf(workdir, sizeof workdir, "%s/legacy-sh", c->t.root);
    struct child_spec spec = {
        .slug = s->slug,
        .path = m->path,
        .is_shell = m->is_shell,
        .workdir = m->is_shell ? workdir : NULL,
        .env = env,
        .timeout_s = o->timeout > 0 ? o->timeout : m->h.timeout > 0 ? m->h.timeout : DEFAULT_TIMEOUT,
        .grace_s = o->grace,
        .lua_mem_limit = o->memory,
        .tick = o->k.dry_run ? NULL : renew_tick,
        /* Renew well inside the lease, however short it is. */
        .tick_every = o->lease_duration / 4.0 < 2 ? o->lease_duration / 4.0 : 2,
        .ud = c,
    };
    if (!o->json_output) {
        printf("[%zu/%zu] %s %s ... running%s%s%s\n", k, n, s->tier, s->slug, *s->why ? " (" : "",
               s->why, *s->why ? ")" : "");
        fflush(stdout);
    }
    struct child_result res;
    child_run(&spec, &res);
    struct record r;
    int ok = res.outcome == CHILD_OK;
    base_record(c, &r, ok ? REC_OK : REC_FAILED, s);
    r.attempts = s->prev_attempts + 1;
    r.duration_ms = res.duration_ms;
    if (!ok) {
        snprintf(r.reason, sizeof r.reason, "%s", res.reason ? res.reason : "Failed");
        snprintf(r.message, sizeof r.message, "%s", res.message);
        utf8_clip(r.message);
        if (res.tail) {
            size_t tl = strlen(res.tail);
            const char *from = tl >= sizeof r.output ? res.tail + tl - (sizeof r.output - 1) : res.tail;
            snprintf(r.output, sizeof r.output, "%s", utf8_start(from));
        }
    }
    child_result_free(&res);
    if (c->lock_lost) {
        fatal("lost the runner lock while %s ran; not recording it", s->slug);
        return EXIT_LOCK;
    }
    if (ok) {
        progress(c, k, n, s->tier, s->slug, o->k.dry_run ? "ok (dry run)" : "ok", r.duration_ms, NULL);
        if (write_record(c, s->slug, &r) != 0)
            return EXIT_CLUSTER;
        event(c, "Normal", "MigrationSucceeded", "%s (%s, batch %s) succeeded in %ld ms", s->slug,
              s->tier, s->batch, r.duration_ms);
        return 0;
    }
    int abort = m->h.on_error == ON_ERROR_ABORT;
    char detail[1200];
    snprintf(detail, sizeof detail, "%s: %s", r.reason, r.message);
    utf8_clip(detail);
    progress(c, k, n, s->tier, s->slug, abort ? "FAILED (abort)" : "FAILED (warn)", r.duration_ms,
             detail);
    event(c, "Warning", "MigrationFailed", "%s (%s) failed, on-error=%s: %s: %s", s->slug, s->tier,
          abort ? "abort" : "warn", r.reason, r.message);
    if (abort) {
        fatal("%s failed and its on-error is abort: stopping; nothing is recorded, so it runs "
              "again next time",
              s->slug);
        return EXIT_FAILED;
    }
    if (write_record(c, s->slug, &r) != 0)
        return EXIT_CLUSTER;
    *failed_warn = 1;
    return 0;
}

static int run_steps(struct ctx *c, struct plan *p)
{
    size_t n = 0, k = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->s[i].kind != STEP_SKIP)
            n++;
    int failed_warn = 0;
    for (size_t i = 0; i < p->n; i++) {
        const struct step *s = &p->s[i];
        if (s->kind == STEP_SKIP)
            continue;
        k++;
        if (s->kind == STEP_RECORD_REVOKED) {
            struct record r;
            base_record(c, &r, REC_REVOKED, s);
            progress(c, k, n, s->tier, s->slug, "revoked, recorded", -1, NULL);
            if (write_record(c, s->slug, &r) != 0)
                return EXIT_CLUSTER;
            event(c, "Normal", "MigrationRevoked", "%s is revoked and will never run", s->slug);
            continue;
        }
        int rc = execute(c, s, k, n, &failed_warn);
        if (rc != 0)
            return rc;
    }
    if (n == 0 && !c->o->json_output)
        printf("nothing to run for the %s tier\n", c->o->only ? "requested" : c->o->tier);
    if (failed_warn && c->o->only)
        return EXIT_FAILED;
    return 0;
}

static void print_warnings(const struct plan *p)
{
    for (size_t i = 0; i < p->nwarnings; i++)
        log_warn("%s", p->warnings[i]);
}

static int build_plan(struct ctx *c, struct plan *p)
{
    char now[32];
    now_rfc3339(now);
    struct plan_opts po = {.tier = c->o->tier, .only = c->o->only,
                           .max_attempts = c->o->max_attempts, .image = c->o->image, .now = now};
    if (plan_build(&c->t, &c->l, &po, p) != 0) {
        fatal("out of memory while planning");
        return EXIT_FAILED;
    }
    return 0;
}

/* Reads the ledger and plans; a refusal is reported. 0 or an exit code. */
static int read_and_plan(struct ctx *c, struct plan *p)
{
    int rc;
    if ((rc = read_ledger(c)) != 0 || (rc = build_plan(c, p)) != 0)
        return rc;
    if (p->refuse) {
        fatal("%s", p->refuse_msg);
        return p->refuse;
    }
    return 0;
}

/* Fresh install and legacy seeding. Returns 0 or an exit code. */
static int seed(struct ctx *c, struct plan *p)
{
    const struct runner_opts *o = c->o;
    char err[2600];
    if (p->fresh_install) {
        if (o->k.dry_run) {
            printf("fresh install: would create the ledger %s/%s recording %zu migrations as "
                   "skipped-fresh-install\n", o->k.ledger_namespace, o->k.ledger_name, p->nseed);
            return 0;
        }
        int rc = ledger_create(c->rest, o->k.ledger_namespace, o->k.ledger_name, p->seed, err,
                               sizeof err);
        if (rc < 0) {
            fatal("creating the ledger %s/%s: %s", o->k.ledger_namespace, o->k.ledger_name, err);
            return EXIT_CLUSTER;
        }
        if (rc == 1) {
            /* Someone created it between our read and our create. */
            log_info("the ledger appeared while creating it; reading it again");
            plan_free(p);
            if ((rc = read_ledger(c)) != 0 || (rc = build_plan(c, p)) != 0)
                return rc;
            if (p->fresh_install) {
                fatal("the ledger %s/%s exists but cannot be read", o->k.ledger_namespace,
                      o->k.ledger_name);
                return EXIT_CLUSTER;
            }
            return seed(c, p);
        }
        printf("fresh install: created the ledger %s/%s, recorded %zu migrations as "
               "skipped-fresh-install; nothing to run\n",
               o->k.ledger_namespace, o->k.ledger_name, p->nseed);
        if (read_ledger(c) == 0)
            event(c, "Normal", "LedgerCreated", "fresh install: %zu migrations recorded as "
                  "skipped-fresh-install", p->nseed);
        return 0;
    }
    if (p->nseed) {
        if (o->k.dry_run) {
            printf("legacy: would record %zu migrations below version %ld as legacy\n", p->nseed,
                   c->l.version);
            return 0;
        }
        if (ledger_patch(c->rest, o->k.ledger_namespace, o->k.ledger_name, p->seed, err,
                         sizeof err) != 0) {
            fatal("seeding legacy records: %s", err);
            return EXIT_CLUSTER;
        }
        printf("legacy: recorded %zu migrations below version %ld as legacy\n", p->nseed,
               c->l.version);
        event(c, "Normal", "LegacySeeded", "%zu legacy migrations below version %ld recorded",
              p->nseed, c->l.version);
    }
    return 0;
}

static void ctx_free(struct ctx *c)
{
    if (c->lk.held)
        lock_release(&c->lk);
    ledger_free(&c->l);
    tree_free(&c->t);
    rest_free(c->rest);
}

/* The tree first (a bad one exits before any cluster contact), then the
 * connection. Returns 0 or an exit code, with c ready to free either way. */
static int open_ctx(struct ctx *c, const struct runner_opts *o)
{
    memset(c, 0, sizeof *c);
    c->o = o;
    char err[2600];
    if (tree_load(o->dir, &c->t, err, sizeof err) != 0) {
        fatal("%s", err);
        return EXIT_PACKAGING;
    }
    if (!(c->rest = connect_cluster(o)))
        return EXIT_CLUSTER;
    return 0;
}

int runner_run(const struct runner_opts *o)
{
    struct ctx c;
    char err[2600];
    int rc = open_ctx(&c, o);
    if (rc != 0) {
        ctx_free(&c);
        return rc;
    }
    /* A request the image cannot serve is refused before waiting for the
     * lock another runner may hold. */
    if (o->only && (rc = plan_check_only(&c.t, o->only, err, sizeof err)) != 0) {
        fatal("%s", err);
        ctx_free(&c);
        return rc;
    }
    if (!o->k.dry_run) {
        char lease[256];
        snprintf(lease, sizeof lease, "%s", o->k.lease_name);
        int busy = 0;
        if (lock_acquire(&c.lk, c.rest, o->k.ledger_namespace, lease, o->lease_duration,
                         o->lock_timeout, &busy, err, sizeof err) != 0) {
            if (busy)
                fatal("the runner lock %s/%s is %s; gave up after %gs", o->k.ledger_namespace,
                      lease, err, o->lock_timeout);
            else
                fatal("%s", err);
            ctx_free(&c);
            return busy ? EXIT_LOCK : EXIT_CLUSTER;
        }
    }
    struct plan p;
    memset(&p, 0, sizeof p);
    /* After acquiring, the ledger is read fresh: the previous holder may just
     * have written it. */
    if ((rc = read_and_plan(&c, &p)) != 0)
        goto out;
    if ((rc = seed(&c, &p)) != 0)
        goto out;
    print_warnings(&p);
    if (!p.fresh_install || o->only)
        rc = run_steps(&c, &p);
    /* An unreadable record stays a problem unless --only just rewrote it. */
    int still_corrupt = 0;
    for (size_t i = 0; p.corrupt && i < c.l.n; i++)
        if (c.l.e[i].rec.state == REC_UNKNOWN && !(o->only && strcmp(c.l.e[i].slug, o->only) == 0))
            still_corrupt = 1;
    if (rc == 0 && still_corrupt) {
        fatal("the ledger holds records that cannot be read (see the warnings above)");
        rc = EXIT_LEDGER;
    }
out:
    plan_free(&p);
    ctx_free(&c);
    return rc;
}

/* ---- plan ---------------------------------------------------------------- */

int runner_plan(const struct runner_opts *o)
{
    struct ctx c;
    struct plan p;
    memset(&p, 0, sizeof p);
    int rc = open_ctx(&c, o);
    if (rc != 0) {
        ctx_free(&c);
        return rc;
    }
    if ((rc = read_and_plan(&c, &p)) != 0)
        goto out;
    if (p.fresh_install)
        printf("fresh install: the ledger %s/%s is absent; run would create it, record %zu "
               "migrations as skipped-fresh-install and run nothing%s\n",
               o->k.ledger_namespace, o->k.ledger_name, p.nseed, o->only ? " but --only" : "");
    else if (p.nseed)
        printf("legacy: run would record %zu migrations below version %ld as legacy\n", p.nseed,
               c.l.version);
    print_warnings(&p);
    size_t k = 0;
    for (size_t i = 0; i < p.n; i++)
        if (p.s[i].kind != STEP_SKIP)
            k++;
    printf("%zu to run for the %s tier:\n", k, o->only ? "requested" : o->tier);
    printf("%-8s %-11s %-16s %-40s %s\n", "ACTION", "TIER", "BATCH", "MIGRATION", "WHY");
    for (size_t i = 0; i < p.n; i++) {
        const struct step *s = &p.s[i];
        if (p.fresh_install && !o->only)
            break;
        const char *action = s->kind == STEP_RUN ? "run" : s->kind == STEP_RECORD_REVOKED ? "revoke" : "skip";
        const char *why = *s->why ? s->why : s->kind == STEP_RUN ? "pending" : "revoked, no record";
        if (s->kind == STEP_RUN && s->m && s->m->is_shell && o->k.dry_run)
            why = "pending (shell: not dry-runnable)";
        printf("%-8s %-11s %-16s %-40s %s\n", action, s->tier, s->batch, s->slug, why);
    }
    rc = p.corrupt ? EXIT_LEDGER : 0;
out:
    plan_free(&p);
    ctx_free(&c);
    return rc;
}

/* ---- status -------------------------------------------------------------- */

static const char *checksum_state(const struct tree *t, int have_tree, const char *slug,
                                  const struct record *r)
{
    if (!have_tree)
        return "?";
    const struct migration *m = tree_find(t, slug);
    if (!m)
        return "absent";
    if (!r || !*r->sha256)
        return "-";
    return strcmp(r->sha256, m->sha256) == 0 ? "match" : "DIFFERS";
}

int runner_status(const struct runner_opts *o)
{
    struct ctx c;
    memset(&c, 0, sizeof c);
    c.o = o;
    char err[2600];
    int have_tree = tree_load(o->dir, &c.t, err, sizeof err) == 0;
    if (!have_tree)
        log_warn("%s (showing the ledger alone)", err);
    int rc;
    if (!(c.rest = connect_cluster(o))) {
        ctx_free(&c);
        return EXIT_CLUSTER;
    }
    if ((rc = read_ledger(&c)) != 0) {
        ctx_free(&c);
        return rc;
    }
    if (!c.l.exists) {
        if (o->json_output)
            printf("[]\n");
        else
            printf("no ledger %s/%s: nothing has run on this cluster\n", o->k.ledger_namespace,
                   o->k.ledger_name);
        ctx_free(&c);
        return 0;
    }
    /* Manifest order first, then records the image does not know. */
    size_t total = c.l.n, ns = 0;
    for (size_t i = 0; i < c.t.man.n; i++)
        total += c.t.man.b[i].n;
    const char **slugs = calloc(total + 1, sizeof *slugs);
    if (!slugs) {
        ctx_free(&c);
        return EXIT_FAILED;
    }
    for (size_t i = 0; i < c.t.man.n; i++)
        for (size_t j = 0; j < c.t.man.b[i].n; j++)
            slugs[ns++] = c.t.man.b[i].e[j].slug;
    for (size_t i = 0; i < c.l.n; i++) {
        int seen = 0;
        for (size_t j = 0; j < ns && !seen; j++)
            seen = strcmp(slugs[j], c.l.e[i].slug) == 0;
        if (!seen)
            slugs[ns++] = c.l.e[i].slug;
    }
    cJSON *arr = o->json_output ? cJSON_CreateArray() : NULL;
    if (!o->json_output)
        printf("%-40s %-22s %-20s %-8s %-16s %-11s %s\n", "MIGRATION", "STATE", "AT", "ATTEMPTS",
               "BATCH", "TIER", "CHECKSUM");
    for (size_t i = 0; i < ns; i++) {
        const struct record *r = ledger_find(&c.l, slugs[i]);
        const char *state = r ? rec_state_name(r->state) : "pending";
        const char *sum = checksum_state(&c.t, have_tree, slugs[i], r);
        const struct migration *m = have_tree ? tree_find(&c.t, slugs[i]) : NULL;
        const char *batch = r && *r->batch ? r->batch : m ? c.t.man.b[m->batch].name : "-";
        const char *tier = r && *r->tier ? r->tier : m ? m->tier : "-";
        if (arr) {
            cJSON *j = cJSON_CreateObject();
            if (!j || !cJSON_AddItemToArray(arr, j)) {
                cJSON_Delete(j);
                continue;
            }
            cJSON_AddStringToObject(j, "migration", slugs[i]);
            cJSON_AddStringToObject(j, "state", state);
            if (r && r->state == REC_UNKNOWN)
                cJSON_AddStringToObject(j, "problem", r->problem);
            cJSON_AddStringToObject(j, "at", r ? r->at : "");
            cJSON_AddNumberToObject(j, "attempts", r ? (double)r->attempts : 0);
            cJSON_AddStringToObject(j, "batch", batch);
            cJSON_AddStringToObject(j, "tier", tier);
            cJSON_AddStringToObject(j, "checksum", sum);
            if (r && *r->reason)
                cJSON_AddStringToObject(j, "reason", r->reason);
        } else {
            printf("%-40s %-22s %-20s %-8ld %-16s %-11s %s\n", slugs[i], state,
                   r && *r->at ? r->at : "-", r ? r->attempts : 0L, batch, tier, sum);
        }
    }
    if (arr) {
        char *s = cJSON_Print(arr);
        if (s)
            printf("%s\n", s);
        cJSON_free(s);
        cJSON_Delete(arr);
    }
    free(slugs);
    ctx_free(&c);
    return 0;
}

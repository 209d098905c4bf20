/* dispatch.c: the background tier's reconcile (dispatch.h).
 *
 * Owns what the dispatcher reads (the index ConfigMap and its policy keys,
 * the Jobs it made, the Lease as a hint), the check of the index against
 * its own tree and image, the decision (the planner's background walk, the
 * Jobs in flight and the retry backoff on top), creating the Job
 * dispatch_job.c makes (and reporting the foreign ones it tells apart),
 * its Events and its one line, and the per-slug view `status` prints.
 * Must never write the ledger, never make a second Job while one of its
 * own runs, never dispatch a slug the planner would not run, never count an
 * attempt (the runner does), and never take what a Job runs (its image,
 * command, identity, host access) from the cluster's mutable state. */
#include "run/dispatch.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/buf.h"
#include "base/defaults.h"
#include "base/exitcodes.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/util.h"
#include "formats/indexdoc.h"
#include "formats/manifest.h"
#include "formats/record.h"
#include "formats/tree.h"
#include "client/event.h"
#include "run/dispatch_job.h"
#include "run/indexcheck.h"
#include "run/lock.h"
#include "run/plan.h"

struct job {
    char name[64], slug[64], uid[64];
    long attempts_before;       /* -1 when the annotation is missing */
    int finished, failed;
    int final;                  /* failed by its podFailurePolicy: an exit no retry changes */
    char final_why[200];        /* that condition's message */
    double ended;               /* epoch seconds, when finished */
};

struct policy {
    int max_attempts;
    double backoff, backoff_max;
};

struct ctx {
    struct rest_client *rest;
    const struct runner_opts *o;
    const char *ns, *ledger;
    const char *ledger_uid;     /* the ledger read: what its Jobs' ownership names */
    struct index ix;
    int have_ix;
    char index_uid[64], index_rv[64];
    struct policy pol;
    struct tree t;
    int have_tree;
    struct job *jobs;           /* ours */
    size_t njobs;
    size_t foreign;             /* Jobs seen with our labels that are not ours */
    double now;
    int quiet;                  /* the survey: no Events, warnings for fatal lines */
};

static void ctx_free(struct ctx *c)
{
    if (c->have_ix)
        index_free(&c->ix);
    if (c->have_tree)
        tree_free(&c->t);
    free(c->jobs);
}

/* ---- reading ------------------------------------------------------------ */

static const char *str_at(const cJSON *o, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);
    if (b)
        v = cJSON_GetObjectItemCaseSensitive(v, b);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void say_fatal(const struct ctx *c, const char *line)
{
    if (c->quiet)
        log_warn("%s", line);
    else
        log_fatal("%s", line);
}

/* The index ConfigMap, read whole (the raw text too: a \u0000 cJSON would
 * hide), and its policy. 0, 1 when absent, or an exit code after saying
 * why. */
static int read_index(struct ctx *c)
{
    char path[512], err[ERRLINE_MAX];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/configmaps/%s", c->ns, INDEX_NAME);
    struct rest_result r;
    int got = rest_do(c->rest, "GET", path, NULL, NULL, NULL, 0, 1, DEFAULT_RETRY_BUDGET_S, &r);
    if (got != 0 || !r.json) {
        int absent = got != 0 && r.err.code == 404;
        char m[REST_ERRSTR_MAX];
        if (got != 0)
            rest_error_string(&r.err, m, sizeof m);
        else
            snprintf(m, sizeof m, "the answer is not JSON");
        rest_result_free(&r);
        if (absent)
            return 1;
        snprintf(err, sizeof err, "reading the index %s/%s: %s", c->ns, INDEX_NAME, m);
        say_fatal(c, err);
        return EXIT_CLUSTER;
    }
    char name[300];
    snprintf(name, sizeof name, "ConfigMap %s/%s", c->ns, INDEX_NAME);
    int rc = 0;
    struct buf why = BUF_INIT;
    if (index_from_configmap(name, r.json, r.body, r.len, &c->ix, &why) != 0) {
        say_fatal(c, buf_str(&why));
        rc = EXIT_PACKAGING;
    } else {
        c->have_ix = 1;
        const char *uid = str_at(r.json, "metadata", "uid");
        const char *rv = str_at(r.json, "metadata", "resourceVersion");
        snprintf(c->index_uid, sizeof c->index_uid, "%s", uid ? uid : "");
        snprintf(c->index_rv, sizeof c->index_rv, "%s", rv ? rv : "");
        c->pol = (struct policy){(int)c->ix.pol.max_attempts, c->ix.pol.backoff,
                                 c->ix.pol.backoff_max};
        if (c->pol.backoff_max < c->pol.backoff)
            c->pol.backoff_max = c->pol.backoff;
    }
    buf_release(&why);
    rest_result_free(&r);
    return rc;
}

/* The live index against the tree and image this dispatcher runs: every
 * slug, field and the image compared. 0, or EXIT_RELEASED after a line per
 * difference, the fatal line and one Warning Event on the index (said
 * once for each version of it), so no Job is made from an index the image
 * did not ship. */
static int check_index(struct ctx *c)
{
    const struct runner_opts *o = c->o;
    char err[ERRLINE_MAX];
    struct tree own;
    if (tree_load(o->dir, &own, err, sizeof err) != 0) {
        log_fatal("%s", err);
        return EXIT_PACKAGING;
    }
    struct index want;
    int made = index_from_tree(&own, o->image, &want);
    tree_free(&own);
    if (made != 0) {
        log_fatal("out of memory");
        return EXIT_FAILED;
    }
    struct indexcheck_said m = {.label = INDEX_NAME};
    size_t n = index_compare(&c->ix, &want, o->dir, indexcheck_say, &m);
    index_free(&want);
    if (!n)
        return 0;
    log_fatal("dispatch: nothing dispatched: the index %s/%s differs from the tree and image this "
              "dispatcher runs (%s, %s) in %zu place%s%s%s: a Job is built only from what the "
              "release shipped (regenerate the chart's index with 'cozy-migrate index', or run "
              "the dispatcher of the release that made it)", c->ns, INDEX_NAME, o->dir, o->image,
              n, n == 1 ? "" : "s", n == 1 ? ": " : "", n == 1 ? m.first : "");
    if (!o->k.dry_run) {
        struct event_about about = {"v1", "ConfigMap", c->ns, INDEX_NAME, c->index_uid};
        char name[160], msg[1600];
        snprintf(name, sizeof name, "%s.mismatch-%.40s", INDEX_NAME, c->index_rv);
        snprintf(msg, sizeof msg, "the index differs from the image %s (%zu difference%s): %s; "
                 "no background Job is dispatched until they agree", o->image, n,
                 n == 1 ? "" : "s", m.text);
        if (event_post(c->rest, &about, name, "Warning", "MigrationsIndexMismatch", msg, err,
                       sizeof err) < 0)
            log_warn("%s", err);
    }
    return EXIT_RELEASED;
}

/* When a finished Job ended: its completion, else the time of the
 * condition that finished it. */
static double job_end(const cJSON *status, const cJSON *cond)
{
    double t = record_time_epoch(str_at(status, "completionTime", NULL));
    return t >= 0 ? t : record_time_epoch(str_at(cond, "lastTransitionTime", NULL));
}

/* A Job that looks like this dispatcher's and is not: said once (a
 * Warning Event of a fixed name on it; the line when the Event is new). */
static void report_foreign(struct ctx *c, const cJSON *it, const char *why)
{
    c->foreign++;
    if (c->quiet || c->o->k.dry_run)
        return;
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(it, "metadata");
    const char *name = str_at(meta, "name", NULL), *uid = str_at(meta, "uid", NULL);
    if (!name)
        return;
    char ev[200], msg[900], err[ERRLINE_MAX];
    snprintf(ev, sizeof ev, "%.63s.foreign-%.36s", name, uid ? uid : "x");
    snprintf(msg, sizeof msg, "Job %s carries the background dispatcher's labels or a name it "
             "would use, but it is not one the dispatcher of ledger %s/%s made (%s): it neither "
             "blocks nor counts as an attempt", name, c->ns, c->ledger, why);
    struct event_about about = {"batch/v1", "Job", c->ns, name, uid};
    int posted = event_post(c->rest, &about, ev, "Warning", "MigrationJobNotOurs", msg, err,
                            sizeof err);
    if (posted == 0)
        log_warn("%s", msg);
    else if (posted < 0)
        log_warn("%s", err);
}

static int add_job(struct ctx *c, const cJSON *it)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(it, "metadata");
    const char *slug = str_at(meta, "labels", DISPATCH_SLUG_LABEL);
    const char *name = str_at(meta, "name", NULL);
    const char *uid = str_at(meta, "uid", NULL);
    struct dispatch_owner own = {c->ns, c->ledger, c->ledger_uid};
    const char *why = dispatch_job_not_ours(&own, it);
    if (why) {
        /* another ledger's Jobs are its dispatcher's business */
        if (dispatch_job_claims(&own, it))
            report_foreign(c, it, why);
        return 0;
    }
    struct job *nj = mem_grow(c->jobs, c->njobs + 1, sizeof *nj);
    if (!nj)
        return -1;
    c->jobs = nj;
    struct job *j = &nj[c->njobs++];
    memset(j, 0, sizeof *j);
    snprintf(j->name, sizeof j->name, "%s", name ? name : "");
    snprintf(j->slug, sizeof j->slug, "%s", slug);
    snprintf(j->uid, sizeof j->uid, "%s", uid ? uid : "");
    const char *a = str_at(meta, "annotations", DISPATCH_ATTEMPTS_ANNOTATION);
    long n;
    j->attempts_before = a && parse_decimal(a, 1000000, &n) == 0 ? n : -1;
    const cJSON *status = cJSON_GetObjectItemCaseSensitive(it, "status");
    const cJSON *conds = cJSON_GetObjectItemCaseSensitive(status, "conditions");
    const cJSON *cond;
    cJSON_ArrayForEach(cond, conds)
    {
        const char *type = str_at(cond, "type", NULL), *st = str_at(cond, "status", NULL);
        if (!type || !st || strcmp(st, "True") != 0)
            continue;
        if (strcmp(type, "Complete") == 0 || strcmp(type, "Failed") == 0) {
            j->finished = 1;
            j->failed = strcmp(type, "Failed") == 0;
            j->ended = job_end(status, cond);
            const char *reason = str_at(cond, "reason", NULL);
            if (j->failed && reason && strcmp(reason, "PodFailurePolicy") == 0) {
                const char *m = str_at(cond, "message", NULL);
                j->final = 1;
                text_escape(m ? m : "", m ? strlen(m) : 0, j->final_why, sizeof j->final_why, 0);
            }
        }
    }
    return 0;
}

/* The Jobs this dispatcher made for this ledger (others with its labels
 * are reported, not kept). 0, or -1 with err. */
static int list_jobs(struct ctx *c, char *err, size_t errlen)
{
    char cont[2048] = "";
    do {
        char path[3000];
        snprintf(path, sizeof path, "/apis/batch/v1/namespaces/%s/jobs?labelSelector=%s%%3D%s"
                 "&limit=500%s%s", c->ns, DISPATCH_LABEL, DISPATCH_BY, *cont ? "&continue=" : "",
                 cont);
        struct rest_error e;
        memset(&e, 0, sizeof e);
        cJSON *list = rest_get_json(c->rest, path, NULL, DEFAULT_RETRY_BUDGET_S, &e);
        if (!list) {
            char m[REST_ERRSTR_MAX];
            rest_error_string(&e, m, sizeof m);
            rest_error_free(&e);
            snprintf(err, errlen, "listing the Jobs of the background tier in %s: %s", c->ns, m);
            return -1;
        }
        const cJSON *it;
        int oom = 0;
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(list, "items"))
            oom |= add_job(c, it) != 0;
        const char *next = str_at(list, "metadata", "continue");
        snprintf(cont, sizeof cont, "%s", next ? next : "");
        cJSON_Delete(list);
        if (oom) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    } while (*cont);
    return 0;
}

/* ---- the decision ------------------------------------------------------- */

static double backoff(const struct policy *p, long n)
{
    if (n < 1)
        return 0;
    double b = p->backoff * pow(2, (double)(n - 1 > 60 ? 60 : n - 1));
    return b < p->backoff_max ? b : p->backoff_max;
}

static void when(double epoch, char buf[32])
{
    time_t t = (time_t)ceil(epoch);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void span(double s, char buf[32])
{
    if (s >= 3600 && fmod(s, 3600) == 0)
        snprintf(buf, 32, "%.0fh", s / 3600);
    else if (s >= 60 && fmod(s, 60) == 0)
        snprintf(buf, 32, "%.0fm", s / 60);
    else
        snprintf(buf, 32, "%.0fs", s);
}

struct verdict {
    const struct index_slug *pick;      /* the slug to dispatch now, if any */
    long attempt;                       /* its attempt number */
    size_t again;                       /* Jobs made before for that attempt */
    char reason[400];                   /* why it is pending */
    const struct job *running;          /* a Job of ours still running */
    struct bg_view *view;               /* per background slug, manifest order */
    size_t nview;
    size_t waiting, exhausted, blocked, done;
    char first_wait[200];               /* the earliest retry, said */
    double first_wait_at;
};

static void verdict_free(struct verdict *v)
{
    dispatch_view_free(v->view, v->nview);
    memset(v, 0, sizeof *v);
}

static const struct step *step_of(const struct plan *p, const char *slug)
{
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->s[i].slug, slug) == 0)
            return &p->s[i];
    return NULL;
}

static int view_set(struct verdict *v, size_t i, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int view_set(struct verdict *v, size_t i, const char *fmt, ...)
{
    char buf[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    free(v->view[i].state);
    return (v->view[i].state = strdup(buf)) ? 0 : -1;
}

/* The Job of slug's attempt (attempts_before a) that its podFailurePolicy
 * failed: an exit no retry changes, so the slug waits for a person. */
static const struct job *final_job(const struct ctx *c, const char *slug, long a)
{
    for (size_t k = 0; k < c->njobs; k++)
        if (c->jobs[k].final && c->jobs[k].attempts_before == a &&
            strcmp(c->jobs[k].slug, slug) == 0)
            return &c->jobs[k];
    return NULL;
}

/* The Job of ours still running slug, or NULL. */
static const struct job *running_job(const struct ctx *c, const char *slug)
{
    for (size_t k = 0; k < c->njobs; k++)
        if (!c->jobs[k].finished && strcmp(c->jobs[k].slug, slug) == 0)
            return &c->jobs[k];
    return NULL;
}

/* A slug the plan does not run now (settled, blocked, not in the plan):
 * its line of the view, counted. An on-error=abort slug that is blocked
 * holds every later one (*held). 0, or -1 when out of memory. */
static int view_not_run(struct verdict *v, size_t i, const struct index_slug *g,
                        const struct step *s, const struct record *rec, int M, const char **held)
{
    if (!s)
        return view_set(v, i, "%s", rec ? rec_state_name(rec->state) : "not in the plan");
    if (s->kind == STEP_SKIP) {
        if (rec && rec->state == REC_FAILED && rec->attempts >= M) {
            v->exhausted++;
            return view_set(v, i, "failed %ld of %d attempts (%s): not retried; 'run --only %s' or "
                            "'skip %s' settles it", rec->attempts, M,
                            *rec->reason ? rec->reason : "Failed", g->slug, g->slug);
        }
        v->done++;
        return view_set(v, i, "%s", rec ? rec_state_name(rec->state) : s->why);
    }
    if (s->kind == STEP_BLOCKED) {
        v->blocked++;
        if (!*held && g->on_error == ON_ERROR_ABORT)
            *held = g->slug;
    }
    return view_set(v, i, "%s", s->why);
}

/* When slug's attempt a + 1 may start (epoch seconds; 0: at once), and why
 * it waits (why: "" when nothing to say). The retry backoff runs from the
 * failed record's `at`, and from the end of each Job of this attempt that
 * failed without advancing the record. *again: the Jobs made for this
 * attempt so far. */
static double next_attempt_at(const struct ctx *c, const struct index_slug *g,
                              const struct record *rec, long a, char *why, size_t whylen,
                              size_t *again)
{
    const struct policy *pol = &c->pol;
    double until = 0;
    *why = '\0';
    if (rec && rec->state == REC_FAILED) {
        double at = record_time_epoch(rec->at);
        until = (at >= 0 ? at : 0) + backoff(pol, a);
        char b[32];
        span(backoff(pol, a), b);
        snprintf(why, whylen, "failed %ld of %d attempts (%s), retried after %s", a,
                 pol->max_attempts, *rec->reason ? rec->reason : "Failed", b);
    }
    /* The latest Job of this attempt that ended without advancing the
     * record says what comes next: it failed (a crash, a lost lock, an
     * image that cannot be pulled: wait as after a failed attempt, counted
     * over such Jobs), or it completed (it yielded the lock to the upgrade:
     * go on). */
    size_t failed_so = 0;
    const struct job *latest = NULL;
    *again = 0;
    for (size_t k = 0; k < c->njobs; k++) {
        const struct job *j = &c->jobs[k];
        if (strcmp(j->slug, g->slug) != 0 || j->attempts_before != a)
            continue;
        (*again)++;
        failed_so += j->finished && j->failed;
        if (j->finished && (!latest || j->ended >= latest->ended))
            latest = j;
    }
    if (latest && latest->failed) {
        double u = latest->ended + backoff(pol, (long)failed_so);
        if (u > until)
            until = u;
        char b[32];
        span(backoff(pol, (long)failed_so), b);
        snprintf(why, whylen, "its Job %s failed without recording it (%zu so), retried after %s",
                 latest->name, failed_so, b);
    } else if (latest) {
        snprintf(why + strlen(why), whylen - strlen(why), "%sits Job %s ended without a record "
                 "(it yielded the lock to the upgrade)", *why ? "; " : "", latest->name);
    }
    return until;
}

/* A slug whose retry is not due: its line of the view, the earliest wait
 * kept for the summary. 0, or -1 when out of memory. */
static int view_waiting(struct verdict *v, size_t i, const struct index_slug *g, double until,
                        const char *why, const char **held)
{
    char t[32];
    when(until, t);
    v->waiting++;
    if (!*v->first_wait || until < v->first_wait_at) {
        snprintf(v->first_wait, sizeof v->first_wait, "%.60s waits until %s", g->slug, t);
        v->first_wait_at = until;
    }
    if (!*held && g->on_error == ON_ERROR_ABORT)
        *held = g->slug;
    return view_set(v, i, "%s; next attempt after %s", *why ? why : "waiting", t);
}

/* A slug due to run: the first is this dispatch's pick, the others wait
 * for it. 0, or -1 when out of memory. */
static int view_due(struct verdict *v, size_t i, const struct index_slug *g, long a, size_t again,
                    const char *why, int M)
{
    if (v->pick)
        return view_set(v, i, "pending (after %s)", v->pick->slug);
    v->pick = g;
    v->attempt = a + 1;
    v->again = again;
    snprintf(v->reason, sizeof v->reason, "%s", *why ? why : "no record");
    if (v->running)
        return view_set(v, i, "pending: attempt %ld of %d once Job %s ends%s%s", a + 1, M,
                        v->running->name, *why ? "; " : "", why);
    return view_set(v, i, "pending: attempt %ld of %d at the next dispatch%s%s", a + 1, M,
                    *why ? "; " : "", why);
}

/* One background slug's line of the view, in the steps a dispatch weighs
 * it: running, not run by the plan, held by an earlier abort slug, failed
 * for good, waiting for its retry, or due. 0, or -1 when out of memory. */
static int decide_slug(struct ctx *c, const struct ledger *l, const struct plan *p,
                       struct verdict *v, size_t i, const char **held)
{
    int M = c->pol.max_attempts;
    const struct index_slug *g = &c->ix.bg[i];
    if (!(v->view[i].slug = strdup(g->slug)))
        return -1;
    const struct step *s = step_of(p, g->slug);
    const struct record *rec = ledger_find(l, g->slug);
    const struct job *run = running_job(c, g->slug);
    if (run) {
        long a = rec ? rec->attempts : 0;
        return view_set(v, i, "running in Job %s (attempt %ld of %d)", run->name,
                        run->attempts_before >= 0 ? run->attempts_before + 1 : a + 1, M);
    }
    if (!s || s->kind != STEP_RUN)
        return view_not_run(v, i, g, s, rec, M, held);
    if (*held) {
        v->blocked++;
        return view_set(v, i, "held: %s before it waits (on-error=abort)", *held);
    }
    long a = s->prev_attempts;
    /* A Job of this attempt failed on an exit no retry changes (the image
     * does not ship the slug, the ledger is full, ...): another Job would
     * end the same, so the slug waits for a person, as one past its
     * attempts does. */
    const struct job *fin = final_job(c, g->slug, a);
    if (fin) {
        v->exhausted++;
        if (g->on_error == ON_ERROR_ABORT)
            *held = g->slug;
        return view_set(v, i, "its Job %s failed on an exit no retry changes (%s): not retried; "
                        "fix the cause, then 'run --only %s' (or delete Job %s for the next "
                        "dispatch to try again)", fin->name, fin->final_why, g->slug, fin->name);
    }
    char why[300];
    size_t again;
    double until = next_attempt_at(c, g, rec, a, why, sizeof why, &again);
    if (c->now < until)
        return view_waiting(v, i, g, until, why, held);
    return view_due(v, i, g, a, again, why, M);
}

/* What the tier looks like now and what one dispatch does. 0, or -1 when
 * out of memory. */
static int decide(struct ctx *c, const struct ledger *l, const struct plan *p, struct verdict *v)
{
    memset(v, 0, sizeof *v);
    for (size_t i = 0; i < c->njobs; i++)
        if (!c->jobs[i].finished && !v->running)
            v->running = &c->jobs[i];
    if (c->ix.nbg && !(v->view = calloc(c->ix.nbg, sizeof *v->view)))
        return -1;
    v->nview = c->ix.nbg;
    const char *held = NULL;
    for (size_t i = 0; i < c->ix.nbg; i++)
        if (decide_slug(c, l, p, v, i, &held) != 0)
            return -1;
    return 0;
}

/* ---- the Job ------------------------------------------------------------ */

/* The Job named name, read back after a 409: 1 when it is this
 * dispatcher's for slug (another dispatch made it at the same moment), 0
 * when it is foreign (reported), -1 with err when it cannot be read. */
static int ours_by_name(struct ctx *c, const char *name, const char *slug, char *err,
                        size_t errlen)
{
    char path[512];
    snprintf(path, sizeof path, "/apis/batch/v1/namespaces/%s/jobs/%s", c->ns, name);
    struct rest_error e;
    memset(&e, 0, sizeof e);
    cJSON *it = rest_get_json(c->rest, path, NULL, DEFAULT_RETRY_BUDGET_S, &e);
    if (!it) {
        char m[REST_ERRSTR_MAX];
        rest_error_string(&e, m, sizeof m);
        rest_error_free(&e);
        snprintf(err, errlen, "reading Job %s/%s, whose name is taken: %s", c->ns, name, m);
        return -1;
    }
    struct dispatch_owner own = {c->ns, c->ledger, c->ledger_uid};
    const char *why = dispatch_job_not_ours(&own, it);
    const char *s = str_at(cJSON_GetObjectItemCaseSensitive(it, "metadata"), "labels",
                           DISPATCH_SLUG_LABEL);
    if (!why && (!s || strcmp(s, slug) != 0))
        why = "it runs another migration";
    if (why)
        report_foreign(c, it, why);
    cJSON_Delete(it);
    return why ? 0 : 1;
}

/* ---- the command -------------------------------------------------------- */

static int open_ctx(struct ctx *c, const struct runner_opts *o, struct rest_client *rest)
{
    memset(c, 0, sizeof *c);
    c->o = o;
    c->rest = rest;
    c->ns = o->k.ledger_namespace;
    c->ledger = o->k.ledger_name;
    c->now = (double)time(NULL);
    return 0;
}

/* The Event for each slug past its attempts, said once per exhaustion (a
 * fixed name; the apiserver keeps Events for an hour by default, so it is
 * said again while nobody settles it). */
static void exhausted_events(struct ctx *c, const struct ledger *l)
{
    struct event_about about = {"v1", "ConfigMap", c->ns, c->ledger, l->uid};
    for (size_t i = 0; i < c->ix.nbg; i++) {
        const struct record *r = ledger_find(l, c->ix.bg[i].slug);
        long a = r ? r->attempts : 0;
        const struct job *fin = final_job(c, c->ix.bg[i].slug, a);
        if (!fin && (!r || r->state != REC_FAILED || r->attempts < c->pol.max_attempts))
            continue;
        char name[300], msg[1400];
        if (fin) {
            snprintf(name, sizeof name, "%.200s.%s.final-%.36s", c->ledger, c->ix.bg[i].slug,
                     fin->uid);
            snprintf(msg, sizeof msg, "background migration %s: its Job %s failed on an exit no "
                     "retry changes (%s); it is not dispatched again: fix the cause, then run it "
                     "(cozy-migrate run --only %s, or the chart's --only Job), or delete Job %s for "
                     "the next dispatch to try again", c->ix.bg[i].slug, fin->name, fin->final_why,
                     c->ix.bg[i].slug, fin->name);
        } else {
            snprintf(name, sizeof name, "%.200s.%s.exhausted-%ld", c->ledger, c->ix.bg[i].slug,
                     r->attempts);
            snprintf(msg, sizeof msg, "background migration %s failed %ld of %d attempts (last: "
                     "%s: %.900s); it is not retried: fix the cause and run it again (cozy-migrate "
                     "run --only %s, or the chart's --only Job), or skip it", c->ix.bg[i].slug,
                     r->attempts, c->pol.max_attempts, *r->reason ? r->reason : "Failed",
                     r->message, c->ix.bg[i].slug);
        }
        char err[ERRLINE_MAX];
        int posted = event_post(c->rest, &about, name, "Warning", "MigrationAttemptsExhausted",
                                msg, err, sizeof err);
        if (posted == 0)
            log_warn("%s", msg);
        else if (posted < 0)
            log_warn("%s", err);
    }
}

/* The plan of the background tier on the index's tree. 0, or an exit
 * code after saying why. */
static int plan_tier(struct ctx *c, const struct ledger *l, int survey, struct plan *p)
{
    if (index_tree(&c->ix, &c->t) != 0) {
        log_fatal("out of memory");
        return EXIT_FAILED;
    }
    c->have_tree = 1;
    char now[32];
    now_rfc3339(now);
    struct plan_opts po = {.tier = "background", .max_attempts = c->pol.max_attempts, .now = now,
                           .survey = survey, .ns = c->ns, .ledger = c->ledger};
    if (plan_build(&c->t, l, &po, p) != 0) {
        log_fatal("out of memory while planning");
        return EXIT_FAILED;
    }
    return 0;
}

/* Whether the upgrade holds the runner lock: its holder is a pre-apply
 * runner that renewed within two lease durations by this clock (a hint:
 * a Job made meanwhile would only yield). */
static int upgrade_holds(struct ctx *c, char *who, size_t len)
{
    struct lock_peek pk;
    char err[ERRLINE_MAX];
    if (lock_peek(c->rest, c->ns, c->o->k.lease_name, &pk, err, sizeof err) != 0) {
        log_warn("%s (dispatching as if the lock were free)", err);
        return 0;
    }
    if (!pk.exists || !*pk.holder || strcmp(pk.role, "pre-apply") != 0)
        return 0;
    double renewed = record_time_epoch(pk.renew);
    if (renewed >= 0 && c->now - renewed > 2 * (pk.duration > 0 ? pk.duration : DEFAULT_LEASE_S))
        return 0;
    snprintf(who, len, "%s", pk.holder);
    return 1;
}

/* An absent ledger: nothing to do before the hook seeds it, unless the
 * Lease records that this cluster had one (exit 12, as `run` refuses). */
static int no_ledger(struct ctx *c)
{
    char mark[64] = "", err[ERRLINE_MAX];
    if (lock_read_ledger_mark(c->rest, c->ns, c->o->k.lease_name, mark, sizeof mark, err,
                              sizeof err) != 0)
        log_warn("cannot tell whether this cluster had a ledger before (%s)", err);
    if (*mark) {
        log_fatal("dispatch: nothing dispatched: the ledger %s/%s is absent, but the Lease %s/%s "
                  "records that this cluster had one (uid %s): it was deleted, and every run "
                  "refuses until it is restored (exit 12; docs/internals.md: The ledger)", c->ns, c->ledger,
                  c->ns, c->o->k.lease_name, mark);
        return EXIT_LEDGER_GONE;
    }
    out_line("dispatch: nothing to do: there is no ledger %s/%s yet (the hook seeds it when the "
             "chart is installed)", c->ns, c->ledger);
    return 0;
}

/* Creates the Job for the verdict's pick under the first name no foreign
 * Job holds (two dispatchers at once walk the same names, so they make one
 * Job). 0, or an exit code after saying why. */
static int create_job(struct ctx *c, const struct dispatch_opts *d, const struct verdict *v)
{
    char name[64], err[ERRLINE_MAX];
    const char *would = c->o->k.dry_run ? "would create" : "created";
    for (int taken = 0; taken < 4; taken++) {
        dispatch_job_name(c->ledger, v->pick->slug, v->attempt, v->again, taken, name);
        struct dispatch_job_want w = {{c->ns, c->ledger, c->ledger_uid}, name, v->pick->slug,
                                      c->o->image, v->attempt, v->pick->timeout_s};
        int oom = 0;
        cJSON *job = dispatch_job_make(d, &w, &oom, err, sizeof err);
        if (!job) {
            log_fatal("%s", err);
            return oom ? EXIT_FAILED : EXIT_PACKAGING;
        }
        if (c->o->k.dry_run) {
            out_line("dispatch: %s Job %s for background migration %s (attempt %ld of %d): %s "
                     "(dry run)", would, name, v->pick->slug, v->attempt, c->pol.max_attempts,
                     v->reason);
            cJSON_Delete(job);
            return 0;
        }
        char *body = cJSON_PrintUnformatted(job);
        cJSON_Delete(job);
        if (!body) {
            log_fatal("out of memory");
            return EXIT_FAILED;
        }
        char path[512];
        snprintf(path, sizeof path, "/apis/batch/v1/namespaces/%s/jobs", c->ns);
        struct rest_result r;
        int posted = rest_do(c->rest, "POST", path, NULL, "application/json", body, strlen(body),
                             0, DEFAULT_RETRY_BUDGET_S, &r);
        free(body);
        if (posted != 0 && r.err.code == 409) {
            rest_result_free(&r);
            int ours = ours_by_name(c, name, v->pick->slug, err, sizeof err);
            if (ours < 0) {
                log_fatal("%s", err);
                return EXIT_CLUSTER;
            }
            if (ours) {
                out_line("dispatch: nothing more to do: Job %s for %s exists already (another "
                         "dispatch made it at the same moment)", name, v->pick->slug);
                return 0;
            }
            continue; /* a foreign Job holds the name: the next one */
        }
        if (posted != 0) {
            char m[REST_ERRSTR_MAX];
            rest_error_string(&r.err, m, sizeof m);
            log_fatal("dispatch: creating Job %s/%s for %s: %s", c->ns, name, v->pick->slug, m);
            long code = r.err.code;
            rest_result_free(&r);
            /* 422: the release's template makes no valid Job; 403 of an
             * admission policy while RBAC allows it: denied */
            return code == 422 ? EXIT_PACKAGING
                   : code == 403 && strstr(m, "ValidatingAdmissionPolicy") ? EXIT_DENIED
                                                                          : EXIT_CLUSTER;
        }
        const char *uid = str_at(r.json, "metadata", "uid");
        out_line("dispatch: %s Job %s for background migration %s (attempt %ld of %d): %s", would,
                 name, v->pick->slug, v->attempt, c->pol.max_attempts, v->reason);
        struct event_about about = {"batch/v1", "Job", c->ns, name, uid};
        char msg[800];
        snprintf(msg, sizeof msg, "dispatched background migration %s (attempt %ld of %d): %s",
                 v->pick->slug, v->attempt, c->pol.max_attempts, v->reason);
        if (event_post(c->rest, &about, NULL, "Normal", "MigrationDispatched", msg, err,
                       sizeof err) < 0)
            log_warn("%s", err);
        rest_result_free(&r);
        return 0;
    }
    log_fatal("dispatch: nothing dispatched: the names of Job for %s (up to %s) are all held by "
              "Jobs this dispatcher did not make (each reported): delete them", v->pick->slug,
              name);
    return EXIT_CLUSTER;
}

int dispatch_run(const struct runner_opts *o, const struct dispatch_opts *d)
{
    if (!o->image || !*o->image) {
        log_usage("dispatch", "MIGRATIONS_IMAGE is not set: the dispatcher builds each Job from "
                  "the image it runs as, and needs its reference (the chart's CronJob sets it)");
        return EXIT_USAGE;
    }
    char err[ERRLINE_MAX];
    struct buf why = BUF_INIT;
    if (index_image_check(o->image, 0, &why) != 0) {
        log_usage("dispatch", "MIGRATIONS_IMAGE %s", buf_str(&why));
        buf_release(&why);
        return EXIT_USAGE;
    }
    struct rest_client *rest = runner_connect(o);
    if (!rest)
        return EXIT_CLUSTER;
    struct ctx c;
    open_ctx(&c, o, rest);
    struct ledger l;
    memset(&l, 0, sizeof l);
    struct plan p;
    memset(&p, 0, sizeof p);
    struct verdict v;
    memset(&v, 0, sizeof v);
    int rc = read_index(&c);
    if (rc == 1) {
        log_fatal("no index %s/%s: the chart renders it next to the ledger (docs/shipping.md: Deploying the "
                  "hook); without it there is no background tier to dispatch", c.ns, INDEX_NAME);
        rc = EXIT_PACKAGING;
    }
    if (rc || (rc = check_index(&c)) != 0)
        goto out;
    struct ledger_loc loc = {.rest = rest, .ns = c.ns, .name = c.ledger};
    struct buf lerr = BUF_INIT;
    enum ledger_rc lrc = ledger_read(&loc, &l, &lerr);
    if (lrc != LEDGER_OK)
        log_fatal("%s", buf_str(&lerr));
    buf_release(&lerr);
    if (lrc != LEDGER_OK) {
        rc = lrc == LEDGER_UNTRUSTED ? EXIT_LEDGER : EXIT_CLUSTER;
        goto out;
    }
    if (!l.exists) {
        rc = no_ledger(&c);
        goto out;
    }
    c.ledger_uid = l.uid;
    if ((rc = plan_tier(&c, &l, 0, &p)) != 0)
        goto out;
    if (p.refuse) {
        log_fatal("dispatch: nothing dispatched: ledger %s/%s: %s", c.ns, c.ledger, p.refuse_msg);
        rc = p.refuse;
        goto out;
    }
    if (list_jobs(&c, err, sizeof err) != 0) {
        log_fatal("%s", err);
        rc = EXIT_CLUSTER;
        goto out;
    }
    if (decide(&c, &l, &p, &v) != 0) {
        log_fatal("out of memory");
        rc = EXIT_FAILED;
        goto out;
    }
    if (!o->k.dry_run)
        exhausted_events(&c, &l);
    char who[256];
    if (v.running) {
        out_line("dispatch: nothing to do: Job %s is running background migration %s", v.running->name,
                 v.running->slug);
        goto out;
    }
    if (!v.pick) {
        char tail[400] = "";
        if (*v.first_wait)
            snprintf(tail, sizeof tail, "; %s for its retry backoff", v.first_wait);
        out_line("dispatch: nothing to do: no background migration is pending (%zu recorded, %zu "
                 "waiting for a retry, %zu past their %d attempts, %zu blocked or held)%s",
                 v.done, v.waiting, v.exhausted, c.pol.max_attempts, v.blocked, tail);
        goto out;
    }
    if (upgrade_holds(&c, who, sizeof who)) {
        out_line("dispatch: nothing to do: the upgrade holds the runner lock %s/%s (pre-apply runner "
                 "%s); %s goes next time", c.ns, o->k.lease_name, who, v.pick->slug);
        goto out;
    }
    rc = create_job(&c, d, &v);
out:
    verdict_free(&v);
    plan_free(&p);
    ledger_free(&l);
    ctx_free(&c);
    rest_free(rest);
    return rc;
}

int dispatch_survey(struct rest_client *rest, const struct runner_opts *o, const struct ledger *l,
                    struct bg_view **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    struct ctx c;
    open_ctx(&c, o, rest);
    c.quiet = 1;
    c.ledger_uid = l->uid;
    struct plan p;
    memset(&p, 0, sizeof p);
    struct verdict v;
    memset(&v, 0, sizeof v);
    char err[ERRLINE_MAX];
    int rc = read_index(&c);
    if (rc == 1 || rc != 0) {
        ctx_free(&c);
        return rc == 1 ? 1 : -1;
    }
    rc = -1;
    if (plan_tier(&c, l, 1, &p) != 0)
        goto out;
    if (list_jobs(&c, err, sizeof err) != 0)
        log_warn("%s (the background view leaves the Jobs out)", err);
    if (decide(&c, l, &p, &v) != 0)
        goto out;
    *out = v.view;
    *n = v.nview;
    v.view = NULL;
    v.nview = 0;
    rc = 0;
out:
    verdict_free(&v);
    plan_free(&p);
    ctx_free(&c);
    return rc;
}

void dispatch_view_free(struct bg_view *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].slug);
        free(v[i].state);
    }
    free(v);
}

/* dispatch.c: the background tier's reconcile (dispatch.h).
 *
 * Owns what the dispatcher reads (the index ConfigMap and its policy keys,
 * the Jobs it made, the Lease as a hint), the decision (the planner's
 * background walk, the Jobs in flight and the retry backoff on top), the
 * Job it makes from the chart's template, its Events and its one line, and
 * the per-slug view `status` prints. Must never write the ledger, never
 * make a second Job while one of its own runs, never dispatch a slug the
 * planner would not run, and never count an attempt (the runner does). */
#include "run/dispatch.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/defaults.h"
#include "kube/event.h"
#include "base/exitcodes.h"
#include "formats/indexdoc.h"
#include "run/lock.h"
#include "base/log.h"
#include "run/plan.h"
#include "formats/record.h"
#include "formats/tree.h"
#include "base/util.h"

#define DISPATCH_BY "cozy-migrate"

struct job {
    char name[64], slug[64];
    long attempts_before;       /* -1 when the annotation is missing */
    int finished, failed;
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
    struct index ix;
    int have_ix;
    char *job_template;         /* INDEX_KEY_JOB, or NULL */
    struct policy pol;
    struct tree t;
    int have_tree;
    struct job *jobs;
    size_t njobs;
    double now;
};

static void ctx_free(struct ctx *c)
{
    if (c->have_ix)
        index_free(&c->ix);
    if (c->have_tree)
        tree_free(&c->t);
    free(c->job_template);
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

/* The index ConfigMap and its policy. 0, 1 when absent, or an exit code
 * after saying why. */
static int read_index(struct ctx *c, int quiet)
{
    char path[512], err[ERRLINE_MAX];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/configmaps/%s", c->ns, INDEX_NAME);
    struct rest_error e;
    memset(&e, 0, sizeof e);
    cJSON *cm = rest_get_json(c->rest, path, NULL, DEFAULT_RETRY_BUDGET_S, &e);
    if (!cm) {
        int absent = e.code == 404;
        char m[REST_ERRSTR_MAX];
        rest_error_string(&e, m, sizeof m);
        rest_error_free(&e);
        if (absent)
            return 1;
        if (!quiet)
            log_fatal("reading the index %s/%s: %s", c->ns, INDEX_NAME, m);
        else
            log_warn("reading the index %s/%s: %s", c->ns, INDEX_NAME, m);
        return EXIT_CLUSTER;
    }
    char name[300];
    snprintf(name, sizeof name, "ConfigMap %s/%s", c->ns, INDEX_NAME);
    int rc = 0;
    if (index_from_configmap(name, cm, &c->ix, err, sizeof err) != 0) {
        rc = EXIT_PACKAGING;
        goto out;
    }
    c->have_ix = 1;
    if (!c->ix.image) {
        snprintf(err, sizeof err, "%s: names no image (key %s, or the index file's image): the "
                 "background Jobs would not know what to run", name, INDEX_KEY_IMAGE);
        rc = EXIT_PACKAGING;
        goto out;
    }
    c->pol = (struct policy){DEFAULT_MAX_ATTEMPTS, DEFAULT_RETRY_BACKOFF_S, DEFAULT_RETRY_BACKOFF_MAX_S};
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(cm, "data");
    const char *v;
    if ((v = str_at(data, INDEX_KEY_ATTEMPTS, NULL))) {
        long n;
        if (parse_decimal(v, 1000, &n) != 0 || n < 1) {
            snprintf(err, sizeof err, "%s: key %s is \"%.40s\", not a number from 1 to 1000", name,
                     INDEX_KEY_ATTEMPTS, v);
            rc = EXIT_PACKAGING;
            goto out;
        }
        c->pol.max_attempts = (int)n;
    }
    struct { const char *key; double *at; } durs[] = {
        {INDEX_KEY_BACKOFF, &c->pol.backoff}, {INDEX_KEY_BACKOFF_MAX, &c->pol.backoff_max}};
    for (size_t i = 0; i < 2; i++)
        if ((v = str_at(data, durs[i].key, NULL)) && parse_duration(v, durs[i].at) != 0) {
            snprintf(err, sizeof err, "%s: key %s is \"%.40s\", not a duration like 10m", name,
                     durs[i].key, v);
            rc = EXIT_PACKAGING;
            goto out;
        }
    if (c->pol.backoff_max < c->pol.backoff)
        c->pol.backoff_max = c->pol.backoff;
    if ((v = str_at(data, INDEX_KEY_JOB, NULL)) && !(c->job_template = strdup(v))) {
        snprintf(err, sizeof err, "out of memory");
        rc = EXIT_FAILED;
    }
out:
    if (rc) {
        if (quiet)
            log_warn("%s", err);
        else
            log_fatal("%s", err);
    }
    cJSON_Delete(cm);
    return rc;
}

/* When a finished Job ended: its completion, else the time of the
 * condition that finished it. */
static double job_end(const cJSON *status, const cJSON *cond)
{
    double t = record_time_epoch(str_at(status, "completionTime", NULL));
    return t >= 0 ? t : record_time_epoch(str_at(cond, "lastTransitionTime", NULL));
}

static int add_job(struct ctx *c, const cJSON *it)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(it, "metadata");
    const char *ledger = str_at(meta, "annotations", DISPATCH_LEDGER_ANNOTATION);
    const char *slug = str_at(meta, "labels", DISPATCH_SLUG_LABEL);
    const char *name = str_at(meta, "name", NULL);
    if (!ledger || strcmp(ledger, c->ledger) != 0 || !slug || !name)
        return 0; /* another ledger's, or not one this dispatcher made */
    struct job *nj = realloc(c->jobs, (c->njobs + 1) * sizeof *nj);
    if (!nj)
        return -1;
    c->jobs = nj;
    struct job *j = &nj[c->njobs++];
    memset(j, 0, sizeof *j);
    snprintf(j->name, sizeof j->name, "%s", name);
    snprintf(j->slug, sizeof j->slug, "%s", slug);
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
        }
    }
    return 0;
}

/* The Jobs this dispatcher made for this ledger. 0, or -1 with err. */
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
    const struct index_bg *pick;        /* the slug to dispatch now, if any */
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

/* What the tier looks like now and what one dispatch does. 0, or -1 when
 * out of memory. */
static int decide(struct ctx *c, const struct ledger *l, const struct plan *p, struct verdict *v)
{
    memset(v, 0, sizeof *v);
    const struct policy *pol = &c->pol;
    int M = pol->max_attempts;
    for (size_t i = 0; i < c->njobs; i++)
        if (!c->jobs[i].finished && !v->running)
            v->running = &c->jobs[i];
    if (c->ix.nbg && !(v->view = calloc(c->ix.nbg, sizeof *v->view)))
        return -1;
    v->nview = c->ix.nbg;
    const char *held = NULL;
    for (size_t i = 0; i < c->ix.nbg; i++) {
        const struct index_bg *g = &c->ix.bg[i];
        if (!(v->view[i].slug = strdup(g->slug)))
            return -1;
        const struct step *s = step_of(p, g->slug);
        const struct record *rec = ledger_find(l, g->slug);
        const struct job *run = NULL;
        for (size_t k = 0; k < c->njobs && !run; k++)
            if (!c->jobs[k].finished && strcmp(c->jobs[k].slug, g->slug) == 0)
                run = &c->jobs[k];
        long a = rec ? rec->attempts : 0;
        if (run) {
            if (view_set(v, i, "running in Job %s (attempt %ld of %d)", run->name,
                         run->attempts_before >= 0 ? run->attempts_before + 1 : a + 1, M))
                return -1;
            continue;
        }
        if (!s) {
            if (view_set(v, i, "%s", rec ? rec_state_name(rec->state) : "not in the plan"))
                return -1;
            continue;
        }
        if (s->kind == STEP_SKIP) {
            int out = rec && rec->state == REC_FAILED && rec->attempts >= M;
            if (out) {
                v->exhausted++;
                if (view_set(v, i, "failed %ld of %d attempts (%s): not retried; 'run --only %s' or "
                             "'skip %s' settles it", rec->attempts, M, *rec->reason ? rec->reason : "Failed",
                             g->slug, g->slug))
                    return -1;
            } else {
                v->done++;
                if (view_set(v, i, "%s", rec ? rec_state_name(rec->state) : s->why))
                    return -1;
            }
            continue;
        }
        if (s->kind == STEP_BLOCKED) {
            v->blocked++;
            if (!held && g->on_error == ON_ERROR_ABORT)
                held = g->slug;
            if (view_set(v, i, "%s", s->why))
                return -1;
            continue;
        }
        if (s->kind != STEP_RUN) {
            if (view_set(v, i, "%s", s->why))
                return -1;
            continue;
        }
        if (held) {
            v->blocked++;
            if (view_set(v, i, "held: %s before it waits (on-error=abort)", held))
                return -1;
            continue;
        }
        /* The retry backoff: from the failed record's `at`, and from the
         * end of each Job that failed without advancing the record. */
        a = s->prev_attempts;
        double until = 0;
        char why[300] = "";
        if (rec && rec->state == REC_FAILED) {
            double at = record_time_epoch(rec->at);
            until = (at >= 0 ? at : 0) + backoff(pol, a);
            char b[32];
            span(backoff(pol, a), b);
            snprintf(why, sizeof why, "failed %ld of %d attempts (%s), retried after %s", a, M,
                     *rec->reason ? rec->reason : "Failed", b);
        }
        /* The latest Job of this attempt that ended without advancing the
         * record says what comes next: it failed (a crash, a lost lock, an
         * image that cannot be pulled: wait as after a failed attempt,
         * counted over such Jobs), or it completed (it yielded the lock to
         * the upgrade: go on). */
        size_t again = 0, failed_so = 0;
        const struct job *latest = NULL;
        for (size_t k = 0; k < c->njobs; k++) {
            const struct job *j = &c->jobs[k];
            if (strcmp(j->slug, g->slug) != 0 || j->attempts_before != a)
                continue;
            again++;
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
            snprintf(why, sizeof why, "its Job %s failed without recording it (%zu so), retried "
                     "after %s", latest->name, failed_so, b);
        } else if (latest) {
            snprintf(why + strlen(why), sizeof why - strlen(why), "%sits Job %s ended without a "
                     "record (it yielded the lock to the upgrade)", *why ? "; " : "", latest->name);
        }
        if (c->now < until) {
            char t[32];
            when(until, t);
            v->waiting++;
            if (!*v->first_wait || until < v->first_wait_at) {
                snprintf(v->first_wait, sizeof v->first_wait, "%.60s waits until %s", g->slug, t);
                v->first_wait_at = until;
            }
            if (!held && g->on_error == ON_ERROR_ABORT)
                held = g->slug;
            if (view_set(v, i, "%s; next attempt after %s", *why ? why : "waiting", t))
                return -1;
            continue;
        }
        if (!v->pick) {
            v->pick = g;
            v->attempt = a + 1;
            v->again = again;
            snprintf(v->reason, sizeof v->reason, "%s", *why ? why : "no record");
            if (v->running ? view_set(v, i, "pending: attempt %ld of %d once Job %s ends%s%s", a + 1,
                                      M, v->running->name, *why ? "; " : "", why)
                           : view_set(v, i, "pending: attempt %ld of %d at the next dispatch%s%s",
                                      a + 1, M, *why ? "; " : "", why))
                return -1;
        } else if (view_set(v, i, "pending (after %s)", v->pick->slug)) {
            return -1;
        }
    }
    return 0;
}

/* ---- the Job ------------------------------------------------------------ */

/* A Job name of at most 63 characters (its pods carry it as a label):
 * mig-<slug>-<attempt>[-<again>], the slug cut and a hash of it added when
 * that is too long. */
static void job_name(const char *slug, long attempt, size_t again, char out[64])
{
    char tail[48];
    if (again)
        snprintf(tail, sizeof tail, "-%ld-%zu", attempt, again);
    else
        snprintf(tail, sizeof tail, "-%ld", attempt);
    char full[160];
    snprintf(full, sizeof full, "mig-%s%s", slug, tail);
    if (strlen(full) <= 63) {
        memcpy(out, full, strlen(full) + 1);
        return;
    }
    unsigned h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)slug; *p; p++)
        h = (h ^ *p) * 16777619u;
    size_t keep = 63 - strlen("mig-") - 9 - strlen(tail);
    char cut[64];
    snprintf(cut, sizeof cut, "%.*s", (int)keep, slug);
    for (size_t n = strlen(cut); n && cut[n - 1] == '-';)
        cut[--n] = '\0';
    snprintf(full, sizeof full, "mig-%s-%08x%s", cut, h, tail);
    snprintf(out, 64, "%.63s", full);
}

/* The template when the index carries none: the pod the chart renders for
 * the Jobs that are not hooks (its ServiceAccount, non-root, read-only
 * root, /tmp an emptyDir, the reason in the termination message). */
static cJSON *builtin_template(const char *sa)
{
    char text[2400];
    snprintf(text, sizeof text,
             "{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"spec\":{\"backoffLimit\":0,"
             "\"activeDeadlineSeconds\":%d,\"ttlSecondsAfterFinished\":%d,\"template\":{\"spec\":{"
             "\"serviceAccountName\":\"%s\",\"restartPolicy\":\"Never\","
             "\"securityContext\":{\"runAsNonRoot\":true,\"runAsUser\":65534,\"runAsGroup\":65534},"
             "\"containers\":[{\"name\":\"migrate\",\"image\":\"\",\"imagePullPolicy\":\"IfNotPresent\","
             "\"args\":[\"--tier\",\"background\",\"--lock-timeout\",\"%ds\"],"
             "\"env\":[{\"name\":\"NAMESPACE\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":\"metadata.namespace\"}}}],"
             "\"terminationMessagePolicy\":\"FallbackToLogsOnError\","
             "\"securityContext\":{\"allowPrivilegeEscalation\":false,\"readOnlyRootFilesystem\":true,"
             "\"capabilities\":{\"drop\":[\"ALL\"]}},"
             "\"volumeMounts\":[{\"name\":\"tmp\",\"mountPath\":\"/tmp\"}]}],"
             "\"volumes\":[{\"name\":\"tmp\",\"emptyDir\":{}}]}}}}",
             DEFAULT_JOB_LOCK_WAIT_S + 60, DEFAULT_JOB_TTL_S, sa, DEFAULT_JOB_LOCK_WAIT_S);
    return cJSON_Parse(text);
}

static int set_env(cJSON *c, const char *name, const char *value)
{
    cJSON *env = cJSON_GetObjectItemCaseSensitive(c, "env");
    if (!env) {
        env = cJSON_AddArrayToObject(c, "env");
        if (!env)
            return -1;
    }
    if (!cJSON_IsArray(env))
        return -1;
    for (int i = cJSON_GetArraySize(env) - 1; i >= 0; i--) {
        const char *n = str_at(cJSON_GetArrayItem(env, i), "name", NULL);
        if (n && strcmp(n, name) == 0)
            cJSON_DeleteItemFromArray(env, i);
    }
    cJSON *e = cJSON_CreateObject();
    if (!e || !cJSON_AddStringToObject(e, "name", name) || !cJSON_AddStringToObject(e, "value", value) ||
        !cJSON_AddItemToArray(env, e)) {
        cJSON_Delete(e);
        return -1;
    }
    return 0;
}

static int set_str(cJSON *o, const char *k, const char *v)
{
    cJSON_DeleteItemFromObjectCaseSensitive(o, k);
    return cJSON_AddStringToObject(o, k, v) ? 0 : -1;
}

static int set_num(cJSON *o, const char *k, double v)
{
    cJSON_DeleteItemFromObjectCaseSensitive(o, k);
    return cJSON_AddNumberToObject(o, k, v) ? 0 : -1;
}

static cJSON *object_at(cJSON *o, const char *k)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsObject(v))
        return v;
    cJSON_DeleteItemFromObjectCaseSensitive(o, k);
    return cJSON_AddObjectToObject(o, k);
}

static int labels(cJSON *meta, const char *slug)
{
    cJSON *l = object_at(meta, "labels");
    return l && set_str(l, DISPATCH_LABEL, DISPATCH_BY) == 0 &&
                   set_str(l, DISPATCH_SLUG_LABEL, slug) == 0 &&
                   set_str(l, "app.kubernetes.io/name", "cozy-migrate") == 0 &&
                   set_str(l, "app.kubernetes.io/component", "background-migration") == 0
               ? 0
               : -1;
}

/* The Job for the verdict's pick: the template with its name, labels, the
 * slug, the image, the deadline. NULL with err. */
static cJSON *make_job(struct ctx *c, const struct verdict *v, const char *sa, const char *name,
                       char *err, size_t errlen)
{
    cJSON *job = c->job_template ? cJSON_Parse(c->job_template) : builtin_template(sa);
    cJSON *spec = cJSON_GetObjectItemCaseSensitive(job, "spec");
    cJSON *tmpl = cJSON_GetObjectItemCaseSensitive(spec, "template");
    cJSON *pod = cJSON_GetObjectItemCaseSensitive(tmpl, "spec");
    cJSON *cs = cJSON_GetObjectItemCaseSensitive(pod, "containers");
    cJSON *ctr = NULL, *it;
    cJSON_ArrayForEach(it, cs)
    {
        const char *n = str_at(it, "name", NULL);
        if (!ctr || (n && strcmp(n, "migrate") == 0))
            ctr = it;
    }
    if (!cJSON_IsObject(spec) || !cJSON_IsObject(pod) || !cJSON_IsObject(ctr)) {
        snprintf(err, errlen, "ConfigMap %s/%s, key %s: not a Job with a pod template and a "
                 "container", c->ns, INDEX_NAME, INDEX_KEY_JOB);
        cJSON_Delete(job);
        return NULL;
    }
    const cJSON *dl = cJSON_GetObjectItemCaseSensitive(spec, "activeDeadlineSeconds");
    double base = cJSON_IsNumber(dl) && dl->valuedouble > 0 ? dl->valuedouble
                                                           : DEFAULT_JOB_LOCK_WAIT_S + 60;
    const cJSON *ttl = cJSON_GetObjectItemCaseSensitive(spec, "ttlSecondsAfterFinished");
    char attempts[24];
    snprintf(attempts, sizeof attempts, "%ld", v->attempt - 1);
    cJSON_DeleteItemFromObjectCaseSensitive(job, "metadata");
    cJSON_DeleteItemFromObjectCaseSensitive(job, "status");
    cJSON *meta = cJSON_AddObjectToObject(job, "metadata");
    cJSON *ann = meta ? cJSON_AddObjectToObject(meta, "annotations") : NULL;
    cJSON *tmeta = object_at(tmpl, "metadata");
    int bad = !meta || !ann || !tmeta || set_str(job, "apiVersion", "batch/v1") ||
              set_str(job, "kind", "Job") || set_str(meta, "name", name) ||
              set_str(meta, "namespace", c->ns) || labels(meta, v->pick->slug) ||
              set_str(ann, DISPATCH_LEDGER_ANNOTATION, c->ledger) ||
              set_str(ann, DISPATCH_ATTEMPTS_ANNOTATION, attempts) ||
              labels(tmeta, v->pick->slug) ||
              /* retries are the dispatcher's, with a backoff, counted in the ledger */
              set_num(spec, "backoffLimit", 0) ||
              set_num(spec, "activeDeadlineSeconds", ceil(base + v->pick->timeout_s + DEFAULT_GRACE_S)) ||
              (!cJSON_IsNumber(ttl) && set_num(spec, "ttlSecondsAfterFinished", DEFAULT_JOB_TTL_S)) ||
              set_str(ctr, "image", c->ix.image) || set_env(ctr, "ONLY", v->pick->slug) ||
              set_env(ctr, "MIGRATIONS_IMAGE", c->ix.image);
    if (bad) {
        snprintf(err, errlen, "out of memory, or a Job template that is not a Job");
        cJSON_Delete(job);
        return NULL;
    }
    return job;
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
        if (!r || r->state != REC_FAILED || r->attempts < c->pol.max_attempts)
            continue;
        char name[300], msg[1400];
        snprintf(name, sizeof name, "%.200s.%s.exhausted-%ld", c->ledger, c->ix.bg[i].slug,
                 r->attempts);
        snprintf(msg, sizeof msg, "background migration %s failed %ld of %d attempts (last: %s: "
                 "%.900s); it is not retried: fix the cause and run it again (cozy-migrate run "
                 "--only %s, or the chart's --only Job), or skip it", c->ix.bg[i].slug,
                 r->attempts, c->pol.max_attempts, *r->reason ? r->reason : "Failed", r->message,
                 c->ix.bg[i].slug);
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

static struct rest_client *connect_cluster(const struct runner_opts *o)
{
    char err[ERRLINE_MAX];
    struct rest_policy p = kube_rest_policy(&o->k, log_say);
    struct rest_client *c = rest_new(&o->k.cfg, &p, err, sizeof err);
    if (!c)
        log_fatal("%s", err);
    return c;
}

int dispatch_run(const struct runner_opts *o, const struct dispatch_opts *d)
{
    struct rest_client *rest = connect_cluster(o);
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
    char err[ERRLINE_MAX];
    const char *would = o->k.dry_run ? "would create" : "created";
    int rc = read_index(&c, 0);
    if (rc == 1) {
        log_fatal("no index %s/%s: the chart renders it next to the ledger (README: Deploying the "
                  "hook); without it there is no background tier to dispatch", c.ns, INDEX_NAME);
        rc = EXIT_PACKAGING;
    }
    if (rc)
        goto out;
    struct ledger_loc loc = {.rest = rest, .ns = c.ns, .name = c.ledger};
    enum ledger_rc lrc = ledger_read(&loc, &l, err, sizeof err);
    if (lrc != LEDGER_OK) {
        log_fatal("%s", err);
        rc = lrc == LEDGER_UNTRUSTED ? EXIT_LEDGER : EXIT_CLUSTER;
        goto out;
    }
    if (!l.exists) {
        out_line("dispatch: nothing to do: there is no ledger %s/%s yet (the hook seeds it when the "
                 "chart is installed)", c.ns, c.ledger);
        goto out;
    }
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
    char name[64];
    job_name(v.pick->slug, v.attempt, v.again, name);
    cJSON *job = make_job(&c, &v, d->service_account ? d->service_account : DEFAULT_JOB_SERVICE_ACCOUNT,
                          name, err, sizeof err);
    if (!job) {
        log_fatal("%s", err);
        rc = EXIT_PACKAGING;
        goto out;
    }
    if (o->k.dry_run) {
        out_line("dispatch: %s Job %s for background migration %s (attempt %ld of %d): %s (dry run)",
                 would, name, v.pick->slug, v.attempt, c.pol.max_attempts, v.reason);
        cJSON_Delete(job);
        goto out;
    }
    char *body = cJSON_PrintUnformatted(job);
    cJSON_Delete(job);
    if (!body) {
        log_fatal("out of memory");
        rc = EXIT_FAILED;
        goto out;
    }
    char path[512];
    snprintf(path, sizeof path, "/apis/batch/v1/namespaces/%s/jobs", c.ns);
    struct rest_result r;
    int posted = rest_do(rest, "POST", path, NULL, "application/json", body, strlen(body), 0,
                         DEFAULT_RETRY_BUDGET_S, &r);
    free(body);
    if (posted != 0 && r.err.code == 409) {
        out_line("dispatch: nothing more to do: Job %s for %s exists already (another dispatch made "
                 "it at the same moment)", name, v.pick->slug);
    } else if (posted != 0) {
        char m[REST_ERRSTR_MAX];
        rest_error_string(&r.err, m, sizeof m);
        log_fatal("dispatch: creating Job %s/%s for %s: %s", c.ns, name, v.pick->slug, m);
        rc = EXIT_CLUSTER;
    } else {
        const char *uid = str_at(r.json, "metadata", "uid");
        out_line("dispatch: %s Job %s for background migration %s (attempt %ld of %d): %s", would,
                 name, v.pick->slug, v.attempt, c.pol.max_attempts, v.reason);
        struct event_about about = {"batch/v1", "Job", c.ns, name, uid};
        char msg[800];
        snprintf(msg, sizeof msg, "dispatched background migration %s (attempt %ld of %d): %s",
                 v.pick->slug, v.attempt, c.pol.max_attempts, v.reason);
        char eerr[ERRLINE_MAX];
        if (event_post(rest, &about, NULL, "Normal", "MigrationDispatched", msg, eerr,
                       sizeof eerr) < 0)
            log_warn("%s", eerr);
    }
    rest_result_free(&r);
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
    struct plan p;
    memset(&p, 0, sizeof p);
    struct verdict v;
    memset(&v, 0, sizeof v);
    char err[ERRLINE_MAX];
    int rc = read_index(&c, 1);
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

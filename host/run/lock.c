/* lock.c: the runner's Lease (the protocol is in lock.h).
 *
 * Owns the Lease's writes and what their answers mean: a create, a takeover
 * once expired on our own clock, renewals and the release, each a
 * compare-and-swap on the resourceVersion we last saw, so two runners can
 * never both believe they hold it; the watch on it (lockwatch.h: what its
 * events mean, and taking its word in place of a read-back while it is
 * live and caught up); reading the Lease back before each migration and
 * record when the watch cannot vouch, and whenever a write's outcome is
 * unknown (a retried request may have been applied by its first attempt); the
 * finalizer that keeps a deleted Lease in place while we hold it, and its
 * removal once we stop; the ledger mark; the hand-over (the holder's role,
 * a pre-apply waiter's request, lock.h); and the shared watch word children
 * read. Must never write a Lease it does not hold or has not seen expire
 * (but for a waiter's request annotation, alone and conditional), never
 * call a lock held that no confirmed write proves, and never judge expiry
 * by another machine's clock. */
#include "run/lock.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "base/defaults.h"
#include "base/log.h"
#include "base/stop.h"
#include "base/util.h"
#include "formats/manifest.h"
#include "formats/record.h"

/* A release sent while stopping must fit in a kubelet's grace period. */
#define RELEASE_STOPPING_S 10.0

/* MicroTime with real microseconds: a short lease is judged by others to
 * the microsecond, so whole seconds would make it look up to 1 s older. */
static void micro_time(char buf[40])
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char secs[32];
    strftime(secs, sizeof secs, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, 40, "%.20s.%06ldZ", secs, (long)((ts.tv_nsec / 1000) % 1000000));
}

static void lease_path(const struct lock *lk, char *buf, size_t n, int item)
{
    snprintf(buf, n, "/apis/coordination.k8s.io/v1/namespaces/%s/leases%s%s", lk->ns,
             item ? "/" : "", item ? lk->name : "");
}

/* What a read of the Lease says. */
struct view {
    int exists;
    char holder[256], renew[40], rv[64];
    char mark[64];          /* LOCK_LEDGER_ANNOTATION */
    char role[32];          /* LOCK_ROLE_ANNOTATION */
    char handover[512];     /* LOCK_HANDOVER_ANNOTATION, cut to fit */
    double duration;
    long transitions;
    int deleting;           /* deletionTimestamp is set */
};

static const char *jstr(const cJSON *o, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, a), b);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Whether s has the shape of a holder identity (lock_acquire makes them):
 * <host>/<pid>/<start>/<16 hex digits>, printable, no space. */
static int identity_shaped(const char *s)
{
    size_t n = strlen(s), slashes = 0;
    if (n < 20 || n > 250)
        return 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p <= ' ' || *p >= 0x7f)
            return 0;
        slashes += *p == '/';
    }
    const char *hex = strrchr(s, '/');
    if (slashes < 3 || strlen(hex + 1) != 16)
        return 0;
    for (const char *p = hex + 1; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return 0;
    return 1;
}

/* The one reader of a hand-over request: text as the Lease carries it. */
static void parse_request(const char *text, struct lock_request *rq)
{
    memset(rq, 0, sizeof *rq);
    snprintf(rq->text, sizeof rq->text, "%s", text);
    cJSON *o = *text ? cJSON_Parse(text) : NULL;
    const cJSON *by = cJSON_GetObjectItemCaseSensitive(o, "by");
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(o, "step");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, "n");
    if (cJSON_IsObject(o) && cJSON_IsString(by) && identity_shaped(by->valuestring) &&
        cJSON_IsString(step) && strlen(step->valuestring) < sizeof rq->step &&
        slug_valid(step->valuestring) && cJSON_IsNumber(n) && n->valuedouble >= 0 &&
        n->valuedouble < 1e15) {
        rq->valid = 1;
        snprintf(rq->by, sizeof rq->by, "%s", by->valuestring);
        snprintf(rq->step, sizeof rq->step, "%s", step->valuestring);
        rq->n = (long)n->valuedouble;
    }
    cJSON_Delete(o);
}

static void view_of(const struct lock *lk, const cJSON *o, struct view *v)
{
    memset(v, 0, sizeof *v);
    v->exists = 1;
    const char *s;
    if ((s = jstr(o, "spec", "holderIdentity")))
        snprintf(v->holder, sizeof v->holder, "%s", s);
    if ((s = jstr(o, "spec", "renewTime")))
        snprintf(v->renew, sizeof v->renew, "%s", s);
    if ((s = jstr(o, "metadata", "resourceVersion")))
        snprintf(v->rv, sizeof v->rv, "%s", s);
    v->deleting = jstr(o, "metadata", "deletionTimestamp") != NULL;
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(o, "metadata"), "annotations");
    const cJSON *mark = cJSON_GetObjectItemCaseSensitive(ann, LOCK_LEDGER_ANNOTATION);
    if (cJSON_IsString(mark))
        snprintf(v->mark, sizeof v->mark, "%s", mark->valuestring);
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(ann, LOCK_ROLE_ANNOTATION);
    if (cJSON_IsString(role))
        snprintf(v->role, sizeof v->role, "%s", role->valuestring);
    const cJSON *ho = cJSON_GetObjectItemCaseSensitive(ann, LOCK_HANDOVER_ANNOTATION);
    if (cJSON_IsString(ho))
        snprintf(v->handover, sizeof v->handover, "%s", ho->valuestring);
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(o, "spec");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(spec, "leaseDurationSeconds");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(spec, "leaseTransitions");
    v->duration = cJSON_IsNumber(d) ? d->valuedouble : lk->duration_s;
    v->transitions = cJSON_IsNumber(t) ? (long)t->valuedouble : 0;
}

/* Reads the Lease. 0 (v->exists says whether it is there), or -1 with err. */
static int read_lease(struct lock *lk, struct view *v, char *err, size_t errlen)
{
    char path[512];
    lease_path(lk, path, sizeof path, 1);
    struct rest_result r;
    memset(v, 0, sizeof *v);
    int rc = rest_do(lk->c, "GET", path, NULL, NULL, NULL, 0, 1, DEFAULT_RETRY_BUDGET_S, &r);
    if (rc == 0 && r.json)
        view_of(lk, r.json, v);
    else if (rc != 0 && r.err.code != 404) {
        char m[REST_ERRSTR_MAX];
        rest_error_string(&r.err, m, sizeof m);
        snprintf(err, errlen, "reading lease %s/%s: %s", lk->ns, lk->name, m);
        rest_result_free(&r);
        return -1;
    }
    rest_result_free(&r);
    return 0;
}

static const char *role_name(enum lock_role r)
{
    return r == LOCK_ROLE_PRE_APPLY ? "pre-apply" : r == LOCK_ROLE_BACKGROUND ? "background" : "";
}

/* A Lease body: holder, our renewTime (remembered in lk->sent), the
 * resourceVersion the write is conditional on, and the ledger mark: mark
 * when given (a whole object, which would otherwise drop it), else one we
 * want recorded. */
static cJSON *lease_body(struct lock *lk, const char *holder, long transitions, const char *rv,
                         int full, const char *mark)
{
    micro_time(lk->sent);
    cJSON *o = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(o, "metadata");
    cJSON *spec = cJSON_AddObjectToObject(o, "spec");
    cJSON *fin = cJSON_AddArrayToObject(meta, "finalizers");
    const char *m = *lk->want_mark ? lk->want_mark : mark;
    /* A whole object (a create or a takeover) says the holder's role; it
     * carries no hand-over request: whoever asked has been answered. */
    const char *role = full ? role_name(lk->role) : "";
    cJSON *ann = (m && *m) || *role ? cJSON_AddObjectToObject(meta, "annotations") : NULL;
    if (((m && *m) || *role) &&
        (!ann || (m && *m && !cJSON_AddStringToObject(ann, LOCK_LEDGER_ANNOTATION, m)) ||
         (*role && !cJSON_AddStringToObject(ann, LOCK_ROLE_ANNOTATION, role)))) {
        cJSON_Delete(o);
        return NULL;
    }
    if (!o || !meta || !spec || !fin || !cJSON_AddStringToObject(meta, "name", lk->name) ||
        !cJSON_AddStringToObject(meta, "namespace", lk->ns) ||
        (rv && !cJSON_AddStringToObject(meta, "resourceVersion", rv)) ||
        !cJSON_AddItemToArray(fin, cJSON_CreateString(LOCK_FINALIZER)) ||
        !cJSON_AddStringToObject(spec, "holderIdentity", holder) ||
        !cJSON_AddNumberToObject(spec, "leaseDurationSeconds", lk->duration_s) ||
        !cJSON_AddStringToObject(spec, "renewTime", lk->sent) ||
        (full && (!cJSON_AddStringToObject(o, "apiVersion", "coordination.k8s.io/v1") ||
                  !cJSON_AddStringToObject(o, "kind", "Lease") ||
                  !cJSON_AddStringToObject(spec, "acquireTime", lk->sent) ||
                  !cJSON_AddNumberToObject(spec, "leaseTransitions", (double)transitions)))) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

enum wrote { WROTE_OK, WROTE_REFUSED, WROTE_UNKNOWN };

/* Sends one Lease write. Every one is conditional (a create, or our
 * resourceVersion), hence safe to repeat. WROTE_OK fills *v from the answer;
 * WROTE_REFUSED is a definite no (409, 404, 403, ...) whose code is in
 * *code; WROTE_UNKNOWN means the server may or may not have applied it (a
 * transport failure, a 5xx, or a refusal after a retry of a request that may
 * already have landed). */
static enum wrote write_lease(struct lock *lk, const char *method, cJSON *body, double left,
                              struct view *v, long *code, char *err, size_t errlen)
{
    char path[512];
    int create = strcmp(method, "POST") == 0;
    lease_path(lk, path, sizeof path, !create);
    char *s = body ? cJSON_PrintUnformatted(body) : NULL;
    *code = 0;
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return WROTE_UNKNOWN;
    }
    const char *ctype = strcmp(method, "PATCH") == 0 ? "application/merge-patch+json"
                                                     : "application/json";
    struct rest_result r;
    int rc = rest_do(lk->c, method, path, NULL, ctype, s, strlen(s), 1, left > 1 ? left : 1, &r);
    cJSON_free(s);
    enum wrote w = WROTE_OK;
    if (rc == 0) {
        if (r.json)
            view_of(lk, r.json, v);
    } else {
        char m[REST_ERRSTR_MAX];
        rest_error_string(&r.err, m, sizeof m);
        snprintf(err, errlen, "lease %s/%s: %s", lk->ns, lk->name, m);
        *code = r.err.code;
        w = r.err.code == 0 || r.err.code >= 500 || r.err.code == 429 || r.err.after_retry
                ? WROTE_UNKNOWN
                : WROTE_REFUSED;
    }
    rest_result_free(&r);
    return w;
}

/* Our write's outcome, read back: 1 when the Lease holds our holder and the
 * renewTime we sent (it landed), 0 when it holds our holder but not that
 * renewTime (it did not land, we still hold it), -1 when another holds it
 * or it is gone or being deleted, -2 when it cannot be read. */
static int settle(struct lock *lk, struct view *v, char *err, size_t errlen)
{
    if (read_lease(lk, v, err, errlen) != 0)
        return -2;
    if (!v->exists || v->deleting || strcmp(v->holder, lk->holder) != 0)
        return -1;
    return strcmp(v->renew, lk->sent) == 0 ? 1 : 0;
}

static void set_watch(struct lock *lk)
{
    lockwatch_push(lk->lw, (long long)((lk->confirmed_at + lk->duration_s - lk->margin) * 1e6));
}

/* The request text v carries, on our clock: its clock restarts whenever
 * the text changes (a live writer rewrites it once a lease). */
static void saw_request(struct lock *lk, const struct view *v)
{
    if (strcmp(v->handover, lk->req_text) != 0) {
        snprintf(lk->req_text, sizeof lk->req_text, "%s", v->handover);
        lk->req_at = now_mono();
    }
    parse_request(v->handover, &lk->req);
    lk->req.live = *v->handover &&
                   now_mono() - lk->req_at < LOCK_REQUEST_LIVES * lk->duration_s;
}

/* What a read or a write's answer says of the mark and the request. */
static void saw_mark(struct lock *lk, const struct view *v)
{
    snprintf(lk->mark, sizeof lk->mark, "%s", v->mark);
    saw_request(lk, v);
    if (*lk->want_mark && strcmp(lk->want_mark, v->mark) == 0)
        lk->want_mark[0] = '\0';
}

static void confirmed(struct lock *lk, double sent_at, const struct view *v)
{
    lk->confirmed_at = sent_at;
    snprintf(lk->confirmed_renew, sizeof lk->confirmed_renew, "%s", lk->sent);
    lk->checked_at = now_mono();
    if (*v->rv)
        snprintf(lk->rv, sizeof lk->rv, "%s", v->rv);
    saw_mark(lk, v);
    set_watch(lk);
}

/* How long, on our clock, the holder's renewals have shown what v shows:
 * the clock starts when a read first finds a holder, renewTime or
 * leaseTransitions different from the last ones seen. Nothing else counts:
 * a write that moves only the resourceVersion (an annotation) is not a
 * renewal, so it keeps nobody from taking an expired Lease over. */
static double unchanged_for(struct lock *lk, const struct view *v)
{
    char key[sizeof lk->obs];
    snprintf(key, sizeof key, "%s|%s|%ld", v->holder, v->renew, v->transitions);
    double now = now_mono();
    if (strcmp(key, lk->obs) != 0) {
        if (*lk->obs)
            lk->obs_moves++;
        snprintf(lk->obs, sizeof lk->obs, "%s", key);
        lk->obs_at = now;
    }
    return now - lk->obs_at;
}

/* A pre-apply waiter's request on the Lease it saw (v): ours, numbered n,
 * or, withdrawing (n < 0), nothing. Conditional on the resourceVersion
 * read, so it lands on exactly that Lease; a conflict is decided by the
 * next look. 0 when written. */
static int write_request(struct lock *lk, const struct view *v, long n)
{
    cJSON *p = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(p, "metadata");
    cJSON *ann = cJSON_AddObjectToObject(meta, "annotations");
    cJSON *rq = n >= 0 ? cJSON_CreateObject() : NULL;
    char *text = NULL;
    if (rq && (!cJSON_AddStringToObject(rq, "by", lk->holder) ||
               !cJSON_AddStringToObject(rq, "step", lk->step) ||
               !cJSON_AddNumberToObject(rq, "n", (double)n) ||
               !(text = cJSON_PrintUnformatted(rq)))) {
        cJSON_Delete(rq);
        cJSON_Delete(p);
        return -1;
    }
    cJSON_Delete(rq);
    if (!ann || !cJSON_AddStringToObject(meta, "resourceVersion", v->rv) ||
        !(text ? cJSON_AddStringToObject(ann, LOCK_HANDOVER_ANNOTATION, text)
               : cJSON_AddNullToObject(ann, LOCK_HANDOVER_ANNOTATION))) {
        cJSON_free(text);
        cJSON_Delete(p);
        return -1;
    }
    cJSON_free(text);
    long code;
    struct view after;
    char err[ERRLINE_MAX];
    enum wrote w = write_lease(lk, "PATCH", p, DEFAULT_RETRY_BUDGET_S, &after, &code, err,
                               sizeof err);
    cJSON_Delete(p);
    return w == WROTE_OK ? 0 : -1;
}

/* A pre-apply waiter facing a background holder (v): asks for the Lease,
 * and asks anew once a lease duration while it waits, never more often
 * (whatever else is on the Lease: another waiter's request is overwritten
 * at most once a lease too; the holder honours whichever it finds). */
static void ask(struct lock *lk, const struct view *v)
{
    double now = now_mono();
    if (!*lk->step || (lk->asked_at > 0 && now - lk->asked_at < v->duration))
        return;
    lk->asked_at = now; /* tried: a conflict waits for the next turn too */
    if (write_request(lk, v, lk->asked_n + 1) != 0)
        return;
    lk->asked_n++;
    if (!lk->asked)
        log_info("lock: the background runner %s holds the lease %s/%s; asked it to hand it "
                 "over after the migration it is running (for %s)", v->holder, lk->ns, lk->name,
                 lk->step);
    lk->asked = 1;
}

/* Whether the Lease's pre-apply holder (v) looks alive: its renewTime,
 * by our wall clock, within two lease durations, or a renewal we saw. A
 * hint for yielding only (yielding is always safe); taking over is judged
 * on our own clock alone. */
static int upgrade_renews(const struct lock *lk, const struct view *v)
{
    if (lk->obs_moves > 0)
        return 1;
    double renewed = record_time_epoch(v->renew);
    return renewed >= 0 && (double)time(NULL) - renewed <= 2 * v->duration;
}

/* One attempt. 0 = held, 1 = held by someone else (holder in err), 2 = a
 * background runner yields to the upgrade (why in err), -1 = error. */
static int try_acquire(struct lock *lk, char *err, size_t errlen)
{
    struct view v;
    if (read_lease(lk, &v, err, errlen) != 0)
        return -1;
    double same = v.exists ? unchanged_for(lk, &v) : 0;
    int expired = v.exists && same >= v.duration;
    int ours = v.exists && strcmp(v.holder, lk->holder) == 0;
    if (v.exists)
        snprintf(lk->mark, sizeof lk->mark, "%s", v.mark);
    if (v.exists && v.deleting) {
        /* Someone deleted it; our finalizer keeps it while a holder lives.
         * Once free, finish the deletion so it can be created anew. */
        if (*v.holder && !expired && !ours) {
            snprintf(err, errlen, "held by %s (being deleted; renewed %s)", v.holder, v.renew);
            return 1;
        }
        cJSON *p = cJSON_CreateObject();
        cJSON *meta = cJSON_AddObjectToObject(p, "metadata");
        if (!meta || !cJSON_AddStringToObject(meta, "resourceVersion", v.rv) ||
            !cJSON_AddNullToObject(meta, "finalizers")) {
            cJSON_Delete(p);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        long code;
        struct view after;
        write_lease(lk, "PATCH", p, DEFAULT_RETRY_BUDGET_S, &after, &code, err, errlen);
        cJSON_Delete(p);
        snprintf(err, errlen, "being deleted");
        return 1; /* look again: it is gone, or someone else got there */
    }
    int upgrade_holds = strcmp(v.role, "pre-apply") == 0;
    if (lk->role == LOCK_ROLE_BACKGROUND && v.exists && *v.holder && !expired && !ours &&
        upgrade_holds) {
        if (upgrade_renews(lk, &v)) {
            snprintf(err, errlen, "held by the upgrade (pre-apply runner %s)", v.holder);
            return 2;
        }
        snprintf(err, errlen, "held by the upgrade (pre-apply runner %s), which has not renewed "
                 "it since %s by its clock; taken over once unchanged for %.0fs of this runner's "
                 "clock, %.0fs so far", v.holder, *v.renew ? v.renew : "never", v.duration, same);
        return 1;
    }
    if (lk->role == LOCK_ROLE_BACKGROUND && v.exists && !*v.holder && *v.handover) {
        /* Free, but someone asked for it: the upgrade takes it within a
         * second. However often the request is rewritten, it holds this
         * runner off one lease duration of its clock at most. */
        double now = now_mono();
        if (lk->free_asked_at <= 0)
            lk->free_asked_at = now;
        if (now - lk->free_asked_at < v.duration) {
            snprintf(err, errlen, "free, but the upgrade asked for it; taken unless the upgrade "
                     "takes it within %.0fs of this runner's clock, %.0fs so far", v.duration,
                     now - lk->free_asked_at);
            return 1;
        }
    }
    if (v.exists && *v.holder && !expired && !ours) {
        if (lk->role == LOCK_ROLE_PRE_APPLY && strcmp(v.role, "background") == 0)
            ask(lk, &v);
        snprintf(err, errlen, "held by %s (renewed %s by its clock; taken over once unchanged "
                 "for %.0fs of this runner's clock, %.0fs so far)",
                 v.holder, *v.renew ? v.renew : "never", v.duration, same);
        return 1;
    }
    if (v.exists && *v.holder && !ours)
        log_warn("lock: taking over the expired lease of %s (last renewed %s by its clock, "
                 "unchanged for %.1fs here)", v.holder, *v.renew ? v.renew : "never", same);
    cJSON *b = lease_body(lk, lk->holder, v.exists ? v.transitions + 1 : 0,
                         v.exists ? v.rv : NULL, 1, v.mark);
    if (!b) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    double sent_at = now_mono();
    long code;
    struct view got;
    enum wrote w = write_lease(lk, v.exists ? "PUT" : "POST", b, DEFAULT_RETRY_BUDGET_S, &got,
                               &code, err, errlen);
    cJSON_Delete(b);
    if (w == WROTE_OK) {
        confirmed(lk, sent_at, &got);
        lk->created = !v.exists;
        return 0;
    }
    /* A 409 (another runner was first) or an unknown outcome: the Lease
     * itself says who won. */
    if (w == WROTE_REFUSED && code != 409)
        return -1;
    int s = settle(lk, &got, err, errlen);
    if (s == 1) {
        confirmed(lk, sent_at, &got);
        lk->created = !v.exists;
        return 0;
    }
    if (s == -2)
        return -1;
    snprintf(err, errlen, "held by %s (renewed %s)", *got.holder ? got.holder : "nobody",
             *got.renew ? got.renew : "never");
    return 1;
}

/* A waiter that gives up withdraws its request, when the Lease still
 * carries it (best effort: a request left behind expires, LOCK_REQUEST_LIVES). */
static void withdraw(struct lock *lk)
{
    struct view v;
    struct lock_request rq;
    char err[ERRLINE_MAX];
    if (!lk->asked || read_lease(lk, &v, err, sizeof err) != 0 || !v.exists)
        return;
    parse_request(v.handover, &rq);
    if (rq.valid && strcmp(rq.by, lk->holder) == 0)
        write_request(lk, &v, -1);
}

/* The watcher's judge (lockwatch.h), run in its copy of lk: an event of our
 * Lease as judge() would take a read-back of it. 1 when the hold is lost. */
static int watch_judge(void *ud, const char *type, const cJSON *object, struct lockwatch_view *w)
{
    const struct lock *lk = ud;
    (void)type;
    w->finish_delete = 0;
    if (!object) {
        snprintf(w->why, sizeof w->why, "the Lease was deleted (its finalizer removed)");
        return 1;
    }
    struct view v;
    view_of(lk, object, &v);
    snprintf(w->rv, sizeof w->rv, "%s", v.rv);
    snprintf(w->renew, sizeof w->renew, "%s", v.renew);
    snprintf(w->mark, sizeof w->mark, "%s", v.mark);
    snprintf(w->handover, sizeof w->handover, "%s", v.handover);
    if (strcmp(v.holder, lk->holder) != 0) {
        snprintf(w->why, sizeof w->why, "it is held by %.300s now", *v.holder ? v.holder : "nobody");
        return 1;
    }
    if (v.deleting) {
        w->finish_delete = 1;
        snprintf(w->why, sizeof w->why, "the Lease was deleted while held (by a migration or a "
                 "person)");
        return 1;
    }
    return 0;
}

int lock_acquire(struct lock *lk, struct rest_client *c, const char *ns, const char *name,
                 enum lock_role role, const char *step, int duration_s, double wait_s, int *busy,
                 char *err, size_t errlen)
{
    memset(lk, 0, sizeof *lk);
    lk->c = c;
    lk->role = role;
    if (role == LOCK_ROLE_PRE_APPLY && step && slug_valid(step))
        snprintf(lk->step, sizeof lk->step, "%s", step);
    lk->duration_s = duration_s > 0 ? duration_s : DEFAULT_LEASE_S;
    /* Others take over a lease duration after they first saw our last
     * renewal, which is after we sent it; we give up well before that, for
     * clock rates that differ and for the time a read takes. */
    lk->margin = fmax(0.5, lk->duration_s / 6.0);
    snprintf(lk->ns, sizeof lk->ns, "%s", ns);
    snprintf(lk->name, sizeof lk->name, "%s", name);
    char host[128] = "unknown";
    gethostname(host, sizeof host - 1);
    /* <host>/<pid>/<start> alone collide: two hook pods on hosts of one name are
     * both PID 1 and may start in the same second. */
    unsigned char rnd[8];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        snprintf(err, errlen, "cannot draw the random part of the lock holder's identity");
        *busy = 0;
        return -1;
    }
    char hex[17];
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
    snprintf(lk->holder, sizeof lk->holder, "%s/%ld/%ld/%s", host, (long)getpid(),
             (long)time(NULL), hex);
    lk->lw = lockwatch_new();
    double end = now_mono() + wait_s;
    int said = 0;
    for (;;) {
        int rc = try_acquire(lk, err, errlen);
        if (rc == 0) {
            lk->held = 1;
            *busy = 0;
            /* From here the Lease is watched (lock.h "watch"): its events
             * stand in for the read-backs. */
            snprintf(lk->watch_from, sizeof lk->watch_from, "%s", lk->confirmed_renew);
            lk->watch_started = now_mono();
            if (lockwatch_start(lk->lw, rest_config(c), ns, name, lk->rv, watch_judge, lk) != 0)
                log_warn("lock: cannot watch the lease %s/%s; reading it back instead", ns, name);
            return 0;
        }
        if (rc > 0 && stop_signal())
            snprintf(err, errlen, "stopped by %s while waiting for it", stop_name(stop_signal()));
        if (rc < 0 || rc == 2 || now_mono() >= end || stop_signal()) {
            *busy = stop_signal() ? LOCK_ERROR : rc == 2 ? LOCK_YIELD : rc > 0 ? LOCK_BUSY : LOCK_ERROR;
            stop_defer(1);
            withdraw(lk);
            stop_defer(0);
            lockwatch_free(lk->lw);
            lk->lw = NULL;
            return -1;
        }
        if (!said) {
            log_info("lock: lease %s/%s is %s; waiting up to %.0fs", ns, name, err, wait_s);
            said = 1;
        }
        double left = end - now_mono();
        rest_sleep(left < 1 ? left : 1);
    }
}

const struct lock_request *lock_handover(const struct lock *lk)
{
    if (!lk->held || lk->role != LOCK_ROLE_BACKGROUND || !*lk->req.text ||
        (lk->req.valid && strcmp(lk->req.by, lk->holder) == 0))
        return NULL;
    return &lk->req;
}

double lock_left(const struct lock *lk)
{
    return lk->held ? lk->confirmed_at + lk->duration_s - lk->margin - now_mono() : 0;
}

const _Atomic(long long) *lock_watch(const struct lock *lk) { return lockwatch_word(lk->lw); }

static int lose(struct lock *lk, char *err, size_t errlen, const char *why)
{
    lk->held = 0;
    snprintf(lk->lost, sizeof lk->lost, "%s", why);
    if (lk->lw)
        atomic_store(lockwatch_word(lk->lw), 1); /* in the past: children stop now */
    lockwatch_stop(lk->lw);
    snprintf(err, errlen, "lost the runner lock %s/%s: %s", lk->ns, lk->name, why);
    return -1;
}

/* A confirmation that did not come: still held while the hold lasts on this
 * runner's clock (0), lost once it has lapsed (-1, err says so). */
static int held_while_it_lasts(struct lock *lk, char *err, size_t errlen)
{
    if (lock_left(lk) > 0)
        return 0;
    char m[300];
    snprintf(m, sizeof m, "no renewal was confirmed for %.0fs", lk->duration_s - lk->margin);
    return lose(lk, err, errlen, m);
}

/* A read of the Lease, judged: 0 while it is ours (a resourceVersion moved
 * by someone who left our holder in place is adopted), -1 when lost. */
static int judge(struct lock *lk, const struct view *v, char *err, size_t errlen)
{
    if (!v->exists)
        return lose(lk, err, errlen, "the Lease was deleted (its finalizer removed)");
    if (strcmp(v->holder, lk->holder) != 0) {
        char m[400];
        snprintf(m, sizeof m, "it is held by %s now", *v->holder ? v->holder : "nobody");
        return lose(lk, err, errlen, m);
    }
    snprintf(lk->rv, sizeof lk->rv, "%s", v->rv);
    if (v->deleting) {
        lk->finish_delete = 1;
        return lose(lk, err, errlen, "the Lease was deleted while held (by a migration or a person)");
    }
    saw_mark(lk, v);
    return 0;
}

/* What the watch says, in place of a read-back: -1 lost (said in err), 1
 * live and caught up with our own last write (what it saw is taken: the
 * resourceVersion, the mark, the hand-over request), 0 when it cannot
 * vouch (starting, broken, or behind: the caller reads the Lease back). */
static int watch_verdict(struct lock *lk, char *err, size_t errlen)
{
    if (!lk->lw)
        return 0;
    struct lockwatch_view w;
    lockwatch_view(lk->lw, &w);
    if (w.state == LW_LOST) {
        if (w.finish_delete) {
            lk->finish_delete = 1;
            snprintf(lk->rv, sizeof lk->rv, "%s", w.rv);
        }
        return lose(lk, err, errlen, w.why);
    }
    if (w.state == LW_GONE && lk->held &&
        (w.opened > 0 || now_mono() - lk->watch_started > LOCK_WATCH_RESTART_S)) {
        /* ended: a new one from our last write, at once when it had been
         * watching (someone killed it), paced when it could not run */
        lk->watch_started = now_mono();
        snprintf(lk->watch_from, sizeof lk->watch_from, "%s", lk->confirmed_renew);
        lockwatch_start(lk->lw, rest_config(lk->c), lk->ns, lk->name, lk->rv, watch_judge, lk);
    }
    if (w.state != LW_LIVE)
        return 0;
    /* Our own last write shows in the watch (or is the one it started
     * after): everything since is in the view too. */
    int caught_up = strcmp(w.renew, lk->confirmed_renew) == 0 ||
                    strcmp(lk->confirmed_renew, lk->watch_from) == 0;
    if (!caught_up) {
        double now = now_mono();
        if (now - lk->confirmed_at > LOCK_WATCH_LAG_S && now - lk->restart_asked > LOCK_WATCH_LAG_S) {
            lockwatch_restart(lk->lw);
            lk->restart_asked = now;
        }
        return 0;
    }
    struct view v;
    memset(&v, 0, sizeof v);
    snprintf(v.mark, sizeof v.mark, "%s", w.mark);
    snprintf(v.handover, sizeof v.handover, "%s", w.handover);
    if (*w.rv)
        snprintf(lk->rv, sizeof lk->rv, "%s", w.rv);
    saw_mark(lk, &v);
    lk->checked_at = now_mono();
    return 1;
}

/* Reads the Lease back now. 0 while ours, -1 when lost; a read that fails
 * proves nothing either way: held while our time lasts. */
static int check_now(struct lock *lk, char *err, size_t errlen)
{
    struct view v;
    char why[ERRLINE_MAX];
    lk->checked_at = now_mono();
    if (read_lease(lk, &v, why, sizeof why) == 0)
        return judge(lk, &v, err, errlen);
    log_warn("lock: could not read the Lease back (%s); going on while the hold lasts", why);
    return held_while_it_lasts(lk, err, errlen);
}

/* A compare-and-swap renewal now. 0 held (confirmed, or not confirmed but
 * still within its time), -1 lost. */
static int renew_now(struct lock *lk, char *err, size_t errlen)
{
    int tries = 0;
again:;
    cJSON *b = lease_body(lk, lk->holder, 0, lk->rv, 0, NULL);
    if (!b)
        return lock_left(lk) > 0 ? 0 : lose(lk, err, errlen, "out of memory");
    double sent_at = now_mono();
    long code;
    struct view v;
    char why[ERRLINE_MAX] = "";
    enum wrote w = write_lease(lk, "PATCH", b, lock_left(lk), &v, &code, why, sizeof why);
    cJSON_Delete(b);
    if (w == WROTE_OK && v.deleting) {
        snprintf(lk->rv, sizeof lk->rv, "%s", v.rv);
        lk->finish_delete = 1;
        return lose(lk, err, errlen, "the Lease was deleted while held (by a migration or a person)");
    }
    if (w == WROTE_OK && strcmp(v.holder, lk->holder) == 0) {
        confirmed(lk, sent_at, &v);
        return 0;
    }
    if (w == WROTE_REFUSED && code != 409 && code != 404) {
        /* Forbidden, invalid: nothing says another holds it; keep trying
         * while our time lasts. */
        log_warn("lock: renewal refused: %s", why);
    } else {
        int s = settle(lk, &v, why, sizeof why);
        if (s == 1) {
            confirmed(lk, sent_at, &v);
            return 0;
        }
        if (s == -1)
            return judge(lk, &v, err, errlen);
        if (s == 0 && code == 409 && tries++ < 3) {
            /* Still ours, written by someone else since (a pre-apply
             * waiter's hand-over request): renew on what it is now. A few
             * times: a writer of annotations must not make us lose it. */
            snprintf(lk->rv, sizeof lk->rv, "%s", v.rv);
            saw_mark(lk, &v);
            goto again;
        }
        log_warn("lock: renewal not confirmed (%s); retrying while the lease lasts", why);
    }
    return held_while_it_lasts(lk, err, errlen);
}

/* 0 when the hold has not lapsed, else -1 (lost for good, even if nobody
 * took the Lease: the migration's group killed itself at that moment,
 * lock_watch). */
static int not_lapsed(struct lock *lk, char *err, size_t errlen)
{
    if (!lk->held) {
        snprintf(err, errlen, "lost the runner lock %s/%s: %s", lk->ns, lk->name,
                 *lk->lost ? lk->lost : "not held");
        return -1;
    }
    if (lock_left(lk) > 0)
        return 0;
    char m[300];
    snprintf(m, sizeof m, "no renewal was confirmed for %.1fs (was the runner stopped, or "
             "the apiserver out of reach?)", now_mono() - lk->confirmed_at);
    return lose(lk, err, errlen, m);
}

int lock_renew(struct lock *lk, char *err, size_t errlen)
{
    if (not_lapsed(lk, err, errlen) != 0)
        return -1;
    int watched = watch_verdict(lk, err, errlen);
    if (watched < 0)
        return -1;
    double now = now_mono();
    if (now - lk->confirmed_at >= lk->duration_s / 4.0)
        return renew_now(lk, err, errlen);
    if (watched)
        return 0;
    double every = lk->duration_s / 8.0 < LOCK_CHECK_S ? lk->duration_s / 8.0 : LOCK_CHECK_S;
    if (now - lk->checked_at >= every)
        return check_now(lk, err, errlen);
    return 0;
}

int lock_confirm(struct lock *lk, char *err, size_t errlen)
{
    if (not_lapsed(lk, err, errlen) != 0)
        return -1;
    int watched = watch_verdict(lk, err, errlen);
    if (watched < 0)
        return -1;
    int rc = now_mono() - lk->confirmed_at >= lk->duration_s / 4.0 ? renew_now(lk, err, errlen)
             : watched ? 0
                       : check_now(lk, err, errlen);
    if (rc != 0)
        return -1;
    return held_while_it_lasts(lk, err, errlen);
}

int lock_note_ledger(struct lock *lk, const char *uid, char *err, size_t errlen)
{
    if (!*uid || strcmp(lk->mark, uid) == 0)
        return 0;
    snprintf(lk->want_mark, sizeof lk->want_mark, "%s", uid);
    if (not_lapsed(lk, err, errlen) != 0 || renew_now(lk, err, errlen) != 0)
        return -1;
    if (*lk->want_mark)
        log_warn("lock: the Lease does not record the ledger yet (the renewal was not "
                 "confirmed); the next renewal carries it");
    return 0;
}

int lock_read_ledger_mark(struct rest_client *c, const char *ns, const char *name, char *mark,
                          size_t marklen, char *err, size_t errlen)
{
    struct lock lk;
    memset(&lk, 0, sizeof lk);
    lk.c = c;
    snprintf(lk.ns, sizeof lk.ns, "%s", ns);
    snprintf(lk.name, sizeof lk.name, "%s", name);
    struct view v;
    if (read_lease(&lk, &v, err, errlen) != 0)
        return -1;
    snprintf(mark, marklen, "%s", v.mark);
    return 0;
}

int lock_peek(struct rest_client *c, const char *ns, const char *name, struct lock_peek *out,
              char *err, size_t errlen)
{
    struct lock lk;
    memset(&lk, 0, sizeof lk);
    memset(out, 0, sizeof *out);
    lk.c = c;
    snprintf(lk.ns, sizeof lk.ns, "%s", ns);
    snprintf(lk.name, sizeof lk.name, "%s", name);
    struct view v;
    if (read_lease(&lk, &v, err, errlen) != 0)
        return -1;
    out->exists = v.exists;
    snprintf(out->holder, sizeof out->holder, "%s", v.holder);
    snprintf(out->role, sizeof out->role, "%s", v.role);
    parse_request(v.handover, &out->req);
    snprintf(out->renew, sizeof out->renew, "%s", v.renew);
    out->duration = v.duration;
    return 0;
}

/* The release's one write: clear the holder and the finalizer (held), or
 * only the finalizer (lost to a plain delete while ours). */
static cJSON *release_body(struct lock *lk)
{
    cJSON *b;
    if (lk->held) {
        b = lease_body(lk, "", 0, lk->rv, 0, NULL);
        cJSON *meta = cJSON_GetObjectItemCaseSensitive(b, "metadata");
        cJSON_DeleteItemFromObject(meta, "finalizers");
        cJSON_DeleteItemFromObject(meta, "annotations");
        if (b && !cJSON_AddNullToObject(meta, "finalizers")) {
            cJSON_Delete(b);
            b = NULL;
        }
        return b;
    }
    b = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(b, "metadata");
    if (!meta || !cJSON_AddStringToObject(meta, "resourceVersion", lk->rv) ||
        !cJSON_AddNullToObject(meta, "finalizers")) {
        cJSON_Delete(b);
        return NULL;
    }
    return b;
}

int lock_release(struct lock *lk)
{
    int rc = 0;
    stop_defer(1);
    /* our own release must not read to the watcher as a loss */
    lockwatch_stop(lk->lw);
    double budget = stop_signal() ? RELEASE_STOPPING_S : DEFAULT_RETRY_BUDGET_S;
    /* Each try is conditional on the resourceVersion we know; a conflict
     * (a plain delete moved it, or a person edited the Lease) is read back
     * and tried again while the Lease is still ours. */
    for (int tries = 0; (lk->held || lk->finish_delete) && tries < 3; tries++) {
        cJSON *b = release_body(lk);
        long code = 0;
        struct view v;
        char err[ERRLINE_MAX] = "out of memory";
        enum wrote w = b ? write_lease(lk, "PATCH", b, budget, &v, &code, err, sizeof err)
                         : WROTE_UNKNOWN;
        cJSON_Delete(b);
        if (w == WROTE_OK || code == 404)
            break;
        int again = b && (code == 409 || w == WROTE_UNKNOWN);
        if (again && read_lease(lk, &v, err, sizeof err) == 0) {
            if (!v.exists || strcmp(v.holder, lk->holder) != 0)
                break; /* gone, or not ours: nothing of ours is left to release */
            snprintf(lk->rv, sizeof lk->rv, "%s", v.rv);
            if (tries < 2)
                continue;
        }
        log_warn("lock: could not release it: %s (it expires by itself)", err);
        rc = -1;
        break;
    }
    lk->held = 0;
    lk->finish_delete = 0;
    stop_defer(0);
    lockwatch_free(lk->lw);
    lk->lw = NULL;
    return rc;
}

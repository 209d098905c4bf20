/* lock.c: the runner's Lease (the protocol is in lock.h).
 *
 * Owns the Lease's writes and what their answers mean: a create, a takeover
 * once expired, renewals and the release, each a compare-and-swap on the
 * resourceVersion we last saw, so two runners can never both believe they
 * hold it; reading the Lease back whenever a write's outcome is unknown (a
 * retried request may have been applied by its first attempt); the
 * finalizer that keeps a deleted Lease in place while we hold it; and the
 * shared watch word children read. Must never write a Lease it does not hold
 * or has not seen expire, and never call a lock held that no confirmed write
 * proves. */
#include "lock.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "defaults.h"
#include "log.h"
#include "util.h"

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

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double parse_time(const char *s)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *rest = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (!rest)
        return 0;
    double frac = 0;
    if (*rest == '.')
        frac = strtod(rest, NULL);
    return (double)timegm(&tm) + frac;
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
    double duration;
    long transitions;
    int deleting;           /* deletionTimestamp is set */
};

static const char *jstr(const cJSON *o, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, a), b);
    return cJSON_IsString(v) ? v->valuestring : NULL;
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

/* A Lease body: holder, our renewTime (remembered in lk->sent), and the
 * resourceVersion the write is conditional on. */
static cJSON *lease_body(struct lock *lk, const char *holder, long transitions, const char *rv,
                         int full)
{
    micro_time(lk->sent);
    cJSON *o = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(o, "metadata");
    cJSON *spec = cJSON_AddObjectToObject(o, "spec");
    cJSON *fin = cJSON_AddArrayToObject(meta, "finalizers");
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
    if (lk->watch)
        atomic_store(lk->watch,
                     (long long)((lk->confirmed_at + lk->duration_s - lk->margin) * 1e6));
}

static void confirmed(struct lock *lk, double sent_at, const struct view *v)
{
    lk->confirmed_at = sent_at;
    if (*v->rv)
        snprintf(lk->rv, sizeof lk->rv, "%s", v->rv);
    set_watch(lk);
}

/* One attempt. 0 = held, 1 = held by someone else (holder in err), -1 = error. */
static int try_acquire(struct lock *lk, char *err, size_t errlen)
{
    struct view v;
    if (read_lease(lk, &v, err, errlen) != 0)
        return -1;
    int expired = v.exists && wall_now() > parse_time(v.renew) + v.duration;
    int ours = v.exists && strcmp(v.holder, lk->holder) == 0;
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
    if (v.exists && *v.holder && !expired && !ours) {
        snprintf(err, errlen, "held by %s (renewed %s, expires after %.0fs without renewal)",
                 v.holder, *v.renew ? v.renew : "never", v.duration);
        return 1;
    }
    if (v.exists && *v.holder && !ours)
        log_warn("lock: taking over the expired lease of %s (last renewed %s)", v.holder,
                 *v.renew ? v.renew : "never");
    cJSON *b = lease_body(lk, lk->holder, v.exists ? v.transitions + 1 : 0,
                         v.exists ? v.rv : NULL, 1);
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
        return 0;
    }
    /* A 409 (another runner was first) or an unknown outcome: the Lease
     * itself says who won. */
    if (w == WROTE_REFUSED && code != 409)
        return -1;
    int s = settle(lk, &got, err, errlen);
    if (s == 1) {
        confirmed(lk, sent_at, &got);
        return 0;
    }
    if (s == -2)
        return -1;
    snprintf(err, errlen, "held by %s (renewed %s)", *got.holder ? got.holder : "nobody",
             *got.renew ? got.renew : "never");
    return 1;
}

int lock_acquire(struct lock *lk, struct rest_client *c, const char *ns, const char *name,
                 int duration_s, double wait_s, int *busy, char *err, size_t errlen)
{
    memset(lk, 0, sizeof *lk);
    lk->c = c;
    lk->duration_s = duration_s > 0 ? duration_s : DEFAULT_LEASE_S;
    /* Others judge expiry by their clocks; give up well before them. */
    lk->margin = fmax(0.5, lk->duration_s / 6.0);
    snprintf(lk->ns, sizeof lk->ns, "%s", ns);
    snprintf(lk->name, sizeof lk->name, "%s", name);
    char host[128] = "unknown";
    gethostname(host, sizeof host - 1);
    snprintf(lk->holder, sizeof lk->holder, "%s/%ld/%ld", host, (long)getpid(),
             (long)time(NULL));
    void *page = mmap(NULL, sizeof(*lk->watch), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                      -1, 0);
    lk->watch = page == MAP_FAILED ? NULL : page;
    double end = now_mono() + wait_s;
    int said = 0;
    for (;;) {
        int rc = try_acquire(lk, err, errlen);
        if (rc == 0) {
            lk->held = 1;
            *busy = 0;
            return 0;
        }
        if (rc < 0 || now_mono() >= end) {
            *busy = rc > 0;
            if (lk->watch)
                munmap((void *)lk->watch, sizeof(*lk->watch));
            lk->watch = NULL;
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

double lock_left(const struct lock *lk)
{
    return lk->held ? lk->confirmed_at + lk->duration_s - lk->margin - now_mono() : 0;
}

const _Atomic(long long) *lock_watch(const struct lock *lk) { return lk->watch; }

static int lose(struct lock *lk, char *err, size_t errlen, const char *why)
{
    lk->held = 0;
    snprintf(lk->lost, sizeof lk->lost, "%s", why);
    if (lk->watch)
        atomic_store(lk->watch, 1); /* in the past: children stop now */
    snprintf(err, errlen, "lost the runner lock %s/%s: %s", lk->ns, lk->name, why);
    return -1;
}

/* A compare-and-swap renewal now. 0 held (confirmed, or not confirmed but
 * still within its time), -1 lost. */
static int renew_now(struct lock *lk, char *err, size_t errlen)
{
    cJSON *b = lease_body(lk, lk->holder, 0, lk->rv, 0);
    if (!b)
        return lock_left(lk) > 0 ? 0 : lose(lk, err, errlen, "out of memory");
    double sent_at = now_mono();
    long code;
    struct view v;
    char why[ERRLINE_MAX] = "";
    enum wrote w = write_lease(lk, "PATCH", b, lock_left(lk), &v, &code, why, sizeof why);
    cJSON_Delete(b);
    if (w == WROTE_OK && v.deleting)
        return lose(lk, err, errlen, "the Lease was deleted while held (by a migration or a person)");
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
        if (s == -1) {
            if (v.exists && v.deleting)
                return lose(lk, err, errlen,
                            "the Lease was deleted while held (by a migration or a person)");
            char m[400];
            snprintf(m, sizeof m, v.exists ? "it is held by %s now" : "it was deleted",
                     *v.holder ? v.holder : "nobody");
            return lose(lk, err, errlen, m);
        }
        log_warn("lock: renewal not confirmed (%s); retrying while the lease lasts", why);
    }
    if (lock_left(lk) > 0)
        return 0;
    char m[300];
    snprintf(m, sizeof m, "no renewal was confirmed for %.0fs", lk->duration_s - lk->margin);
    return lose(lk, err, errlen, m);
}

int lock_renew(struct lock *lk, char *err, size_t errlen)
{
    if (!lk->held) {
        snprintf(err, errlen, "lost the runner lock %s/%s: %s", lk->ns, lk->name,
                 *lk->lost ? lk->lost : "not held");
        return -1;
    }
    /* A hold that lapsed (the runner was stopped, or no renewal got
     * through) is lost for good, even if nobody took the Lease: the
     * migration's group killed itself at that moment (lock_watch). */
    if (lock_left(lk) <= 0) {
        char m[300];
        snprintf(m, sizeof m, "no renewal was confirmed for %.1fs (was the runner stopped, or "
                 "the apiserver out of reach?)", now_mono() - lk->confirmed_at);
        return lose(lk, err, errlen, m);
    }
    if (now_mono() - lk->confirmed_at < lk->duration_s / 4.0)
        return 0;
    return renew_now(lk, err, errlen);
}

int lock_confirm(struct lock *lk, char *err, size_t errlen)
{
    if (lock_renew(lk, err, errlen) != 0)
        return -1;
    if (lock_left(lk) > 0)
        return 0;
    char m[300];
    snprintf(m, sizeof m, "no renewal was confirmed for %.0fs", lk->duration_s - lk->margin);
    return lose(lk, err, errlen, m);
}

void lock_release(struct lock *lk)
{
    if (lk->held) {
        cJSON *b = lease_body(lk, "", 0, lk->rv, 0);
        cJSON *meta = cJSON_GetObjectItemCaseSensitive(b, "metadata");
        cJSON_DeleteItemFromObject(meta, "finalizers");
        long code;
        struct view v;
        char err[ERRLINE_MAX];
        if (!b || !cJSON_AddNullToObject(meta, "finalizers") ||
            write_lease(lk, "PATCH", b, DEFAULT_RETRY_BUDGET_S, &v, &code, err, sizeof err) !=
                WROTE_OK)
            log_warn("lock: could not release it: %s (it expires by itself)",
                     b ? err : "out of memory");
        cJSON_Delete(b);
        lk->held = 0;
    }
    if (lk->watch)
        munmap((void *)lk->watch, sizeof(*lk->watch));
    lk->watch = NULL;
}

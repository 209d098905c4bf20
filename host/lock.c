/* lock.c: the runner's Lease.
 *
 * Owns the Lease protocol: create it when absent; take it over only when
 * renewTime + leaseDurationSeconds has passed (an update carrying the
 * resourceVersion we read, so two runners racing for an expired lease cannot
 * both win: the loser gets 409); renew with our resourceVersion; release by
 * clearing the holder. Must never write a Lease it does not hold or has not
 * seen expire. */
#include "lock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

static cJSON *lease_body(const struct lock *lk, const char *holder, long transitions,
                         const char *acquire, const char *rv)
{
    char now[40];
    micro_time(now);
    cJSON *o = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(o, "metadata");
    cJSON *spec = cJSON_AddObjectToObject(o, "spec");
    if (!o || !meta || !spec || !cJSON_AddStringToObject(o, "apiVersion", "coordination.k8s.io/v1") ||
        !cJSON_AddStringToObject(o, "kind", "Lease") || !cJSON_AddStringToObject(meta, "name", lk->name) ||
        !cJSON_AddStringToObject(meta, "namespace", lk->ns) ||
        (rv && !cJSON_AddStringToObject(meta, "resourceVersion", rv)) ||
        !cJSON_AddStringToObject(spec, "holderIdentity", holder) ||
        !cJSON_AddNumberToObject(spec, "leaseDurationSeconds", lk->duration_s) ||
        !cJSON_AddStringToObject(spec, "acquireTime", acquire ? acquire : now) ||
        !cJSON_AddStringToObject(spec, "renewTime", now) ||
        !cJSON_AddNumberToObject(spec, "leaseTransitions", (double)transitions)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* Sends a Lease write; on success remembers the new resourceVersion.
 * POST creates; PUT and PATCH carry our resourceVersion, so they are safe to
 * repeat and fail with 409 if anyone else wrote the Lease since. Returns 0,
 * the HTTP code (409 = lost a race), or -1. */
static long write_lease(struct lock *lk, const char *method, cJSON *body, char *err, size_t errlen)
{
    char path[512];
    int create = strcmp(method, "POST") == 0;
    lease_path(lk, path, sizeof path, !create);
    char *s = body ? cJSON_PrintUnformatted(body) : NULL;
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    const char *ctype = strcmp(method, "PATCH") == 0 ? "application/merge-patch+json"
                                                     : "application/json";
    struct rest_result r;
    int rc = rest_do(lk->c, method, path, NULL, ctype, s, strlen(s), !create, 60, &r);
    free(s);
    long code = 0;
    if (rc == 0) {
        const cJSON *rv = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(r.json, "metadata"), "resourceVersion");
        if (cJSON_IsString(rv))
            snprintf(lk->rv, sizeof lk->rv, "%s", rv->valuestring);
    } else {
        char m[2300];
        rest_error_string(&r.err, m, sizeof m);
        snprintf(err, errlen, "lease %s/%s: %s", lk->ns, lk->name, m);
        code = r.err.code ? r.err.code : -1;
    }
    rest_result_free(&r);
    return code;
}

static const char *jstr(const cJSON *o, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, a), b);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* One attempt. 0 = held, 1 = held by someone else (holder in err), -1 = error. */
static int try_acquire(struct lock *lk, char *err, size_t errlen, int again)
{
    char path[512];
    lease_path(lk, path, sizeof path, 1);
    struct rest_result r;
    if (rest_do(lk->c, "GET", path, NULL, NULL, NULL, 0, 1, 60, &r) != 0) {
        if (r.err.code != 404) {
            char m[2300];
            rest_error_string(&r.err, m, sizeof m);
            snprintf(err, errlen, "reading lease %s/%s: %s", lk->ns, lk->name, m);
            rest_result_free(&r);
            return -1;
        }
        rest_result_free(&r);
        cJSON *b = lease_body(lk, lk->holder, 0, NULL, NULL);
        long code = write_lease(lk, "POST", b, err, errlen);
        cJSON_Delete(b);
        if (code == 409) /* another runner created it first: say who */
            return again ? try_acquire(lk, err, errlen, 0) : 1;
        return code == 0 ? 0 : -1;
    }
    const char *holder = jstr(r.json, "spec", "holderIdentity");
    const char *renew = jstr(r.json, "spec", "renewTime");
    const char *rv = jstr(r.json, "metadata", "resourceVersion");
    const cJSON *dur = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(r.json, "spec"), "leaseDurationSeconds");
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(r.json, "spec"), "leaseTransitions");
    double d = cJSON_IsNumber(dur) ? dur->valuedouble : lk->duration_s;
    double renewed = parse_time(renew);
    int free_now = !holder || !*holder || strcmp(holder, lk->holder) == 0 ||
                   wall_now() > renewed + d;
    if (!free_now) {
        snprintf(err, errlen, "held by %s (renewed %s, expires after %.0fs without renewal)",
                 holder, renew ? renew : "never", d);
        rest_result_free(&r);
        return 1;
    }
    if (holder && *holder && strcmp(holder, lk->holder) != 0)
        log_warn("lock: taking over the expired lease of %s (last renewed %s)", holder,
                 renew ? renew : "never");
    cJSON *b = lease_body(lk, lk->holder, (cJSON_IsNumber(tr) ? (long)tr->valuedouble : 0) + 1,
                          NULL, rv);
    rest_result_free(&r);
    long code = write_lease(lk, "PUT", b, err, errlen);
    cJSON_Delete(b);
    if (code == 409) /* another runner took it first: say who */
        return again ? try_acquire(lk, err, errlen, 0) : 1;
    return code == 0 ? 0 : -1;
}

int lock_acquire(struct lock *lk, struct rest_client *c, const char *ns, const char *name,
                 int duration_s, double wait_s, int *busy, char *err, size_t errlen)
{
    memset(lk, 0, sizeof *lk);
    lk->c = c;
    lk->duration_s = duration_s > 0 ? duration_s : 30;
    snprintf(lk->ns, sizeof lk->ns, "%s", ns);
    snprintf(lk->name, sizeof lk->name, "%s", name);
    char host[128] = "unknown";
    gethostname(host, sizeof host - 1);
    snprintf(lk->holder, sizeof lk->holder, "%s/%ld/%ld", host, (long)getpid(),
             (long)time(NULL));
    double end = now_mono() + wait_s;
    int said = 0;
    for (;;) {
        int rc = try_acquire(lk, err, errlen, 1);
        if (rc == 0) {
            lk->held = 1;
            lk->renewed_at = now_mono();
            *busy = 0;
            return 0;
        }
        if (rc < 0) {
            *busy = 0;
            return -1;
        }
        if (now_mono() >= end) {
            *busy = 1;
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

/* A merge patch of holder and renewTime, guarded by our resourceVersion. */
static long patch_lease(struct lock *lk, const char *holder, char *err, size_t errlen)
{
    cJSON *b = lease_body(lk, holder, 0, NULL, lk->rv);
    cJSON *spec = cJSON_GetObjectItemCaseSensitive(b, "spec");
    cJSON_DeleteItemFromObject(spec, "leaseTransitions");
    cJSON_DeleteItemFromObject(spec, "acquireTime");
    long code = write_lease(lk, "PATCH", b, err, errlen);
    cJSON_Delete(b);
    return code;
}

int lock_renew(struct lock *lk, char *err, size_t errlen)
{
    if (!lk->held || now_mono() - lk->renewed_at < lk->duration_s / 4.0)
        return 0;
    long code = patch_lease(lk, lk->holder, err, errlen);
    if (code == 0)
        lk->renewed_at = now_mono();
    else if (code == 409 || now_mono() - lk->renewed_at >= lk->duration_s)
        lk->held = 0; /* someone else wrote it, or it expired unrenewed */
    /* A transient failure keeps the lease until it would expire. */
    return lk->held ? 0 : -1;
}

void lock_release(struct lock *lk)
{
    if (!lk->held)
        return;
    char err[2600];
    if (patch_lease(lk, "", err, sizeof err) != 0)
        log_warn("lock: could not release it: %s (it expires by itself)", err);
    lk->held = 0;
}

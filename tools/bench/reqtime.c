/* reqtime.c: where a `cozy-migrate run` spends its wall clock, measured from
 * inside the real run (an LD_PRELOAD library for the benchmarks only).
 *
 * It interposes on the calls the runner makes through the dynamic linker and
 * times them in the runner process (never in its children):
 *
 *   fork() .. waitpid()       one migration's child: fork, fresh sandbox,
 *                             the script, exit, reap ("child"; requests the
 *                             runner makes meanwhile, a lease renewal, are
 *                             counted in their own category instead). The
 *                             Lease's watcher (run/lockwatch.c, a child named
 *                             cozy-lockwatch that lives as long as the lock)
 *                             is no migration: it is counted nowhere.
 *   curl_easy_perform()       one HTTP request, sorted by what it is for:
 *                             "record" (PATCH of the ledger ConfigMap),
 *                             "ledger-read" (GET of it), "event" (POST of an
 *                             Event), "lease" (any request on a Lease),
 *                             "other" (discovery and the rest)
 *   cJSON_ParseWithLength()   the parse of a response body, added to the
 *                             category of the request it belongs to
 *
 * At exit it writes "CATEGORY COUNT SECONDS" lines, and "total 1 SECONDS"
 * (constructor to destructor), to $REQTIME_OUT. $REQTIME_LEDGER names the
 * ledger (default cozystack-version). $REQTIME_LOG, when set, gets one line
 * per request: "CATEGORY SECONDS METHOD URL".
 *
 * Owns nothing of the project: it must never be linked into cozy-migrate,
 * and no test may use it as a source of truth. Built by tools/bench/run:
 *   gcc -shared -fPIC -O2 -o reqtime.so reqtime.c -ldl $(pkg-config --libs libcurl) */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { C_CHILD, C_RECORD, C_LEDGER_READ, C_EVENT, C_LEASE, C_OTHER, NCAT };
static const char *names[NCAT] = {"child", "record", "ledger-read", "event", "lease", "other"};
static long count[NCAT];
static double secs[NCAT];
static double t_start;
static pid_t self;
static int last = C_OTHER;
static FILE *reqlog;
static int inflight; /* children forked and not yet reaped */

#define MAXKIDS 64
static struct {
    pid_t pid;
    double at;
} kids[MAXKIDS];

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int mine(void) { return getpid() == self; }

/* Whether pid is the Lease's watcher (its name, while it lives or is a
 * zombie not yet reaped). */
static int watcher(pid_t pid)
{
    char p[64], name[32] = "";
    snprintf(p, sizeof p, "/proc/%d/comm", (int)pid);
    FILE *f = fopen(p, "r");
    if (!f)
        return 0;
    if (!fgets(name, sizeof name, f))
        name[0] = '\0';
    fclose(f);
    return strncmp(name, "cozy-lockwatch", 14) == 0;
}

/* Migrations' children alive now (the watcher left out). */
static int migrations_running(void)
{
    int n = 0;
    for (int i = 0; i < MAXKIDS; i++)
        n += kids[i].pid && !watcher(kids[i].pid);
    return n;
}

__attribute__((constructor)) static void start(void)
{
    self = getpid();
    t_start = now();
    const char *l = getenv("REQTIME_LOG");
    if (l && *l)
        reqlog = fopen(l, "w");
}

__attribute__((destructor)) static void finish(void)
{
    if (!mine())
        return;
    const char *out = getenv("REQTIME_OUT");
    FILE *f = out && *out ? fopen(out, "w") : NULL;
    if (!f)
        return;
    for (int i = 0; i < NCAT; i++)
        fprintf(f, "%s %ld %.6f\n", names[i], count[i], secs[i]);
    fprintf(f, "total 1 %.6f\n", now() - t_start);
    fclose(f);
    if (reqlog)
        fclose(reqlog);
}

static int classify(const char *method, const char *url)
{
    const char *ledger = getenv("REQTIME_LEDGER");
    char tail[300];
    snprintf(tail, sizeof tail, "/configmaps/%s", ledger && *ledger ? ledger : "cozystack-version");
    const char *q = strchr(url, '?');
    size_t ul = q ? (size_t)(q - url) : strlen(url), tl = strlen(tail);
    int is_ledger = ul >= tl && strncmp(url + ul - tl, tail, tl) == 0;
    if (strstr(url, "/leases"))
        return C_LEASE;
    if (is_ledger && strcmp(method, "PATCH") == 0)
        return C_RECORD;
    if (is_ledger && strcmp(method, "GET") == 0)
        return C_LEDGER_READ;
    if (strcmp(method, "POST") == 0 && strstr(url, "/events"))
        return C_EVENT;
    return C_OTHER;
}

CURLcode curl_easy_perform(CURL *h)
{
    static CURLcode (*real)(CURL *);
    if (!real)
        real = (CURLcode(*)(CURL *))dlsym(RTLD_NEXT, "curl_easy_perform");
    double t0 = now();
    CURLcode rc = real(h);
    double dt = now() - t0;
    if (!mine())
        return rc;
    char *method = NULL, *url = NULL;
    curl_easy_getinfo(h, CURLINFO_EFFECTIVE_METHOD, &method);
    curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &url);
    last = classify(method ? method : "GET", url ? url : "");
    count[last]++;
    secs[last] += dt;
    /* a lease renewal made while a child runs is the lease's, not the child's */
    if (inflight && migrations_running())
        secs[C_CHILD] -= dt;
    if (reqlog)
        fprintf(reqlog, "%s %.6f %s %s\n", names[last], dt, method ? method : "?", url ? url : "?");
    return rc;
}

/* cJSON is a shared library: the runner's parse of a response comes here. */
void *cJSON_ParseWithLength(const char *value, size_t len)
{
    static void *(*real)(const char *, size_t);
    if (!real)
        real = (void *(*)(const char *, size_t))dlsym(RTLD_NEXT, "cJSON_ParseWithLength");
    double t0 = now();
    void *j = real(value, len);
    if (mine())
        secs[last] += now() - t0;
    return j;
}

pid_t fork(void)
{
    static pid_t (*real)(void);
    if (!real)
        real = (pid_t(*)(void))dlsym(RTLD_NEXT, "fork");
    double t0 = now();
    pid_t pid = real();
    if (pid > 0 && mine()) {
        for (int i = 0; i < MAXKIDS; i++)
            if (!kids[i].pid) {
                kids[i].pid = pid;
                kids[i].at = t0;
                inflight++;
                break;
            }
    }
    return pid;
}

pid_t waitpid(pid_t pid, int *status, int options)
{
    static pid_t (*real)(pid_t, int *, int);
    if (!real)
        real = (pid_t(*)(pid_t, int *, int))dlsym(RTLD_NEXT, "waitpid");
    int lockwatch = pid > 0 && mine() && watcher(pid);
    pid_t w = real(pid, status, options);
    if (w > 0 && mine()) {
        for (int i = 0; i < MAXKIDS; i++)
            if (kids[i].pid == w) {
                if (!lockwatch) {
                    count[C_CHILD]++;
                    secs[C_CHILD] += now() - kids[i].at;
                }
                kids[i].pid = 0;
                inflight--;
                break;
            }
    }
    return w;
}

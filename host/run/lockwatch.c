/* lockwatch.c: the watcher process on the runner's Lease and the page it
 * reports through (lockwatch.h).
 *
 * Owns the page (the lease watch word first, then a sequence-locked view
 * only the watcher writes), the watcher's life (a helper of the runner's
 * own, proc/helper.h: forked, named, tied to the runner by
 * PR_SET_PDEATHSIG, stopped with SIGKILL and reaped), and its
 * loop: a read-back when it must (at a 410, after an error, when the runner
 * asks), then a stream from the last resourceVersion seen, again whenever
 * the server closes it. Must never write to the cluster, touch a
 * connection the runner opened (it _exits, never cleans up what it
 * inherited), or undo a loss. */
#include "run/lockwatch.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/util.h"
#include "client/watch.h"
#include "proc/helper.h"

#define STREAM_S 290        /* timeoutSeconds of one stream: the server closes it */
#define BACKOFF_MAX_S 2.0   /* between a failed stream and the next try */
#define READ_TIMEOUT_S 10.0

struct lockwatch {
    _Atomic(long long) word;    /* first: the lease watch word (leasewatch.h) */
    _Atomic unsigned seq;       /* odd while the watcher writes view */
    _Atomic unsigned restarts;  /* the runner's requests for a fresh start */
    struct lockwatch_view view;
    pid_t pid;                  /* the runner's side: the watcher, 0 when none */
};

struct lockwatch *lockwatch_new(void)
{
    void *p = mmap(NULL, sizeof(struct lockwatch), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    memset(p, 0, sizeof(struct lockwatch));
    struct lockwatch *w = p;
    w->view.state = LW_GONE;
    return w;
}

_Atomic(long long) *lockwatch_word(struct lockwatch *w) { return w ? &w->word : NULL; }

void lockwatch_push(struct lockwatch *w, long long until_us)
{
    if (!w)
        return;
    long long cur = atomic_load(&w->word);
    while (cur != 1 && !atomic_compare_exchange_weak(&w->word, &cur, until_us))
        ;
}

/* The watcher's side: a new view, published whole. */
static void publish(struct lockwatch *w, const struct lockwatch_view *v)
{
    atomic_fetch_add(&w->seq, 1);
    atomic_thread_fence(memory_order_seq_cst);
    memcpy(&w->view, v, sizeof *v);
    atomic_thread_fence(memory_order_seq_cst);
    atomic_fetch_add(&w->seq, 1);
}

void lockwatch_view(struct lockwatch *w, struct lockwatch_view *out)
{
    /* A watcher that died (killed by someone, or it ended itself) feeds
     * the page no more: it is reaped and the view says so, never live. */
    if (w->pid && waitpid(w->pid, NULL, WNOHANG) == w->pid) {
        w->pid = 0;
        struct lockwatch_view v;
        memcpy(&v, &w->view, sizeof v);
        if (v.state != LW_LOST) {
            v.state = LW_GONE;
            snprintf(v.why, sizeof v.why, "the watcher ended");
            publish(w, &v);
        }
    }
    for (;;) {
        unsigned a = atomic_load(&w->seq);
        atomic_thread_fence(memory_order_seq_cst);
        memcpy(out, &w->view, sizeof *out);
        atomic_thread_fence(memory_order_seq_cst);
        if (!(a & 1) && atomic_load(&w->seq) == a)
            break;
    }
    out->rv[sizeof out->rv - 1] = out->renew[sizeof out->renew - 1] = '\0';
    out->mark[sizeof out->mark - 1] = out->handover[sizeof out->handover - 1] = '\0';
    out->why[sizeof out->why - 1] = '\0';
}

void lockwatch_restart(struct lockwatch *w)
{
    if (w)
        atomic_fetch_add(&w->restarts, 1);
}

/* ---- the watcher ---------------------------------------------------------- */

struct watcher {
    struct lockwatch *w;
    pid_t runner;
    lockwatch_judge judge;
    void *ud;
    struct lockwatch_view v;
    unsigned restarts;          /* the runner's requests seen */
    int lost, reread;
    const struct kube_config *cfg; /* the Lease's cluster, namespace and name */
    const char *ns, *name;
};

static void lost(struct watcher *s)
{
    /* the migration in flight first: its group kills itself on this */
    atomic_store(&s->w->word, 1);
    s->v.state = LW_LOST;
    s->lost = 1;
    publish(s->w, &s->v);
}

static void on_open(void *ud)
{
    struct watcher *s = ud;
    s->v.state = LW_LIVE;
    s->v.opened++;
    publish(s->w, &s->v);
}

static int on_event(void *ud, const char *type, const cJSON *object)
{
    struct watcher *s = ud;
    if (strcmp(type, "BOOKMARK") == 0) {
        const char *rv = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(object, "metadata"), "resourceVersion"));
        if (rv)
            snprintf(s->v.rv, sizeof s->v.rv, "%s", rv);
        publish(s->w, &s->v);
        return 0;
    }
    if (s->judge(s->ud, type, strcmp(type, "DELETED") == 0 ? NULL : object, &s->v)) {
        lost(s);
        return 1;
    }
    publish(s->w, &s->v);
    return 0;
}

static int keep_going(void *ud)
{
    struct watcher *s = ud;
    if (getppid() != s->runner)
        _exit(0);
    unsigned r = atomic_load(&s->w->restarts);
    if (r != s->restarts) {
        s->restarts = r;
        s->reread = 1;
        return 0;
    }
    return 1;
}

static void pause_s(struct watcher *s, double secs)
{
    for (double end = now_mono() + secs; now_mono() < end;) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        if (getppid() != s->runner)
            _exit(0);
    }
}

static _Noreturn void watcher_main(struct watcher *s, const struct kube_config *cfg,
                                   const char *ns, const char *name)
{
    char err[600];
    struct kube_watch *kw = kube_watch_new(cfg, err, sizeof err);
    if (!kw) {
        s->v.state = LW_GONE;
        snprintf(s->v.why, sizeof s->v.why, "%.399s", err);
        publish(s->w, &s->v);
        _exit(0);
    }
    char item[512], path[1024];
    snprintf(item, sizeof item, "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s", ns, name);
    struct kube_watch_fns fns = {on_open, on_event, keep_going, s};
    double backoff = 0.1;
    for (;;) {
        if (s->reread) {
            long code;
            cJSON *o = kube_watch_read(kw, item, READ_TIMEOUT_S, &code, err, sizeof err);
            if (!o && code != 404) {
                s->v.state = LW_BROKEN;
                snprintf(s->v.why, sizeof s->v.why, "%.399s", err);
                publish(s->w, &s->v);
                pause_s(s, backoff);
                backoff = backoff * 2 > BACKOFF_MAX_S ? BACKOFF_MAX_S : backoff * 2;
                continue;
            }
            int gone = s->judge(s->ud, "READ", o, &s->v);
            cJSON_Delete(o);
            if (gone) {
                lost(s);
                _exit(0);
            }
            s->reread = 0;
        }
        snprintf(path, sizeof path, "/apis/coordination.k8s.io/v1/namespaces/%s/leases?watch=1&"
                 "allowWatchBookmarks=true&fieldSelector=metadata.name%%3D%s&timeoutSeconds=%d&"
                 "resourceVersion=%s", ns, name, STREAM_S, s->v.rv);
        enum kube_watch_end end = kube_watch_run(kw, path, STREAM_S + 30, &fns, err, sizeof err);
        if (s->lost)
            _exit(0);
        if (end == KUBE_WATCH_CLOSED) {
            backoff = 0.1;
            continue; /* from the last resourceVersion seen: nothing missed */
        }
        s->v.state = LW_BROKEN;
        snprintf(s->v.why, sizeof s->v.why, "%.399s", end == KUBE_WATCH_STOPPED ? "restarted" : err);
        publish(s->w, &s->v);
        s->reread = 1;
        if (end != KUBE_WATCH_STOPPED) {
            pause_s(s, backoff);
            backoff = backoff * 2 > BACKOFF_MAX_S ? BACKOFF_MAX_S : backoff * 2;
        }
    }
}

/* The helper's body (proc/helper.h): the watcher, until it _exits. */
static void watch_helper(void *ud)
{
    struct watcher *s = ud;
    watcher_main(s, s->cfg, s->ns, s->name);
}

int lockwatch_start(struct lockwatch *w, const struct kube_config *cfg, const char *ns,
                    const char *name, const char *rv, lockwatch_judge judge, void *ud)
{
    if (!w || w->pid || atomic_load(&w->word) == 1)
        return -1;
    struct watcher s;
    memset(&s, 0, sizeof s);
    s.w = w;
    s.runner = getpid();
    s.judge = judge;
    s.ud = ud;
    s.cfg = cfg;
    s.ns = ns;
    s.name = name;
    s.v.state = LW_STARTING; /* opened from 0: this watcher's streams */
    snprintf(s.v.rv, sizeof s.v.rv, "%s", rv);
    s.restarts = atomic_load(&w->restarts);
    publish(w, &s.v);
    pid_t pid = proc_helper_start("cozy-lockwatch", watch_helper, &s);
    if (pid < 0) {
        s.v.state = LW_GONE;
        publish(w, &s.v);
        return -1;
    }
    w->pid = pid;
    return 0;
}

void lockwatch_stop(struct lockwatch *w)
{
    if (!w || !w->pid)
        return;
    proc_helper_stop(w->pid);
    w->pid = 0;
    /* the view stays as it was (a loss stays a loss), marked no longer fed */
    struct lockwatch_view v;
    lockwatch_view(w, &v);
    if (v.state != LW_LOST) {
        v.state = LW_GONE;
        publish(w, &v);
    }
}

void lockwatch_free(struct lockwatch *w)
{
    if (!w)
        return;
    lockwatch_stop(w);
    munmap(w, sizeof *w);
}

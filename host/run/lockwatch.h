/* lockwatch.h: the runner's watch on its Lease (run/lock.h says what the
 * events mean; this is how they are followed).
 *
 * A watcher process, forked when the lock is taken (a process, not a
 * thread: the runner forks its Lua migrations without exec, and a thread
 * holding a libcurl or OpenSSL lock at that moment would leave it locked in
 * the child), streams the Lease's events on a connection of its own and
 * hands each to the judge the runner gave it. It reports through one page
 * of shared memory whose first word is the lease watch word every
 * migration's process group reads (proc/leasewatch.h): on a loss (the
 * Lease deleted, force-deleted, being deleted, or held by another) the
 * watcher sets that word in the past before anything else, so the
 * migration in flight is killed within one round trip of the event (one
 * watch mechanism: the same word the runner's own checks pull), then
 * publishes why and exits. The runner reads the rest of the page (what
 * the watch last saw, through a sequence lock) instead of reading the
 * Lease back; while the watch is broken, starting or behind, it reads back
 * as before. The watcher dies with the runner (PR_SET_PDEATHSIG) and never
 * writes anything. */
#ifndef COZY_LOCKWATCH_H
#define COZY_LOCKWATCH_H
#include <stdatomic.h>
#include <stddef.h>
#include <cjson/cJSON.h>

#include "client/kubeconfig.h"

enum lockwatch_state {
    LW_STARTING = 0,        /* no stream open yet */
    LW_LIVE,                /* a stream is open: every change reaches the page */
    LW_BROKEN,              /* between streams (why: the last error) */
    LW_LOST,                /* the judge said lost (why); the word is in the past */
    LW_GONE,                /* the watcher could not run, or was stopped */
};

/* What the watcher last saw of the Lease. */
struct lockwatch_view {
    int state;
    int finish_delete;      /* LW_LOST: deleted while ours (our finalizer to remove) */
    unsigned opened;        /* streams opened so far */
    char rv[64], renew[40], mark[64], handover[512];
    char why[400];
};

/* The judge, run in the watcher: one event (type ADDED, MODIFIED,
 * DELETED, BOOKMARK, or READ for a read-back; object NULL when the Lease
 * is absent) into v's rv, renew, mark and handover. 1 when the hold is
 * lost (why and finish_delete set), else 0. */
typedef int (*lockwatch_judge)(void *ud, const char *type, const cJSON *object,
                               struct lockwatch_view *v);

struct lockwatch;

/* Maps the page. NULL when it cannot be. */
struct lockwatch *lockwatch_new(void);
/* The word migrations watch (leasewatch.h), the page's first. */
_Atomic(long long) *lockwatch_word(struct lockwatch *w);
/* Moves the word to until_us unless the watcher already set it in the past
 * (a loss is never undone). */
void lockwatch_push(struct lockwatch *w, long long until_us);
/* Starts the watcher on Lease ns/name from rv (the resourceVersion of the
 * holder's confirmed write): judge(ud, ...) runs in the watcher's copy of
 * the runner's memory. 0, or -1 (no watcher: the runner reads back). */
int lockwatch_start(struct lockwatch *w, const struct kube_config *cfg, const char *ns,
                    const char *name, const char *rv, lockwatch_judge judge, void *ud);
/* A consistent copy of what the watcher last published; LW_GONE once it
 * has ended (it is reaped here), LW_LOST kept. */
void lockwatch_view(struct lockwatch *w, struct lockwatch_view *out);
/* Asks the watcher to read the Lease afresh and open a new stream (the
 * runner found it behind). */
void lockwatch_restart(struct lockwatch *w);
/* Stops and reaps the watcher (a no-op when none runs); the page stays. */
void lockwatch_stop(struct lockwatch *w);
/* Stops it and unmaps the page. NULL is a no-op. */
void lockwatch_free(struct lockwatch *w);
#endif

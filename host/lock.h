/* lock.h: the runner lock, a coordination.k8s.io/v1 Lease next to the
 * ledger, held for the whole run: two runners never execute a migration or
 * write a record at the same time.
 *
 * The recipe a runner follows:
 *   acquire   lock_acquire: create the Lease (holder = us, a finalizer so a
 *             migration that deletes it cannot let another runner in), or
 *             take it over once renewTime + leaseDurationSeconds has passed
 *             (a compare-and-swap on its resourceVersion: of two runners
 *             racing, one wins). Waits up to wait_s while another holds it.
 *   confirm   lock_confirm before starting each migration and before each
 *             record write: free while the last confirmed renewal is younger
 *             than the lease duration less a margin; otherwise it renews now
 *             and fails if that is not confirmed. A failure means: stop, kill
 *             what runs, record nothing more, exit 5.
 *   renew     lock_renew from the wait loop (child_spec.tick) every quarter
 *             of the lease: a compare-and-swap patch. A renewal whose outcome
 *             is unknown (a reset, a 5xx, a 409 after a retry) is decided by
 *             reading the Lease back: ours if it holds our holder and our
 *             renewTime. Lost when another holds it, it was deleted, or no
 *             renewal was confirmed within the duration less the margin.
 *   watch     lock_watch: the deadline a migration's process group may live
 *             to without a newer confirmation, in shared memory its children
 *             read; a runner that stops (SIGSTOP, a hung syscall) cannot
 *             leave its migration running past the lease (child.c kills the
 *             group itself).
 *   release   lock_release: clear the holder and the finalizer.
 *
 * Guaranteed: while lock_confirm succeeds, no other runner holds the Lease,
 * if clocks agree within the margin. Not guaranteed: that a migration
 * interrupted by a crash or a lost lock did not change anything; it runs
 * again next time, which is why migrations must be idempotent. */
#ifndef COZY_LOCK_H
#define COZY_LOCK_H
#include <stdatomic.h>

#include "rest.h"

/* The finalizer every Lease this runner writes carries. */
#define LOCK_FINALIZER "platform.cozystack.io/runner-lock"

struct lock {
    struct rest_client *c;
    char ns[128], name[128], holder[256];
    char rv[64];            /* resourceVersion of our last confirmed write */
    char sent[40];          /* renewTime of the write in flight */
    int duration_s;         /* leaseDurationSeconds */
    double margin;          /* how much earlier than the others we give up */
    double confirmed_at;    /* monotonic: when our last confirmed write was sent */
    int held;
    char lost[512];         /* why it was lost, when it was */
    _Atomic(long long) *watch;  /* shared with children: lock_watch */
};

/* Tries for up to wait_s seconds. Returns 0 when held; -1 with err naming the
 * holder when someone else kept it (*busy = 1), or the API error (*busy = 0). */
int lock_acquire(struct lock *lk, struct rest_client *c, const char *ns, const char *name,
                 int duration_s, double wait_s, int *busy, char *err, size_t errlen);
/* 0 while held (renewing first when the last confirmation is too old), -1
 * when lost (err says why). */
int lock_confirm(struct lock *lk, char *err, size_t errlen);
/* Renews when a quarter of the lease has passed; cheap to call often.
 * 0 while held, -1 when lost. */
int lock_renew(struct lock *lk, char *err, size_t errlen);
/* Seconds our hold is certain for (the duration less the margin since the
 * last confirmation); what a write under the lock may take at most. */
double lock_left(const struct lock *lk);
/* The watch word for child_spec.lease_until_us: monotonic microseconds
 * after which a migration's process group must not live. */
const _Atomic(long long) *lock_watch(const struct lock *lk);
void lock_release(struct lock *lk);
#endif

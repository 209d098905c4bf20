/* lock.h: the runner lock, a coordination.k8s.io/v1 Lease next to the
 * ledger, held for the whole run: two runners never execute a migration or
 * write a record at the same time.
 *
 * One clock per observer. Nothing here compares two machines' wall clocks
 * to decide who holds the lock: the renewTime a holder writes is only a
 * value that changes. A runner that waits judges the Lease expired when
 * its holder's renewals (holderIdentity, renewTime, leaseTransitions) have
 * not moved for leaseDurationSeconds of the waiting runner's own
 * CLOCK_MONOTONIC since it first saw them so (client-go's leader election
 * does the same). Any other write (a hand-over request, a person's label)
 * moves the resourceVersion and nothing else, so it keeps nobody out: a
 * writer that only rewrites annotations cannot starve the waiters. The
 * holder judges its hold on its own CLOCK_MONOTONIC: it holds until the
 * lease duration, less a margin, has passed since its last confirmed
 * renewal was *sent*. Every waiting runner first saw that renewal after it
 * was sent, so the holder gives up before any of them can take over,
 * whatever their wall clocks say.
 *
 * The recipe a runner follows:
 *   acquire   lock_acquire: create the Lease (holder = us, a finalizer so a
 *             migration that deletes it cannot let another runner in), or
 *             take it over once expired as above (a compare-and-swap on its
 *             resourceVersion: of two runners racing, one wins). A Lease with
 *             no holder is free at once. Waits up to wait_s while another
 *             holds it; a stop signal (stop.h) ends the wait.
 *   watch     held, the Lease is watched (lockwatch.h): a watcher process
 *             streams its events from the resourceVersion of our confirmed
 *             write and judges each as a read-back would be judged. A loss
 *             (another holder, deleted, force-deleted, being deleted) sets
 *             the shared word (below) in the past at once, so the
 *             migration in flight is killed within one round trip of the
 *             event; the runner learns it at its next confirmation or tick.
 *             While the watch is live and has shown our own last write, it
 *             stands in for the read-backs: no GET per migration on the
 *             happy path. Starting, broken, or behind by more than
 *             LOCK_WATCH_LAG_S (then told to start afresh), the runner
 *             reads the Lease back as before.
 *   confirm   lock_confirm before starting each migration and before each
 *             record write: renews when a quarter of the lease has passed,
 *             otherwise takes the watch's word, or reads the Lease back
 *             when the watch cannot vouch. Lost when another holds it, it
 *             is gone (deleted with its finalizer removed) or being deleted
 *             (a plain delete: the finalizer keeps it), or no renewal was
 *             confirmed within the duration less the margin. A failure
 *             means: stop, kill what runs, record nothing more, exit 5.
 *   renew     lock_renew from the wait loop (child_spec.tick): the same,
 *             paced: a renewal every quarter of the lease, and, while the
 *             watch cannot vouch, a read-back at most every LOCK_CHECK_S
 *             between them. Every renewal is a compare-and-swap patch; one
 *             whose outcome is unknown (a reset, a 5xx, a 409 after a
 *             retry) is decided by reading the Lease back: ours if it holds
 *             our holder and our renewTime.
 *   deadline  lock_watch: the deadline a migration's process group may live
 *             to without a newer confirmation, in shared memory its children
 *             read (proc/leasewatch.h); a runner that stops (SIGSTOP, a hung
 *             syscall) cannot leave its migration running past the lease
 *             (child.c kills the group itself), and the watcher's loss moves
 *             it into the past: one mechanism stops a migration.
 *   new Lease A run that had to create the Lease while the ledger exists
 *             (someone deleted it, maybe by force under a live holder)
 *             waits LOCK_NEW_LEASE_GRACE_S, renewing, before its first
 *             migration (runner.c): the old holder stops its migration
 *             within that, by its watch or its read-backs.
 *   ledger    lock_note_ledger once the ledger is read or created: the Lease
 *             records the ledger's uid (annotation LOCK_LEDGER_ANNOTATION),
 *             so a later run that finds the ledger absent knows this cluster
 *             had one (runner.c refuses, exit 12) instead of taking it for a
 *             fresh install. lock_read_ledger_mark reads it without the lock.
 *   release   lock_release: clear the holder and the finalizer; after a
 *             plain delete (the Lease is terminating and still ours) remove
 *             our finalizer, so nothing is left terminating behind.
 *   hand-over The upgrade goes first. Every holder writes its role
 *             (LOCK_ROLE_ANNOTATION: pre-apply, background, or none) when
 *             it creates or takes the Lease. A pre-apply runner that waits
 *             on a background holder asks for the Lease: it writes a
 *             request into LOCK_HANDOVER_ANNOTATION (the one write a runner
 *             makes to a Lease it does not hold: a merge patch of that one
 *             annotation, conditional on the resourceVersion it read),
 *             {"by": its identity, "step": the slug it runs first, "n": a
 *             count}, and writes it anew (n + 1) once a lease duration
 *             while it waits, never more often. A request is honoured only
 *             while it proves to be a live runner's:
 *               - it parses, and "by" has the shape of a holder identity;
 *               - it is live: the holder saw its text change within
 *                 LOCK_REQUEST_LIVES lease durations of its own clock (its
 *                 writer refreshes it once a lease; a dead one's expires);
 *               - it is bound to the requester's own pending step: "step"
 *                 is not a background migration and has no record in the
 *                 ledger the holder holds (runner.c judges this part).
 *             The background holder reads the request with every
 *             confirmation; at its next migration boundary (after
 *             recording the migration in flight, never in the middle of
 *             one) lock_handover hands it to runner.c, which releases and
 *             exits 0 when it is honoured and says once why when it is not.
 *             The release leaves the request in place; a background runner
 *             that finds the Lease free with a request waits for the
 *             upgrade to take it, but never beyond one lease duration of
 *             its own clock from when it first found it so, however often
 *             the request is rewritten; nor does it wait behind a pre-apply
 *             holder that renews: lock_acquire returns at once with *busy
 *             = LOCK_YIELD when the holder's renewTime is recent (a hint,
 *             never a takeover: an old one is judged on this runner's
 *             clock, as any holder's, and a dead upgrade's Lease is taken
 *             over once expired, so it cannot stall the tier). The waiter
 *             that gets the Lease replaces the whole object, which drops
 *             the request; one that gives up withdraws its own. A
 *             background runner never preempts a pre-apply one, and the
 *             upgrade waits for at most the one background migration in
 *             flight.
 *
 * Holder identities are unique: <host>/<pid>/<start time>/<64 random bits> (two
 * runners that are PID 1 of their containers, on hosts of one name, started
 * in the same second, still differ).
 *
 * Guaranteed: while lock_confirm succeeds, no other runner holds the Lease,
 * unless a person removed its finalizer and deleted it: then the holder's
 * migration in flight is killed within a round trip of the deletion by its
 * watch (LOCK_CHECK_S by its read-backs while the watch is broken), and a
 * runner that creates the Lease anew waits LOCK_NEW_LEASE_GRACE_S before
 * its first migration, so the two do not overlap. Not guaranteed: that a
 * migration interrupted by a crash or a lost lock did not change anything;
 * it runs again next time, which is why migrations must be idempotent. */
#ifndef COZY_LOCK_H
#define COZY_LOCK_H
#include <stdatomic.h>

#include "client/rest.h"
#include "run/lockwatch.h"

/* The finalizer every Lease this runner writes carries. */
#define LOCK_FINALIZER "platform.cozystack.io/runner-lock"
/* The annotation that records the uid of the ledger a run read or created. */
#define LOCK_LEDGER_ANNOTATION "platform.cozystack.io/ledger-uid"
/* The holder's role, and a pre-apply waiter's request (the hand-over). */
#define LOCK_ROLE_ANNOTATION "platform.cozystack.io/holder-tier"
#define LOCK_HANDOVER_ANNOTATION "platform.cozystack.io/handover-requested-by"
/* A hand-over request is live while its text changed within this many
 * lease durations of the holder's clock (its writer rewrites it once a
 * lease). */
#define LOCK_REQUEST_LIVES 2.0
/* How long the watch may take to show our own renewal before the runner
 * takes it for behind (and reads the Lease back meanwhile). */
#define LOCK_WATCH_LAG_S 1.0
/* A watcher that ended is started anew at once when it had opened a
 * stream (someone killed it), else at most this often (it cannot run);
 * meanwhile the runner reads the Lease back. */
#define LOCK_WATCH_RESTART_S 5.0
/* A run that had to create the Lease while the ledger shows earlier runs
 * (someone deleted it, maybe under a live holder, by force) waits this long
 * before its first migration: a holder notices within a round trip of the
 * deletion by its watch, and within LOCK_CHECK_S by its read-backs when the
 * watch is broken, and stops its migration first. */
#define LOCK_NEW_LEASE_GRACE_S (2 * LOCK_CHECK_S)
/* The longest a held lock goes without reading the Lease back while a
 * migration runs (shorter for a lease under 4 s: an eighth of it). */
#define LOCK_CHECK_S 0.5

enum lock_role {
    LOCK_ROLE_NONE = 0,     /* neither asks nor yields (skip) */
    LOCK_ROLE_PRE_APPLY,    /* the upgrade: asks a background holder to hand over */
    LOCK_ROLE_BACKGROUND,   /* yields to the upgrade */
};

/* A hand-over request as the Lease carries it (text is cluster input:
 * escape it before printing). */
struct lock_request {
    char text[512];         /* the annotation's value, cut to fit */
    int valid;              /* it parsed: {"by": IDENTITY, "step": SLUG, "n": N} */
    char by[256], step[64];
    long n;
    int live;               /* its text changed within LOCK_REQUEST_LIVES leases of our clock */
};

/* lock_acquire's *busy: why it did not get the lock. */
enum { LOCK_ERROR = 0, LOCK_BUSY = 1, LOCK_YIELD = 2 };

struct lock {
    struct rest_client *c;
    enum lock_role role;
    char ns[128], name[128], holder[256];
    char rv[64];            /* resourceVersion of our last confirmed write or read-back */
    char sent[40];          /* renewTime of the write in flight */
    int duration_s;         /* leaseDurationSeconds */
    double margin;          /* how much earlier than the others we give up */
    double confirmed_at;    /* monotonic: when our last confirmed write was sent */
    double checked_at;      /* monotonic: our last read-back or renewal */
    int held;
    int finish_delete;      /* lost to a plain delete while still ours: lock_release
                             * removes our finalizer */
    char mark[64];          /* the ledger uid the Lease records, "" when none */
    char want_mark[64];     /* a uid for the next renewal to record */
    char obs[400];          /* acquire: holder|renewTime|leaseTransitions as last seen */
    double obs_at;          /* monotonic: when it was first seen so */
    int obs_moves;          /* acquire: how often we saw the holder renew */
    char step[64];          /* waiting pre-apply: the step our request names ("": none) */
    double asked_at;        /* monotonic: our last request write (0: none) */
    long asked_n;           /* the count of our last request */
    double free_asked_at;   /* waiting background: when we first found it free with a request */
    char req_text[512];     /* the request text as last seen */
    double req_at;          /* monotonic: when it was first seen so */
    struct lock_request req; /* held: the request as last seen */
    char lost[512];         /* why it was lost, when it was */
    int asked;              /* waiting: our hand-over request was written */
    struct lockwatch *lw;   /* the page the watcher and the children share (lockwatch.h) */
    char confirmed_renew[40]; /* renewTime of our last confirmed write */
    char watch_from[40];    /* renewTime of the write the watch started after */
    double restart_asked;   /* monotonic: when we last asked the watcher to start afresh */
    double watch_started;   /* monotonic: when the watcher was last started */
    int created;            /* acquire: we created the Lease (there was none) */
};

/* Tries for up to wait_s seconds. step: a pre-apply runner's first pending
 * step, which its hand-over requests name (NULL or "": it asks for none).
 * Returns 0 when held; -1 with err naming the holder when someone else
 * kept it (*busy = LOCK_BUSY), when a background runner found the upgrade
 * holding it (*busy = LOCK_YIELD, at once for a pre-apply holder that
 * renews), or with the API error or the stop signal that ended the wait
 * (*busy = LOCK_ERROR). */
int lock_acquire(struct lock *lk, struct rest_client *c, const char *ns, const char *name,
                 enum lock_role role, const char *step, int duration_s, double wait_s, int *busy,
                 char *err, size_t errlen);
/* Held by a background runner: the hand-over request on the Lease as the
 * last confirmation read it, whether valid and live or not (the caller
 * honours a valid, live one bound to a pending step); NULL when there is
 * none, it is our own, or the role is not background. */
const struct lock_request *lock_handover(const struct lock *lk);
/* 0 while held (renewed, or read back and found ours), -1 when lost (err
 * says why). */
int lock_confirm(struct lock *lk, char *err, size_t errlen);
/* Renews when a quarter of the lease has passed, reads it back at most
 * every LOCK_CHECK_S otherwise; cheap to call often. 0 while held, -1 when
 * lost. */
int lock_renew(struct lock *lk, char *err, size_t errlen);
/* Seconds our hold is certain for (the duration less the margin since the
 * last confirmation); what a write under the lock may take at most. */
double lock_left(const struct lock *lk);
/* The watch word for child_spec.lease_until_us: monotonic microseconds
 * after which a migration's process group must not live. */
const _Atomic(long long) *lock_watch(const struct lock *lk);
/* Records uid as the ledger's in the Lease (a renewal, when it is not
 * there yet). 0 while held, -1 when lost (err says why). */
int lock_note_ledger(struct lock *lk, const char *uid, char *err, size_t errlen);
/* The ledger uid the Lease records, read without holding it (plan, dry
 * run): 0 with mark "" when there is none or no Lease, -1 with err when it
 * cannot be read. */
int lock_read_ledger_mark(struct rest_client *c, const char *ns, const char *name, char *mark,
                          size_t marklen, char *err, size_t errlen);
/* The Lease as a reader sees it, without holding it (dispatch: whether
 * the upgrade holds or asks for the lock). exists 0 when there is none. */
struct lock_peek {
    int exists;
    char holder[256], role[32], renew[40];
    struct lock_request req;    /* the hand-over request ("" text: none) */
    double duration;
};
/* 0, or -1 with err when it cannot be read. */
int lock_peek(struct rest_client *c, const char *ns, const char *name, struct lock_peek *out,
              char *err, size_t errlen);
/* Releases what we hold (a no-op when nothing), also while a stop signal
 * is pending. 0, or -1 after a warning (the lease then expires by itself). */
int lock_release(struct lock *lk);
#endif

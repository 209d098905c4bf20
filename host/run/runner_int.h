/* runner_int.h: what the runner's files share: one run's context and the
 * steps every command of the runner takes (context.c: opening it, loading
 * and planning; runner.c: run and skip; fresh.c: a cluster without a
 * ledger, and seeding; recording.c: the ledger under the lock; status.c:
 * plan and status; and preview.c, which plans exactly as run does; each
 * migration is launched through launch.h). Nothing outside run/ includes
 * it. */
#ifndef COZY_RUNNER_INT_H
#define COZY_RUNNER_INT_H
#include <stddef.h>

#include "formats/ledgerdoc.h"
#include "formats/tree.h"
#include "client/rest.h"
#include "run/launch.h"
#include "run/ledger.h"
#include "run/lock.h"
#include "run/plan.h"
#include "run/report.h"
#include "run/runner.h"

struct runner_ctx {
    const struct runner_opts *o;
    struct rest_client *rest;
    struct ledger_loc loc;
    struct tree t;
    struct ledger l;
    struct lock lk;
    struct plan_opts po;
    char now[32];           /* po.now: refreshed before each record */
    size_t ledger_bytes;
    int size_warned;        /* the 80% warning is given once a run */
    int lock_lost;
    int stop_said;          /* the stop line was printed */
    const char *last_slug;  /* the last step begun, for the stop line */
    const char *last_done;  /* the last migration executed and recorded */
    struct ran { const char *slug; const char *how; } *ran; /* what this run executed */
    size_t nran;
    char identity[256];     /* who the runner acts as, for skipped records (record.by) */
    int yielded;            /* the background run handed the lock to the upgrade */
    char ask_step[64];      /* pre-apply: the step a hand-over request names (lock.h) */
    char ignored[600];      /* the last hand-over request said to be ignored */
    long stamp;             /* the legacy stamp the next ok record carries out (`version`,
                             * gateway/stamp.h); -1: none */
    struct launcher L;      /* how its migrations are launched (launch.h): the options, and
                             * the shell gateways' socket, kept for the whole run */
};

/* ---- context.c ---- */

/* How much of the tree a command needs (runner_ctx_open). */
enum {
    TREE_OPTIONAL = 0,          /* status: a tree that does not load is reported and left
                                 * empty; a bad header is reported */
    TREE_NEEDED = 1,            /* run, plan, preview: a bad header is fatal, or with --only
                                 * fatal only when it is that slug's */
    TREE_NEEDED_ANY_HEADER = 2, /* skip: runs no script, so a bad header is reported */
};
/* The tree first (a bad one exits before any cluster contact), then the
 * connection. Returns 0 or an exit code, with c ready to free either way.
 * need_tree: TREE_OPTIONAL, TREE_NEEDED or TREE_NEEDED_ANY_HEADER. */
int runner_ctx_open(struct runner_ctx *c, const struct runner_opts *o, int need_tree,
                    int *have_tree);
void runner_ctx_free(struct runner_ctx *c);
/* Reads the ledger and plans; a refusal is reported. 0 or an exit code. */
int runner_read_and_plan(struct runner_ctx *c, struct plan *p);
/* What plan and preview start from: the tree loaded, the ledger read
 * (without the lock) and planned exactly as run plans it (--only, --tier,
 * SKIP and SKIP_REASON, the retention floor, a deleted ledger). 0 or an
 * exit code, c and p ready to free (the warnings in p are the caller's to
 * say). */
int runner_load_plan(struct runner_ctx *c, const struct runner_opts *o, struct plan *p);
/* The tables' options from the runner's. */
struct report_opts runner_report_opts(const struct runner_opts *o);

/* ---- fresh.c ---- */

/* Before the lock, on a cluster without a ledger (its namespace looked at
 * too): a --local run says what the hook would do there and stops (exit 2)
 * unless told --as-installed-at, and needs --create-namespace where the
 * namespace is missing (which it then creates, or, predicting, says it
 * would). predict (plan, a dry run, preview) also says a missing namespace
 * without --local (the run would fail, exit 6). A real run without --local
 * (the hook) asks nothing. 0 or an exit code, said. */
int runner_fresh_cluster(struct runner_ctx *c, int predict);
/* Under the lock: a fresh install's ledger created with its
 * skipped-fresh-install records, or legacy records seeded below the old
 * hook's version (a dry run says what it would do). 0 or an exit code. */
int runner_seed(struct runner_ctx *c, struct plan *p);

/* ---- runner.c ---- */

/* An Event on the ledger; none in dry run or before the ledger exists. */
void runner_event(struct runner_ctx *c, const char *type, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The steps that do something (a STEP_SKIP only says why nothing does). */
size_t runner_work_steps(const struct plan *p);
/* Step s as a launch (launch.h), for run and preview alike: migration
 * s->m of the tree; a shell's whole environment (shellenv.h: the ledger's
 * version, the legacy map's top, the header's dry-run variable when c->L
 * is a dry run, --pass-env) and the one `version` a legacy script may
 * stamp. */
void runner_launch_step(struct runner_ctx *c, const struct step *s, struct launch *j);

/* ---- indexcheck.c ---- */

/* The index the chart gave the hook (runner_opts.index_json) against the
 * tree and image: 0 (none given, or they agree), or EXIT_RELEASED after a
 * line per difference and an Event (EXIT_PACKAGING when it cannot be read
 * whole). */
int runner_index_check_release(struct runner_ctx *c);

/* ---- recording.c ---- */

int runner_read_ledger(struct runner_ctx *c);
/* After a read: an absent ledger the Lease says existed is refused (exit
 * 12); a present one read under the lock gets its uid noted in the Lease. */
int runner_check_ledger(struct runner_ctx *c);
/* Before a migration starts and before a record is written: is the lock
 * still held? 0, or EXIT_LOCK after saying so. */
int runner_hold(struct runner_ctx *c, const char *what);
/* A record write found the ledger gone: exit 12, saying so. */
int runner_ledger_gone(struct runner_ctx *c, const char *what);
/* After LEDGER_CONFLICT: 1 when the Lease is still ours and the ledger's
 * resourceVersion was read afresh (write again), 0 with *rc otherwise. */
int runner_after_conflict(struct runner_ctx *c, const char *what, int *tries, int *rc);
/* The no-delete label and keep annotation, once a run. 0 or EXIT_LEDGER_GONE. */
int runner_protect_once(struct runner_ctx *c);
/* The ledger is past LEDGER_SHRINK_AT: failed records are written shrunk. */
int runner_shrinking(const struct runner_ctx *c);
/* Room for the largest record step s can write, or exit 13 after saying so. */
int runner_room_for(struct runner_ctx *c, const struct step *s);
/* Writes slug's record. 0 or an exit code (EXIT_LOCK, EXIT_LEDGER_GONE,
 * EXIT_LEDGER_FULL, EXIT_DENIED, EXIT_CLUSTER). held: the lock was confirmed
 * for this write just before. */
int runner_write_record(struct runner_ctx *c, const char *slug, struct record *r, int held);
/* A record for step s, stamped now. */
void runner_new_record(struct runner_ctx *c, const struct step *s, enum rec_state st,
                       struct record *r);
#endif

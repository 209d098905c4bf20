/* runner_int.h: what the runner's files share: one run's context and the
 * steps every command of the runner takes (runner.c: run, skip, loading
 * and planning; recording.c: the ledger under the lock; status.c: plan and
 * status; and preview.c, which plans exactly as run does). Nothing outside
 * run/ includes it. */
#ifndef COZY_RUNNER_INT_H
#define COZY_RUNNER_INT_H
#include <stddef.h>

#include "formats/ledgerdoc.h"
#include "formats/tree.h"
#include "kube/rest.h"
#include "run/ledger.h"
#include "run/lock.h"
#include "run/plan.h"
#include "run/report.h"
#include "run/runner.h"

struct ctx {
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
};

/* ---- runner.c ---- */

/* The tree first (a bad one exits before any cluster contact), then the
 * connection. Returns 0 or an exit code, with c ready to free either way.
 * need_tree 0: a tree that does not load is reported and left empty. */
int open_ctx(struct ctx *c, const struct runner_opts *o, int need_tree, int *have_tree);
void ctx_free(struct ctx *c);
/* Reads the ledger and plans; a refusal is reported. 0 or an exit code. */
int read_and_plan(struct ctx *c, struct plan *p);
/* What plan and preview start from: the tree loaded, the ledger read
 * (without the lock) and planned exactly as run plans it (--only, --tier,
 * SKIP and SKIP_REASON, the retention floor, a deleted ledger). 0 or an
 * exit code, c and p ready to free (the warnings in p are the caller's to
 * say). */
int runner_load_plan(struct ctx *c, const struct runner_opts *o, struct plan *p);
/* The tables' options from the runner's. */
struct report_opts report_opts(const struct runner_opts *o);
/* A migration's timeout: --timeout, else its header's, else
 * DEFAULT_TIMEOUT_S. */
double runner_timeout(const struct runner_opts *o, const struct migration *m);

/* ---- indexcheck.c ---- */

/* The index the chart gave the hook (runner_opts.index_json) against the
 * tree and image: 0 (none given, or they agree), or EXIT_RELEASED after a
 * line per difference and an Event (EXIT_PACKAGING when it cannot be read
 * whole). */
int index_check_release(struct ctx *c);

/* ---- recording.c ---- */

int read_ledger(struct ctx *c);
/* After a read: an absent ledger the Lease says existed is refused (exit
 * 12); a present one read under the lock gets its uid noted in the Lease. */
int check_ledger(struct ctx *c);
/* Before a migration starts and before a record is written: is the lock
 * still held? 0, or EXIT_LOCK after saying so. */
int hold(struct ctx *c, const char *what);
/* A record write found the ledger gone: exit 12, saying so. */
int ledger_gone(struct ctx *c, const char *what);
/* After LEDGER_CONFLICT: 1 when the Lease is still ours and the ledger's
 * resourceVersion was read afresh (write again), 0 with *rc otherwise. */
int after_conflict(struct ctx *c, const char *what, int *tries, int *rc);
/* The no-delete label and keep annotation, once a run. 0 or EXIT_LEDGER_GONE. */
int protect_once(struct ctx *c);
/* The ledger is past LEDGER_SHRINK_AT: failed records are written shrunk. */
int shrinking(const struct ctx *c);
/* Room for the largest record step s can write, or exit 13 after saying so. */
int room_for(struct ctx *c, const struct step *s);
/* Writes slug's record. 0 or an exit code (EXIT_LOCK, EXIT_LEDGER_GONE,
 * EXIT_LEDGER_FULL, EXIT_DENIED, EXIT_CLUSTER). held: the lock was confirmed
 * for this write just before. */
int write_record(struct ctx *c, const char *slug, struct record *r, int held);
/* A record for step s, stamped now. */
void new_record(struct ctx *c, const struct step *s, enum rec_state st, struct record *r);
#endif

/* report.h: the tables `plan` and `status` print. Owns their columns, their
 * order and their JSON form; prints through log.c's out_* only. Decides
 * nothing: the plan and the ledger are given. */
#ifndef COZY_REPORT_H
#define COZY_REPORT_H
#include "formats/ledgerdoc.h"
#include "run/plan.h"
#include "formats/tree.h"

struct report_opts {
    const char *ns, *ledger;    /* where the ledger lives, for messages */
    const char *tier;
    const char *only;
    int dry_run;
    int output_json;            /* status: one JSON document */
    int failed_only;            /* status --failed: what needs a person */
};

/* What `plan` prints: the seeding it would do, then every step with why. */
void report_plan(const struct tree *t, const struct ledger *l, const struct plan *p,
                 const struct report_opts *o);

struct bg_view;

/* What `status` shows, as the runner found it. */
struct status_view {
    const struct ledger *l;
    const struct tree *t;           /* NULL: no tree (the ledger alone) */
    const struct manifest *man;     /* the order without a tree; NULL: by time */
    const struct plan *plans;       /* what run would do, per tier (blocked slugs) */
    size_t nplans;
    char *const *problems;          /* what makes `version` untrustworthy */
    size_t nproblems;
    const struct bg_view *bg;       /* the background tier as dispatch sees it (dispatch.h) */
    size_t nbg;
};

/* The ledger as a table (or JSON): every manifest slug in manifest order,
 * then records the manifest does not know by time; with no manifest, every
 * record by time. failed_only keeps the rows that need a person (failed,
 * blocked, unreadable). Returns how many need a person (rows and `version`
 * problems), or -1 when out of memory. */
int report_status(const struct status_view *v, const struct report_opts *o);
/* `status SLUG`: the whole record (message, output tail, journal). Returns
 * 0, 1 when the slug is neither recorded nor shipped, or -1 (memory). */
int report_record(const struct status_view *v, const char *slug, const struct report_opts *o);
#endif

/* report.h: the tables `plan` and `status` print. Owns their columns, their
 * order and their JSON form; prints through log.c's out_* only. Decides
 * nothing: the plan and the ledger are given. */
#ifndef COZY_REPORT_H
#define COZY_REPORT_H
#include "ledger.h"
#include "plan.h"
#include "tree.h"

struct report_opts {
    const char *ns, *ledger;    /* where the ledger lives, for messages */
    const char *tier;
    const char *only;
    int dry_run;
    int output_json;            /* status: one JSON document */
};

/* What `plan` prints: the seeding it would do, then every step with why. */
void report_plan(const struct tree *t, const struct ledger *l, const struct plan *p,
                 const struct report_opts *o);
/* What `status` prints: every manifest slug in order, then records the
 * tree does not know. t may be NULL (no tree: the ledger alone). Returns 0,
 * or -1 when out of memory. */
int report_status(const struct tree *t, const struct ledger *l, const struct report_opts *o);
#endif

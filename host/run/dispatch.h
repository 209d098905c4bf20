/* dispatch.h: the background tier, dispatched one Job per migration.
 *
 * `cozy-migrate dispatch` is one reconcile, run by the chart's CronJob
 * (concurrencyPolicy Forbid) or by hand or by another orchestrator. It
 * reads the index (index.h: the release's image and its background slugs),
 * the ledger, the Lease and the Jobs it created (labelled DISPATCH_LABEL
 * and with the slug), and:
 *   - a Job of its own still running: does nothing;
 *   - the upgrade holding or asking for the runner lock: does nothing (a
 *     hint read from the Lease; the lock itself keeps runs apart);
 *   - otherwise creates the Job for the first pending background slug in
 *     manifest order: `ONLY=<slug>`, the index's image, the chart's Job
 *     template (INDEX_KEY_JOB) or a built-in one, activeDeadlineSeconds
 *     the template's plus the slug's timeout, backoffLimit 0.
 * Pending is the planner's background walk (plan.h: no record, or failed
 * with attempts under the bound; requires met; nothing held by a failed
 * on-error=abort slug before it) with the retry backoff on top: a failed
 * record waits BACKOFF * 2^(attempts-1), at most BACKOFF_MAX, from its
 * `at`; a Job that ended without advancing the record waits the same from
 * its end, counted over the Jobs that failed so (a Job that completed so
 * yielded the lock to the upgrade: the next dispatch goes on at once). A
 * slug waiting for its backoff is skipped for the next one, unless its
 * on-error is abort (it holds the ones after it). The dispatcher never
 * writes the ledger (the runner in the Job does); it posts an Event per Job
 * it creates (on the Job) and one per slug that exhausted its attempts (on
 * the ledger), and prints one line saying what it did and why. Times are
 * judged on the dispatcher's clock against the record's `at` and the Jobs'
 * timestamps: a skew moves a retry, it never lets two migrations overlap.
 *
 * `status` shows the same view per background slug (dispatch_survey). */
#ifndef COZY_DISPATCH_H
#define COZY_DISPATCH_H
#include <stddef.h>

#include "run/ledger.h"
#include "kube/rest.h"
#include "run/runner.h"

#define DISPATCH_LABEL "platform.cozystack.io/dispatched-by"  /* = cozy-migrate */
#define DISPATCH_SLUG_LABEL "platform.cozystack.io/migration"
#define DISPATCH_LEDGER_ANNOTATION "platform.cozystack.io/ledger"
/* The record's attempts when the Job was made: a Job that ended with the
 * record still there ran nothing it could record. */
#define DISPATCH_ATTEMPTS_ANNOTATION "platform.cozystack.io/attempts-before"

struct dispatch_opts {
    const char *service_account;    /* the built-in template's (no INDEX_KEY_JOB) */
};

/* The command. Exit 0 (a Job created, or nothing to do), 2 usage, 3 no
 * index or one that cannot be read, 6 cluster, 7 (or another refusal of
 * the planner) a ledger it cannot trust: nothing dispatched. */
int dispatch_run(const struct runner_opts *o, const struct dispatch_opts *d);

/* One background slug as the dispatcher sees it now. */
struct bg_view {
    char *slug;
    char *state;    /* "ok", "pending", "running in Job X (attempt 2 of 3)",
                     * "failed 1 of 3 attempts; next attempt after T", ... */
};

/* The background tier's view for `status`: 0 with *v (n entries, manifest
 * order), 1 when there is no index in the cluster (no view), -1 after a
 * warning. l is the ledger as status read it. */
int dispatch_survey(struct rest_client *c, const struct runner_opts *o, const struct ledger *l,
                    struct bg_view **v, size_t *n);
void dispatch_view_free(struct bg_view *v, size_t n);
#endif

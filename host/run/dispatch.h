/* dispatch.h: the background tier, dispatched one Job per migration.
 *
 * `cozy-migrate dispatch` is one reconcile, run by the chart's CronJob
 * (concurrencyPolicy Forbid) or by hand or by another orchestrator. Nothing
 * the cluster holds decides what a Job runs: the dispatcher builds each Job
 * from the image it runs as (MIGRATIONS_IMAGE, the release's digest as the
 * CronJob's own spec names it) and a pod template of the release (env
 * DISPATCH_TEMPLATE_ENV in the CronJob's own spec, or the built-in one),
 * checked and made restricted in code; the index ConfigMap (indexdoc.h)
 * only says which slugs, in which order, with which timeouts and retry
 * policy, and is read whole and compared whole with the dispatcher's own
 * tree and image first: an index that differs (another image, a slug the
 * image does not ship, another timeout...) is refused, exit 9, with a line
 * and one Event naming each difference, and no Job. Then it reads the
 * ledger, the Lease and the Jobs it made, and:
 *   - a Job of its own still running: does nothing;
 *   - the upgrade holding or asking for the runner lock: does nothing (a
 *     hint read from the Lease; the lock itself keeps runs apart);
 *   - otherwise creates the Job for the first pending background slug in
 *     manifest order: `ONLY=<slug>`, its own image, activeDeadlineSeconds
 *     the template's plus the slug's timeout, backoffLimit 0, and a
 *     podFailurePolicy that fails it at once on an exit no retry can
 *     change (DISPATCH_FINAL_EXITS).
 * Its Jobs are recognised by what others cannot forge without its rights:
 * an ownerReference (controller) to the ledger ConfigMap with the ledger's
 * uid, the same uid in label DISPATCH_LEDGER_UID_LABEL, and not suspended
 * (with the chart's ValidatingAdmissionPolicy, only the dispatcher's
 * ServiceAccount may create a Job carrying DISPATCH_LABEL at all). A Job
 * that carries its labels or takes a name it would use without that proof
 * is foreign: it neither blocks nor counts, and is reported once (a
 * Warning Event on it, a line). Job names carry the ledger:
 * mig-<ledger>-<slug>-<attempt>[-<n>], cut and hashed past 63 characters.
 * Pending is the planner's background walk (plan.h: no record, or failed
 * with attempts under the bound; requires met; nothing held by a failed
 * on-error=abort slug before it) with the retry backoff on top: a failed
 * record waits BACKOFF * 2^(attempts-1), at most BACKOFF_MAX, from its
 * `at`; a Job that ended without advancing the record waits the same from
 * its end, counted over the Jobs that failed so (a Job that completed so
 * yielded the lock to the upgrade: the next dispatch goes on at once); a
 * Job failed by its podFailurePolicy (an exit no retry changes) leaves its
 * slug exhausted at once, until a person acts. A slug waiting for its
 * backoff is skipped for the next one, unless its on-error is abort (it
 * holds the ones after it). The dispatcher never writes the ledger (the
 * runner in the Job does); it posts an Event per Job it creates (on the
 * Job) and one per slug that exhausted its attempts (on the ledger), and
 * prints one line saying what it did and why. Times are judged on the
 * dispatcher's clock against the record's `at` and the Jobs' timestamps: a
 * skew moves a retry, it never lets two migrations overlap.
 *
 * `status` shows the same view per background slug (dispatch_survey). */
#ifndef COZY_DISPATCH_H
#define COZY_DISPATCH_H
#include <stddef.h>

#include "run/ledger.h"
#include "client/rest.h"
#include "run/runner.h"

#define DISPATCH_LABEL "platform.cozystack.io/dispatched-by"
#define DISPATCH_BY "cozy-migrate"  /* DISPATCH_LABEL's value */
#define DISPATCH_SLUG_LABEL "platform.cozystack.io/migration"
#define DISPATCH_LEDGER_UID_LABEL "platform.cozystack.io/ledger-uid"
#define DISPATCH_LEDGER_ANNOTATION "platform.cozystack.io/ledger"
/* The record's attempts when the Job was made: a Job that ended with the
 * record still there ran nothing it could record. */
#define DISPATCH_ATTEMPTS_ANNOTATION "platform.cozystack.io/attempts-before"
/* The env var of the dispatcher's own container that holds the release's
 * Job template (JSON, a batch/v1 Job; the chart renders it). */
#define DISPATCH_TEMPLATE_ENV "MIGRATIONS_JOB_TEMPLATE"
/* The runner's exits no retry can change (usage, packaging, retention
 * floor, untrusted ledger, index mismatch, refused, ledger gone, ledger
 * full, denied): the background Jobs' podFailurePolicy fails them at once,
 * and the hook's does the same. */
#define DISPATCH_FINAL_EXITS "2,3,4,7,9,11,12,13,14"

struct dispatch_opts {
    const char *service_account;    /* the built-in template's (no DISPATCH_TEMPLATE_ENV) */
    const char *job_template;       /* DISPATCH_TEMPLATE_ENV's value, or NULL */
};

/* The command. Exit 0 (a Job created, or nothing to do), 2 usage (no
 * MIGRATIONS_IMAGE), 3 no index, one that cannot be read whole, a tree or
 * a Job template that cannot be used, 6 cluster, 7 (or another refusal of
 * the planner) a ledger it cannot trust, 9 the index differs from the
 * image's tree or image, 12 the ledger deleted where the Lease records it:
 * nothing dispatched. */
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

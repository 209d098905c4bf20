/* runner.h: the `run`, `plan`, `status` and `skip` commands' work. Owns
 * executing a plan: lock, ledger read, seeding, operator skips, each
 * migration in a supervised child, recording outcomes, Events, progress
 * lines, and the exit code.
 *
 * Recipe: cli/options.c gives runner_opts its defaults (runner_opts_defaults,
 * from defaults.h), fills it from the command line and calls one of the
 * commands below; each returns a process exit code (exitcodes.h). */
#ifndef COZY_RUNNER_H
#define COZY_RUNNER_H
#include <stddef.h>

#include "formats/manifest.h"
#include "client/options.h"

struct runner_opts {
    struct kube_options k;      /* cluster, namespace, ledger and lease names, dry run */
    const char *dir;            /* root holding migrations/ and legacy-sh/ */
    const char *tier;
    int tier_given;             /* --tier was given (an --only of the other tier is refused) */
    const char *only;
    double timeout;             /* overrides every header when > 0 */
    double lock_timeout;        /* seconds to wait for the lease */
    int lease_duration;         /* seconds */
    double grace;               /* TERM -> KILL */
    int max_attempts;           /* background retry bound */
    const char *image;          /* recorded; MIGRATIONS_IMAGE */
    const char *index_json;     /* the index the chart gave the hook (MIGRATIONS_INDEX): run
                                 * compares it with its tree and image first */
    int output_json;            /* status -o json */
    size_t memory;              /* Lua memory cap, bytes */
    const char *pass_env;       /* shell: comma-separated variables passed through
                                 * (--pass-env, PASS_ENV) */
    int force;                  /* --only past a legacy `version` or unmet requires */
    const char *const *skip;    /* slugs to record `skipped` (env SKIP, or the skip command) */
    size_t nskip;
    const char *skip_reason;    /* their message (--reason, env SKIP_REASON) */
    const char *status_slug;    /* status SLUG: the whole record */
    int failed_only;            /* status --failed */
    /* --local against a development cluster (docs/writing-migrations.md, "Running against kind") */
    const struct manifest *manifest; /* the working tree's (order_local), in place of
                                 * dir's order.d; NULL: order.d */
    const char *installed_at;   /* --as-installed-at: a cluster without a ledger is seeded
                                 * as installed at this release, and what follows runs */
    int create_namespace;       /* --create-namespace: make the ledger's namespace */
};

/* Every field's default (defaults.h; the kube options' from
 * kube_default_options): the pre-apply tier, no --only. */
void runner_opts_defaults(struct runner_opts *o);
/* The most requests a sweep may have on the wire at once: the upper bound
 * of --concurrency (client/restpool.h's REST_POOL_MAX). */
extern const int runner_concurrency_max;

/* The cluster connection of o (kube_open), or NULL after saying why: what
 * the runner and the dispatcher open. */
struct rest_client *runner_connect(const struct runner_opts *o);

int runner_run(const struct runner_opts *o);
int runner_plan(const struct runner_opts *o);
int runner_status(const struct runner_opts *o);
/* The config command: prints, as JSON, the cluster and identity the kube
 * module would use (kubeconfig_describe: no secrets). 0, or EXIT_CLUSTER
 * after one line when it cannot be resolved. */
int runner_config(const struct runner_opts *o);
/* The skip command: records o->skip[0] `skipped` under the runner lock. */
int runner_skip(const struct runner_opts *o);
#endif

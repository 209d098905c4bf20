/* lifecycle.c: the commands of the lifecycle in the cluster: index (the
 * migrations index a chart ships, and the check that the chart's copy, the
 * image's tree and the index agree) and dispatch (one reconcile of the
 * background tier). Own their option tables, their --help and their
 * operands; the work is release/index.c's and run/dispatch.c's. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/defaults.h"
#include "base/exitcodes.h"
#include "base/log.h"
#include "base/paths.h"
#include "release/index.h"
#include "run/dispatch.h"

const char cli_index_help[] =
    "Usage: cozy-migrate index [--dir DIR] [--image REF] [--require-digest] [-o json|configmap]\n"
    "       cozy-migrate index --check FILE [--dir DIR] [--image REF] [--require-digest]\n"
    "       cozy-migrate index --check-chart FILE [--dir DIR] [--image REF] [--ledger NAME]\n"
    "\n"
    "The migrations index of the packaged tree DIR (migrations/ with its order.d,\n"
    "legacy-sh/), read with the runner's own loader: the image reference given, the\n"
    "slugs of each tier in manifest order, each with its timeout, on-error and\n"
    "requires, and the revoked slugs. The chart includes it as\n"
    "files/cozy-migrate-index.json, sums its pre-apply timeouts into the hook's\n"
    "deadline, gives it to the hook (env " INDEX_ENV ") and renders it into the\n"
    "ConfigMap " INDEX_NAME ": its render gate and `dispatch` read it.\n"
    "-o json (default) prints the file; -o configmap the ConfigMap manifest (YAML,\n"
    "with the retry policy).\n"
    "\n"
    "--check FILE reads FILE whole (the file, or a ConfigMap holding it: the chart's\n"
    "rendering, or `kubectl get configmap " INDEX_NAME " -o yaml`;\n"
    "one document, one object: anything after it is refused, naming its byte\n"
    "offset) and compares every field with the tree's, naming each difference: the\n"
    "slugs, their order, timeouts, on-error and requires; the image, with --image\n"
    "REF or else the MIGRATIONS_IMAGE this runs in (with neither, an index that\n"
    "names an image differs); and a ConfigMap's retry policy, with the flags below\n"
    "or their defaults.\n"
    "\n"
    "--check-chart FILE reads a platform chart's whole rendering (helm template, or\n"
    "helm upgrade --dry-run=server) and refuses what breaks the engine: no ConfigMap\n"
    INDEX_NAME " (or one that differs, as --check), the ledger ConfigMap\n"
    "rendered by the chart (the hook creates it), a pre-install/pre-upgrade hook Job\n"
    "that is not the engine's (a numbered hook left in), each named with its\n"
    "document and helm's Source line.\n"
    "\n"
    "Options:\n"
    "  --dir DIR                the tree (default: the image's, as for run)\n"
    "  --image REF              the image the release runs: repo:tag or repo@sha256:...\n"
    "  --require-digest         a release: REF (or FILE's image) must be a digest\n"
    "  -o, --output FMT         json (default: the file) or configmap (the manifest)\n"
    "  --namespace NS           the ConfigMap's namespace (default $NAMESPACE or {NAMESPACE})\n"
    "  --max-attempts N         the ConfigMap's " INDEX_KEY_ATTEMPTS " (default {MAX_ATTEMPTS})\n"
    "  --retry-backoff D        its " INDEX_KEY_BACKOFF " (default {BACKOFF})\n"
    "  --retry-backoff-max D    its " INDEX_KEY_BACKOFF_MAX " (default {BACKOFF_MAX})\n"
    "  --ledger NAME            --check-chart: the ledger's name (default {LEDGER})\n"
    "\n"
    "Exit codes: 0 written (or FILE agrees), 2 usage (a bad --image, a tag with\n"
    "--require-digest), 3 the tree or FILE cannot be read (whole), 9 FILE disagrees\n"
    "with the tree, the image or the retry policy (each difference named), or the\n"
    "chart is not wired as the engine needs (--check-chart; each problem named).\n";

const struct cli_option *const cli_index_options[] = {
    TOOL_OPTS, &cli_opt_dir,
    &cli_opt_image,
    &cli_opt_require_digest,
    &cli_opt_check,
    &cli_opt_check_chart,
    &cli_opt_ledger,
    &cli_opt_output,
    &cli_opt_namespace,
    &cli_opt_max_attempts,
    &cli_opt_retry_backoff,
    &cli_opt_retry_backoff_max, NULL,
};

int cli_index(struct cli *c, int argc, char **argv, int first)
{
    if (cli_no_operands(c, argc, argv, first) || cli_env_namespace(c) != 0)
        return EXIT_USAGE;
    /* -o: the command's plain format is the ConfigMap, json the file (and
     * the default). */
    int configmap = cli_given(c, &cli_opt_output) && !c->r.output_json;
    if (c->check && c->check_chart) {
        log_usage(c->cmd, "--check and --check-chart: give one");
        return EXIT_USAGE;
    }
    if (c->check_chart && configmap) {
        log_usage(c->cmd, "--check-chart compares; -o configmap writes: give one");
        return EXIT_USAGE;
    }
    if (c->check && configmap) {
        log_usage(c->cmd, "--check compares; -o configmap writes: give one");
        return EXIT_USAGE;
    }
    if (c->require_digest && !c->image && !c->check && !c->check_chart) {
        log_usage(c->cmd, "--require-digest needs --image REF (the digest the release pins)");
        return EXIT_USAGE;
    }
    const char *dir = c->r.dir ? c->r.dir : paths_tree();
    if (!dir)
        return cli_no_tree(c);
    struct index_opts io = {.dir = dir, .image = c->image,
                            .require_digest = c->require_digest, .check = c->check,
                            .configmap = configmap, .ns = c->r.k.ledger_namespace,
                            .check_chart = c->check_chart, .ledger = c->r.k.ledger_name};
    /* --check compares the image whatever was given: the one named, else
     * the one this runs in */
    io.check_image = c->image ? c->image : c->r.image && *c->r.image ? c->r.image : NULL;
    index_policy_default(&io.pol);
    io.pol.max_attempts = c->r.max_attempts;
    if (c->retry_backoff > 0)
        io.pol.backoff = c->retry_backoff;
    if (c->retry_backoff_max > 0)
        io.pol.backoff_max = c->retry_backoff_max;
    return index_cmd(&io);
}

const char cli_dispatch_help[] =
    "Usage: cozy-migrate dispatch [options]\n"
    "\n"
    "One reconcile of the background tier, run by the chart's CronJob\n"
    "(concurrencyPolicy Forbid), by hand, or by another orchestrator. Reads the\n"
    "index (ConfigMap " INDEX_NAME ") whole and compares it with its own tree\n"
    "(--dir) and image (MIGRATIONS_IMAGE): any difference is refused (exit 9, an\n"
    "Event, no Job). Then reads the ledger, the runner lock and the Jobs it made\n"
    "(an ownerReference to the ledger and its uid in a label; others with its\n"
    "labels are reported once and ignored), and: does nothing while one of its\n"
    "Jobs runs or the upgrade holds the lock; otherwise creates one Job for the\n"
    "first pending background slug in manifest order (ONLY=<slug>, its own image,\n"
    "the release's template: env " DISPATCH_TEMPLATE_ENV " of its own spec, or the\n"
    "built-in one, made restricted). Pending: no record, or failed with attempts\n"
    "under the bound (index key " INDEX_KEY_ATTEMPTS ", default {MAX_ATTEMPTS}) once the\n"
    "retry backoff passed: " INDEX_KEY_BACKOFF " (default {BACKOFF}) after the first failed\n"
    "attempt, doubling with each, at most " INDEX_KEY_BACKOFF_MAX " (default {BACKOFF_MAX});\n"
    "a Job failed on an exit no retry changes (" DISPATCH_FINAL_EXITS ") leaves its\n"
    "slug to a person. Never writes the ledger: the runner in the Job records. An\n"
    "Event per Job it creates and per slug past its attempts; one line saying\n"
    "what it did and why.\n"
    "\n"
    "Options:\n"
    "  --dry-run                say what it would create, create nothing\n"
    "  --dir DIR                its own tree (default: the image's)\n"
    "  --service-account NAME   the Jobs' identity when the template names none\n"
    "                           (default " DEFAULT_JOB_SERVICE_ACCOUNT ")\n"
    "  --ledger NAME            the ledger ConfigMap (default {LEDGER})\n"
    "\n"
    "Environment: MIGRATIONS_IMAGE (required: the image it runs as), NAMESPACE,\n"
    DISPATCH_TEMPLATE_ENV ".\n"
    "\n"
    "Exit codes: 0 a Job created or nothing to do, 2 usage (no MIGRATIONS_IMAGE),\n"
    "3 no index or one that cannot be read whole, a tree or template it cannot\n"
    "use, 6 cluster unreachable or forbidden, 7 the ledger cannot be trusted, 9\n"
    "the index differs from its tree or image, 12 the ledger was deleted (the\n"
    "Lease records it), 14 a Job refused by admission: nothing dispatched.\n";

const struct cli_option *const cli_dispatch_options[] = {
    CLUSTER_OPTS, &cli_opt_dry_run,
    &cli_opt_service_account,
    &cli_opt_ledger, &cli_opt_dir, NULL,
};

int cli_dispatch(struct cli *c, int argc, char **argv, int first)
{
    int rc;
    if (cli_env_dry_run(c) != 0)
        return EXIT_USAGE;
    c->r.only = NULL; /* env ONLY is a dispatched Job's, not the dispatcher's */
    if ((rc = cli_runner_opts_finish(c, argc, argv, first)) != 0)
        return rc;
    const char *tmpl = getenv(DISPATCH_TEMPLATE_ENV);
    struct dispatch_opts d = {.service_account = c->service_account,
                              .job_template = tmpl && *tmpl ? tmpl : NULL};
    return dispatch_run(&c->r, &d);
}

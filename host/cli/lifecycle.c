/* lifecycle.c: the commands of the lifecycle in the cluster: index (the
 * migrations index a chart ships, and the check that the chart's copy, the
 * image's tree and the index agree) and dispatch (one reconcile of the
 * background tier). Own their option tables, their --help and their
 * operands; the work is release/index.c's and run/dispatch.c's. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

#include "base/defaults.h"
#include "base/exitcodes.h"
#include "base/log.h"
#include "base/paths.h"
#include "release/index.h"
#include "run/dispatch.h"

const char help_index[] =
    "Usage: cozy-migrate index [--dir DIR] [--image REF] [--require-digest] [-o json|configmap]\n"
    "       cozy-migrate index --check FILE [--dir DIR] [--image REF] [--require-digest]\n"
    "\n"
    "The migrations index of the packaged tree DIR (migrations/ with its order.d,\n"
    "legacy-sh/), read with the runner's own loader: the image reference given, the\n"
    "slugs of each tier in manifest order (a background slug with its\n"
    "timeout, on-error and requires) and the revoked slugs. The chart includes it\n"
    "as files/cozy-migrate-index.json and renders it into the ConfigMap\n"
    INDEX_NAME ": its render gate and `dispatch` read it.\n"
    "-o json (default) prints the file; -o configmap the ConfigMap manifest (YAML).\n"
    "\n"
    "--check FILE compares FILE (the file, or a ConfigMap holding it: the chart's\n"
    "rendering, or `kubectl get configmap " INDEX_NAME " -o yaml`)\n"
    "with the tree, and names each slug that differs.\n"
    "\n"
    "Options:\n"
    "  --dir DIR          the tree (default: the image's, as for run)\n"
    "  --image REF        the image the release runs: repo:tag or repo@sha256:...\n"
    "  --require-digest   a release: REF (or FILE's image) must be a digest\n"
    "  --namespace NS     the ConfigMap's namespace (default $NAMESPACE or {NAMESPACE})\n"
    "\n"
    "Exit codes: 0 written (or FILE agrees), 2 usage (a bad --image, a tag with\n"
    "--require-digest), 3 the tree or FILE cannot be read, 9 FILE disagrees with\n"
    "the tree (each difference named).\n";

const struct option opts_index[] = {
    TOOL_OPTS, OPT("dir", required_argument, OPT_DIR),
    OPT("image", required_argument, OPT_IMAGE),
    OPT("require-digest", no_argument, OPT_REQUIRE_DIGEST),
    OPT("check", required_argument, OPT_CHECK),
    OPT("output", required_argument, OPT_OUTPUT),
    OPT("namespace", required_argument, OPT_NAMESPACE), END,
};

int cmd_index(struct cli *c, int argc, char **argv, int first)
{
    if (no_operands(c, argc, argv, first) || env_namespace(c) != 0)
        return EXIT_USAGE;
    /* -o: the command's plain format is the ConfigMap, json the file (and
     * the default). */
    int configmap = c->seen[OPT_OUTPUT - 256] && !c->r.output_json;
    if (c->check && configmap) {
        log_usage(c->cmd, "--check compares; -o configmap writes: give one");
        return EXIT_USAGE;
    }
    if (c->require_digest && !c->image && !c->check) {
        log_usage(c->cmd, "--require-digest needs --image REF (the digest the release pins)");
        return EXIT_USAGE;
    }
    struct index_opts io = {.dir = c->r.dir ? c->r.dir : paths_tree(), .image = c->image,
                            .require_digest = c->require_digest, .check = c->check,
                            .configmap = configmap, .ns = c->r.k.ledger_namespace};
    return index_cmd(&io);
}

const char help_dispatch[] =
    "Usage: cozy-migrate dispatch [options]\n"
    "\n"
    "One reconcile of the background tier, run by the chart's CronJob\n"
    "(concurrencyPolicy Forbid), by hand, or by another orchestrator. Reads the\n"
    "index (ConfigMap " INDEX_NAME "), the ledger, the runner lock and\n"
    "the Jobs it made, and: does nothing while one of its Jobs runs or the upgrade\n"
    "holds the lock; otherwise creates one Job for the first pending background\n"
    "slug in manifest order (ONLY=<slug>, the index's image, the chart's Job\n"
    "template). Pending: no record, or failed with attempts under the bound\n"
    "(index key " INDEX_KEY_ATTEMPTS ", default {MAX_ATTEMPTS}) once the retry backoff\n"
    "passed: " INDEX_KEY_BACKOFF " (default {BACKOFF}) after the first failed attempt,\n"
    "doubling with each, at most " INDEX_KEY_BACKOFF_MAX " (default {BACKOFF_MAX}).\n"
    "Never writes the ledger: the runner in the Job records. An Event per Job it\n"
    "creates and per slug past its attempts; one line saying what it did and why.\n"
    "\n"
    "Options:\n"
    "  --dry-run                say what it would create, create nothing\n"
    "  --service-account NAME   the Jobs' identity when the index has no Job template\n"
    "                           (default " DEFAULT_JOB_SERVICE_ACCOUNT ")\n"
    "  --ledger NAME            the ledger ConfigMap (default {LEDGER})\n"
    "\n"
    "Exit codes: 0 a Job created or nothing to do, 2 usage, 3 no index or one that\n"
    "cannot be read, 6 cluster unreachable or forbidden, 7 the ledger cannot be\n"
    "trusted (nothing dispatched).\n";

const struct option opts_dispatch[] = {
    CLUSTER_OPTS, OPT("dry-run", no_argument, OPT_DRY_RUN),
    OPT("service-account", required_argument, OPT_SERVICE_ACCOUNT),
    OPT("ledger", required_argument, OPT_LEDGER), END,
};

int cmd_dispatch(struct cli *c, int argc, char **argv, int first)
{
    int rc;
    if (env_dry_run(c) != 0)
        return EXIT_USAGE;
    c->r.only = NULL; /* env ONLY is a dispatched Job's, not the dispatcher's */
    if ((rc = runner_finish(c, argc, argv, first)) != 0)
        return rc;
    struct dispatch_opts d = {.service_account = c->service_account};
    return dispatch_run(&c->r, &d);
}

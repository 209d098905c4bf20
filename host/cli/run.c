/* run.c: the runner's commands: run, plan, preview, status, skip. Owns
 * their option tables, their --help, and what each checks of its operands
 * and environment before handing its options to run/ (runner.h,
 * preview.h), which does the work. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/exitcodes.h"
#include "base/log.h"
#include "formats/manifest.h"
#include "release/order.h"
#include "run/preview.h"
#include "run/runner.h"

const char cli_run_help[] =
    "Usage: cozy-migrate run [options]\n"
    "\n"
    "Takes the runner lock (a Lease next to the ledger), reads the ledger,\n"
    "validates the migrations tree, and runs every pending migration of the\n"
    "tier in manifest order, each in a supervised child process, recording\n"
    "each outcome in the ledger. On a fresh cluster (no ledger) it records\n"
    "every migration as skipped-fresh-install and runs nothing.\n"
    "\n"
    "Options:\n"
    "  --tier TIER          pre-apply (default) or background\n"
    "  --only SLUG          re-run exactly this migration, even if recorded (env ONLY)\n"
    "  --dry-run            every write is sent with dryRun=All, a shell migration's\n"
    "                       through the runner's gateway; nothing is recorded (env DRY_RUN)\n"
    "  --timeout DURATION   per-migration timeout, overriding every header (default:\n"
    "                       the header's timeout, else 10m)\n"
    "  --lock-timeout DUR   how long to wait for another runner's lock (default {LOCK_WAIT})\n"
    "  --lease-duration DUR how long the lock lives without renewal (default {LEASE}); the run\n"
    "                       stops (exit 5) if no renewal is confirmed for most of it\n"
    "  --grace DURATION     TERM-to-KILL delay on timeout (default {GRACE})\n"
    "  --max-attempts N     background: retries of a failed migration (default {MAX_ATTEMPTS})\n"
    "  --ledger NAME        the ledger ConfigMap (default {LEDGER})\n"
    "  --dir DIR            the tree holding migrations/ and legacy-sh/ (default: the\n"
    "                       one installed beside the binary, as in the image, or the\n"
    "                       working tree with --local; none: exit 16)\n"
    "  --memory MIB         memory cap of a Lua migration (default {MEMORY})\n"
    "  --force              with --only: run a legacy migration whose script stamps a\n"
    "                       `version` older than the ledger's, or one whose requires\n"
    "                       are not recorded ok\n"
    "  --as-installed-at R  with --local, on a cluster without a ledger (a fresh kind\n"
    "                       cluster): record the migrations of every batch up to release R\n"
    "                       skipped-fresh-install, as a fresh install at R would have, then\n"
    "                       run what follows; R is a release (v1.2.0, legacy), a batch\n"
    "                       name, latest (the last but the untagged one) or none\n"
    "  --create-namespace   with --local: create the ledger's namespace when it is missing\n"
    "  --pass-env A,B       variables passed to shell migrations (env PASS_ENV); they get\n"
    "                       NAMESPACE, MIGRATION_SLUG, CURRENT_VERSION, TARGET_VERSION, PATH,\n"
    "                       HOME, locale and proxy settings, and nothing else of the runner's;\n"
    "                       never KUBECONFIG, KUBERNETES_SERVICE_*, the proxies or those four\n"
    "                       (the cluster identity is the runner's)\n"
    "\n"
    "With --local the tree is the working tree (--dir, default .): order.d/, with\n"
    "every script no batch lists (uncommitted, or newer than `order`) added to the\n"
    "untagged batch; without order.d/, what `order` would make of the working tree.\n"
    "On a cluster without a ledger, a --local run says what the hook would do and\n"
    "stops (exit 2) unless told --as-installed-at.\n"
    "\n"
    "A migration runs only when every slug it requires is recorded ok, legacy or\n"
    "skipped-fresh-install (or ran ok earlier in the run); otherwise it is blocked:\n"
    "not run, nothing recorded, and an on-error=abort one stops the run.\n"
    "\n"
    "Environment: NAMESPACE, ONLY, MIGRATIONS_IMAGE (recorded), DRY_RUN (1 or true;\n"
    "0, false or empty), PASS_ENV, SKIP=slug[,slug] with SKIP_REASON (record them\n"
    "skipped by the operator first), MIGRATIONS_INDEX (the hook: the index the\n"
    "chart was rendered from, compared whole with this tree and image before\n"
    "anything runs). Each flag at most once.\n"
    "Exit codes: 0 ok, 1 a migration failed or was blocked, 2 usage, 3 invalid\n"
    "packaging, 4 retention floor, 5 lock not acquired, 6 cluster unreachable or\n"
    "forbidden, 7 untrustworthy ledger (nothing ran), 9 MIGRATIONS_INDEX differs\n"
    "from this tree or image (nothing ran), 10 git missing (--local without\n"
    "order.d), 11 refused by what the ledger records (SKIP of a slug recorded ok;\n"
    "--only of a legacy slug without --force), 12 the ledger deleted during the run\n"
    "or absent where the Lease says there was one, 13 no room in the ledger for a\n"
    "record, 14 a ledger write denied by admission, 16 no migrations tree (no --dir,\n"
    "and this install carries none).\n";

const char cli_plan_help[] =
    "Usage: cozy-migrate plan [options]\n"
    "\n"
    "Prints what `run` would do with the same options: the migrations it would\n"
    "run in order, and why each other one is skipped. Writes nothing and takes\n"
    "no lock.\n"
    "\n"
    "Options: every option of run, with the same meaning (see 'cozy-migrate run\n"
    "--help'), so a run's command line can be planned as it is: --tier, --only,\n"
    "--force, --dry-run, --max-attempts, --ledger, --dir and the cluster options\n"
    "change the plan, as do --as-installed-at and --create-namespace with --local;\n"
    "--timeout, --lock-timeout, --lease-duration, --grace, --memory and\n"
    "--pass-env are checked and change nothing in it. Env DRY_RUN,\n"
    "ONLY, SKIP and SKIP_REASON too. Exits as run would refuse (7 for a ledger\n"
    "that cannot be trusted, naming each bad key).\n";

/* run's options; plan takes the same, so a run's command line can be
 * planned as it is (the timing options change nothing in a plan). */
const struct cli_option *const cli_run_options[] = {
    CLUSTER_OPTS, &cli_opt_dry_run,
    &cli_opt_timeout,
    &cli_opt_memory, &cli_opt_tier,
    &cli_opt_only,
    &cli_opt_lock_timeout,
    &cli_opt_lease_duration,
    &cli_opt_grace,
    &cli_opt_max_attempts,
    &cli_opt_force, &cli_opt_pass_env,
    &cli_opt_ledger, &cli_opt_dir,
    &cli_opt_as_installed_at,
    &cli_opt_create_namespace, NULL,
};

/* --local: the runner reads the working tree's manifest (order_local), so
 * a script no commit carries yet runs without `order`; then fn, and the
 * manifest is freed. A manifest that cannot be made is fatal, except for
 * status (need 0), which then shows the ledger alone, as it does quietly
 * where there is no tree at all (no migrations/: a laptop's home). */
static int with_local_tree(struct cli *c, int need, int (*fn)(const struct runner_opts *o))
{
    char mig[4200];
    snprintf(mig, sizeof mig, "%s/migrations", c->r.dir ? c->r.dir : ".");
    if (c->r.k.cfg.local && (need || access(mig, F_OK) == 0)) {
        char note[1200];
        struct buf err = BUF_INIT;
        int rc = order_local(c->r.dir, &c->local_man, note, sizeof note, &err);
        if (rc != 0 && need) {
            log_fatal("--local: %s", buf_str(&err));
            buf_release(&err);
            return rc;
        }
        if (rc != 0) {
            log_warn("--local: %s (showing the ledger alone)", buf_str(&err));
        } else {
            c->have_local_man = 1;
            c->r.manifest = &c->local_man;
            if (*note)
                log_info("%s", note);
        }
        buf_release(&err);
    }
    int rc = fn(&c->r);
    if (c->have_local_man)
        manifest_free(&c->local_man);
    c->have_local_man = 0;
    c->r.manifest = NULL;
    return rc;
}

int cli_run(struct cli *c, int argc, char **argv, int first)
{
    int rc;
    if (cli_env_dry_run(c) != 0)
        return EXIT_USAGE;
    if ((rc = cli_runner_opts_finish(c, argc, argv, first)) || (rc = cli_skip_env(c)))
        return rc;
    return with_local_tree(c, 1, runner_run);
}

int cli_plan(struct cli *c, int argc, char **argv, int first)
{
    int rc;
    if (cli_env_dry_run(c) != 0)
        return EXIT_USAGE;
    if ((rc = cli_runner_opts_finish(c, argc, argv, first)) || (rc = cli_skip_env(c)))
        return rc;
    return with_local_tree(c, 1, runner_plan);
}

const char cli_preview_help[] =
    "Usage: cozy-migrate preview [options]\n"
    "\n"
    "What an upgrade would do to this cluster: runs every pending Lua migration\n"
    "of the tier in manifest order, each in its supervised child as `run` would,\n"
    "with every write sent dryRun=All, and keeps the apiserver's answers in a\n"
    "copy-on-write overlay that later reads (and later migrations) see. Prints\n"
    "each migration's outcome, each object it would change (field: old -> new)\n"
    "and the records the run would write. Shell migrations are listed as not\n"
    "previewable. Takes no lock, writes no record, no Event, nothing that\n"
    "persists. Exit 0 when the run would succeed, 1 when it would stop.\n"
    "\n"
    "Options:\n"
    "  --tier TIER          pre-apply (default) or background\n"
    "  --only SLUG          preview re-running exactly this migration\n"
    "  -o, --output FMT     text (default) or json (one document, for a CI gate)\n"
    "  --timeout, --memory, --ledger, --dir, --as-installed-at, --create-namespace\n"
    "                       as for run\n";

const struct cli_option *const cli_preview_options[] = {
    CLUSTER_OPTS, &cli_opt_tier, &cli_opt_only,
    &cli_opt_output, &cli_opt_timeout,
    &cli_opt_memory, &cli_opt_ledger,
    &cli_opt_dir,
    &cli_opt_as_installed_at,
    &cli_opt_create_namespace, NULL,
};

int cli_preview(struct cli *c, int argc, char **argv, int first)
{
    int rc;
    /* what run would be told: SKIP and SKIP_REASON too */
    if ((rc = cli_runner_opts_finish(c, argc, argv, first)) || (rc = cli_skip_env(c)))
        return rc;
    return with_local_tree(c, 1, preview_run);
}

const char cli_status_help[] =
    "Usage: cozy-migrate status [SLUG] [options]\n"
    "\n"
    "Prints the ledger as a table: migration, state, when, attempts, batch,\n"
    "tier, and whether the recorded checksum matches the shipped script. A\n"
    "pending migration that run would not run shows as blocked. Without a tree\n"
    "(no migrations/order.d under --dir) it reads the ledger alone, by time.\n"
    "With SLUG, prints that whole record: message, output tail, journal.\n"
    "\n"
    "Options:\n"
    "  -o, --output FMT     table (default) or json\n"
    "  --failed             only what needs a person (failed, blocked, unreadable,\n"
    "                       a bad version); exit 1 when there is any\n"
    "  --ledger NAME, --dir DIR as for run\n";

const struct cli_option *const cli_status_options[] = {
    CLUSTER_OPTS, &cli_opt_output,
    &cli_opt_failed,
    &cli_opt_ledger, &cli_opt_dir, NULL,
};

int cli_status(struct cli *c, int argc, char **argv, int first)
{
    int rc;
    if (first < argc) {
        const char *slug = argv[first++];
        if (!slug_valid(slug)) {
            log_usage(c->cmd, "'%s' is not a valid slug", slug);
            return EXIT_USAGE;
        }
        if (c->r.failed_only) {
            log_usage(c->cmd, "--failed lists every slug that needs a person; it takes no SLUG");
            return EXIT_USAGE;
        }
        c->r.status_slug = slug;
    }
    if ((rc = cli_runner_opts_finish(c, argc, argv, first)) != 0)
        return rc;
    return with_local_tree(c, 0, runner_status);
}

const char cli_skip_help[] =
    "Usage: cozy-migrate skip SLUG --reason TEXT [options]\n"
    "\n"
    "The operator's escape hatch: records SLUG in the ledger as\n"
    "{\"state\":\"skipped\",\"reason\":\"Operator\",\"message\":TEXT,\"by\":WHO,\"at\":...}\n"
    "under the runner lock, without running it. WHO is the identity the\n"
    "cluster config resolved (user and context, or the service account). A\n"
    "skipped slug is not pending; a slug that requires it is blocked; `run\n"
    "--only SLUG` runs it later and rewrites the record. The hook does the\n"
    "same for env SKIP=slug[,slug] with SKIP_REASON (Helm values\n"
    "migrations.skip and migrations.skipReason).\n"
    "\n"
    "Options:\n"
    "  --reason TEXT        why (required; recorded as the message)\n"
    "  --dry-run            say what would be recorded, write nothing\n"
    "  --lock-timeout DUR   how long to wait for another runner's lock (default {LOCK_WAIT})\n"
    "  --lease-duration DUR how long the lock lives without renewal (default {LEASE})\n"
    "  --ledger NAME, --dir DIR as for run\n"
    "\n"
    "Exit codes: 0 recorded (or already skipped with this reason), 2 usage or a\n"
    "slug revoked or absent from the image, 5 lock not acquired, 6 cluster,\n"
    "7 untrustworthy ledger, 11 the slug is recorded ok, legacy or\n"
    "skipped-fresh-install (a migration that ran is never skipped).\n";

const struct cli_option *const cli_skip_options[] = {
    CLUSTER_OPTS, &cli_opt_reason,
    &cli_opt_dry_run,
    &cli_opt_lock_timeout,
    &cli_opt_lease_duration,
    &cli_opt_ledger, &cli_opt_dir, NULL,
};

int cli_skip(struct cli *c, int argc, char **argv, int first)
{
    int rc;
    if (first >= argc) {
        log_usage(c->cmd, "expected a SLUG");
        return EXIT_USAGE;
    }
    if (cli_env_dry_run(c) != 0)
        return EXIT_USAGE;
    static const char *slug[1];
    slug[0] = argv[first++];
    if (!slug_valid(slug[0])) {
        log_usage(c->cmd, "'%s' is not a valid slug", slug[0]);
        return EXIT_USAGE;
    }
    if (!c->r.skip_reason) {
        log_usage(c->cmd, "--reason TEXT is required: say why %s is skipped", slug[0]);
        return EXIT_USAGE;
    }
    c->r.only = NULL; /* env ONLY is the hook's, not the skip command's */
    c->r.skip = slug;
    c->r.nskip = 1;
    if ((rc = cli_runner_opts_finish(c, argc, argv, first)) != 0)
        return rc;
    return with_local_tree(c, 1, runner_skip);
}

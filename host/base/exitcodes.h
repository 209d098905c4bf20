/* exitcodes.h: the process exit codes, one per kind of outcome an operator
 * or a Job's backoff must tell apart. Documented in docs/operating.md (Exit
 * codes); never reuse a number for another meaning. */
#ifndef COZY_EXITCODES_H
#define COZY_EXITCODES_H
enum {
    EXIT_OK = 0,
    EXIT_FAILED = 1,        /* a migration (or a script) failed */
    EXIT_USAGE = 2,         /* unknown command or flag, bad flag value */
    EXIT_PACKAGING = 3,     /* invalid migrations tree, header, manifest */
    EXIT_FLOOR = 4,         /* cluster older than the retention floor */
    EXIT_LOCK = 5,          /* the runner lock is held by someone else */
    EXIT_CLUSTER = 6,       /* no config, unreachable, unauthorized, forbidden */
    EXIT_LEDGER = 7,        /* the ledger holds something that cannot be trusted */
    EXIT_HISTORY = 8,       /* release commands: the git history cannot answer (shallow
                               clone, missing release tag, not a repository) */
    EXIT_RELEASED = 9,      /* it would change what a release shipped: the release
                               commands (manifest not a prefix, slug taken or reused,
                               index --check), and run (the hook) or dispatch given an
                               index that differs from the tree and image they run */
    EXIT_TOOL = 10,         /* a required tool is not installed: git (order, lint, new,
                               a --local run or plan without order.d), shellcheck or
                               luacheck (lint), busted (spec) */
    EXIT_REFUSED = 11,      /* what the ledger records forbids the request: `skip` of a
                               slug recorded ok (or legacy, skipped-fresh-install), or
                               `--only` of a legacy slug whose script would stamp an
                               older `version`, without --force */
    EXIT_LEDGER_GONE = 12,  /* the ledger was deleted during the run, or is absent where
                               the Lease records that this cluster had one */
    EXIT_LEDGER_FULL = 13,  /* no room in the ledger for the step's largest record */
    EXIT_DENIED = 14,       /* a write the runner needs (the ledger) was denied by admission
                               or policy (a webhook, a ValidatingAdmissionPolicy), while
                               RBAC allows it: the server's message says which */
    EXIT_NOT_DISPOSABLE = 15, /* `spec`: the cluster in KUBECONFIG does not say it is
                                 disposable (a testenv, a kind cluster, or one marked
                                 by --i-own-this-cluster): no spec ran */
    EXIT_NO_TREE = 16,      /* a command that needs a migrations tree (run, plan, preview,
                               skip, dispatch, index) was given none: no --dir, no
                               COZY_MIGRATIONS_DIR, and the install carries none */
    /* A stop signal (TERM, INT, HUP) exits 128 + the signal (stop.h). */
};
#endif

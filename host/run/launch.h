/* launch.h: the one way a migration becomes a supervised child, for `run`,
 * `preview`, `lua` and `exec` alike. The command says what to run (a
 * migration of the tree, or a FILE) and with which options; the launcher
 * works out its deadline, attaches the gateway to a shell (fresh
 * credentials, the run's loopback socket, a private kubeconfig naming them
 * and nothing else, and the shell's environment pointing at it), fills
 * proc/child.h's child_spec (this is the only place that does) and takes the
 * shell's gateway down again once the child has ended. It never decides
 * whether a migration runs, and never records: the caller does that with
 * the result.
 *
 * The recipe:
 *   once      launch_init(&L): then set L's options (the cluster options
 *             k, --timeout, --grace, --memory, and what the command adds:
 *             preview's overlay, run's lease tick, exec's quiet or lua's
 *             passthrough)
 *   what      launch_migration (a migration of the tree: run, preview) or
 *             launch_file (a FILE: lua, exec, its header read as the runner
 *             reads it) fills a struct launch; the caller may add a shell's
 *             environment (shell_env, or env) and its stamp
 *   prepare   launch_prepare: a shell's gateway and environment; on failure
 *             the migration must not run (and nothing falls back to the
 *             runner's own credentials)
 *   run       launch_run: the child, supervised (proc/child.h), and the
 *             shell's gateway taken down after it; the caller reads res and
 *             frees it with child_result_free
 *   close     launch_close(&L): the gateway's socket, kept from one shell
 *             to the next so kubectl's caches (keyed by server address) stay
 *             warm; each migration's gateway has its own token and
 *             certificate and answers only its own. */
#ifndef COZY_LAUNCH_H
#define COZY_LAUNCH_H
#include <stdatomic.h>
#include <stddef.h>

#include "formats/header.h"
#include "gateway/gateway.h"
#include "client/kubeconfig.h"
#include "gateway/kubeconfig_private.h"
#include "client/options.h"
#include "proc/child.h"
#include "run/shellenv.h"

struct migration;

/* A command's options for every migration it launches. */
struct launcher {
    const struct kube_options *k; /* the cluster, and dry run (a shell's through its gateway) */
    double timeout;               /* run, preview: --timeout over every header when > 0 */
    double grace;                 /* TERM -> KILL */
    size_t memory;                /* Lua memory cap, bytes */
    const char *overlay_path;     /* preview: the copy-on-write overlay; NULL otherwise */
    const struct kube_config *cfg; /* the runner's resolved configuration (rest_config): its
                                   * namespace is the one a shell's private kubeconfig names;
                                   * NULL: k's configuration is resolved, and when none
                                   * resolves and no --kubeconfig, --context or --local was
                                   * given, a shell runs without a gateway, its environment
                                   * as it is (exec: a script that needs no cluster runs) */
    const char *say_as;           /* the prefix of the line saying why a gateway could not
                                   * be made: the command (exec); NULL: the slug */
    /* supervision, as child_spec has it: run's lease renewal and watch */
    int (*tick)(void *ud);
    double tick_every;
    void *ud;
    const _Atomic(long long) *lease_until_us;
    int quiet;                    /* exec --quiet */
    int passthrough;              /* lua: the child writes to our stdout and stderr as is */
    /* the launcher's own */
    int gw_fd, gw_port;           /* the gateway's loopback socket, bound at the first shell */
};

/* One migration to launch, and what its shell runs with once prepared. */
struct launch {
    const char *slug;             /* the prefix of its output lines */
    const char *path;
    int is_shell;
    double timeout_s;             /* its deadline (0: none) */
    const char *timeout_why;      /* where it comes from, for the timeout's message; NULL:
                                   * unsaid (a --timeout of lua and exec) */
    /* a shell's, set by the caller after launch_migration or launch_file */
    const char *workdir;          /* NULL: inherited */
    char *const *env;             /* NAME=VALUE entries over the inherited environment (exec
                                   * --env), NULL-terminated; KUBECONFIG is added last */
    int whole_env;                /* or: env_in is the whole environment (run, preview),
                                   * shellenv.h's, its KUBECONFIG the private kubeconfig */
    struct shell_env_in env_in;
    long stamp_allowed;           /* legacy: the one `version` it may stamp; 0: none */
    /* the launcher's own: made by launch_prepare, removed by launch_run */
    char why[4400], workdir_buf[4096];
    int through_gateway;
    struct child_gateway gw;
    struct gateway_cred cred;
    struct kube_private kp;
    struct shell_env se;
    char **envv;
    char kc_env[sizeof ((struct kube_private *)0)->path + 16];
};

void launch_init(struct launcher *L);
void launch_close(struct launcher *L);

/* Migration m of the tree rooted at root, as step slug: a shell's working
 * directory is root/legacy-sh; its deadline --timeout (L->timeout), else
 * its header's, else DEFAULT_TIMEOUT_S. */
void launch_migration(struct launch *j, const struct launcher *L, const struct migration *m,
                      const char *slug, const char *root);
/* FILE, as step slug (NULL: FILE), in bash when shell: its header, when it
 * has one, is read by the runner's parser (a misspelt key, a bad timeout=
 * is EXIT_PACKAGING naming FILE:LINE), a file with no header line (a
 * scratch script) runs with the defaults. Its deadline is *timeout when
 * given (told as such, unnamed), else the header's, else DEFAULT_TIMEOUT_S.
 * 0, or an exit code after one line prefixed cmd. */
int launch_file(struct launch *j, const char *cmd, const char *slug, const char *file, int shell,
                const double *timeout);
/* A shell's gateway and environment. 0, or an exit code after one line
 * (EXIT_CLUSTER: no gateway; EXIT_FAILED: its environment does not fit):
 * the migration must not run; j is then freed. A Lua migration: 0. */
int launch_prepare(struct launcher *L, struct launch *j);
/* Runs j, prepared, in its supervised child and waits for it (child_run:
 * res filled whatever the outcome); then removes the shell's gateway. */
void launch_run(struct launcher *L, struct launch *j, struct child_result *res);
#endif

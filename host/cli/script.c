/* script.c: the commands that run one script or show the cluster: lua,
 * exec, config, spec. Owns their option tables, their --help and their
 * operands; the child is run/child.c's, the sandbox lua/'s. */
#include "cli/cli.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/defaults.h"
#include "base/exitcodes.h"
#include "base/log.h"
#include "base/paths.h"
#include "base/stop.h"
#include "base/util.h"
#include "formats/manifest.h"
#include "kube/gateway.h"
#include "kube/kubeconfig.h"
#include "kube/kubeconfig_private.h"
#include "lua/hostctx.h"
#include "lua/sandbox.h"
#include "run/child.h"
#include "run/migrate_lua.h"

/* ---- lua FILE ---------------------------------------------------------- */

const char help_lua[] =
    "Usage: cozy-migrate lua [options] FILE\n"
    "\n"
    "Runs FILE in the migration sandbox (string, table, math, utf8, coroutine,\n"
    "os.time/clock/date, and the stdlib: kube, json, yaml, log, ...), with the\n"
    "kube module connected to the cluster. Exit 0 when the script returns,\n"
    "1 when it fails (error, timeout, memory cap), 2 when FILE is not a readable\n"
    "file, 6 when the cluster config cannot be resolved.\n"
    "\n"
    "Options:\n"
    "  --timeout DURATION  deadline for the script (default {TIMEOUT})\n"
    "  --memory MIB        memory cap for the Lua state (default {MEMORY})\n"
    "  --dry-run           send every write with dryRun=All (or DRY_RUN=1 or true;\n"
    "                      0, false or empty is a real run, anything else exit 2)\n";

const struct option opts_lua[] = {
    CLUSTER_OPTS, OPT("dry-run", no_argument, OPT_DRY_RUN),
    OPT("timeout", required_argument, OPT_TIMEOUT),
    OPT("memory", required_argument, OPT_MEMORY), END,
};

int cmd_lua(struct cli *c, int argc, char **argv, int first)
{
    int rc;
    if (first != argc - 1) {
        log_usage(c->cmd, "%s", first >= argc ? "expected a FILE" : "expected exactly one FILE");
        return EXIT_USAGE;
    }
    if (env_dry_run(c) != 0 || env_namespace(c) != 0 || script_file(c, argv[first]) != 0)
        return EXIT_USAGE;
    /* In a supervised child like a migration: the parent's kill is the
     * backstop for time spent in C or in finalizers. */
    const char *file = argv[first];
    struct child_spec spec = {
        .slug = file,
        .path = file,
        .timeout_s = c->r.timeout,
        .lua_mem_limit = c->r.memory,
        .kube = &c->r.k,
        .passthrough = 1,
    };
    struct child_result res;
    child_run(&spec, &res);
    rc = res.outcome == CHILD_OK ? EXIT_OK : EXIT_FAILED;
    if (stop_signal())
        rc = stop_exit_code();
    if (stop_signal())
        log_fatal("stopped by %s while %s ran%s (exit %d)", stop_name(stop_signal()), file,
                  res.outcome == CHILD_STOPPED ? ": it was stopped" : "", rc);
    else if (rc != EXIT_OK)
        log_fatal("%s: %s: %s", file, res.reason ? res.reason : "Failed", res.message);
    child_result_free(&res);
    return rc;
}

/* ---- exec SLUG FILE ------------------------------------------------------- */

const char help_exec[] =
    "Usage: cozy-migrate exec [options] SLUG FILE\n"
    "\n"
    "Runs one migration FILE the way the runner does: in a supervised child\n"
    "process with its own process group, its output streamed to stderr as\n"
    "'[SLUG] line'. FILE ending in .sh runs in bash, anything else in the Lua\n"
    "sandbox. Prints the result as one JSON line on stdout (outcome, reason,\n"
    "message, exit_code, signal, duration_ms, tail, ticks). Never touches the\n"
    "ledger. Exit 0 when the outcome is ok, 1 otherwise, 2 on usage errors (a\n"
    "SLUG that is not a slug, a FILE that is not a readable file).\n"
    "\n"
    "Options:\n"
    "  --timeout DURATION  wall-clock deadline (default {TIMEOUT})\n"
    "  --grace DURATION    TERM -> KILL delay at the deadline (default {GRACE})\n"
    "  --memory MIB        memory cap of the Lua state (default {MEMORY})\n"
    "  --dry-run           send every write with dryRun=All (a shell's through its gateway)\n"
    "  --workdir DIR       shell: working directory\n"
    "  --env NAME=VALUE    shell: extra environment entry (repeatable)\n"
    "  --tick DURATION     count ticks at this interval (reported as ticks)\n"
    "  --quiet             do not stream the output\n"
    "\n"
    "A shell FILE reaches the cluster the options resolve to only through the\n"
    "runner's loopback gateway, as under 'run': KUBECONFIG names the gateway,\n"
    "its certificate and a fresh token, and nothing else (exit 6 when options\n"
    "given resolve to none; without any, an unresolvable configuration leaves\n"
    "the environment as it is). The result then carries `gateway`: requests,\n"
    "refusals, the gateway's peak memory.\n";

const struct option opts_exec[] = {
    CLUSTER_OPTS, OPT("dry-run", no_argument, OPT_DRY_RUN),
    OPT("timeout", required_argument, OPT_TIMEOUT),
    OPT("grace", required_argument, OPT_GRACE),
    OPT("memory", required_argument, OPT_MEMORY),
    OPT("workdir", required_argument, OPT_WORKDIR), OPT("env", required_argument, OPT_ENV),
    OPT("tick", required_argument, OPT_TICK), OPT("quiet", no_argument, OPT_QUIET), END,
};

static int count_tick(void *ud)
{
    (*(long *)ud)++;
    return 0;
}

/* A shell script reaches the cluster the options name (--kubeconfig,
 * --context), as under `run`: through the runner's gateway, its private
 * kubeconfig naming the gateway alone ("KUBECONFIG=..." in env; kp removes
 * it afterwards, the caller closes gw->listen_fd). 0 set; 1 left as it is
 * (no option given and nothing resolves: there is no cluster to narrow to,
 * and a script that needs none still runs); -1 after reporting. */
static int exec_gateway(const struct kube_config_opts *ko, struct child_gateway *gw,
                        struct gateway_cred *cred, struct kube_private *kp, char *env, size_t len)
{
    struct kube_config kc;
    char err[ERRLINE_MAX];
    int port;
    gw->listen_fd = -1;
    if (kubeconfig_resolve(ko, &kc, err, sizeof err) != 0) {
        if (!ko->kubeconfig && !ko->context && !ko->local)
            return 1;
        log_fatal("exec: %s", err);
        return -1;
    }
    int w = -1;
    if (gateway_cred_new(cred, err, sizeof err) == 0 &&
        gateway_listen(&gw->listen_fd, &port, err, sizeof err) == 0)
        w = kubeconfig_private_gateway(port, cred->token, cred->cert_pem, kc.namespace, kp, err,
                                       sizeof err);
    kubeconfig_free(&kc);
    if (w != 0) {
        log_fatal("exec: %s", err);
        if (gw->listen_fd >= 0)
            close(gw->listen_fd);
        gw->listen_fd = -1;
        gateway_cred_free(cred);
        return -1;
    }
    gw->cred = cred;
    gw->stamp_allowed = 0; /* exec never touches the ledger */
    snprintf(env, len, "KUBECONFIG=%s", kp->path);
    return 0;
}

int cmd_exec(struct cli *c, int argc, char **argv, int first)
{
    int rc;
    if (argc - first != 2) {
        log_usage(c->cmd, "expected SLUG and FILE");
        return EXIT_USAGE;
    }
    if (!slug_valid(argv[first])) {
        char buf[160];
        log_usage(c->cmd, "'%s' is not a valid slug (lower-case letters, digits and single "
                  "dashes, at most %d characters)", shown(argv[first], buf, sizeof buf), SLUG_MAX);
        return EXIT_USAGE;
    }
    if (env_dry_run(c) != 0 || env_namespace(c) != 0 || script_file(c, argv[first + 1]) != 0)
        return EXIT_USAGE;
    int shell = ends_with(argv[first + 1], ".sh");
    struct kube_private kp;
    memset(&kp, 0, sizeof kp);
    char kc_env[sizeof kp.path + 16];
    struct child_gateway gw = {.listen_fd = -1};
    struct gateway_cred cred;
    memset(&cred, 0, sizeof cred);
    int through_gateway = 0;
    if (shell) {
        int k = exec_gateway(&c->r.k.cfg, &gw, &cred, &kp, kc_env, sizeof kc_env);
        if (k < 0)
            return EXIT_CLUSTER;
        if (k == 0) {
            c->env[c->nenv++] = kc_env; /* last: it wins over an --env KUBECONFIG */
            through_gateway = 1;
        }
    }
    long ticks = 0;
    struct child_spec spec = {
        .slug = argv[first],
        .path = argv[first + 1],
        .is_shell = shell,
        .workdir = c->workdir,
        .env = c->nenv ? c->env : NULL,
        .timeout_s = c->r.timeout,
        .grace_s = c->r.grace,
        .lua_mem_limit = c->r.memory,
        .kube = &c->r.k,
        .tick = c->tick > 0 ? count_tick : NULL,
        .tick_every = c->tick,
        .ud = &ticks,
        .quiet = c->quiet,
        .gateway = through_gateway ? &gw : NULL,
        .remove_on_orphan = through_gateway ? kp.path : NULL,
    };
    struct child_result res;
    child_run(&spec, &res);
    kubeconfig_private_remove(&kp);
    gateway_cred_free(&cred);
    if (gw.listen_fd >= 0)
        close(gw.listen_fd);
    cJSON *j = child_result_json(&res, ticks);
    if (j) {
        out_json(j, 0);
        rc = res.outcome == CHILD_OK ? EXIT_OK : EXIT_FAILED;
    } else {
        log_fatal("exec: out of memory");
        rc = EXIT_FAILED;
    }
    if (stop_signal()) {
        rc = stop_exit_code();
        log_fatal("stopped by %s while %s ran%s (exit %d)", stop_name(stop_signal()), argv[first],
                  res.outcome == CHILD_STOPPED ? ": it was stopped" : "", rc);
    }
    cJSON_Delete(j);
    child_result_free(&res);
    return rc;
}

/* ---- config -------------------------------------------------------------- */

const char help_config[] =
    "Usage: cozy-migrate config [options]\n"
    "\n"
    "Prints, as JSON, the cluster and identity the kube module would use: the\n"
    "source file(s), server, context, user, namespace, kind of credentials.\n"
    "No secrets are printed. Exit 6 with a one-line error when the\n"
    "configuration cannot be resolved.\n";

const struct option opts_config[] = {CLUSTER_OPTS, END};

int cmd_config(struct cli *c, int argc, char **argv, int first)
{
    int rc;
    if (no_operands(c, argc, argv, first))
        return EXIT_USAGE;
    struct kube_config kc;
    char err[1024];
    if (kubeconfig_resolve(&c->r.k.cfg, &kc, err, sizeof err) != 0) {
        log_fatal("%s", err);
        return EXIT_CLUSTER;
    }
    cJSON *d = kubeconfig_describe(&kc);
    rc = EXIT_OK;
    if (d)
        out_json(d, 1);
    else {
        log_fatal("out of memory");
        rc = EXIT_FAILED;
    }
    cJSON_Delete(d);
    kubeconfig_free(&kc);
    return rc;
}

const char help_spec[] =
    "Usage: cozy-migrate spec [busted options] [PATHS...]\n"
    "\n"
    "Runs busted inside the host, so specs can require the same native\n"
    "modules (kube.core, json, yaml, log) and stdlib the migrations use, and\n"
    "the spec-only `migrate` module (the runner's parsers and planner).\n"
    "Every argument is passed to busted; see 'cozy-migrate spec --help-busted'.\n";

int cmd_spec(struct cli *c, int argc, char **argv, int first)
{
    (void)first; /* every argument is busted's */
    if (argc > 1 && strcmp(argv[1], "--help") == 0) {
        help_print(help_spec);
        return EXIT_OK;
    }
    struct host_ctx hc = {.kube = c->r.k};
    lua_State *L = sandbox_new_unrestricted(paths_stdlib(), &hc);
    if (!L) {
        log_fatal("cannot create the Lua state");
        return EXIT_FAILED;
    }
    /* The runner's parsers and planner: for specs only, never in a sandbox. */
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, luaopen_migrate);
    lua_setfield(L, -2, "migrate");
    lua_pop(L, 1);
    lua_createtable(L, argc, 1);
    lua_pushstring(L, "cozy-migrate spec");
    lua_rawseti(L, -2, 0);
    for (int i = 1; i < argc; i++) {
        lua_pushstring(L, strcmp(argv[i], "--help-busted") == 0 ? "--help" : argv[i]);
        lua_rawseti(L, -2, i);
    }
    lua_setglobal(L, "arg");
    int rc = EXIT_OK;
    if (luaL_dostring(L, "require('busted.runner')({standalone = false})") != LUA_OK) {
        log_fatal("spec: %s", lua_tostring(L, -1));
        rc = EXIT_FAILED;
    }
    lua_close(L);
    return rc;
}


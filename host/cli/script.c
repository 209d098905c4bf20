/* script.c: the commands that run one script or show the cluster: lua,
 * exec, config, spec. Owns their option tables, their --help and their
 * operands; launching the child is run/launch.c's, showing the cluster
 * run/status.c's, the sandbox lua/'s. */
#include "cli/cli.h"

#include <errno.h>
#include <lauxlib.h>
#include <limits.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/defaults.h"
#include "base/exitcodes.h"
#include "base/log.h"
#include "base/paths.h"
#include "base/stop.h"
#include "base/util.h"
#include "formats/header.h"
#include "formats/manifest.h"
#include "formats/shellreach.h"
#include "lua/hostctx.h"
#include "lua/sandbox.h"
#include "run/launch.h"
#include "run/migrate_lua.h"

/* ---- lua FILE ---------------------------------------------------------- */

const char cli_lua_help[] =
    "Usage: cozy-migrate lua [options] FILE\n"
    "\n"
    "Runs FILE in the migration sandbox (string, table, math, utf8, coroutine,\n"
    "os.time/clock/date, and the stdlib: kube, json, yaml, log, ...), with the\n"
    "kube module connected to the cluster. A header in FILE is read as the\n"
    "runner reads it: its timeout= is the deadline (unless --timeout), and a\n"
    "header that does not parse (a misspelt key) is exit 3; a file without one\n"
    "runs with the defaults. Exit 0 when the script returns, 1 when it fails\n"
    "(error, timeout, memory cap), 2 when FILE is not a readable file, 6 when\n"
    "the cluster config cannot be resolved.\n"
    "\n"
    "Options:\n"
    "  --timeout DURATION  deadline for the script (default: the header's timeout=,\n"
    "                      else {TIMEOUT})\n"
    "  --memory MIB        memory cap for the Lua state (default {MEMORY})\n"
    "  --dry-run           send every write with dryRun=All (or DRY_RUN=1 or true;\n"
    "                      0, false or empty is a real run, anything else exit 2)\n"
    "  --stdlib-internals  FILE may also require the stdlib's private kube.core (the\n"
    "                      engine's own specs; a migration never can)\n";

const struct cli_option *const cli_lua_options[] = {
    CLUSTER_OPTS, &cli_opt_dry_run,
    &cli_opt_stdlib_internals,
    &cli_opt_timeout,
    &cli_opt_memory, NULL,
};

int cli_lua(struct cli *c, int argc, char **argv, int first)
{
    int rc;
    if (first != argc - 1) {
        log_usage(c->cmd, "%s", first >= argc ? "expected a FILE" : "expected exactly one FILE");
        return EXIT_USAGE;
    }
    if (cli_env_dry_run(c) != 0 || cli_env_namespace(c) != 0 ||
        cli_script_file(c, argv[first]) != 0)
        return EXIT_USAGE;
    /* In a supervised child like a migration: the parent's kill is the
     * backstop for time spent in C or in finalizers. */
    const char *file = argv[first];
    struct launch j;
    if ((rc = launch_file(&j, c->cmd, NULL, file, 0, c->timeout_set ? &c->r.timeout : NULL)) != 0)
        return rc;
    struct launcher L;
    launch_init(&L);
    L.k = &c->r.k;
    L.grace = c->r.grace;
    L.memory = c->r.memory;
    L.passthrough = 1;
    struct child_result res;
    launch_run(&L, &j, &res);
    launch_close(&L);
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

const char cli_exec_help[] =
    "Usage: cozy-migrate exec [options] SLUG FILE\n"
    "\n"
    "Runs one migration FILE the way the runner does: in a supervised child\n"
    "process with its own process group, its output streamed to stderr as\n"
    "'[SLUG] line'. FILE ending in .sh runs in bash, anything else in the Lua\n"
    "sandbox; a header in FILE is read as the runner reads it (its timeout= is\n"
    "the deadline unless --timeout says otherwise; one that does not parse is\n"
    "exit 3), a file without one runs with the defaults. Prints the result as\n"
    "one JSON line on stdout (outcome, reason,\n"
    "message, exit_code, signal, duration_ms, tail, ticks). Never touches the\n"
    "ledger. Exit 0 when the outcome is ok, 1 otherwise, 2 on usage errors (a\n"
    "SLUG that is not a slug, a FILE that is not a readable file).\n"
    "\n"
    "Options:\n"
    "  --timeout DURATION  wall-clock deadline (default: the header's timeout=,\n"
    "                      else {TIMEOUT})\n"
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

const struct cli_option *const cli_exec_options[] = {
    CLUSTER_OPTS, &cli_opt_dry_run,
    &cli_opt_timeout,
    &cli_opt_grace,
    &cli_opt_memory,
    &cli_opt_workdir, &cli_opt_env,
    &cli_opt_tick, &cli_opt_quiet, NULL,
};

static int count_tick(void *ud)
{
    (*(long *)ud)++;
    return 0;
}

/* A shell script that connects to another cluster on its own, under
 * --dry-run: not run (its writes there would not be dry runs), said so as
 * the result line. */
static int exec_unpredictable(const char *why)
{
    cJSON *j = cJSON_CreateObject();
    if (!j || !cJSON_AddStringToObject(j, "outcome", "unpredictable") ||
        !cJSON_AddStringToObject(j, "reason", "ReachesOtherCluster") ||
        !cJSON_AddStringToObject(j, "message", why)) {
        cJSON_Delete(j);
        log_fatal("exec: out of memory");
        return EXIT_FAILED;
    }
    out_json(j, 0);
    cJSON_Delete(j);
    log_warn("not run under --dry-run: %s", why);
    return EXIT_FAILED;
}

int cli_exec(struct cli *c, int argc, char **argv, int first)
{
    int rc;
    if (argc - first != 2) {
        log_usage(c->cmd, "expected SLUG and FILE");
        return EXIT_USAGE;
    }
    if (!slug_valid(argv[first])) {
        char buf[160];
        log_usage(c->cmd, "'%s' is not a valid slug (lower-case letters, digits and single "
                  "dashes, at most %d characters)", cli_shown(argv[first], buf, sizeof buf),
                  SLUG_MAX);
        return EXIT_USAGE;
    }
    if (cli_env_dry_run(c) != 0 || cli_env_namespace(c) != 0 || cli_script_file(c, argv[first + 1]) != 0)
        return EXIT_USAGE;
    const char *file = argv[first + 1];
    int shell = util_ends_with(file, ".sh");
    struct launch j;
    if ((rc = launch_file(&j, c->cmd, argv[first], file, shell,
                          c->timeout_set ? &c->r.timeout : NULL)) != 0)
        return rc;
    char why[4400];
    if (shell && c->r.k.dry_run && shellreach_file(file, why, sizeof why) != 0)
        return exec_unpredictable(why);
    /* A shell FILE reaches the cluster the options name (--kubeconfig,
     * --context) as under `run`: through the runner's gateway, its private
     * kubeconfig naming the gateway alone; exec never touches the ledger,
     * so it stamps nothing. */
    j.workdir = c->workdir;
    j.env = c->nenv ? c->env : NULL;
    long ticks = 0;
    struct launcher L;
    launch_init(&L);
    L.k = &c->r.k;
    L.say_as = "exec";
    L.grace = c->r.grace;
    L.memory = c->r.memory;
    L.tick = c->tick > 0 ? count_tick : NULL;
    L.tick_every = c->tick;
    L.ud = &ticks;
    L.quiet = c->quiet;
    if ((rc = launch_prepare(&L, &j)) != 0)
        return rc;
    struct child_result res;
    launch_run(&L, &j, &res);
    launch_close(&L);
    cJSON *out = child_result_json(&res, ticks);
    if (out) {
        out_json(out, 0);
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
    cJSON_Delete(out);
    child_result_free(&res);
    return rc;
}

/* ---- config -------------------------------------------------------------- */

const char cli_config_help[] =
    "Usage: cozy-migrate config [options]\n"
    "\n"
    "Prints, as JSON, the cluster and identity the kube module would use: the\n"
    "source file(s), server, context, user, namespace, kind of credentials.\n"
    "No secrets are printed. Exit 6 with a one-line error when the\n"
    "configuration cannot be resolved.\n";

const struct cli_option *const cli_config_options[] = {CLUSTER_OPTS, NULL};

int cli_config(struct cli *c, int argc, char **argv, int first)
{
    if (cli_no_operands(c, argc, argv, first))
        return EXIT_USAGE;
    return runner_config(&c->r);
}

const char cli_spec_help[] =
    "Usage: cozy-migrate spec [--i-own-this-cluster] [busted options] [PATHS...]\n"
    "\n"
    "Runs busted inside the host, so specs can require the same native\n"
    "modules (kube.core, json, yaml, log) and stdlib the migrations use, the\n"
    "spec-only `migrate` module (the runner's parsers and planner), and the\n"
    "spec harness shipped with the engine (support.migration, support.cluster,\n"
    "support.helpers: share/cozy-migrate/spec beside the binary, or\n"
    "$COZY_HARNESS). busted is the system's (Debian: lua-busted; exit 10 when\n"
    "it is missing); a repository's own spec/ comes first on the path.\n"
    "\n"
    "With KUBECONFIG set the specs run against that cluster only when it says\n"
    "it is disposable: a testenv (tools/testenv marks itself), a kind cluster\n"
    "(every node's providerID is kind://), or a cluster marked once by\n"
    "--i-own-this-cluster; the harness keeps the mark as the ConfigMap\n"
    "kube-system/cozy-migrate-disposable. Any other cluster: no spec runs,\n"
    "exit 15. The harness never deletes, strips or overwrites a CRD or an\n"
    "object this run did not create.\n"
    "\n"
    "Every other argument is passed to busted; see\n"
    "'cozy-migrate spec --help-busted'.\n";

/* 16 hex digits no other run shares: what the harness labels the objects
 * this run creates with (support.cluster), so it never takes another
 * run's, or the cluster's own, for its own. */
static void run_id(char out[17])
{
    unsigned char b[8] = {0};
    FILE *f = fopen("/dev/urandom", "rb");
    size_t n = f ? fread(b, 1, sizeof b, f) : 0;
    if (f)
        fclose(f);
    if (n != sizeof b) {
        unsigned long long x = (unsigned long long)getpid() * 1000003ULL ^ (unsigned long long)time(NULL);
        memcpy(b, &x, sizeof b);
    }
    for (size_t i = 0; i < sizeof b; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

/* The harness's view of this run, as require('migrate').run: loaded before
 * busted's first file, so every file (each insulated) sees the one table:
 * id, bin (this binary), harness (its directory, or nil), own_cluster.
 * May raise (memory). */
static void push_run(lua_State *L, const char *harness, int own)
{
    luaL_requiref(L, "migrate", luaopen_migrate, 0);
    lua_createtable(L, 0, 4);
    char id[17];
    run_id(id);
    lua_pushstring(L, id);
    lua_setfield(L, -2, "id");
    char *exe = realpath("/proc/self/exe", NULL);
    if (exe) {
        lua_pushstring(L, exe);
        lua_setfield(L, -2, "bin");
        free(exe);
    }
    if (harness) {
        lua_pushstring(L, harness);
        lua_setfield(L, -2, "harness");
    }
    lua_pushboolean(L, own);
    lua_setfield(L, -2, "own_cluster");
    lua_setfield(L, -2, "run");
    lua_pop(L, 1);
}

/* Before any spec file: the cluster in KUBECONFIG must say it is
 * disposable (support.disposable decides, with kubectl, as every later
 * check does). The harness modules it loads are dropped again, so busted's
 * lpath (a repository's own spec/ first) decides what the files get. */
static const char SPEC_MAIN[] =
    "local has_harness = ...\n"
    "local kc = os.getenv('KUBECONFIG')\n"
    "if has_harness and kc and kc ~= '' then\n"
    "  local ok, why = require('support.disposable').preflight()\n"
    "  for _, m in ipairs({ 'support.disposable', 'support.helpers' }) do package.loaded[m] = nil end\n"
    "  if not ok then return false, why end\n"
    "end\n"
    "require('busted.runner')({ standalone = false })\n"
    "return true\n";

int cli_spec(struct cli *c, int argc, char **argv, int first)
{
    (void)first; /* every argument but ours is busted's */
    int own = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            break;
        if (strcmp(argv[i], "--help") == 0) {
            cli_help_print(cli_spec_help);
            return EXIT_OK;
        }
        if (strcmp(argv[i], "--i-own-this-cluster") == 0)
            own = 1;
    }
    struct host_ctx hc = {.kube = c->r.k};
    lua_State *L = sandbox_new_unrestricted(paths_stdlib(), &hc);
    if (!L) {
        log_fatal("cannot create the Lua state");
        return EXIT_FAILED;
    }
    int rc = EXIT_OK;
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "path");
    const char *path = lua_tostring(L, -1);
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "searchpath");
    lua_pushliteral(L, "busted.runner");
    lua_pushstring(L, path ? path : "");
    lua_call(L, 2, 1);
    int have_busted = !lua_isnil(L, -1);
    lua_pop(L, 4);
    if (!have_busted) {
        log_fatal("spec: busted is not installed for Lua 5.4 (Debian and Ubuntu: apt-get install "
                  "lua-busted; luarocks: luarocks --lua-version 5.4 install busted)");
        lua_close(L);
        return EXIT_TOOL;
    }
    /* The harness last on the path: a repository's own modules win. */
    const char *harness = paths_harness();
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/support/migration.lua", harness);
    int has_harness = access(probe, R_OK) == 0;
    if (has_harness) {
        lua_getglobal(L, "package");
        lua_pushfstring(L, "%s;%s/?.lua", path ? path : "", harness);
        lua_setfield(L, -2, "path");
        lua_pop(L, 1);
    } else {
        log_warn("spec: no harness at %s (support.migration cannot be required; reinstall, or "
                 "set COZY_HARNESS)", harness);
    }
    push_run(L, has_harness ? harness : NULL, own);
    lua_createtable(L, argc, 1);
    lua_pushstring(L, "cozy-migrate spec");
    lua_rawseti(L, -2, 0);
    for (int i = 1, k = 1; i < argc; i++) {
        if (strcmp(argv[i], "--i-own-this-cluster") == 0)
            continue;
        lua_pushstring(L, strcmp(argv[i], "--help-busted") == 0 ? "--help" : argv[i]);
        lua_rawseti(L, -2, k++);
    }
    lua_setglobal(L, "arg");
    if (luaL_loadbufferx(L, SPEC_MAIN, sizeof SPEC_MAIN - 1, "=cozy-migrate spec", "t") != LUA_OK) {
        log_fatal("spec: %s", lua_tostring(L, -1));
        lua_close(L);
        return EXIT_FAILED;
    }
    lua_pushboolean(L, has_harness);
    if (lua_pcall(L, 1, 2, 0) != LUA_OK) {
        log_fatal("spec: %s", lua_tostring(L, -1));
        rc = EXIT_FAILED;
    } else if (!lua_toboolean(L, -2)) {
        log_fatal("spec: %s", lua_tostring(L, -1));
        rc = EXIT_NOT_DISPOSABLE;
    }
    lua_close(L);
    return rc;
}

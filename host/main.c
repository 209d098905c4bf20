/* main.c: the `cozy-migrate` command line.
 *
 * Owns parsing argv into options, `--help` for each command, and mapping
 * outcomes to the exit codes of exitcodes.h. Must never hold migration
 * logic: each command hands its options to the file that owns the work. */
#include <getopt.h>
#include <lauxlib.h>
#include <lualib.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exitcodes.h"
#include "kube.h"
#include "kubeconfig.h"
#include "log.h"
#include "manifest.h"
#include "lint.h"
#include "import.h"
#include "order.h"
#include "scaffold.h"
#include "runner.h"
#include "child.h"
#include "sandbox.h"
#include "util.h"

#define DEFAULT_TIMEOUT (10 * 60.0)
#define DEFAULT_MEMORY_MB 512

static const char *prog = "cozy-migrate";

static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see '%s --help')\n", prog);
    va_end(ap);
}

static const char main_help[] =
    "Usage: cozy-migrate <command> [options]\n"
    "\n"
    "The Cozystack migration engine.\n"
    "\n"
    "Commands:\n"
    "  run          run the pending migrations and record them in the ledger\n"
    "  plan         print what run would do, and why each other slug is skipped\n"
    "  status       print the ledger: every migration's state\n"
    "  lua FILE     run a Lua file in the migration sandbox, kube module connected\n"
    "  exec SLUG F  run one script in a supervised child and print the outcome\n"
    "  config       print which cluster and identity the kube module would use\n"
    "  spec [ARGS]  run busted specs inside the host (ARGS are busted's)\n"
    "  order        generate migrations/order.d/ from the git history's release tags\n"
    "  lint         check the migrations tree against the authoring contract\n"
    "  new SLUG     scaffold a Lua migration and its spec\n"
    "  import-legacy  bring numbered shell migrations into legacy-sh/\n"
    "\n"
    "Run 'cozy-migrate <command> --help' for a command's options.\n";

static const char cluster_opts_help[] =
    "Cluster options:\n"
    "  --kubeconfig FILE   use exactly this kubeconfig file\n"
    "  --context NAME      use this kubeconfig context\n"
    "  --local             use the kubeconfig's context, never in-cluster credentials\n"
    "  --namespace NS      platform namespace (default $NAMESPACE or cozy-system)\n";

/* Options shared by commands that talk to a cluster. */
struct common {
    struct kube_options k;
    double timeout;
    size_t memory;
};

enum { OPT_KUBECONFIG = 256, OPT_CONTEXT, OPT_LOCAL, OPT_NAMESPACE, OPT_DRY_RUN, OPT_TIMEOUT,
       OPT_MEMORY, OPT_LOG_FORMAT, OPT_HELP, OPT_TIER, OPT_ONLY, OPT_LOCK_TIMEOUT, OPT_LEDGER,
       OPT_DIR, OPT_LEASE_DURATION, OPT_GRACE, OPT_MAX_ATTEMPTS, OPT_OUTPUT };

/* Returns 1 when the option was one of the common ones, 0 when not, -1 on a
 * bad value (already reported). */
static int common_opt(struct common *c, int opt, const char *arg)
{
    switch (opt) {
    case OPT_KUBECONFIG: c->k.cfg.kubeconfig = arg; return 1;
    case OPT_CONTEXT: c->k.cfg.context = arg; return 1;
    case OPT_LOCAL: c->k.cfg.local = 1; return 1;
    case OPT_NAMESPACE: c->k.ledger_namespace = arg; return 1;
    case OPT_DRY_RUN: c->k.dry_run = 1; return 1;
    case OPT_TIMEOUT:
        if (parse_duration(arg, &c->timeout) != 0) {
            usage_error("--timeout: '%s' is not a duration like 90s, 5m or 1h", arg);
            return -1;
        }
        return 1;
    case OPT_MEMORY: {
        char *end;
        long mb = strtol(arg, &end, 10);
        if (*end || mb < 1 || mb > 65536) {
            usage_error("--memory: '%s' is not a size in MiB (1..65536)", arg);
            return -1;
        }
        c->memory = (size_t)mb << 20;
        return 1;
    }
    case OPT_LOG_FORMAT:
        if (strcmp(arg, "json") == 0)
            log_set_json(1);
        else if (strcmp(arg, "text") != 0) {
            usage_error("--log-format: '%s' is not text or json", arg);
            return -1;
        }
        return 1;
    }
    return 0;
}

static void common_init(struct common *c)
{
    kube_default_options(&c->k);
    const char *ns = getenv("NAMESPACE");
    if (ns && *ns)
        c->k.ledger_namespace = ns;
    const char *dry = getenv("DRY_RUN");
    if (dry && (strcmp(dry, "1") == 0 || strcmp(dry, "true") == 0))
        c->k.dry_run = 1;
    c->timeout = DEFAULT_TIMEOUT;
    c->memory = (size_t)DEFAULT_MEMORY_MB << 20;
}

#define COMMON_LONGOPTS                                          \
    {"kubeconfig", required_argument, NULL, OPT_KUBECONFIG},     \
    {"context", required_argument, NULL, OPT_CONTEXT},           \
    {"local", no_argument, NULL, OPT_LOCAL},                     \
    {"namespace", required_argument, NULL, OPT_NAMESPACE},       \
    {"log-format", required_argument, NULL, OPT_LOG_FORMAT},     \
    {"help", no_argument, NULL, OPT_HELP}

/* getopt_long with our error style: one line, exit 2. Returns the option,
 * -1 at the end, '?' after reporting an error. */
static int next_opt(int argc, char **argv, const struct option *lo)
{
    int idx = optind;
    int o = getopt_long(argc, argv, "+", lo, NULL);
    if (o == '?') {
        const char *bad = idx < argc ? argv[idx] : "?";
        if (optopt && optopt < 256)
            usage_error("unknown flag '%s'", bad);
        else if (strchr(bad, '=') || idx >= argc)
            usage_error("bad flag '%s'", bad);
        else
            usage_error("unknown flag or missing value: '%s'", bad);
    }
    return o;
}

/* ---- lua FILE ---------------------------------------------------------- */

static const char lua_help[] =
    "Usage: cozy-migrate lua [options] FILE\n"
    "\n"
    "Runs FILE in the migration sandbox (string, table, math, utf8, coroutine,\n"
    "os.time/clock/date, and the stdlib: kube, json, yaml, log, ...), with the\n"
    "kube module connected to the cluster. Exit 0 when the script returns,\n"
    "1 when it fails (error, timeout, memory cap), 6 when the cluster config\n"
    "cannot be resolved.\n"
    "\n"
    "Options:\n"
    "  --timeout DURATION  deadline for the script (default 10m)\n"
    "  --memory MIB        memory cap for the Lua state (default 512)\n"
    "  --dry-run           send every write with dryRun=All (or DRY_RUN=1)\n"
    "  --log-format FMT    text (default) or json\n";

static int cmd_lua(int argc, char **argv)
{
    static const struct option lo[] = {
        COMMON_LONGOPTS,
        {"dry-run", no_argument, NULL, OPT_DRY_RUN},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"memory", required_argument, NULL, OPT_MEMORY},
        {NULL, 0, NULL, 0},
    };
    struct common c;
    common_init(&c);
    int o;
    while ((o = next_opt(argc, argv, lo)) != -1) {
        if (o == OPT_HELP) {
            printf("%s\n%s", lua_help, cluster_opts_help);
            return EXIT_OK;
        }
        int r = o == '?' ? -1 : common_opt(&c, o, optarg);
        if (r <= 0)
            return EXIT_USAGE;
    }
    if (optind != argc - 1) {
        usage_error("lua: %s", optind >= argc ? "expected a FILE" : "expected exactly one FILE");
        return EXIT_USAGE;
    }
    const char *file = argv[optind];
    kube_set_options(&c.k);
    struct sandbox_opts so = {.mem_limit = c.memory, .timeout_s = c.timeout};
    struct sandbox *sb = sandbox_new(&so);
    if (!sb) {
        fprintf(stderr, "%s: cannot create the Lua state\n", prog);
        return EXIT_FAILED;
    }
    char err[2048];
    enum sandbox_status st = sandbox_run_file(sb, file, err, sizeof err);
    sandbox_free(sb);
    if (st == SANDBOX_OK)
        return EXIT_OK;
    fprintf(stderr, "%s: %s: %s: %s\n", prog, file, sandbox_status_name(st), err);
    return EXIT_FAILED;
}

/* ---- config -------------------------------------------------------------- */

static const char config_help[] =
    "Usage: cozy-migrate config [options]\n"
    "\n"
    "Prints, as JSON, the cluster and identity the kube module would use: the\n"
    "source file(s), server, context, user, namespace, kind of credentials.\n"
    "No secrets are printed. Exit 6 with a one-line error when the\n"
    "configuration cannot be resolved.\n";

static int cmd_config(int argc, char **argv)
{
    static const struct option lo[] = {COMMON_LONGOPTS, {NULL, 0, NULL, 0}};
    struct common c;
    common_init(&c);
    int o;
    while ((o = next_opt(argc, argv, lo)) != -1) {
        if (o == OPT_HELP) {
            printf("%s\n%s", config_help, cluster_opts_help);
            return EXIT_OK;
        }
        int r = o == '?' ? -1 : common_opt(&c, o, optarg);
        if (r <= 0)
            return EXIT_USAGE;
    }
    if (optind != argc) {
        usage_error("config: unexpected argument '%s'", argv[optind]);
        return EXIT_USAGE;
    }
    struct kube_config kc;
    char err[1024];
    if (kubeconfig_resolve(&c.k.cfg, &kc, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return EXIT_CLUSTER;
    }
    cJSON *d = kubeconfig_describe(&kc);
    char *s = d ? cJSON_Print(d) : NULL;
    int rc = EXIT_OK;
    if (s)
        printf("%s\n", s);
    else {
        fprintf(stderr, "%s: out of memory\n", prog);
        rc = EXIT_FAILED;
    }
    cJSON_free(s);
    cJSON_Delete(d);
    kubeconfig_free(&kc);
    return rc;
}

/* ---- spec ---------------------------------------------------------------- */

static const char spec_help[] =
    "Usage: cozy-migrate spec [busted options] [PATHS...]\n"
    "\n"
    "Runs busted inside the host, so specs can require the same native\n"
    "modules (kube.core, json, yaml, log) and stdlib the migrations use.\n"
    "Every argument is passed to busted; see 'cozy-migrate spec --help-busted'.\n";

static int cmd_spec(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--help") == 0) {
        printf("%s", spec_help);
        return EXIT_OK;
    }
    struct common c;
    common_init(&c);
    kube_set_options(&c.k);
    lua_State *L = sandbox_new_unrestricted(sandbox_default_stdlib());
    if (!L) {
        fprintf(stderr, "%s: cannot create the Lua state\n", prog);
        return EXIT_FAILED;
    }
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
        fprintf(stderr, "%s: spec: %s\n", prog, lua_tostring(L, -1));
        rc = EXIT_FAILED;
    }
    lua_close(L);
    return rc;
}

/* ---- run / plan / status -------------------------------------------------- */

static const char run_help[] =
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
    "  --dry-run            Lua migrations send every write with dryRun=All; shell\n"
    "                       migrations are listed, not run; nothing is recorded (env DRY_RUN)\n"
    "  --timeout DURATION   per-migration timeout, overriding every header (default:\n"
    "                       the header's timeout, else 10m)\n"
    "  --lock-timeout DUR   how long to wait for another runner's lock (default 5m)\n"
    "  --lease-duration DUR how long the lock lives without renewal (default 30s)\n"
    "  --grace DURATION     TERM-to-KILL delay on timeout (default 10s)\n"
    "  --max-attempts N     background: retries of a failed migration (default 3)\n"
    "  --ledger NAME        the ledger ConfigMap (default cozystack-version)\n"
    "  --dir DIR            the tree holding migrations/ and legacy-sh/ (default: the\n"
    "                       image's, or the working tree with --local)\n"
    "  --memory MIB         memory cap of a Lua migration (default 512)\n"
    "  --log-format FMT     text (default) or json (progress lines as JSON)\n"
    "\n"
    "Environment: NAMESPACE, ONLY, MIGRATIONS_IMAGE (recorded), DRY_RUN.\n"
    "Exit codes: 0 ok, 1 a migration failed, 2 usage, 3 invalid packaging,\n"
    "4 retention floor, 5 lock not acquired, 6 cluster unreachable or\n"
    "forbidden, 7 untrustworthy ledger.\n";

static const char plan_help[] =
    "Usage: cozy-migrate plan [options]\n"
    "\n"
    "Prints what `run` would do with the same options: the migrations it would\n"
    "run in order, and why each other one is skipped. Writes nothing and takes\n"
    "no lock. Accepts run's --tier, --only, --dry-run, --ledger, --dir.\n";

static const char status_help[] =
    "Usage: cozy-migrate status [options]\n"
    "\n"
    "Prints the ledger as a table: migration, state, when, attempts, batch,\n"
    "tier, and whether the recorded checksum matches the shipped script.\n"
    "\n"
    "Options:\n"
    "  -o, --output FMT     table (default) or json\n"
    "  --ledger NAME, --dir DIR as for run\n";

/* The tree: --dir, else $COZY_MIGRATIONS_DIR, else the image's
 * /usr/share/cozy-migrate, else (with --local or in a checkout) the
 * directory above build/. */
static const char *default_dir(void)
{
    const char *env = getenv("COZY_MIGRATIONS_DIR");
    if (env && *env)
        return env;
    const char *stdlib = sandbox_default_stdlib();
    static char dir[4096];
    snprintf(dir, sizeof dir, "%s", stdlib);
    char *slash = strrchr(dir, '/');
    if (slash && strcmp(slash, "/stdlib") == 0) {
        *slash = '\0';
        return dir;
    }
    return ".";
}

static int runner_cmd(int argc, char **argv, int which)
{
    static const struct option lo[] = {
        COMMON_LONGOPTS,
        {"dry-run", no_argument, NULL, OPT_DRY_RUN},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"memory", required_argument, NULL, OPT_MEMORY},
        {"tier", required_argument, NULL, OPT_TIER},
        {"only", required_argument, NULL, OPT_ONLY},
        {"lock-timeout", required_argument, NULL, OPT_LOCK_TIMEOUT},
        {"lease-duration", required_argument, NULL, OPT_LEASE_DURATION},
        {"grace", required_argument, NULL, OPT_GRACE},
        {"max-attempts", required_argument, NULL, OPT_MAX_ATTEMPTS},
        {"ledger", required_argument, NULL, OPT_LEDGER},
        {"dir", required_argument, NULL, OPT_DIR},
        {"output", required_argument, NULL, OPT_OUTPUT},
        {NULL, 0, NULL, 0},
    };
    const char *helps[] = {run_help, plan_help, status_help};
    struct common c;
    common_init(&c);
    struct runner_opts o;
    memset(&o, 0, sizeof o);
    o.tier = "pre-apply";
    o.lock_timeout = 300;
    o.lease_duration = 30;
    o.grace = 10;
    o.max_attempts = 3;
    o.image = getenv("MIGRATIONS_IMAGE");
    const char *only = getenv("ONLY");
    o.only = only && *only ? only : NULL;
    int timeout_set = 0;
    double d;
    int opt;
    /* -o is status's short form of --output. */
    static const struct option *lop = lo;
    while ((opt = getopt_long(argc, argv, "+o:", lop, NULL)) != -1) {
        switch (opt) {
        case OPT_HELP:
            printf("%s\n%s", helps[which], cluster_opts_help);
            return EXIT_OK;
        case OPT_TIER:
            if (strcmp(optarg, "pre-apply") != 0 && strcmp(optarg, "background") != 0) {
                usage_error("--tier: '%s' is not pre-apply or background", optarg);
                return EXIT_USAGE;
            }
            o.tier = optarg;
            continue;
        case OPT_ONLY:
            o.only = optarg;
            continue;
        case OPT_LOCK_TIMEOUT:
        case OPT_LEASE_DURATION:
        case OPT_GRACE:
            if (parse_duration(optarg, &d) != 0) {
                usage_error("'%s' is not a duration like 90s, 5m or 1h", optarg);
                return EXIT_USAGE;
            }
            if (opt == OPT_LOCK_TIMEOUT)
                o.lock_timeout = d;
            else if (opt == OPT_GRACE)
                o.grace = d;
            else
                o.lease_duration = d < 1 ? 1 : (int)d;
            continue;
        case OPT_MAX_ATTEMPTS: {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (*end || n < 1 || n > 1000) {
                usage_error("--max-attempts: '%s' is not a number from 1 to 1000", optarg);
                return EXIT_USAGE;
            }
            o.max_attempts = (int)n;
            continue;
        }
        case OPT_LEDGER:
            c.k.ledger_name = optarg;
            continue;
        case OPT_DIR:
            o.dir = optarg;
            continue;
        case 'o':
        case OPT_OUTPUT:
            if (strcmp(optarg, "json") == 0)
                o.json_output = 1;
            else if (strcmp(optarg, "table") != 0) {
                usage_error("--output: '%s' is not table or json", optarg);
                return EXIT_USAGE;
            }
            continue;
        case OPT_TIMEOUT:
            timeout_set = 1;
            break;
        case '?':
            usage_error("unknown flag or missing value: '%s'", argv[optind - 1]);
            return EXIT_USAGE;
        }
        if (opt == OPT_LOG_FORMAT && strcmp(optarg, "json") == 0)
            o.json_output = 1;
        if (common_opt(&c, opt, optarg) <= 0)
            return EXIT_USAGE;
    }
    if (optind != argc) {
        usage_error("unexpected argument '%s'", argv[optind]);
        return EXIT_USAGE;
    }
    if (o.only && !slug_valid(o.only)) {
        usage_error("--only: '%s' is not a valid slug", o.only);
        return EXIT_USAGE;
    }
    if (!o.dir)
        o.dir = c.k.cfg.local ? "." : default_dir();
    static char lease[300];
    snprintf(lease, sizeof lease, "%s-lock", c.k.ledger_name);
    c.k.lease_name = lease;
    o.timeout = timeout_set ? c.timeout : 0;
    o.memory = c.memory;
    o.k = c.k;
    kube_set_options(&c.k);
    return which == 0 ? runner_run(&o) : which == 1 ? runner_plan(&o) : runner_status(&o);
}

static int cmd_run(int argc, char **argv) { return runner_cmd(argc, argv, 0); }
static int cmd_plan(int argc, char **argv) { return runner_cmd(argc, argv, 1); }
static int cmd_status(int argc, char **argv) { return runner_cmd(argc, argv, 2); }

/* ---- order --------------------------------------------------------------- */

static const char order_help[] =
    "Usage: cozy-migrate order [--repo DIR] [--out DIR] [--rev REV] [--check-prefix]\n"
    "\n"
    "Generates the manifest (migrations/order.d/) from git: this line's release\n"
    "tags (vX.Y.Z, vX.Y.Z-rc.N reachable from REV) in version order, release\n"
    "candidates first; a slug's batch NNNNN-<tag> is the first tag that carries\n"
    "it; alphabetical within a batch, reordered only where `requires` demands;\n"
    "'<slug> retired' for a slug a tag carried and REV does not; 99999-untagged\n"
    "for slugs no tag carries (never when REV is a release tag); 00000-legacy\n"
    "from legacy-sh/legacy-map. Reads git objects only, never the working tree.\n"
    "\n"
    "Options:\n"
    "  --repo DIR       the tree holding migrations/ and legacy-sh/ (default .)\n"
    "  --out DIR        where to write the batches (default DIR/migrations/order.d)\n"
    "  --rev REV        the revision to generate for (default HEAD)\n"
    "  --check-prefix   fail unless the previous release's manifest, regenerated\n"
    "                   from its tag, is a prefix of this one (a slug may since\n"
    "                   have been retired)\n"
    "\n"
    "Exit codes: 0 written, 3 packaging (cycle, dangling or later-batch requires,\n"
    "bad header, slug or legacy-map), 8 history (shallow clone, missing previous\n"
    "tag, not a git repository), 9 the manifest rewrites a released one,\n"
    "10 git is not installed.\n";

static int cmd_order(int argc, char **argv)
{
    enum { O_REPO = 300, O_OUT, O_REV, O_CHECK, O_HELP };
    static const struct option lo[] = {
        {"repo", required_argument, NULL, O_REPO},
        {"out", required_argument, NULL, O_OUT},
        {"rev", required_argument, NULL, O_REV},
        {"check-prefix", no_argument, NULL, O_CHECK},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    const char *repo = ".", *out = NULL, *rev = "HEAD";
    int check = 0, o;
    while ((o = next_opt(argc, argv, lo)) != -1) {
        switch (o) {
        case O_HELP: printf("%s", order_help); return EXIT_OK;
        case O_REPO: repo = optarg; break;
        case O_OUT: out = optarg; break;
        case O_REV: rev = optarg; break;
        case O_CHECK: check = 1; break;
        default: return EXIT_USAGE;
        }
    }
    if (optind != argc) {
        usage_error("order: unexpected argument '%s'", argv[optind]);
        return EXIT_USAGE;
    }
    return order_cmd(repo, rev, out, check);
}

/* ---- lint ---------------------------------------------------------------- */

static const char lint_help[] =
    "Usage: cozy-migrate lint [--dir DIR] [--against REV] [--history]\n"
    "\n"
    "Checks the tree (migrations/, legacy-sh/, spec/) against the authoring\n"
    "contract and prints each problem as 'file:line: rule: what is wrong'.\n"
    "Rules: slug (grammar, length), header (present, parseable, on-error, no\n"
    "unknown key), duplicate, requires (exists), cycle, batch (not in a later\n"
    "batch), tier (never across tiers), spec (spec/migrations/<slug>_spec.lua\n"
    "for every Lua migration), legacy (legacy-map and legacy-sh/ agree),\n"
    "revoked, order-d (no order.d/ tracked in git), shebang (bash or sh),\n"
    "shellcheck, luacheck (with the sandbox's globals); with --history: history\n"
    "(a slug never reused from tag history); with --against: changed (a shipped\n"
    "script is unchanged against REV and every release tag that carries it).\n"
    "\n"
    "Options:\n"
    "  --dir DIR       the tree root (default .)\n"
    "  --against REV   compare shipped scripts with REV and every release tag\n"
    "  --history       check slugs against every release tag's tree\n"
    "\n"
    "Exit codes: 0 clean, 3 problems found, 8 git cannot answer (not a\n"
    "repository, shallow clone), 10 shellcheck, luacheck or git missing.\n";

static int cmd_lint(int argc, char **argv)
{
    enum { O_DIR = 300, O_AGAINST, O_HISTORY, O_HELP };
    static const struct option lo[] = {
        {"dir", required_argument, NULL, O_DIR},
        {"against", required_argument, NULL, O_AGAINST},
        {"history", no_argument, NULL, O_HISTORY},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    struct lint_opts lo2 = {.dir = "."};
    int o;
    while ((o = next_opt(argc, argv, lo)) != -1) {
        switch (o) {
        case O_HELP: printf("%s", lint_help); return EXIT_OK;
        case O_DIR: lo2.dir = optarg; break;
        case O_AGAINST: lo2.against = optarg; break;
        case O_HISTORY: lo2.history = 1; break;
        default: return EXIT_USAGE;
        }
    }
    if (optind != argc) {
        usage_error("lint: unexpected argument '%s'", argv[optind]);
        return EXIT_USAGE;
    }
    return lint_run(&lo2);
}

/* ---- new ----------------------------------------------------------------- */

static const char new_help[] =
    "Usage: cozy-migrate new SLUG [--tier pre-apply|background] [--on-error abort|warn]\n"
    "                        [--dir DIR]\n"
    "\n"
    "Writes migrations/<tier>/SLUG.lua with its header and\n"
    "spec/migrations/SLUG_spec.lua, a spec that runs it against the cluster in\n"
    "KUBECONFIG twice and asserts the second run changed no object's\n"
    "resourceVersion. The pair passes `lint` and `spec` as written. Refuses an\n"
    "invalid slug (2), and a slug the tree already has or a release tag carried\n"
    "(9: a slug is never reused).\n"
    "\n"
    "Options:\n"
    "  --tier TIER       pre-apply (default) or background\n"
    "  --on-error MODE   abort (default) or warn\n"
    "  --dir DIR         the tree root (default .)\n";

static int cmd_new(int argc, char **argv)
{
    enum { O_TIER = 300, O_ONERR, O_DIR, O_HELP };
    static const struct option lo[] = {
        {"tier", required_argument, NULL, O_TIER},
        {"on-error", required_argument, NULL, O_ONERR},
        {"dir", required_argument, NULL, O_DIR},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    struct scaffold_opts so = {.dir = ".", .tier = "pre-apply", .on_error = "abort"};
    int o;
    /* The slug may come before or after the options. */
    const char *slug = NULL;
    while (optind < argc) {
        if (argv[optind][0] != '-') {
            if (slug) {
                usage_error("new: unexpected argument '%s'", argv[optind]);
                return EXIT_USAGE;
            }
            slug = argv[optind++];
            continue;
        }
        if ((o = next_opt(argc, argv, lo)) == -1)
            break;
        switch (o) {
        case O_HELP: printf("%s", new_help); return EXIT_OK;
        case O_TIER:
            if (strcmp(optarg, "pre-apply") != 0 && strcmp(optarg, "background") != 0) {
                usage_error("--tier: '%s' is not pre-apply or background", optarg);
                return EXIT_USAGE;
            }
            so.tier = optarg;
            break;
        case O_ONERR:
            if (strcmp(optarg, "abort") != 0 && strcmp(optarg, "warn") != 0) {
                usage_error("--on-error: '%s' is not abort or warn", optarg);
                return EXIT_USAGE;
            }
            so.on_error = optarg;
            break;
        case O_DIR: so.dir = optarg; break;
        default: return EXIT_USAGE;
        }
    }
    if (!slug) {
        usage_error("new: expected a SLUG");
        return EXIT_USAGE;
    }
    so.slug = slug;
    return scaffold_new(&so);
}

/* ---- import-legacy ------------------------------------------------------- */

static const char import_help[] =
    "Usage: cozy-migrate import-legacy --from DIR --names FILE [--dir DEST]\n"
    "\n"
    "Brings a platform's numbered shell migrations (files 1 .. N, and the lib/\n"
    "they source) into DEST/legacy-sh/: each becomes <slug>.sh, byte-identical\n"
    "but for one line inserted after the shebang, the header\n"
    "'# cozystack-migration: on-error=abort'; lib/ is copied; legacy-map is\n"
    "written. FILE names each number: 'N slug' a line, in order.\n"
    "\n"
    "Exit codes: 0 imported, 2 usage, 3 a missing number or name, a file\n"
    "without a shebang, a name that is not a valid slug, 9 DEST already holds\n"
    "legacy migrations or a slug is taken.\n";

static int cmd_import_legacy(int argc, char **argv)
{
    enum { O_FROM = 300, O_NAMES, O_DIR, O_HELP };
    static const struct option lo[] = {
        {"from", required_argument, NULL, O_FROM},
        {"names", required_argument, NULL, O_NAMES},
        {"dir", required_argument, NULL, O_DIR},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    struct import_opts io = {.dest = "."};
    int o;
    while ((o = next_opt(argc, argv, lo)) != -1) {
        switch (o) {
        case O_HELP: printf("%s", import_help); return EXIT_OK;
        case O_FROM: io.from = optarg; break;
        case O_NAMES: io.names = optarg; break;
        case O_DIR: io.dest = optarg; break;
        default: return EXIT_USAGE;
        }
    }
    if (optind != argc) {
        usage_error("import-legacy: unexpected argument '%s'", argv[optind]);
        return EXIT_USAGE;
    }
    if (!io.from || !io.names) {
        usage_error("import-legacy: --from DIR and --names FILE are required");
        return EXIT_USAGE;
    }
    return import_legacy(&io);
}

/* ---- dispatch ------------------------------------------------------------ */

static const struct {
    const char *name;
    int (*fn)(int, char **);
} commands[] = {
    {"run", cmd_run},
    {"plan", cmd_plan},
    {"status", cmd_status},
    {"lua", cmd_lua},
    {"exec", child_cli},
    {"config", cmd_config},
    {"spec", cmd_spec},
    {"order", cmd_order},
    {"lint", cmd_lint},
    {"new", cmd_new},
    {"import-legacy", cmd_import_legacy},
};

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        fputs(main_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name) == 0) {
            opterr = 0;
            optind = 1;
            return commands[i].fn(argc - 1, argv + 1);
        }
    }
    if (argv[1][0] == '-')
        usage_error("unknown flag '%s' before the command", argv[1]);
    else
        usage_error("unknown command '%s'", argv[1]);
    return EXIT_USAGE;
}

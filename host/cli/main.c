/* main.c: the `cozy-migrate` command line.
 *
 * Owns parsing argv into options (one option table per command, one handler
 * for every option, each default from defaults.h), `--help` for each
 * command, and mapping outcomes to the exit codes of exitcodes.h. Must
 * never hold migration logic: each command hands its options to the file
 * that owns the work. Every line it prints goes through log.c. */
#include <getopt.h>
#include <lauxlib.h>
#include <lualib.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run/child.h"
#include "base/defaults.h"
#include "base/exitcodes.h"
#include "lua/hostctx.h"
#include "release/import.h"
#include "kube/kubeconfig.h"
#include "release/lint.h"
#include "base/log.h"
#include "formats/manifest.h"
#include "run/migrate_lua.h"
#include "release/order.h"
#include "run/preview.h"
#include "run/runner.h"
#include "lua/sandbox.h"
#include "release/scaffold.h"
#include "base/stop.h"
#include "base/util.h"
#include "run/dispatch.h"
#include "release/index.h"

#define STR_(x) #x
#define STR(x) STR_(x)

static const char main_help[] =
    "Usage: cozy-migrate <command> [options]\n"
    "\n"
    "The Cozystack migration engine.\n"
    "\n"
    "Commands:\n"
    "  run          run the pending migrations and record them in the ledger\n"
    "  plan         print what run would do, and why each other slug is skipped\n"
    "  preview      dry-run every pending migration in order against a copy-on-write\n"
    "               view of the cluster: each object it would change\n"
    "  status       print the ledger: every migration's state (SLUG: one whole record)\n"
    "  skip SLUG    record a migration skipped by the operator (--reason TEXT)\n"
    "  lua FILE     run a Lua file in the migration sandbox, kube module connected\n"
    "  exec SLUG F  run one script in a supervised child and print the outcome\n"
    "  config       print which cluster and identity the kube module would use\n"
    "  spec [ARGS]  run busted specs inside the host (ARGS are busted's)\n"
    "  order        generate migrations/order.d/ from the git history's release tags\n"
    "  lint         check the migrations tree against the authoring contract\n"
    "  new SLUG     scaffold a Lua migration and its spec\n"
    "  import-legacy  bring numbered shell migrations into legacy-sh/\n"
    "  index        the migrations index a chart ships (--check FILE: does it agree?)\n"
    "  dispatch     one reconcile of the background tier: a Job for the next pending slug\n"
    "\n"
    "Run 'cozy-migrate <command> --help' for a command's options.\n";

static const char cluster_opts_help[] =
    "Cluster options:\n"
    "  --kubeconfig FILE   use exactly this kubeconfig file\n"
    "  --context NAME      use this kubeconfig context\n"
    "  --local             use the kubeconfig's context, never in-cluster credentials\n"
    "  --namespace NS      platform namespace (default $NAMESPACE or " DEFAULT_NAMESPACE ")\n"
    "  --log-format FMT    text (default) or json: every line printed is a JSON object\n"
    "  --retry-for DUR     how long a request is retried through throttling, 5xx and\n"
    "                      broken connections (default 60s: an apiserver restart)\n";

/* ---- options: one table per command, one handler for all ---------------- */

enum opt_id {
    OPT_KUBECONFIG = 256, OPT_CONTEXT, OPT_LOCAL, OPT_NAMESPACE, OPT_LOG_FORMAT, OPT_HELP,
    OPT_DRY_RUN, OPT_TIMEOUT, OPT_MEMORY, OPT_TIER, OPT_ONLY, OPT_LOCK_TIMEOUT, OPT_LEDGER,
    OPT_DIR, OPT_LEASE_DURATION, OPT_GRACE, OPT_MAX_ATTEMPTS, OPT_OUTPUT, OPT_WORKDIR, OPT_ENV,
    OPT_TICK, OPT_QUIET, OPT_REPO, OPT_OUT, OPT_REV, OPT_CHECK_PREFIX, OPT_AGAINST,
    OPT_HISTORY, OPT_ON_ERROR, OPT_FROM, OPT_NAMES, OPT_RETRY_FOR, OPT_PASS_ENV, OPT_FORCE,
    OPT_REASON, OPT_FAILED, OPT_IMAGE, OPT_REQUIRE_DIGEST, OPT_CHECK,
    OPT_SERVICE_ACCOUNT,
};

#define CLUSTER_OPTS                                             \
    {"kubeconfig", required_argument, NULL, OPT_KUBECONFIG},     \
    {"context", required_argument, NULL, OPT_CONTEXT},           \
    {"local", no_argument, NULL, OPT_LOCAL},                     \
    {"namespace", required_argument, NULL, OPT_NAMESPACE},       \
    {"log-format", required_argument, NULL, OPT_LOG_FORMAT},     \
    {"retry-for", required_argument, NULL, OPT_RETRY_FOR},       \
    {"help", no_argument, NULL, OPT_HELP}
#define OPT(name, arg, id) {name, arg, NULL, id}
#define END {NULL, 0, NULL, 0}

/* Everything any command can be told; each command reads what it accepts. */
struct cli {
    const char *cmd;
    struct runner_opts r;       /* r.k holds the kube options of every command */
    int timeout_set;
    /* exec */
    const char *workdir;
    char **env;
    size_t nenv;
    double tick;
    int quiet;
    /* SKIP: the slugs, each a valid slug, at most once */
    const char *skip[64];
    char skip_buf[4096];
    /* order, lint, new, import-legacy */
    const char *repo, *out, *rev, *against, *on_error, *from, *names;
    int check_prefix, history;
    /* index */
    const char *image, *check;
    /* dispatch */
    const char *service_account;
    int require_digest, configmap;
    int permute;                /* operands may come between options */
    unsigned char seen[64];     /* options given so far (id - 256): each at most once */
};

static void cli_init(struct cli *c, const char *cmd, char **env)
{
    memset(c, 0, sizeof *c);
    c->cmd = cmd;
    c->env = env;
    kube_default_options(&c->r.k);
    const char *ns = getenv("NAMESPACE");
    if (ns && *ns)
        c->r.k.ledger_namespace = ns;
    c->r.tier = "pre-apply";
    c->r.timeout = DEFAULT_TIMEOUT_S;
    c->r.lock_timeout = DEFAULT_LOCK_WAIT_S;
    c->r.lease_duration = DEFAULT_LEASE_S;
    c->r.grace = DEFAULT_GRACE_S;
    c->r.max_attempts = DEFAULT_MAX_ATTEMPTS;
    c->r.memory = (size_t)DEFAULT_MEMORY_MB << 20;
    c->r.image = getenv("MIGRATIONS_IMAGE");
    c->r.pass_env = getenv("PASS_ENV");
    const char *only = getenv("ONLY");
    c->r.only = only && *only ? only : NULL;
}

/* A value as it can sit in a one-line message: control bytes escaped,
 * cut to fit. */
static const char *shown(const char *v, char *buf, size_t cap)
{
    size_t at = 0;
    for (const unsigned char *p = (const unsigned char *)v; *p && at + 5 < cap; p++) {
        if (*p < 0x20 || *p == 0x7f)
            at += (size_t)snprintf(buf + at, cap - at, *p == '\n' ? "\\n" : *p == '\t' ? "\\t"
                                                                                 : "\\x%02x", *p);
        else
            buf[at++] = (char)*p;
    }
    buf[at] = '\0';
    return buf;
}

/* Whether s holds a control byte (a newline would print as a line of its
 * own wherever the value is shown, records and progress included). */
static int has_control(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return 1;
    return 0;
}

/* A namespace name: an RFC 1123 label, at most 63 characters, no dot. */
static int namespace_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        int alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
        if (!alnum && (ch != '-' || i == 0 || i == n - 1))
            return 0;
    }
    return 1;
}

/* Variables --pass-env may not name: the cluster identity a shell child
 * gets is the runner's own (its private kubeconfig, the in-cluster
 * service address, the proxies the runner's own requests use), and the
 * variables the runner sets itself. */
static const char *const pass_env_reserved[] = {
    "KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT",
    "KUBERNETES_SERVICE_PORT_HTTPS", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
    "http_proxy", "https_proxy", "no_proxy", "all_proxy", "NAMESPACE", "MIGRATION_SLUG",
    "CURRENT_VERSION", "TARGET_VERSION", NULL,
};

/* --pass-env / PASS_ENV: comma-separated environment variable names. 0, or
 * -1 after reporting. */
static int pass_env_check(struct cli *c, const char *what, const char *list)
{
    char buf[160];
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), p);
        int ok = n > 0 && n < sizeof name && !((name[0] >= '0' && name[0] <= '9'));
        for (size_t i = 0; ok && i < n; i++)
            ok = (name[i] >= 'A' && name[i] <= 'Z') || (name[i] >= 'a' && name[i] <= 'z') ||
                 (name[i] >= '0' && name[i] <= '9') || name[i] == '_';
        if (!ok) {
            log_usage(c->cmd, "%s: '%s' is not a comma-separated list of variable names "
                      "([A-Za-z_][A-Za-z0-9_]*, e.g. SKIP_BACKUP,RETRIES)", what,
                      shown(list, buf, sizeof buf));
            return -1;
        }
        for (const char *const *r = pass_env_reserved; *r; r++)
            if (strcmp(name, *r) == 0) {
                log_usage(c->cmd, "%s: %s is the runner's to set: a shell migration reaches the "
                          "runner's own cluster as the runner's identity, with the runner's %s; "
                          "drop it from the list", what, name,
                          strstr(name, "KUBE") || strstr(name, "PROXY") || strstr(name, "proxy")
                              ? "connection" : "values");
                return -1;
            }
        p += n + (p[n] == ',');
    }
    return 0;
}

/* A Kubernetes object name (RFC 1123 subdomain: what a ConfigMap and a
 * Lease are named). */
static int k8s_name_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        int alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
        if (!alnum && ch != '-' && ch != '.')
            return 0;
        if (!alnum && (i == 0 || i == n - 1))
            return 0;
    }
    return 1;
}

static int duration_arg(struct cli *c, const char *flag, const char *arg, double *out)
{
    if (parse_duration(arg, out) != 0 || !(*out > 0)) {
        log_usage(c->cmd, "--%s: '%s' is not a duration like 90s, 5m or 1h30m", flag, arg);
        return -1;
    }
    return 0;
}

/* Applies one parsed option. 0, or -1 after reporting a bad value. */
static int apply_opt(struct cli *c, int id, const char *flag, const char *arg)
{
    struct runner_opts *r = &c->r;
    double d;
    char *end;
    switch (id) {
    case OPT_KUBECONFIG:
    case OPT_CONTEXT:
        /* An empty value would fall back to KUBECONFIG or current-context:
         * another cluster than the one asked for. */
        if (!*arg) {
            log_usage(c->cmd, "--%s: an empty value names no %s", flag,
                      id == OPT_KUBECONFIG ? "file" : "context");
            return -1;
        }
        if (id == OPT_KUBECONFIG)
            r->k.cfg.kubeconfig = arg;
        else
            r->k.cfg.context = arg;
        return 0;
    case OPT_LOCAL: r->k.cfg.local = 1; return 0;
    case OPT_DRY_RUN: r->k.dry_run = 1; return 0;
    case OPT_ONLY: r->only = arg; return 0;
    case OPT_DIR: r->dir = arg; return 0;
    case OPT_WORKDIR: c->workdir = arg; return 0;
    case OPT_QUIET: c->quiet = 1; return 0;
    case OPT_REPO: c->repo = arg; return 0;
    case OPT_OUT: c->out = arg; return 0;
    case OPT_REV: c->rev = arg; return 0;
    case OPT_CHECK_PREFIX: c->check_prefix = 1; return 0;
    case OPT_AGAINST: c->against = arg; return 0;
    case OPT_HISTORY: c->history = 1; return 0;
    case OPT_FROM: c->from = arg; return 0;
    case OPT_PASS_ENV:
        if (pass_env_check(c, "--pass-env", arg) != 0)
            return -1;
        r->pass_env = arg;
        return 0;
    case OPT_NAMES: c->names = arg; return 0;
    case OPT_FORCE: r->force = 1; return 0;
    case OPT_FAILED: r->failed_only = 1; return 0;
    case OPT_REASON:
        if (!*arg || strlen(arg) > SKIP_REASON_MAX) {
            log_usage(c->cmd, "--reason: say why, in 1 to %d bytes", SKIP_REASON_MAX);
            return -1;
        }
        if (has_control(arg)) {
            log_usage(c->cmd, "--reason: one line of text, without newlines or other control "
                      "characters (it is recorded and printed as it is)");
            return -1;
        }
        r->skip_reason = arg;
        return 0;
    case OPT_ON_ERROR:
        if (strcmp(arg, "abort") != 0 && strcmp(arg, "warn") != 0) {
            log_usage(c->cmd, "--on-error: '%s' is not abort or warn", arg);
            return -1;
        }
        c->on_error = arg;
        return 0;
    case OPT_NAMESPACE:
        if (!namespace_valid(arg)) {
            log_usage(c->cmd, "--namespace: '%s' is not a namespace name (at most 63 lower-case "
                      "letters, digits and '-', starting and ending with a letter or digit)",
                      shown(arg, (char[160]){0}, 160));
            return -1;
        }
        r->k.ledger_namespace = arg;
        return 0;
    case OPT_LEDGER:
        if (!k8s_name_valid(arg) || strlen(arg) + strlen(LEASE_SUFFIX) > 253) {
            log_usage(c->cmd, "--ledger: '%s' is not a ConfigMap name (lower-case letters, "
                      "digits, '-' and '.', at most %zu characters so that its Lease "
                      "<name>" LEASE_SUFFIX " is a name too)", shown(arg, (char[160]){0}, 160),
                      253 - strlen(LEASE_SUFFIX));
            return -1;
        }
        r->k.ledger_name = arg;
        return 0;
    case OPT_LOG_FORMAT:
        if (strcmp(arg, "json") == 0)
            log_set_json(1);
        else if (strcmp(arg, "text") == 0)
            log_set_json(0);
        else {
            log_usage(c->cmd, "--log-format: '%s' is not text or json", arg);
            return -1;
        }
        return 0;
    case OPT_IMAGE: c->image = arg; return 0;
    case OPT_REQUIRE_DIGEST: c->require_digest = 1; return 0;
    case OPT_CHECK: c->check = arg; return 0;
    case OPT_SERVICE_ACCOUNT:
        if (!k8s_name_valid(arg)) {
            log_usage(c->cmd, "--service-account: '%s' is not a ServiceAccount name",
                      shown(arg, (char[160]){0}, 160));
            return -1;
        }
        c->service_account = arg;
        return 0;
    case OPT_OUTPUT:
        if (strcmp(c->cmd, "index") == 0) {
            if (strcmp(arg, "configmap") != 0 && strcmp(arg, "json") != 0) {
                log_usage(c->cmd, "--output: '%s' is not json or configmap", arg);
                return -1;
            }
            c->configmap = strcmp(arg, "configmap") == 0;
            return 0;
        }
        if (strcmp(arg, "json") == 0)
            r->output_json = 1;
        else if (strcmp(arg, "table") != 0) {
            log_usage(c->cmd, "--output: '%s' is not table or json", arg);
            return -1;
        }
        return 0;
    case OPT_TIER:
        if (strcmp(arg, "pre-apply") != 0 && strcmp(arg, "background") != 0) {
            log_usage(c->cmd, "--tier: '%s' is not pre-apply or background", arg);
            return -1;
        }
        r->tier = arg;
        r->tier_given = 1;
        return 0;
    case OPT_TIMEOUT:
        c->timeout_set = 1;
        return duration_arg(c, flag, arg, &r->timeout);
    case OPT_LOCK_TIMEOUT:
        return duration_arg(c, flag, arg, &r->lock_timeout);
    case OPT_GRACE:
        return duration_arg(c, flag, arg, &r->grace);
    case OPT_TICK:
        return duration_arg(c, flag, arg, &c->tick);
    case OPT_RETRY_FOR:
        return duration_arg(c, flag, arg, &r->k.retry_budget);
    case OPT_LEASE_DURATION:
        if (duration_arg(c, flag, arg, &d) != 0)
            return -1;
        r->lease_duration = d < 1 ? 1 : (int)d;
        return 0;
    case OPT_MEMORY: {
        long mb = strtol(arg, &end, 10);
        if (*end || end == arg || mb < 1 || mb > 65536) {
            log_usage(c->cmd, "--memory: '%s' is not a size in MiB (1..65536)", arg);
            return -1;
        }
        r->memory = (size_t)mb << 20;
        return 0;
    }
    case OPT_MAX_ATTEMPTS: {
        long n = strtol(arg, &end, 10);
        if (*end || end == arg || n < 1 || n > 1000) {
            log_usage(c->cmd, "--max-attempts: '%s' is not a number from 1 to 1000", arg);
            return -1;
        }
        r->max_attempts = (int)n;
        return 0;
    }
    case OPT_ENV:
        if (!strchr(arg, '=') || arg[0] == '=') {
            log_usage(c->cmd, "--env: '%s' is not NAME=VALUE", arg);
            return -1;
        }
        c->env[c->nenv++] = (char *)arg;
        return 0;
    }
    return -1;
}

/* An explicit --log-format decides the format of every line, usage errors
 * in the options before it included. */
static void prescan_log_format(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return;
        if (strcmp(argv[i], "--log-format=json") == 0 ||
            (strcmp(argv[i], "--log-format") == 0 && i + 1 < argc &&
             strcmp(argv[i + 1], "json") == 0))
            log_set_json(1);
    }
}

static const char *flag_name(const struct option *lo, int id)
{
    for (; lo->name; lo++)
        if (lo->val == id)
            return lo->name;
    return "?";
}

/* Whether arg is one of this command's own flags ("--dir", "--dir=x"): a
 * flag taken as the value of the one before it ("--only --dir X") would
 * run with --dir as the slug and X left over. */
static int names_a_flag(const struct option *lo, const char *arg)
{
    if (strncmp(arg, "--", 2) != 0)
        return 0;
    size_t n = strcspn(arg + 2, "=");
    for (; lo->name; lo++)
        if (strlen(lo->name) == n && strncmp(lo->name, arg + 2, n) == 0)
            return 1;
    return 0;
}

/* Parses argv against this command's table. Returns 0 with *first_arg set
 * to the first operand, 1 when --help was printed, or -1 after a usage
 * error. shorts: getopt's short options ("o:" for status). An option given
 * twice is refused (the second value would silently win), --env aside. */
static int parse(struct cli *c, int argc, char **argv, const struct option *lo, const char *shorts,
                 const char *help, int *first_arg)
{
    char spec[16];
    /* Options stop at the first operand, except for commands whose operand
     * may sit among them (new). */
    snprintf(spec, sizeof spec, "%s:%s", c->permute ? "" : "+", shorts ? shorts : "");
    opterr = 0;
    optind = 1;
    int o;
    while ((o = getopt_long(argc, argv, spec, lo, NULL)) != -1) {
        if (o == OPT_HELP) {
            fputs(help, stdout);
            if (strcmp(flag_name(lo, OPT_KUBECONFIG), "kubeconfig") == 0) {
                fputc('\n', stdout);
                fputs(cluster_opts_help, stdout);
            }
            return 1;
        }
        if (o == '?' || o == ':') {
            const char *bad = optind > 1 && optind - 1 < argc ? argv[optind - 1] : "?";
            if (o == ':')
                log_usage(c->cmd, "'%s' needs a value", bad);
            else if (optopt >= 256 && strchr(bad, '='))
                log_usage(c->cmd, "--%s takes no value ('%s')%s", flag_name(lo, optopt), bad,
                          optopt == OPT_DRY_RUN ? ": give --dry-run alone, or DRY_RUN=1" : "");
            else if (optopt && optopt < 256)
                log_usage(c->cmd, "unknown flag '-%c'", optopt);
            else
                log_usage(c->cmd, "unknown flag '%s'", bad);
            return -1;
        }
        if (o == 'o')
            o = OPT_OUTPUT;
        const char *name = flag_name(lo, o);
        if (optarg && names_a_flag(lo, optarg)) {
            log_usage(c->cmd, "--%s needs a value, but the next argument is the flag '%s'", name,
                      optarg);
            return -1;
        }
        if (o >= 256 && o - 256 < (int)sizeof c->seen && o != OPT_ENV) {
            if (c->seen[o - 256]) {
                log_usage(c->cmd, "--%s is given twice: give it once", name);
                return -1;
            }
            c->seen[o - 256] = 1;
        }
        if (apply_opt(c, o, name, optarg) != 0)
            return -1;
    }
    *first_arg = optind;
    return 0;
}

/* env DRY_RUN, for the commands that take --dry-run: 1 or true is a dry
 * run; 0, false or empty (or unset) a real one; anything else is refused,
 * never taken for a real run. 0, or -1 after reporting. */
static int env_dry_run(struct cli *c)
{
    const char *v = getenv("DRY_RUN");
    if (!v || !*v || strcmp(v, "0") == 0 || strcmp(v, "false") == 0)
        return 0;
    if (strcmp(v, "1") == 0 || strcmp(v, "true") == 0) {
        c->r.k.dry_run = 1;
        return 0;
    }
    char buf[160];
    log_usage(c->cmd, "DRY_RUN='%s' is neither 1 or true (a dry run) nor 0, false or empty (a "
              "real run): set one of those", shown(v, buf, sizeof buf));
    return -1;
}

/* env NAMESPACE, when no --namespace overrides it: a namespace name (the
 * ledger guard protects it, the runner records into it). 0, or -1 after
 * reporting. */
static int env_namespace(struct cli *c)
{
    char buf[160];
    if (c->seen[OPT_NAMESPACE - 256] || namespace_valid(c->r.k.ledger_namespace))
        return 0;
    log_usage(c->cmd, "NAMESPACE='%s' is not a namespace name (at most 63 lower-case letters, "
              "digits and '-', starting and ending with a letter or digit)",
              shown(c->r.k.ledger_namespace, buf, sizeof buf));
    return -1;
}

/* A FILE operand of lua and exec: there, readable and a file, or usage. */
static int script_file(struct cli *c, const char *file)
{
    struct stat st;
    const char *why = stat(file, &st) != 0       ? strerror(errno)
                      : !S_ISREG(st.st_mode)     ? "not a file"
                      : access(file, R_OK) != 0 ? strerror(errno)
                                                 : NULL;
    if (why) {
        log_usage(c->cmd, "%s: %s", file, why);
        return -1;
    }
    return 0;
}

/* ---- lua FILE ---------------------------------------------------------- */

static const char lua_help[] =
    "Usage: cozy-migrate lua [options] FILE\n"
    "\n"
    "Runs FILE in the migration sandbox (string, table, math, utf8, coroutine,\n"
    "os.time/clock/date, and the stdlib: kube, json, yaml, log, ...), with the\n"
    "kube module connected to the cluster. Exit 0 when the script returns,\n"
    "1 when it fails (error, timeout, memory cap), 2 when FILE is not a readable\n"
    "file, 6 when the cluster config cannot be resolved.\n"
    "\n"
    "Options:\n"
    "  --timeout DURATION  deadline for the script (default 10m)\n"
    "  --memory MIB        memory cap for the Lua state (default " STR(DEFAULT_MEMORY_MB) ")\n"
    "  --dry-run           send every write with dryRun=All (or DRY_RUN=1 or true;\n"
    "                      0, false or empty is a real run, anything else exit 2)\n";

static int cmd_lua(struct cli *c, int argc, char **argv)
{
    static const struct option lo[] = {
        CLUSTER_OPTS, OPT("dry-run", no_argument, OPT_DRY_RUN),
        OPT("timeout", required_argument, OPT_TIMEOUT),
        OPT("memory", required_argument, OPT_MEMORY), END,
    };
    int first, rc = parse(c, argc, argv, lo, NULL, lua_help, &first);
    if (rc)
        return rc > 0 ? EXIT_OK : EXIT_USAGE;
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

static const char exec_help[] =
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
    "  --timeout DURATION  wall-clock deadline (default 10m)\n"
    "  --grace DURATION    TERM -> KILL delay at the deadline (default 10s)\n"
    "  --memory MIB        memory cap of the Lua state (default " STR(DEFAULT_MEMORY_MB) ")\n"
    "  --dry-run           Lua: send every write with dryRun=All\n"
    "  --workdir DIR       shell: working directory\n"
    "  --env NAME=VALUE    shell: extra environment entry (repeatable)\n"
    "  --tick DURATION     count ticks at this interval (reported as ticks)\n"
    "  --quiet             do not stream the output\n"
    "\n"
    "A shell FILE gets KUBECONFIG set to a private kubeconfig of the one\n"
    "context the cluster options resolve to, as under 'run' (exit 6 when\n"
    "options given resolve to none; without any, an unresolvable\n"
    "configuration leaves the environment as it is).\n";

static int count_tick(void *ud)
{
    (*(long *)ud)++;
    return 0;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* A shell script reaches the cluster the options name (--kubeconfig,
 * --context), as under `run`: "KUBECONFIG=<a private kubeconfig of that one
 * context>" in env (kp removes it afterwards). 0 set; 1 left as it is (no
 * option given and nothing resolves: there is no cluster to narrow to, and
 * a script that needs none still runs); -1 after reporting. */
static int exec_kubeconfig(const struct kube_config_opts *ko, struct kube_private *kp, char *env,
                           size_t len)
{
    struct kube_config kc;
    char err[ERRLINE_MAX];
    if (kubeconfig_resolve(ko, &kc, err, sizeof err) != 0) {
        if (!ko->kubeconfig && !ko->context && !ko->local)
            return 1;
        log_fatal("exec: %s", err);
        return -1;
    }
    int w = kubeconfig_private_write(&kc, kp, err, sizeof err);
    kubeconfig_free(&kc);
    if (w != 0) {
        log_fatal("exec: %s", err);
        return -1;
    }
    snprintf(env, len, "KUBECONFIG=%s", kp->path);
    return 0;
}

static int cmd_exec(struct cli *c, int argc, char **argv)
{
    static const struct option lo[] = {
        CLUSTER_OPTS, OPT("dry-run", no_argument, OPT_DRY_RUN),
        OPT("timeout", required_argument, OPT_TIMEOUT),
        OPT("grace", required_argument, OPT_GRACE),
        OPT("memory", required_argument, OPT_MEMORY),
        OPT("workdir", required_argument, OPT_WORKDIR), OPT("env", required_argument, OPT_ENV),
        OPT("tick", required_argument, OPT_TICK), OPT("quiet", no_argument, OPT_QUIET), END,
    };
    int first, rc = parse(c, argc, argv, lo, NULL, exec_help, &first);
    if (rc)
        return rc > 0 ? EXIT_OK : EXIT_USAGE;
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
    if (shell) {
        int k = exec_kubeconfig(&c->r.k.cfg, &kp, kc_env, sizeof kc_env);
        if (k < 0)
            return EXIT_CLUSTER;
        if (k == 0)
            c->env[c->nenv++] = kc_env; /* last: it wins over an --env KUBECONFIG */
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
    };
    struct child_result res;
    child_run(&spec, &res);
    kubeconfig_private_remove(&kp);
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

static const char config_help[] =
    "Usage: cozy-migrate config [options]\n"
    "\n"
    "Prints, as JSON, the cluster and identity the kube module would use: the\n"
    "source file(s), server, context, user, namespace, kind of credentials.\n"
    "No secrets are printed. Exit 6 with a one-line error when the\n"
    "configuration cannot be resolved.\n";

static int cmd_config(struct cli *c, int argc, char **argv)
{
    static const struct option lo[] = {CLUSTER_OPTS, END};
    int first, rc = parse(c, argc, argv, lo, NULL, config_help, &first);
    if (rc)
        return rc > 0 ? EXIT_OK : EXIT_USAGE;
    if (first != argc) {
        log_usage(c->cmd, "unexpected argument '%s'", argv[first]);
        return EXIT_USAGE;
    }
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

/* ---- spec ---------------------------------------------------------------- */

static const char spec_help[] =
    "Usage: cozy-migrate spec [busted options] [PATHS...]\n"
    "\n"
    "Runs busted inside the host, so specs can require the same native\n"
    "modules (kube.core, json, yaml, log) and stdlib the migrations use, and\n"
    "the spec-only `migrate` module (the runner's parsers and planner).\n"
    "Every argument is passed to busted; see 'cozy-migrate spec --help-busted'.\n";

static int cmd_spec(struct cli *c, int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--help") == 0) {
        fputs(spec_help, stdout);
        return EXIT_OK;
    }
    struct host_ctx hc = {.kube = c->r.k};
    lua_State *L = sandbox_new_unrestricted(sandbox_default_stdlib(), &hc);
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
    "  --lease-duration DUR how long the lock lives without renewal (default "
    STR(DEFAULT_LEASE_S) "s); the run\n"
    "                       stops (exit 5) if no renewal is confirmed for most of it\n"
    "  --grace DURATION     TERM-to-KILL delay on timeout (default 10s)\n"
    "  --max-attempts N     background: retries of a failed migration (default "
    STR(DEFAULT_MAX_ATTEMPTS) ")\n"
    "  --ledger NAME        the ledger ConfigMap (default " DEFAULT_LEDGER_NAME ")\n"
    "  --dir DIR            the tree holding migrations/ and legacy-sh/ (default: the\n"
    "                       image's, or the working tree with --local)\n"
    "  --memory MIB         memory cap of a Lua migration (default " STR(DEFAULT_MEMORY_MB) ")\n"
    "  --force              with --only: run a legacy migration whose script stamps a\n"
    "                       `version` older than the ledger's, or one whose requires\n"
    "                       are not recorded ok\n"
    "  --pass-env A,B       variables passed to shell migrations (env PASS_ENV); they get\n"
    "                       NAMESPACE, MIGRATION_SLUG, CURRENT_VERSION, TARGET_VERSION, PATH,\n"
    "                       HOME, locale and proxy settings, and nothing else of the runner's;\n"
    "                       never KUBECONFIG, KUBERNETES_SERVICE_*, the proxies or those four\n"
    "                       (the cluster identity is the runner's)\n"
    "\n"
    "A migration runs only when every slug it requires is recorded ok, legacy or\n"
    "skipped-fresh-install (or ran ok earlier in the run); otherwise it is blocked:\n"
    "not run, nothing recorded, and an on-error=abort one stops the run.\n"
    "\n"
    "Environment: NAMESPACE, ONLY, MIGRATIONS_IMAGE (recorded), DRY_RUN (1 or true;\n"
    "0, false or empty), PASS_ENV, SKIP=slug[,slug] with SKIP_REASON (record them\n"
    "skipped by the operator first). Each flag at most once.\n"
    "Exit codes: 0 ok, 1 a migration failed or was blocked, 2 usage, 3 invalid\n"
    "packaging, 4 retention floor, 5 lock not acquired, 6 cluster unreachable or\n"
    "forbidden, 7 untrustworthy ledger (nothing ran), 11 refused by what the\n"
    "ledger records (SKIP of a slug recorded ok; --only of a legacy slug without\n"
    "--force).\n";

static const char plan_help[] =
    "Usage: cozy-migrate plan [options]\n"
    "\n"
    "Prints what `run` would do with the same options: the migrations it would\n"
    "run in order, and why each other one is skipped. Writes nothing and takes\n"
    "no lock.\n"
    "\n"
    "Options: every option of run, with the same meaning (see 'cozy-migrate run\n"
    "--help'), so a run's command line can be planned as it is: --tier, --only,\n"
    "--force, --dry-run, --max-attempts, --ledger, --dir and the cluster options\n"
    "change the plan; --timeout, --lock-timeout, --lease-duration, --grace,\n"
    "--memory and --pass-env are checked and change nothing in it. Env DRY_RUN,\n"
    "ONLY, SKIP and SKIP_REASON too. Exits as run would refuse (7 for a ledger\n"
    "that cannot be trusted, naming each bad key).\n";

static const char status_help[] =
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

/* env SKIP ("slug[,slug]") and SKIP_REASON, for run and plan: the hook's
 * escape hatch. 0, or an exit code after reporting. */
static int skip_env(struct cli *c)
{
    const char *env = getenv("SKIP");
    if (!env || !*env)
        return 0;
    const char *reason = getenv("SKIP_REASON");
    char buf[160];
    if (!reason || !*reason || strlen(reason) > SKIP_REASON_MAX) {
        log_usage(c->cmd, "SKIP=%s needs SKIP_REASON: say why, in 1 to %d bytes",
                  shown(env, buf, sizeof buf), SKIP_REASON_MAX);
        return EXIT_USAGE;
    }
    if (has_control(reason)) {
        log_usage(c->cmd, "SKIP_REASON: one line of text, without newlines or other control "
                  "characters (it is recorded and printed as it is)");
        return EXIT_USAGE;
    }
    if (strlen(env) >= sizeof c->skip_buf) {
        log_usage(c->cmd, "SKIP is longer than %zu bytes", sizeof c->skip_buf - 1);
        return EXIT_USAGE;
    }
    snprintf(c->skip_buf, sizeof c->skip_buf, "%s", env);
    size_t n = 0;
    for (char *p = c->skip_buf, *next; p; p = next) {
        next = strchr(p, ',');
        if (next)
            *next++ = '\0';
        while (*p == ' ')
            p++;
        for (size_t l = strlen(p); l && p[l - 1] == ' ';)
            p[--l] = '\0';
        if (!slug_valid(p)) {
            log_usage(c->cmd, "SKIP: '%s' is not a valid slug (SKIP is slug[,slug...])", p);
            return EXIT_USAGE;
        }
        int dup = 0;
        for (size_t i = 0; i < n && !dup; i++)
            dup = strcmp(c->skip[i], p) == 0;
        if (dup)
            continue;
        if (n == sizeof c->skip / sizeof c->skip[0]) {
            log_usage(c->cmd, "SKIP names more than %zu slugs", n);
            return EXIT_USAGE;
        }
        c->skip[n++] = p;
    }
    c->r.skip = c->skip;
    c->r.nskip = n;
    c->r.skip_reason = reason;
    return 0;
}

/* What run, plan, status and skip share once parsed. 0 or an exit code. */
static int runner_finish(struct cli *c, int argc, char **argv, int first)
{
    if (first != argc) {
        log_usage(c->cmd, "unexpected argument '%s'", argv[first]);
        return EXIT_USAGE;
    }
    struct runner_opts *o = &c->r;
    char buf[300];
    int only_flag = c->seen[OPT_ONLY - 256];
    if (o->only && !slug_valid(o->only)) {
        log_usage(c->cmd, "%s: '%s' is not a valid slug", only_flag ? "--only" : "ONLY",
                  shown(o->only, buf, sizeof buf));
        return EXIT_USAGE;
    }
    if (o->force && !o->only) {
        log_usage(c->cmd, "--force applies to --only SLUG (or ONLY): alone it changes nothing");
        return EXIT_USAGE;
    }
    if (env_namespace(c) != 0)
        return EXIT_USAGE;
    if (!c->seen[OPT_PASS_ENV - 256] && o->pass_env && pass_env_check(c, "PASS_ENV", o->pass_env))
        return EXIT_USAGE;
    if (o->image && (has_control(o->image) || strlen(o->image) > IMAGE_MAX)) {
        log_usage(c->cmd, "MIGRATIONS_IMAGE='%s' is not an image reference: one line of at most "
                  "%d bytes, no control characters (it is recorded in every record)",
                  shown(o->image, buf, sizeof buf), IMAGE_MAX);
        return EXIT_USAGE;
    }
    if (!o->dir)
        o->dir = o->k.cfg.local ? "." : default_dir();
    static char lease[300];
    snprintf(lease, sizeof lease, "%s" LEASE_SUFFIX, o->k.ledger_name);
    o->k.lease_name = lease;
    if (!c->timeout_set)
        o->timeout = 0; /* each header's own timeout applies */
    return 0;
}

/* run's options; plan takes the same, so a run's command line can be
 * planned as it is (the timing options change nothing in a plan). */
static const struct option run_opts[] = {
    CLUSTER_OPTS, OPT("dry-run", no_argument, OPT_DRY_RUN),
    OPT("timeout", required_argument, OPT_TIMEOUT),
    OPT("memory", required_argument, OPT_MEMORY), OPT("tier", required_argument, OPT_TIER),
    OPT("only", required_argument, OPT_ONLY),
    OPT("lock-timeout", required_argument, OPT_LOCK_TIMEOUT),
    OPT("lease-duration", required_argument, OPT_LEASE_DURATION),
    OPT("grace", required_argument, OPT_GRACE),
    OPT("max-attempts", required_argument, OPT_MAX_ATTEMPTS),
    OPT("force", no_argument, OPT_FORCE), OPT("pass-env", required_argument, OPT_PASS_ENV),
    OPT("ledger", required_argument, OPT_LEDGER), OPT("dir", required_argument, OPT_DIR), END,
};

static int cmd_run(struct cli *c, int argc, char **argv)
{
    int first, rc = parse(c, argc, argv, run_opts, NULL, run_help, &first);
    if (rc)
        return rc > 0 ? EXIT_OK : EXIT_USAGE;
    if (env_dry_run(c) != 0)
        return EXIT_USAGE;
    if ((rc = runner_finish(c, argc, argv, first)) || (rc = skip_env(c)))
        return rc;
    return runner_run(&c->r);
}

static int cmd_plan(struct cli *c, int argc, char **argv)
{
    int first, rc = parse(c, argc, argv, run_opts, NULL, plan_help, &first);
    if (rc)
        return rc > 0 ? EXIT_OK : EXIT_USAGE;
    if (env_dry_run(c) != 0)
        return EXIT_USAGE;
    if ((rc = runner_finish(c, argc, argv, first)) || (rc = skip_env(c)))
        return rc;
    return runner_plan(&c->r);
}

static const char preview_help[] =
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
    "  --timeout, --memory, --ledger, --dir as for run\n";

static int cmd_preview(struct cli *c, int argc, char **argv)
{
    static const struct option lo[] = {
        CLUSTER_OPTS, OPT("tier", required_argument, OPT_TIER), OPT("only", required_argument, OPT_ONLY),
        OPT("output", required_argument, OPT_OUTPUT), OPT("timeout", required_argument, OPT_TIMEOUT),
        OPT("memory", required_argument, OPT_MEMORY), OPT("ledger", required_argument, OPT_LEDGER),
        OPT("dir", required_argument, OPT_DIR), END,
    };
    int first, rc = parse(c, argc, argv, lo, "o:", preview_help, &first);
    if (rc)
        return rc > 0 ? EXIT_OK : EXIT_USAGE;
    return (rc = runner_finish(c, argc, argv, first)) ? rc : preview_run(&c->r);
}

static int cmd_status(struct cli *c, int argc, char **argv)
{
    static const struct option lo[] = {
        CLUSTER_OPTS, OPT("output", required_argument, OPT_OUTPUT),
        OPT("failed", no_argument, OPT_FAILED),
        OPT("ledger", required_argument, OPT_LEDGER), OPT("dir", required_argument, OPT_DIR), END,
    };
    c->permute = 1; /* status SLUG -o json, or status -o json SLUG */
    int first, rc = parse(c, argc, argv, lo, "o:", status_help, &first);
    if (rc)
        return rc > 0 ? EXIT_OK : EXIT_USAGE;
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
    return (rc = runner_finish(c, argc, argv, first)) ? rc : runner_status(&c->r);
}

static const char skip_help[] =
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
    "  --lock-timeout DUR   how long to wait for another runner's lock (default 5m)\n"
    "  --lease-duration DUR how long the lock lives without renewal (default "
    STR(DEFAULT_LEASE_S) "s)\n"
    "  --ledger NAME, --dir DIR as for run\n"
    "\n"
    "Exit codes: 0 recorded (or already skipped with this reason), 2 usage or a\n"
    "slug revoked or absent from the image, 5 lock not acquired, 6 cluster,\n"
    "7 untrustworthy ledger, 11 the slug is recorded ok, legacy or\n"
    "skipped-fresh-install (a migration that ran is never skipped).\n";

static int cmd_skip(struct cli *c, int argc, char **argv)
{
    static const struct option lo[] = {
        CLUSTER_OPTS, OPT("reason", required_argument, OPT_REASON),
        OPT("dry-run", no_argument, OPT_DRY_RUN),
        OPT("lock-timeout", required_argument, OPT_LOCK_TIMEOUT),
        OPT("lease-duration", required_argument, OPT_LEASE_DURATION),
        OPT("ledger", required_argument, OPT_LEDGER), OPT("dir", required_argument, OPT_DIR), END,
    };
    c->permute = 1; /* skip SLUG --reason TEXT */
    int first, rc = parse(c, argc, argv, lo, NULL, skip_help, &first);
    if (rc)
        return rc > 0 ? EXIT_OK : EXIT_USAGE;
    if (first >= argc) {
        log_usage(c->cmd, "expected a SLUG");
        return EXIT_USAGE;
    }
    if (env_dry_run(c) != 0)
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
    return (rc = runner_finish(c, argc, argv, first)) ? rc : runner_skip(&c->r);
}

/* ---- order, lint, new, import-legacy ---------------------------------------- */

#define TOOL_OPTS                                                \
    {"log-format", required_argument, NULL, OPT_LOG_FORMAT},     \
    {"help", no_argument, NULL, OPT_HELP}

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
    "Exit codes: 0 written, 1 writing failed, 2 usage (--out is not a directory\n"
    "of batch files), 3 packaging (cycle, dangling or later-batch requires, bad\n"
    "header, slug or legacy-map), 8 history (shallow clone, missing previous\n"
    "tag, not a git repository), 9 the manifest rewrites a released one,\n"
    "10 git is not installed.\n";

static int cmd_order(struct cli *c, int argc, char **argv)
{
    static const struct option lo[] = {
        TOOL_OPTS, OPT("repo", required_argument, OPT_REPO), OPT("out", required_argument, OPT_OUT),
        OPT("rev", required_argument, OPT_REV), OPT("check-prefix", no_argument, OPT_CHECK_PREFIX),
        END,
    };
    int first, rc = parse(c, argc, argv, lo, NULL, order_help, &first);
    if (rc)
        return rc > 0 ? EXIT_OK : EXIT_USAGE;
    if (first != argc) {
        log_usage(c->cmd, "unexpected argument '%s'", argv[first]);
        return EXIT_USAGE;
    }
    return order_cmd(c->repo ? c->repo : ".", c->rev ? c->rev : "HEAD", c->out, c->check_prefix);
}

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
    "(a slug never reused from tag history as another kind of script; a move\n"
    "between the tiers keeps it) and changed for legacy-sh/lib/ (byte for byte\n"
    "every release tag's); with --against: changed (a shipped script is\n"
    "unchanged against REV and every release tag that carries it, in whichever\n"
    "tier; legacy-sh/lib/ against REV too).\n"
    "\n"
    "Options:\n"
    "  --dir DIR       the tree root (default .)\n"
    "  --against REV   compare shipped scripts with REV and every release tag\n"
    "  --history       check slugs against every release tag's tree\n"
    "\n"
    "Exit codes: 0 clean, 3 problems found, 8 git cannot answer (not a\n"
    "repository, shallow clone), 10 shellcheck, luacheck or git missing.\n";

static int cmd_lint(struct cli *c, int argc, char **argv)
{
    static const struct option lo[] = {
        TOOL_OPTS, OPT("dir", required_argument, OPT_DIR),
        OPT("against", required_argument, OPT_AGAINST), OPT("history", no_argument, OPT_HISTORY),
        END,
    };
    int first, rc = parse(c, argc, argv, lo, NULL, lint_help, &first);
    if (rc)
        return rc > 0 ? EXIT_OK : EXIT_USAGE;
    if (first != argc) {
        log_usage(c->cmd, "unexpected argument '%s'", argv[first]);
        return EXIT_USAGE;
    }
    struct lint_opts lo2 = {.dir = c->r.dir ? c->r.dir : ".", .against = c->against,
                            .history = c->history};
    return lint_run(&lo2);
}

static const char new_help[] =
    "Usage: cozy-migrate new SLUG [--tier pre-apply|background] [--on-error abort|warn]\n"
    "                        [--dir DIR]\n"
    "\n"
    "Writes migrations/<tier>/SLUG.lua with its header and\n"
    "spec/migrations/SLUG_spec.lua, a spec that runs it against the cluster in\n"
    "KUBECONFIG twice and asserts the second run changed no object's\n"
    "resourceVersion. The pair passes `lint` and `spec` as written, and an empty\n"
    "migrations/revoked is created when the tree has none. Refuses an invalid\n"
    "slug or a --dir that is not a directory (2), and a slug the tree already\n"
    "has or a release tag carried (9: a slug is never reused).\n"
    "\n"
    "Options:\n"
    "  --tier TIER       pre-apply (default) or background\n"
    "  --on-error MODE   abort (default) or warn\n"
    "  --dir DIR         the tree root (default .)\n";

static int cmd_new(struct cli *c, int argc, char **argv)
{
    static const struct option lo[] = {
        TOOL_OPTS, OPT("tier", required_argument, OPT_TIER),
        OPT("on-error", required_argument, OPT_ON_ERROR), OPT("dir", required_argument, OPT_DIR),
        END,
    };
    c->permute = 1; /* the slug may come before, among or after the options */
    int first, rc = parse(c, argc, argv, lo, NULL, new_help, &first);
    if (rc)
        return rc > 0 ? EXIT_OK : EXIT_USAGE;
    const char *slug = first < argc ? argv[first++] : NULL;
    if (first != argc) {
        log_usage(c->cmd, "unexpected argument '%s'", argv[first]);
        return EXIT_USAGE;
    }
    if (!slug) {
        log_usage(c->cmd, "expected a SLUG");
        return EXIT_USAGE;
    }
    struct scaffold_opts so = {.dir = c->r.dir ? c->r.dir : ".", .slug = slug, .tier = c->r.tier,
                               .on_error = c->on_error ? c->on_error : "abort"};
    return scaffold_new(&so);
}

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

static int cmd_import_legacy(struct cli *c, int argc, char **argv)
{
    static const struct option lo[] = {
        TOOL_OPTS, OPT("from", required_argument, OPT_FROM),
        OPT("names", required_argument, OPT_NAMES), OPT("dir", required_argument, OPT_DIR), END,
    };
    int first, rc = parse(c, argc, argv, lo, NULL, import_help, &first);
    if (rc)
        return rc > 0 ? EXIT_OK : EXIT_USAGE;
    if (first != argc) {
        log_usage(c->cmd, "unexpected argument '%s'", argv[first]);
        return EXIT_USAGE;
    }
    if (!c->from || !c->names) {
        log_usage(c->cmd, "--from DIR and --names FILE are required");
        return EXIT_USAGE;
    }
    struct import_opts io = {.from = c->from, .names = c->names, .dest = c->r.dir ? c->r.dir : "."};
    return import_legacy(&io);
}

static const char index_help[] =
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
    "  --namespace NS     the ConfigMap's namespace (default $NAMESPACE or " DEFAULT_NAMESPACE ")\n"
    "\n"
    "Exit codes: 0 written (or FILE agrees), 2 usage (a bad --image, a tag with\n"
    "--require-digest), 3 the tree or FILE cannot be read, 9 FILE disagrees with\n"
    "the tree (each difference named).\n";

static const char *default_dir(void);

static int cmd_index(struct cli *c, int argc, char **argv)
{
    static const struct option lo[] = {
        TOOL_OPTS, OPT("dir", required_argument, OPT_DIR),
        OPT("image", required_argument, OPT_IMAGE),
        OPT("require-digest", no_argument, OPT_REQUIRE_DIGEST),
        OPT("check", required_argument, OPT_CHECK),
        OPT("output", required_argument, OPT_OUTPUT),
        OPT("namespace", required_argument, OPT_NAMESPACE), END,
    };
    int first, rc = parse(c, argc, argv, lo, "o:", index_help, &first);
    if (rc)
        return rc > 0 ? EXIT_OK : EXIT_USAGE;
    if (first != argc) {
        log_usage(c->cmd, "unexpected argument '%s'", argv[first]);
        return EXIT_USAGE;
    }
    if (env_namespace(c) != 0)
        return EXIT_USAGE;
    if (c->check && c->configmap) {
        log_usage(c->cmd, "--check compares; -o configmap writes: give one");
        return EXIT_USAGE;
    }
    if (c->require_digest && !c->image && !c->check) {
        log_usage(c->cmd, "--require-digest needs --image REF (the digest the release pins)");
        return EXIT_USAGE;
    }
    struct index_opts io = {.dir = c->r.dir ? c->r.dir : default_dir(), .image = c->image,
                            .require_digest = c->require_digest, .check = c->check,
                            .configmap = c->configmap, .ns = c->r.k.ledger_namespace};
    return index_cmd(&io);
}

static const char dispatch_help[] =
    "Usage: cozy-migrate dispatch [options]\n"
    "\n"
    "One reconcile of the background tier, run by the chart's CronJob\n"
    "(concurrencyPolicy Forbid), by hand, or by another orchestrator. Reads the\n"
    "index (ConfigMap " INDEX_NAME "), the ledger, the runner lock and\n"
    "the Jobs it made, and: does nothing while one of its Jobs runs or the upgrade\n"
    "holds the lock; otherwise creates one Job for the first pending background\n"
    "slug in manifest order (ONLY=<slug>, the index's image, the chart's Job\n"
    "template). Pending: no record, or failed with attempts under the bound\n"
    "(index key " INDEX_KEY_ATTEMPTS ", default " STR(DEFAULT_MAX_ATTEMPTS) ") once the retry backoff passed: "
    INDEX_KEY_BACKOFF " (default\n"
    "10m) after the first failed attempt, doubling with each, at most\n"
    INDEX_KEY_BACKOFF_MAX " (default 2h). Never writes the ledger: the runner in the Job\n"
    "records. An Event per Job it creates and per slug past its attempts; one\n"
    "line saying what it did and why.\n"
    "\n"
    "Options:\n"
    "  --dry-run                say what it would create, create nothing\n"
    "  --service-account NAME   the Jobs' identity when the index has no Job template\n"
    "                           (default " DEFAULT_JOB_SERVICE_ACCOUNT ")\n"
    "  --ledger NAME            the ledger ConfigMap (default " DEFAULT_LEDGER_NAME ")\n"
    "\n"
    "Exit codes: 0 a Job created or nothing to do, 2 usage, 3 no index or one that\n"
    "cannot be read, 6 cluster unreachable or forbidden, 7 the ledger cannot be\n"
    "trusted (nothing dispatched).\n";

static int runner_finish(struct cli *c, int argc, char **argv, int first);

static int cmd_dispatch(struct cli *c, int argc, char **argv)
{
    static const struct option lo[] = {
        CLUSTER_OPTS, OPT("dry-run", no_argument, OPT_DRY_RUN),
        OPT("service-account", required_argument, OPT_SERVICE_ACCOUNT),
        OPT("ledger", required_argument, OPT_LEDGER), END,
    };
    int first, rc = parse(c, argc, argv, lo, NULL, dispatch_help, &first);
    if (rc)
        return rc > 0 ? EXIT_OK : EXIT_USAGE;
    if (env_dry_run(c) != 0)
        return EXIT_USAGE;
    c->r.only = NULL; /* env ONLY is a Job's, not the dispatcher's */
    if ((rc = runner_finish(c, argc, argv, first)) != 0)
        return rc;
    struct dispatch_opts d = {.service_account = c->service_account};
    return dispatch_run(&c->r, &d);
}

/* ---- dispatch ------------------------------------------------------------ */

/* stops: the command holds the runner lock or a migration's child, so TERM,
 * INT and HUP stop it the same way, PID 1 or not (stop.h). */
static const struct {
    const char *name;
    int (*fn)(struct cli *, int, char **);
    int stops;
} commands[] = {
    {"run", cmd_run, 1},     {"plan", cmd_plan, 0},     {"status", cmd_status, 0},
    {"skip", cmd_skip, 1},   {"lua", cmd_lua, 1},       {"preview", cmd_preview, 1},
    {"exec", cmd_exec, 1},   {"config", cmd_config, 0}, {"spec", cmd_spec, 0},
    {"order", cmd_order, 0}, {"lint", cmd_lint, 0},     {"new", cmd_new, 0},
    {"import-legacy", cmd_import_legacy, 0}, {"index", cmd_index, 0},
    {"dispatch", cmd_dispatch, 0},
};

int main(int argc, char **argv)
{
    prescan_log_format(argc, argv);
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        fputs(main_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name) == 0) {
            /* --env values are kept by pointer; there are never more than argc. */
            char **env = calloc((size_t)argc + 1, sizeof *env);
            if (!env) {
                log_fatal("out of memory");
                return EXIT_FAILED;
            }
            if (commands[i].stops && stop_install() != 0)
                log_warn("cannot install the stop signal handlers: TERM, INT and HUP end "
                         "this process without releasing what it holds");
            struct cli c;
            cli_init(&c, commands[i].name, env);
            int rc = commands[i].fn(&c, argc - 1, argv + 1);
            free(env);
            return rc;
        }
    }
    if (argv[1][0] == '-')
        log_usage(NULL, "unknown flag '%s' before the command", argv[1]);
    else
        log_usage(NULL, "unknown command '%s'", argv[1]);
    return EXIT_USAGE;
}

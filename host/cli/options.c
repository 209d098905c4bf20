/* options.c: argv into options. Owns parsing argv against a command's
 * option table (each option at most once, a flag never taken as another's
 * value), the one handler of every option with its validation, each default
 * from defaults.h, the environment the hook sets (NAMESPACE, ONLY, DRY_RUN,
 * SKIP, SKIP_REASON, PASS_ENV, MIGRATIONS_IMAGE, MIGRATIONS_INDEX), and --help with those
 * defaults filled in, so no help text repeats one as a literal. */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/defaults.h"
#include "base/exitcodes.h"
#include "base/log.h"
#include "base/paths.h"
#include "base/util.h"
#include "formats/manifest.h"
#include "run/shellenv.h"

static const char cli_cluster_opts_help[] =
    "Cluster options:\n"
    "  --kubeconfig FILE   use exactly this kubeconfig file\n"
    "  --context NAME      use this kubeconfig context\n"
    "  --local             use the kubeconfig's context, never in-cluster credentials\n"
    "  --namespace NS      platform namespace (default $NAMESPACE or {NAMESPACE})\n"
    "  --log-format FMT    text (default) or json: every line printed is a JSON object\n"
    "  --retry-for DUR     how long a request is retried through throttling, 5xx and\n"
    "                      broken connections (default {RETRY_FOR}: an apiserver restart)\n"
    "  --concurrency N     writes fleet.each keeps in flight at once, 1 to {CONCURRENCY_MAX}\n"
    "                      (default {CONCURRENCY}; 1: one object at a time)\n";

/* After the help of a command that never talks to the cluster. */
static const char cli_tool_opts_help[] =
    "Common options:\n"
    "  --log-format FMT    text (default) or json: every line printed is a JSON object\n";

/* A default as --help says it: seconds below two minutes ("90s"), else as
 * a duration is written ("5m", "1h30m"). */
static void help_duration(double s, char *buf, size_t len)
{
    if (s < 120 && s == (double)(long)s)
        snprintf(buf, len, "%lds", (long)s);
    else
        format_duration(s, buf, len);
}

void cli_help_print(const char *text)
{
    cli_help_write(text, stdout);
}

void cli_help_write(const char *text, FILE *f)
{
    char buf[64];
    for (const char *p = text; *p;) {
        const char *open = strchr(p, '{');
        const char *close = open ? strchr(open, '}') : NULL;
        if (!close) {
            fputs(p, f);
            break;
        }
        fwrite(p, 1, (size_t)(open - p), f);
        size_t n = (size_t)(close - open - 1);
#define IS(name) (n == strlen(name) && strncmp(open + 1, name, n) == 0)
        if (IS("TIMEOUT"))
            help_duration(DEFAULT_TIMEOUT_S, buf, sizeof buf);
        else if (IS("GRACE"))
            help_duration(DEFAULT_GRACE_S, buf, sizeof buf);
        else if (IS("LOCK_WAIT"))
            help_duration(DEFAULT_LOCK_WAIT_S, buf, sizeof buf);
        else if (IS("LEASE"))
            help_duration(DEFAULT_LEASE_S, buf, sizeof buf);
        else if (IS("RETRY_FOR"))
            help_duration(DEFAULT_RETRY_BUDGET_S, buf, sizeof buf);
        else if (IS("MEMORY"))
            snprintf(buf, sizeof buf, "%d", DEFAULT_MEMORY_MB);
        else if (IS("CONCURRENCY"))
            snprintf(buf, sizeof buf, "%d", DEFAULT_CONCURRENCY);
        else if (IS("CONCURRENCY_MAX"))
            snprintf(buf, sizeof buf, "%d", runner_concurrency_max);
        else if (IS("MAX_ATTEMPTS"))
            snprintf(buf, sizeof buf, "%d", DEFAULT_MAX_ATTEMPTS);
        else if (IS("BACKOFF"))
            help_duration(DEFAULT_RETRY_BACKOFF_S, buf, sizeof buf);
        else if (IS("BACKOFF_MAX"))
            help_duration(DEFAULT_RETRY_BACKOFF_MAX_S, buf, sizeof buf);
        else if (IS("SKIP_REASON_MAX"))
            snprintf(buf, sizeof buf, "%d", SKIP_REASON_MAX);
        else if (IS("NAMESPACE"))
            snprintf(buf, sizeof buf, "%s", DEFAULT_NAMESPACE);
        else if (IS("LEDGER"))
            snprintf(buf, sizeof buf, "%s", DEFAULT_LEDGER_NAME);
        else
            snprintf(buf, sizeof buf, "%.*s", (int)(n + 2), open); /* not a default: as it is */
#undef IS
        fputs(buf, f);
        p = close + 1;
    }
}

void cli_init(struct cli *c, const struct command *cmd, char **env)
{
    memset(c, 0, sizeof *c);
    c->command = cmd;
    c->cmd = cmd->name;
    c->env = env;
    runner_opts_defaults(&c->r);
    const char *ns = getenv("NAMESPACE");
    if (ns && *ns)
        c->r.k.ledger_namespace = ns;
    c->r.image = getenv("MIGRATIONS_IMAGE");
    c->r.index_json = getenv("MIGRATIONS_INDEX");
    c->r.pass_env = getenv("PASS_ENV");
    const char *only = getenv("ONLY");
    c->r.only = only && *only ? only : NULL;
}

/* A value as it can sit in a one-line message: control bytes escaped,
 * cut to fit. */
const char *cli_shown(const char *v, char *buf, size_t cap)
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
                      cli_shown(list, buf, sizeof buf));
            return -1;
        }
        for (const char *const *r = shell_env_reserved; *r; r++)
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

/* ---- every option, each with its one handler ----
 * A handler reads and checks its option's value into the struct cli: 0,
 * or -1 after reporting a bad value. Each option is defined once here, so
 * every command taking it gets the same rule and message. */

#define OPTION(var, name, arg, fn) const struct cli_option var = {name, arg, 0, 0, fn}
/* An option that only sets a field to 1. */
#define SWITCH(var, name, field)                                              \
    static int set_##var(struct cli *c, const char *flag, const char *arg)    \
    {                                                                         \
        (void)flag, (void)arg;                                                \
        c->field = 1;                                                         \
        return 0;                                                             \
    }                                                                         \
    OPTION(var, name, no_argument, set_##var)
/* An option whose value is kept as it is. */
#define VALUE(var, name, field)                                               \
    static int set_##var(struct cli *c, const char *flag, const char *arg)    \
    {                                                                         \
        (void)flag;                                                           \
        c->field = arg;                                                       \
        return 0;                                                             \
    }                                                                         \
    OPTION(var, name, required_argument, set_##var)
/* A duration (90s, 5m, 1h30m) above zero. */
#define DURATION(var, name, field)                                            \
    static int set_##var(struct cli *c, const char *flag, const char *arg)    \
    {                                                                         \
        return duration_arg(c, flag, arg, &c->field);                         \
    }                                                                         \
    OPTION(var, name, required_argument, set_##var)

const struct cli_option cli_opt_help = {"help", no_argument, 0, 0, NULL};

SWITCH(cli_opt_local, "local", r.k.cfg.local);
SWITCH(cli_opt_create_namespace, "create-namespace", r.create_namespace);
SWITCH(cli_opt_dry_run, "dry-run", r.k.dry_run);
SWITCH(cli_opt_stdlib_internals, "stdlib-internals", r.k.stdlib_internals);
SWITCH(cli_opt_quiet, "quiet", quiet);
SWITCH(cli_opt_check_prefix, "check-prefix", check_prefix);
SWITCH(cli_opt_history, "history", history);
SWITCH(cli_opt_force, "force", r.force);
SWITCH(cli_opt_failed, "failed", r.failed_only);
SWITCH(cli_opt_require_digest, "require-digest", require_digest);

VALUE(cli_opt_only, "only", r.only);
VALUE(cli_opt_dir, "dir", r.dir);
VALUE(cli_opt_workdir, "workdir", workdir);
VALUE(cli_opt_repo, "repo", repo);
VALUE(cli_opt_out, "out", out);
VALUE(cli_opt_rev, "rev", rev);
VALUE(cli_opt_against, "against", against);
VALUE(cli_opt_from, "from", from);
VALUE(cli_opt_names, "names", names);
VALUE(cli_opt_image_inventory, "image-inventory", image_inventory);
VALUE(cli_opt_image, "image", image);
VALUE(cli_opt_check, "check", check);
VALUE(cli_opt_check_chart, "check-chart", check_chart);

DURATION(cli_opt_lock_timeout, "lock-timeout", r.lock_timeout);
DURATION(cli_opt_grace, "grace", r.grace);
DURATION(cli_opt_tick, "tick", tick);
DURATION(cli_opt_retry_for, "retry-for", r.k.retry_budget);

/* An empty --kubeconfig or --context would fall back to KUBECONFIG or
 * current-context: another cluster than the one asked for. */
static int set_kubeconfig(struct cli *c, const char *flag, const char *arg)
{
    if (!*arg) {
        log_usage(c->cmd, "--%s: an empty value names no file", flag);
        return -1;
    }
    c->r.k.cfg.kubeconfig = arg;
    return 0;
}
OPTION(cli_opt_kubeconfig, "kubeconfig", required_argument, set_kubeconfig);

static int set_context(struct cli *c, const char *flag, const char *arg)
{
    if (!*arg) {
        log_usage(c->cmd, "--%s: an empty value names no context", flag);
        return -1;
    }
    c->r.k.cfg.context = arg;
    return 0;
}
OPTION(cli_opt_context, "context", required_argument, set_context);

/* a batch's release (as order names batches), latest or none */
static int set_as_installed_at(struct cli *c, const char *flag, const char *arg)
{
    if (!*arg || strlen(arg) > 100 || has_control(arg) || strchr(arg, ' ')) {
        log_usage(c->cmd, "--as-installed-at: '%s' is not a release (v1.2.0, legacy, a "
                  "batch name such as 00002-v1.2.0, latest or none)",
                  cli_shown(arg, (char[160]){0}, 160));
        return -1;
    }
    c->r.installed_at = arg;
    return 0;
}
OPTION(cli_opt_as_installed_at, "as-installed-at", required_argument, set_as_installed_at);

static int set_pass_env(struct cli *c, const char *flag, const char *arg)
{
    if (pass_env_check(c, "--pass-env", arg) != 0)
        return -1;
    c->r.pass_env = arg;
    return 0;
}
OPTION(cli_opt_pass_env, "pass-env", required_argument, set_pass_env);

static int set_reason(struct cli *c, const char *flag, const char *arg)
{
    if (!*arg || strlen(arg) > SKIP_REASON_MAX) {
        log_usage(c->cmd, "--reason: say why, in 1 to %d bytes", SKIP_REASON_MAX);
        return -1;
    }
    if (has_control(arg)) {
        log_usage(c->cmd, "--reason: one line of text, without newlines or other control "
                  "characters (it is recorded and printed as it is)");
        return -1;
    }
    c->r.skip_reason = arg;
    return 0;
}
OPTION(cli_opt_reason, "reason", required_argument, set_reason);

static int set_on_error(struct cli *c, const char *flag, const char *arg)
{
    if (strcmp(arg, "abort") != 0 && strcmp(arg, "warn") != 0) {
        log_usage(c->cmd, "--on-error: '%s' is not abort or warn", arg);
        return -1;
    }
    c->on_error = arg;
    return 0;
}
OPTION(cli_opt_on_error, "on-error", required_argument, set_on_error);

static int set_namespace(struct cli *c, const char *flag, const char *arg)
{
    if (!namespace_valid(arg)) {
        log_usage(c->cmd, "--namespace: '%s' is not a namespace name (at most 63 lower-case "
                  "letters, digits and '-', starting and ending with a letter or digit)",
                  cli_shown(arg, (char[160]){0}, 160));
        return -1;
    }
    c->r.k.ledger_namespace = arg;
    return 0;
}
OPTION(cli_opt_namespace, "namespace", required_argument, set_namespace);

static int set_ledger(struct cli *c, const char *flag, const char *arg)
{
    if (!k8s_name_valid(arg) || strlen(arg) + strlen(LEASE_SUFFIX) > 253) {
        log_usage(c->cmd, "--ledger: '%s' is not a ConfigMap name (lower-case letters, "
                  "digits, '-' and '.', at most %zu characters so that its Lease "
                  "<name>" LEASE_SUFFIX " is a name too)", cli_shown(arg, (char[160]){0}, 160),
                  253 - strlen(LEASE_SUFFIX));
        return -1;
    }
    c->r.k.ledger_name = arg;
    return 0;
}
OPTION(cli_opt_ledger, "ledger", required_argument, set_ledger);

static int set_log_format(struct cli *c, const char *flag, const char *arg)
{
    if (strcmp(arg, "json") == 0)
        log_set_json(1);
    else if (strcmp(arg, "text") == 0)
        log_set_json(0);
    else {
        log_usage(c->cmd, "--log-format: '%s' is not text or json", arg);
        return -1;
    }
    return 0;
}
OPTION(cli_opt_log_format, "log-format", required_argument, set_log_format);

static int set_retry_backoff(struct cli *c, const char *flag, const char *arg)
{
    double *at = strcmp(flag, "retry-backoff") == 0 ? &c->retry_backoff : &c->retry_backoff_max;
    if (parse_duration(arg, at) != 0 || *at <= 0) {
        log_usage(c->cmd, "--%s: '%s' is not a duration like 10m", flag, arg);
        return -1;
    }
    return 0;
}
OPTION(cli_opt_retry_backoff, "retry-backoff", required_argument, set_retry_backoff);
OPTION(cli_opt_retry_backoff_max, "retry-backoff-max", required_argument, set_retry_backoff);

static int set_service_account(struct cli *c, const char *flag, const char *arg)
{
    if (!k8s_name_valid(arg)) {
        log_usage(c->cmd, "--service-account: '%s' is not a ServiceAccount name",
                  cli_shown(arg, (char[160]){0}, 160));
        return -1;
    }
    c->service_account = arg;
    return 0;
}
OPTION(cli_opt_service_account, "service-account", required_argument, set_service_account);

/* each command names its plain format: status a table, preview text */
static int set_output(struct cli *c, const char *flag, const char *arg)
{
    const char *plain = c->command->plain ? c->command->plain : "text";
    if (strcmp(arg, "json") == 0)
        c->r.output_json = 1;
    else if (strcmp(arg, plain) != 0) {
        log_usage(c->cmd, "--output: '%s' is not %s or json", arg, plain);
        return -1;
    }
    return 0;
}
const struct cli_option cli_opt_output = {"output", required_argument, 'o', 0, set_output};

static int set_tier(struct cli *c, const char *flag, const char *arg)
{
    if (strcmp(arg, "pre-apply") != 0 && strcmp(arg, "background") != 0) {
        log_usage(c->cmd, "--tier: '%s' is not pre-apply or background", arg);
        return -1;
    }
    c->r.tier = arg;
    c->r.tier_given = 1;
    return 0;
}
OPTION(cli_opt_tier, "tier", required_argument, set_tier);

static int set_timeout(struct cli *c, const char *flag, const char *arg)
{
    c->timeout_set = 1;
    return duration_arg(c, flag, arg, &c->r.timeout);
}
OPTION(cli_opt_timeout, "timeout", required_argument, set_timeout);

static int set_lease_duration(struct cli *c, const char *flag, const char *arg)
{
    double d;
    if (duration_arg(c, flag, arg, &d) != 0)
        return -1;
    c->r.lease_duration = d < 1 ? 1 : (int)d;
    return 0;
}
OPTION(cli_opt_lease_duration, "lease-duration", required_argument, set_lease_duration);

/* Numbers are read exactly (parse_decimal: digits only, no sign, space or
 * leading zero): strtol would take ' 8' or '+8' for 8. */
static int set_memory(struct cli *c, const char *flag, const char *arg)
{
    long mb;
    if (parse_decimal(arg, 65536, &mb) != 0 || mb < 1) {
        log_usage(c->cmd, "--memory: '%s' is not a size in MiB (1..65536)", arg);
        return -1;
    }
    c->r.memory = (size_t)mb << 20;
    return 0;
}
OPTION(cli_opt_memory, "memory", required_argument, set_memory);

static int set_concurrency(struct cli *c, const char *flag, const char *arg)
{
    long n;
    if (parse_decimal(arg, runner_concurrency_max, &n) != 0 || n < 1) {
        log_usage(c->cmd, "--concurrency: '%s' is not a number from 1 to %d", arg,
                  runner_concurrency_max);
        return -1;
    }
    c->r.k.concurrency = (int)n;
    return 0;
}
OPTION(cli_opt_concurrency, "concurrency", required_argument, set_concurrency);

static int set_max_attempts(struct cli *c, const char *flag, const char *arg)
{
    long n;
    if (parse_decimal(arg, 1000, &n) != 0 || n < 1) {
        log_usage(c->cmd, "--max-attempts: '%s' is not a number from 1 to 1000", arg);
        return -1;
    }
    c->r.max_attempts = (int)n;
    return 0;
}
OPTION(cli_opt_max_attempts, "max-attempts", required_argument, set_max_attempts);

/* --env NAME=VALUE, any number of times: kept by pointer (main.c sized
 * c->env for argc). */
static int set_env(struct cli *c, const char *flag, const char *arg)
{
    if (!strchr(arg, '=') || arg[0] == '=') {
        log_usage(c->cmd, "--env: '%s' is not NAME=VALUE", arg);
        return -1;
    }
    c->env[c->nenv++] = (char *)arg;
    return 0;
}
const struct cli_option cli_opt_env = {"env", required_argument, 0, 1, set_env};

/* --dry-run-var SCRIPT=VAR, any number of times (import.c checks both sides). */
static int set_dry_run_var(struct cli *c, const char *flag, const char *arg)
{
    if (!strchr(arg, '=') || arg[0] == '=') {
        log_usage(c->cmd, "--%s: '%s' is not SCRIPT=VAR (a slug or old number, a variable)",
                  flag, arg);
        return -1;
    }
    if (c->ndry_run_vars == sizeof c->dry_run_vars / sizeof c->dry_run_vars[0]) {
        log_usage(c->cmd, "--%s: given more than %zu times", flag, c->ndry_run_vars);
        return -1;
    }
    c->dry_run_vars[c->ndry_run_vars++] = arg;
    return 0;
}
const struct cli_option cli_opt_dry_run_var = {"dry-run-var", required_argument, 0, 1,
                                               set_dry_run_var};

void cli_prescan_log_format(int argc, char **argv)
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

/* Whether arg is one of this command's own flags ("--dir", "--dir=x"): a
 * flag taken as the value of the one before it ("--only --dir X") would
 * run with --dir as the slug and X left over. */
static int names_a_flag(const struct cli_option *const *opts, const char *arg)
{
    if (strncmp(arg, "--", 2) != 0)
        return 0;
    size_t n = strcspn(arg + 2, "=");
    for (; *opts; opts++)
        if (strlen((*opts)->name) == n && strncmp((*opts)->name, arg + 2, n) == 0)
            return 1;
    return 0;
}

int cli_given(const struct cli *c, const struct cli_option *opt)
{
    for (size_t i = 0; i < c->ngiven; i++)
        if (c->given[i] == opt)
            return 1;
    return 0;
}

/* The command's --help, then the cluster options' when it takes them. */
static void print_help(const struct command *cmd)
{
    if (cmd->help_fn)
        cmd->help_fn();
    else
        cli_help_print(cmd->help);
    const char *common = cli_common_help(cmd);
    if (common) {
        fputc('\n', stdout);
        cli_help_print(common);
    }
}

const char *cli_common_help(const struct command *cmd)
{
    const char *common = NULL;
    for (const struct cli_option *const *o = cmd->options; o && *o; o++)
        if (*o == &cli_opt_kubeconfig)
            return cli_cluster_opts_help;
        else if (*o == &cli_opt_log_format)
            common = cli_tool_opts_help;
    return common;
}

/* getopt_long's view of a command's table: option i answers 256 + i, and
 * a one-letter form answers itself. */
#define CLI_OPTIONS_MAX 64
struct getopt_view {
    struct option lo[CLI_OPTIONS_MAX + 1];
    char shorts[16];
    size_t n;
};

static int getopt_view(const struct command *cmd, struct getopt_view *v)
{
    size_t at = 0;
    memset(v, 0, sizeof *v);
    /* Options stop at the first operand, except for commands whose operand
     * may sit among them (new, status, skip). */
    v->shorts[at++] = (cmd->flags & CMD_PERMUTE) ? ':' : '+';
    if (!(cmd->flags & CMD_PERMUTE))
        v->shorts[at++] = ':';
    for (const struct cli_option *const *o = cmd->options; *o; o++, v->n++) {
        if (v->n == CLI_OPTIONS_MAX)
            return -1;
        v->lo[v->n] = (struct option){(*o)->name, (*o)->has_arg, NULL, 256 + (int)v->n};
        if ((*o)->short_name && at + 3 < sizeof v->shorts) {
            v->shorts[at++] = (*o)->short_name;
            if ((*o)->has_arg == required_argument)
                v->shorts[at++] = ':';
        }
    }
    return 0;
}

/* The table's entry getopt_long answered with (a long option's 256 + i, or
 * a one-letter form), or NULL. */
static const struct cli_option *answered(const struct command *cmd, const struct getopt_view *v,
                                         int o)
{
    if (o >= 256 && (size_t)(o - 256) < v->n)
        return cmd->options[o - 256];
    for (const struct cli_option *const *p = cmd->options; *p && o > 0 && o < 256; p++)
        if ((*p)->short_name == o)
            return *p;
    return NULL;
}

/* A usage error getopt_long found: a value missing, given to a switch, or a
 * flag the command does not take. */
static void report_bad_flag(struct cli *c, const struct getopt_view *v, int o, int argc,
                            char **argv)
{
    const char *bad = optind > 1 && optind - 1 < argc ? argv[optind - 1] : "?";
    const struct cli_option *opt = answered(c->command, v, optopt);
    if (o == ':')
        log_usage(c->cmd, "'%s' needs a value", bad);
    else if (optopt >= 256 && opt && strchr(bad, '='))
        log_usage(c->cmd, "--%s takes no value ('%s')%s", opt->name, bad,
                  opt == &cli_opt_dry_run ? ": give --dry-run alone, or DRY_RUN=1" : "");
    else if (optopt && optopt < 256)
        log_usage(c->cmd, "unknown flag '-%c'", optopt);
    else
        log_usage(c->cmd, "unknown flag '%s'", bad);
}

int cli_parse(struct cli *c, int argc, char **argv, int *first_arg)
{
    const struct command *cmd = c->command;
    struct getopt_view v;
    if (getopt_view(cmd, &v) != 0) {
        log_fatal("%s: more than %d options in its table", c->cmd, CLI_OPTIONS_MAX);
        return -1;
    }
    opterr = 0;
    optind = 1;
    int o;
    while ((o = getopt_long(argc, argv, v.shorts, v.lo, NULL)) != -1) {
        if (o == '?' || o == ':') {
            report_bad_flag(c, &v, o, argc, argv);
            return -1;
        }
        const struct cli_option *opt = answered(cmd, &v, o);
        if (!opt)
            return -1;
        if (!opt->apply) {
            print_help(cmd);
            return 1;
        }
        if (optarg && names_a_flag(cmd->options, optarg)) {
            log_usage(c->cmd, "--%s needs a value, but the next argument is the flag '%s'",
                      opt->name, optarg);
            return -1;
        }
        if (!opt->repeat) {
            if (cli_given(c, opt)) {
                log_usage(c->cmd, "--%s is given twice: give it once", opt->name);
                return -1;
            }
            if (c->ngiven < sizeof c->given / sizeof c->given[0])
                c->given[c->ngiven++] = opt;
        }
        if (opt->apply(c, opt->name, optarg) != 0)
            return -1;
    }
    *first_arg = optind;
    return 0;
}

int cli_no_operands(struct cli *c, int argc, char **argv, int first)
{
    if (first == argc)
        return 0;
    log_usage(c->cmd, "unexpected argument '%s'", argv[first]);
    return EXIT_USAGE;
}

/* env DRY_RUN, for the commands that take --dry-run: 1 or true is a dry
 * run; 0, false or empty (or unset) a real one; anything else is refused,
 * never taken for a real run. 0, or -1 after reporting. */
int cli_env_dry_run(struct cli *c)
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
              "real run): set one of those", cli_shown(v, buf, sizeof buf));
    return -1;
}

/* env NAMESPACE, when no --namespace overrides it: a namespace name (the
 * ledger guard protects it, the runner records into it). 0, or -1 after
 * reporting. */
int cli_env_namespace(struct cli *c)
{
    char buf[160];
    if (cli_given(c, &cli_opt_namespace) || namespace_valid(c->r.k.ledger_namespace))
        return 0;
    log_usage(c->cmd, "NAMESPACE='%s' is not a namespace name (at most 63 lower-case letters, "
              "digits and '-', starting and ending with a letter or digit)",
              cli_shown(c->r.k.ledger_namespace, buf, sizeof buf));
    return -1;
}

/* A FILE operand of lua and exec: there, readable and a file, or usage. */
int cli_script_file(struct cli *c, const char *file)
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

/* env SKIP ("slug[,slug]") and SKIP_REASON, for run, plan and preview: the hook's
 * escape hatch. 0, or an exit code after reporting. */
int cli_skip_env(struct cli *c)
{
    const char *env = getenv("SKIP");
    if (!env || !*env)
        return 0;
    const char *reason = getenv("SKIP_REASON");
    char buf[160];
    if (!reason || !*reason || strlen(reason) > SKIP_REASON_MAX) {
        log_usage(c->cmd, "SKIP=%s needs SKIP_REASON: say why, in 1 to %d bytes",
                  cli_shown(env, buf, sizeof buf), SKIP_REASON_MAX);
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

int cli_no_tree(const struct cli *c)
{
    log_fatal("%s: no migrations tree: give --dir DIR (or COZY_MIGRATIONS_DIR, or --local in a "
              "checkout); this install carries none (make install MIGRATIONS_TREE=<the platform's "
              "checkout> ships one) and never runs this repository's samples", c->cmd);
    return EXIT_NO_TREE;
}

/* What run, plan, status and skip share once parsed. 0 or an exit code. */
int cli_runner_opts_finish(struct cli *c, int argc, char **argv, int first)
{
    if (cli_no_operands(c, argc, argv, first))
        return EXIT_USAGE;
    struct runner_opts *o = &c->r;
    char buf[300];
    int only_flag = cli_given(c, &cli_opt_only);
    if (o->only && !slug_valid(o->only)) {
        log_usage(c->cmd, "%s: '%s' is not a valid slug", only_flag ? "--only" : "ONLY",
                  cli_shown(o->only, buf, sizeof buf));
        return EXIT_USAGE;
    }
    if (o->force && !o->only) {
        log_usage(c->cmd, "--force applies to --only SLUG (or ONLY): alone it changes nothing");
        return EXIT_USAGE;
    }
    if (cli_env_namespace(c) != 0)
        return EXIT_USAGE;
    if (!cli_given(c, &cli_opt_pass_env) && o->pass_env &&
        pass_env_check(c, "PASS_ENV", o->pass_env))
        return EXIT_USAGE;
    if (o->image && (has_control(o->image) || strlen(o->image) > IMAGE_MAX)) {
        log_usage(c->cmd, "MIGRATIONS_IMAGE='%s' is not an image reference: one line of at most "
                  "%d bytes, no control characters (it is recorded in every record)",
                  cli_shown(o->image, buf, sizeof buf), IMAGE_MAX);
        return EXIT_USAGE;
    }
    if ((o->installed_at || o->create_namespace) && !o->k.cfg.local) {
        log_usage(c->cmd, "%s is for a --local run against a development cluster (the hook's "
                  "fresh install records every migration skipped-fresh-install)",
                  o->installed_at ? "--as-installed-at" : "--create-namespace");
        return EXIT_USAGE;
    }
    if (!o->dir)
        o->dir = o->k.cfg.local ? "." : paths_tree();
    /* status reads the ledger alone without a tree; every other command
     * would run, plan or compare migrations it does not have */
    if (!o->dir && strcmp(c->cmd, "status") != 0)
        return cli_no_tree(c);
    static char lease[300];
    snprintf(lease, sizeof lease, "%s" LEASE_SUFFIX, o->k.ledger_name);
    o->k.lease_name = lease;
    if (!c->timeout_set)
        o->timeout = 0; /* each header's own timeout applies */
    return 0;
}


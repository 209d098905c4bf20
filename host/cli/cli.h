/* cli.h: what the command line's files share (main.c: the table of
 * commands and the dispatch; options.c: parsing argv against a command's
 * table, every option's one handler, the environment the hook sets, --help
 * with the defaults of defaults.h filled in; run.c, script.c, release.c,
 * lifecycle.c:
 * one file per group of commands, each holding its commands' option tables,
 * help and body). Nothing outside cli/ includes it. */
#ifndef COZY_CLI_H
#define COZY_CLI_H
#include <getopt.h>
#include <stddef.h>

#include "run/runner.h"

/* Every option any command takes; a command's table names those it accepts
 * and apply_opt is the one handler of them all. */
enum opt_id {
    OPT_KUBECONFIG = 256, OPT_CONTEXT, OPT_LOCAL, OPT_NAMESPACE, OPT_LOG_FORMAT, OPT_HELP,
    OPT_DRY_RUN, OPT_TIMEOUT, OPT_MEMORY, OPT_TIER, OPT_ONLY, OPT_LOCK_TIMEOUT, OPT_LEDGER,
    OPT_DIR, OPT_LEASE_DURATION, OPT_GRACE, OPT_MAX_ATTEMPTS, OPT_OUTPUT, OPT_WORKDIR, OPT_ENV,
    OPT_TICK, OPT_QUIET, OPT_REPO, OPT_OUT, OPT_REV, OPT_CHECK_PREFIX, OPT_AGAINST,
    OPT_HISTORY, OPT_ON_ERROR, OPT_FROM, OPT_NAMES, OPT_RETRY_FOR, OPT_PASS_ENV, OPT_FORCE,
    OPT_REASON, OPT_FAILED, OPT_IMAGE, OPT_REQUIRE_DIGEST, OPT_CHECK, OPT_SERVICE_ACCOUNT,
    OPT_CONCURRENCY, OPT_AS_INSTALLED_AT, OPT_CREATE_NAMESPACE, OPT_RETRY_BACKOFF,
    OPT_RETRY_BACKOFF_MAX, OPT_STDLIB_INTERNALS,
};

/* The options every command that talks to the cluster takes (their help is
 * cluster_opts_help, printed after the command's own). */
#define CLUSTER_OPTS                                             \
    {"kubeconfig", required_argument, NULL, OPT_KUBECONFIG},     \
    {"context", required_argument, NULL, OPT_CONTEXT},           \
    {"local", no_argument, NULL, OPT_LOCAL},                     \
    {"namespace", required_argument, NULL, OPT_NAMESPACE},       \
    {"log-format", required_argument, NULL, OPT_LOG_FORMAT},     \
    {"retry-for", required_argument, NULL, OPT_RETRY_FOR},       \
    {"concurrency", required_argument, NULL, OPT_CONCURRENCY},   \
    {"help", no_argument, NULL, OPT_HELP}
/* The release commands', which never talk to the cluster. */
#define TOOL_OPTS                                                \
    {"log-format", required_argument, NULL, OPT_LOG_FORMAT},     \
    {"help", no_argument, NULL, OPT_HELP}
#define OPT(name, arg, id) {name, arg, NULL, id}
#define END {NULL, 0, NULL, 0}

struct cli;

/* One command: the table main.c dispatches on and prints the main help
 * from. */
struct command {
    const char *name;
    const char *usage;              /* in the main help: "skip SLUG" */
    const char *summary;            /* what it does, for the main help ('\n' continues it) */
    const struct option *options;   /* its options; NULL: it parses argv itself (spec) */
    const char *shorts;             /* getopt's short options ("o:"), or NULL */
    const char *help;               /* --help; {NAME} is a default (help_print) */
    void (*help_fn)(void);          /* or: prints --help itself (lint: its rules' table) */
    int (*fn)(struct cli *c, int argc, char **argv, int first); /* argv[first]: the first operand */
    int stops;                      /* it holds the runner lock or a migration's child, so
                                     * TERM, INT and HUP stop it the same way (stop.h) */
    int permute;                    /* its operands may come among the options */
    const char *plain;              /* -o/--output: its plain format ("table", "text"), or NULL */
};

/* Everything any command can be told; each command reads what it accepts. */
struct cli {
    const struct command *command;
    const char *cmd;                /* command->name, for messages */
    struct runner_opts r;           /* r.k holds the kube options of every command */
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
    int require_digest;
    double retry_backoff, retry_backoff_max;    /* 0: the default */
    /* dispatch */
    const char *service_account;
    /* --local: the working tree's manifest (order_local), the runner's to read */
    struct manifest local_man;
    int have_local_man;
    unsigned char seen[64];         /* options given so far (id - 256): each at most once */
};

/* ---- options.c ---- */

extern const char cluster_opts_help[];
void cli_init(struct cli *c, const struct command *cmd, char **env);
/* An explicit --log-format decides the format of every line, usage errors
 * in the options before it included. */
void prescan_log_format(int argc, char **argv);
/* Parses argv against c->command's table. Returns 0 with *first_arg set to
 * the first operand, 1 when --help was printed, or -1 after a usage error.
 * An option given twice is refused (the second value would silently win),
 * --env aside. */
int parse(struct cli *c, int argc, char **argv, int *first_arg);
/* Prints a help text, each {NAME} replaced by the default it names
 * (defaults.h): {TIMEOUT}, {GRACE}, {LOCK_WAIT}, {LEASE}, {RETRY_FOR},
 * {MEMORY}, {MAX_ATTEMPTS}, {BACKOFF}, {BACKOFF_MAX}, {NAMESPACE}, {LEDGER},
 * {SKIP_REASON_MAX}. */
void help_print(const char *text);
/* A value as it can sit in a one-line message: control bytes escaped, cut. */
const char *shown(const char *v, char *buf, size_t cap);
/* "unexpected argument 'X'" unless argv[first] is the end. 0 or EXIT_USAGE. */
int no_operands(struct cli *c, int argc, char **argv, int first);
/* env DRY_RUN (1/true, 0/false/empty, anything else refused): 0 or -1. */
int env_dry_run(struct cli *c);
/* env NAMESPACE, when no --namespace overrides it: 0 or -1. */
int env_namespace(struct cli *c);
/* env SKIP and SKIP_REASON, for run, plan and preview: 0 or an exit code. */
int skip_env(struct cli *c);
/* A FILE operand of lua and exec: there, readable and a file, or usage. */
int script_file(struct cli *c, const char *file);
/* What run, plan, preview, status and skip share once parsed: 0 or an
 * exit code. */
int runner_finish(struct cli *c, int argc, char **argv, int first);

/* ---- the commands, one file per group ---- */

/* run.c: run, plan, preview, status, skip */
extern const struct option opts_run[], opts_preview[], opts_status[], opts_skip[];
extern const char help_run[], help_plan[], help_preview[], help_status[], help_skip[];
int cmd_run(struct cli *c, int argc, char **argv, int first);
int cmd_plan(struct cli *c, int argc, char **argv, int first);
int cmd_preview(struct cli *c, int argc, char **argv, int first);
int cmd_status(struct cli *c, int argc, char **argv, int first);
int cmd_skip(struct cli *c, int argc, char **argv, int first);
/* script.c: lua, exec, config, spec */
extern const struct option opts_lua[], opts_exec[], opts_config[];
extern const char help_lua[], help_exec[], help_config[], help_spec[];
int cmd_lua(struct cli *c, int argc, char **argv, int first);
int cmd_exec(struct cli *c, int argc, char **argv, int first);
int cmd_config(struct cli *c, int argc, char **argv, int first);
int cmd_spec(struct cli *c, int argc, char **argv, int first);
/* release.c: order, lint, new, stubs, import-legacy */
extern const struct option opts_order[], opts_lint[], opts_new[], opts_stubs[], opts_import[];
extern const char help_order[], help_new[], help_stubs[], help_import[];
int cmd_order(struct cli *c, int argc, char **argv, int first);
int cmd_lint(struct cli *c, int argc, char **argv, int first);
int cmd_new(struct cli *c, int argc, char **argv, int first);
int cmd_stubs(struct cli *c, int argc, char **argv, int first);
int cmd_import_legacy(struct cli *c, int argc, char **argv, int first);
/* lint's help: its rules come from the linter's table (lint_rules). */
void help_lint(void);
/* lifecycle.c: index, dispatch */
extern const struct option opts_index[], opts_dispatch[];
extern const char help_index[], help_dispatch[];
int cmd_index(struct cli *c, int argc, char **argv, int first);
int cmd_dispatch(struct cli *c, int argc, char **argv, int first);
#endif

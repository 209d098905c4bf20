/* cli.h: what the command line's files share (main.c: the table of
 * commands, one row each with named fields and flag bits, and the
 * dispatch; options.c: every option, each with its one handler, parsing
 * argv against a command's table, the environment the hook sets, --help
 * with the defaults of defaults.h filled in; man.c: the man pages made
 * from the table and the help; run.c, script.c, release.c, lifecycle.c:
 * one file per group of commands, each holding its commands' option
 * tables, help and body). Nothing outside cli/ includes it. */
#ifndef COZY_CLI_H
#define COZY_CLI_H
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

#include "run/runner.h"

struct cli;

/* One option: its name (--name), whether it takes a value, its one-letter
 * form ('o' for -o, or 0), and the one handler that reads and checks its
 * value into the struct cli (0, or -1 after reporting a bad value). Each is
 * defined once, in options.c (cli_opt_*), so every command taking it gets
 * the same rule and message; a command's table lists the ones it takes. */
struct cli_option {
    const char *name;
    int has_arg;                    /* no_argument or required_argument */
    char short_name;
    unsigned repeat;                /* may be given more than once (--env) */
    int (*apply)(struct cli *c, const char *flag, const char *arg); /* NULL: --help */
};

/* The options every command that talks to the cluster takes (their help is
 * cli_cluster_opts_help, printed after the command's own). */
#define CLUSTER_OPTS                                                              \
    &cli_opt_kubeconfig, &cli_opt_context, &cli_opt_local, &cli_opt_namespace,    \
    &cli_opt_log_format, &cli_opt_retry_for, &cli_opt_concurrency, &cli_opt_help
/* The release commands', which never talk to the cluster (their help:
 * cli_tool_opts_help). */
#define TOOL_OPTS &cli_opt_log_format, &cli_opt_help

/* A command's flag bits. */
enum {
    CMD_STOPS = 1 << 0,   /* it holds the runner lock or a migration's child, so
                           * TERM, INT and HUP stop it the same way (stop.h) */
    CMD_PERMUTE = 1 << 1, /* its operands may come among the options */
};

/* One command: a row of the table main.c dispatches on and prints the main
 * help and the man pages from. */
struct command {
    const char *name;
    int (*fn)(struct cli *c, int argc, char **argv, int first); /* argv[first]: the first operand */
    unsigned flags;                 /* CMD_* */
    const struct cli_option *const *options; /* NULL-ended; NULL: it parses argv itself (spec) */
    const char *usage;              /* in the main help: "skip SLUG" */
    const char *summary;            /* what it does, for the main help ('\n' continues it) */
    const char *help;               /* --help; {NAME} is a default (cli_help_print) */
    void (*help_fn)(void);          /* or: prints --help itself (lint: its rules' table) */
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
    const char *repo, *out, *rev, *against, *on_error, *from, *names, *image_inventory;
    int check_prefix, history;
    /* import-legacy: --dry-run-var SCRIPT=VAR, by pointer */
    const char *dry_run_vars[128];
    size_t ndry_run_vars;
    /* index */
    const char *image, *check, *check_chart;
    int require_digest;
    double retry_backoff, retry_backoff_max;    /* 0: the default */
    /* dispatch */
    const char *service_account;
    /* man */
    int list;
    /* --local: the working tree's manifest (order_local), the runner's to read */
    struct manifest local_man;
    int have_local_man;
    const struct cli_option *given[64]; /* options given so far: each at most once */
    size_t ngiven;
};

/* ---- options.c ---- */

/* Every option, each with its handler (the tables name these). */
extern const struct cli_option cli_opt_kubeconfig, cli_opt_context, cli_opt_local,
    cli_opt_namespace, cli_opt_log_format, cli_opt_retry_for, cli_opt_concurrency, cli_opt_help,
    cli_opt_dry_run, cli_opt_timeout, cli_opt_memory, cli_opt_tier, cli_opt_only,
    cli_opt_lock_timeout, cli_opt_ledger, cli_opt_dir, cli_opt_lease_duration, cli_opt_grace,
    cli_opt_max_attempts, cli_opt_output, cli_opt_workdir, cli_opt_env, cli_opt_tick,
    cli_opt_quiet, cli_opt_repo, cli_opt_out, cli_opt_rev, cli_opt_check_prefix,
    cli_opt_against, cli_opt_history, cli_opt_on_error, cli_opt_from, cli_opt_names,
    cli_opt_pass_env, cli_opt_force, cli_opt_reason, cli_opt_failed, cli_opt_image,
    cli_opt_require_digest, cli_opt_check, cli_opt_check_chart, cli_opt_service_account, cli_opt_as_installed_at,
    cli_opt_create_namespace, cli_opt_retry_backoff, cli_opt_retry_backoff_max,
    cli_opt_stdlib_internals, cli_opt_image_inventory, cli_opt_dry_run_var;

/* The help of the options a command shares with others (the cluster's, or
 * --log-format alone), printed after its own; NULL: none. */
const char *cli_common_help(const struct command *cmd);
void cli_init(struct cli *c, const struct command *cmd, char **env);
/* An explicit --log-format decides the format of every line, usage errors
 * in the options before it included. */
void cli_prescan_log_format(int argc, char **argv);
/* Parses argv against c->command's table. Returns 0 with *first_arg set to
 * the first operand, 1 when --help was printed, or -1 after a usage error.
 * An option given twice is refused (the second value would silently win),
 * --env aside. */
int cli_parse(struct cli *c, int argc, char **argv, int *first_arg);
/* Whether the command line gave this option. */
int cli_given(const struct cli *c, const struct cli_option *opt);
/* Prints a help text, each {NAME} replaced by the default it names
 * (defaults.h): {TIMEOUT}, {GRACE}, {LOCK_WAIT}, {LEASE}, {RETRY_FOR},
 * {MEMORY}, {MAX_ATTEMPTS}, {BACKOFF}, {BACKOFF_MAX}, {NAMESPACE}, {LEDGER},
 * {SKIP_REASON_MAX}, {CONCURRENCY}, {CONCURRENCY_MAX}. */
void cli_help_print(const char *text);
/* The same into a stream (the man pages, man.c). */
void cli_help_write(const char *text, FILE *f);
/* A value as it can sit in a one-line message: control bytes escaped, cut. */
const char *cli_shown(const char *v, char *buf, size_t cap);
/* "unexpected argument 'X'" unless argv[first] is the end. 0 or EXIT_USAGE. */
int cli_no_operands(struct cli *c, int argc, char **argv, int first);
/* env DRY_RUN (1/true, 0/false/empty, anything else refused): 0 or -1. */
int cli_env_dry_run(struct cli *c);
/* env NAMESPACE, when no --namespace overrides it: 0 or -1. */
int cli_env_namespace(struct cli *c);
/* env SKIP and SKIP_REASON, for run, plan and preview: 0 or an exit code. */
int cli_skip_env(struct cli *c);
/* A FILE operand of lua and exec: there, readable and a file, or usage. */
int cli_script_file(struct cli *c, const char *file);
/* What run, plan, preview, status, skip and dispatch share once parsed
 * (operands, ONLY, --force, the environment, the lease's name, the tree):
 * 0 or an exit code. */
int cli_runner_opts_finish(struct cli *c, int argc, char **argv, int first);
/* The one-line refusal of a command that needs a migrations tree and has
 * none (no --dir, no COZY_MIGRATIONS_DIR, none installed): EXIT_NO_TREE. */
int cli_no_tree(const struct cli *c);

/* ---- man.c ---- */

/* `cozy-migrate man --out DIR`: a man page per command of the table. */
int cli_man(struct cli *c, int argc, char **argv, int first);
extern const struct cli_option *const cli_man_options[];
extern const char cli_man_help[];

/* ---- main.c ---- */

/* The table of commands, NULL-ended by name (main.c). */
extern const struct command cli_commands[];

/* ---- the commands, one file per group; each exports its commands'
 * function, option table (NULL-ended) and --help ---- */

#define CLI_COMMAND(name)                                                 \
    int cli_##name(struct cli *c, int argc, char **argv, int first);     \
    extern const struct cli_option *const cli_##name##_options[];        \
    extern const char cli_##name##_help[]

/* run.c: run, plan, preview, status, skip (plan takes run's options) */
CLI_COMMAND(run);
CLI_COMMAND(preview);
CLI_COMMAND(status);
CLI_COMMAND(skip);
int cli_plan(struct cli *c, int argc, char **argv, int first);
extern const char cli_plan_help[];
/* script.c: lua, exec, config, spec (spec parses its own argv) */
CLI_COMMAND(lua);
CLI_COMMAND(exec);
CLI_COMMAND(config);
int cli_spec(struct cli *c, int argc, char **argv, int first);
extern const char cli_spec_help[];
/* release.c: order, lint, new, stubs, import-legacy */
CLI_COMMAND(order);
int cli_lint(struct cli *c, int argc, char **argv, int first);
extern const struct cli_option *const cli_lint_options[];
CLI_COMMAND(new);
CLI_COMMAND(stubs);
CLI_COMMAND(import_legacy);
/* lint's help: its rules come from the linter's table (lint_rules). */
void cli_lint_help_print(void);
/* lifecycle.c: index, dispatch */
CLI_COMMAND(index);
CLI_COMMAND(dispatch);
#endif

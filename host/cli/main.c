/* main.c: the `cozy-migrate` command line.
 *
 * Owns the table of commands (git's commands[]: a row per command with
 * named fields and flag bits, naming its function, its options and its
 * help; the main help and the man pages are made from it) and the dispatch:
 * stop signals installed for the commands that hold the lock or a child,
 * argv parsed against the command's table (options.c), the command's
 * function called with what is left. Must never hold migration logic: each
 * command hands its options to the layer that owns the work, and maps the
 * outcome to the exit codes of exitcodes.h. Every line it prints goes
 * through log.c or cli_help_print. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "base/exitcodes.h"
#include "base/log.h"
#include "base/stop.h"
#include "cli/cli.h"

/* The rows: name, function and flag bits first (git's { "add", cmd_add,
 * RUN_SETUP | NEED_WORK_TREE }), then the option table and help the
 * command's own file declares with it, then its line in the main help. */
const struct command cli_commands[] = {
    {.name = "run", .fn = cli_run, .flags = CMD_STOPS,
     .options = cli_run_options, .help = cli_run_help,
     .usage = "run", .summary = "run the pending migrations and record them in the ledger"},
    {.name = "plan", .fn = cli_plan,
     .options = cli_run_options, .help = cli_plan_help,
     .usage = "plan", .summary = "print what run would do, and why each other slug is skipped"},
    {.name = "preview", .fn = cli_preview, .flags = CMD_STOPS,
     .options = cli_preview_options, .help = cli_preview_help, .plain = "text",
     .usage = "preview",
     .summary = "dry-run every pending migration in order against a copy-on-write\n"
                "view of the cluster: each object it would change"},
    {.name = "status", .fn = cli_status, .flags = CMD_PERMUTE,
     .options = cli_status_options, .help = cli_status_help, .plain = "table",
     .usage = "status",
     .summary = "print the ledger: every migration's state (SLUG: one whole record)"},
    {.name = "skip", .fn = cli_skip, .flags = CMD_STOPS | CMD_PERMUTE,
     .options = cli_skip_options, .help = cli_skip_help,
     .usage = "skip SLUG", .summary = "record a migration skipped by the operator (--reason TEXT)"},
    {.name = "lua", .fn = cli_lua, .flags = CMD_STOPS,
     .options = cli_lua_options, .help = cli_lua_help,
     .usage = "lua FILE",
     .summary = "run a Lua file in the migration sandbox, kube module connected"},
    {.name = "exec", .fn = cli_exec, .flags = CMD_STOPS,
     .options = cli_exec_options, .help = cli_exec_help,
     .usage = "exec SLUG F",
     .summary = "run one script in a supervised child and print the outcome"},
    {.name = "config", .fn = cli_config,
     .options = cli_config_options, .help = cli_config_help,
     .usage = "config", .summary = "print which cluster and identity the kube module would use"},
    {.name = "spec", .fn = cli_spec,
     .help = cli_spec_help,
     .usage = "spec [ARGS]", .summary = "run busted specs inside the host (ARGS are busted's)"},
    {.name = "order", .fn = cli_order,
     .options = cli_order_options, .help = cli_order_help,
     .usage = "order",
     .summary = "generate migrations/order.d/ from the git history's release tags"},
    {.name = "lint", .fn = cli_lint,
     .options = cli_lint_options, .help_fn = cli_lint_help_print,
     .usage = "lint", .summary = "check the migrations tree against the authoring contract"},
    {.name = "new", .fn = cli_new, .flags = CMD_PERMUTE,
     .options = cli_new_options, .help = cli_new_help,
     .usage = "new SLUG", .summary = "scaffold a Lua migration and its spec"},
    {.name = "stubs", .fn = cli_stubs,
     .options = cli_stubs_options, .help = cli_stubs_help,
     .usage = "stubs",
     .summary = "write the editor files of a tree: LuaLS stubs of the modules,\n"
                ".luarc.json, .luacheckrc"},
    {.name = "import-legacy", .fn = cli_import_legacy,
     .options = cli_import_legacy_options, .help = cli_import_legacy_help,
     .usage = "import-legacy", .summary = "bring numbered shell migrations into legacy-sh/"},
    {.name = "index", .fn = cli_index,
     .options = cli_index_options, .help = cli_index_help, .plain = "configmap",
     .usage = "index",
     .summary = "the migrations index a chart ships (--check FILE: does it agree?)"},
    {.name = "dispatch", .fn = cli_dispatch,
     .options = cli_dispatch_options, .help = cli_dispatch_help,
     .usage = "dispatch",
     .summary = "one reconcile of the background tier: a Job for the next pending slug"},
    {.name = "man", .fn = cli_man,
     .options = cli_man_options, .help = cli_man_help,
     .usage = "man", .summary = "write a man page per command (man(7) source) into --out DIR"},
    {.name = NULL},
};

/* "Usage: ...", then every command of the table with its summary. */
static void main_help(FILE *f)
{
    fputs("Usage: cozy-migrate <command> [options]\n\nThe Cozystack migration engine.\n\n"
          "Commands:\n", f);
    for (const struct command *cmd = cli_commands; cmd->name; cmd++) {
        const char *s = cmd->summary;
        int w = strlen(cmd->usage) > 12 ? 14 : 12;
        fprintf(f, "  %-*s ", w, cmd->usage);
        for (const char *nl; (nl = strchr(s, '\n')); s = nl + 1)
            fprintf(f, "%.*s\n  %-*s ", (int)(nl - s), s, w, "");
        fprintf(f, "%s\n", s);
    }
    fputs("\nRun 'cozy-migrate <command> --help' for a command's options.\n", f);
}

int main(int argc, char **argv)
{
    /* Whatever it runs, this process and every one it forks without exec
     * (the Lease watcher, a Lua child, a shell's supervisor) holds the
     * cluster's credentials: a same-user script may not read its memory,
     * environment or /proc files, nor ptrace it (docs/internals.md,
     * "Confinement"). */
    (void)prctl(PR_SET_DUMPABLE, 0);
    cli_prescan_log_format(argc, argv);
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        main_help(argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : EXIT_OK;
    }
    const struct command *cmd = NULL;
    for (const struct command *at = cli_commands; at->name && !cmd; at++)
        if (strcmp(argv[1], at->name) == 0)
            cmd = at;
    if (!cmd) {
        if (argv[1][0] == '-')
            log_usage(NULL, "unknown flag '%s' before the command", argv[1]);
        else
            log_usage(NULL, "unknown command '%s'", argv[1]);
        return EXIT_USAGE;
    }
    /* --env values are kept by pointer; there are never more than argc. */
    char **env = calloc((size_t)argc + 1, sizeof *env);
    if (!env) {
        log_fatal("out of memory");
        return EXIT_FAILED;
    }
    if ((cmd->flags & CMD_STOPS) && stop_install() != 0)
        log_warn("cannot install the stop signal handlers: TERM, INT and HUP end "
                 "this process without releasing what it holds");
    struct cli c;
    cli_init(&c, cmd, env);
    int first = 1, rc = 0;
    if (cmd->options)
        rc = cli_parse(&c, argc - 1, argv + 1, &first);
    rc = rc > 0 ? EXIT_OK : rc < 0 ? EXIT_USAGE : cmd->fn(&c, argc - 1, argv + 1, first);
    free(env);
    return rc;
}

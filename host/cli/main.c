/* main.c: the `cozy-migrate` command line.
 *
 * Owns the table of commands (git's commands[]: each with its options, its
 * help and its function; the main help is made from it) and the dispatch:
 * stop signals installed for the commands that hold the lock or a child,
 * argv parsed against the command's table (options.c), the command's
 * function called with what is left. Must never hold migration logic: each
 * command hands its options to the layer that owns the work, and maps the
 * outcome to the exit codes of exitcodes.h. Every line it prints goes
 * through log.c or help_print. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/exitcodes.h"
#include "base/log.h"
#include "base/stop.h"
#include "cli/cli.h"

static const struct command commands[] = {
    {"run", "run", "run the pending migrations and record them in the ledger",
     opts_run, NULL, help_run, NULL, cmd_run, 1, 0, NULL},
    {"plan", "plan", "print what run would do, and why each other slug is skipped",
     opts_run, NULL, help_plan, NULL, cmd_plan, 0, 0, NULL},
    {"preview", "preview", "dry-run every pending migration in order against a copy-on-write\n"
     "view of the cluster: each object it would change",
     opts_preview, "o:", help_preview, NULL, cmd_preview, 1, 0, "text"},
    {"status", "status", "print the ledger: every migration's state (SLUG: one whole record)",
     opts_status, "o:", help_status, NULL, cmd_status, 0, 1, "table"},
    {"skip", "skip SLUG", "record a migration skipped by the operator (--reason TEXT)",
     opts_skip, NULL, help_skip, NULL, cmd_skip, 1, 1, NULL},
    {"lua", "lua FILE", "run a Lua file in the migration sandbox, kube module connected",
     opts_lua, NULL, help_lua, NULL, cmd_lua, 1, 0, NULL},
    {"exec", "exec SLUG F", "run one script in a supervised child and print the outcome",
     opts_exec, NULL, help_exec, NULL, cmd_exec, 1, 0, NULL},
    {"config", "config", "print which cluster and identity the kube module would use",
     opts_config, NULL, help_config, NULL, cmd_config, 0, 0, NULL},
    {"spec", "spec [ARGS]", "run busted specs inside the host (ARGS are busted's)",
     NULL, NULL, help_spec, NULL, cmd_spec, 0, 0, NULL},
    {"order", "order", "generate migrations/order.d/ from the git history's release tags",
     opts_order, NULL, help_order, NULL, cmd_order, 0, 0, NULL},
    {"lint", "lint", "check the migrations tree against the authoring contract",
     opts_lint, NULL, NULL, help_lint, cmd_lint, 0, 0, NULL},
    {"new", "new SLUG", "scaffold a Lua migration and its spec",
     opts_new, NULL, help_new, NULL, cmd_new, 0, 1, NULL},
    {"stubs", "stubs", "write the editor files of a tree: LuaLS stubs of the modules,\n"
     ".luarc.json, .luacheckrc",
     opts_stubs, NULL, help_stubs, NULL, cmd_stubs, 0, 0, NULL},
    {"import-legacy", "import-legacy", "bring numbered shell migrations into legacy-sh/",
     opts_import, NULL, help_import, NULL, cmd_import_legacy, 0, 0, NULL},
    {"index", "index", "the migrations index a chart ships (--check FILE: does it agree?)",
     opts_index, "o:", help_index, NULL, cmd_index, 0, 0, "configmap"},
    {"dispatch", "dispatch", "one reconcile of the background tier: a Job for the next pending slug",
     opts_dispatch, NULL, help_dispatch, NULL, cmd_dispatch, 0, 0, NULL},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

/* "Usage: ...", then every command of the table with its summary. */
static void main_help(FILE *f)
{
    fputs("Usage: cozy-migrate <command> [options]\n\nThe Cozystack migration engine.\n\n"
          "Commands:\n", f);
    for (size_t i = 0; i < NCOMMANDS; i++) {
        const char *s = commands[i].summary;
        int w = strlen(commands[i].usage) > 12 ? 14 : 12;
        fprintf(f, "  %-*s ", w, commands[i].usage);
        for (const char *nl; (nl = strchr(s, '\n')); s = nl + 1)
            fprintf(f, "%.*s\n  %-*s ", (int)(nl - s), s, w, "");
        fprintf(f, "%s\n", s);
    }
    fputs("\nRun 'cozy-migrate <command> --help' for a command's options.\n", f);
}

int main(int argc, char **argv)
{
    prescan_log_format(argc, argv);
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        main_help(argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : EXIT_OK;
    }
    const struct command *cmd = NULL;
    for (size_t i = 0; i < NCOMMANDS && !cmd; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            cmd = &commands[i];
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
    if (cmd->stops && stop_install() != 0)
        log_warn("cannot install the stop signal handlers: TERM, INT and HUP end "
                 "this process without releasing what it holds");
    struct cli c;
    cli_init(&c, cmd, env);
    int first = 1, rc = 0;
    if (cmd->options)
        rc = parse(&c, argc - 1, argv + 1, &first);
    rc = rc > 0 ? EXIT_OK : rc < 0 ? EXIT_USAGE : cmd->fn(&c, argc - 1, argv + 1, first);
    free(env);
    return rc;
}

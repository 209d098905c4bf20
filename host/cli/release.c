/* release.c: the release commands: order, lint, new, stubs, import-legacy.
 * Own their option tables, their --help and their operands; the work is
 * release/'s. What release/ cannot see is handed down from lua/: lint's
 * luacheck globals (the sandbox's own allow-list, lua/sandbox.h) and the
 * modules' fields (lua/modapi.h) for lint's api rule and the editor stubs
 * `new` and `stubs` write. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/exitcodes.h"
#include "base/log.h"
#include "base/mem.h"
#include "lua/modapi.h"
#include "lua/sandbox.h"
#include "release/import.h"
#include "release/lint.h"
#include "release/order.h"
#include "release/scaffold.h"

const char cli_order_help[] =
    "Usage: cozy-migrate order [--repo DIR] [--out DIR] [--rev REV] [--check-prefix]\n"
    "\n"
    "Generates the manifest (migrations/order.d/) from git: this line's release\n"
    "tags (vX.Y.Z, vX.Y.Z-rc.N reachable from REV) in version order, release\n"
    "candidates first, from the first whose tree has the engine's layout (older\n"
    "tags predate the engine and play no part; gaps in the line are no error: a\n"
    "warning names a tag a fetch could add); a slug's batch NNNNN-<tag> is the\n"
    "first tag that carries it; alphabetical within a batch, reordered only\n"
    "where `requires` demands; '<slug> retired' for a slug a tag carried and\n"
    "REV does not; 99999-untagged for slugs no tag carries (never when REV is\n"
    "a release tag); 00000-legacy from legacy-sh/legacy-map. Reads git\n"
    "objects only, never the working tree.\n"
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
    "header, slug or legacy-map), 8 history (shallow clone, not a git\n"
    "repository), 9 the manifest rewrites a released one,\n"
    "10 git is not installed.\n";

const struct cli_option *const cli_order_options[] = {
    TOOL_OPTS, &cli_opt_repo, &cli_opt_out,
    &cli_opt_rev, &cli_opt_check_prefix,
    NULL,
};

int cli_order(struct cli *c, int argc, char **argv, int first)
{
    if (cli_no_operands(c, argc, argv, first))
        return EXIT_USAGE;
    return order_cmd(c->repo ? c->repo : ".", c->rev ? c->rev : "HEAD", c->out, c->check_prefix);
}

static const char lint_usage[] =
    "Usage: cozy-migrate lint [--dir DIR] [--against REV] [--history] [--image-inventory FILE]\n"
    "\n"
    "Checks the tree (migrations/, legacy-sh/, spec/) against the authoring\n"
    "contract and prints each problem as 'file:line: rule: what is wrong'.\n"
    "\n"
    "Options:\n"
    "  --dir DIR       the tree root (default .)\n"
    "  --against REV   compare shipped scripts with REV and every release tag\n"
    "  --history       check slugs against every release tag's tree\n"
    "  --image-inventory FILE  what the image holds (tools/image writes it): shell\n"
    "                  migrations must be runnable there (rule runnable)\n"
    "\n"
    "Exit codes: 0 clean, 3 problems found, 8 git cannot answer (not a\n"
    "repository, shallow clone), 10 shellcheck, luacheck or git missing.\n"
    "\n"
    "Rules (docs/writing-migrations.md's table is this list):\n";

/* lint --help: the usage, then every rule of the linter's own table, its
 * doc wrapped under its name: "  NAME (WHEN)" and the doc indented. */
void cli_lint_help_print(void)
{
    fputs(lint_usage, stdout);
    for (const struct lint_rule *r = lint_rules; r->name; r++) {
        if (r->when)
            printf("  %s (%s)\n", r->name, r->when);
        else
            printf("  %s\n", r->name);
        const char *p = r->doc;
        while (*p) {
            size_t n = strlen(p);
            if (n > 70) {
                n = 70;
                while (n > 0 && p[n] != ' ')
                    n--;
                if (n == 0)
                    n = strcspn(p, " ");
            }
            printf("      %.*s\n", (int)n, p);
            p += n;
            while (*p == ' ')
                p++;
        }
    }
}

const struct cli_option *const cli_lint_options[] = {
    TOOL_OPTS, &cli_opt_dir,
    &cli_opt_against, &cli_opt_history, &cli_opt_image_inventory,
    NULL,
};

/* The modules' fields as lint's api rule takes them (pointing into api). */
struct lint_api {
    struct lint_module m[16];
    const char **names;
};

static int lint_api_of(const struct modapi *api, struct lint_api *la)
{
    size_t total = 0;
    for (size_t i = 0; i < api->n; i++)
        total += api->m[i].n;
    if (!(la->names = calloc(total + 1, sizeof *la->names)))
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < api->n && i < 16; i++) {
        la->m[i] = (struct lint_module){.name = api->m[i].name, .fields = la->names + k,
                                        .nfields = api->m[i].n};
        for (size_t f = 0; f < api->m[i].n; f++)
            la->names[k++] = api->m[i].f[f].name;
    }
    return 0;
}

int cli_lint(struct cli *c, int argc, char **argv, int first)
{
    int rc;
    if (cli_no_operands(c, argc, argv, first))
        return EXIT_USAGE;
    /* luacheck checks against the globals the sandbox really gives, and
     * the api rule against the fields its modules really have */
    char err[2048];
    struct modapi api;
    if (modapi_load(NULL, &api, err, sizeof err) != 0) {
        log_fatal("lint: the stdlib does not load: %s", err);
        return EXIT_PACKAGING;
    }
    struct lint_api la = {0};
    char *rc_text = sandbox_luacheck_std();
    if (!rc_text || lint_api_of(&api, &la) != 0) {
        log_fatal("lint: out of memory");
        free(rc_text);
        modapi_free(&api);
        return EXIT_FAILED;
    }
    struct lint_opts lo2 = {.dir = c->r.dir ? c->r.dir : ".", .against = c->against,
                            .history = c->history, .luacheckrc = rc_text, .modules = la.m,
                            .nmodules = api.n < 16 ? api.n : 16,
                            .image_inventory = c->image_inventory};
    rc = lint_run(&lo2);
    free(la.names);
    free(rc_text);
    modapi_free(&api);
    return rc;
}

/* The editor files of the modules as the sandbox loads them: 0, or -1
 * after saying why (free with editor_free). */
struct editor {
    struct editor_files e;
    char *stubs[16];
    char *std;
};

static void editor_free(struct editor *ed)
{
    for (size_t i = 0; i < 16; i++)
        mem_free(ed->stubs[i]);
    free(ed->std);
}

static int editor_of(struct editor *ed, const char *cmd)
{
    memset(ed, 0, sizeof *ed);
    char err[2048];
    struct modapi api;
    if (modapi_load(NULL, &api, err, sizeof err) != 0) {
        log_fatal("%s: the stdlib does not load: %s", cmd, err);
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; i < api.n && i < 16 && rc == 0; i++)
        if (!(ed->stubs[i] = modapi_stub(&api.m[i])))
            rc = -1;
    if (rc == 0 && !(ed->std = sandbox_luacheck_std()))
        rc = -1;
    ed->e = (struct editor_files){.modules = modapi_modules, .stubs = ed->stubs,
                                  .n = api.n < 16 ? api.n : 16, .luacheck_std = ed->std};
    modapi_free(&api);
    if (rc != 0) {
        log_fatal("%s: out of memory", cmd);
        editor_free(ed);
    }
    return rc;
}

const char cli_new_help[] =
    "Usage: cozy-migrate new SLUG [--tier pre-apply|background] [--on-error abort|warn]\n"
    "                        [--dir DIR]\n"
    "\n"
    "Writes migrations/<tier>/SLUG.lua with its header and\n"
    "spec/migrations/SLUG_spec.lua, a spec that runs it against the disposable\n"
    "cluster in KUBECONFIG twice (with the harness shipped with cozy-migrate)\n"
    "and asserts the second run changed no object. Makes what else the tree\n"
    "lacks: migrations/revoked, legacy-sh/legacy-map, a .gitignore line for the\n"
    "generated migrations/order.d/, and the editor files `stubs` writes. The\n"
    "tree then passes `spec`, `lint` and `make install` as written. Never\n"
    "overwrites a file. Refuses an invalid slug or a --dir that is not a\n"
    "directory (2), and a slug the tree already has or a release tag carried\n"
    "(9: a slug is never reused).\n"
    "\n"
    "Options:\n"
    "  --tier TIER       pre-apply (default) or background\n"
    "  --on-error MODE   abort (default) or warn\n"
    "  --dir DIR         the tree root (default .)\n";

const struct cli_option *const cli_new_options[] = {
    TOOL_OPTS, &cli_opt_tier,
    &cli_opt_on_error, &cli_opt_dir,
    NULL,
};

int cli_new(struct cli *c, int argc, char **argv, int first)
{
    const char *slug = first < argc ? argv[first++] : NULL;
    if (cli_no_operands(c, argc, argv, first))
        return EXIT_USAGE;
    if (!slug) {
        log_usage(c->cmd, "expected a SLUG");
        return EXIT_USAGE;
    }
    struct editor ed;
    if (editor_of(&ed, c->cmd) != 0)
        return EXIT_FAILED;
    struct scaffold_opts so = {.dir = c->r.dir ? c->r.dir : ".", .slug = slug, .tier = c->r.tier,
                               .on_error = c->on_error ? c->on_error : "abort", .editor = &ed.e};
    int rc = scaffold_new(&so);
    editor_free(&ed);
    return rc;
}

const char cli_stubs_help[] =
    "Usage: cozy-migrate stubs [--dir DIR]\n"
    "\n"
    "Writes the editor files of a migrations tree: .cozy-migrate/meta/<module>.lua,\n"
    "a LuaLS `---@meta` stub of each module a migration requires (kube, helm,\n"
    "fleet, flux, log, json, yaml), made from the modules as this binary's\n"
    "sandbox loads them (the fields `lint`'s api rule knows, each function with\n"
    "its parameters and the comment above it), replaced on every run; and, when\n"
    "missing, .luarc.json (LuaLS: Lua 5.4, the stubs, busted's globals) and\n"
    ".luacheckrc (migrations: the sandbox's globals; spec/: busted's). `new`\n"
    "writes the same when they are missing. Run it again after an upgrade.\n"
    "\n"
    "Options:\n"
    "  --dir DIR         the tree root (default .)\n";

const struct cli_option *const cli_stubs_options[] = {TOOL_OPTS, &cli_opt_dir, NULL};

int cli_stubs(struct cli *c, int argc, char **argv, int first)
{
    if (cli_no_operands(c, argc, argv, first))
        return EXIT_USAGE;
    const char *dir = c->r.dir ? c->r.dir : ".";
    struct editor ed;
    if (editor_of(&ed, c->cmd) != 0)
        return EXIT_FAILED;
    struct buf err = BUF_INIT;
    int rc = EXIT_OK;
    if (scaffold_editor(dir, &ed.e, 1, &err) != 0) {
        log_fatal("stubs: %s", buf_str(&err));
        rc = EXIT_FAILED;
    }
    buf_release(&err);
    editor_free(&ed);
    return rc;
}

const char cli_import_legacy_help[] =
    "Usage: cozy-migrate import-legacy --from DIR --names FILE [--dir DEST]\n"
    "                                  [--dry-run-var SCRIPT=VAR]...\n"
    "\n"
    "Brings a platform's numbered shell migrations (files 1 .. N, and the lib/\n"
    "they source) into DEST/legacy-sh/: each becomes <slug>.sh, byte-identical\n"
    "but for one line inserted after the shebang, the header\n"
    "'# cozystack-migration: on-error=abort'; lib/ is copied; legacy-map and the\n"
    "digest list (legacy-sha256sums, what lint's `frozen` holds the set to) are\n"
    "written, and DEST/.gitignore gets the line for the generated order.d/.\n"
    "FILE names each number: 'N slug' a line, in order.\n"
    "\n"
    "Options:\n"
    "  --dry-run-var SCRIPT=VAR  the script (its slug or old number) reads VAR\n"
    "                   for its own dry run: a second header line\n"
    "                   '# cozystack-migration: dry-run=VAR' (VAR=1 in a dry run),\n"
    "                   part of the imported bytes; once per script\n"
    "\n"
    "Exit codes: 0 imported, 2 usage (a --dry-run-var naming no script, twice\n"
    "the same, or no variable name), 3 a missing number or name, a file\n"
    "without a shebang, a name that is not a valid slug, 9 DEST already holds\n"
    "legacy migrations or a slug is taken.\n";

const struct cli_option *const cli_import_legacy_options[] = {
    TOOL_OPTS, &cli_opt_from,
    &cli_opt_names, &cli_opt_dir, &cli_opt_dry_run_var, NULL,
};

int cli_import_legacy(struct cli *c, int argc, char **argv, int first)
{
    if (cli_no_operands(c, argc, argv, first))
        return EXIT_USAGE;
    if (!c->from || !c->names) {
        log_usage(c->cmd, "--from DIR and --names FILE are required");
        return EXIT_USAGE;
    }
    struct import_opts io = {.from = c->from, .names = c->names, .dest = c->r.dir ? c->r.dir : ".",
                             .dry_run_vars = c->dry_run_vars, .ndry_run_vars = c->ndry_run_vars};
    return import_legacy(&io);
}

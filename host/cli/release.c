/* release.c: the release commands: order, lint, new, import-legacy. Own
 * their option tables, their --help and their operands; the work is
 * release/'s. lint's luacheck globals are handed down from the sandbox's
 * own allow-list (lua/sandbox.h), which release/ cannot see. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/exitcodes.h"
#include "base/log.h"
#include "lua/sandbox.h"
#include "release/import.h"
#include "release/lint.h"
#include "release/order.h"
#include "release/scaffold.h"

const char help_order[] =
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

const struct option opts_order[] = {
    TOOL_OPTS, OPT("repo", required_argument, OPT_REPO), OPT("out", required_argument, OPT_OUT),
    OPT("rev", required_argument, OPT_REV), OPT("check-prefix", no_argument, OPT_CHECK_PREFIX),
    END,
};

int cmd_order(struct cli *c, int argc, char **argv, int first)
{
    if (no_operands(c, argc, argv, first))
        return EXIT_USAGE;
    return order_cmd(c->repo ? c->repo : ".", c->rev ? c->rev : "HEAD", c->out, c->check_prefix);
}

static const char lint_usage[] =
    "Usage: cozy-migrate lint [--dir DIR] [--against REV] [--history]\n"
    "\n"
    "Checks the tree (migrations/, legacy-sh/, spec/) against the authoring\n"
    "contract and prints each problem as 'file:line: rule: what is wrong'.\n"
    "\n"
    "Options:\n"
    "  --dir DIR       the tree root (default .)\n"
    "  --against REV   compare shipped scripts with REV and every release tag\n"
    "  --history       check slugs against every release tag's tree\n"
    "\n"
    "Exit codes: 0 clean, 3 problems found, 8 git cannot answer (not a\n"
    "repository, shallow clone), 10 shellcheck, luacheck or git missing.\n"
    "\n"
    "Rules (the README's table is this list):\n";

/* lint --help: the usage, then every rule of the linter's own table, its
 * doc wrapped under its name: "  NAME (WHEN)" and the doc indented. */
void help_lint(void)
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

const struct option opts_lint[] = {
    TOOL_OPTS, OPT("dir", required_argument, OPT_DIR),
    OPT("against", required_argument, OPT_AGAINST), OPT("history", no_argument, OPT_HISTORY),
    END,
};

int cmd_lint(struct cli *c, int argc, char **argv, int first)
{
    int rc;
    if (no_operands(c, argc, argv, first))
        return EXIT_USAGE;
    /* luacheck checks against the globals the sandbox really gives */
    char *rc_text = sandbox_luacheck_std();
    if (!rc_text) {
        log_fatal("lint: out of memory");
        return EXIT_FAILED;
    }
    struct lint_opts lo2 = {.dir = c->r.dir ? c->r.dir : ".", .against = c->against,
                            .history = c->history, .luacheckrc = rc_text};
    rc = lint_run(&lo2);
    free(rc_text);
    return rc;
}

const char help_new[] =
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

const struct option opts_new[] = {
    TOOL_OPTS, OPT("tier", required_argument, OPT_TIER),
    OPT("on-error", required_argument, OPT_ON_ERROR), OPT("dir", required_argument, OPT_DIR),
    END,
};

int cmd_new(struct cli *c, int argc, char **argv, int first)
{
    const char *slug = first < argc ? argv[first++] : NULL;
    if (no_operands(c, argc, argv, first))
        return EXIT_USAGE;
    if (!slug) {
        log_usage(c->cmd, "expected a SLUG");
        return EXIT_USAGE;
    }
    struct scaffold_opts so = {.dir = c->r.dir ? c->r.dir : ".", .slug = slug, .tier = c->r.tier,
                               .on_error = c->on_error ? c->on_error : "abort"};
    return scaffold_new(&so);
}

const char help_import[] =
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

const struct option opts_import[] = {
    TOOL_OPTS, OPT("from", required_argument, OPT_FROM),
    OPT("names", required_argument, OPT_NAMES), OPT("dir", required_argument, OPT_DIR), END,
};

int cmd_import_legacy(struct cli *c, int argc, char **argv, int first)
{
    if (no_operands(c, argc, argv, first))
        return EXIT_USAGE;
    if (!c->from || !c->names) {
        log_usage(c->cmd, "--from DIR and --names FILE are required");
        return EXIT_USAGE;
    }
    struct import_opts io = {.from = c->from, .names = c->names, .dest = c->r.dir ? c->r.dir : "."};
    return import_legacy(&io);
}

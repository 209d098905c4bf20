/* scaffold.c: `cozy-migrate new <slug>` and `cozy-migrate stubs`.
 *
 * Owns the templates of a new migration and of its spec, of what else a
 * tree needs (revoked, legacy-map, the .gitignore line for order.d/) and of
 * the editor files (.luarc.json, .luacheckrc; the stubs' text is the
 * CLI's, from lua/modapi.c), and the refusals before writing them: an
 * invalid slug, a slug the tree already has (any tier, legacy-sh/, revoked,
 * legacy-map, order.d/), a slug any release tag carried. What it writes
 * passes `spec`, `lint` and `make install` as generated: the script reads
 * the cluster and changes nothing until its author makes it, the spec runs
 * it twice and asserts the second run moved no object's resourceVersion.
 * Must never overwrite a file an author may have edited (only the
 * generated stubs, and only when asked). */
#include "base/log.h"
#include "release/scaffold.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "base/exitcodes.h"
#include "base/fsutil.h"
#include "base/util.h"
#include "formats/manifest.h"
#include "formats/tree.h"
#include "release/gitread.h"
#include "release/order.h"

#define SCRIPT_TMPL \
    "-- cozystack-migration: on-error=%s\n" \
    "-- %s: say what cluster state this fixes and why the release needs it.\n" \
    "-- It must be safe to run twice: read first, and write only what differs.\n" \
    "local kube = require('kube')\n" \
    "local log = require('log')\n" \
    "\n" \
    "local ns = kube.get('namespaces', 'cozy-system')\n" \
    "if not ns then\n" \
    "  log.info('namespace cozy-system does not exist: nothing to do')\n" \
    "  return\n" \
    "end\n" \
    "log.info('nothing to do yet')\n"

#define SPEC_TMPL \
    "-- %1$s: runs migrations/%2$s/%1$s.lua against the disposable cluster in\n" \
    "-- KUBECONFIG (a kind cluster, or tools/testenv of cozy-migrate) as the\n" \
    "-- runner does, and proves it safe to run twice: the second run changes no\n" \
    "-- object. The harness (support.*) ships with cozy-migrate.\n" \
    "local h = require('support.helpers')\n" \
    "local cluster = require('support.cluster')\n" \
    "local migration = require('support.migration')\n" \
    "\n" \
    "local script = migration.beside(debug.getinfo(1, 'S').source, '%2$s', '%1$s')\n" \
    "\n" \
    "describe('%1$s', function()\n" \
    "  if not h.has_cluster() then\n" \
    "    pending('needs a disposable cluster in KUBECONFIG (a kind cluster, or tools/testenv)')\n" \
    "    return\n" \
    "  end\n" \
    "  teardown(function() cluster.cleanup() end)\n" \
    "\n" \
    "  it('runs, and a second run changes nothing', function()\n" \
    "    -- Arrange here the state this migration fixes, in a namespace of the spec:\n" \
    "    --   local ns = cluster.namespace('case')\n" \
    "    --   cluster.apply({ apiVersion = 'v1', kind = 'ConfigMap', metadata = { name = 'x' } }, ns)\n" \
    "    local first = migration.assert_idempotent(script)\n" \
    "    -- Assert here what the first run changed (first.journal lists its writes).\n" \
    "    assert.are.equal(0, first.journal.writes)\n" \
    "  end)\n" \
    "end)\n"

#define LEGACY_MAP_TEXT \
    "# The legacy shell migrations of legacy-sh/, one 'N slug' a line: the old\n" \
    "# number of each (cozy-migrate import-legacy writes it). None yet.\n"

#define GITIGNORE_LINE "/migrations/order.d/"
#define GITIGNORE_TEXT \
    "# generated at build time from the release tags (cozy-migrate order), never committed\n" \
    GITIGNORE_LINE "\n"

#define META_DIR ".cozy-migrate/meta"

#define LUARC_TEXT \
    "{\n" \
    "  \"runtime.version\": \"Lua 5.4\",\n" \
    "  \"workspace.library\": [\"" META_DIR "\"],\n" \
    "  \"workspace.checkThirdParty\": false,\n" \
    "  \"diagnostics.globals\": [\"describe\", \"it\", \"pending\", \"setup\", \"teardown\",\n" \
    "    \"before_each\", \"after_each\", \"finally\", \"insulate\", \"expose\", \"spy\", \"stub\",\n" \
    "    \"mock\", \"lazy_setup\", \"lazy_teardown\", \"strict_setup\", \"strict_teardown\"]\n" \
    "}\n"

#define LUACHECK_HEAD \
    "-- luacheck for this tree, written by `cozy-migrate new`: migrations see only\n" \
    "-- the sandbox's globals (what `cozy-migrate lint` checks them with), specs\n" \
    "-- run under busted with the whole of Lua.\n"

#define LUACHECK_TAIL \
    "files['spec'] = { std = 'max+busted' }\n" \
    "exclude_files = { '" META_DIR "' }\n"

static int in_list(const struct slug_list *l, const char *slug)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->slug[i], slug) == 0)
            return l->line[i];
    return 0;
}

/* Whether a release tag ever shipped o's slug: 0, or an exit code said. */
static int shipped_before(const struct scaffold_opts *o)
{
    struct buf err = BUF_INIT;
    struct git_repo g;
    int gr = git_open(o->dir, &g, &err);
    if (gr == GIT_MISSING) {
        log_fatal("new: git is not installed (needed to check the slug "
                "against release history)");
        buf_release(&err);
        return EXIT_TOOL;
    }
    if (gr != GIT_OK) {
        buf_release(&err);
        return 0; /* no history to reuse a slug from */
    }
    struct rtag *tags;
    size_t n;
    int rc = 0;
    if (git_release_tags(&g, NULL, NULL, &tags, &n, &err) != 0) {
        log_fatal("new: %s", buf_str(&err));
        buf_release(&err);
        git_close(&g);
        return EXIT_HISTORY;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct rev_script *s;
        size_t ns;
        int r = order_scripts_at(&g, tags[i].name, &s, &ns, &err);
        if (r == EXIT_HISTORY) {
            log_fatal("new: %s", buf_str(&err));
            rc = EXIT_HISTORY;
            break;
        }
        if (r != 0)
            continue; /* a broken tag is order's and lint's to report */
        const struct rev_script *x = order_rev_script_find(s, ns, o->slug);
        if (x) {
            log_fatal("new: slug '%s' was shipped in %s as %s: a slug is "
                    "never reused", o->slug, tags[i].name, x->path);
            rc = EXIT_RELEASED;
        }
        order_rev_scripts_free(s, ns);
    }
    git_release_tags_free(tags, n);
    git_close(&g);
    buf_release(&err);
    return rc;
}

static int taken(const struct scaffold_opts *o)
{
    char err[2048], path[4200];
    struct tree t;
    if (tree_load_scripts(o->dir, &t, err, sizeof err) != 0) {
        log_fatal("new: %s", err);
        return EXIT_PACKAGING;
    }
    const struct migration *m = tree_find(&t, o->slug);
    if (m) {
        log_fatal("new: slug '%s' already exists: %s", o->slug, m->path);
        tree_free(&t);
        return EXIT_RELEASED;
    }
    tree_free(&t);
    struct slug_list rv;
    memset(&rv, 0, sizeof rv);
    snprintf(path, sizeof path, "%s/migrations/revoked", o->dir);
    /* A tree without the list yet gets an empty one below. */
    struct buf why = BUF_INIT;
    if (fs_exists(path) && revoked_load(path, &rv, &why) != 0) {
        log_fatal("new: %s", buf_str(&why));
        buf_release(&why);
        return EXIT_PACKAGING;
    }
    int line = in_list(&rv, o->slug);
    slug_list_free(&rv);
    if (line) {
        log_fatal("new: %s:%d: slug '%s' is revoked: a slug is never reused",
                path, line, o->slug);
        return EXIT_RELEASED;
    }
    struct legacy_map lm;
    snprintf(path, sizeof path, "%s/legacy-sh/legacy-map", o->dir);
    int lr = legacy_map_load(path, &lm, &why);
    if (lr != 0)
        log_fatal("new: %s", buf_str(&why));
    buf_release(&why);
    if (lr != 0)
        return EXIT_PACKAGING;
    for (size_t i = 0; i < lm.n; i++) {
        if (strcmp(lm.e[i].slug, o->slug) == 0) {
            log_fatal("new: %s:%d: slug '%s' is a legacy migration's", path,
                    lm.e[i].line, o->slug);
            legacy_map_free(&lm);
            return EXIT_RELEASED;
        }
    }
    legacy_map_free(&lm);
    snprintf(path, sizeof path, "%s/spec/migrations/%s_spec.lua", o->dir, o->slug);
    if (fs_exists(path)) {
        log_fatal("new: %s already exists", path);
        return EXIT_RELEASED;
    }
    return shipped_before(o);
}

static int write_new(const char *path, const char *text)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    if (fs_exists(path)) {
        log_fatal("new: %s already exists", path);
        return EXIT_RELEASED;
    }
    if ((slash && fs_mkdirs(dir, 0755) != 0) || fs_write(path, text, strlen(text), 0644) != 0) {
        log_fatal("new: %s: %s", path, strerror(errno));
        return EXIT_FAILED;
    }
    return 0;
}

int scaffold_revoked(const char *dir, struct buf *err)
{
    static const char text[] =
        "# Slugs that must never run, one per line (a shipped script never changes:\n"
        "# repair is a new slug, and the faulty one goes here).\n";
    char path[4200], sub[4200];
    snprintf(path, sizeof path, "%s/migrations/revoked", dir);
    snprintf(sub, sizeof sub, "%s/migrations", dir);
    if (fs_exists(path))
        return 0;
    if (fs_mkdirs(sub, 0755) != 0 || fs_write(path, text, strlen(text), 0644) != 0) {
        buf_setf(err, "%s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Writes path (and its directory) when it is missing: 1 written, 0 there
 * already, -1 with err. */
static int write_missing(const char *path, const char *text, struct buf *err)
{
    if (fs_exists(path))
        return 0;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    if ((slash && fs_mkdirs(dir, 0755) != 0) || fs_write(path, text, strlen(text), 0644) != 0) {
        buf_setf(err, "%s: %s", path, strerror(errno));
        return -1;
    }
    return 1;
}

/* The .gitignore holds GITIGNORE_LINE (added at its end when missing). */
int scaffold_ignore_order_d(const char *dir, struct buf *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/.gitignore", dir);
    size_t len;
    char *text = util_read_file(path, &len);
    if (!text)
        return write_missing(path, GITIGNORE_TEXT, err);
    int has = 0;
    for (char *l = text; l && *l && !has;) {
        size_t n = strcspn(l, "\n");
        has = (n == strlen(GITIGNORE_LINE) && strncmp(l, GITIGNORE_LINE, n) == 0) ||
              (n == strlen(GITIGNORE_LINE) - 1 && strncmp(l, GITIGNORE_LINE, n) == 0) ||
              (n == strlen("migrations/order.d/") && strncmp(l, "migrations/order.d/", n) == 0);
        l = l[n] ? l + n + 1 : NULL;
    }
    int rc = 0;
    if (!has) {
        FILE *f = fopen(path, "a");
        int bad = !f || (len && text[len - 1] != '\n' && fputc('\n', f) == EOF) ||
                  fputs(GITIGNORE_TEXT, f) == EOF;
        if (f && fclose(f) != 0)
            bad = 1;
        if (bad) {
            buf_setf(err, "%s: %s", path, strerror(errno));
            rc = -1;
        } else {
            rc = 1;
        }
    }
    free(text);
    return rc;
}

int scaffold_editor(const char *dir, const struct editor_files *e, int refresh, struct buf *err)
{
    char path[4200];
    for (size_t i = 0; i < e->n; i++) {
        snprintf(path, sizeof path, "%s/" META_DIR "/%s.lua", dir, e->modules[i]);
        if (refresh && fs_exists(path)) {
            if (fs_write(path, e->stubs[i], strlen(e->stubs[i]), 0644) != 0) {
                buf_setf(err, "%s: %s", path, strerror(errno));
                return -1;
            }
            out_line("stubs: wrote %s", path);
            continue;
        }
        int w = write_missing(path, e->stubs[i], err);
        if (w < 0)
            return -1;
        if (w)
            out_line("stubs: wrote %s", path);
    }
    snprintf(path, sizeof path, "%s/.luarc.json", dir);
    int w = write_missing(path, LUARC_TEXT, err);
    if (w < 0)
        return -1;
    if (w)
        out_line("stubs: wrote %s", path);
    char *rc_text = malloc(strlen(LUACHECK_HEAD) + strlen(e->luacheck_std) + strlen(LUACHECK_TAIL) + 1);
    if (!rc_text) {
        buf_setf(err, "out of memory");
        return -1;
    }
    strcpy(rc_text, LUACHECK_HEAD);
    strcat(rc_text, e->luacheck_std);
    strcat(rc_text, LUACHECK_TAIL);
    snprintf(path, sizeof path, "%s/.luacheckrc", dir);
    w = write_missing(path, rc_text, err);
    free(rc_text);
    if (w < 0)
        return -1;
    if (w)
        out_line("stubs: wrote %s", path);
    return 0;
}

int scaffold_new(const struct scaffold_opts *o)
{
    struct stat st;
    int se = stat(o->dir, &st) != 0 ? errno : 0;
    if (se || !S_ISDIR(st.st_mode)) {
        log_fatal("new: --dir %s: %s (new writes into an existing tree; create it first)",
                  o->dir, se ? strerror(se) : "not a directory");
        return EXIT_USAGE;
    }
    if (!slug_valid(o->slug)) {
        log_fatal(
                "new: '%s' is not a valid slug (lower-case letters and digits in "
                "words joined by single dashes, at most %d characters)",
                o->slug, SLUG_MAX);
        return EXIT_USAGE;
    }
    int rc = taken(o);
    if (rc != 0)
        return rc;
    char script[8192], spec[8192], spath[4200], tpath[4200];
    snprintf(script, sizeof script, SCRIPT_TMPL, o->on_error, o->slug);
    snprintf(spec, sizeof spec, SPEC_TMPL, o->slug, o->tier);
    snprintf(spath, sizeof spath, "%s/migrations/%s/%s.lua", o->dir, o->tier, o->slug);
    snprintf(tpath, sizeof tpath, "%s/spec/migrations/%s_spec.lua", o->dir, o->slug);
    if ((rc = write_new(spath, script)) != 0)
        return rc;
    if ((rc = write_new(tpath, spec)) != 0)
        return rc;
    char path[4200];
    struct buf err = BUF_INIT;
    snprintf(path, sizeof path, "%s/legacy-sh/legacy-map", o->dir);
    if (scaffold_revoked(o->dir, &err) != 0 ||
        write_missing(path, LEGACY_MAP_TEXT, &err) < 0 ||
        scaffold_ignore_order_d(o->dir, &err) < 0 ||
        (o->editor && scaffold_editor(o->dir, o->editor, 0, &err) != 0)) {
        log_fatal("new: %s", buf_str(&err));
        buf_release(&err);
        return EXIT_FAILED;
    }
    buf_release(&err);
    out_line("new: wrote %s and %s", spath, tpath);
    return 0;
}

/* scaffold.c: `cozy-migrate new <slug>`.
 *
 * Owns the templates of a new migration and of its spec, and the refusals
 * before writing them: an invalid slug, a slug the tree already has (any
 * tier, legacy-sh/, revoked, legacy-map, order.d/), a slug any release tag
 * carried. The pair it writes passes `lint` and `spec` as generated: the
 * script reads the cluster and changes nothing until its author makes it,
 * the spec runs it twice and asserts the second run moved no object's
 * resourceVersion. Must never overwrite a file. */
#include "base/log.h"
#include "release/scaffold.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/exitcodes.h"
#include "base/fsutil.h"
#include "release/gitread.h"
#include "formats/manifest.h"
#include "release/order.h"
#include "formats/tree.h"

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
    "-- %1$s: runs migrations/%2$s/%1$s.lua against the cluster in KUBECONFIG\n" \
    "-- (tools/testenv locally, or a kind cluster) as the runner does, and\n" \
    "-- proves it safe to run twice: the second run changes no object.\n" \
    "local h = require('support.helpers')\n" \
    "local migration = require('support.migration')\n" \
    "\n" \
    "local script = migration.beside(debug.getinfo(1, 'S').source, '%2$s', '%1$s')\n" \
    "\n" \
    "describe('%1$s', function()\n" \
    "  if not h.has_cluster() then\n" \
    "    pending('needs a cluster in KUBECONFIG (tools/testenv up; eval \"export $(tools/testenv " \
    "env)\")')\n" \
    "    return\n" \
    "  end\n" \
    "\n" \
    "  it('runs, and a second run changes nothing', function()\n" \
    "    -- Arrange here the state this migration fixes, e.g. h.kapply({...}).\n" \
    "    local first = migration.assert_idempotent(script)\n" \
    "    -- Assert here what the first run changed (first.journal lists its writes).\n" \
    "    assert.are.equal(0, first.journal.writes)\n" \
    "  end)\n" \
    "end)\n"

static int in_list(const struct slug_list *l, const char *slug)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->slug[i], slug) == 0)
            return l->line[i];
    return 0;
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
    if (fs_exists(path) && revoked_load(path, &rv, err, sizeof err) != 0) {
        log_fatal("new: %s", err);
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
    if (legacy_map_load(path, &lm, err, sizeof err) != 0) {
        log_fatal("new: %s", err);
        return EXIT_PACKAGING;
    }
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
    struct git_repo g;
    int gr = git_open(o->dir, &g, err, sizeof err);
    if (gr == GIT_MISSING) {
        log_fatal("new: git is not installed (needed to check the slug "
                "against release history)");
        return EXIT_TOOL;
    }
    if (gr != GIT_OK)
        return 0; /* no history to reuse a slug from */
    struct rtag *tags;
    size_t n;
    int rc = 0;
    if (git_release_tags(&g, NULL, NULL, &tags, &n, err, sizeof err) != 0) {
        log_fatal("new: %s", err);
        git_close(&g);
        return EXIT_HISTORY;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct rev_script *s;
        size_t ns;
        int r = order_scripts_at(&g, tags[i].name, &s, &ns, err, sizeof err);
        if (r == EXIT_HISTORY) {
            log_fatal("new: %s", err);
            rc = EXIT_HISTORY;
            break;
        }
        if (r != 0)
            continue; /* a broken tag is order's and lint's to report */
        const struct rev_script *x = rev_script_find(s, ns, o->slug);
        if (x) {
            log_fatal("new: slug '%s' was shipped in %s as %s: a slug is "
                    "never reused", o->slug, tags[i].name, x->path);
            rc = EXIT_RELEASED;
        }
        rev_scripts_free(s, ns);
    }
    rtags_free(tags, n);
    git_close(&g);
    return rc;
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

int scaffold_revoked(const char *dir, char *err, size_t errlen)
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
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
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
    char err[4400];
    if (scaffold_revoked(o->dir, err, sizeof err) != 0) {
        log_fatal("new: %s", err);
        return EXIT_FAILED;
    }
    out_line("new: wrote %s and %s", spath, tpath);
    return 0;
}

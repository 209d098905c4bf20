/* lint_frozen.c: the frozen legacy set. `import-legacy` writes
 * legacy-sh/legacy-sha256sums, the digest of every script and lib/ file as
 * it imported them; the rule `frozen` proves the set byte for byte that
 * import, and shellcheck judges what the list covers for errors only (what
 * can break a run), never for style: those scripts may never change, so a
 * style finding in them could never be fixed and would keep a platform from
 * gating CI on lint. Without the list the legacy scripts are linted as any
 * shell script is (style too). Reads the working tree only (lint_history.c
 * holds them to git's history). */
#include "release/lint_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/exitcodes.h"
#include "base/log.h"
#include "base/util.h"
#include "formats/tree.h"

#define LIST_REL "legacy-sh/" LEGACY_DIGESTS

void lint_read_frozen(struct lint *l)
{
    char path[4200];
    struct buf err = BUF_INIT;
    snprintf(path, sizeof path, "%s/" LIST_REL, l->o->dir);
    if (digest_list_load(path, &l->digests, &l->have_digests, &err) == 0) {
        buf_release(&err);
        return;
    }
    l->have_digests = 1;
    /* "PATH:LINE: what" -> the finding's line and what */
    const char *at = strstr(buf_str(&err), LIST_REL);
    int line = 1;
    const char *what = buf_str(&err);
    if (at) {
        char *end;
        at += strlen(LIST_REL);
        if (*at == ':' && (line = (int)strtol(at + 1, &end, 10)) > 0 && *end == ':')
            what = end + 2;
        else
            line = 1;
    }
    snprintf(l->digests_err, sizeof l->digests_err, "%s", what);
    l->digests_err_line = line;
    buf_release(&err);
}

void lint_frozen_free(struct lint *l)
{
    digest_list_free(&l->digests);
}

int lint_is_frozen(const struct lint *l, const char *rel)
{
    static const char dir[] = "legacy-sh/";
    return l->have_digests && strncmp(rel, dir, sizeof dir - 1) == 0 &&
           digest_list_find(&l->digests, rel + sizeof dir - 1) != NULL;
}

/* One file of the set against its listed digest. */
static void check_file(struct lint *l, const char *rel_in_sh, const char *kind)
{
    char rel[4300], full[8400], sha[65];
    snprintf(rel, sizeof rel, "legacy-sh/%s", rel_in_sh);
    snprintf(full, sizeof full, "%s/%s", l->o->dir, rel);
    const struct digest_entry *d = digest_list_find(&l->digests, rel_in_sh);
    if (!d) {
        lint_add(l, rel, 1, "frozen", "not in " LIST_REL ", the digest list of what import-legacy "
                 "imported: the legacy set is imported once (a new migration is Lua)%s",
                 strcmp(kind, "lib") == 0 ? "; legacy-sh/lib/ is what every shell record's "
                 "lib_sha256 names" : "");
        return;
    }
    if (sha256_file(full, sha) != 0) {
        lint_add(l, rel, 1, "frozen", "cannot read it: %s", strerror(errno));
        return;
    }
    if (strcmp(sha, d->sha256) != 0)
        lint_add(l, rel, 1, "frozen", "differs from what import-legacy imported (" LIST_REL ":%d: "
                 "sha256 %.12s..., the file has %.12s...): a frozen legacy %s never changes; "
                 "repair is a new Lua migration", d->line, d->sha256, sha,
                 strcmp(kind, "lib") == 0 ? "helper" : "script");
}

int lint_rule_frozen(struct lint *l)
{
    if (*l->digests_err) {
        lint_add(l, LIST_REL, l->digests_err_line, "frozen", "%s", l->digests_err);
        return 0;
    }
    size_t nsh = 0;
    for (size_t i = 0; i < l->ns; i++)
        nsh += l->s[i].shell;
    if (!l->have_digests) {
        if (nsh)
            log_info("lint: legacy-sh/ has no %s (import-legacy writes it): its scripts are "
                     "linted as new shell scripts, style included", LEGACY_DIGESTS);
        return 0;
    }
    for (size_t i = 0; i < l->ns; i++)
        if (l->s[i].shell)
            check_file(l, l->s[i].rel + strlen("legacy-sh/"), "script");
    char lib[4200], err[2048];
    snprintf(lib, sizeof lib, "%s/legacy-sh/lib", l->o->dir);
    char **files;
    size_t nfiles;
    if (tree_list_files(lib, &files, &nfiles, err, sizeof err) != 0) {
        lint_add(l, "legacy-sh/lib", 1, "frozen", "%s", err);
        return 0;
    }
    for (size_t i = 0; i < nfiles; i++) {
        char rel[4200];
        snprintf(rel, sizeof rel, "lib/%s", files[i]);
        check_file(l, rel, "lib");
    }
    /* What the list names and the tree lacks: a script deleted at the
     * retention floor is retired (the manifest keeps its line); a lib/
     * file gone changes what every shell record ran with. */
    for (size_t i = 0; i < l->digests.n; i++) {
        const struct digest_entry *d = &l->digests.e[i];
        int is_lib = strncmp(d->path, "lib/", 4) == 0;
        int found = 0;
        if (is_lib) {
            for (size_t k = 0; k < nfiles && !found; k++)
                found = strcmp(files[k], d->path + 4) == 0;
            if (!found)
                lint_add(l, LIST_REL, d->line, "frozen", "lists legacy-sh/%s, which is gone: "
                         "legacy-sh/lib/ is what every shell record's lib_sha256 names", d->path);
        } else if (strchr(d->path, '/') || !util_ends_with(d->path, ".sh")) {
            lint_add(l, LIST_REL, d->line, "frozen", "lists %s, which is neither a legacy script "
                     "(<slug>.sh) nor a lib/ file", d->path);
        }
    }
    util_free_names(files, nfiles);
    return 0;
}

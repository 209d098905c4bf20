/* import.c: `cozy-migrate import-legacy`.
 *
 * Owns turning numbered shell migrations (files 1 .. N and the lib/ they
 * source) into legacy-sh/<slug>.sh, lib/ and legacy-map: each script byte
 * for byte, with one line inserted after the shebang, the header
 * `# cozystack-migration: on-error=abort` (a legacy script always stopped
 * the upgrade when it failed). The names file has legacy-map's own format
 * and is read with its parser. Writes the digest list of what it imported
 * (legacy-sh/legacy-sha256sums: every script and lib/ file), the proof lint
 * holds the frozen set to, and the tree's .gitignore line for order.d/. A
 * script the import is told reads a variable for its own dry run gets a
 * second header line, `dry-run=VAR`, before its digest is taken: the
 * declaration is part of what `frozen` keeps, never added later. Checks
 * everything before writing anything, and must never overwrite an existing
 * legacy set or change a byte of a script beyond those header lines. */
#include "base/log.h"
#include "base/mem.h"
#include "release/import.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "base/exitcodes.h"
#include "base/fsutil.h"
#include "base/util.h"
#include "formats/header.h"
#include "formats/manifest.h"
#include "formats/tree.h"
#include "release/scaffold.h"

#define HEADER_LINE "# cozystack-migration: on-error=abort\n"

struct item {
    long number;
    const char *slug;
    const char *dry_run_var;    /* NULL, or --dry-run-var's VAR */
    char *text;
    size_t len;
    mode_t mode;
};

static int numeric(const char *s, long *n)
{
    if (!*s || *s == '0' || strlen(s) > 9)
        return 0;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    *n = strtol(s, NULL, 10);
    return 1;
}

/* One import: the options, the names file, the numbered scripts found. */
struct import {
    const struct import_opts *o;
    struct legacy_map names;
    struct item *items;
    size_t nitems;
    long max;
    int have_lib;
    char dest[4000];            /* <dest>/legacy-sh */
    char map_path[4200];        /* its legacy-map */
};

static struct item *item_numbered(struct import *im, long k)
{
    for (size_t i = 0; i < im->nitems; i++)
        if (im->items[i].number == k)
            return &im->items[i];
    return NULL;
}

/* The numbered files and lib/ of the source directory. Returns 0 or an exit
 * code, having said why. */
static int scan_source(struct import *im)
{
    const struct import_opts *o = im->o;
    char path[4200];
    DIR *d = opendir(o->from);
    if (!d) {
        log_fatal("import-legacy: %s: %s", o->from, strerror(errno));
        return EXIT_USAGE;
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", o->from, de->d_name);
        struct stat st;
        if (stat(path, &st) != 0)
            continue;
        long n;
        if (strcmp(de->d_name, "lib") == 0 && S_ISDIR(st.st_mode)) {
            im->have_lib = 1;
            continue;
        }
        if (!S_ISREG(st.st_mode) || !numeric(de->d_name, &n)) {
            log_info("import-legacy: ignoring %s (not a numbered migration or lib/)", path);
            continue;
        }
        struct item *ni = mem_grow(im->items, im->nitems + 1, sizeof *ni);
        if (!ni) {
            log_fatal("import-legacy: out of memory");
            rc = EXIT_FAILED;
            break;
        }
        im->items = ni;
        memset(&ni[im->nitems], 0, sizeof *ni);
        ni[im->nitems].number = n;
        ni[im->nitems].mode = st.st_mode & 07777;
        im->nitems++;
        if (n > im->max)
            im->max = n;
    }
    closedir(d);
    return rc;
}

/* Every number 1 .. max, each with a name; every name with a file. */
static int check_numbers(struct import *im)
{
    const struct import_opts *o = im->o;
    for (long k = 1; k <= im->max; k++) {
        struct item *it = item_numbered(im, k);
        if (!it) {
            log_fatal("import-legacy: %s/%ld is missing: the numbered "
                      "migrations run 1 .. %ld without a gap", o->from, k, im->max);
            return EXIT_PACKAGING;
        }
        for (size_t i = 0; i < im->names.n && !it->slug; i++)
            if (im->names.e[i].number == k)
                it->slug = im->names.e[i].slug;
        if (!it->slug) {
            log_fatal("import-legacy: %s: no name for migration %ld "
                      "(%s/%ld); add a line '%ld <slug>'", o->names, k, o->from, k, k);
            return EXIT_PACKAGING;
        }
    }
    for (size_t i = 0; i < im->names.n; i++) {
        if (im->names.e[i].number > im->max) {
            log_fatal("import-legacy: %s:%d: names migration %ld, but %s/%ld "
                      "does not exist", o->names, im->names.e[i].line, im->names.e[i].number,
                      o->from, im->names.e[i].number);
            return EXIT_PACKAGING;
        }
    }
    if (im->max == 0) {
        log_fatal("import-legacy: %s holds no numbered migration", o->from);
        return EXIT_PACKAGING;
    }
    return 0;
}

/* --dry-run-var SCRIPT=VAR: SCRIPT a slug of the names file or an old
 * number, each at most once; VAR whatever the header parser takes. */
static int resolve_dry_run_vars(struct import *im)
{
    for (size_t i = 0; i < im->o->ndry_run_vars; i++) {
        const char *arg = im->o->dry_run_vars[i], *eq = strchr(arg, '=');
        char key[128], err[2048];
        snprintf(key, sizeof key, "%.*s", (int)(eq - arg), arg);
        long n = 0;
        int by_number = numeric(key, &n);
        struct item *it = NULL;
        for (size_t k = 0; k < im->nitems && !it; k++)
            if (by_number ? im->items[k].number == n : strcmp(im->items[k].slug, key) == 0)
                it = &im->items[k];
        if (!it) {
            log_fatal("import-legacy: --dry-run-var %s: '%s' is no script of %s (give its slug "
                      "or old number)", arg, key, im->o->names);
            return EXIT_USAGE;
        }
        if (it->dry_run_var) {
            log_fatal("import-legacy: --dry-run-var %s: %s (%ld) already reads %s for its dry run",
                      arg, it->slug, it->number, it->dry_run_var);
            return EXIT_USAGE;
        }
        char probe[256];
        int l = snprintf(probe, sizeof probe, HEADER_LINE "# cozystack-migration: dry-run=%s\n",
                         eq + 1);
        struct header h;
        if (l < 0 || (size_t)l >= sizeof probe ||
            header_parse("--dry-run-var", probe, (size_t)l, 0, &h, err, sizeof err) != 0) {
            log_fatal("import-legacy: --dry-run-var %s: '%s' is not a shell variable name like "
                      "MIGRATION_DRY_RUN", arg, eq + 1);
            return EXIT_USAGE;
        }
        header_free(&h);
        it->dry_run_var = eq + 1;
    }
    return 0;
}

/* Reads script k and inserts the header line (and its dry-run line) after
 * its shebang, checked with the runner's header parser. */
static int stamp_script(struct import *im, long k)
{
    char path[4200], err[2048];
    struct item *it = item_numbered(im, k);
    snprintf(path, sizeof path, "%s/%ld", im->o->from, k);
    size_t l;
    char *src = util_read_file(path, &l);
    if (!src) {
        log_fatal("import-legacy: %s: %s", path, strerror(errno));
        return EXIT_FAILED;
    }
    if (l < 2 || src[0] != '#' || src[1] != '!') {
        log_fatal("import-legacy: %s:1: no shebang line (#!/bin/bash): "
                  "the runner cannot tell how to run it", path);
        free(src);
        return EXIT_PACKAGING;
    }
    const char *nl = memchr(src, '\n', l);
    size_t head = nl ? (size_t)(nl - src) + 1 : l;
    char header[256];
    snprintf(header, sizeof header, HEADER_LINE "%s%s%s",
             it->dry_run_var ? "# cozystack-migration: dry-run=" : "",
             it->dry_run_var ? it->dry_run_var : "", it->dry_run_var ? "\n" : "");
    size_t out = l + (nl ? 0 : 1) + strlen(header);
    if (!(it->text = malloc(out + 1))) {
        free(src);
        log_fatal("import-legacy: out of memory");
        return EXIT_FAILED;
    }
    memcpy(it->text, src, head);
    size_t at = head;
    if (!nl)
        it->text[at++] = '\n';
    memcpy(it->text + at, header, strlen(header));
    at += strlen(header);
    memcpy(it->text + at, src + head, l - head);
    at += l - head;
    it->text[at] = '\0';
    it->len = at;
    free(src);
    struct header h;
    if (header_parse(path, it->text, it->len, 0, &h, err, sizeof err) != 0) {
        log_fatal("import-legacy: %s (with the inserted header)", err);
        return EXIT_PACKAGING;
    }
    header_free(&h);
    return 0;
}

/* The destination: no legacy set yet, no slug taken. */
static int check_destination(struct import *im)
{
    char err[2048];
    struct tree t;
    if (tree_load_scripts(im->o->dest, &t, err, sizeof err) != 0) {
        log_fatal("import-legacy: %s", err);
        return EXIT_PACKAGING;
    }
    int rc = 0;
    for (size_t i = 0; i < t.n && rc == 0; i++) {
        if (t.m[i].is_shell) {
            log_fatal("import-legacy: %s already holds legacy migrations (%s): import once",
                      im->dest, t.m[i].path);
            rc = EXIT_RELEASED;
        }
        for (size_t k = 0; k < im->names.n && rc == 0; k++)
            if (strcmp(im->names.e[k].slug, t.m[i].slug) == 0) {
                log_fatal("import-legacy: %s:%d: slug '%s' is taken by %s", im->o->names,
                          im->names.e[k].line, t.m[i].slug, t.m[i].path);
                rc = EXIT_RELEASED;
            }
    }
    tree_free(&t);
    if (rc != 0)
        return rc;
    struct legacy_map old;
    struct buf why = BUF_INIT;
    if (legacy_map_load(im->map_path, &old, &why) != 0) {
        log_fatal("import-legacy: %s", buf_str(&why));
        buf_release(&why);
        return EXIT_PACKAGING;
    }
    if (old.n) {
        log_fatal("import-legacy: %s already maps %zu legacy migrations: import once",
                  im->map_path, old.n);
        rc = EXIT_RELEASED;
    }
    legacy_map_free(&old);
    return rc;
}

/* legacy-map's text: "N slug" for each script, in number order. */
static int write_map(struct import *im)
{
    size_t cap = 200 + im->names.n * (SLUG_MAX + 16);
    char *map = malloc(cap);
    size_t off = 0;
    if (map) {
        off += (size_t)snprintf(map + off, cap - off,
                                "# \"N slug\": the old integer of each legacy migration "
                                "(cozy-migrate import-legacy)\n");
        for (long k = 1; k <= im->max; k++)
            off += (size_t)snprintf(map + off, cap - off, "%ld %s\n", k,
                                    item_numbered(im, k)->slug);
    }
    int rc = 0;
    if (!map || fs_write(im->map_path, map, off, 0644) != 0) {
        log_fatal("import-legacy: %s: %s", im->map_path, map ? strerror(errno) : "out of memory");
        rc = EXIT_FAILED;
    }
    free(map);
    return rc;
}

static int cmp_line(const void *a, const void *b)
{
    /* by path: what follows the digest and its two separators */
    return strcmp(*(char *const *)a + 66, *(char *const *)b + 66);
}

/* legacy-sh/legacy-sha256sums: one sha256sum line per script (as written,
 * header included) and per lib/ file, sorted by path, then read back with
 * lint's parser. 0 or an exit code. */
static int write_digests(struct import *im)
{
    char err[2048], lib[4200], path[4200];
    snprintf(lib, sizeof lib, "%s/lib", im->dest);
    snprintf(path, sizeof path, "%s/" LEGACY_DIGESTS, im->dest);
    char **files = NULL;
    size_t nfiles = 0;
    if (tree_list_files(lib, &files, &nfiles, err, sizeof err) != 0) {
        log_fatal("import-legacy: %s", err);
        return EXIT_FAILED;
    }
    size_t n = (size_t)im->max + nfiles;
    char **lines = calloc(n ? n : 1, sizeof *lines);
    int rc = lines ? 0 : EXIT_FAILED;
    char sha[65], full[8400];
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const char *rel;
        char relbuf[4200];
        if (i < (size_t)im->max) {
            struct item *it = item_numbered(im, (long)i + 1);
            snprintf(relbuf, sizeof relbuf, "%s.sh", it->slug);
            rel = relbuf;
            if (sha256_text(it->text, it->len, sha) != 0)
                rc = EXIT_FAILED;
        } else {
            snprintf(relbuf, sizeof relbuf, "lib/%s", files[i - (size_t)im->max]);
            rel = relbuf;
            snprintf(full, sizeof full, "%s/%s", im->dest, rel);
            if (sha256_file(full, sha) != 0) {
                log_fatal("import-legacy: %s: %s", full, strerror(errno));
                rc = EXIT_FAILED;
                break;
            }
        }
        size_t l = 64 + 2 + strlen(rel) + 2;
        if (rc == 0 && (lines[i] = malloc(l)))
            snprintf(lines[i], l, "%s  %s\n", sha, rel);
        else if (rc == 0)
            rc = EXIT_FAILED;
    }
    char *text = NULL;
    size_t len = 0;
    if (rc == 0) {
        qsort(lines, n, sizeof *lines, cmp_line);
        for (size_t i = 0; i < n; i++)
            len += strlen(lines[i]);
        if ((text = malloc(len + 1))) {
            size_t at = 0;
            for (size_t i = 0; i < n; i++) {
                memcpy(text + at, lines[i], strlen(lines[i]));
                at += strlen(lines[i]);
            }
            text[at] = '\0';
        } else {
            rc = EXIT_FAILED;
        }
    }
    if (rc == 0 && fs_write(path, text, len, 0644) != 0) {
        log_fatal("import-legacy: %s: %s", path, strerror(errno));
        rc = EXIT_FAILED;
    } else if (rc != 0) {
        log_fatal("import-legacy: %s: out of memory", path);
    }
    struct digest_list back;
    int present = 0;
    struct buf why = BUF_INIT;
    if (rc == 0 && (digest_list_load(path, &back, &present, &why) != 0 ||
                    back.n != n)) {
        log_fatal("import-legacy: %s: reading it back failed: %s", path,
                  present ? buf_str(&why) : "it is not there");
        rc = EXIT_FAILED;
    }
    buf_release(&why);
    if (rc == 0)
        digest_list_free(&back);
    free(text);
    for (size_t i = 0; lines && i < n; i++)
        free(lines[i]);
    free(lines);
    util_free_names(files, nfiles);
    return rc;
}

/* Everything checked: the scripts, lib/, legacy-map and the revoked list
 * the runner requires, then legacy-map read back with the runner's parser. */
static int write_import(struct import *im)
{
    if (fs_mkdirs(im->dest, 0755) != 0) {
        log_fatal("import-legacy: %s: %s", im->dest, strerror(errno));
        return EXIT_FAILED;
    }
    for (long k = 1; k <= im->max; k++) {
        struct item *it = item_numbered(im, k);
        char out[4400];
        snprintf(out, sizeof out, "%s/%s.sh", im->dest, it->slug);
        if (fs_write(out, it->text, it->len, it->mode) != 0) {
            log_fatal("import-legacy: %s: %s", out, strerror(errno));
            return EXIT_FAILED;
        }
    }
    if (im->have_lib) {
        char src[4200], lib[4200];
        snprintf(src, sizeof src, "%s/lib", im->o->from);
        snprintf(lib, sizeof lib, "%s/lib", im->dest);
        struct buf why = BUF_INIT;
        int copied = fs_copy_tree(src, lib, &why);
        if (copied != 0)
            log_fatal("import-legacy: %s", buf_str(&why));
        buf_release(&why);
        if (copied != 0)
            return EXIT_FAILED;
    }
    int rc = write_map(im);
    if (rc == 0)
        rc = write_digests(im);
    if (rc != 0)
        return rc;
    struct buf why = BUF_INIT;
    if (scaffold_revoked(im->o->dest, &why) != 0 ||
        scaffold_ignore_order_d(im->o->dest, &why) < 0) {
        log_fatal("import-legacy: %s", buf_str(&why));
        buf_release(&why);
        return EXIT_FAILED;
    }
    struct legacy_map old;
    if (legacy_map_load(im->map_path, &old, &why) != 0) {
        log_fatal("import-legacy: %s: reading it back failed: %s", im->map_path, buf_str(&why));
        buf_release(&why);
        return EXIT_FAILED;
    }
    buf_release(&why);
    size_t n = old.n;
    legacy_map_free(&old);
    if (n != (size_t)im->max) {
        log_fatal("import-legacy: %s: reading it back gave %zu migrations, not %ld", im->map_path,
                  n, im->max);
        return EXIT_FAILED;
    }
    char dry[80] = "";
    if (im->o->ndry_run_vars)
        snprintf(dry, sizeof dry, "; %zu declaring the variable of their own dry run",
                 im->o->ndry_run_vars);
    out_line("import-legacy: %ld migrations into %s%s%s", im->max, im->dest,
             im->have_lib ? ", with lib/" : "", dry);
    return 0;
}

int import_legacy(const struct import_opts *o)
{
    struct buf err = BUF_INIT;
    struct import im = {.o = o};
    size_t len;
    char *text = util_read_file(o->names, &len);
    if (!text) {
        log_fatal("import-legacy: %s: %s", o->names, strerror(errno));
        return EXIT_USAGE;
    }
    int rc = legacy_map_parse(o->names, text, len, &im.names, &err);
    free(text);
    if (rc != 0)
        log_fatal("import-legacy: %s", buf_str(&err));
    buf_release(&err);
    if (rc != 0)
        return EXIT_PACKAGING;
    snprintf(im.dest, sizeof im.dest, "%s/legacy-sh", o->dest);
    snprintf(im.map_path, sizeof im.map_path, "%s/legacy-map", im.dest);
    rc = scan_source(&im);
    if (rc == 0)
        rc = check_numbers(&im);
    if (rc == 0)
        rc = resolve_dry_run_vars(&im);
    for (long k = 1; rc == 0 && k <= im.max; k++)
        rc = stamp_script(&im, k);
    if (rc == 0)
        rc = check_destination(&im);
    if (rc == 0)
        rc = write_import(&im);
    for (size_t i = 0; i < im.nitems; i++)
        free(im.items[i].text);
    free(im.items);
    legacy_map_free(&im.names);
    return rc;
}

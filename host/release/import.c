/* import.c: `cozy-migrate import-legacy`.
 *
 * Owns turning numbered shell migrations (files 1 .. N and the lib/ they
 * source) into legacy-sh/<slug>.sh, lib/ and legacy-map: each script byte
 * for byte, with one line inserted after the shebang, the header
 * `# cozystack-migration: on-error=abort` (a legacy script always stopped
 * the upgrade when it failed). The names file has legacy-map's own format
 * and is read with its parser. Checks everything before writing anything,
 * and must never overwrite an existing legacy set or change a byte of a
 * script beyond that one line. */
#include "base/log.h"
#include "release/import.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/exitcodes.h"
#include "release/scaffold.h"
#include "base/fsutil.h"
#include "formats/header.h"
#include "formats/manifest.h"
#include "formats/tree.h"
#include "base/util.h"

#define HEADER_LINE "# cozystack-migration: on-error=abort\n"

struct item {
    long number;
    const char *slug;
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

int import_legacy(const struct import_opts *o)
{
    char err[2048], path[4200];
    struct legacy_map names;
    size_t len;
    char *text = read_file(o->names, &len);
    if (!text) {
        log_fatal("import-legacy: %s: %s", o->names, strerror(errno));
        return EXIT_USAGE;
    }
    int rc = legacy_map_parse(o->names, text, len, &names, err, sizeof err);
    free(text);
    if (rc != 0) {
        log_fatal("import-legacy: %s", err);
        return EXIT_PACKAGING;
    }
    struct item *items = NULL;
    size_t nitems = 0;
    long max = 0;
    int have_lib = 0;
    rc = 0;
    DIR *d = opendir(o->from);
    if (!d) {
        log_fatal("import-legacy: %s: %s", o->from, strerror(errno));
        legacy_map_free(&names);
        return EXIT_USAGE;
    }
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
            have_lib = 1;
            continue;
        }
        if (!S_ISREG(st.st_mode) || !numeric(de->d_name, &n)) {
            log_info("import-legacy: ignoring %s (not a numbered migration or lib/)",
                    path);
            continue;
        }
        struct item *ni = realloc(items, (nitems + 1) * sizeof *ni);
        if (!ni) {
            log_fatal("import-legacy: out of memory");
            rc = EXIT_FAILED;
            break;
        }
        items = ni;
        memset(&items[nitems], 0, sizeof *items);
        items[nitems].number = n;
        items[nitems].mode = st.st_mode & 07777;
        nitems++;
        if (n > max)
            max = n;
    }
    closedir(d);
    /* Every number 1 .. max, each with a name; every name with a file. */
    for (long k = 1; rc == 0 && k <= max; k++) {
        struct item *it = NULL;
        for (size_t i = 0; i < nitems && !it; i++)
            if (items[i].number == k)
                it = &items[i];
        if (!it) {
            log_fatal("import-legacy: %s/%ld is missing: the numbered "
                    "migrations run 1 .. %ld without a gap", o->from, k, max);
            rc = EXIT_PACKAGING;
            break;
        }
        for (size_t i = 0; i < names.n && !it->slug; i++)
            if (names.e[i].number == k)
                it->slug = names.e[i].slug;
        if (!it->slug) {
            log_fatal("import-legacy: %s: no name for migration %ld "
                    "(%s/%ld); add a line '%ld <slug>'", o->names, k, o->from, k, k);
            rc = EXIT_PACKAGING;
        }
    }
    for (size_t i = 0; rc == 0 && i < names.n; i++) {
        if (names.e[i].number > max) {
            log_fatal("import-legacy: %s:%d: names migration %ld, but %s/%ld "
                    "does not exist", o->names, names.e[i].line, names.e[i].number, o->from,
                    names.e[i].number);
            rc = EXIT_PACKAGING;
        }
    }
    if (rc == 0 && max == 0) {
        log_fatal("import-legacy: %s holds no numbered migration", o->from);
        rc = EXIT_PACKAGING;
    }
    /* Read each script and insert the header line after the shebang. */
    for (long k = 1; rc == 0 && k <= max; k++) {
        struct item *it = NULL;
        for (size_t i = 0; i < nitems && !it; i++)
            if (items[i].number == k)
                it = &items[i];
        snprintf(path, sizeof path, "%s/%ld", o->from, k);
        size_t l;
        char *src = read_file(path, &l);
        if (!src) {
            log_fatal("import-legacy: %s: %s", path, strerror(errno));
            rc = EXIT_FAILED;
            break;
        }
        if (l < 2 || src[0] != '#' || src[1] != '!') {
            log_fatal("import-legacy: %s:1: no shebang line (#!/bin/bash): "
                    "the runner cannot tell how to run it", path);
            free(src);
            rc = EXIT_PACKAGING;
            break;
        }
        const char *nl = memchr(src, '\n', l);
        size_t head = nl ? (size_t)(nl - src) + 1 : l;
        size_t out = l + (nl ? 0 : 1) + strlen(HEADER_LINE);
        if (!(it->text = malloc(out + 1))) {
            free(src);
            rc = EXIT_FAILED;
            break;
        }
        memcpy(it->text, src, head);
        size_t at = head;
        if (!nl)
            it->text[at++] = '\n';
        memcpy(it->text + at, HEADER_LINE, strlen(HEADER_LINE));
        at += strlen(HEADER_LINE);
        memcpy(it->text + at, src + head, l - head);
        at += l - head;
        it->text[at] = '\0';
        it->len = at;
        free(src);
        struct header h;
        if (header_parse(path, it->text, it->len, 0, &h, err, sizeof err) != 0) {
            log_fatal("import-legacy: %s (with the inserted header)", err);
            rc = EXIT_PACKAGING;
            break;
        }
        header_free(&h);
    }
    /* The destination: no legacy set yet, no slug taken. */
    char dest[4000];
    snprintf(dest, sizeof dest, "%s/legacy-sh", o->dest);
    struct tree t;
    if (rc == 0) {
        if (tree_load_scripts(o->dest, &t, err, sizeof err) != 0) {
            log_fatal("import-legacy: %s", err);
            rc = EXIT_PACKAGING;
        } else {
            for (size_t i = 0; i < t.n && rc == 0; i++) {
                if (t.m[i].is_shell) {
                    log_fatal("import-legacy: %s already holds legacy "
                            "migrations (%s): import once", dest, t.m[i].path);
                    rc = EXIT_RELEASED;
                }
                for (size_t k = 0; k < names.n && rc == 0; k++)
                    if (strcmp(names.e[k].slug, t.m[i].slug) == 0) {
                        log_fatal("import-legacy: %s:%d: slug '%s' is taken "
                                "by %s", o->names, names.e[k].line, t.m[i].slug, t.m[i].path);
                        rc = EXIT_RELEASED;
                    }
            }
            tree_free(&t);
        }
    }
    struct legacy_map old;
    snprintf(path, sizeof path, "%s/legacy-map", dest);
    if (rc == 0) {
        if (legacy_map_load(path, &old, err, sizeof err) != 0) {
            log_fatal("import-legacy: %s", err);
            rc = EXIT_PACKAGING;
        } else {
            if (old.n) {
                log_fatal("import-legacy: %s already maps %zu legacy "
                        "migrations: import once", path, old.n);
                rc = EXIT_RELEASED;
            }
            legacy_map_free(&old);
        }
    }
    char lib[4200];
    snprintf(lib, sizeof lib, "%s/lib", dest);
    if (rc == 0 && fs_mkdirs(dest, 0755) != 0) {
        log_fatal("import-legacy: %s: %s", dest, strerror(errno));
        rc = EXIT_FAILED;
    }
    for (long k = 1; rc == 0 && k <= max; k++) {
        for (size_t i = 0; i < nitems; i++) {
            if (items[i].number != k)
                continue;
            char out[4400];
            snprintf(out, sizeof out, "%s/%s.sh", dest, items[i].slug);
            if (fs_write(out, items[i].text, items[i].len, items[i].mode) != 0) {
                log_fatal("import-legacy: %s: %s", out, strerror(errno));
                rc = EXIT_FAILED;
            }
        }
    }
    if (rc == 0 && have_lib) {
        char src[4200];
        snprintf(src, sizeof src, "%s/lib", o->from);
        if (fs_copy_tree(src, lib, err, sizeof err) != 0) {
            log_fatal("import-legacy: %s", err);
            rc = EXIT_FAILED;
        }
    }
    if (rc == 0) {
        size_t cap = 200 + names.n * (SLUG_MAX + 16);
        char *map = malloc(cap);
        size_t off = 0;
        if (map) {
            off += (size_t)snprintf(map + off, cap - off,
                                    "# \"N slug\": the old integer of each legacy migration "
                                    "(cozy-migrate import-legacy)\n");
            for (long k = 1; k <= max; k++)
                for (size_t i = 0; i < nitems; i++)
                    if (items[i].number == k)
                        off += (size_t)snprintf(map + off, cap - off, "%ld %s\n", k,
                                                items[i].slug);
        }
        if (!map || fs_write(path, map, off, 0644) != 0) {
            log_fatal("import-legacy: %s: %s", path,
                    map ? strerror(errno) : "out of memory");
            rc = EXIT_FAILED;
        }
        free(map);
    }
    /* The tree it starts needs the revoked list the runner requires. */
    if (rc == 0 && scaffold_revoked(o->dest, err, sizeof err) != 0) {
        log_fatal("import-legacy: %s", err);
        rc = EXIT_FAILED;
    }
    if (rc == 0) {
        /* Read back with the runner's parser. */
        if (legacy_map_load(path, &old, err, sizeof err) != 0 || old.n != (size_t)max) {
            log_fatal("import-legacy: %s: reading it back failed: %s", path,
                    err);
            rc = EXIT_FAILED;
        } else {
            legacy_map_free(&old);
            out_line("import-legacy: %ld migrations into %s%s", max, dest,
                   have_lib ? ", with lib/" : "");
        }
    }
    for (size_t i = 0; i < nitems; i++)
        free(items[i].text);
    free(items);
    legacy_map_free(&names);
    return rc;
}

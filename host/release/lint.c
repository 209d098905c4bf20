/* lint.c: `cozy-migrate lint`, every rule of the authoring contract.
 *
 * Owns the rules and their names (slug, header, duplicate, requires, cycle,
 * batch, tier, spec, legacy, revoked, order-d, history, changed, shebang,
 * shellcheck, luacheck) and the one output format "file:line: rule: what".
 * Reads the working tree through the runner's parsers (slug_valid,
 * header_parse, revoked/legacy-map/batch loaders) and git through
 * gitread.c/order.c, so a script the linter passes is one the runner
 * loads. Must never modify the tree and never pass a check it could not
 * run: a missing tool or an unanswerable git question is an error, not a
 * silent skip. */
#include "base/log.h"
#include "release/lint.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/exitcodes.h"
#include "release/gitread.h"
#include "formats/header.h"
#include "formats/manifest.h"
#include "release/order.h"
#include "release/proc.h"
#include "base/util.h"

const char lint_luacheckrc[] =
    "-- The migration sandbox's globals (host/sandbox.c): no io, no debug, no\n"
    "-- package, no dofile/loadfile/collectgarbage; os keeps time, clock, date,\n"
    "-- difftime; string loses dump.\n"
    "std = 'cozy_sandbox'\n"
    "stds.cozy_sandbox = {\n"
    "  read_globals = {\n"
    "    'assert', 'error', 'getmetatable', 'ipairs', 'load', 'next', 'pairs', 'pcall',\n"
    "    'print', 'rawequal', 'rawget', 'rawlen', 'rawset', 'require', 'select',\n"
    "    'setmetatable', 'tonumber', 'tostring', 'type', 'xpcall', 'warn', '_G', '_VERSION',\n"
    "    string = { fields = { 'byte', 'char', 'find', 'format', 'gmatch', 'gsub', 'len',\n"
    "      'lower', 'match', 'rep', 'reverse', 'sub', 'upper', 'pack', 'packsize', 'unpack' } },\n"
    "    os = { fields = { 'time', 'clock', 'date', 'difftime' } },\n"
    "    table = { other_fields = true }, math = { other_fields = true },\n"
    "    utf8 = { other_fields = true }, coroutine = { other_fields = true },\n"
    "  },\n"
    "}\n"
    "max_line_length = false\n";

struct finding {
    char *file;
    int line;
    const char *rule;
    char *msg;
    size_t seq;
};

struct script {
    char slug[256];
    char rel[600];              /* path relative to the tree root */
    const char *tier;           /* "pre-apply", "background", "legacy" */
    int shell;
    int slug_ok;
    struct header h;
    int has_header;
    int requires_line;
    long batch;                 /* 0 legacy, 1+ tag index, LONG_MAX-ish untagged */
    int dup;
    char oid[65];
};

struct lint {
    const struct lint_opts *o;
    struct finding *f;
    size_t nf;
    struct script *s;
    size_t ns;
    int oom;
};

static void display(const struct lint *l, const char *rel, char *buf, size_t n)
{
    if (strcmp(l->o->dir, ".") == 0)
        snprintf(buf, n, "%s", rel);
    else
        snprintf(buf, n, "%s/%s", l->o->dir, rel);
}

static void add(struct lint *l, const char *rel, int line, const char *rule, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void add(struct lint *l, const char *rel, int line, const char *rule, const char *fmt, ...)
{
    char msg[2048], file[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* One finding, one line. */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    display(l, rel, file, sizeof file);
    struct finding *nf = realloc(l->f, (l->nf + 1) * sizeof *nf);
    if (!nf) {
        l->oom = 1;
        return;
    }
    l->f = nf;
    nf[l->nf].file = strdup(file);
    nf[l->nf].msg = strdup(msg);
    nf[l->nf].line = line < 1 ? 1 : line;
    nf[l->nf].rule = rule;
    nf[l->nf].seq = l->nf;
    if (!nf[l->nf].file || !nf[l->nf].msg) {
        free(nf[l->nf].file);
        free(nf[l->nf].msg);
        l->oom = 1;
        return;
    }
    l->nf++;
}

static int cmp_finding(const void *a, const void *b)
{
    const struct finding *x = a, *y = b;
    int c = strcmp(x->file, y->file);
    if (c)
        return c;
    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static struct script *find_script(struct lint *l, const char *slug)
{
    for (size_t i = 0; i < l->ns; i++)
        if (!l->s[i].dup && strcmp(l->s[i].slug, slug) == 0)
            return &l->s[i];
    return NULL;
}

/* "PATH:LINE: what" or "PATH: what" (from a runner parser) -> line, what. */
static const char *split_err(const char *err, const char *path, int *line)
{
    size_t pl = strlen(path);
    *line = 1;
    if (strncmp(err, path, pl) != 0 || err[pl] != ':')
        return err;
    const char *p = err + pl + 1;
    if (*p >= '0' && *p <= '9') {
        char *end;
        long n = strtol(p, &end, 10);
        if (*end == ':') {
            *line = (int)n;
            p = end + 1;
        }
    }
    while (*p == ' ')
        p++;
    return p;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a > b && strcmp(s + a - b, suf) == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of the regular files directly in dir (none when absent);
 * with dots, dotfiles too. */
static char **list_files(const char *dir, size_t *n, int dots)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    char **names = NULL;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' && (!dots || !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")))
            continue;
        char full[4400];
        snprintf(full, sizeof full, "%s/%s", dir, de->d_name);
        struct stat st;
        if (stat(full, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        char **nn = realloc(names, (*n + 1) * sizeof *nn);
        if (!nn)
            break;
        names = nn;
        if (!(names[*n] = strdup(de->d_name)))
            break;
        (*n)++;
    }
    closedir(d);
    if (*n > 1)
        qsort(names, *n, sizeof *names, cmp_str);
    return names;
}

static void free_list(char **l, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(l[i]);
    free(l);
}

/* The line of the requires header key, for pointing at it. */
static int requires_line(const char *text)
{
    int line = 1;
    for (const char *p = text; *p; line++) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char buf[1024];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), p);
        char *tag = strstr(buf, "cozystack-migration:");
        if (tag && strstr(tag, "requires"))
            return line;
        if (!nl)
            break;
        p = nl + 1;
    }
    return 1;
}

static int shebang_ok(const char *text)
{
    if (strncmp(text, "#!", 2) != 0)
        return 0;
    char line[256];
    size_t n = strcspn(text + 2, "\n");
    snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), text + 2);
    char *save = NULL, *w = strtok_r(line, " \t\r", &save);
    if (!w)
        return 0;
    const char *base = strrchr(w, '/') ? strrchr(w, '/') + 1 : w;
    if (strcmp(base, "env") == 0) {
        w = strtok_r(NULL, " \t\r", &save);
        base = w ? w : "";
    }
    return strcmp(base, "bash") == 0 || strcmp(base, "sh") == 0;
}

static void scan_dir(struct lint *l, const char *reldir, const char *tier, int shell)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", l->o->dir, reldir);
    size_t n;
    char **names = list_files(dir, &n, 1);
    const char *ext = shell ? ".sh" : ".lua";
    for (size_t i = 0; i < n; i++) {
        char rel[600];
        snprintf(rel, sizeof rel, "%s/%s", reldir, names[i]);
        /* The runner refuses them (tree.c): so does the linter. */
        if (names[i][0] == '.') {
            add(l, rel, 1, "slug", "not a migration (a dotfile): %s/ holds only <slug>%s%s",
                reldir, ext, shell ? ", legacy-map and lib/" : "");
            continue;
        }
        if (!ends_with(names[i], ext)) {
            if (!shell)
                add(l, rel, 1, "slug", "not a migration: a script is <slug>.lua");
            continue;
        }
        struct script *ns = realloc(l->s, (l->ns + 1) * sizeof *ns);
        if (!ns) {
            l->oom = 1;
            break;
        }
        l->s = ns;
        struct script *s = &l->s[l->ns++];
        memset(s, 0, sizeof *s);
        snprintf(s->slug, sizeof s->slug, "%.*s", (int)(strlen(names[i]) - strlen(ext)), names[i]);
        snprintf(s->rel, sizeof s->rel, "%s", rel);
        s->tier = tier;
        s->shell = shell;
        s->slug_ok = slug_valid(s->slug);
        if (!s->slug_ok) {
            if (strlen(s->slug) > SLUG_MAX)
                add(l, rel, 1, "slug", "'%s' is %zu characters long; a slug has at most %d",
                    s->slug, strlen(s->slug), SLUG_MAX);
            else
                add(l, rel, 1, "slug",
                    "'%s' is not a valid slug (lower-case letters and digits in words joined by "
                    "single dashes)", s->slug);
        }
        struct script *dup = NULL;
        for (size_t k = 0; k + 1 < l->ns && !dup; k++)
            if (strcmp(l->s[k].slug, s->slug) == 0)
                dup = &l->s[k];
        if (dup) {
            add(l, rel, 1, "duplicate", "slug '%s' is also %s: a slug names one script", s->slug,
                dup->rel);
            s->dup = 1;
        }
        char full[4400];
        snprintf(full, sizeof full, "%s/%s", l->o->dir, rel);
        size_t len;
        char *text = read_file(full, &len);
        if (!text) {
            add(l, rel, 1, "header", "cannot read: %s", strerror(errno));
            continue;
        }
        char path[1024], err[1024];
        display(l, rel, path, sizeof path);
        if (header_parse(path, text, len, !shell, &s->h, err, sizeof err) != 0) {
            int line;
            const char *what = split_err(err, path, &line);
            add(l, rel, line, "header", "%s", what);
        } else {
            s->has_header = 1;
            s->requires_line = requires_line(text);
        }
        if (shell && !shebang_ok(text))
            add(l, rel, 1, "shebang",
                "a shell migration starts with a bash or sh shebang (#!/bin/bash)");
        free(text);
    }
    free_list(names, n);
}

/* Runs a tool over files (relative to the tree root) and turns each
 * "file:line:col: message" line of its output into a finding. */
static int run_tool(struct lint *l, const char *rule, const char *const *pre, char **files,
                    size_t nfiles, const char *install)
{
    if (!nfiles)
        return 0;
    const char **argv = calloc(nfiles + 16, sizeof *argv);
    if (!argv) {
        l->oom = 1;
        return 0;
    }
    size_t a = 0;
    for (; pre[a]; a++)
        argv[a] = pre[a];
    for (size_t i = 0; i < nfiles; i++)
        argv[a++] = files[i];
    argv[a] = NULL;
    struct proc_result res;
    int rc = proc_run(argv, l->o->dir, &res);
    free(argv);
    if (rc != 0) {
        log_fatal("lint: %s %s (%s)", pre[0],
                res.not_found ? "is not installed" : "could not run", install);
        proc_result_free(&res);
        return EXIT_TOOL;
    }
    size_t found = 0;
    char *save = NULL;
    for (char *line = strtok_r(res.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':');
        char *end = NULL;
        long ln = c1 ? strtol(c1 + 1, &end, 10) : 0;
        if (!c1 || !end || *end != ':' || ln < 1)
            continue;
        char *msg = end + 1;
        char *c3;
        long col = strtol(msg, &c3, 10);
        if (c3 != msg && *c3 == ':' && col >= 0)
            msg = c3 + 1;
        while (*msg == ' ')
            msg++;
        *c1 = '\0';
        add(l, line, (int)ln, rule, "%s", msg);
        found++;
    }
    if (res.status != 0 && !found) {
        char first[400];
        proc_first_line(*res.err ? res.err : res.out, first, sizeof first);
        add(l, files[0], 1, rule, "%s exited %d: %s", pre[0], res.status, first);
    }
    proc_result_free(&res);
    return 0;
}

static int run_linters(struct lint *l)
{
    char **sh = NULL, **lua = NULL, **lib = NULL;
    size_t nsh = 0, nlua = 0, nlib = 0;
    for (size_t i = 0; i < l->ns; i++) {
        char ***arr = l->s[i].shell ? &sh : &lua;
        size_t *cnt = l->s[i].shell ? &nsh : &nlua;
        char **na = realloc(*arr, (*cnt + 1) * sizeof *na);
        if (!na || !(na[*cnt] = strdup(l->s[i].rel))) {
            if (na)
                *arr = na;
            l->oom = 1;
            break;
        }
        *arr = na;
        (*cnt)++;
    }
    char libdir[4200];
    snprintf(libdir, sizeof libdir, "%s/legacy-sh/lib", l->o->dir);
    size_t nnames;
    char **names = list_files(libdir, &nnames, 0);
    for (size_t i = 0; i < nnames; i++) {
        char **na = realloc(lib, (nlib + 1) * sizeof *na);
        if (!na) {
            l->oom = 1;
            break;
        }
        lib = na;
        char rel[600];
        snprintf(rel, sizeof rel, "legacy-sh/lib/%s", names[i]);
        if (!(lib[nlib] = strdup(rel))) {
            l->oom = 1;
            break;
        }
        nlib++;
    }
    free_list(names, nnames);
    int rc = 0;
    /* -x -P SCRIPTDIR: scripts source lib/ relative to legacy-sh/, which
     * is the directory the runner starts them in. */
    static const char *const shc[] = {"shellcheck", "-f", "gcc", "-x", "-P", "SCRIPTDIR", NULL};
    static const char *const shc_lib[] = {"shellcheck", "-f", "gcc", "-s", "bash", "-x", "-P",
                                          "SCRIPTDIR", NULL};
    rc = run_tool(l, "shellcheck", shc, sh, nsh, "apt-get install shellcheck");
    if (rc == 0)
        rc = run_tool(l, "shellcheck", shc_lib, lib, nlib, "apt-get install shellcheck");
    if (rc == 0 && nlua) {
        char cfg[] = "/tmp/cozy-luacheckrc-XXXXXX";
        int fd = mkstemp(cfg);
        size_t len = strlen(lint_luacheckrc);
        if (fd < 0 || write(fd, lint_luacheckrc, len) != (ssize_t)len) {
            log_fatal("lint: %s: %s", cfg, strerror(errno));
            rc = EXIT_FAILED;
        } else {
            const char *const luac[] = {"luacheck", "--no-color", "--formatter", "plain",
                                        "--codes", "--config", cfg, NULL};
            rc = run_tool(l, "luacheck", luac, lua, nlua, "apt-get install lua-check");
        }
        if (fd >= 0) {
            close(fd);
            unlink(cfg);
        }
    }
    free_list(sh, nsh);
    free_list(lua, nlua);
    free_list(lib, nlib);
    return rc;
}

/* Reports each requires cycle once, named from its first member. */
static void check_cycles(struct lint *l)
{
    size_t n = l->ns;
    int *state = calloc(n ? n : 1, sizeof *state);   /* 0 new, 1 on stack, 2 done */
    size_t *stack = calloc(n ? n : 1, sizeof *stack);
    size_t *edge = calloc(n ? n : 1, sizeof *edge);
    char *reported = calloc(n ? n : 1, 1);
    if (!state || !stack || !edge || !reported) {
        l->oom = 1;
        goto out;
    }
    for (size_t root = 0; root < n; root++) {
        if (state[root] || l->s[root].dup)
            continue;
        size_t sp = 0;
        stack[sp++] = root;
        state[root] = 1;
        edge[root] = 0;
        while (sp) {
            size_t v = stack[sp - 1];
            struct script *s = &l->s[v];
            if (!s->has_header || edge[v] >= s->h.nrequires) {
                state[v] = 2;
                sp--;
                continue;
            }
            struct script *t = find_script(l, s->h.requires[edge[v]++]);
            if (!t)
                continue;
            size_t w = (size_t)(t - l->s);
            if (state[w] == 0) {
                state[w] = 1;
                edge[w] = 0;
                stack[sp++] = w;
            } else if (state[w] == 1) {
                size_t from = sp;
                while (from > 0 && stack[from - 1] != w)
                    from--;
                from--;
                size_t first = from;
                int seen = 0;
                for (size_t k = from; k < sp; k++) {
                    if (reported[stack[k]])
                        seen = 1;
                    if (strcmp(l->s[stack[k]].slug, l->s[stack[first]].slug) < 0)
                        first = k;
                }
                if (seen)
                    continue;
                char chain[1024];
                size_t off = 0, len = sp - from;
                for (size_t k = 0; k <= len && off < sizeof chain; k++) {
                    size_t idx = stack[from + (first - from + k) % len];
                    off += (size_t)snprintf(chain + off, sizeof chain - off, "%s%s",
                                            k ? " -> " : "", l->s[idx].slug);
                }
                for (size_t k = from; k < sp; k++)
                    reported[stack[k]] = 1;
                const struct script *fs = &l->s[stack[first]];
                add(l, fs->rel, fs->requires_line, "cycle", "requires form a cycle: %s", chain);
            }
        }
    }
out:
    free(state);
    free(stack);
    free(edge);
    free(reported);
}

/* Working-tree files below rel (relative to the tree root), dotfiles too,
 * appended to *list. */
static void files_below(struct lint *l, const char *rel, char ***list, size_t *n)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", l->o->dir, rel);
    char **names;
    size_t nn;
    if (list_dir_all(dir, &names, &nn) != 0)
        return;
    for (size_t i = 0; i < nn && !l->oom; i++) {
        char sub[1200], full[5500];
        snprintf(sub, sizeof sub, "%s/%s", rel, names[i]);
        snprintf(full, sizeof full, "%s/%s", l->o->dir, sub);
        struct stat st;
        if (stat(full, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            files_below(l, sub, list, n);
            continue;
        }
        char **nl = realloc(*list, (*n + 1) * sizeof *nl);
        if (!nl || !(nl[*n] = strdup(sub))) {
            if (nl)
                *list = nl;
            l->oom = 1;
            break;
        }
        *list = nl;
        (*n)++;
    }
    free_names(names, nn);
}

/* legacy-sh/lib/ is frozen like the scripts (its digest is every shell
 * record's lib_sha256): byte for byte the lib/ of every release tag that
 * shipped one, and of REV with --against: no file changed, added or
 * removed. Findings under the rule `changed`. An exit code. */
static int check_lib(struct lint *l, const struct git_repo *g, const struct rtag *tags,
                     size_t ntags, const char *against, char *err, size_t errlen)
{
    static const char *const libdir[] = {"legacy-sh/lib", NULL};
    char **now = NULL;
    size_t nnow = 0;
    files_below(l, "legacy-sh/lib", &now, &nnow);
    char(*oids)[65] = calloc(nnow ? nnow : 1, sizeof *oids);
    char *reported = calloc(nnow + 1, 1);
    int rc = 0;
    if (!oids || !reported) {
        l->oom = 1;
    } else if (nnow && git_hash_files(g, (const char *const *)now, nnow, oids, err, errlen) != 0) {
        log_fatal("lint: %s", err);
        rc = EXIT_HISTORY;
    }
    int gone_reported = 0;
    for (long t = against ? -1 : 0; rc == 0 && !l->oom && t < (long)ntags; t++) {
        const char *rev = t < 0 ? against : tags[t].name;
        struct git_entry *e;
        size_t ne;
        if (git_ls_tree(g, rev, libdir, &e, &ne, err, errlen) != 0) {
            log_fatal("lint: %s", err);
            rc = EXIT_HISTORY;
            break;
        }
        /* A release that shipped no lib/ froze nothing. */
        for (size_t i = 0; i < nnow && ne; i++) {
            const struct git_entry *x = NULL;
            for (size_t k = 0; k < ne && !x; k++)
                if (strcmp(e[k].path, now[i]) == 0)
                    x = &e[k];
            if (reported[i] || (x && strcmp(x->oid, oids[i]) == 0))
                continue;
            add(l, now[i], 1, "changed", "%s %s: shipped shared code never changes (its "
                "digest is every shell record's lib_sha256)",
                x ? t < 0 ? "differs from the file at" : "differs from the file shipped in"
                  : "is not in legacy-sh/lib/ as shipped in", rev);
            reported[i] = 1;
        }
        for (size_t k = 0; k < ne && !gone_reported; k++) {
            int present = 0;
            for (size_t i = 0; i < nnow && !present; i++)
                present = strcmp(e[k].path, now[i]) == 0;
            if (!present) {
                add(l, e[k].path, 1, "changed", "shipped in %s and removed since: shipped shared "
                    "code never changes (every shell record's lib_sha256 names it)", rev);
                gone_reported = 1;
            }
        }
        git_entries_free(e, ne);
    }
    free(reported);
    free(oids);
    free_names(now, nnow);
    return rc;
}

static int is_legacy_slug(const struct legacy_map *lm, const char *slug)
{
    for (size_t i = 0; i < lm->n; i++)
        if (strcmp(lm->e[i].slug, slug) == 0)
            return 1;
    return 0;
}

int lint_run(const struct lint_opts *o)
{
    struct lint l;
    memset(&l, 0, sizeof l);
    l.o = o;
    struct stat st;
    if (stat(o->dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        log_fatal("lint: %s: not a directory", o->dir);
        return EXIT_USAGE;
    }
    scan_dir(&l, "migrations/pre-apply", "pre-apply", 0);
    scan_dir(&l, "migrations/background", "background", 0);
    scan_dir(&l, "legacy-sh", "legacy", 1);

    char path[4200], shown[1024], err[2048];
    struct slug_list revoked;
    struct legacy_map lm;
    memset(&lm, 0, sizeof lm);
    memset(&revoked, 0, sizeof revoked);
    display(&l, "migrations/revoked", shown, sizeof shown);
    snprintf(path, sizeof path, "%s/migrations/revoked", o->dir);
    size_t len;
    char *text = read_file(path, &len);
    if (!text && errno == ENOENT)
        add(&l, "migrations/revoked", 1, "revoked", "missing: a packaged tree has this file (empty "
            "when nothing is revoked; 'cozy-migrate new' creates it)");
    if (text && revoked_parse(shown, text, len, &revoked, err, sizeof err) != 0) {
        int line;
        add(&l, "migrations/revoked", 0, "revoked", "%s", split_err(err, shown, &line));
        l.f[l.nf - 1].line = line;
    }
    free(text);
    display(&l, "legacy-sh/legacy-map", shown, sizeof shown);
    snprintf(path, sizeof path, "%s/legacy-sh/legacy-map", o->dir);
    text = read_file(path, &len);
    if (text && legacy_map_parse(shown, text, len, &lm, err, sizeof err) != 0) {
        int line;
        const char *what = split_err(err, shown, &line);
        add(&l, "legacy-sh/legacy-map", line, "legacy", "%s", what);
    }
    free(text);
    for (size_t i = 0; i < l.ns; i++) {
        struct script *s = &l.s[i];
        if (s->shell && !is_legacy_slug(&lm, s->slug))
            add(&l, s->rel, 1, "legacy", "'%s' is not in legacy-sh/legacy-map (every legacy "
                "script has its old number there)", s->slug);
        if (!s->shell && is_legacy_slug(&lm, s->slug))
            add(&l, s->rel, 1, "legacy", "'%s' is a legacy slug (legacy-sh/legacy-map) but not a "
                "shell script", s->slug);
    }

    /* git: the history rules and each slug's batch. */
    int rc = 0;
    struct git_repo g;
    struct walk w;
    memset(&w, 0, sizeof w);
    int have_git = 0, have_walk = 0;
    struct manifest man;
    memset(&man, 0, sizeof man);
    int gr = git_open(o->dir, &g, err, sizeof err);
    if (gr == GIT_OK) {
        have_git = 1;
    } else if (gr == GIT_MISSING && (o->history || o->against)) {
        log_fatal("lint: git is not installed");
        rc = EXIT_TOOL;
        goto done;
    } else if (o->history || o->against) {
        log_fatal("lint: %s (--history and --against read git)", err);
        rc = EXIT_HISTORY;
        goto done;
    } else {
        log_info("lint: %s is not in a git repository: order-d, batch by tag, history "
                "and changed are not checked", o->dir);
    }
    snprintf(path, sizeof path, "%s/migrations/order.d", o->dir);
    int have_man = 0;
    if (stat(path, &st) == 0) {
        if (manifest_load(path, &man, err, sizeof err) == 0) {
            have_man = 1;
        } else {
            char *colon = strstr(err, ": ");
            add(&l, "migrations/order.d", 1, "batch", "%s", colon ? colon + 2 : err);
        }
    }
    if (have_git) {
        size_t tracked;
        if (git_tracked(&g, "migrations/order.d", &tracked, err, sizeof err) != 0) {
            log_fatal("lint: %s", err);
            rc = EXIT_HISTORY;
            goto done;
        }
        if (tracked)
            add(&l, "migrations/order.d", 1, "order-d", "%zu file%s tracked in git: the manifest "
                "is generated at build time (cozy-migrate order), never committed",
                tracked, tracked == 1 ? "" : "s");
        int wr = order_walk(&g, "HEAD", &w, err, sizeof err);
        if (wr == 0) {
            have_walk = 1;
        } else if (o->history || o->against || wr != EXIT_HISTORY) {
            log_fatal("lint: %s", err);
            rc = wr;
            goto done;
        } else {
            log_info("lint: %s: batches by tag are not checked", err);
        }
    }
    /* Batch of each script: 0 legacy, then the manifest's order (or the
     * first tag that carries it), untagged last. */
    for (size_t i = 0; i < l.ns; i++) {
        struct script *s = &l.s[i];
        s->batch = s->shell ? 0 : 1000000;
        if (have_man) {
            for (size_t b = 0; b < man.n; b++)
                for (size_t k = 0; k < man.b[b].n; k++)
                    if (strcmp(man.b[b].e[k].slug, s->slug) == 0)
                        s->batch = (long)b;
        } else if (have_walk && !s->shell) {
            const struct walk_slug *ws = walk_find(&w, s->slug);
            if (ws)
                s->batch = 1 + (long)ws->first;
        }
    }
    for (size_t i = 0; i < l.ns; i++) {
        struct script *s = &l.s[i];
        for (size_t r = 0; s->has_header && r < s->h.nrequires; r++) {
            const char *req = s->h.requires[r];
            struct script *t = find_script(&l, req);
            if (!t) {
                int known = is_legacy_slug(&lm, req) || (have_walk && walk_find(&w, req));
                if (!known)
                    add(&l, s->rel, s->requires_line, "requires", "requires '%s', which no "
                        "script, legacy-map entry or release carries", req);
                continue;
            }
            const char *a = s->shell ? "pre-apply" : s->tier, *b = t->shell ? "pre-apply" : t->tier;
            if (strcmp(a, b) != 0)
                add(&l, s->rel, s->requires_line, "tier", "requires '%s' of the %s tier from the "
                    "%s tier: requires never cross tiers", req, b, a);
            if (t->batch > s->batch)
                add(&l, s->rel, s->requires_line, "batch", "requires '%s', which ships in a later "
                    "batch than this script", req);
        }
    }
    check_cycles(&l);
    for (size_t i = 0; i < l.ns; i++) {
        struct script *s = &l.s[i];
        if (s->shell || !s->slug_ok)
            continue;
        snprintf(path, sizeof path, "%s/spec/migrations/%s_spec.lua", o->dir, s->slug);
        if (stat(path, &st) != 0)
            add(&l, s->rel, 1, "spec", "no spec: a Lua migration has spec/migrations/%s_spec.lua "
                "(cozy-migrate new scaffolds it)", s->slug);
    }
    for (size_t i = 0; i < revoked.n; i++) {
        const char *slug = revoked.slug[i];
        if (!find_script(&l, slug) && !is_legacy_slug(&lm, slug) &&
            !(have_walk && walk_find(&w, slug)))
            add(&l, "migrations/revoked", revoked.line[i], "revoked", "revoked slug '%s' is "
                "shipped by no script and carried by no release", slug);
    }

    if (have_git && (o->history || o->against)) {
        const char **rels = calloc(l.ns ? l.ns : 1, sizeof *rels);
        char(*oids)[65] = calloc(l.ns ? l.ns : 1, sizeof *oids);
        struct rtag *all = NULL;
        size_t nall = 0;
        if (!rels || !oids) {
            l.oom = 1;
        } else {
            for (size_t i = 0; i < l.ns; i++)
                rels[i] = l.s[i].rel;
            if (git_hash_files(&g, rels, l.ns, oids, err, sizeof err) != 0 ||
                git_release_tags(&g, NULL, NULL, &all, &nall, err, sizeof err) != 0) {
                log_fatal("lint: %s", err);
                rc = EXIT_HISTORY;
            }
        }
        char *changed = calloc(l.ns ? l.ns : 1, 1), *reused = calloc(l.ns ? l.ns : 1, 1);
        if (!changed || !reused)
            l.oom = 1;
        /* REV first, then every release tag, oldest first. */
        for (long t = o->against ? -1 : 0; rc == 0 && changed && reused && t < (long)nall; t++) {
            const char *rev = t < 0 ? o->against : all[t].name;
            struct rev_script *rs;
            size_t nrs;
            int r2 = order_scripts_at(&g, rev, &rs, &nrs, err, sizeof err);
            if (r2 == EXIT_HISTORY) {
                log_fatal("lint: %s", err);
                rc = EXIT_HISTORY;
                break;
            }
            if (r2 != 0)
                continue; /* a broken tag is order's to report */
            for (size_t i = 0; i < l.ns; i++) {
                const struct rev_script *x = rev_script_find(rs, nrs, l.s[i].slug);
                if (!x)
                    continue;
                /* A move between the Lua tiers keeps the slug and its
                 * record (DESIGN.md, "tier"): the same script elsewhere is
                 * the same migration. Another kind (Lua <-> shell) is a
                 * reuse. */
                int same_kind = (strcmp(x->tier, "legacy") == 0) == l.s[i].shell;
                if (o->history && !reused[i] && !same_kind) {
                    add(&l, l.s[i].rel, 1, "history", "slug '%s' was shipped as %s in %s: a slug "
                        "is never reused", l.s[i].slug, x->path, rev);
                    reused[i] = 1;
                }
                if (o->against && !changed[i] && same_kind && strcmp(x->oid, oids[i]) != 0) {
                    add(&l, l.s[i].rel, 1, "changed", "differs from the script %s %s%s%s: a "
                        "shipped script never changes (repair is a new slug; revoke this one)",
                        t < 0 ? "at" : "shipped in", rev,
                        strcmp(x->path, l.s[i].rel) != 0 ? " as " : "",
                        strcmp(x->path, l.s[i].rel) != 0 ? x->path : "");
                    changed[i] = 1;
                }
            }
            rev_scripts_free(rs, nrs);
        }
        /* Retired in this line and back again. */
        for (size_t i = 0; o->history && rc == 0 && reused && i < l.ns; i++) {
            const struct walk_slug *ws = have_walk ? walk_find(&w, l.s[i].slug) : NULL;
            if (!ws || reused[i])
                continue;
            if (ws->last + 1 < w.ntags || ws->count != ws->last - ws->first + 1)
                add(&l, l.s[i].rel, 1, "history", "slug '%s' was retired: shipped in %s, absent "
                    "from %s: a retired slug is never reused", l.s[i].slug,
                    w.tags[ws->first].name,
                    ws->last + 1 < w.ntags ? w.tags[ws->last + 1].name : "a later release");
        }
        if (rc == 0 && !l.oom)
            rc = check_lib(&l, &g, all, nall, o->against, err, sizeof err);
        free(changed);
        free(reused);
        free(rels);
        free(oids);
        rtags_free(all, nall);
        if (rc != 0)
            goto done;
    }

    rc = run_linters(&l);

done:
    if (l.oom) {
        log_fatal("lint: out of memory");
        rc = EXIT_FAILED;
    }
    if (rc == 0) {
        if (l.nf > 1)
            qsort(l.f, l.nf, sizeof *l.f, cmp_finding);
        for (size_t i = 0; i < l.nf; i++)
            out_line("%s:%d: %s: %s", l.f[i].file, l.f[i].line, l.f[i].rule, l.f[i].msg);
        fflush(stdout);
        size_t files = 0;
        for (size_t i = 0; i < l.nf; i++)
            files += i == 0 || strcmp(l.f[i].file, l.f[i - 1].file) != 0;
        if (l.nf)
            log_info("lint: %zu problem%s in %zu file%s", l.nf, l.nf == 1 ? "" : "s",
                    files, files == 1 ? "" : "s");
        else
            log_info("lint: %zu script%s, no problems", l.ns, l.ns == 1 ? "" : "s");
        rc = l.nf ? EXIT_PACKAGING : 0;
    }
    for (size_t i = 0; i < l.nf; i++) {
        free(l.f[i].file);
        free(l.f[i].msg);
    }
    free(l.f);
    for (size_t i = 0; i < l.ns; i++)
        header_free(&l.s[i].h);
    free(l.s);
    slug_list_free(&revoked);
    legacy_map_free(&lm);
    manifest_free(&man);
    walk_free(&w);
    if (have_git)
        git_close(&g);
    return rc;
}

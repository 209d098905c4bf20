/* lint.c: `cozy-migrate lint`, the authoring contract as a table of rules.
 *
 * Owns the rules (lint_rules: each one's name, when it runs, the function
 * that checks it and its one-line doc, from which --help and docs/writing-migrations.md's
 * table come), reading what they judge, and the one output format
 * "file:line: rule: what". Reads the working tree through the runner's own
 * loader (tree_scan_dir, so every entry the runner refuses is a finding)
 * and parsers (slug_valid, header_parse, revoked/legacy-map/batch loaders),
 * and git through gitread.c and order.c; the rules over the release tags are
 * lint_history.c's. Must never modify the tree and never pass a check it
 * could not run: a missing tool or an unanswerable git question is an
 * error, not a silent skip. */
#include "release/lint_int.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/exitcodes.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/paths.h"
#include "base/util.h"
#include "formats/tree.h"
#include "release/tool.h"

/* ---- findings -------------------------------------------------------------- */

static void display(const struct lint *l, const char *rel, char *buf, size_t n)
{
    if (strcmp(l->o->dir, ".") == 0)
        snprintf(buf, n, "%s", rel);
    else
        snprintf(buf, n, "%s/%s", l->o->dir, rel);
}

void lint_add(struct lint *l, const char *rel, int line, const char *rule, const char *fmt, ...)
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
    struct finding *nf = mem_grow(l->f, l->nf + 1, sizeof *nf);
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
        if (!l->s[i].dup_of && strcmp(l->s[i].slug, slug) == 0)
            return &l->s[i];
    return NULL;
}

static int is_legacy_slug(const struct legacy_map *lm, const char *slug)
{
    for (size_t i = 0; i < lm->n; i++)
        if (strcmp(lm->e[i].slug, slug) == 0)
            return 1;
    return 0;
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

/* ---- reading the tree: the loader's scan, the line formats ---------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of the regular files directly in dir (none when absent):
 * legacy-sh/lib/, which shellcheck reads. */
static char **list_files(const char *dir, size_t *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    char **names = NULL;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char full[4600];
        snprintf(full, sizeof full, "%s/%s", dir, de->d_name);
        struct stat st;
        if (stat(full, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        char **nn = mem_grow(names, *n + 1, sizeof *nn);
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

struct scanning {
    struct lint *l;
    const char *tier;
    int shell;
};

/* tree_scan_dir's visitor: a stray is kept for the slug rule; a script is
 * read once for every rule that judges its text. */
static int scan_entry(void *ud, const struct tree_entry *e)
{
    struct scanning *sc = ud;
    struct lint *l = sc->l;
    if (e->kind == TREE_STRAY) {
        struct stray *ns = mem_grow(l->st, l->nst + 1, sizeof *ns);
        if (!ns) {
            l->oom = 1;
            return -1;
        }
        l->st = ns;
        snprintf(l->st[l->nst].rel, sizeof l->st[l->nst].rel, "%s", e->rel);
        snprintf(l->st[l->nst].why, sizeof l->st[l->nst].why, "%s", e->why);
        l->nst++;
        return 0;
    }
    struct script *ns = mem_grow(l->s, l->ns + 1, sizeof *ns);
    if (!ns) {
        l->oom = 1;
        return -1;
    }
    l->s = ns;
    struct script *s = &l->s[l->ns++];
    memset(s, 0, sizeof *s);
    snprintf(s->slug, sizeof s->slug, "%s", e->slug);
    snprintf(s->rel, sizeof s->rel, "%s", e->rel);
    s->tier = sc->tier;
    s->shell = sc->shell;
    s->slug_ok = slug_valid(s->slug);
    for (size_t k = 0; k + 1 < l->ns && !s->dup_of; k++)
        if (strcmp(l->s[k].slug, s->slug) == 0)
            s->dup_of = l->s[k].rel;
    size_t len;
    char *text = util_read_file(e->path, &len);
    if (!text) {
        snprintf(s->header_err, sizeof s->header_err, "cannot read: %s", strerror(errno));
        s->header_line = 1;
        return 0;
    }
    char path[1024], err[1024];
    display(l, s->rel, path, sizeof path);
    if (header_parse(path, text, len, !s->shell, &s->h, err, sizeof err) != 0) {
        snprintf(s->header_err, sizeof s->header_err, "%s", split_err(err, path, &s->header_line));
    } else {
        s->has_header = 1;
        s->requires_line = requires_line(text);
    }
    s->shebang_ok = !s->shell || shebang_ok(text);
    free(text);
    return 0;
}

/* The three script directories, the way the runner reads them. */
static int scan_scripts(struct lint *l)
{
    static const struct { const char *rel, *tier; int shell; } dirs[] = {
        {"migrations/pre-apply", "pre-apply", 0},
        {"migrations/background", "background", 0},
        {"legacy-sh", "legacy", 1},
    };
    char err[2048];
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        struct scanning sc = {l, dirs[i].tier, dirs[i].shell};
        int rc = tree_scan_dir(l->o->dir, dirs[i].rel, dirs[i].shell, scan_entry, &sc, err,
                               sizeof err);
        if (rc != 0 && !l->oom) /* the directory itself cannot be listed */
            lint_add(l, dirs[i].rel, 1, "slug", "%s", err);
    }
    return l->oom ? EXIT_FAILED : 0;
}

/* migrations/revoked and legacy-sh/legacy-map, with their own parsers. */
static void read_lists(struct lint *l)
{
    char path[4200], shown[1024];
    struct buf err = BUF_INIT;
    size_t len;
    display(l, "migrations/revoked", shown, sizeof shown);
    snprintf(path, sizeof path, "%s/migrations/revoked", l->o->dir);
    char *text = util_read_file(path, &len);
    l->revoked_missing = !text && errno == ENOENT;
    if (text && revoked_parse(shown, text, len, &l->revoked, &err) != 0)
        snprintf(l->revoked_err, sizeof l->revoked_err, "%s", buf_str(&err));
    free(text);
    display(l, "legacy-sh/legacy-map", shown, sizeof shown);
    snprintf(path, sizeof path, "%s/legacy-sh/legacy-map", l->o->dir);
    text = util_read_file(path, &len);
    if (text && legacy_map_parse(shown, text, len, &l->lm, &err) != 0)
        snprintf(l->legacy_err, sizeof l->legacy_err, "%s", buf_str(&err));
    free(text);
    buf_release(&err);
    lint_read_frozen(l);
}

/* git (when the tree is in a repository: --history and --against need
 * one), the manifest when there is one, and each script's batch. An exit
 * code. */
static int read_order(struct lint *l)
{
    const struct lint_opts *o = l->o;
    char path[4200];
    struct buf gerr = BUF_INIT;
    struct stat st;
    int gr = git_open(o->dir, &l->g, &gerr);
    if (gr == GIT_OK) {
        l->have_git = 1;
    } else if (gr == GIT_MISSING && (o->history || o->against)) {
        log_fatal("lint: git is not installed");
        buf_release(&gerr);
        return EXIT_TOOL;
    } else if (o->history || o->against) {
        log_fatal("lint: %s (--history and --against read git)", buf_str(&gerr));
        buf_release(&gerr);
        return EXIT_HISTORY;
    } else {
        log_info("lint: %s is not in a git repository: order-d, batch by tag, history "
                 "and changed are not checked", o->dir);
    }
    tree_order_d(o->dir, path, sizeof path);
    if (stat(path, &st) == 0) {
        if (manifest_load(path, &l->man, &gerr) == 0) {
            l->have_man = 1;
        } else {
            const char *colon = strstr(buf_str(&gerr), ": ");
            snprintf(l->man_err, sizeof l->man_err, "%s", colon ? colon + 2 : buf_str(&gerr));
        }
    }
    if (l->have_git) {
        if (git_tracked(&l->g, "migrations/order.d", &l->tracked_order_d, &gerr) != 0) {
            log_fatal("lint: %s", buf_str(&gerr));
            buf_release(&gerr);
            return EXIT_HISTORY;
        }
        int wr = order_walk(&l->g, "HEAD", &l->w, &gerr);
        if (wr == 0) {
            l->have_walk = 1;
        } else if (o->history || o->against || wr != EXIT_HISTORY) {
            log_fatal("lint: %s", buf_str(&gerr));
            buf_release(&gerr);
            return wr;
        } else {
            log_info("lint: %s: batches by tag are not checked", buf_str(&gerr));
        }
    }
    buf_release(&gerr);
    /* Batch of each script: 0 legacy, then the manifest's order (or the
     * first tag that carries it), untagged last. */
    for (size_t i = 0; i < l->ns; i++) {
        struct script *s = &l->s[i];
        s->batch = s->shell ? 0 : 1000000;
        if (l->have_man) {
            for (size_t b = 0; b < l->man.n; b++)
                for (size_t k = 0; k < l->man.b[b].n; k++)
                    if (strcmp(l->man.b[b].e[k].slug, s->slug) == 0)
                        s->batch = (long)b;
        } else if (l->have_walk && !s->shell) {
            const struct walk_slug *ws = order_walk_find(&l->w, s->slug);
            if (ws)
                s->batch = 1 + (long)ws->first;
        }
    }
    return 0;
}

/* ---- the rules ------------------------------------------------------------- */

static int rule_slug(struct lint *l)
{
    /* The runner refuses them (tree.c): so does the linter. */
    for (size_t i = 0; i < l->nst; i++)
        lint_add(l, l->st[i].rel, 1, "slug", "%s", l->st[i].why);
    for (size_t i = 0; i < l->ns; i++) {
        const struct script *s = &l->s[i];
        if (s->slug_ok)
            continue;
        if (strlen(s->slug) > SLUG_MAX)
            lint_add(l, s->rel, 1, "slug", "'%s' is %zu characters long; a slug has at most %d",
                     s->slug, strlen(s->slug), SLUG_MAX);
        else
            lint_add(l, s->rel, 1, "slug", "'%s' is not a valid slug (lower-case letters and "
                     "digits in words joined by single dashes)", s->slug);
    }
    return 0;
}

static int rule_header(struct lint *l)
{
    for (size_t i = 0; i < l->ns; i++)
        if (*l->s[i].header_err)
            lint_add(l, l->s[i].rel, l->s[i].header_line, "header", "%s", l->s[i].header_err);
    return 0;
}

static int rule_duplicate(struct lint *l)
{
    for (size_t i = 0; i < l->ns; i++)
        if (l->s[i].dup_of)
            lint_add(l, l->s[i].rel, 1, "duplicate", "slug '%s' is also %s: a slug names one "
                     "script", l->s[i].slug, l->s[i].dup_of);
    return 0;
}

/* Each requires of each script, with the script it names (NULL: none). */
static void each_require(struct lint *l, void (*fn)(struct lint *, const struct script *,
                                                     const char *, const struct script *))
{
    for (size_t i = 0; i < l->ns; i++) {
        const struct script *s = &l->s[i];
        for (size_t r = 0; s->has_header && r < s->h.nrequires; r++)
            fn(l, s, s->h.requires[r], find_script(l, s->h.requires[r]));
    }
}

static void require_known(struct lint *l, const struct script *s, const char *req,
                          const struct script *t)
{
    if (!t && !is_legacy_slug(&l->lm, req) && !(l->have_walk && order_walk_find(&l->w, req)))
        lint_add(l, s->rel, s->requires_line, "requires", "requires '%s', which no script, "
                 "legacy-map entry or release carries", req);
}

static int rule_requires(struct lint *l)
{
    each_require(l, require_known);
    return 0;
}

static void require_earlier(struct lint *l, const struct script *s, const char *req,
                            const struct script *t)
{
    if (t && t->batch > s->batch)
        lint_add(l, s->rel, s->requires_line, "batch", "requires '%s', which ships in a later "
                 "batch than this script", req);
}

static int rule_batch(struct lint *l)
{
    if (*l->man_err)
        lint_add(l, "migrations/order.d", 1, "batch", "%s", l->man_err);
    each_require(l, require_earlier);
    return 0;
}

static void require_same_tier(struct lint *l, const struct script *s, const char *req,
                              const struct script *t)
{
    const char *a = s->shell ? "pre-apply" : s->tier;
    const char *b = t && t->shell ? "pre-apply" : t ? t->tier : a;
    if (strcmp(a, b) != 0)
        lint_add(l, s->rel, s->requires_line, "tier", "requires '%s' of the %s tier from the "
                 "%s tier: requires never cross tiers", req, b, a);
}

static int rule_tier(struct lint *l)
{
    each_require(l, require_same_tier);
    return 0;
}

/* Reports each requires cycle once, named from its first member. */
static int rule_cycle(struct lint *l)
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
        if (state[root] || l->s[root].dup_of)
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
                lint_add(l, fs->rel, fs->requires_line, "cycle", "requires form a cycle: %s", chain);
            }
        }
    }
out:
    free(state);
    free(stack);
    free(edge);
    free(reported);
    return 0;
}

static int rule_spec(struct lint *l)
{
    char path[4200];
    struct stat st;
    for (size_t i = 0; i < l->ns; i++) {
        const struct script *s = &l->s[i];
        if (s->shell || !s->slug_ok)
            continue;
        snprintf(path, sizeof path, "%s/spec/migrations/%s_spec.lua", l->o->dir, s->slug);
        if (stat(path, &st) != 0)
            lint_add(l, s->rel, 1, "spec", "no spec: a Lua migration has "
                     "spec/migrations/%s_spec.lua (cozy-migrate new scaffolds it)", s->slug);
    }
    return 0;
}

static int rule_legacy(struct lint *l)
{
    if (*l->legacy_err) {
        char shown[1024];
        int line;
        display(l, "legacy-sh/legacy-map", shown, sizeof shown);
        const char *what = split_err(l->legacy_err, shown, &line);
        lint_add(l, "legacy-sh/legacy-map", line, "legacy", "%s", what);
    }
    for (size_t i = 0; i < l->ns; i++) {
        const struct script *s = &l->s[i];
        if (s->shell && !is_legacy_slug(&l->lm, s->slug))
            lint_add(l, s->rel, 1, "legacy", "'%s' is not in legacy-sh/legacy-map (every legacy "
                     "script has its old number there)", s->slug);
        if (!s->shell && is_legacy_slug(&l->lm, s->slug))
            lint_add(l, s->rel, 1, "legacy", "'%s' is a legacy slug (legacy-sh/legacy-map) but "
                     "not a shell script", s->slug);
    }
    return 0;
}

static int rule_revoked(struct lint *l)
{
    if (l->revoked_missing)
        lint_add(l, "migrations/revoked", 1, "revoked", "missing: a packaged tree has this file "
                 "(empty when nothing is revoked; 'cozy-migrate new' creates it)");
    if (*l->revoked_err) {
        char shown[1024];
        int line;
        display(l, "migrations/revoked", shown, sizeof shown);
        const char *what = split_err(l->revoked_err, shown, &line);
        lint_add(l, "migrations/revoked", line, "revoked", "%s", what);
    }
    for (size_t i = 0; i < l->revoked.n; i++) {
        const char *slug = l->revoked.slug[i];
        if (!find_script(l, slug) && !is_legacy_slug(&l->lm, slug) &&
            !(l->have_walk && order_walk_find(&l->w, slug)))
            lint_add(l, "migrations/revoked", l->revoked.line[i], "revoked", "revoked slug '%s' "
                     "is shipped by no script and carried by no release", slug);
    }
    return 0;
}

static int rule_order_d(struct lint *l)
{
    size_t n = l->tracked_order_d;
    if (n)
        lint_add(l, "migrations/order.d", 1, "order-d", "%zu file%s tracked in git: the manifest "
                 "is generated at build time (cozy-migrate order), never committed", n,
                 n == 1 ? "" : "s");
    return 0;
}

static int rule_shebang(struct lint *l)
{
    for (size_t i = 0; i < l->ns; i++)
        if (!l->s[i].shebang_ok)
            lint_add(l, l->s[i].rel, 1, "shebang",
                     "a shell migration starts with a bash or sh shebang (#!/bin/bash)");
    return 0;
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
    struct tool_result res;
    int rc = tool_run(argv, l->o->dir, &res);
    free(argv);
    if (rc != 0) {
        log_fatal("lint: %s %s (%s)", pre[0],
                res.not_found ? "is not installed" : "could not run", install);
        tool_result_free(&res);
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
        lint_add(l, line, (int)ln, rule, "%s", msg);
        found++;
    }
    if (res.status != 0 && !found) {
        char first[400];
        tool_first_line(*res.err ? res.err : res.out, first, sizeof first);
        lint_add(l, files[0], 1, rule, "%s exited %d: %s", pre[0], res.status, first);
    }
    tool_result_free(&res);
    return 0;
}

/* The scripts of one kind, relative to the tree root; NULL (and *n 0) when
 * there is none or out of memory (l->oom). */
static char **rels_of(struct lint *l, int shell, size_t *n)
{
    *n = 0;
    char **out = calloc(l->ns + 1, sizeof *out);
    if (!out) {
        l->oom = 1;
        return NULL;
    }
    for (size_t i = 0; i < l->ns; i++)
        if (l->s[i].shell == shell && !(out[(*n)++] = strdup(l->s[i].rel)))
            l->oom = 1;
    return out;
}

/* Moves the files the frozen set's digest list covers to the end of
 * files; returns how many are not frozen (the first ones). */
static size_t frozen_last(const struct lint *l, char **files, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!lint_is_frozen(l, files[i])) {
            char *t = files[k];
            files[k++] = files[i];
            files[i] = t;
        }
    return k;
}

static int rule_shellcheck(struct lint *l)
{
    /* -x -P SCRIPTDIR: scripts source lib/ relative to legacy-sh/, which
     * is the directory the runner starts them in. */
    static const char *const shc[] = {"shellcheck", "-f", "gcc", "-x", "-P", "SCRIPTDIR", NULL};
    static const char *const shc_lib[] = {"shellcheck", "-f", "gcc", "-s", "bash", "-x", "-P",
                                          "SCRIPTDIR", NULL};
    /* The frozen set (lint_frozen.c): what breaks a run, as bash (which
     * runs every shell migration, whatever its shebang) runs it. */
    static const char *const shc_frozen[] = {"shellcheck", "-f", "gcc", "-S", "error", "-s", "bash",
                                             "-x", "-P", "SCRIPTDIR", NULL};
    static const char *const install = "apt-get install shellcheck";
    size_t nsh, nnames;
    char **sh = rels_of(l, 1, &nsh);
    char libdir[4200];
    snprintf(libdir, sizeof libdir, "%s/legacy-sh/lib", l->o->dir);
    char **names = list_files(libdir, &nnames);
    char **lib = calloc(nnames + 1, sizeof *lib);
    for (size_t i = 0; lib && i < nnames; i++) {
        char rel[600];
        snprintf(rel, sizeof rel, "legacy-sh/lib/%s", names[i]);
        if (!(lib[i] = strdup(rel)))
            l->oom = 1;
    }
    if (!lib)
        l->oom = 1;
    size_t sh_new = l->oom ? 0 : frozen_last(l, sh, nsh);
    size_t lib_new = l->oom ? 0 : frozen_last(l, lib, nnames);
    int rc = l->oom ? EXIT_FAILED : run_tool(l, "shellcheck", shc, sh, sh_new, install);
    if (rc == 0 && !l->oom)
        rc = run_tool(l, "shellcheck", shc_frozen, sh + sh_new, nsh - sh_new, install);
    if (rc == 0 && !l->oom)
        rc = run_tool(l, "shellcheck", shc_lib, lib, lib_new, install);
    if (rc == 0 && !l->oom)
        rc = run_tool(l, "shellcheck", shc_frozen, lib + lib_new, nnames - lib_new, install);
    free_list(sh, nsh);
    free_list(lib, lib ? nnames : 0);
    free_list(names, nnames);
    return rc;
}

static int rule_luacheck(struct lint *l)
{
    size_t nlua;
    char **lua = rels_of(l, 0, &nlua);
    int rc = l->oom ? EXIT_FAILED : 0;
    if (rc == 0 && nlua) {
        char cfg[4200];
        snprintf(cfg, sizeof cfg, "%s/cozy-luacheckrc-XXXXXX", paths_tmpdir());
        int fd = mkstemp(cfg);
        size_t len = strlen(l->o->luacheckrc);
        if (fd < 0 || write(fd, l->o->luacheckrc, len) != (ssize_t)len) {
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
    free_list(lua, nlua);
    return rc;
}

/* The rules, in the order --help and docs/writing-migrations.md list them. */
const struct lint_rule lint_rules[] = {
    {"slug", NULL, rule_slug,
     "file name is `<slug>.lua` / `<slug>.sh`, grammar `^[a-z0-9]+(-[a-z0-9]+)*$`, at most 60 "
     "characters; every other entry of a script directory the runner refuses (a dotfile, a "
     "subdirectory, a dangling symlink, a stray file) is one too"},
    {"header", NULL, rule_header,
     "header present, parseable (the runner's parser), `on-error` set, no unknown key"},
    {"duplicate", NULL, rule_duplicate, "one slug, one script (across tiers and legacy-sh/)"},
    {"requires", NULL, rule_requires,
     "names a script, a legacy-map entry or a slug a release carried"},
    {"cycle", NULL, rule_cycle,
     "requires are acyclic (reported once, from the cycle's first member)"},
    {"batch", NULL, rule_batch,
     "a requires never points to a later batch (from `order.d/` when present, else from the "
     "tag history; legacy comes first)"},
    {"tier", NULL, rule_tier, "requires never cross tiers (legacy scripts are pre-apply)"},
    {"spec", NULL, rule_spec, "every Lua migration has `spec/migrations/<slug>_spec.lua`"},
    {"legacy", NULL, rule_legacy, "legacy-map parses, and every `legacy-sh/*.sh` is in it"},
    {"revoked", NULL, rule_revoked,
     "`migrations/revoked` exists (empty when nothing is revoked), parses and names known slugs"},
    {"order-d", NULL, rule_order_d, "no `migrations/order.d/` tracked in git"},
    {"history", "`--history`", lint_rule_history,
     "a slug is never reused: not shipped as another kind of script (Lua, shell) by any release "
     "tag, not back after a release of this line dropped it; a move between the two Lua tiers "
     "keeps the slug"},
    {"changed", "`--against REV`; `--history` for `legacy-sh/lib/`", lint_rule_changed,
     "a shipped script is byte-identical to REV's and to every release tag's that carries it "
     "(in whichever tier); `legacy-sh/lib/` is byte for byte the `lib/` of every release tag "
     "that shipped one (and REV's): no file changed, added or removed, since its digest is "
     "every shell record's `lib_sha256`"},
    {"frozen", NULL, lint_rule_frozen,
     "with `legacy-sh/legacy-sha256sums` (the digest list `import-legacy` writes; sha256sum's "
     "format), every legacy script and `legacy-sh/lib/` file is listed there and byte for byte "
     "what was imported, and a listed lib/ file is there (a listed script may be gone: retired)"},
    {"shebang", NULL, rule_shebang, "shell migrations start with a `bash` or `sh` shebang"},
    {"shellcheck", NULL, rule_shellcheck,
     "`shellcheck -x` on shell migrations and `legacy-sh/lib/`; what the legacy digest list "
     "covers is frozen, so only its errors count (`-S error`, as bash runs it), never style it "
     "can never fix"},
    {"runnable", "`--image-inventory FILE`", lint_rule_runnable,
     "every command a shell migration (or `legacy-sh/lib/`) calls is a builtin, a function they "
     "define or on the image's PATH, every literal absolute path it reads is in the image (FILE: "
     "the inventory the image build records, `/usr/share/cozy-migrate/image-inventory`), and "
     "every literal relative path is under `legacy-sh/`, its working directory; what a variable "
     "or `sh -c` builds is not judged"},
    {"api", NULL, lint_rule_api,
     "every field a Lua migration uses of a module it binds with `local x = require('kube')` "
     "(or helm, fleet, flux, log, json, yaml) is one that module has: read from the modules as "
     "the sandbox loads them, the list the editor stubs come from (`kube.pach` is a finding)"},
    {"luacheck", NULL, rule_luacheck,
     "`luacheck` with the sandbox's globals, made from its allow-list (no `io`, `debug`, "
     "`package`; `os` only `time`, `clock`, `date`, `difftime`)"},
    {NULL, NULL, NULL, NULL},
};

/* Prints the findings sorted, and the summary; the exit code. */
static int report(struct lint *l)
{
    if (l->nf > 1)
        qsort(l->f, l->nf, sizeof *l->f, cmp_finding);
    for (size_t i = 0; i < l->nf; i++)
        out_line("%s:%d: %s: %s", l->f[i].file, l->f[i].line, l->f[i].rule, l->f[i].msg);
    fflush(stdout);
    size_t files = 0;
    for (size_t i = 0; i < l->nf; i++)
        files += i == 0 || strcmp(l->f[i].file, l->f[i - 1].file) != 0;
    if (l->nf)
        log_info("lint: %zu problem%s in %zu file%s", l->nf, l->nf == 1 ? "" : "s", files,
                 files == 1 ? "" : "s");
    else
        log_info("lint: %zu script%s, no problems", l->ns, l->ns == 1 ? "" : "s");
    return l->nf ? EXIT_PACKAGING : 0;
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
    int rc = scan_scripts(&l);
    if (rc == 0) {
        read_lists(&l);
        rc = read_order(&l);
    }
    for (const struct lint_rule *r = lint_rules; rc == 0 && r->name; r++)
        rc = r->check(&l);
    if (l.oom) {
        log_fatal("lint: out of memory");
        rc = EXIT_FAILED;
    }
    if (rc == 0)
        rc = report(&l);
    for (size_t i = 0; i < l.nf; i++) {
        free(l.f[i].file);
        free(l.f[i].msg);
    }
    free(l.f);
    for (size_t i = 0; i < l.ns; i++)
        header_free(&l.s[i].h);
    free(l.s);
    free(l.st);
    slug_list_free(&l.revoked);
    legacy_map_free(&l.lm);
    manifest_free(&l.man);
    order_walk_free(&l.w);
    lint_history_free(&l);
    lint_frozen_free(&l);
    if (l.have_git)
        git_close(&l.g);
    return rc;
}

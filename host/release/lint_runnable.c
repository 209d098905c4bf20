/* lint_runnable.c: the rule `runnable` (lint --image-inventory FILE): a
 * shell migration can run in the image it ships in. Owns the image
 * inventory's format (what tools/image-inventory writes as the image's last
 * build step: "cmd NAME" per executable on its PATH, "path /ABS" per file
 * or directory), and a reading of bash that finds, per script, the
 * commands it calls and the literal paths it reads: a command that is no
 * builtin, no function of the scripts or legacy-sh/lib/ and not on the
 * image's PATH; an absolute path the image does not hold; a path relative
 * to the working directory (legacy-sh/, where the runner starts shell
 * migrations) that the tree does not hold there. What it cannot know (a
 * command or path built from a variable, a string given to `sh -c`) it
 * leaves alone: the rule never guesses a finding. */
#include "release/lint_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/exitcodes.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/util.h"

#define INVENTORY_MAGIC "# cozy-migrate image-inventory 1"
#define ADD_HINT "tools/image build --packages or --files; docs/shipping.md, Building the image"

/* ---- the inventory ---------------------------------------------------------- */

struct strset {
    char **v;
    size_t n;
};

static int set_add(struct strset *s, const char *p, size_t n)
{
    char **v = mem_grow(s->v, s->n + 1, sizeof *v);
    if (!v)
        return -1;
    s->v = v;
    if (!(s->v[s->n] = strndup(p, n)))
        return -1;
    s->n++;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void set_sort(struct strset *s)
{
    if (s->n > 1)
        qsort(s->v, s->n, sizeof *s->v, cmp_str);
}

static int set_has(const struct strset *s, const char *k)
{
    return s->n && bsearch(&k, s->v, s->n, sizeof *s->v, cmp_str) != NULL;
}

static void set_free(struct strset *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof *s);
}

struct inventory {
    struct strset cmd, path;
};

/* 0, or -1 with "FILE:LINE: what" in err. */
static int inventory_load(const char *file, struct inventory *inv, char *err, size_t errlen)
{
    size_t len;
    char *text = util_read_file(file, &len);
    if (!text) {
        snprintf(err, errlen, "%s: %s", file, strerror(errno));
        return -1;
    }
    int rc = 0, line = 0;
    char *p = text, *end = text + len;
    while (p < end && rc == 0) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        line++;
        if (line == 1 && (n != strlen(INVENTORY_MAGIC) || memcmp(p, INVENTORY_MAGIC, n) != 0)) {
            snprintf(err, errlen, "%s:1: not an image inventory (it starts with '%s', as "
                     "tools/image-inventory writes it)", file, INVENTORY_MAGIC);
            rc = -1;
        } else if (line > 1 && n > 4 && memcmp(p, "cmd ", 4) == 0 && !memchr(p + 4, '/', n - 4)) {
            rc = set_add(&inv->cmd, p + 4, n - 4);
        } else if (line > 1 && n > 5 && memcmp(p, "path /", 6) == 0) {
            rc = set_add(&inv->path, p + 5, n - 5);
        } else if (line > 1 && n && *p != '#') {
            snprintf(err, errlen, "%s:%d: expected 'cmd NAME' or 'path /ABSOLUTE'", file, line);
            rc = -1;
        }
        if (rc != 0 && !*err)
            snprintf(err, errlen, "%s: out of memory", file);
        p += n + 1;
    }
    if (rc == 0 && line == 0) {
        snprintf(err, errlen, "%s: empty: not an image inventory", file);
        rc = -1;
    }
    free(text);
    set_sort(&inv->cmd);
    set_sort(&inv->path);
    return rc;
}

/* ---- reading bash ------------------------------------------------------------ */

#define WORD_MAX 1024
#define DEFAULTS_MAX 4

struct word {
    char text[WORD_MAX];        /* the value, quotes removed */
    size_t len;
    size_t lit;                 /* length of the literal prefix (before $, `, a glob) */
    int quoted;
    int line;
    char defaults[DEFAULTS_MAX][WORD_MAX]; /* ${X:-WORD}'s WORDs: literal paths read too */
    size_t ndefaults;
};

enum tok_kind { TOK_END, TOK_WORD, TOK_OP };

struct tok {
    enum tok_kind kind;
    char op[4];
    struct word w;
};

struct sub {
    const char *p, *end;
    int line;
};

struct lexer {
    const char *p, *end;
    int line;
    int want_delim;             /* the word after << is a here-document's delimiter */
    int strip_tabs;
    char delims[8][WORD_MAX];
    int delim_tabs[8];
    size_t ndelims;
    struct sub subs[64];        /* $( ), ` `, <( ): read after this range */
    size_t nsubs;
};

static void word_put(struct word *w, char c, int literal)
{
    if (w->len + 1 < WORD_MAX)
        w->text[w->len++] = c;
    w->text[w->len] = '\0';
    if (literal && w->lit == w->len - 1)
        w->lit = w->len;
}

static void add_sub(struct lexer *x, const char *p, const char *end, int line)
{
    if (x->nsubs < sizeof x->subs / sizeof x->subs[0])
        x->subs[x->nsubs++] = (struct sub){p, end, line};
}

/* From just after an opening ( of depth 1: the matching ), skipping quotes
 * and nested parentheses; lines counted. */
static const char *match_paren(struct lexer *x, const char *p)
{
    int depth = 1;
    while (p < x->end) {
        char c = *p;
        if (c == '\\' && p + 1 < x->end) {
            x->line += p[1] == '\n';
            p += 2;
            continue;
        }
        if (c == '\n')
            x->line++;
        if (c == '\'') {
            const char *q = memchr(p + 1, '\'', (size_t)(x->end - p - 1));
            for (const char *r = p; q && r < q; r++)
                x->line += *r == '\n';
            p = q ? q + 1 : x->end;
            continue;
        }
        if (c == '"') {
            const char *q = p + 1;
            while (q < x->end && *q != '"')
                q += *q == '\\' && q + 1 < x->end ? 2 : 1;
            for (const char *r = p; r < q; r++)
                x->line += *r == '\n';
            p = q < x->end ? q + 1 : q;
            continue;
        }
        if (c == '(')
            depth++;
        if (c == ')' && --depth == 0)
            return p;
        p++;
    }
    return x->end;
}

/* ${...}: to the matching }, keeping a default (${X:-WORD}, ${X-WORD},
 * ${X:=WORD}) that is plain text. */
static const char *param(struct lexer *x, const char *p, struct word *w)
{
    const char *start = p;
    int depth = 1;
    while (p < x->end && depth) {
        if (*p == '{')
            depth++;
        else if (*p == '}')
            depth--;
        else if (*p == '\n')
            x->line++;
        p++;
    }
    const char *close = p - 1;
    const char *op = start;
    while (op < close && (*op == '_' || (*op >= 'A' && *op <= 'Z') || (*op >= 'a' && *op <= 'z') ||
                          (*op >= '0' && *op <= '9')))
        op++;
    if (op < close && *op == ':')
        op++;
    if (op < close && (*op == '-' || *op == '=') && w->ndefaults < DEFAULTS_MAX) {
        op++;
        size_t n = (size_t)(close - op);
        if (n && n < WORD_MAX && !memchr(op, '$', n) && !memchr(op, '`', n)) {
            char *d = w->defaults[w->ndefaults++];
            memcpy(d, op, n);
            d[n] = '\0';
            if (d[0] == '"' && n > 1 && d[n - 1] == '"') {
                memmove(d, d + 1, n - 2);
                d[n - 2] = '\0';
            }
        }
    }
    return p;
}

/* A $ inside or outside double quotes: what follows it. */
static const char *dollar(struct lexer *x, const char *p, struct word *w)
{
    p++;
    if (p + 1 < x->end && p[0] == '(' && p[1] == '(') {
        p = match_paren(x, p + 1);
        if (p < x->end)
            p++;
        if (p < x->end && *p == ')')
            p++;
    } else if (p < x->end && *p == '(') {
        int line = x->line;
        const char *close = match_paren(x, p + 1);
        add_sub(x, p + 1, close, line);
        p = close < x->end ? close + 1 : close;
    } else if (p < x->end && *p == '{') {
        p = param(x, p + 1, w);
    } else if (p < x->end && *p == '\'') {
        const char *q = memchr(p + 1, '\'', (size_t)(x->end - p - 1));
        p = q ? q + 1 : x->end;
    } else if (p < x->end && strchr("@*#?$!-0123456789", *p)) {
        p++;
    } else {
        while (p < x->end && (*p == '_' || (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                              (*p >= '0' && *p <= '9')))
            p++;
    }
    word_put(w, '$', 0);
    return p;
}

/* A backtick command substitution: to the next unescaped backtick. */
static const char *backtick(struct lexer *x, const char *p, struct word *w)
{
    const char *q = p + 1;
    while (q < x->end && *q != '`')
        q += *q == '\\' && q + 1 < x->end ? 2 : 1;
    add_sub(x, p + 1, q, x->line);
    for (const char *r = p; r < q; r++)
        x->line += *r == '\n';
    word_put(w, '`', 0);
    return q < x->end ? q + 1 : q;
}

/* Inside "...": to the closing quote. */
static const char *dquote(struct lexer *x, const char *p, struct word *w)
{
    while (p < x->end && *p != '"') {
        if (*p == '\\' && p + 1 < x->end && strchr("\"\\$`\n", p[1])) {
            if (p[1] != '\n')
                word_put(w, p[1], 1);
            else
                x->line++;
            p += 2;
        } else if (*p == '$' && p + 1 < x->end && p[1] != '"') {
            p = dollar(x, p, w);
        } else if (*p == '`') {
            p = backtick(x, p, w);
        } else {
            x->line += *p == '\n';
            word_put(w, *p++, 1);
        }
    }
    return p < x->end ? p + 1 : p;
}

/* The here-documents whose bodies start after this newline. */
static void skip_heredocs(struct lexer *x)
{
    for (size_t i = 0; i < x->ndelims; i++) {
        size_t dl = strlen(x->delims[i]);
        while (x->p < x->end) {
            const char *nl = memchr(x->p, '\n', (size_t)(x->end - x->p));
            const char *e = nl ? nl : x->end;
            const char *s = x->p;
            if (x->delim_tabs[i])
                while (s < e && *s == '\t')
                    s++;
            x->p = nl ? nl + 1 : x->end;
            x->line++;
            if ((size_t)(e - s) == dl && memcmp(s, x->delims[i], dl) == 0)
                break;
        }
    }
    x->ndelims = 0;
}

static int is_op_char(char c)
{
    return c == ';' || c == '&' || c == '|' || c == '(' || c == ')' || c == '<' || c == '>';
}

static int read_op(struct lexer *x, struct tok *t)
{
    static const char *const ops[] = {";;&", "<<<", "<<-", "&>>", ";;", ";&", "&&", "||", "|&", "<<",
                                      ">>", "<&", ">&", "<>", ">|", "&>", ";", "&", "|", "(",
                                      ")", "<", ">", NULL};
    for (size_t i = 0; ops[i]; i++) {
        size_t n = strlen(ops[i]);
        if ((size_t)(x->end - x->p) >= n && memcmp(x->p, ops[i], n) == 0) {
            /* <( and >(: a process substitution, read as a command list */
            if ((ops[i][0] == '<' || ops[i][0] == '>') && n == 1 && x->p + 1 < x->end && x->p[1] == '(') {
                int line = x->line;
                const char *close = match_paren(x, x->p + 2);
                add_sub(x, x->p + 2, close, line);
                x->p = close < x->end ? close + 1 : close;
                t->kind = TOK_WORD;
                t->w.line = x->line;
                word_put(&t->w, '$', 0);
                return 1;
            }
            snprintf(t->op, sizeof t->op, "%s", ops[i]);
            x->p += n;
            t->kind = TOK_OP;
            if (!strcmp(t->op, "<<") || !strcmp(t->op, "<<-")) {
                x->want_delim = 1;
                x->strip_tabs = t->op[2] == '-';
            }
            return 1;
        }
    }
    return 0;
}

static void read_word(struct lexer *x, struct tok *t)
{
    struct word *w = &t->w;
    t->kind = TOK_WORD;
    w->line = x->line;
    while (x->p < x->end) {
        char c = *x->p;
        if (c == ' ' || c == '\t' || c == '\n' || is_op_char(c))
            break;
        if (c == '\\' && x->p + 1 < x->end) {
            if (x->p[1] == '\n')
                x->line++;
            else
                word_put(w, x->p[1], 1);
            x->p += 2;
        } else if (c == '\'') {
            const char *q = memchr(x->p + 1, '\'', (size_t)(x->end - x->p - 1));
            const char *e = q ? q : x->end;
            for (const char *r = x->p + 1; r < e; r++) {
                x->line += *r == '\n';
                word_put(w, *r, 1);
            }
            w->quoted = 1;
            x->p = q ? q + 1 : x->end;
        } else if (c == '"') {
            w->quoted = 1;
            x->p = dquote(x, x->p + 1, w);
        } else if (c == '$') {
            x->p = dollar(x, x->p, w);
        } else if (c == '`') {
            x->p = backtick(x, x->p, w);
        } else {
            word_put(w, c, !strchr("*?[", c));
            x->p++;
        }
    }
    if (x->want_delim) {
        x->want_delim = 0;
        if (x->ndelims < 8) {
            snprintf(x->delims[x->ndelims], WORD_MAX, "%s", w->text);
            x->delim_tabs[x->ndelims++] = x->strip_tabs;
        }
    }
}

/* The next token: a word, an operator ("\n" for a newline), or the end. */
static void lex_next(struct lexer *x, struct tok *t)
{
    memset(t, 0, sizeof *t);
    for (;;) {
        while (x->p < x->end && (*x->p == ' ' || *x->p == '\t' ||
                                 (*x->p == '\\' && x->p + 1 < x->end && x->p[1] == '\n'))) {
            if (*x->p == '\\') {
                x->line++;
                x->p++;
            }
            x->p++;
        }
        if (x->p < x->end && *x->p == '#') {
            while (x->p < x->end && *x->p != '\n')
                x->p++;
        }
        if (x->p >= x->end) {
            t->kind = TOK_END;
            return;
        }
        if (*x->p == '\n') {
            x->p++;
            t->kind = TOK_OP;
            strcpy(t->op, "\n");
            t->w.line = x->line++;
            if (x->ndelims)
                skip_heredocs(x);
            return;
        }
        t->w.line = x->line;
        if (read_op(x, t))
            return;
        read_word(x, t);
        /* 2>file: the digits are the redirection's descriptor, not a word */
        if (x->p < x->end && (*x->p == '<' || *x->p == '>') && t->w.len &&
            strspn(t->w.text, "0123456789") == t->w.len && !t->w.quoted) {
            memset(t, 0, sizeof *t);
            continue;
        }
        return;
    }
}

/* ---- what a script runs and reads -------------------------------------------- */

static const char *const builtins[] = {
    ".", ":", "[", "alias", "bg", "bind", "break", "builtin", "caller", "cd", "command", "compgen",
    "complete", "compopt", "continue", "declare", "dirs", "disown", "echo", "enable", "eval",
    "exec", "exit", "export", "false", "fc", "fg", "getopts", "hash", "help", "history", "jobs",
    "kill", "let", "local", "logout", "mapfile", "popd", "printf", "pushd", "pwd", "read",
    "readarray", "readonly", "return", "set", "shift", "shopt", "source", "suspend", "test",
    "times", "trap", "true", "type", "typeset", "ulimit", "umask", "unalias", "unset", "wait",
    NULL};

static int in_list(const char *const *l, const char *s)
{
    for (size_t i = 0; l[i]; i++)
        if (strcmp(l[i], s) == 0)
            return 1;
    return 0;
}

/* Where the parser is in a command list. */
enum mode { M_CMD, M_ARGS, M_FOR, M_CASE_WORD, M_CASE_PAT, M_COND, M_FUNC };

struct scan {
    struct lint *l;
    const struct inventory *inv;
    struct strset *funcs;       /* every function the scripts and lib/ define */
    const char *rel;            /* the file, relative to the tree root */
    int check;                  /* 0: the first pass (functions, cd), 1: findings */
    int has_cd;                 /* the file changes directory: relative paths are its own */
    struct strset seen, msgs;   /* this file's findings: the command or path, what is wrong */
    int *lines;                 /* and the first line of each */
    char wrapper[16];           /* the command whose argument is a command (env, timeout...) */
    int wrap_skip;              /* arguments of the wrapper's option still to skip */
    char prev[64];              /* the previous argument (--raw takes an API path) */
};

/* One finding per file for each command or path, at its first line: kept
 * until the file is read (a command substitution is read after the line
 * that holds it), then told (scan_file). */
static void finding(struct scan *s, int line, const char *key, const char *msg)
{
    for (size_t i = 0; i < s->seen.n; i++)
        if (strcmp(s->seen.v[i], key) == 0) {
            if (line < s->lines[i]) {
                s->lines[i] = line;
                free(s->msgs.v[i]);
                if (!(s->msgs.v[i] = strdup(msg)))
                    s->l->oom = 1;
            }
            return;
        }
    int *lines = mem_grow(s->lines, s->seen.n + 1, sizeof *lines);
    if (!lines || set_add(&s->seen, key, strlen(key)) != 0 || set_add(&s->msgs, msg, strlen(msg)) != 0) {
        s->lines = lines ? lines : s->lines;
        s->l->oom = 1;
        return;
    }
    s->lines = lines;
    s->lines[s->seen.n - 1] = line;
}

static int pathish(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') ||
              (p[i] >= '0' && p[i] <= '9') || strchr("._-+@/", p[i])))
            return 0;
    return 1;
}

/* A literal absolute path the script reads: in the image, or a finding. */
static void check_abs(struct scan *s, const char *text, size_t lit, size_t len, int line)
{
    char p[WORD_MAX];
    size_t n = lit;
    if (n < len)
        while (n > 0 && text[n - 1] != '/')
            n--;
    while (n > 1 && text[n - 1] == '/')
        n--;
    if (n <= 1 || !pathish(text, n))
        return;
    memcpy(p, text, n);
    p[n] = '\0';
    static const char *const scratch[] = {"/dev", "/proc", "/sys", "/tmp", "/run", "/var/run", NULL};
    for (size_t i = 0; scratch[i]; i++) {
        size_t sl = strlen(scratch[i]);
        if (strncmp(p, scratch[i], sl) == 0 && (p[sl] == '\0' || p[sl] == '/'))
            return;
    }
    char msg[WORD_MAX + 200];
    snprintf(msg, sizeof msg, "'%s' is not in the image (add it with " ADD_HINT ")", p);
    if (!set_has(&s->inv->path, p))
        finding(s, line, p, msg);
}

/* A literal relative path: read from the working directory, legacy-sh/. */
static void check_rel(struct scan *s, const char *p, int line)
{
    if (s->has_cd)
        return;
    char full[4200];
    snprintf(full, sizeof full, "%s/legacy-sh/%s", s->l->o->dir, p);
    struct stat st;
    char msg[WORD_MAX + 200];
    snprintf(msg, sizeof msg, "'%s' is read relative to the working directory, legacy-sh/ (where "
             "the runner starts shell migrations), and is not there: ship it under legacy-sh/ or "
             "give the image's absolute path", p);
    if (stat(full, &st) != 0)
        finding(s, line, p, msg);
}

static int relative_path(const char *p, size_t n)
{
    if (!pathish(p, n) || n < 3)
        return 0;
    if (!strncmp(p, "./", 2) || !strncmp(p, "../", 3))
        return n > 2;
    size_t slashes = 0;
    for (size_t i = 0; i < n; i++)
        slashes += p[i] == '/';
    const char *first = memchr(p, '/', n);
    return slashes >= 2 && first - p >= 2 && p[n - 1] != '/' ? 1 : slashes >= 3;
}

/* An argument (or a redirection's source, a [[ ]] operand, a for list). */
static void check_arg(struct scan *s, const struct word *w)
{
    for (size_t i = 0; s->check && i < w->ndefaults; i++)
        if (w->defaults[i][0] == '/')
            check_abs(s, w->defaults[i], strlen(w->defaults[i]), strlen(w->defaults[i]), w->line);
    if (!s->check || w->lit == 0 || !strcmp(s->prev, "--raw"))
        return;
    const char *t = w->text;
    size_t lit = w->lit, len = w->len;
    const char *eq = t[0] == '-' ? strstr(t, "=/") : NULL;
    if (eq && (size_t)(eq + 1 - t) < lit) {
        lit -= (size_t)(eq + 1 - t);
        len -= (size_t)(eq + 1 - t);
        t = eq + 1;
    }
    if (t[0] == '/')
        check_abs(s, t, lit, len, w->line);
    else if (lit == len && relative_path(t, len))
        check_rel(s, t, w->line);
}

/* A command word: a builtin, a function, on the image's PATH, or a path. */
static void check_cmd(struct scan *s, const struct word *w)
{
    if (!s->check || w->lit < w->len || w->len == 0)
        return;
    const char *c = w->text;
    if (c[0] == '/')
        check_abs(s, c, w->lit, w->len, w->line);
    else if (strchr(c, '/'))
        check_rel(s, c, w->line);
    else if (!in_list(builtins, c) && !set_has(s->funcs, c) && !set_has(&s->inv->cmd, c)) {
        char msg[WORD_MAX + 200];
        snprintf(msg, sizeof msg, "'%s' is not in the image (add it with " ADD_HINT ")", c);
        finding(s, w->line, c, msg);
    }
}

static const char *const wrappers[] = {"env", "exec", "command", "nohup", "nice", "timeout",
                                       "xargs", "time", "builtin", NULL};

/* The argument after a wrapper's options is the command it runs. */
static int wrapped(struct scan *s, const struct word *w)
{
    if (s->wrap_skip > 0) {
        s->wrap_skip--;
        return 0;
    }
    const char *t = w->text;
    if (t[0] == '-') {
        if (!strcmp(s->wrapper, "xargs") && strchr("InPLdEsa", t[1]) && t[2] == '\0')
            s->wrap_skip = 1;
        if (!strcmp(s->wrapper, "timeout") && strchr("sk", t[1]) && t[2] == '\0')
            s->wrap_skip = 1;
        return 0;
    }
    if (!strcmp(s->wrapper, "env") && strchr(t, '='))
        return 0;
    if (!strcmp(s->wrapper, "timeout")) {
        strcpy(s->wrapper, "timeout-d");
        return 0;
    }
    return 1;
}

static int assignment(const struct word *w)
{
    size_t i = 0;
    const char *t = w->text;
    if (!(t[0] == '_' || (t[0] >= 'A' && t[0] <= 'Z') || (t[0] >= 'a' && t[0] <= 'z')))
        return 0;
    while (t[i] == '_' || (t[i] >= 'A' && t[i] <= 'Z') || (t[i] >= 'a' && t[i] <= 'z') ||
           (t[i] >= '0' && t[i] <= '9'))
        i++;
    return t[i] == '=' || (t[i] == '+' && t[i + 1] == '=') || t[i] == '[';
}

/* One word where the mode says what it is. */
static void on_word(struct scan *s, enum mode *m, struct tok *t, int *redirect, int *case_depth)
{
    const struct word *w = &t->w;
    const char *x = w->text;
    if (*redirect) {
        if (*redirect == 1)
            check_arg(s, w);
        *redirect = 0;
        return;
    }
    switch (*m) {
    case M_FUNC:
        if (!s->check)
            set_add(s->funcs, x, w->len);
        *m = M_CMD;
        return;
    case M_FOR:
        if (!strcmp(x, "do") && !w->quoted)
            *m = M_CMD;
        else
            check_arg(s, w);
        return;
    case M_CASE_WORD:
        if (!strcmp(x, "in") && !w->quoted)
            *m = M_CASE_PAT;
        return;
    case M_CASE_PAT:
        if (!strcmp(x, "esac") && !w->quoted) {
            (*case_depth)--;
            *m = M_ARGS;
        }
        return;
    case M_COND:
        if (!strcmp(x, "]]") && !w->quoted)
            *m = M_ARGS;
        else
            check_arg(s, w);
        return;
    case M_ARGS:
        if (s->wrapper[0] && wrapped(s, w)) {
            s->wrapper[0] = '\0';
            break;  /* the wrapped command, read as one */
        }
        check_arg(s, w);
        snprintf(s->prev, sizeof s->prev, "%s", x);
        return;
    case M_CMD:
        break;
    }
    if (assignment(w)) {
        const char *eq = strchr(x, '=');
        struct word v = *w;
        size_t off = (size_t)(eq + 1 - x);
        memmove(v.text, eq + 1, w->len - off + 1);
        v.len = w->len - off;
        v.lit = w->lit > off ? w->lit - off : 0;
        check_arg(s, &v);
        return;
    }
    static const char *const starts[] = {"if", "then", "else", "elif", "do", "while", "until", "!",
                                         "{", NULL};
    static const char *const ends[] = {"fi", "done", "}", NULL};
    if (!w->quoted && in_list(starts, x))
        return;
    if (!w->quoted && in_list(ends, x)) {
        *m = M_ARGS;
        return;
    }
    if (!w->quoted && (!strcmp(x, "for") || !strcmp(x, "select"))) {
        *m = M_FOR;
        return;
    }
    if (!w->quoted && !strcmp(x, "case")) {
        (*case_depth)++;
        *m = M_CASE_WORD;
        return;
    }
    if (!w->quoted && !strcmp(x, "[[")) {
        *m = M_COND;
        return;
    }
    if (!w->quoted && !strcmp(x, "function")) {
        *m = M_FUNC;
        return;
    }
    *m = M_ARGS;
    s->prev[0] = '\0';
    if (!s->check && (!strcmp(x, "cd") || !strcmp(x, "pushd")))
        s->has_cd = 1;
    if (in_list(wrappers, x)) {
        snprintf(s->wrapper, sizeof s->wrapper, "%s", x);
        s->wrap_skip = 0;
    }
    check_cmd(s, w);
}

/* An operator: where the next word stands. */
static void on_op(const char *op, enum mode *m, int *redirect, int case_depth)
{
    if (op[0] == '<' && strcmp(op, "<<") && strcmp(op, "<<-") && strcmp(op, "<<<")) {
        *redirect = 1;
        return;
    }
    if (op[0] == '<' || op[0] == '>' || !strcmp(op, "&>") || !strcmp(op, "&>>")) {
        *redirect = 2;
        return;
    }
    if (*m == M_CASE_PAT) {
        if (!strcmp(op, ")"))
            *m = M_CMD;
        return;
    }
    if (*m == M_FOR || *m == M_CASE_WORD || *m == M_COND)
        return;
    if (case_depth && (!strcmp(op, ";;") || !strcmp(op, ";&") || !strcmp(op, ";;&"))) {
        *m = M_CASE_PAT;
        return;
    }
    if (*m == M_FUNC)
        return;
    *m = !strcmp(op, ")") ? M_ARGS : M_CMD;
}

/* Reads one command list (a file, or a command substitution in it). */
static void scan_range(struct scan *s, const char *p, const char *end, int line, int depth)
{
    struct lexer *x = calloc(1, sizeof *x);
    struct tok *t = calloc(1, sizeof *t);
    struct word *pending = calloc(1, sizeof *pending);
    if (!x || !t || !pending) {
        s->l->oom = 1;
        goto out;
    }
    x->p = p;
    x->end = end;
    x->line = line;
    enum mode m = M_CMD;
    int redirect = 0, case_depth = 0, opened = 0;
    for (lex_next(x, t); t->kind != TOK_END; lex_next(x, t)) {
        int after_open = opened;
        opened = t->kind == TOK_OP && !strcmp(t->op, "(");
        if (t->kind == TOK_OP && after_open && !strcmp(t->op, ")")) {
            m = M_CMD; /* NAME () and function NAME (): the body follows */
            continue;
        }
        if (t->kind == TOK_OP) {
            /* NAME ( ): a function's definition, not a command */
            if (!strcmp(t->op, "(") && m == M_ARGS && pending->len && s->prev[0] == '\0') {
                if (!s->check)
                    set_add(s->funcs, pending->text, pending->len);
                m = M_FUNC;
                pending->len = 0;
                continue;
            }
            if (m == M_FUNC && !strcmp(t->op, ")")) {
                m = M_CMD;
                continue;
            }
            on_op(t->op, &m, &redirect, case_depth);
            if (m == M_CMD)
                s->wrapper[0] = '\0';
            pending->len = 0;
            continue;
        }
        enum mode before = m;
        on_word(s, &m, t, &redirect, &case_depth);
        if (before == M_CMD && m == M_ARGS)
            *pending = t->w;
        else
            pending->len = 0;
    }
    for (size_t i = 0; i < x->nsubs && depth < 16; i++)
        scan_range(s, x->subs[i].p, x->subs[i].end, x->subs[i].line, depth + 1);
out:
    free(x);
    free(t);
    free(pending);
}

/* The files the rule reads: every shell migration and legacy-sh/lib/. */
static int files_of(struct lint *l, struct strset *rels)
{
    for (size_t i = 0; i < l->ns; i++)
        if (l->s[i].shell && set_add(rels, l->s[i].rel, strlen(l->s[i].rel)) != 0)
            return -1;
    char lib[4200];
    snprintf(lib, sizeof lib, "%s/legacy-sh/lib", l->o->dir);
    char **names = NULL;
    size_t n = 0;
    if (util_list_dir(lib, &names, &n) != 0)
        return 0; /* no lib/ */
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char rel[600], full[4800];
        snprintf(rel, sizeof rel, "legacy-sh/lib/%s", names[i]);
        snprintf(full, sizeof full, "%s/%s", l->o->dir, rel);
        struct stat st;
        if (names[i][0] != '.' && stat(full, &st) == 0 && S_ISREG(st.st_mode))
            rc = set_add(rels, rel, strlen(rel));
    }
    util_free_names(names, n);
    return rc;
}

static void scan_file(struct scan *s, const char *rel)
{
    char full[4800];
    snprintf(full, sizeof full, "%s/%s", s->l->o->dir, rel);
    size_t len;
    char *text = util_read_file(full, &len);
    if (!text)
        return; /* the loader's rules say why */
    s->rel = rel;
    scan_range(s, text, text + len, 1, 0);
    for (size_t i = 0; i < s->seen.n; i++)
        lint_add(s->l, rel, s->lines[i], "runnable", "%s", s->msgs.v[i]);
    set_free(&s->seen);
    set_free(&s->msgs);
    free(s->lines);
    free(text);
}

int lint_rule_runnable(struct lint *l)
{
    const char *file = l->o->image_inventory;
    if (!file)
        return 0;
    struct inventory inv = {0};
    char err[4600] = "";
    if (inventory_load(file, &inv, err, sizeof err) != 0) {
        log_fatal("lint: --image-inventory %s", err);
        set_free(&inv.cmd);
        set_free(&inv.path);
        return EXIT_USAGE;
    }
    struct strset rels = {0}, funcs = {0};
    int *has_cd = NULL;
    if (files_of(l, &rels) != 0 || !(has_cd = calloc(rels.n + 1, sizeof *has_cd))) {
        l->oom = 1;
    } else {
        /* first every function the files define (a script calls lib/'s),
         * then each file's commands and paths */
        for (int pass = 0; pass < 2; pass++) {
            for (size_t i = 0; i < rels.n; i++) {
                struct scan s = {.l = l, .inv = &inv, .funcs = &funcs, .check = pass,
                                 .has_cd = has_cd[i]};
                scan_file(&s, rels.v[i]);
                has_cd[i] |= s.has_cd;
            }
            set_sort(&funcs);
        }
    }
    free(has_cd);
    set_free(&rels);
    set_free(&funcs);
    set_free(&inv.cmd);
    set_free(&inv.path);
    return 0;
}

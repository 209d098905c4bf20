/* lint_api.c: the linter's api rule. Owns finding, in a Lua migration's
 * tokens (formats/luatok.c), the locals bound to a module by
 * `local x = require('mod')` and every `x.field` / `x:field` read of them,
 * and judging each field against the module's fields (lint_opts.modules,
 * read from the modules themselves). Conservative by construction: a name
 * rebound to anything else, a function parameter or a loop variable of the
 * same name stops the checking of that name, and a field the script itself
 * assigns (`x.helper = ...`) is the script's; so it can miss a misspelling,
 * never report a field that exists. */
#include "release/lint_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/exitcodes.h"
#include "base/util.h"
#include "formats/luatok.h"

#define MAX_BINDINGS 64
#define MAX_OWN 256

struct binding {
    char name[128];
    const struct lint_module *m;
};

struct api_scan {
    struct binding b[MAX_BINDINGS];
    size_t nb;
    char own[MAX_OWN][128];     /* "x.field" the script assigns */
    size_t nown;
};

static const struct lint_module *module_named(const struct lint *l, const char *name)
{
    for (size_t i = 0; i < l->o->nmodules; i++)
        if (strcmp(l->o->modules[i].name, name) == 0)
            return &l->o->modules[i];
    return NULL;
}

static struct binding *bound(struct api_scan *sc, const char *name)
{
    for (size_t i = 0; i < sc->nb; i++)
        if (sc->b[i].m && strcmp(sc->b[i].name, name) == 0)
            return &sc->b[i];
    return NULL;
}

static void unbind(struct api_scan *sc, const char *name)
{
    struct binding *b = bound(sc, name);
    if (b)
        b->m = NULL;
}

static void bind(struct api_scan *sc, const char *name, const struct lint_module *m)
{
    unbind(sc, name);
    if (sc->nb < MAX_BINDINGS) {
        snprintf(sc->b[sc->nb].name, sizeof sc->b[sc->nb].name, "%s", name);
        sc->b[sc->nb++].m = m;
    }
}

static int has_field(const struct lint_module *m, const char *f)
{
    for (size_t i = 0; i < m->nfields; i++)
        if (strcmp(m->fields[i], f) == 0)
            return 1;
    return 0;
}

/* Levenshtein distance, capped: for "did you mean". */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 60 || lb > 60)
        return 99;
    size_t row[61];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t prev = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t cur = row[j];
            size_t best = prev + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            prev = cur;
        }
    }
    return row[lb];
}

static const char *closest(const struct lint_module *m, const char *f)
{
    const char *best = NULL;
    size_t bd = 3; /* at most two edits away */
    for (size_t i = 0; i < m->nfields; i++) {
        size_t d = distance(f, m->fields[i]);
        if (d < bd) {
            bd = d;
            best = m->fields[i];
        }
    }
    return best;
}

static int own_field(const struct api_scan *sc, const char *key)
{
    for (size_t i = 0; i < sc->nown; i++)
        if (strcmp(sc->own[i], key) == 0)
            return 1;
    return 0;
}

/* The module a `require('mod')` / `require 'mod'` at t names (t: the
 * token after '='), reading ahead; NULL when it is anything else. */
static const struct lint_module *required_at(const struct lint *l, struct luatok_reader r,
                                             const struct luatok *t)
{
    if (!luatok_is(t, "require"))
        return NULL;
    struct luatok a, b, c;
    luatok_next(&r, &a);
    if (a.kind == LT_STRING)
        return *a.text ? module_named(l, a.text) : NULL;
    if (!luatok_is(&a, "(") || luatok_next(&r, &b) != LT_STRING || !*b.text)
        return NULL;
    luatok_next(&r, &c);
    return luatok_is(&c, ")") ? module_named(l, b.text) : NULL;
}

static int keyword(const struct luatok *t)
{
    static const char *const kw[] = {"and", "break", "do", "else", "elseif", "end", "false", "for",
                                     "function", "goto", "if", "in", "local", "nil", "not", "or",
                                     "repeat", "return", "then", "true", "until", "while", NULL};
    if (t->kind != LT_NAME)
        return 0;
    for (int i = 0; kw[i]; i++)
        if (strcmp(t->text, kw[i]) == 0)
            return 1;
    return 0;
}

static void add_own(struct api_scan *sc, const char *name, const char *field)
{
    if (sc->nown < MAX_OWN)
        snprintf(sc->own[sc->nown++], sizeof sc->own[0], "%.60s.%.60s", name, field);
}

/* At a function's '(': its parameters, consumed from r up to ')', shadow
 * whatever they are named after. */
static void params(struct api_scan *sc, struct luatok_reader *r, struct luatok *t)
{
    while (luatok_next(r, t) != LT_EOF && t->kind != LT_ERROR && !luatok_is(t, ")"))
        if (t->kind == LT_NAME)
            unbind(sc, t->text);
}

/* After `local`: its name list (attributes skipped) is consumed from r;
 * one name bound to require('mod') is a binding, any other name is
 * shadowed. t is left at the token after the list. */
static void local_statement(const struct lint *l, struct api_scan *sc, struct luatok_reader *r,
                            struct luatok *t)
{
    char names[16][128];
    size_t n = 0;
    luatok_next(r, t);
    if (luatok_is(t, "function")) {
        if (luatok_next(r, t) == LT_NAME)
            unbind(sc, t->text);
        if (luatok_next(r, t) == LT_OP && luatok_is(t, "("))
            params(sc, r, t);
        return;
    }
    while (t->kind == LT_NAME && !keyword(t)) {
        if (n < 16)
            snprintf(names[n++], sizeof names[0], "%s", t->text);
        luatok_next(r, t);
        if (luatok_is(t, "<")) { /* <const>, <close> */
            luatok_next(r, t);
            luatok_next(r, t);
            luatok_next(r, t);
        }
        if (!luatok_is(t, ","))
            break;
        luatok_next(r, t);
    }
    const struct lint_module *m = NULL;
    if (n == 1 && luatok_is(t, "=")) {
        struct luatok_reader ahead = *r;
        struct luatok rhs;
        luatok_next(&ahead, &rhs);
        m = required_at(l, ahead, &rhs);
    }
    for (size_t i = 0; i < n; i++) {
        if (m)
            bind(sc, names[i], m);
        else
            unbind(sc, names[i]);
    }
}

/* After `function`: its name (a field of a bound module becomes the
 * script's own) and its parameters (shadowing) are consumed from r. */
static void function_statement(struct api_scan *sc, struct luatok_reader *r, struct luatok *t)
{
    luatok_next(r, t);
    if (t->kind == LT_NAME && !keyword(t)) {
        char base[128];
        snprintf(base, sizeof base, "%s", t->text);
        luatok_next(r, t);
        if ((luatok_is(t, ".") || luatok_is(t, ":"))) {
            struct luatok f;
            if (luatok_next(r, &f) == LT_NAME && bound(sc, base))
                add_own(sc, base, f.text);
            luatok_next(r, t);
            while (luatok_is(t, ".") || luatok_is(t, ":")) {
                luatok_next(r, t);
                luatok_next(r, t);
            }
        }
    }
    if (luatok_is(t, "("))
        params(sc, r, t);
}

static void check_script(struct lint *l, const char *rel, const char *text, size_t len)
{
    struct api_scan sc;
    memset(&sc, 0, sizeof sc);
    struct luatok_reader r;
    luatok_init(&r, text, len);
    struct luatok prev = {0}, t;
    luatok_next(&r, &t);
    while (t.kind != LT_EOF && t.kind != LT_ERROR) {
        if (luatok_is(&t, "local")) {
            local_statement(l, &sc, &r, &t);
            prev = (struct luatok){0};
            continue;
        }
        if (luatok_is(&t, "function")) {
            function_statement(&sc, &r, &t);
        } else if (luatok_is(&t, "for")) {
            while (luatok_next(&r, &t) == LT_NAME && !keyword(&t)) {
                unbind(&sc, t.text);
                if (luatok_next(&r, &t) != LT_OP || !luatok_is(&t, ","))
                    break;
            }
            continue;
        } else if (t.kind == LT_NAME && !keyword(&t) && !luatok_is(&prev, ".") &&
                   !luatok_is(&prev, ":")) {
            struct luatok_reader ahead = r;
            struct luatok nx;
            luatok_next(&ahead, &nx);
            struct binding *b = bound(&sc, t.text);
            if (luatok_is(&nx, "=")) {
                struct luatok rhs;
                luatok_next(&ahead, &rhs);
                const struct lint_module *m = required_at(l, ahead, &rhs);
                if (m)
                    bind(&sc, t.text, m);
                else
                    unbind(&sc, t.text);
            } else if (b && (luatok_is(&nx, ".") || luatok_is(&nx, ":"))) {
                struct luatok f, after;
                if (luatok_next(&ahead, &f) == LT_NAME) {
                    luatok_next(&ahead, &after);
                    char key[300];
                    snprintf(key, sizeof key, "%.60s.%.60s", t.text, f.text);
                    if (luatok_is(&after, "="))
                        add_own(&sc, t.text, f.text);
                    else if (!has_field(b->m, f.text) && !own_field(&sc, key)) {
                        const char *near = closest(b->m, f.text);
                        char hint[300] = "";
                        if (near)
                            snprintf(hint, sizeof hint, " (did you mean %.60s.%.60s?)", t.text, near);
                        lint_add(l, rel, f.line, "api", "%s.%s: the %s module has no field '%s'%s",
                                 t.text, f.text, b->m->name, f.text, hint);
                    }
                }
            }
        }
        prev = t;
        luatok_next(&r, &t);
    }
}

int lint_rule_api(struct lint *l)
{
    if (!l->o->nmodules)
        return 0;
    for (size_t i = 0; i < l->ns; i++) {
        const struct script *s = &l->s[i];
        if (s->shell)
            continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", l->o->dir, s->rel);
        size_t len;
        char *text = util_read_file(path, &len);
        if (!text)
            continue; /* the header rule has said it cannot be read */
        check_script(l, s->rel, text, len);
        free(text);
    }
    return l->oom ? EXIT_FAILED : 0;
}

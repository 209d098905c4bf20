/* modapi.c: the fields of the modules a migration requires, as data.
 *
 * Owns the list of those modules (modapi_modules), reading their fields
 * from the modules themselves in a sandbox of its own (a Lua function's
 * parameter names through lua_getlocal, its doc block from the comment lines
 * right above it in its stdlib source), and the LuaLS stub of each. Must
 * never keep a second list of any module's functions: what the sandbox
 * loads is the list, so the linter's api rule and an editor's stubs follow
 * every change to stdlib/ or to a native module by themselves. */
#include "lua/modapi.h"

#include <lauxlib.h>
#include <lua.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/mem.h"
#include "base/paths.h"
#include "base/util.h"
#include "lua/sandbox.h"

const char *const modapi_modules[] = {"kube", "helm", "fleet", "flux", "log", "json", "yaml", NULL};

/* ---- reading the modules ---------------------------------------------------- */

static int cmp_field(const void *a, const void *b)
{
    return strcmp(((const struct modapi_field *)a)->name, ((const struct modapi_field *)b)->name);
}

/* A value as a Lua literal (strings quoted and escaped), or NULL. */
static char *literal(lua_State *L, int idx)
{
    struct buf t = BUF_INIT;
    switch (lua_type(L, idx)) {
    case LUA_TBOOLEAN:
        buf_addf(&t, "%s", lua_toboolean(L, idx) ? "true" : "false");
        break;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx))
            buf_addf(&t, "%lld", (long long)lua_tointeger(L, idx));
        else
            buf_addf(&t, "%.17g", lua_tonumber(L, idx));
        break;
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        buf_addf(&t, "'");
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)s[i];
            if (c == '\'' || c == '\\')
                buf_addf(&t, "\\%c", c);
            else if (c < 0x20 || c == 0x7f)
                buf_addf(&t, "\\%03u", c);
            else
                buf_addf(&t, "%c", c);
        }
        buf_addf(&t, "'");
        break;
    }
    default:
        return NULL;
    }
    return buf_detach(&t, NULL);
}

/* The comment block right above line `line` of src, when that line
 * defines `name` (a function defined elsewhere, e.g. by a helper that makes
 * closures, gets none): each "-- x" line as "x\n". "" when none. */
static char *doc_above(const char *src, int line, const char *name)
{
    struct buf t = BUF_INIT;
    if (!src || line < 1) {
        return buf_detach(&t, NULL);
    }
    const char **starts = NULL;
    size_t n = 0;
    for (const char *p = src; p && *p;) {
        const char **ns = mem_grow(starts, n + 1, sizeof *ns);
        if (!ns) {
            free(starts);
            buf_release(&t);
            return NULL;
        }
        starts = ns;
        starts[n++] = p;
        const char *nl = strchr(p, '\n');
        p = nl ? nl + 1 : NULL;
    }
    char want1[200], want2[200];
    snprintf(want1, sizeof want1, "function M.%s(", name);
    snprintf(want2, sizeof want2, "M.%s =", name);
    size_t at = (size_t)line - 1;
    int defines = 0;
    if (at < n) {
        size_t len = strcspn(starts[at], "\n");
        char buf[600];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), starts[at]);
        defines = strstr(buf, want1) || strstr(buf, want2);
    }
    size_t first = at;
    while (defines && first > 0) {
        const char *l = starts[first - 1];
        while (*l == ' ')
            l++;
        if (strncmp(l, "--", 2) != 0)
            break;
        first--;
    }
    for (size_t i = first; defines && i < at; i++) {
        const char *l = starts[i];
        while (*l == ' ')
            l++;
        l += 2;
        if (*l == ' ')
            l++;
        buf_addf(&t, "%.*s\n", (int)strcspn(l, "\n"), l);
    }
    free(starts);
    return buf_detach(&t, NULL);
}

/* Fills f from the function on top of the stack (left there). 0 or -1. */
static int read_function(lua_State *L, struct modapi_field *f, const char *stdlib_dir,
                         char **src_cache, const char *module)
{
    if (lua_iscfunction(L, -1)) {
        f->vararg = 1;
        f->doc = strdup("");
        return f->doc ? 0 : -1;
    }
    lua_Debug ar;
    lua_pushvalue(L, -1);
    if (!lua_getinfo(L, ">Su", &ar))
        return -1;
    f->vararg = ar.isvararg;
    if (ar.nparams && !(f->params = calloc(ar.nparams, sizeof *f->params)))
        return -1;
    for (int i = 1; i <= ar.nparams; i++) {
        const char *pn = lua_getlocal(L, NULL, i);
        if (!(f->params[f->nparams++] = strdup(pn ? pn : "_")))
            return -1;
    }
    /* Only what the module's own file defines carries its doc. */
    char own[300];
    snprintf(own, sizeof own, "@stdlib/%s.lua", module);
    if (strcmp(ar.source, own) == 0 && !*src_cache) {
        char path[4200];
        size_t len;
        snprintf(path, sizeof path, "%s/%s.lua", stdlib_dir, module);
        *src_cache = util_read_file(path, &len);
    }
    f->doc = doc_above(strcmp(ar.source, own) == 0 ? *src_cache : NULL, ar.linedefined, f->name);
    return f->doc ? 0 : -1;
}

/* Lists the fields of the table on top of the stack into m. 0 or -1. */
static int read_module(lua_State *L, struct modapi_module *m, const char *stdlib_dir)
{
    char *src = NULL;
    int rc = 0;
    lua_pushnil(L);
    while (rc == 0 && lua_next(L, -2)) {
        if (lua_type(L, -2) != LUA_TSTRING) {
            lua_pop(L, 1);
            continue;
        }
        struct modapi_field *nf = mem_grow(m->f, m->n + 1, sizeof *nf);
        if (!nf) {
            rc = -1;
            lua_pop(L, 1);
            break;
        }
        m->f = nf;
        struct modapi_field *f = &m->f[m->n++];
        memset(f, 0, sizeof *f);
        f->type = lua_type(L, -1);
        if (!(f->name = strdup(lua_tostring(L, -2))))
            rc = -1;
        else if (f->type == LUA_TFUNCTION)
            rc = read_function(L, f, stdlib_dir, &src, m->name);
        else
            f->value = literal(L, -1);
        lua_pop(L, 1);
    }
    free(src);
    if (rc == 0 && m->n > 1)
        qsort(m->f, m->n, sizeof *m->f, cmp_field);
    return rc;
}

static int require_call(lua_State *L)
{
    lua_getglobal(L, "require");
    lua_pushvalue(L, 1);
    lua_call(L, 1, 1);
    return 1;
}

int modapi_load(const char *stdlib_dir, struct modapi *a, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    if (!stdlib_dir)
        stdlib_dir = paths_stdlib();
    struct sandbox_opts so = {.stdlib_dir = stdlib_dir};
    struct sandbox *sb = sandbox_new(&so);
    if (!sb) {
        snprintf(err, errlen, "cannot create the Lua state");
        return -1;
    }
    lua_State *L = sandbox_state(sb);
    size_t count = 0;
    while (modapi_modules[count])
        count++;
    int rc = 0;
    if (!(a->m = calloc(count, sizeof *a->m))) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < count; i++) {
        struct modapi_module *m = &a->m[a->n++];
        m->name = modapi_modules[i];
        lua_pushcfunction(L, require_call);
        lua_pushstring(L, m->name);
        if (lua_pcall(L, 1, 1, 0) != LUA_OK || lua_type(L, -1) != LUA_TTABLE) {
            snprintf(err, errlen, "module '%s' (%s): %s", m->name, stdlib_dir,
                     lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "not a table");
            rc = -1;
        } else if (read_module(L, m, stdlib_dir) != 0) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
        }
        lua_pop(L, 1);
    }
    sandbox_free(sb);
    if (rc != 0)
        modapi_free(a);
    return rc;
}

void modapi_free(struct modapi *a)
{
    for (size_t i = 0; a->m && i < a->n; i++) {
        for (size_t k = 0; k < a->m[i].n; k++) {
            struct modapi_field *f = &a->m[i].f[k];
            free(f->name);
            mem_free(f->value);
            mem_free(f->doc);
            for (size_t p = 0; p < f->nparams; p++)
                free(f->params[p]);
            free(f->params);
        }
        free(a->m[i].f);
    }
    free(a->m);
    memset(a, 0, sizeof *a);
}

/* ---- the stub ----------------------------------------------------------------- */

static const char *type_name(int type)
{
    switch (type) {
    case LUA_TBOOLEAN:
        return "boolean";
    case LUA_TNUMBER:
        return "number";
    case LUA_TSTRING:
        return "string";
    case LUA_TTABLE:
        return "table";
    default:
        return "any";
    }
}

char *modapi_stub(const struct modapi_module *m)
{
    struct buf t = BUF_INIT;
    buf_addf(&t, "---@meta %s\n"
            "-- The `%s` module as the migration sandbox loads it, for editors (LuaLS).\n"
            "-- Generated by `cozy-migrate stubs` from the module itself: do not edit;\n"
            "-- run it again after upgrading cozy-migrate.\n\n"
            "local %s = {}\n",
        m->name, m->name, m->name);
    for (size_t i = 0; i < m->n; i++) {
        const struct modapi_field *f = &m->f[i];
        buf_addf(&t, "\n");
        if (f->type == LUA_TFUNCTION) {
            for (const char *d = f->doc; d && *d;) {
                size_t l = strcspn(d, "\n");
                buf_addf(&t, "--- %.*s\n", (int)l, d);
                d += l + (d[l] == '\n');
            }
            buf_addf(&t, "function %s.%s(", m->name, f->name);
            for (size_t p = 0; p < f->nparams; p++)
                buf_addf(&t, "%s%s", p ? ", " : "", f->params[p]);
            buf_addf(&t, "%s) end\n", f->vararg ? (f->nparams ? ", ..." : "...") : "");
        } else {
            buf_addf(&t, "---@type %s\n%s.%s = %s\n", type_name(f->type), m->name, f->name,
                f->value ? f->value : f->type == LUA_TTABLE ? "{}" : "nil");
        }
    }
    buf_addf(&t, "\nreturn %s\n", m->name);
    return buf_detach(&t, NULL);
}

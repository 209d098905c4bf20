/* sandbox.c: the Lua state a migration runs in.
 *
 * Owns: which libraries and globals a migration sees (an allow-list, as
 * Redis's script_lua.c does: sandbox_globals names every global and
 * library field that stays, whatever the Lua build opens; the linter's
 * luacheck globals are made from the same table), loading text chunks only,
 * `require` limited to the native modules and the stdlib directory, the
 * pristine environment every host-provided Lua module (stdlib/NAME.lua) runs
 * in, the memory cap enforced by the allocator, and the deadline enforced by
 * a count hook on every thread (coroutines are created and resumed through
 * the sandbox's own functions, which arm them) that fires on every
 * instruction once the deadline passed.
 * Must never: expose io, debug, package, os.execute/getenv/remove, a
 * private stdlib module (kube.core) to a script, load a
 * binary chunk or a C library, let a script's pcall end a timeout, run a
 * stdlib module on the script's globals, or hand a script a module table
 * the stdlib itself uses (the stdlib requires its own instances). The
 * parent's SIGKILL of the child's process group remains the backstop for a
 * script stuck inside C (a blocked request gets the remaining time as its
 * own timeout, see door/door.h). */
#include "lua/sandbox.h"

#include <errno.h>
#include <lauxlib.h>
#include <limits.h>
#include <lualib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/mem.h"
#include "base/paths.h"
#include "base/util.h"
#include "lua/hostctx.h"
#include "lua/luajson.h"
#include "lua/luakube.h"
#include "lua/lualog.h"
#include "lua/luayaml.h"

#define HOOK_EVERY 10000

/* Reached from the state through its allocator's userdata (the extra space
 * holds the host context). */
struct sandbox {
    lua_State *L;
    int timed_out;       /* the deadline hook fired */
    int converting;      /* error_text is turning an error value into text */
    int convert_late;    /* ... and ran out of its own time */
    double convert_by;   /* monotonic: the end of that time */
    void (*on_panic)(const char *msg);
    char stdlib_dir[PATH_MAX];
};

static int open_kube(lua_State *L);

/* Native modules, shared by the sandbox and the spec runner. */
static const luaL_Reg native_modules[] = {
    {"json", luaopen_json},
    {"yaml", luaopen_yaml},
    {"kube.core", luaopen_kube_core},
    {"kube", open_kube},
    {"log", luaopen_log},
    {NULL, NULL},
};

/* The stdlib's own modules: only a stdlib module's require serves them. A
 * script that held kube.core could adopt a coroutine of its own into the
 * request pool (its writes then land uncounted, and the next fleet.each
 * meets a thread it never made), or read the host's counters. */
static int private_module(const char *name)
{
    return strcmp(name, "kube.core") == 0;
}

/* Registry keys: the pristine globals captured when the state is built,
 * and the two module caches (what the script's require returned, and the
 * stdlib's own instances, which no script value leads to). */
static const char PRISTINE_KEY = 'g';
static const char SCRIPT_LOADED_KEY = 's';
static const char STDLIB_LOADED_KEY = 'l';

/* Lua's allocations count against the process's budget (mem.h), the one
 * cJSON, the YAML bridge and response buffers count against too. */
static void *cap_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    (void)ud;
    /* When ptr is NULL, osize encodes the object type, not a size. */
    size_t old = ptr ? osize : 0;
    if (nsize == 0) {
        free(ptr);
        mem_release(old);
        return NULL;
    }
    if (nsize > old && mem_charge(nsize - old) != 0)
        return NULL;
    void *p = realloc(ptr, nsize);
    if (!p) {
        if (nsize > old)
            mem_release(nsize - old);
        return NULL;
    }
    if (nsize < old)
        mem_release(old - nsize);
    return p;
}

/* NULL for the unrestricted spec state, whose allocator is lauxlib's. */
static struct sandbox *from_state(lua_State *L)
{
    void *ud = NULL;
    return lua_getallocf(L, &ud) == cap_alloc ? ud : NULL;
}

static void deadline_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    struct sandbox *sb = from_state(L);
    struct host_ctx *hc = host_ctx(L);
    if (!sb || !hc)
        return;
    double now = now_mono();
    if (sb->converting && (sb->convert_late || now >= sb->convert_by)) {
        /* Bounded like the script: a __tostring that loops or is slow gets
         * a generic message instead, and the migration keeps its reason. */
        if (!sb->convert_late) {
            sb->convert_late = 1;
            lua_sethook(L, deadline_hook, LUA_MASKCOUNT, 1);
        }
        luaL_error(L, "converting the error to text took too long");
    }
    if (!hc->deadline || (!sb->timed_out && now < hc->deadline))
        return;
    sb->timed_out = 1;
    /* From now on fire at every instruction, on whichever thread runs: a
     * pcall that caught the first error gets the next one as soon as it runs
     * anything, and a coroutine that never saw the deadline gets it at its
     * next instruction (hooks are per thread). */
    if (lua_gethookcount(L) != 1 || lua_gethook(L) != deadline_hook)
        lua_sethook(L, deadline_hook, LUA_MASKCOUNT, 1);
    luaL_error(L, "timeout: the migration ran past its deadline");
}

/* Gives thread co the deadline hook as it stands: every HOOK_EVERY
 * instructions before the deadline, every instruction after. */
static void arm_thread(lua_State *co)
{
    struct sandbox *sb = from_state(co);
    struct host_ctx *hc = host_ctx(co);
    if (!sb || !hc || !hc->deadline)
        return;
    if (!sb->timed_out && now_mono() >= hc->deadline)
        sb->timed_out = 1;
    if (sb->converting)
        return; /* error_text has set the hook it needs */
    lua_sethook(co, deadline_hook, LUA_MASKCOUNT, sb->timed_out ? 1 : HOOK_EVERY);
}

/* ---- coroutines: every thread is armed ------------------------------------ */

/* Lua's own coroutine.resume/wrap (Lua's lcorolib.c), with the resumed thread
 * armed first: a coroutine created before the deadline, or resumed after
 * it, never runs unhooked. Once the deadline has passed a resume raises in
 * the resumer instead of running the coroutine at all. */
static int co_resume_into(lua_State *L, lua_State *co, int narg)
{
    struct sandbox *sb = from_state(L);
    arm_thread(co);
    if (sb && sb->timed_out && !sb->converting)
        return luaL_error(L, "timeout: the migration ran past its deadline");
    if (!lua_checkstack(co, narg)) {
        lua_pushliteral(L, "too many arguments to resume");
        return -1;
    }
    lua_xmove(L, co, narg);
    int nres;
    int status = lua_resume(co, L, narg, &nres);
    /* Control is back with the resumer: if the deadline passed meanwhile,
     * its next instruction gets the timeout too. */
    arm_thread(L);
    if (status == LUA_OK || status == LUA_YIELD) {
        if (!lua_checkstack(L, nres + 1)) {
            lua_pop(co, nres);
            lua_pushliteral(L, "too many results to resume");
            return -1;
        }
        lua_xmove(co, L, nres);
        return nres;
    }
    lua_xmove(co, L, 1);
    return -1;
}

static lua_State *check_co(lua_State *L, int idx)
{
    lua_State *co = lua_tothread(L, idx);
    luaL_argexpected(L, co, idx, "coroutine");
    return co;
}

static int co_create(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lua_State *co = lua_newthread(L);
    arm_thread(co);
    lua_pushvalue(L, 1);
    lua_xmove(L, co, 1);
    return 1;
}

static int co_resume(lua_State *L)
{
    lua_State *co = check_co(L, 1);
    int r = co_resume_into(L, co, lua_gettop(L) - 1);
    if (r < 0) {
        lua_pushboolean(L, 0);
        lua_insert(L, -2);
        return 2;
    }
    lua_pushboolean(L, 1);
    lua_insert(L, -(r + 1));
    return r + 1;
}

static int co_wrapped(lua_State *L)
{
    lua_State *co = lua_tothread(L, lua_upvalueindex(1));
    int r = co_resume_into(L, co, lua_gettop(L));
    if (r < 0) {
        int stat = lua_status(co);
        if (stat != LUA_OK && stat != LUA_YIELD) {
#if LUA_VERSION_RELEASE_NUM >= 50406
            stat = lua_closethread(co, L);
#else
            stat = lua_resetthread(co);
#endif
            lua_xmove(co, L, 1);
        }
        if (stat != LUA_ERRMEM && lua_type(L, -1) == LUA_TSTRING) {
            luaL_where(L, 1);
            lua_insert(L, -2);
            lua_concat(L, 2);
        }
        return lua_error(L);
    }
    return r;
}

static int co_wrap(lua_State *L)
{
    co_create(L);
    lua_pushcclosure(L, co_wrapped, 1);
    return 1;
}

/* A raise with no pcall to catch it: report it cleanly and end the process
 * (a migration's process is its own), never abort with a core. */
static int on_panic(lua_State *L)
{
    struct sandbox *sb = from_state(L);
    const char *m = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    char msg[512];
    snprintf(msg, sizeof msg, "unprotected Lua error: %s",
             m ? m : lua_typename(L, lua_type(L, -1)));
    if (sb && sb->on_panic)
        sb->on_panic(msg);
    else
        log_fatal("%s", msg);
    _exit(1);
}

/* load(chunk [, name [, mode [, env]]]) that only ever accepts text. */
static int l_load_text(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    const char *name = luaL_optstring(L, 2, "=(load)");
    int env = !lua_isnone(L, 4) ? 4 : 0;
    if (len && s[0] == LUA_SIGNATURE[0]) {
        luaL_pushfail(L);
        lua_pushliteral(L, "binary chunks are not allowed in a migration");
        return 2;
    }
    int st = luaL_loadbufferx(L, s, len, name, "t");
    if (st != LUA_OK) {
        luaL_pushfail(L);
        lua_insert(L, -2);
        return 2;
    }
    if (env) {
        lua_pushvalue(L, env);
        if (!lua_setupvalue(L, -2, 1))
            lua_pop(L, 1);
    }
    return 1;
}

static int valid_module_name(const char *n)
{
    if (!*n || strlen(n) > 100)
        return 0;
    for (const char *p = n; *p; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' ||
              (*p == '.' && p != n && p[1] && p[1] != '.')))
            return 0;
    }
    return 1;
}

/* ---- the stdlib's pristine environment ----------------------------------- */

/* What the stdlib sees: the base functions and library tables as they were
 * when the state was built, captured before any script ran (copies of the
 * library tables, so a script editing its own `string` or `table` changes
 * nothing here). */
static const char *const PRISTINE_BASE[] = {
    "assert", "error", "getmetatable", "ipairs", "next", "pairs", "pcall", "print", "rawequal",
    "rawget", "rawlen", "rawset", "select", "setmetatable", "tonumber", "tostring", "type",
    "xpcall", "load", "_VERSION", NULL};
static const char *const PRISTINE_LIBS[] = {"string", "table", "math", "utf8", "coroutine", "os",
                                           NULL};

static int l_require(lua_State *L);

/* Captures the current globals into the registry. Call once, after the
 * script's globals are final and before any script runs. May raise. */
static void capture_pristine(lua_State *L)
{
    lua_newtable(L);
    for (const char *const *k = PRISTINE_BASE; *k; k++) {
        lua_getglobal(L, *k);
        lua_setfield(L, -2, *k);
    }
    for (const char *const *k = PRISTINE_LIBS; *k; k++) {
        if (lua_getglobal(L, *k) != LUA_TTABLE) {
            lua_pop(L, 1);
            continue;
        }
        lua_newtable(L);
        lua_pushnil(L);
        while (lua_next(L, -3)) {
            lua_pushvalue(L, -2);
            lua_insert(L, -2);
            lua_rawset(L, -4);
        }
        lua_setfield(L, -3, *k);
        lua_pop(L, 1);
    }
    lua_rawsetp(L, LUA_REGISTRYINDEX, &PRISTINE_KEY);
    lua_newtable(L);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &SCRIPT_LOADED_KEY);
    lua_newtable(L);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &STDLIB_LOADED_KEY);
}

/* Pushes a fresh environment for one stdlib module: the pristine globals
 * and a require that hands out the stdlib's own module instances. May
 * raise. */
static void push_stdlib_env(lua_State *L)
{
    lua_newtable(L);
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &PRISTINE_KEY) == LUA_TTABLE) {
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            lua_pushvalue(L, -2);
            lua_insert(L, -2);
            lua_rawset(L, -5);
        }
    }
    lua_pop(L, 1);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &STDLIB_LOADED_KEY);
    lua_pushboolean(L, 1); /* the stdlib's require: its private modules too */
    lua_pushcclosure(L, l_require, 2);
    lua_setfield(L, -2, "require");
}

/* Loads stdlib/<name>.lua as text in a pristine environment and calls it
 * with its name (and, for kube, the private table). Leaves its result.
 * May raise. */
static void load_stdlib_module(lua_State *L, const char *stdlib_dir, const char *name)
{
    char path[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/%s.lua", stdlib_dir, name);
    if (n < 0 || (size_t)n >= sizeof path)
        luaL_error(L, "module '%s': path too long", name);
    for (char *p = path + strlen(stdlib_dir) + 1; *p; p++)
        if (*p == '.' && strcmp(p, ".lua") != 0)
            *p = '/';
    size_t len;
    char *src = util_read_file(path, &len);
    if (!src) {
        if (strcmp(name, "kube") == 0)
            luaL_error(L, "module 'kube': %s: %s", path, strerror(errno));
        luaL_error(L, "module '%s' not found: a migration can require only the stdlib", name);
    }
    char chunk[PATH_MAX + 16];
    snprintf(chunk, sizeof chunk, "@stdlib/%s.lua", name);
    int st = luaL_loadbufferx(L, src, len, chunk, "t");
    free(src);
    if (st != LUA_OK)
        lua_error(L);
    push_stdlib_env(L);
    if (!lua_setupvalue(L, -2, 1))
        lua_pop(L, 1);
    lua_pushstring(L, name);
    int nargs = 1;
    if (strcmp(name, "kube") == 0) {
        luakube_push_private(L);
        nargs = 2;
    }
    lua_call(L, nargs, 1);
}

/* The stdlib directory of a state: the sandbox's, or the spec state's
 * host context's. */
static const char *stdlib_dir_of(lua_State *L)
{
    struct sandbox *sb = from_state(L);
    if (sb)
        return sb->stdlib_dir;
    struct host_ctx *hc = host_ctx(L);
    return hc && hc->stdlib_dir ? hc->stdlib_dir : NULL;
}

/* The `kube` module (the spec state's package.preload uses it too). */
static int open_kube(lua_State *L)
{
    const char *dir = stdlib_dir_of(L);
    if (!dir)
        return luaL_error(L, "kube: this Lua state has no host context");
    load_stdlib_module(L, dir, "kube");
    return 1;
}

/* require(name): a native module, or stdlib/<name>.lua loaded as text in a
 * pristine environment. Upvalue 1 is the cache it serves from: the script's,
 * or (in a stdlib module's environment) the stdlib's own, so no table a
 * stdlib module uses is one a script was handed. Upvalue 2 is true for the
 * stdlib's require, which alone serves the private modules (a script's
 * does under `lua --stdlib-internals`, for the engine's own specs). */
static int l_require(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    lua_settop(L, 1);
    int cache = lua_upvalueindex(1);
    const struct host_ctx *hc = host_ctx(L);
    if (private_module(name) && !lua_toboolean(L, lua_upvalueindex(2)) &&
        !(hc && hc->kube.stdlib_internals))
        return luaL_error(L, "module '%s' not found: it is the stdlib's own; a migration "
                          "reaches the cluster through the kube module", name);
    if (lua_getfield(L, cache, name) != LUA_TNIL)
        return 1;
    lua_pop(L, 1);
    const luaL_Reg *m = native_modules;
    while (m->name && strcmp(m->name, name) != 0)
        m++;
    if (m->name) {
        lua_pushcfunction(L, m->func);
        lua_pushstring(L, name);
        lua_call(L, 1, 1);
    } else {
        struct sandbox *sb = from_state(L);
        if (!valid_module_name(name) || !sb)
            return luaL_error(L, "module '%s' not found: a migration can require only the stdlib",
                              name);
        load_stdlib_module(L, sb->stdlib_dir, name);
    }
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushboolean(L, 1);
    }
    lua_pushvalue(L, -1);
    lua_setfield(L, cache, name);
    return 1;
}

/* print writes to stdout unbuffered-enough for the parent to stream it. */
static int l_print(lua_State *L)
{
    int n = lua_gettop(L);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 1; i <= n; i++) {
        if (i > 1)
            luaL_addchar(&b, '\t');
        luaL_tolstring(L, i, NULL);
        luaL_addvalue(&b);
    }
    luaL_addchar(&b, '\n');
    luaL_pushresult(&b);
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    fwrite(s, 1, len, stdout);
    fflush(stdout);
    return 0;
}

/* ---- the allow-list --------------------------------------------------- */

/* Every global a migration sees and, for a library, the fields it keeps
 * (ALL_FIELDS: every field the library has). Anything else the opened
 * libraries define is removed, so a global a newer Lua adds stays out
 * until it is named here. load, print and require are the sandbox's own;
 * coroutine's create, resume and wrap too (every thread is armed). */
static const char *const ALL_FIELDS[] = {NULL};
static const char *const STRING_FIELDS[] = {
    "byte", "char", "find", "format", "gmatch", "gsub", "len", "lower", "match",
    "rep", "reverse", "sub", "upper", "pack", "packsize", "unpack", NULL};
static const char *const OS_FIELDS[] = {"time", "clock", "date", "difftime", NULL};

/* One global a migration sees; for a library, the fields it keeps (NULL
 * for a function or a value; an empty list: every field the library has). */
struct sandbox_global {
    const char *name;
    const char *const *fields;
};
/* Every global a migration sees, ended by {NULL, NULL}. */
static const struct sandbox_global sandbox_globals[] = {
    {"assert", NULL},   {"error", NULL},    {"getmetatable", NULL}, {"ipairs", NULL},
    {"load", NULL},     {"next", NULL},     {"pairs", NULL},        {"pcall", NULL},
    {"print", NULL},    {"rawequal", NULL}, {"rawget", NULL},       {"rawlen", NULL},
    {"rawset", NULL},   {"require", NULL},  {"select", NULL},       {"setmetatable", NULL},
    {"tonumber", NULL}, {"tostring", NULL}, {"type", NULL},         {"xpcall", NULL},
    {"warn", NULL},     {"_G", NULL},       {"_VERSION", NULL},
    {LUA_STRLIBNAME, STRING_FIELDS}, {LUA_OSLIBNAME, OS_FIELDS},
    {LUA_TABLIBNAME, ALL_FIELDS},    {LUA_MATHLIBNAME, ALL_FIELDS},
    {LUA_UTF8LIBNAME, ALL_FIELDS},   {LUA_COLIBNAME, ALL_FIELDS},
    {NULL, NULL},
};

static const struct sandbox_global *allowed_global(const char *name)
{
    for (const struct sandbox_global *g = sandbox_globals; g->name; g++)
        if (strcmp(g->name, name) == 0)
            return g;
    return NULL;
}

/* Keeps in _G exactly what sandbox_globals names: other globals go, and a
 * library with a field list is replaced by a table holding those fields
 * alone. May raise (memory). */
static void apply_allow_list(lua_State *L)
{
    lua_pushglobaltable(L);
    int g = lua_gettop(L);
    /* Collect first: a table may not gain or lose keys during lua_next. */
    lua_newtable(L);
    int drop = lua_gettop(L);
    lua_Integer ndrop = 0;
    lua_pushnil(L);
    while (lua_next(L, g)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING || !allowed_global(lua_tostring(L, -1))) {
            lua_pushvalue(L, -1);
            lua_rawseti(L, drop, ++ndrop);
        }
    }
    for (lua_Integer i = 1; i <= ndrop; i++) {
        lua_rawgeti(L, drop, i);
        lua_pushnil(L);
        lua_rawset(L, g);
    }
    lua_pop(L, 1);
    for (const struct sandbox_global *e = sandbox_globals; e->name; e++) {
        if (!e->fields || e->fields == ALL_FIELDS)
            continue;
        if (lua_getfield(L, g, e->name) != LUA_TTABLE) {
            lua_pop(L, 1);
            continue;
        }
        lua_newtable(L);
        for (const char *const *k = e->fields; *k; k++) {
            lua_getfield(L, -2, *k);
            lua_setfield(L, -2, *k);
        }
        lua_setfield(L, g, e->name);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

char *sandbox_luacheck_std(void)
{
    size_t cap = 4096, len = 0;
    char *out = malloc(cap);
    if (!out)
        return NULL;
#define PUT(...)                                                                   \
    do {                                                                           \
        int w_ = snprintf(out + len, cap - len, __VA_ARGS__);                      \
        if (w_ < 0 || (size_t)w_ >= cap - len) {                                   \
            free(out);                                                             \
            return NULL;                                                           \
        }                                                                          \
        len += (size_t)w_;                                                         \
    } while (0)
    PUT("-- The migration sandbox's globals, made from its allow-list\n"
        "-- (host/lua/sandbox.c, sandbox_globals): nothing else is there.\n"
        "std = 'cozy_sandbox'\nstds.cozy_sandbox = {\n  read_globals = {\n");
    for (const struct sandbox_global *e = sandbox_globals; e->name; e++) {
        if (!e->fields) {
            PUT("    '%s',\n", e->name);
        } else if (e->fields == ALL_FIELDS) {
            PUT("    %s = { other_fields = true },\n", e->name);
        } else {
            PUT("    %s = { fields = {", e->name);
            for (const char *const *k = e->fields; *k; k++)
                PUT(" '%s',", *k);
            PUT(" } },\n");
        }
    }
    PUT("  },\n}\nmax_line_length = false\n");
#undef PUT
    return out;
}

/* Runs protected (it allocates): the host context first, since the native
 * modules fetch it when they open. */
static int open_sandbox_libs(lua_State *L)
{
    host_ctx_attach(L, lua_touserdata(L, 1));
    static const luaL_Reg libs[] = {
        {LUA_GNAME, luaopen_base},         {LUA_STRLIBNAME, luaopen_string},
        {LUA_TABLIBNAME, luaopen_table},   {LUA_MATHLIBNAME, luaopen_math},
        {LUA_UTF8LIBNAME, luaopen_utf8},   {LUA_COLIBNAME, luaopen_coroutine},
        {LUA_OSLIBNAME, luaopen_os},       {NULL, NULL},
    };
    for (const luaL_Reg *l = libs; l->name; l++) {
        luaL_requiref(L, l->name, l->func, 1);
        lua_pop(L, 1);
    }
    /* The loaded table would hand out the unrestricted os library (require
     * never serves from it: it has caches of its own). */
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_pushnil(L);
    lua_setfield(L, -2, LUA_OSLIBNAME);
    lua_pushnil(L);
    lua_setfield(L, -2, LUA_GNAME);
    lua_pop(L, 1);

    /* string.dump is the door to binary chunks. The string metatable keeps
     * pointing at the original table (apply_allow_list gives the script a
     * copy), so strip dump there too. */
    lua_getglobal(L, LUA_STRLIBNAME);
    lua_pushnil(L);
    lua_setfield(L, -2, "dump");
    lua_pop(L, 1);
    apply_allow_list(L);
    lua_pushcfunction(L, l_load_text);
    lua_setglobal(L, "load");
    lua_pushcfunction(L, l_print);
    lua_setglobal(L, "print");
    /* Every coroutine is created and resumed through the sandbox, so each
     * thread carries the deadline hook. */
    lua_getglobal(L, LUA_COLIBNAME);
    lua_pushcfunction(L, co_create);
    lua_setfield(L, -2, "create");
    lua_pushcfunction(L, co_resume);
    lua_setfield(L, -2, "resume");
    lua_pushcfunction(L, co_wrap);
    lua_setfield(L, -2, "wrap");
    lua_pop(L, 1);
    /* Strings' methods come from the string library itself: a script that
     * asks for the metatable gets a stand-in pointing at its own `string`
     * table, so `s:format(...)` in the stdlib always means the real one. */
    lua_pushliteral(L, "");
    lua_getmetatable(L, -1);
    lua_createtable(L, 0, 1);
    lua_getglobal(L, LUA_STRLIBNAME);
    lua_setfield(L, -2, "__index");
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 2);
    capture_pristine(L);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &SCRIPT_LOADED_KEY);
    lua_pushboolean(L, 0); /* a script's require: no private module */
    lua_pushcclosure(L, l_require, 2);
    lua_setglobal(L, "require");
    return 0;
}

struct sandbox *sandbox_new(const struct sandbox_opts *o)
{
    struct sandbox *sb = calloc(1, sizeof *sb);
    if (!sb)
        return NULL;
    mem_set_limit(o->mem_limit);
    sb->on_panic = o->on_panic;
    snprintf(sb->stdlib_dir, sizeof sb->stdlib_dir, "%s",
             o->stdlib_dir ? o->stdlib_dir : paths_stdlib());
    sb->L = lua_newstate(cap_alloc, sb);
    if (!sb->L) {
        free(sb);
        return NULL;
    }
    host_ctx_init(sb->L);
    lua_atpanic(sb->L, on_panic);
    struct host_ctx hc;
    if (o->ctx)
        hc = *o->ctx;
    else {
        memset(&hc, 0, sizeof hc);
        kube_default_options(&hc.kube);
    }
    hc.stdlib_dir = sb->stdlib_dir;
    if (hc.deadline)
        lua_sethook(sb->L, deadline_hook, LUA_MASKCOUNT, HOOK_EVERY);
    lua_pushcfunction(sb->L, open_sandbox_libs);
    lua_pushlightuserdata(sb->L, &hc);
    if (lua_pcall(sb->L, 1, 0, 0) != LUA_OK) {
        lua_close(sb->L);
        free(sb);
        return NULL;
    }
    ljson_init(sb->L);
    return sb;
}

lua_State *sandbox_state(struct sandbox *sb) { return sb->L; }

#define ERROR_TEXT_S 1.0  /* how long turning an error value into text may take */

static int tostring_call(lua_State *L)
{
    luaL_tolstring(L, 1, NULL);
    return 1;
}

/* The message of an error value at idx, whatever it is. A string is taken
 * as it is (Lua put the script's FILE:LINE before it); the kube module's
 * error values name the script's line, the verb and the object
 * (luakube_error_text); anything else goes through luaL_tolstring (its __tostring) in a
 * protected call bounded by ERROR_TEXT_S, so a __tostring that raises,
 * returns a non-string or loops yields a generic message with the value's
 * type instead of ending the process. */
static void error_text(struct sandbox *sb, lua_State *L, int idx, char *err, size_t errlen)
{
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) == LUA_TSTRING) {
        snprintf(err, errlen, "%s", lua_tostring(L, idx));
        utf8_clip(err);
        return;
    }
    if (luakube_error_text(L, idx, err, errlen) == 0) {
        utf8_clip(err);
        return;
    }
    const char *type = luaL_typename(L, idx);
    sb->converting = 1;
    sb->convert_late = 0;
    sb->convert_by = now_mono() + ERROR_TEXT_S;
    lua_Hook saved = lua_gethook(L);
    int mask = lua_gethookmask(L), count = lua_gethookcount(L);
    lua_sethook(L, deadline_hook, LUA_MASKCOUNT, saved && count == 1 ? 1 : 1000);
    lua_pushcfunction(L, tostring_call);
    lua_pushvalue(L, idx);
    int st = lua_pcall(L, 1, 1, 0);
    sb->converting = 0;
    lua_sethook(L, saved, mask, count);
    if (st == LUA_OK && lua_type(L, -1) == LUA_TSTRING)
        snprintf(err, errlen, "%s", lua_tostring(L, -1));
    else
        snprintf(err, errlen, "(an error value of type %s that cannot be shown as text)", type);
    utf8_clip(err);
    lua_pop(L, 1);
}

static int run_chunk(lua_State *L)
{
    lua_call(L, 0, 0);
    return 0;
}

enum sandbox_status sandbox_run_file(struct sandbox *sb, const char *path, char *err,
                                     size_t errlen)
{
    lua_State *L = sb->L;
    size_t len;
    char *src = util_read_file(path, &len);
    if (!src) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return SANDBOX_LOADERR;
    }
    char chunk[PATH_MAX + 2];
    snprintf(chunk, sizeof chunk, "@%s", path);
    /* Skip a #! line the way Lua's lua.c does, then compile as text only. */
    size_t off = 0;
    if (len > 1 && src[0] == '#' && src[1] == '!')
        while (off < len && src[off] != '\n')
            off++;
    int st = luaL_loadbufferx(L, src + off, len - off, chunk, "t");
    free(src);
    if (st != LUA_OK) {
        error_text(sb, L, -1, err, errlen);
        lua_pop(L, 1);
        return mem_exceeded() ? SANDBOX_NOMEM : SANDBOX_LOADERR;
    }
    lua_pushcfunction(L, run_chunk);
    lua_insert(L, -2);
    st = lua_pcall(L, 1, 0, 0);
    if (sb->timed_out) {
        if (st != LUA_OK)
            lua_pop(L, 1);
        snprintf(err, errlen, "timeout: the migration ran past its deadline");
        return SANDBOX_TIMEOUT;
    }
    /* A script that returns only after its deadline (a C call that ran
     * long, a sleep up to it) ran past it all the same. */
    struct host_ctx *hc = host_ctx(L);
    if (st == LUA_OK && hc && hc->deadline && now_mono() >= hc->deadline) {
        snprintf(err, errlen, "timeout: the migration ran past its deadline");
        return SANDBOX_TIMEOUT;
    }
    if (st == LUA_OK && mem_exceeded()) {
        /* Like the deadline, the cap holds whatever a pcall did with its
         * error. */
        snprintf(err, errlen, "the migration reached its memory cap (an allocation was refused)");
        return SANDBOX_NOMEM;
    }
    if (st == LUA_OK)
        return SANDBOX_OK;
    error_text(sb, L, -1, err, errlen);
    lua_pop(L, 1);
    /* kube refuses every request past the deadline with the timeout error;
     * an error that ends a script past its deadline is the deadline's. */
    if (sb->timed_out || (hc && hc->deadline && now_mono() >= hc->deadline)) {
        snprintf(err, errlen, "timeout: the migration ran past its deadline");
        return SANDBOX_TIMEOUT;
    }
    if (st == LUA_ERRMEM || mem_exceeded()) {
        if (st != LUA_ERRMEM) {
            size_t l = strlen(err);
            snprintf(err + l, errlen - l, " (after the memory cap refused an allocation)");
        }
        return SANDBOX_NOMEM;
    }
    return SANDBOX_ERROR;
}

void sandbox_free(struct sandbox *sb)
{
    if (!sb)
        return;
    /* Finalizers run while the state closes, after the outcome is known:
     * they may not talk to the cluster any more. */
    luakube_end(sb->L);
    lua_close(sb->L);
    free(sb);
}

static int open_unrestricted(lua_State *L)
{
    host_ctx_attach(L, lua_touserdata(L, 1));
    luaL_openlibs(L);
    /* kube.lua runs in the same kind of environment as under the sandbox */
    capture_pristine(L);
    return 0;
}

lua_State *sandbox_new_unrestricted(const char *stdlib_dir, const struct host_ctx *ctx)
{
    lua_State *L = luaL_newstate();
    if (!L)
        return NULL;
    host_ctx_init(L);
    struct host_ctx hc = *ctx;
    hc.stdlib_dir = stdlib_dir;
    lua_pushcfunction(L, open_unrestricted);
    lua_pushlightuserdata(L, &hc);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
        lua_close(L);
        return NULL;
    }
    ljson_init(L);
    lua_getglobal(L, LUA_LOADLIBNAME);
    lua_getfield(L, -1, "preload");
    for (const luaL_Reg *m = native_modules; m->name; m++) {
        lua_pushcfunction(L, m->func);
        lua_setfield(L, -2, m->name);
    }
    lua_pop(L, 1);
    lua_getfield(L, -1, "path");
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", stdlib_dir, stdlib_dir,
                    lua_tostring(L, -1));
    lua_setfield(L, -3, "path");
    lua_pop(L, 2);
    return L;
}

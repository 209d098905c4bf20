/* sandbox.c: the Lua state a migration runs in.
 *
 * Owns: which libraries and globals a migration sees (an allow-list, as
 * Redis's script_lua.c does, never a deny-list), loading text chunks only,
 * `require` limited to the native modules and the stdlib directory, the
 * memory cap enforced by the allocator, and the deadline enforced by a count
 * hook that re-arms to fire on every instruction once the deadline passed.
 * Must never: expose io, debug, package, os.execute/getenv/remove, load a
 * binary chunk or a C library, or let a script's pcall end a timeout. The
 * parent's SIGKILL of the child's process group remains the backstop for a
 * script stuck inside C (a blocked request gets the remaining time as its
 * own timeout, see kube.c). */
#include "sandbox.h"

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

#include "hostctx.h"
#include "kube.h"
#include "log.h"
#include "luajson.h"
#include "mem.h"
#include "util.h"
#include "yaml.h"

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

/* Native modules, shared by the sandbox and the spec runner. */
static const luaL_Reg native_modules[] = {
    {"json", luaopen_json},
    {"yaml", luaopen_yaml},
    {"kube.core", luaopen_kube_core},
    {"kube", kube_open_stdlib},
    {"log", luaopen_log},
    {NULL, NULL},
};

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
    if (!sb->timed_out) {
        sb->timed_out = 1;
        /* From now on fire at every instruction: a pcall that caught the
         * first error gets the next one as soon as it runs anything. */
        lua_sethook(L, deadline_hook, LUA_MASKCOUNT, 1);
    }
    luaL_error(L, "timeout: the migration ran past its deadline");
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

/* require(name): a native module, or stdlib/<name>.lua loaded as text. */
static int l_require(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    if (lua_getfield(L, -1, name) != LUA_TNIL)
        return 1;
    lua_pop(L, 1);
    for (const luaL_Reg *m = native_modules; m->name; m++) {
        if (strcmp(m->name, name) == 0) {
            luaL_requiref(L, name, m->func, 0);
            return 1;
        }
    }
    struct sandbox *sb = from_state(L);
    if (!valid_module_name(name) || !sb)
        return luaL_error(L, "module '%s' not found: a migration can require only the stdlib",
                          name);
    char path[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/%s.lua", sb->stdlib_dir, name);
    if (n < 0 || (size_t)n >= sizeof path)
        return luaL_error(L, "module '%s': path too long", name);
    for (char *p = path + strlen(sb->stdlib_dir) + 1; *p; p++)
        if (*p == '.' && strcmp(p, ".lua") != 0)
            *p = '/';
    size_t len;
    char *src = read_file(path, &len);
    if (!src)
        return luaL_error(L, "module '%s' not found: a migration can require only the stdlib",
                          name);
    char chunk[PATH_MAX + 16];
    snprintf(chunk, sizeof chunk, "@stdlib/%s.lua", name);
    int st = luaL_loadbufferx(L, src, len, chunk, "t");
    free(src);
    if (st != LUA_OK)
        return lua_error(L);
    lua_pushstring(L, name);
    lua_call(L, 1, 1);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushboolean(L, 1);
    }
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, name);
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

static void keep_only(lua_State *L, const char *lib, const char *const *keep)
{
    if (lua_getglobal(L, lib) != LUA_TTABLE) {
        lua_pop(L, 1);
        return;
    }
    lua_newtable(L);
    for (const char *const *k = keep; *k; k++) {
        lua_getfield(L, -2, *k);
        lua_setfield(L, -2, *k);
    }
    lua_setglobal(L, lib);
    lua_pop(L, 1);
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
    /* The loaded table would hand out the unrestricted os library. */
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_pushnil(L);
    lua_setfield(L, -2, LUA_OSLIBNAME);
    lua_pushnil(L);
    lua_setfield(L, -2, LUA_GNAME);
    lua_pop(L, 1);

    static const char *const os_keep[] = {"time", "clock", "date", "difftime", NULL};
    keep_only(L, LUA_OSLIBNAME, os_keep);
    static const char *const string_keep[] = {
        "byte", "char", "find", "format", "gmatch", "gsub", "len", "lower", "match",
        "rep", "reverse", "sub", "upper", "pack", "packsize", "unpack", NULL};
    /* string.dump is the door to binary chunks. The string metatable keeps
     * pointing at the original table, so strip dump there too. */
    lua_getglobal(L, LUA_STRLIBNAME);
    lua_pushnil(L);
    lua_setfield(L, -2, "dump");
    lua_pop(L, 1);
    keep_only(L, LUA_STRLIBNAME, string_keep);

    static const char *const drop[] = {"dofile", "loadfile", "collectgarbage", "require",
                                       "package", "io", "debug", NULL};
    for (const char *const *d = drop; *d; d++) {
        lua_pushnil(L);
        lua_setglobal(L, *d);
    }
    lua_pushcfunction(L, l_load_text);
    lua_setglobal(L, "load");
    lua_pushcfunction(L, l_require);
    lua_setglobal(L, "require");
    lua_pushcfunction(L, l_print);
    lua_setglobal(L, "print");
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
             o->stdlib_dir ? o->stdlib_dir : sandbox_default_stdlib());
    sb->L = lua_newstate(cap_alloc, sb);
    if (!sb->L) {
        free(sb);
        return NULL;
    }
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
 * as it is; anything else goes through luaL_tolstring (its __tostring) in a
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
    char *src = read_file(path, &len);
    if (!src) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return SANDBOX_LOADERR;
    }
    char chunk[PATH_MAX + 2];
    snprintf(chunk, sizeof chunk, "@%s", path);
    /* Skip a #! line the way lua.c does, then compile as text only. */
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
    if (sb->timed_out) {
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
    struct host_ctx *hc = host_ctx(sb->L);
    if (hc)
        hc->ended = 1;
    lua_close(sb->L);
    free(sb);
}

const char *sandbox_status_name(enum sandbox_status s)
{
    switch (s) {
    case SANDBOX_OK: return "ok";
    case SANDBOX_ERROR: return "ScriptError";
    case SANDBOX_TIMEOUT: return "Timeout";
    case SANDBOX_NOMEM: return "MemoryLimit";
    case SANDBOX_LOADERR: return "LoadError";
    }
    return "Unknown";
}

static int open_unrestricted(lua_State *L)
{
    host_ctx_attach(L, lua_touserdata(L, 1));
    luaL_openlibs(L);
    return 0;
}

lua_State *sandbox_new_unrestricted(const char *stdlib_dir, const struct host_ctx *ctx)
{
    lua_State *L = luaL_newstate();
    if (!L)
        return NULL;
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

const char *sandbox_default_stdlib(void)
{
    static char dir[PATH_MAX];
    const char *env = getenv("COZY_STDLIB");
    if (env && *env) {
        snprintf(dir, sizeof dir, "%s", env);
        return dir;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            /* build/cozy-migrate and build/asan/cozy-migrate in a checkout */
            const char *ups[] = {"/../stdlib", "/../../stdlib", NULL};
            for (int i = 0; ups[i]; i++) {
                char cand[PATH_MAX + 32];
                snprintf(cand, sizeof cand, "%s%s", exe, ups[i]);
                char *real = realpath(cand, NULL);
                if (real) {
                    snprintf(dir, sizeof dir, "%s", real);
                    free(real);
                    return dir;
                }
            }
        }
    }
    snprintf(dir, sizeof dir, "/usr/share/cozy-migrate/stdlib");
    return dir;
}

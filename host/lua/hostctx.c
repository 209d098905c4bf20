/* hostctx.c: the per-state run context (see hostctx.h). Owns where it lives
 * (a registry userdata, its address in the state's extra space so fetching
 * it is one load). Must never hold a
 * process-wide copy: two states in one process have two contexts. */
#include "lua/hostctx.h"

#include <lauxlib.h>
#include <math.h>
#include <string.h>

#include "base/util.h"

static const char CTX_KEY = 'c';

void host_ctx_init(lua_State *L)
{
    memset(lua_getextraspace(L), 0, LUA_EXTRASPACE);
}

void host_ctx_attach(lua_State *L, const struct host_ctx *src)
{
    struct host_ctx *hc = lua_newuserdatauv(L, sizeof *hc, 0);
    *hc = *src;
    lua_rawsetp(L, LUA_REGISTRYINDEX, &CTX_KEY);
    *(struct host_ctx **)lua_getextraspace(L) = hc;
}

struct host_ctx *host_ctx(lua_State *L)
{
    return *(struct host_ctx **)lua_getextraspace(L);
}

double host_ctx_remaining(const struct host_ctx *hc)
{
    if (!hc || !hc->deadline)
        return HUGE_VAL;
    return hc->deadline - now_mono();
}

void host_ctx_call_pinned(lua_State *L, lua_CFunction f, void *ud, int nres)
{
    luaL_checkstack(L, 2, "host_ctx_call_pinned");
    /* -1 inside a finalizer: the collector is already held off there */
    int running = lua_gc(L, LUA_GCISRUNNING) == 1;
    if (running)
        lua_gc(L, LUA_GCSTOP);
    lua_pushcfunction(L, f);
    lua_pushlightuserdata(L, ud);
    int st = lua_pcall(L, 1, nres, 0);
    if (running) {
        lua_gc(L, LUA_GCRESTART);
        /* The host's memory is no longer read: let the collector catch up,
         * since a loop whose only allocations are conversions would
         * otherwise never collect. */
        if (st == LUA_OK)
            lua_gc(L, LUA_GCSTEP, 0);
    }
    if (st != LUA_OK)
        lua_error(L);
}

/* hostctx.c: the per-state run context (see hostctx.h). Owns where it lives
 * (a registry userdata, its address in the state's extra space so fetching
 * it is one load) and the defaults of the kube options. Must never hold a
 * process-wide copy: two states in one process have two contexts. */
#include "lua/hostctx.h"

#include <lauxlib.h>
#include <math.h>
#include <string.h>

#include "base/defaults.h"
#include "base/util.h"

static const char CTX_KEY = 'c';

void kube_default_options(struct kube_options *o)
{
    memset(o, 0, sizeof *o);
    o->ledger_namespace = DEFAULT_NAMESPACE;
    o->ledger_name = DEFAULT_LEDGER_NAME;
    o->lease_name = DEFAULT_LEDGER_NAME LEASE_SUFFIX;
    o->request_timeout = DEFAULT_REQUEST_TIMEOUT_S;
    o->max_attempts = DEFAULT_REQUEST_ATTEMPTS;
    o->retry_budget = DEFAULT_RETRY_BUDGET_S;
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

void host_ctx_unpredictable(struct host_ctx *hc, const char *why)
{
    if (!hc || hc->unpredictable)
        return;
    hc->unpredictable = 1;
    snprintf(hc->unpredictable_why, sizeof hc->unpredictable_why, "%s", why ? why : "");
    utf8_clip(hc->unpredictable_why);
}

void host_call_pinned(lua_State *L, lua_CFunction f, void *ud, int nres)
{
    luaL_checkstack(L, 2, "host_call_pinned");
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

/* hostctx.h: what the host tells one Lua state about the run it serves.
 *
 * Redis keeps a script's run context in its Lua state and fetches it at the
 * top of every API function; so do we. The creator of a state (sandbox.c,
 * for a migration or the spec runner) attaches one host_ctx; every native
 * module function starts with `struct host_ctx *hc = host_ctx(L);` and reads
 * its options there, never from a process global or the environment. It
 * carries inputs only (options, deadline, paths, the memory the journal
 * writes into) and nothing comes back through it: what a module keeps while
 * the script runs is its own (the kube module's client, a Lua userdata),
 * and what the host needs afterwards it asks the module for (luakube.h). */
#ifndef COZY_HOSTCTX_H
#define COZY_HOSTCTX_H
#include <lua.h>

#include "client/options.h"

struct journal_log;                 /* formats/journaldoc.h */

struct host_ctx {
    struct kube_options kube;
    double deadline;                /* monotonic seconds; 0 = none */
    const char *stdlib_dir;         /* where stdlib/ modules load from (set by the sandbox) */
    struct journal_log *journal_log; /* where the journal keeps its entries: memory the
                                     * child's supervisor shares (proc/child.c); NULL: its own */
    const char *overlay_path;       /* preview: the overlay file (overlay.h); NULL otherwise */
};

/* Clears L's extra space, so host_ctx(L) is NULL until a context is
 * attached (Lua copies the main thread's extra space into new threads but
 * never initialises it). Call right after creating the state. */
void host_ctx_init(lua_State *L);
/* Copies *src into a userdata anchored in the registry and makes it L's
 * context. Call once, right after creating the state. May raise (memory). */
void host_ctx_attach(lua_State *L, const struct host_ctx *src);
/* L's context. Never NULL once attached; NULL before (after host_ctx_init). */
struct host_ctx *host_ctx(lua_State *L);
/* Calls f while the collector is stopped, so no finalizer (a script's
 * __gc) can run, call back into the host and free or change host-owned
 * memory f is reading (the discovery catalogue, a preview's overlay) while
 * f turns it into Lua values. f finds ud as a light userdata at index 1 and
 * leaves nres results. Emergency collections still run (they never call
 * finalizers). May raise what f raises, after restarting the collector. */
void host_ctx_call_pinned(lua_State *L, lua_CFunction f, void *ud, int nres);
/* Seconds before the deadline (negative once passed); HUGE_VAL without one. */
double host_ctx_remaining(const struct host_ctx *hc);
#endif

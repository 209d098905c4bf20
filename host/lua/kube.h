/* kube.h: the C core of the `kube` Lua module (`kube.core`). Owns what every
 * script request passes through: the ledger/lease write guard, dry run and
 * its change report, apiserver errors as Lua values, and discovery caching.
 * Retries live in rest.c; the verbs are thin Lua in stdlib/kube.lua. Every
 * option (cluster, dry run, ledger names, deadline) comes from the state's
 * host context (hostctx.h), attached before the module is opened. */
#ifndef COZY_KUBE_H
#define COZY_KUBE_H
#include "lua/hostctx.h"

struct lua_State;
/* `kube.core`: resolve, sleep, now, config, errors; never the raw request. */
int luaopen_kube_core(struct lua_State *L);
/* Pushes the private table stdlib/kube.lua is called with ({request =
 * the raw request function}); only the host's loader of that file
 * (sandbox.c) calls it. May raise (memory). */
void kube_push_private(struct lua_State *L);
#endif

/* luakube.h: the C core of the `kube` Lua module (`kube.core`). Owns what every
 * script request passes through: the ledger/lease write guard, dry run and
 * its change report, apiserver errors as Lua values, and discovery caching.
 * Retries live in rest.c; the verbs are thin Lua in stdlib/kube.lua. Every
 * option (cluster, dry run, ledger names, deadline) comes from the state's
 * host context (hostctx.h), attached before the module is opened. */
#ifndef COZY_LUAKUBE_H
#define COZY_LUAKUBE_H
#include <stddef.h>

#include "lua/hostctx.h"

struct lua_State;
/* `kube.core`: resolve, sleep, now, config, errors; never the raw request. */
int luaopen_kube_core(struct lua_State *L);
/* Pushes the private table stdlib/kube.lua is called with ({request =
 * the raw request function}); only the host's loader of that file
 * (sandbox.c) calls it. May raise (memory). */
void luakube_push_private(struct lua_State *L);

/* The text of an error value that reached the top of a script, when it is
 * one of the module's (a kube error, or one the stdlib made): "FILE:LINE:
 * kube.VERB RESOURCE NS/NAME: <tostring>", the place being the script's
 * line that made the call (its `where`). 0 with buf filled, -1 when the
 * value is no kube error (the caller shows it its own way). Raises nothing. */
int luakube_error_text(struct lua_State *L, int idx, char *buf, size_t len);

/* What the host asks the module once the script has run (the host context
 * carries inputs only). */
/* The script is over, its state still open: the writes it left in flight
 * (fleet.each's, cut by the deadline or an error) are awaited for at most
 * KUBE_SETTLE_S and journaled as their answers say; any still unanswered
 * stays counted as a write of unknown outcome (journal.h). Makes no Lua
 * call. A no-op when the module was never opened. */
#define KUBE_SETTLE_S 0.5
void luakube_settle(struct lua_State *L);
/* The script is over (its state is closing): a finalizer may not talk to
 * the cluster any more. A no-op when the module was never opened. */
void luakube_end(struct lua_State *L);
/* Preview: the first request the preview could not predict, one line, or
 * NULL when there was none (or the module was never opened). */
const char *luakube_unpredictable(struct lua_State *L);
/* Preview: writes the overlay back to the context's overlay_path when the
 * script changed it, for the next migration's child. 0, or -1 with err. */
int luakube_preview_save(struct lua_State *L, char *err, size_t errlen);
#endif

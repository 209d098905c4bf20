/* sandbox.h: the Lua state a migration runs in. Owns the allow-list of
 * libraries and globals (sandbox_globals, which the linter's luacheck
 * globals are made from), the text-only loader, `require` restricted to the
 * project's stdlib (each stdlib module in a pristine environment of its own,
 * requiring its own module instances), the memory cap (in the allocator) and
 * the deadline (an instruction hook on every thread that keeps firing once
 * past it, so neither pcall nor a coroutine can outlast the timeout). Also
 * builds the unrestricted state the spec runner uses, with the same native
 * modules, so specs see what migrations see. */
#ifndef COZY_SANDBOX_H
#define COZY_SANDBOX_H
#include <lua.h>
#include <stddef.h>

#include "lua/hostctx.h"

enum sandbox_status {
    SANDBOX_OK = 0,
    SANDBOX_ERROR,      /* the script raised an error */
    SANDBOX_TIMEOUT,    /* the deadline passed (whatever the script did with the error) */
    SANDBOX_NOMEM,      /* the memory cap was hit */
    SANDBOX_LOADERR,    /* the file could not be read or compiled */
};

struct sandbox_opts {
    size_t mem_limit;           /* bytes; 0 = no cap */
    const struct host_ctx *ctx; /* copied onto the state; its deadline arms the
                                 * hook. NULL: default kube options, no deadline */
    const char *stdlib_dir;     /* where `require` finds Lua modules; NULL = paths_stdlib() */
    void (*on_panic)(const char *msg); /* an unprotected error: report msg; the
                                        * process then exits 1 (NULL: log it) */
};

struct sandbox;

/* A luacheck configuration whose read_globals are exactly sandbox_globals
 * (std 'cozy_sandbox'): what `lint` runs luacheck with. malloc'd; NULL when
 * out of memory. */
char *sandbox_luacheck_std(void);

struct sandbox *sandbox_new(const struct sandbox_opts *o);
lua_State *sandbox_state(struct sandbox *sb);
/* Loads PATH as a text chunk and calls it. The error text (if any) is left
 * in err with a traceback-free one-line message. An error value whose
 * __tostring fails or loops gives a generic message; the status keeps the
 * true reason. The deadline and the memory cap hold whatever a pcall did:
 * once hit, the status is SANDBOX_TIMEOUT / SANDBOX_NOMEM. */
enum sandbox_status sandbox_run_file(struct sandbox *sb, const char *path,
                                     char *err, size_t errlen);
void sandbox_free(struct sandbox *sb);

/* A full (unsandboxed) state with ctx attached, the native modules
 * preloaded and the stdlib on package.path; used by the spec runner, which
 * adds its own spec-only modules. NULL on allocation failure. */
lua_State *sandbox_new_unrestricted(const char *stdlib_dir, const struct host_ctx *ctx);
#endif

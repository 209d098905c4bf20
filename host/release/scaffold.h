/* scaffold.h: `cozy-migrate new`, a migration and its spec with the header
 * filled in. */
#ifndef COZY_SCAFFOLD_H
#define COZY_SCAFFOLD_H
#include <stddef.h>

#include "base/buf.h"

/* What an editor and luacheck read, handed down by the CLI (release/
 * cannot see the sandbox): each module's LuaLS stub (lua/modapi.h) and the
 * sandbox's luacheck globals (sandbox_luacheck_std). */
struct editor_files {
    const char *const *modules;     /* "kube", "helm", ... */
    char *const *stubs;             /* the stub of each */
    size_t n;
    const char *luacheck_std;
};

struct scaffold_opts {
    const char *dir;            /* the tree root (default .) */
    const char *slug;
    const char *tier;           /* pre-apply | background */
    const char *on_error;       /* abort | warn */
    const struct editor_files *editor; /* written when missing; NULL: none */
};

/* Writes migrations/<tier>/<slug>.lua and spec/migrations/<slug>_spec.lua.
 * Makes what else a tree needs when it is missing, so the tree passes
 * `spec`, `lint` and `make install` as written: migrations/revoked,
 * legacy-sh/legacy-map (no legacy migration), a .gitignore line for the
 * generated migrations/order.d/, and the editor files (scaffold_editor). An exit code: 0,
 * EXIT_USAGE (invalid slug, a --dir that is not a directory), EXIT_RELEASED (the slug
 * exists, or a release tag carried it), EXIT_PACKAGING (the tree does not
 * load), EXIT_HISTORY (git cannot answer), EXIT_FAILED (cannot write). */
int scaffold_new(const struct scaffold_opts *o);
/* Creates DIR/migrations/revoked (a comment, no slug) when it is missing:
 * a packaged tree must have one (tree.c refuses a tree without). 0, or -1
 * with "PATH: why" in err. */
int scaffold_revoked(const char *dir, struct buf *err);
/* Adds the line ignoring the generated migrations/order.d/ to DIR/.gitignore
 * (creating it) unless it has one. 0 (present), 1 (added), or -1 with
 * "PATH: why" in err. */
int scaffold_ignore_order_d(const char *dir, struct buf *err);
/* The editor files: DIR/.cozy-migrate/meta/<module>.lua for each stub
 * (replaced when refresh, else only written when missing), and, when
 * missing, DIR/.luarc.json (LuaLS: Lua 5.4, the stubs as its library,
 * busted's globals) and DIR/.luacheckrc (migrations: the sandbox's
 * globals; spec/: busted's). Prints each file it wrote. 0, or -1 with
 * "PATH: why" in err. */
int scaffold_editor(const char *dir, const struct editor_files *e, int refresh, struct buf *err);
#endif

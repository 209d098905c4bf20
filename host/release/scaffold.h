/* scaffold.h: `cozy-migrate new`, a migration and its spec with the header
 * filled in. */
#ifndef COZY_SCAFFOLD_H
#define COZY_SCAFFOLD_H

struct scaffold_opts {
    const char *dir;            /* the tree root (default .) */
    const char *slug;
    const char *tier;           /* pre-apply | background */
    const char *on_error;       /* abort | warn */
};

/* Writes migrations/<tier>/<slug>.lua and spec/migrations/<slug>_spec.lua.
 * Creates migrations/revoked too when the tree has none. An exit code: 0,
 * EXIT_USAGE (invalid slug, a --dir that is not a directory), EXIT_RELEASED (the slug
 * exists, or a release tag carried it), EXIT_PACKAGING (the tree does not
 * load), EXIT_HISTORY (git cannot answer), EXIT_FAILED (cannot write). */
int scaffold_new(const struct scaffold_opts *o);
/* Creates DIR/migrations/revoked (a comment, no slug) when it is missing:
 * a packaged tree must have one (tree.c refuses a tree without). 0, or -1
 * with "PATH: why" in err. */
int scaffold_revoked(const char *dir, char *err, size_t errlen);
#endif

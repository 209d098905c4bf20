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
 * An exit code: 0, EXIT_USAGE (invalid slug), EXIT_RELEASED (the slug
 * exists, or a release tag carried it), EXIT_PACKAGING (the tree does not
 * load), EXIT_HISTORY (git cannot answer), EXIT_FAILED (cannot write). */
int scaffold_new(const struct scaffold_opts *o);
#endif

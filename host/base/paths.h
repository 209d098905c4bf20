/* paths.h: where the engine finds what it ships and where it may write:
 * the stdlib the sandbox loads, the tree (migrations/, legacy-sh/) it runs
 * by default, and the directory for private temporary files. The one place
 * that reads COZY_STDLIB, COZY_MIGRATIONS_DIR and TMPDIR. */
#ifndef COZY_PATHS_H
#define COZY_PATHS_H

/* The directory holding the stdlib: $COZY_STDLIB, else <exe>/../stdlib
 * (or <exe>/../../stdlib: build/asan/ in a checkout), else
 * /usr/share/cozy-migrate/stdlib. Returns a static buffer. */
const char *paths_stdlib(void);
/* The tree a run reads when no --dir says: $COZY_MIGRATIONS_DIR, else the
 * directory holding the stdlib (the image's /usr/share/cozy-migrate, or
 * the checkout above build/), else ".". Returns a static buffer. */
const char *paths_tree(void);
/* $TMPDIR when set and not empty, else /tmp. */
const char *paths_tmpdir(void);
#endif

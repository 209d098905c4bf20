/* paths.h: where the engine finds what it ships and where it may write:
 * the stdlib the sandbox loads, the tree (migrations/, legacy-sh/) it runs
 * by default, the spec harness `cozy-migrate spec` puts on package.path,
 * and the directory for private temporary files. The one place that reads
 * COZY_STDLIB, COZY_MIGRATIONS_DIR, COZY_HARNESS and TMPDIR. */
#ifndef COZY_PATHS_H
#define COZY_PATHS_H

/* The directory holding the stdlib: $COZY_STDLIB, else <exe>/../stdlib
 * (or <exe>/../../stdlib: build/asan/ in a checkout), else
 * /usr/share/cozy-migrate/stdlib. Returns a static buffer. */
const char *paths_stdlib(void);
/* The tree a run reads when no --dir says: $COZY_MIGRATIONS_DIR, else the
 * tree an install laid out beside the binary (<dir>/bin/cozy-migrate with
 * <dir>/migrations: the image's /usr/share/cozy-migrate), else NULL: a
 * checkout's build/ and an install without a tree have none. Returns the
 * environment's string or a static buffer. */
const char *paths_tree(void);
/* The directory holding the spec harness (support/migration.lua and the
 * modules beside it): $COZY_HARNESS, else <exe>/../spec (a checkout's
 * spec/, or the share/cozy-migrate/spec `make install` lays out), else
 * <exe>/../../spec (build/asan/), else /usr/share/cozy-migrate/spec.
 * Returns a static buffer. */
const char *paths_harness(void);
/* $TMPDIR when set and not empty, else /tmp. */
const char *paths_tmpdir(void);
#endif

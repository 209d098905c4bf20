/* import.h: `cozy-migrate import-legacy`, adopting a platform's numbered
 * shell migrations into legacy-sh/. */
#ifndef COZY_IMPORT_H
#define COZY_IMPORT_H

struct import_opts {
    const char *from;           /* holds 1 .. N and lib/ */
    const char *names;          /* "N slug" a line */
    const char *dest;           /* tree root receiving legacy-sh/ (default .) */
    const char *const *dry_run_vars; /* "SCRIPT=VAR": SCRIPT (slug or old number)
                                      * reads VAR for its own dry run */
    size_t ndry_run_vars;
};

/* An exit code: 0, EXIT_USAGE (a dry-run variable for no script, twice for
 * one, or not a variable name), EXIT_PACKAGING (a missing number or name, a file without
 * a shebang, an invalid slug, a bad names line), EXIT_RELEASED (legacy-sh/
 * already holds migrations, or a slug is taken), EXIT_FAILED (I/O). */
int import_legacy(const struct import_opts *o);
#endif

/* header.h: the `cozystack-migration:` header every script starts with. The one
 * parser of it, used by the runner, the linter and the spec harness. */
#ifndef COZY_HEADER_H
#define COZY_HEADER_H
#include <stddef.h>

enum on_error { ON_ERROR_UNSET = 0, ON_ERROR_ABORT, ON_ERROR_WARN };

struct header {
    enum on_error on_error;
    char **requires;        /* slugs */
    size_t nrequires;
    double timeout;         /* seconds; 0 when the header sets none */
    int timeout_line;       /* the line that sets it (0: none), for the timeout's message */
    int missing;            /* set when parsing failed because the text has no header line
                             * at all (not a migration: `lua` and `exec` run it with
                             * defaults), 0 for every other failure */
    char dry_run_var[64];   /* shell: dry-run=VAR, the variable set to 1 in a dry run
                             * (the script promises to change nothing then); "" = none */
};

/* Parses the header of a script's text. `lua` selects the comment prefix
 * ("--" for Lua, "#" for shell). Returns 0, or -1 with "PATH:LINE: what is
 * wrong" (or "PATH: ..." for a missing header) in err. */
int header_parse(const char *path, const char *text, size_t len, int lua, struct header *h,
                 char *err, size_t errlen);
void header_free(struct header *h);
/* Where a migration's deadline comes from, for the timeout's message:
 * "--timeout 5s" (override > 0), "timeout=1s, PATH:LINE" (the header's),
 * or "the default 10m: PATH sets no timeout=" (h NULL or without one).
 * Returns buf. */
const char *header_timeout_why(const struct header *h, const char *path, double override,
                               char *buf, size_t len);
const char *header_on_error_name(enum on_error e);
#endif

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
    char dry_run_var[64];   /* shell: dry-run=VAR, the variable set to 1 in a dry run
                             * (the script promises to change nothing then); "" = none */
};

/* Parses the header of a script's text. `lua` selects the comment prefix
 * ("--" for Lua, "#" for shell). Returns 0, or -1 with "PATH:LINE: what is
 * wrong" (or "PATH: ..." for a missing header) in err. */
int header_parse(const char *path, const char *text, size_t len, int lua, struct header *h,
                 char *err, size_t errlen);
void header_free(struct header *h);
const char *on_error_name(enum on_error e);
#endif

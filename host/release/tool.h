/* tool.h: running an external tool (git, shellcheck, luacheck) by argv and
 * capturing what it prints. Used by the release commands only; the runner
 * supervises migrations in child.c, never through this. */
#ifndef COZY_TOOL_H
#define COZY_TOOL_H
#include <stddef.h>

struct tool_result {
    int status;         /* exit status, 128+N when killed by signal N, -1 when it did not start */
    int not_found;      /* the program is not installed (exec failed with ENOENT) */
    char *out;          /* stdout, NUL-terminated (never NULL after tool_run returns 0) */
    size_t out_len;
    char *err;          /* stderr, NUL-terminated */
    size_t err_len;
};

/* Runs argv[0] (searched in PATH) with argv, in cwd when not NULL, stdin
 * from /dev/null, capturing stdout and stderr. Returns 0 when the program
 * ran (whatever its exit status) and -1 when it could not be started or its
 * output could not be read (res->not_found says whether it is missing). */
int tool_run(const char *const *argv, const char *cwd, struct tool_result *res);
void tool_result_free(struct tool_result *res);
/* The first line of s (at most n-1 bytes) into buf, for one-line errors. */
void tool_first_line(const char *s, char *buf, size_t n);
#endif

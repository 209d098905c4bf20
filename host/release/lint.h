/* lint.h: `cozy-migrate lint`, the authoring contract as checks (DESIGN.md
 * "Authoring contract"). */
#ifndef COZY_LINT_H
#define COZY_LINT_H

struct lint_opts {
    const char *dir;            /* the tree root: migrations/, legacy-sh/, spec/ */
    const char *against;        /* compare shipped scripts with this revision, or NULL */
    int history;                /* check slugs against every release tag */
};

/* Prints each problem as "file:line: rule: what is wrong" on stdout and a
 * summary on stderr. Returns 0, EXIT_PACKAGING when anything failed,
 * EXIT_HISTORY when git cannot answer what was asked, EXIT_TOOL when
 * shellcheck, luacheck or git is missing. */
int lint_run(const struct lint_opts *o);

/* The luacheck configuration matching the sandbox's globals. */
extern const char lint_luacheckrc[];
#endif

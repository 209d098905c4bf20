/* lint.h: `cozy-migrate lint`, the authoring contract as checks (DESIGN.md
 * "Authoring contract"). */
#ifndef COZY_LINT_H
#define COZY_LINT_H

/* One module a migration requires and every field it has (modapi.h reads
 * them from the modules themselves; the CLI hands them down). */
struct lint_module {
    const char *name;
    const char *const *fields;
    size_t nfields;
};

struct lint_opts {
    const char *dir;            /* the tree root: migrations/, legacy-sh/, spec/ */
    const char *against;        /* compare shipped scripts with this revision, or NULL */
    int history;                /* check slugs against every release tag */
    const char *luacheckrc;     /* the luacheck configuration: the sandbox's globals
                                 * (sandbox_luacheck_std, handed down by the CLI) */
    const struct lint_module *modules; /* the api rule's modules; none: the rule checks
                                        * nothing it cannot know */
    size_t nmodules;
    const char *image_inventory; /* what the image holds (tools/image-inventory's file):
                                  * the runnable rule; NULL: it checks nothing */
};

struct lint;
/* One rule of the contract: what --help and docs/writing-migrations.md list. */
struct lint_rule {
    const char *name;
    const char *when;               /* the flag it needs ("`--history`"), NULL: always */
    int (*check)(struct lint *l);   /* adds its findings; 0, or an exit code */
    const char *doc;                /* one line */
};
/* Every rule, in order, ended by {NULL}. */
extern const struct lint_rule lint_rules[];

/* Prints each problem as "file:line: rule: what is wrong" on stdout and a
 * summary on stderr. Returns 0, EXIT_PACKAGING when anything failed,
 * EXIT_HISTORY when git cannot answer what was asked, EXIT_TOOL when
 * shellcheck, luacheck or git is missing. */
int lint_run(const struct lint_opts *o);
#endif

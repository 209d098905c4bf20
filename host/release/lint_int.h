/* lint_int.h: what the linter's two files share: what it read of the tree
 * and of git (lint.c loads it), the findings, and the rules that read git's
 * history (lint_history.c). Nothing outside release/ includes it. */
#ifndef COZY_LINT_INT_H
#define COZY_LINT_INT_H
#include <stddef.h>

#include "formats/header.h"
#include "formats/manifest.h"
#include "release/gitread.h"
#include "release/lint.h"
#include "release/order.h"

struct finding {
    char *file;
    int line;
    const char *rule;
    char *msg;
    size_t seq;
};

/* One script as the loader's scan found it (tree_scan_dir). */
struct script {
    char slug[256];
    char rel[600];              /* path relative to the tree root */
    const char *tier;           /* "pre-apply", "background", "legacy" */
    int shell;
    int slug_ok;
    struct header h;
    int has_header;
    char header_err[1024];      /* why it has none ("" when it has one) */
    int header_line;
    int requires_line;
    int shebang_ok;
    long batch;                 /* 0 legacy, 1+ tag index, 1000000 untagged */
    const char *dup_of;         /* the script that has the slug first, or NULL */
};

/* What the scan met that is no script: the loader refuses each. */
struct stray {
    char rel[600];
    char why[600];
};

struct lint {
    const struct lint_opts *o;
    struct finding *f;
    size_t nf;
    struct script *s;
    size_t ns;
    struct stray *st;
    size_t nst;
    int oom;
    /* migrations/revoked and legacy-sh/legacy-map */
    int revoked_missing;
    char revoked_err[2048];
    struct slug_list revoked;
    char legacy_err[2048];
    struct legacy_map lm;
    /* the manifest, when there is one */
    int have_man;
    char man_err[2048];
    struct manifest man;
    /* git, when the tree is in a repository */
    int have_git;
    struct git_repo g;
    size_t tracked_order_d;
    int have_walk;
    struct walk w;
    struct tagset *tags;        /* lint_history.c's: the release tags' scripts, read once */
    /* lint_frozen.c's: legacy-sh/legacy-sha256sums, when there is one */
    int have_digests;
    struct digest_list digests;
    char digests_err[2048];     /* why it cannot be read ("" when it can) */
    int digests_err_line;
};

/* One finding "file:line: rule: what" (file relative to the tree root). */
void lint_add(struct lint *l, const char *rel, int line, const char *rule, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* lint_history.c: the rules over the release tags (an exit code each). */
int lint_rule_history(struct lint *l);
int lint_rule_changed(struct lint *l);
void lint_history_free(struct lint *l);

/* lint_frozen.c: the frozen legacy set, proven by its digest list. */
void lint_read_frozen(struct lint *l);
/* rel (relative to the tree root) is a legacy file the list covers: it is
 * shellchecked for errors only. */
int lint_is_frozen(const struct lint *l, const char *rel);
int lint_rule_frozen(struct lint *l);
void lint_frozen_free(struct lint *l);
/* lint_api.c: the fields a Lua migration uses of the modules it requires
 * exist (an exit code). */
int lint_rule_api(struct lint *l);
/* lint_runnable.c: with --image-inventory, every command a shell migration
 * calls and every literal path it reads is in that image (an exit code). */
int lint_rule_runnable(struct lint *l);
#endif

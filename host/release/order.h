/* order.h: the manifest generator (DESIGN.md "The manifest generator"):
 * order.d/ from the release tags of this line's git history. */
#ifndef COZY_ORDER_H
#define COZY_ORDER_H
#include <stddef.h>

#include "formats/manifest.h"
#include "release/gitread.h"

/* A script as a revision's tree holds it. tier is "pre-apply",
 * "background" or "legacy" (legacy-sh/<slug>.sh). */
struct rev_script {
    char *slug;
    const char *tier;
    char *path;                 /* relative to the tree root */
    char oid[65];
};
/* The scripts of rev's tree; an exit code (0, EXIT_PACKAGING for a file
 * that is no migration, EXIT_HISTORY when git fails) with err. */
int order_scripts_at(const struct git_repo *g, const char *rev, struct rev_script **s,
                     size_t *n, struct buf *err);
void order_rev_scripts_free(struct rev_script *s, size_t n);
const struct rev_script *order_rev_script_find(const struct rev_script *s, size_t n, const char *slug);

/* The tag walk: this line's release tags (reachable from rev) in version
 * order from the first whose tree has the engine's layout (older ones
 * predate the engine and play no part), and for each slug any of them
 * carries, the first one. Gaps in the line are not errors; one a fetch
 * could fill is warned about (order_walk.c, check_gaps). */
struct walk_slug {
    char *slug;
    size_t first;               /* index into tags */
    char *path;                 /* at that tag */
    char oid[65];
    const char *tier;
    size_t last;                /* the last tag that carries it */
    size_t count;               /* how many tags carry it */
};
struct walk {
    struct rtag *tags;
    size_t ntags;
    struct walk_slug *s;
    size_t n;
    struct rev_script *at;      /* rev's own scripts */
    size_t nat;
    int rev_tagged;             /* a release tag points at rev */
};
/* An exit code with err: EXIT_HISTORY for a shallow clone or a git
 * failure, EXIT_PACKAGING for a bad file at a tag. */
int order_walk(const struct git_repo *g, const char *rev, struct walk *w, struct buf *err);
void order_walk_free(struct walk *w);
const struct walk_slug *order_walk_find(const struct walk *w, const char *slug);
/* Drops w's tags older than the first whose tree has the engine's layout
 * (the line both the walk and the prefix check start from). 0, or
 * EXIT_HISTORY with err. */
int order_walk_drop_pre_engine(const struct git_repo *g, struct walk *w, struct buf *err);

/* The manifest of a --local run against a development cluster: what
 * `order` would write if dir's working tree were committed, so an edited or
 * new script runs without a commit. From dir's migrations/order.d when there
 * is one, with what it lacks added: a working-tree Lua script in no batch
 * goes to the untagged batch (alphabetical, then requires, after what that
 * batch holds), and an untagged entry whose script is gone is left out.
 * Otherwise generated: the release tags of HEAD's line when dir is in a git
 * repository with a commit, with the working tree's scripts and legacy-map
 * in HEAD's place (no tag, or no repository: legacy-map's batch and every
 * Lua script untagged). Never written to disk. note says what it did, one
 * line ("" when order.d was used as it is). An exit code with err:
 * EXIT_PACKAGING (a cycle, a dangling or later requires, a bad header or
 * legacy-map), EXIT_HISTORY (a shallow clone, a git failure), EXIT_TOOL. */
int order_local(const char *dir, struct manifest *m, char *note, size_t notelen, struct buf *err);


/* `cozy-migrate order`. */
int order_cmd(const char *repo, const char *rev, const char *out, int check_prefix);
#endif

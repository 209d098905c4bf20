/* tree.h: everything the engine reads from the image (or a checkout):
 * scripts with their headers and checksums, the manifest, `revoked`,
 * `legacy-map`, and the digests of the shared code. tree_load validates it
 * all (DESIGN.md "What run does", step 2) before anything runs. */
#ifndef COZY_TREE_H
#define COZY_TREE_H
#include <stddef.h>

#include "formats/header.h"
#include "formats/manifest.h"

struct migration {
    char *slug;
    const char *tier;       /* "pre-apply" or "background" */
    char *path;
    int is_shell;
    struct header h;
    char *header_err;       /* tree_load_with: why its header does not parse ("PATH:LINE:
                             * ..."), h then empty; NULL when it parses */
    char sha256[65];
    size_t batch;           /* index into tree.man.b */
    size_t order;           /* position in the whole manifest */
};

struct tree {
    char *root;
    struct migration *m;
    size_t n;
    struct manifest man;
    struct slug_list revoked;
    struct legacy_map legacy;
    size_t nbad;            /* migrations whose header does not parse (tree_load_with) */
    char lib_lua[65];       /* digest of the stdlib that runs (paths_stdlib) */
    char lib_sh[65];        /* digest of legacy-sh/lib/ */
    /* Indexes, so finding a slug among thousands is a binary search: */
    const struct migration **by_slug;   /* m sorted by slug */
    struct tree_place *places;          /* manifest entries sorted by slug, then order */
    size_t nplaces;
};

struct tree_place {
    const char *slug;
    size_t batch, entry;
    long order;
};

/* One entry of a script directory as the loader judges it. */
enum tree_entry_kind {
    TREE_SCRIPT,            /* a regular file named <slug><ext> (the slug not yet checked) */
    TREE_STRAY,             /* anything the loader refuses there: why says what it is */
};
struct tree_entry {
    enum tree_entry_kind kind;
    const char *path;       /* ROOT/REL/NAME */
    const char *rel;        /* REL/NAME */
    const char *name;
    char slug[256];         /* TREE_SCRIPT: NAME without its extension */
    const char *why;        /* TREE_STRAY: "dangling symlink", "a directory; ...", ... */
    int misnamed;           /* TREE_STRAY: a regular file not named <slug><ext> */
};
/* Called for each entry; non-zero stops the walk and is returned. */
typedef int (*tree_visit_fn)(void *ud, const struct tree_entry *e);
/* Walks ROOT/REL (migrations/<tier>, or legacy-sh when shell), calling fn
 * for every entry but legacy-sh's lib/ and legacy-map: first every one that
 * is not a regular file (a dotfile, a subdirectory, a dangling or looping
 * symlink, a device), then the regular files, those not named <slug>.lua
 * (or .sh) as strays. The one reading of a script directory, so what the
 * linter passes (it reports every stray) the runner loads (it stops at the
 * first). A missing directory has no entries. 0, fn's non-zero, or -1 with
 * err when the directory cannot be listed. */
int tree_scan_dir(const char *root, const char *rel, int shell, tree_visit_fn fn, void *ud,
                  char *err, size_t errlen);

/* ROOT/migrations/order.d, the manifest's directory, in buf; returns buf.
 * The one place the path is built. */
const char *tree_order_d(const char *root, char *buf, size_t len);

/* Loads ROOT (holding migrations/ and legacy-sh/) and validates it. Returns
 * 0, or -1 with one line in err naming the file and line or the slug. */
int tree_load(const char *root, struct tree *t, char *err, size_t errlen);
/* tree_load, but a header that does not parse fails only its own
 * migration: it is loaded with header_err set (and an empty header) and
 * counted in nbad; everything else is validated as tree_load does. What a
 * bad header may block is the caller's to decide (the runner: every run of
 * the whole tier, and its own slug's). With the manifest m (copied) in
 * place of ROOT's order.d when m is not NULL: a --local run's, made from
 * the working tree (release/order.h order_local). */
int tree_load_with(const char *root, const struct manifest *m, struct tree *t, char *err,
                   size_t errlen);
/* The first migration whose header does not parse, or NULL. */
const struct migration *tree_first_bad(const struct tree *t);
/* Loads only the scripts and their headers, without a manifest (the linter
 * and `new` work on a tree that has none). */
int tree_load_scripts(const char *root, struct tree *t, char *err, size_t errlen);
/* Builds the slug indexes (by_slug, places) of a tree filled by hand (the
 * index's view of a release, index.h): 0, or -1 when out of memory. */
int tree_reindex(struct tree *t);
const struct migration *tree_find(const struct tree *t, const char *slug);
int tree_revoked(const struct tree *t, const char *slug);
/* Where slug first sits in the manifest (batch and entry index), and its
 * position in the whole manifest; -1 when it is in no batch. */
long tree_locate(const struct tree *t, const char *slug, size_t *bi, size_t *ei);
void tree_free(struct tree *t);

/* Hex sha256 of a file, and of a text. 0 on success. */
int sha256_file(const char *path, char out[65]);
int sha256_text(const char *buf, size_t len, char out[65]);
/* The regular files below dir (legacy-sh/lib/: what sha256_dir digests),
 * relative to it, sorted as whole paths; a missing dir has none. 0, or -1
 * with "PATH: why" in err. Free each name and the array. */
int tree_list_files(const char *dir, char ***list, size_t *n, char *err, size_t errlen);
#endif

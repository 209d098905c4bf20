/* manifest.h: the line formats that say what exists and in which order:
 * slugs, order.d/ batches, `revoked`, `legacy-map`, and the digest list of
 * the frozen legacy set. One parser each, shared by the runner, the linter,
 * the generator and the specs. */
#ifndef COZY_MANIFEST_H
#define COZY_MANIFEST_H
#include <stddef.h>

#include "base/buf.h"

#define SLUG_MAX 60

/* The batches the generator names itself: the legacy scripts, first, in
 * legacy-map's order; and the slugs no release tag carries, last. */
#define LEGACY_BATCH "00000-legacy"
#define UNTAGGED_BATCH "99999-untagged"

/* ^[a-z0-9]+(-[a-z0-9]+)*$, at most 60 characters. */
int slug_valid(const char *s);

struct batch_entry {
    char *slug;
    int retired;
    int line;
};

struct batch {
    char *name;             /* file name, e.g. "00003-v1.7.0" */
    char *path;
    struct batch_entry *e;
    size_t n;
};

struct manifest {
    struct batch *b;        /* in file-name order */
    size_t n;
};

/* One batch file. name must be NNNNN-<release>. Returns 0 or -1 with
 * "PATH:LINE: ..." in err. In every line format a line holding a NUL byte,
 * one longer than 511 bytes before its comment, or a byte order mark is
 * refused, never cut. */
int manifest_parse_batch(const char *name, const char *path, const char *text, size_t len,
                         struct batch *b, struct buf *err);
/* Reads every batch in DIR (order.d/) in file-name order. A missing DIR is an
 * error that says how to generate it; an entry that is not a batch file (a
 * dotfile too) is an error. */
int manifest_load(const char *dir, struct manifest *m, struct buf *err);
void manifest_free(struct manifest *m);

struct slug_list {
    char **slug;
    int *line;
    size_t n;
};
/* `revoked`: one slug a line, blank lines and # comments (also trailing).
 * revoked_load refuses a missing file: a packaged tree always has one. */
int revoked_parse(const char *path, const char *text, size_t len, struct slug_list *l,
                  struct buf *err);
int revoked_load(const char *path, struct slug_list *l, struct buf *err);
void slug_list_free(struct slug_list *l);

/* The largest number a legacy-map line may hold; the ledger's `version`
 * is at most one more. */
#define LEGACY_NUMBER_MAX 99999

struct legacy_entry {
    long number;            /* the old integer */
    char *slug;
    int line;
};
struct legacy_map {
    struct legacy_entry *e; /* in file order, which must be increasing */
    size_t n;
};
/* `legacy-map`: "N slug" a line; N a plain decimal from 1 to
 * LEGACY_NUMBER_MAX, unique and increasing, slugs unique. A missing file is
 * an empty map. */
int legacy_map_parse(const char *path, const char *text, size_t len, struct legacy_map *m,
                     struct buf *err);
int legacy_map_load(const char *path, struct legacy_map *m, struct buf *err);
void legacy_map_free(struct legacy_map *m);

/* legacy-sh/LEGACY_DIGESTS: what `import-legacy` imported, so lint can prove
 * the frozen legacy set byte for byte what it was. The format is
 * sha256sum's ("<64 hex>  <path>", or " *<path>"), so `sha256sum -c` checks
 * it too: paths relative to legacy-sh/, each once, none absolute, none with
 * a `.` or `..` component or a backslash; nothing else (no comments, no
 * blank lines). */
#define LEGACY_DIGESTS "legacy-sha256sums"
struct digest_entry {
    char *path;
    char sha256[65];
    int line;
};
struct digest_list {
    struct digest_entry *e; /* in file order */
    size_t n;
};
int digest_list_parse(const char *path, const char *text, size_t len, struct digest_list *d,
                      struct buf *err);
/* A missing file: 0 with *present 0 and an empty list. */
int digest_list_load(const char *path, struct digest_list *d, int *present, struct buf *err);
const struct digest_entry *digest_list_find(const struct digest_list *d, const char *path);
void digest_list_free(struct digest_list *d);
#endif

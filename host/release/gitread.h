/* gitread.h: what the release commands read from git: release tags in
 * version order, the scripts a revision's tree holds (path and blob id), a
 * blob's text, whether the clone is shallow. Read-only; never the working
 * tree, except hashing working files to compare them with blobs. */
#ifndef COZY_GITREAD_H
#define COZY_GITREAD_H
#include <stddef.h>

#include "base/buf.h"

/* vX.Y.Z or vX.Y.Z-rc.N (N >= 1); numbers without leading zeros. */
struct release_version {
    long major, minor, patch;
    long rc;                    /* 0 for the release itself */
};
/* 0 when tag is a release tag, -1 when it is any other name. */
int release_version_parse(const char *tag, struct release_version *v);
/* Version order; a release candidate sorts before its release. */
int release_version_cmp(const struct release_version *a, const struct release_version *b);

struct git_repo {
    char *dir;                  /* as given: git runs with -C dir */
    char *prefix;               /* dir inside the repository: "" or "sub/dir/" */
};

enum { GIT_OK = 0, GIT_NOT_REPO = -1, GIT_MISSING = -2, GIT_ERROR = -3 };
/* GIT_OK, GIT_NOT_REPO (dir is in no git repository), GIT_MISSING (no git
 * binary), GIT_ERROR; err says which in one line. */
int git_open(const char *dir, struct git_repo *g, struct buf *err);
void git_close(struct git_repo *g);

/* 1 shallow, 0 complete, -1 error (err). */
int git_is_shallow(const struct git_repo *g, struct buf *err);
/* 1 when the repository has a remote to fetch from, 0 without, -1 error. */
int git_has_remote(const struct git_repo *g, struct buf *err);
/* 0 when rev names a commit (its id in oid), -1 otherwise. */
int git_commit_of(const struct git_repo *g, const char *rev, char oid[65], struct buf *err);

struct rtag {
    char *name;
    struct release_version v;
};
/* Release tags, in version order: all of them, or only those reachable from
 * merged (--merged) or pointing at points_at. Other tag names are ignored. */
int git_release_tags(const struct git_repo *g, const char *merged, const char *points_at,
                     struct rtag **tags, size_t *n, struct buf *err);
void git_release_tags_free(struct rtag *tags, size_t n);

struct git_entry {
    char *path;                 /* relative to the repo's prefix */
    char oid[65];
};
/* Parses `git ls-tree -r -z` output: "<mode> <type> <oid>\t<path>\0"...
 * Keeps blobs only. 0, or -1 with one line in err. */
int git_tree_parse(const char *buf, size_t len, struct git_entry **e, size_t *n, struct buf *err);
/* The blobs under paths (relative to the prefix) in rev's tree; a path
 * absent there is no error. Returned paths are relative to the prefix. */
int git_ls_tree(const struct git_repo *g, const char *rev, const char *const *paths,
                struct git_entry **e, size_t *n, struct buf *err);
void git_entries_free(struct git_entry *e, size_t n);
/* The content of a blob (by id), NUL-terminated: the caller's, freed with
 * mem_free. */
int git_blob(const struct git_repo *g, const char *oid, char **text, size_t *len, struct buf *err);
/* How many files under path (relative to the prefix) the index tracks. */
int git_tracked(const struct git_repo *g, const char *path, size_t *count, struct buf *err);
/* The blob ids the working files at paths (relative to dir) would have. */
int git_hash_files(const struct git_repo *g, const char *const *paths, size_t n, char (*oids)[65],
                   struct buf *err);
#endif

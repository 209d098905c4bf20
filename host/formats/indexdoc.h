/* indexdoc.h: the migrations index, what a release ships as data a chart and
 * an orchestrator can read without the image: the image reference (by
 * digest for a release), the slugs of each tier in manifest order (for a
 * background slug also its timeout, on-error and requires) and the
 * revoked slugs. The chart includes it as a file (files/cozy-migrate-
 * index.json) and renders it into the ConfigMap INDEX_NAME next to the
 * ledger: its render gate reads the pre-apply and revoked slugs, `dispatch`
 * (dispatch.h) the background ones.
 *
 * Owns the index's format, both ways: made from a loaded tree (the runner's
 * loader, tree.h, so the index says what the runner would run), parsed from
 * a file or a ConfigMap (strictly: an unknown key, a bad slug, a slug given
 * twice is refused), and turned back into a tree the planner can walk. The
 * `index` command that writes and checks it is release/index.h's.
 *
 * Recipe: tree_load; index_from_tree; index_format (the file) or
 * index_configmap (the manifest). A reader: index_read_configmap (or
 * index_parse), then index_tree for plan_build. */
#ifndef COZY_INDEXDOC_H
#define COZY_INDEXDOC_H
#include <stddef.h>
#include <cjson/cJSON.h>

#include "formats/header.h"
#include "formats/tree.h"

/* The ConfigMap the chart renders next to the ledger, and its keys. */
#define INDEX_NAME "cozystack-migrations-index"
#define INDEX_KEY "index.json"          /* the index file, as generated */
#define INDEX_KEY_IMAGE "image"         /* the image the release runs (overrides the file's) */
#define INDEX_KEY_JOB "job.json"        /* dispatch: the background Jobs' template (dispatch.h) */
#define INDEX_KEY_ATTEMPTS "max-attempts"   /* dispatch: the retry bound */
#define INDEX_KEY_BACKOFF "retry-backoff"   /* dispatch: the first retry's wait, a duration */
#define INDEX_KEY_BACKOFF_MAX "retry-backoff-max" /* dispatch: the longest wait */
#define INDEX_VERSION 1

struct index_bg {
    char *slug;
    double timeout_s;           /* the header's timeout, else DEFAULT_TIMEOUT_S */
    enum on_error on_error;
    char **requires;
    size_t nrequires;
};

struct index {
    char *image;                /* NULL when none was given */
    char **pre;                 /* pre-apply slugs (legacy shell ones included) */
    size_t npre;
    struct index_bg *bg;        /* background, in manifest order */
    size_t nbg;
    char **revoked;
    size_t nrevoked;
};

void index_free(struct index *ix);

/* The index of a loaded tree: every shipped (not retired) slug in manifest
 * order, each in its tier; revoked slugs in the revoked list alone. image
 * may be NULL. 0, or -1 when out of memory. */
int index_from_tree(const struct tree *t, const char *image, struct index *ix);

/* The file's text: JSON, keys in a fixed order, one slug a line. NULL when
 * out of memory. */
char *index_format(const struct index *ix);

/* Parses an index file's text (name for messages). 0, or -1 with "NAME:
 * what is wrong" in err. */
int index_parse(const char *name, const char *text, size_t len, struct index *ix, char *err,
                size_t errlen);

/* Reads the index out of a ConfigMap object (key INDEX_KEY; INDEX_KEY_IMAGE,
 * when present, is the image). 0, or -1 with err. */
int index_from_configmap(const char *name, const cJSON *cm, struct index *ix, char *err,
                         size_t errlen);

/* The tree the index describes (its background and pre-apply slugs, the
 * headers dispatch needs, the revoked list), for plan_build. No scripts: a
 * plan of it runs nothing. 0, or -1 when out of memory. */
int index_tree(const struct index *ix, struct tree *t);

/* An image reference as a record names it: repo:tag, repo@sha256:<64 hex>
 * or both; never a bare name or the tag latest; with require_digest a
 * digest. 0, or -1 with why in err. */
int index_image_check(const char *ref, int require_digest, char *err, size_t errlen);

/* Reads FILE: the index file, or a ConfigMap holding it (JSON or YAML: the
 * chart's rendering, `kubectl get -o yaml` of the live one). 0, or -1 with
 * "FILE: what is wrong" in err. */
int index_load_file(const char *file, struct index *ix, char *err, size_t errlen);
#endif

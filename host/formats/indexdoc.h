/* indexdoc.h: the migrations index, what a release ships as data a chart and
 * an orchestrator can read without the image: the image reference (by
 * digest for a release), the slugs of each tier in manifest order, each
 * with its timeout, on-error and requires, and the revoked slugs. The
 * chart includes it as a file (files/cozy-migrate-index.json), sums its
 * pre-apply timeouts for the hook's deadline, gives it to the hook (env
 * INDEX_ENV) and renders it into the ConfigMap INDEX_NAME next to the
 * ledger with the background tier's retry policy: its render gate reads the
 * pre-apply and revoked slugs, `dispatch` (dispatch.h) the background ones.
 * It never says how a Job is built: the dispatcher builds its Jobs from its
 * own image and a template of the release (dispatch.h).
 *
 * Owns the index's format, both ways: made from a loaded tree (the runner's
 * loader, tree.h, so the index says what the runner would run), parsed from
 * a file or a ConfigMap strictly and whole (one document, one object: a
 * NUL byte, trailing bytes, a second object or YAML document is refused
 * naming its byte offset; an unknown key, a bad or repeated slug too),
 * compared whole with another (index_compare: every slug, field, the image
 * and the retry policy), and turned back into a tree the planner can walk.
 * The `index` command that writes and checks it is release/index.h's.
 *
 * Recipe: tree_load; index_from_tree; index_format (the file) or
 * index_configmap (the manifest). A reader: index_load_file, or
 * index_from_configmap (a ConfigMap from the API), or index_parse (env);
 * then index_compare with the image's own, and index_tree for plan_build. */
#ifndef COZY_INDEXDOC_H
#define COZY_INDEXDOC_H
#include <stddef.h>
#include <cjson/cJSON.h>

#include "base/buf.h"
#include "formats/header.h"
#include "formats/tree.h"

/* The ConfigMap the chart renders next to the ledger, and its keys (no
 * other key is taken). */
#define INDEX_NAME "cozystack-migrations-index"
#define INDEX_KEY "index.json"          /* the index file, as generated */
#define INDEX_KEY_IMAGE "image"         /* the image the release runs (the file's, or the values') */
#define INDEX_KEY_ATTEMPTS "max-attempts"   /* dispatch: the retry bound */
#define INDEX_KEY_BACKOFF "retry-backoff"   /* dispatch: the first retry's wait, a duration */
#define INDEX_KEY_BACKOFF_MAX "retry-backoff-max" /* dispatch: the longest wait */
/* The env var the chart gives the hook (and the --only Job) the index in,
 * its image set to the release's: what the render gate decided on. */
#define INDEX_ENV "MIGRATIONS_INDEX"
#define INDEX_VERSION 2

/* One shipped slug, either tier. */
struct index_slug {
    char *slug;
    double timeout_s;           /* the header's timeout, else DEFAULT_TIMEOUT_S */
    enum on_error on_error;
    char **requires;
    size_t nrequires;
    long legacy;                /* its legacy-map number, 0 for none: a chart sizes the
                                 * hook's deadline without the ones `version` seeds */
};

/* The background tier's retry policy, the ConfigMap's keys. */
struct index_policy {
    long max_attempts;
    double backoff, backoff_max;
};

struct index {
    char *image;                /* NULL when none was given */
    struct index_slug *pre;     /* pre-apply slugs (legacy shell ones included), in order */
    size_t npre;
    struct index_slug *bg;      /* background, in manifest order */
    size_t nbg;
    char **revoked;
    size_t nrevoked;
    int configmap;              /* read from (or made for) a ConfigMap: pol is its keys' */
    struct index_policy pol;    /* the defaults unless a ConfigMap's keys said otherwise */
};

void index_free(struct index *ix);
/* DEFAULT_MAX_ATTEMPTS, DEFAULT_RETRY_BACKOFF_S, DEFAULT_RETRY_BACKOFF_MAX_S. */
void index_policy_default(struct index_policy *p);

/* The index of a loaded tree: every shipped (not retired) slug in manifest
 * order, each in its tier; revoked slugs in the revoked list alone. image
 * may be NULL. 0, or -1 when out of memory. */
int index_from_tree(const struct tree *t, const char *image, struct index *ix);

/* The file's text: JSON, keys in a fixed order, one slug a line; the
 * caller's, freed with mem_free. NULL when out of memory. */
char *index_format(const struct index *ix);

/* Parses an index file's text text[0..len) (name for messages): one JSON
 * object and nothing but white space after it. 0, or -1 with "NAME: what
 * is wrong" in err (a byte offset where the text goes wrong). */
int index_parse(const char *name, const char *text, size_t len, struct index *ix, struct buf *err);

/* Reads the index out of a ConfigMap object: data keys INDEX_KEY (required)
 * and the optional INDEX_KEY_IMAGE and policy keys, nothing else (no
 * binaryData). raw[0..rawlen), when the object came as JSON text (the API,
 * a file), is that text, searched for what cJSON cannot show (a value
 * holding \u0000: "{...}\u0000{...}" would read as its first object);
 * NULL for YAML (yamldoc refuses a NUL). An image key and the file's image
 * must name one image. 0, or -1 with err. */
int index_from_configmap(const char *name, const cJSON *cm, const char *raw, size_t rawlen,
                         struct index *ix, struct buf *err);

/* Reads FILE: the index file (JSON), or a ConfigMap holding it (JSON or
 * YAML: the chart's rendering, `kubectl get -o yaml` of the live one); one
 * document, one object, no NUL byte. 0, or -1 with "FILE: what is wrong"
 * in err. */
int index_load_file(const char *file, struct index *ix, struct buf *err);


/* Compares got (an index read) with want (the tree's, as index_from_tree
 * makes it, with the image expected: NULL when there is none to compare
 * with, and then an image in got is a difference too). Each difference is
 * one line to say(ud, line), naming the slug: a slug missing, extra, out of
 * order, of another timeout, on-error or requires; another image; and when
 * both are ConfigMaps (got->configmap and want->configmap), each retry
 * key that differs. tree names want in the lines. Returns how many. */
size_t index_compare(const struct index *got, const struct index *want, const char *tree,
                     void (*say)(void *ud, const char *line), void *ud);

/* The tree the index describes (its background and pre-apply slugs, the
 * headers dispatch needs, the revoked list), for plan_build. No scripts: a
 * plan of it runs nothing. 0, or -1 when out of memory. */
int index_tree(const struct index *ix, struct tree *t);

/* An image reference as a record names it: repo:tag, repo@sha256:<64 hex>
 * or both; never a bare name or the tag latest; with require_digest a
 * digest. 0, or -1 with why in err. */
int index_image_check(const char *ref, int require_digest, struct buf *err);
#endif

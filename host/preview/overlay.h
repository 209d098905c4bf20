/* overlay.h: the copy-on-write view of the cluster an upgrade preview
 * runs against. Every dry-run write's answer from the apiserver is kept
 * here, keyed by object, so later reads of the same preview (in the same
 * migration or a later one) see the cluster as the pending chain would have
 * left it. Owns the store (a JSON file passed from one migration's child to
 * the next), merging it into list pages (label and field selectors
 * evaluated with the apiserver's semantics; one it cannot evaluate is an
 * error, never a silent mismatch), and applying merge and JSON patches to
 * an object it holds. Makes no request: lua/luakube_preview.c and
 * rules.c decide what to send.
 *
 * Recipe (lua/luakube_preview.c, preview mode): a read of an object asks overlay_get first;
 * a list page goes through overlay_merge_list; a write to an object the
 * overlay holds is sent as a dry run of the overlay's version
 * (overlay_apply_patch for a patch); every successful dry-run write's
 * answer goes in with overlay_put, a delete with overlay_delete. */
#ifndef COZY_OVERLAY_H
#define COZY_OVERLAY_H
#include <cjson/cJSON.h>
#include <stddef.h>

struct overlay;

enum overlay_state {
    OV_UNKNOWN = 0,         /* the overlay has nothing to say: ask the server */
    OV_PRESENT,             /* *obj is the object as the preview has it */
    OV_DELETED,             /* the preview deleted it */
};

/* A missing file is an empty overlay. NULL with err on a bad file. */
struct overlay *overlay_load(const char *path, char *err, size_t errlen);
/* An empty overlay kept in memory only (a shell's plain dry run, so its
 * kubectl sees its own dry-run deletes and writes). NULL on OOM. */
struct overlay *overlay_empty(void);
int overlay_save(const struct overlay *o, const char *path, char *err, size_t errlen);
void overlay_free(struct overlay *o);
int overlay_changed(const struct overlay *o);   /* written since loaded */

/* What the preview says of the object at path (a subresource path names
 * its object). */
enum overlay_state overlay_get(const struct overlay *o, const char *path, const cJSON **obj);
/* Keeps obj (copied) as the object at path; path may be the collection
 * (a create), the object's name and namespace then come from obj. */
int overlay_put(struct overlay *o, const char *path, const cJSON *obj);
int overlay_delete(struct overlay *o, const char *path);

/* page is the server's answer to a list of collection_path: drops the
 * items the overlay changed or deleted, and on the last page appends every
 * object the overlay holds in that collection that matches the selectors
 * (NULL: none). 0, or -1 with err when a selector cannot be evaluated. */
int overlay_merge_list(const struct overlay *o, const char *collection_path,
                       const char *label_selector, const char *field_selector, cJSON *page,
                       int last_page, char *err, size_t errlen);

/* *out = patch applied to obj: content_type application/merge-patch+json
 * (RFC 7386) or application/json-patch+json (RFC 6902). -1 with err for
 * any other type or a patch that does not apply (a failed test op). */
int overlay_apply_patch(const cJSON *obj, const char *content_type, const cJSON *patch,
                        cJSON **out, char *err, size_t errlen);

/* [{"path":..., "object":{...}} | {"path":..., "deleted":true}, ...], in
 * the order first written. */
cJSON *overlay_objects(const struct overlay *o);
#endif

/* stamp.c: the legacy stamp rule (see stamp.h).
 *
 * Owns what counts as a write of the ledger object itself, applying the
 * write to the ledger as it is (a replace, a merge or JSON patch, a
 * strategic merge patch without directives, which on a ConfigMap's string
 * maps means what a merge patch means, a server-side apply of the same
 * shape), and comparing the result with the ledger: only `data.version`
 * may differ, kubectl's last-applied annotation and the server's own
 * metadata aside. Must never absorb a write it cannot evaluate exactly:
 * anything else is refused, for the guard to call LedgerProtected. */
#include "gateway/stamp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/defaults.h"
#include "base/util.h"
#include "formats/manifest.h"
#include "formats/yamldoc.h"
#include "preview/overlay.h"

#define LAST_APPLIED "kubectl.kubernetes.io/last-applied-configuration"

static cJSON *parse_body(const char *body, size_t len, const char *ctype)
{
    if (!body)
        return NULL;
    if (ctype && strstr(ctype, "yaml")) {
        struct yaml_doc doc;
        struct buf err = BUF_INIT; /* the reason is not read here: NULL says it */
        int rc = yaml_load("body", body, len, &doc, &err);
        buf_release(&err);
        if (rc != 0)
            return NULL;
        cJSON *o = doc.root;
        doc.root = NULL;
        yaml_doc_free(&doc);
        return o;
    }
    return cJSON_ParseWithLength(body, len);
}

static const char *meta_name(const cJSON *o)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(o, "metadata"), "name"));
}

int stamp_targets(const char *method, const char *path, const char *ns, const char *name,
                  const char *body, size_t len, const char *ctype)
{
    char want[600];
    if (strcmp(method, "PUT") == 0 || strcmp(method, "PATCH") == 0) {
        snprintf(want, sizeof want, "/api/v1/namespaces/%s/configmaps/%s", ns, name);
        return strcmp(path, want) == 0;
    }
    if (strcmp(method, "POST") != 0)
        return 0;
    snprintf(want, sizeof want, "/api/v1/namespaces/%s/configmaps", ns);
    if (strcmp(path, want) != 0)
        return 0;
    cJSON *o = parse_body(body, len, ctype);
    const char *n = meta_name(o);
    int is = n && strcmp(n, name) == 0;
    cJSON_Delete(o);
    return is;
}

/* Whether any key of v, at any depth, is a strategic merge directive. */
static int has_directive(const cJSON *v)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        if (it->string && it->string[0] == '$')
            return 1;
        if ((cJSON_IsObject(it) || cJSON_IsArray(it)) && has_directive(it))
            return 1;
    }
    return 0;
}

/* What the ledger is compared on: the object without what only the server
 * or kubectl's bookkeeping sets, and without data.version. */
static cJSON *comparable(const cJSON *o)
{
    cJSON *c = cJSON_Duplicate(o, 1);
    if (!c)
        return NULL;
    static const char *const server[] = {"resourceVersion", "managedFields", "creationTimestamp",
                                         "generation", "uid", "selfLink", NULL};
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(c, "metadata");
    for (const char *const *k = server; *k; k++)
        cJSON_DeleteItemFromObjectCaseSensitive(meta, *k);
    cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
    cJSON_DeleteItemFromObjectCaseSensitive(ann, LAST_APPLIED);
    if (ann && !ann->child)
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "annotations");
    cJSON *data = cJSON_GetObjectItemCaseSensitive(c, "data");
    cJSON_DeleteItemFromObjectCaseSensitive(data, "version");
    if (data && !data->child)
        cJSON_DeleteItemFromObjectCaseSensitive(c, "data");
    cJSON_DeleteItemFromObjectCaseSensitive(c, "kind");
    cJSON_DeleteItemFromObjectCaseSensitive(c, "apiVersion");
    return c;
}

/* The ledger after the write; NULL with why when it cannot be evaluated
 * exactly. */
static cJSON *apply_write(const cJSON *current, const char *method, const char *ctype,
                          const cJSON *w, char *why, size_t whylen)
{
    if (strcmp(method, "PUT") == 0)
        return cJSON_Duplicate(w, 1);
    const char *ct = ctype ? ctype : "";
    const char *as = NULL;
    if (strncmp(ct, "application/merge-patch+json", 28) == 0 ||
        strncmp(ct, "application/apply-patch+yaml", 28) == 0)
        as = "application/merge-patch+json";
    else if (strncmp(ct, "application/strategic-merge-patch+json", 38) == 0) {
        if (has_directive(w)) {
            snprintf(why, whylen, "a strategic merge patch with directives is no stamp");
            return NULL;
        }
        as = "application/merge-patch+json";
    } else if (strncmp(ct, "application/json-patch+json", 27) == 0)
        as = "application/json-patch+json";
    if (!as) {
        snprintf(why, whylen, "a write of content type %s is no stamp", *ct ? ct : "(none)");
        return NULL;
    }
    cJSON *out = NULL;
    char err[256];
    if (overlay_apply_patch(current, as, w, &out, err, sizeof err) != 0) {
        snprintf(why, whylen, "the patch does not apply to the ledger: %s", err);
        return NULL;
    }
    return out;
}

enum stamp_verdict stamp_judge(const cJSON *current, const char *method, const char *ctype,
                               const char *body, size_t len, long allowed, long *version,
                               cJSON **answer, char *why, size_t whylen)
{
    *answer = NULL;
    *version = -1;
    if (strcmp(method, "POST") == 0)
        return STAMP_EXISTS;
    if (allowed <= 0) {
        snprintf(why, whylen, "only a legacy migration may stamp version, and this is none");
        return STAMP_REFUSE;
    }
    cJSON *w = parse_body(body, len, ctype);
    if (!cJSON_IsObject(w) && !(cJSON_IsArray(w) && ctype && strstr(ctype, "json-patch"))) {
        cJSON_Delete(w);
        snprintf(why, whylen, "the body of a write to the ledger does not parse as one object");
        return STAMP_REFUSE;
    }
    cJSON *after = apply_write(current, method, ctype, w, why, whylen);
    cJSON_Delete(w);
    if (!after)
        return STAMP_REFUSE;
    cJSON *a = comparable(current), *b = comparable(after);
    int same = a && b && cJSON_Compare(a, b, 1);
    cJSON_Delete(a);
    cJSON_Delete(b);
    if (!same) {
        cJSON_Delete(after);
        snprintf(why, whylen, "it changes more of the ledger than data.version");
        return STAMP_REFUSE;
    }
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(after, "data"), "version"));
    long n;
    if (!v || parse_decimal(v, LEGACY_NUMBER_MAX + 1L, &n) != 0 || n != allowed) {
        char shown[48];
        snprintf(shown, sizeof shown, "%s", v ? v : "(none)");
        cJSON_Delete(after);
        snprintf(why, whylen, "this legacy script may stamp version %ld (its number in the "
                 "legacy map, plus one), not %s", allowed, shown);
        return STAMP_REFUSE;
    }
    /* kubectl's bookkeeping is not kept: the runner writes version alone. */
    cJSON_DeleteItemFromObjectCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(after, "metadata"),
                                         "annotations"), LAST_APPLIED);
    *version = n;
    *answer = after;
    return STAMP_ABSORB;
}

/* rules.c: the preview's rules in front of the door (see rules.h), for
 * the Lua module's preview and the gateway's. Owns the overlay's answer to a request that arrives as
 * HTTP, the rewrite of a write to an object the preview holds, keeping
 * answers and merging list pages, with the selectors read from the
 * request's own query. Must never guess: what it cannot evaluate makes the
 * migration's preview unpredictable. */
#include "preview/rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/apipath.h"

static void unsupported(struct preview_answer *a, const char *msg)
{
    a->status = 422;
    a->unpredictable = 1;
    snprintf(a->reason, sizeof a->reason, "PreviewUnsupported");
    snprintf(a->message, sizeof a->message, "%s", msg);
}

static int status(struct preview_answer *a, long code, const char *reason, const char *msg)
{
    a->status = code;
    snprintf(a->reason, sizeof a->reason, "%s", reason);
    snprintf(a->message, sizeof a->message, "%s", msg);
    return 1;
}

const cJSON *preview_held(const struct overlay *ov, const char *path)
{
    const cJSON *o = NULL;
    return overlay_get(ov, path, &o) == OV_PRESENT ? o : NULL;
}

/* The request sends obj (as JSON) with method to path (owned copies). */
static int resend(struct preview_answer *a, struct door_req *req, const char *method, const char *path,
                  cJSON *obj)
{
    free(a->own_path);
    cJSON_free(a->own_body);
    a->own_body = cJSON_PrintUnformatted(obj);
    a->own_path = strdup(path);
    cJSON_Delete(obj);
    if (!a->own_body || !a->own_path)
        return -1;
    req->method = method;
    req->path = a->own_path;
    req->body = a->own_body;
    req->body_len = strlen(a->own_body);
    req->ctype = "application/json";
    req->safe = strcmp(method, "POST") != 0;
    return 0;
}

static int verdict(struct preview_verdict *v, enum preview_kind kind, long status,
                   const char *reason, const char *message)
{
    v->kind = kind;
    v->status = status;
    snprintf(v->reason, sizeof v->reason, "%s", reason);
    snprintf(v->message, sizeof v->message, "%s", message);
    return 0;
}

int preview_decide(struct overlay *ov, const char *method, const char *path, const char *ctype,
                       const cJSON *jbody, struct preview_verdict *v)
{
    memset(v, 0, sizeof *v);
    struct apipath *ap = &v->ap;
    int item = apipath_parse(path, ap) == 0 && *ap->name;
    char objpath[2048], msg[700];
    snprintf(objpath, sizeof objpath, "%s", path);
    const char *name = NULL;
    if (strcmp(method, "POST") == 0) {
        if (!(name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                  cJSON_GetObjectItemCaseSensitive(jbody, "metadata"), "name"))))
            return 0;
        snprintf(objpath, sizeof objpath, "%s/%s", path, name);
        item = 1;
    }
    enum overlay_state st = item ? overlay_get(ov, objpath, &v->held) : OV_UNKNOWN;
    if (st == OV_UNKNOWN)
        return 0;
    if (st == OV_DELETED && !name) {
        snprintf(msg, sizeof msg, "%s \"%s\" not found (deleted earlier in this preview)",
                 ap->resource, ap->name);
        return verdict(v, PREVIEW_STATUS, 404, "NotFound", msg);
    }
    if (st == OV_DELETED)
        return verdict(v, PREVIEW_UNSUPPORTED, 422, "PreviewUnsupported", "the preview cannot "
                       "re-create an object an earlier write of this preview deleted");
    if (strcmp(method, "GET") == 0)
        return verdict(v, PREVIEW_HELD, 200, "", "");
    if (name) {
        snprintf(msg, sizeof msg, "%s \"%s\" already exists (created earlier in this preview)",
                 ap->resource, name);
        return verdict(v, PREVIEW_STATUS, 409, "AlreadyExists", msg);
    }
    const char *rv = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(v->held, "metadata"), "resourceVersion"));
    int created = !rv || !*rv; /* created by this preview: the server has none */
    if (strcmp(method, "DELETE") == 0) {
        if (!created)
            return 0;
        if (overlay_delete(ov, path) != 0)
            return -1;
        return verdict(v, PREVIEW_DELETED, 200, "", "");
    }
    if (strcmp(method, "PATCH") == 0) {
        char err[512];
        if (overlay_apply_patch(v->held, ctype, jbody, &v->next, err, sizeof err) != 0)
            return verdict(v, PREVIEW_UNSUPPORTED, 422, "PreviewUnsupported", err);
    } else {
        v->next = cJSON_Duplicate(jbody, 1);
    }
    if (!v->next)
        return -1;
    v->kind = PREVIEW_REWRITE;
    v->method = "PUT";
    if (created) {
        cJSON *meta = cJSON_GetObjectItemCaseSensitive(v->next, "metadata");
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion");
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "uid");
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "creationTimestamp");
        v->method = "POST";
        snprintf(v->path, sizeof v->path, "%s%s%s/%s", ap->prefix, *ap->ns ? "/namespaces/" : "",
                 ap->ns, ap->resource);
    }
    return 0;
}

int preview_before(struct overlay *ov, const struct door *d, struct door_req *req,
                       const char *path, const cJSON *jbody, struct preview_answer *a)
{
    memset(a, 0, sizeof *a);
    struct preview_verdict v;
    if (preview_decide(ov, req->method, path, req->ctype, jbody, &v) != 0)
        return status(a, 500, "InternalError", "out of memory");
    switch (v.kind) {
    case PREVIEW_SEND:
        return 0;
    case PREVIEW_STATUS:
        return status(a, v.status, v.reason, v.message);
    case PREVIEW_UNSUPPORTED:
        unsupported(a, v.message);
        return 1;
    case PREVIEW_HELD:
        a->status = 200;
        a->body = cJSON_Duplicate(v.held, 1);
        return a->body ? 1 : status(a, 500, "InternalError", "out of memory");
    case PREVIEW_DELETED: {
        char msg[600];
        if (d->journal)
            journal_add(d->journal, req->method, "delete", path, 200, NULL, NULL, 1, 1, "");
        if (d->say) {
            snprintf(msg, sizeof msg, "dry-run: would delete %s/%s (created earlier in this "
                     "preview)", v.ap.resource, v.ap.name);
            d->say(msg);
        }
        a->status = 200;
        a->body = cJSON_CreateObject();
        cJSON_AddStringToObject(a->body, "kind", "Status");
        cJSON_AddStringToObject(a->body, "status", "Success");
        return 1;
    }
    case PREVIEW_REWRITE:
        if (resend(a, req, v.method, *v.path ? v.path : req->path, v.next) != 0)
            return status(a, 500, "InternalError", "out of memory");
        return 0;
    }
    return 0;
}

void preview_answer_free(struct preview_answer *a)
{
    cJSON_Delete(a->body);
    free(a->own_path);
    cJSON_free(a->own_body);
    memset(a, 0, sizeof *a);
}

int preview_keep(struct overlay *ov, const char *method, const char *path, const char *ls,
                     const char *fs, const cJSON *before, cJSON *resp, char *err, size_t errlen)
{
    if (strcmp(method, "GET") == 0) {
        struct apipath ap;
        if (apipath_parse(path, &ap) != 0 || *ap.name ||
            !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(resp, "items")))
            return 0;
        const char *cont = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(resp, "metadata"), "continue"));
        return overlay_merge_list(ov, path, ls, fs, resp, !cont || !*cont, err, errlen);
    }
    /* A delete leaves the object terminating only while finalizers remain,
     * as the preview has the object (the server's copy may still hold
     * finalizers an earlier write of this preview removed). */
    const cJSON *fin = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(before ? before : resp, "metadata"), "finalizers");
    int rc;
    if (strcmp(method, "DELETE") == 0 && cJSON_GetArraySize(fin) == 0)
        rc = overlay_delete(ov, path);
    else
        rc = resp ? overlay_put(ov, path, resp) : 0;
    if (rc != 0)
        snprintf(err, errlen, "the preview could not keep this write's answer");
    return rc;
}

int preview_after(struct overlay *ov, const char *method, const char *path,
                      const char *full_path, const cJSON *before, struct rest_result *res,
                      char *err, size_t errlen)
{
    int list = strcmp(method, "GET") == 0;
    char *ls = list ? apipath_query_value(full_path, "labelSelector") : NULL;
    char *fs = list ? apipath_query_value(full_path, "fieldSelector") : NULL;
    int rc = preview_keep(ov, method, path, ls, fs, before, res->json, err, errlen);
    free(ls);
    free(fs);
    return rc;
}

/* gatepreview.c: a preview's overlay in front of the gateway's door (see
 * gatepreview.h). Owns the overlay's answer to a request that arrives as
 * HTTP, the rewrite of a write to an object the preview holds, keeping
 * answers and merging list pages, with the selectors read from the
 * request's own query. Must never guess: what it cannot evaluate makes the
 * migration's preview unpredictable. */
#include "kube/gatepreview.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/apipath.h"

static void unsupported(struct gate_answer *a, const char *msg)
{
    a->status = 422;
    a->unpredictable = 1;
    snprintf(a->reason, sizeof a->reason, "PreviewUnsupported");
    snprintf(a->message, sizeof a->message, "%s", msg);
}

static int status(struct gate_answer *a, long code, const char *reason, const char *msg)
{
    a->status = code;
    snprintf(a->reason, sizeof a->reason, "%s", reason);
    snprintf(a->message, sizeof a->message, "%s", msg);
    return 1;
}

const cJSON *gatepreview_held(const struct overlay *ov, const char *path)
{
    const cJSON *o = NULL;
    return overlay_get(ov, path, &o) == OV_PRESENT ? o : NULL;
}

/* The request sends obj (as JSON) with method to path (owned copies). */
static int resend(struct gate_answer *a, struct door_req *req, const char *method, const char *path,
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

int gatepreview_before(struct overlay *ov, const struct door *d, struct door_req *req,
                       const char *path, const cJSON *jbody, struct gate_answer *a)
{
    memset(a, 0, sizeof *a);
    const char *method = req->method;
    struct apipath ap;
    int item = apipath_parse(path, &ap) == 0 && *ap.name;
    char objpath[2048], msg[600];
    snprintf(objpath, sizeof objpath, "%s", path);
    if (strcmp(method, "POST") == 0) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(jbody, "metadata"), "name"));
        if (!name)
            return 0;
        snprintf(objpath, sizeof objpath, "%s/%s", path, name);
        item = 1;
    }
    const cJSON *held = NULL;
    enum overlay_state st = item ? overlay_get(ov, objpath, &held) : OV_UNKNOWN;
    if (st == OV_UNKNOWN)
        return 0;
    if (st == OV_DELETED && strcmp(method, "POST") != 0) {
        snprintf(msg, sizeof msg, "%s \"%s\" not found (deleted earlier in this preview)",
                 ap.resource, ap.name);
        return status(a, 404, "NotFound", msg);
    }
    if (st == OV_DELETED) {
        unsupported(a, "the preview cannot re-create an object an earlier write of this preview "
                    "deleted");
        return 1;
    }
    if (strcmp(method, "GET") == 0) {
        a->status = 200;
        a->body = cJSON_Duplicate(held, 1);
        return a->body ? 1 : status(a, 500, "InternalError", "out of memory");
    }
    if (strcmp(method, "POST") == 0) {
        snprintf(msg, sizeof msg, "%s \"%s\" already exists (created earlier in this preview)",
                 ap.resource, objpath + strlen(path) + 1);
        return status(a, 409, "AlreadyExists", msg);
    }
    const char *rv = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(held, "metadata"), "resourceVersion"));
    int created = !rv || !*rv; /* created by this preview: the server has none */
    if (strcmp(method, "DELETE") == 0) {
        if (!created)
            return 0;
        if (overlay_delete(ov, path) != 0)
            return status(a, 500, "InternalError", "out of memory");
        if (d->journal)
            journal_add(d->journal, method, "delete", path, 200, NULL, NULL, 1, 1, "");
        if (d->say) {
            snprintf(msg, sizeof msg, "dry-run: would delete %s/%s (created earlier in this "
                     "preview)", ap.resource, ap.name);
            d->say(msg);
        }
        a->status = 200;
        a->body = cJSON_CreateObject();
        cJSON_AddStringToObject(a->body, "kind", "Status");
        cJSON_AddStringToObject(a->body, "status", "Success");
        return 1;
    }
    cJSON *next = NULL;
    if (strcmp(method, "PATCH") == 0) {
        char err[512];
        if (overlay_apply_patch(held, req->ctype, jbody, &next, err, sizeof err) != 0) {
            unsupported(a, err);
            return 1;
        }
    } else {
        next = cJSON_Duplicate(jbody, 1);
    }
    if (!next)
        return status(a, 500, "InternalError", "out of memory");
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(next, "metadata");
    if (created) {
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion");
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "uid");
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "creationTimestamp");
        char coll[1400];
        snprintf(coll, sizeof coll, "%s%s%s/%s", ap.prefix, *ap.ns ? "/namespaces/" : "", ap.ns,
                 ap.resource);
        if (resend(a, req, "POST", coll, next) != 0)
            return status(a, 500, "InternalError", "out of memory");
    } else if (resend(a, req, "PUT", req->path, next) != 0) {
        return status(a, 500, "InternalError", "out of memory");
    }
    return 0;
}

void gatepreview_answer_free(struct gate_answer *a)
{
    cJSON_Delete(a->body);
    free(a->own_path);
    cJSON_free(a->own_body);
    memset(a, 0, sizeof *a);
}

/* The value of key in a raw query string, unescaped (malloc'd), or NULL. */
static char *query_value(const char *full_path, const char *key)
{
    const char *q = strchr(full_path, '?');
    size_t kl = strlen(key);
    for (const char *p = q ? q + 1 : NULL; p && *p;) {
        size_t n = strcspn(p, "&");
        if (n > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
            int outlen = 0;
            char *v = curl_easy_unescape(NULL, p + kl + 1, (int)(n - kl - 1), &outlen);
            char *own = v ? strndup(v, (size_t)outlen) : NULL;
            curl_free(v);
            for (char *c = own; c && *c; c++)
                if (*c == '+')
                    *c = ' ';
            return own;
        }
        p += n + (p[n] == '&');
    }
    return NULL;
}

int gatepreview_after(struct overlay *ov, const char *method, const char *path,
                      const char *full_path, const cJSON *before, struct rest_result *res,
                      char *err, size_t errlen)
{
    const cJSON *resp = res->json;
    if (strcmp(method, "GET") == 0) {
        struct apipath ap;
        if (apipath_parse(path, &ap) != 0 || *ap.name ||
            !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(resp, "items")))
            return 0;
        char *ls = query_value(full_path, "labelSelector");
        char *fs = query_value(full_path, "fieldSelector");
        const char *cont = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(resp, "metadata"), "continue"));
        int rc = overlay_merge_list(ov, path, ls, fs, res->json, !cont || !*cont, err, errlen);
        free(ls);
        free(fs);
        return rc;
    }
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

/* luakube_preview.c: the upgrade preview under the kube verbs (overlay.h).
 *
 * Owns what the copy-on-write overlay answers before a request goes out (an
 * object the preview changed, created or deleted), how a write to such an
 * object is rewritten as a dry run of the overlay's version, keeping each
 * dry-run answer in the overlay, merging it into list pages, and calling a
 * request it cannot predict PreviewUnsupported (the migration's preview is
 * then unpredictable, never a failure of the run). Sends nothing itself:
 * luakube_request.c does, through its one door. */
#include "lua/luakube_int.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "kube/apipath.h"
#include "lua/luajson.h"

/* Pushes a PreviewUnsupported error: the preview cannot predict this
 * request, which makes the migration's preview unpredictable (the client
 * remembers it, luakube_unpredictable tells) rather than a failure of the run. May raise
 * (memory). */
static void push_unsupported(lua_State *L, struct kube_client *c, const char *msg, const char *verb,
                             const char *method, const char *path)
{
    char why[600];
    snprintf(why, sizeof why, "%s %s: %s", method, path, msg);
    luakube_note_unpredictable(c, why);
    luakube_push_error(L, 0, "PreviewUnsupported", msg, NULL, verb, method, path);
}

struct status_answer {
    long status;
    const cJSON *body;
};

static int push_status_call(lua_State *L)
{
    const struct status_answer *a = lua_touserdata(L, 1);
    lua_createtable(L, 0, 2);
    lua_pushinteger(L, a->status);
    lua_setfield(L, -2, "status");
    if (a->body) {
        ljson_push(L, a->body);
        lua_setfield(L, -2, "body");
    }
    return 1;
}

/* {status=, body=} where body may be the overlay's own object: built whole
 * with finalizers held off, since any allocation could run a __gc whose
 * write replaces (frees) that object. May raise (memory). */
static void push_status(lua_State *L, long status, const cJSON *body)
{
    struct status_answer a = {status, body};
    host_ctx_call_pinned(L, push_status_call, &a, 1);
}

/* The collection a path's object lives in, with dryRun=All. */
static int collection_of(const char *path, struct sbuf *out)
{
    struct apipath p;
    if (apipath_parse(path, &p) != 0)
        return -1;
    free(out->p);
    memset(out, 0, sizeof *out);
    luakube_sb_add(out, p.prefix);
    if (*p.ns) {
        luakube_sb_add(out, "/namespaces/");
        luakube_sb_add(out, p.ns);
    }
    luakube_sb_add(out, "/");
    luakube_sb_add(out, p.resource);
    luakube_sb_add(out, "?dryRun=All");
    return out->oom ? -1 : 0;
}

/* The body q sends becomes obj (a patch applied by the preview), as JSON. */
static int resend_as(struct req *q, struct send *snd, const char *method, cJSON *obj)
{
    cJSON_free(q->body);
    cJSON_Delete(q->jbody);
    q->jbody = obj;
    if (!(q->body = cJSON_PrintUnformatted(obj)))
        return -1;
    snd->method = method;
    snd->ctype = "application/json";
    snd->body_len = strlen(q->body);
    snd->safe = strcmp(method, "POST") != 0;
    return 0;
}

/* What the overlay answers before anything is sent. Returns the number of
 * Lua results it pushed, or -1 to send (q and snd possibly rewritten so a
 * write to an object the overlay holds goes out as a dry run of the
 * overlay's version). *held is the overlay's object when it has one. May
 * raise. */
int luakube_preview_before(lua_State *L, struct kube_client *c, struct req *q, struct send *snd,
                          const char *path0, const char *verb, const cJSON **held,
                          enum overlay_state *st)
{
    struct overlay *ov = c->overlay;
    const char *method = snd->method;
    struct apipath ap;
    int item = apipath_parse(path0, &ap) == 0 && *ap.name;
    char objpath[2048];
    snprintf(objpath, sizeof objpath, "%s", path0);
    if (strcmp(method, "POST") == 0) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(q->jbody, "metadata"), "name");
        if (!cJSON_IsString(name))
            return -1;
        snprintf(objpath, sizeof objpath, "%s/%s", path0, name->valuestring);
        item = 1;
    }
    *st = item ? overlay_get(ov, objpath, held) : OV_UNKNOWN;
    if (*st == OV_UNKNOWN)
        return -1;
    if (*st == OV_DELETED && strcmp(method, "POST") != 0) {
        lua_pushnil(L);
        luakube_push_error(L, 404, "NotFound", lua_pushfstring(L, "%s \"%s\" not found (deleted earlier in "
                   "this preview)", ap.resource, ap.name), NULL, verb, method, path0);
        lua_remove(L, -2);
        return 2;
    }
    if (*st == OV_DELETED) {
        lua_pushnil(L);
        push_unsupported(L, c, "the preview cannot re-create an object an earlier write of this "
                         "preview deleted", verb, method, path0);
        return 2;
    }
    if (strcmp(method, "GET") == 0) {
        push_status(L, 200, *held);
        return 1;
    }
    if (strcmp(method, "POST") == 0) {
        lua_pushnil(L);
        luakube_push_error(L, 409, "AlreadyExists", lua_pushfstring(L, "%s \"%s\" already exists (created "
                   "earlier in this preview)", ap.resource, cJSON_GetStringValue(
                   cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(q->jbody,
                   "metadata"), "name"))), NULL, verb, method, path0);
        lua_remove(L, -2);
        return 2;
    }
    const char *rv = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(*held, "metadata"), "resourceVersion"));
    int created = !rv || !*rv; /* created by this preview: the server has none */
    if (strcmp(method, "DELETE") == 0) {
        if (!created)
            return -1;
        if (overlay_delete(ov, path0) != 0)
            return luaL_error(L, "kube: preview: out of memory");
        journal_add(&c->journal, method, verb, path0, 200, NULL, NULL, 1, 1, "");
        out_line("dry-run: would delete %s/%s (created earlier in this preview)", ap.resource,
                 ap.name);
        push_status(L, 200, NULL);
        return 1;
    }
    cJSON *next = NULL;
    if (strcmp(method, "PATCH") == 0) {
        char err[512];
        if (overlay_apply_patch(*held, snd->ctype, q->jbody, &next, err, sizeof err) != 0) {
            lua_pushnil(L);
            push_unsupported(L, c, err, verb, method, path0);
            return 2;
        }
    } else {
        next = cJSON_Duplicate(q->jbody, 1);
    }
    if (!next)
        return luaL_error(L, "kube: preview: out of memory");
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(next, "metadata");
    if (created) {
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion");
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "uid");
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "creationTimestamp");
        if (resend_as(q, snd, "POST", next) != 0 || collection_of(path0, &q->path) != 0)
            return luaL_error(L, "kube: preview: out of memory");
    } else if (resend_as(q, snd, "PUT", next) != 0) {
        return luaL_error(L, "kube: preview: out of memory");
    }
    return -1;
}

/* After a successful request in a preview: a write's answer goes in the
 * overlay; a list page is merged with it. 0, or -1 with an error pushed
 * (a selector the preview cannot evaluate). May raise. */
int luakube_preview_after(lua_State *L, struct kube_client *c, struct overlay *ov, struct req *q,
                         const char *method, const char *path0, int qidx)
{
    const cJSON *resp = q->res.json;
    if (strcmp(method, "GET") == 0) {
        struct apipath ap;
        if (apipath_parse(path0, &ap) != 0 || *ap.name || !cJSON_IsArray(
                cJSON_GetObjectItemCaseSensitive(resp, "items")))
            return 0;
        lua_getfield(L, qidx, "labelSelector");
        lua_getfield(L, qidx, "fieldSelector");
        const char *ls = lua_tostring(L, -2), *fs = lua_tostring(L, -1);
        const char *cont = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(resp, "metadata"), "continue"));
        char err[512];
        int rc = overlay_merge_list(ov, path0, ls, fs, q->res.json, !cont || !*cont, err, sizeof err);
        lua_pop(L, 2);
        if (rc != 0) {
            push_unsupported(L, c, err, "list", "GET", path0);
            return -1;
        }
        return 0;
    }
    int rc;
    /* A delete leaves the object terminating only while finalizers remain,
     * as the preview has the object (the server's copy may still hold
     * finalizers an earlier write of this preview removed). */
    const cJSON *fin = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(q->before ? q->before : resp, "metadata"), "finalizers");
    if (strcmp(method, "DELETE") == 0 && cJSON_GetArraySize(fin) == 0)
        rc = overlay_delete(ov, path0);
    else
        rc = resp ? overlay_put(ov, path0, resp) : 0;
    if (rc != 0) {
        push_unsupported(L, c, "the preview could not keep this write's answer", method, method,
                         path0);
        return -1;
    }
    return 0;
}


/* luakube_preview.c: the upgrade preview under the kube verbs (overlay.h).
 *
 * Owns turning the overlay's rules (preview/rules.h: what it answers
 * before a request goes out, how a write to an object it holds is rewritten
 * as a dry run of its version, keeping each dry-run answer and merging list
 * pages; the gateway follows the same) into Lua results: an answer, a
 * rewritten request, or PreviewUnsupported for what it cannot predict (the
 * migration's preview is then unpredictable, never a failure of the run).
 * Sends nothing itself: luakube_request.c does, through its one door. */
#include "lua/luakube_int.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "client/apipath.h"
#include "preview/rules.h"
#include "lua/luajson.h"

/* Pushes a PreviewUnsupported error: the preview cannot predict this
 * request, which makes the migration's preview unpredictable (the client
 * remembers it, luakube_unpredictable tells) rather than a failure of the run. May raise
 * (memory). */
static void push_unsupported(lua_State *L, struct kube_client *c, const char *msg, const char *verb,
                             const char *method, const char *path)
{
    char why[600];
    snprintf(why, sizeof why, "%s %s: %.500s", method, path, msg);
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

/* What the overlay answers before anything is sent (preview_decide,
 * the gateway's rules too). Returns the number of Lua results it pushed,
 * or -1 to send (q and snd possibly rewritten so a write to an object the
 * overlay holds goes out as a dry run of the overlay's version). *held is
 * the overlay's object when it has one. May raise. */
int luakube_preview_before(lua_State *L, struct kube_client *c, struct req *q, struct send *snd,
                        const char *path0, const char *verb, const cJSON **held)
{
    const char *method = snd->method;
    struct preview_verdict v;
    if (preview_decide(c->overlay, method, path0, snd->ctype, q->jbody, &v) != 0)
        return luaL_error(L, "kube: preview: out of memory");
    *held = v.held;
    switch (v.kind) {
    case PREVIEW_SEND:
        return -1;
    case PREVIEW_HELD:
        push_status(L, 200, v.held);
        return 1;
    case PREVIEW_STATUS:
        lua_pushnil(L);
        luakube_push_error(L, v.status, v.reason, v.message, NULL, verb, method, path0);
        return 2;
    case PREVIEW_UNSUPPORTED:
        lua_pushnil(L);
        push_unsupported(L, c, v.message, verb, method, path0);
        return 2;
    case PREVIEW_DELETED:
        journal_add(&c->journal, method, verb, path0, 200, NULL, NULL, 1, 1, "");
        out_line("dry-run: would delete %s/%s (created earlier in this preview)", v.ap.resource,
                 v.ap.name);
        push_status(L, 200, NULL);
        return 1;
    case PREVIEW_REWRITE:
        if (resend_as(q, snd, v.method, v.next) != 0)
            return luaL_error(L, "kube: preview: out of memory");
        if (*v.path) {
            /* to the collection, still a dry run */
            buf_reset(&q->path);
            buf_adds(&q->path, v.path);
            if (apipath_add_query(&q->path, "dryRun", "All") != 0)
                return luaL_error(L, "kube: preview: out of memory");
        }
        return -1;
    }
    return -1;
}

/* After a successful request in a preview: a write's answer goes in the
 * overlay; a list page is merged with it, by the selectors the script's
 * query table holds (preview_keep). 0, or -1 with an error pushed.
 * May raise. */
int luakube_preview_after(lua_State *L, struct kube_client *c, struct overlay *ov, struct req *q,
                       const char *method, const char *path0, int qidx)
{
    int list = strcmp(method, "GET") == 0;
    /* a GET's query table, when it has one (a get of one object may not) */
    int sel = list && lua_istable(L, qidx);
    if (sel) {
        lua_getfield(L, qidx, "labelSelector");
        lua_getfield(L, qidx, "fieldSelector");
    }
    char err[512];
    int rc = preview_keep(ov, method, path0, sel ? lua_tostring(L, -2) : NULL,
                              sel ? lua_tostring(L, -1) : NULL, q->before, q->res.json, err,
                              sizeof err);
    if (sel)
        lua_pop(L, 2);
    if (rc != 0) {
        push_unsupported(L, c, err, list ? "list" : method, method, path0);
        return -1;
    }
    return 0;
}

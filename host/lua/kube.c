/* kube.c: `kube.core`, the request policy under every kube verb.
 *
 * Owns, for each request a script makes and each one the host makes for it:
 * the one door to the wire (wire()), where the guard judges the method, path
 * and body as sent (a path it cannot judge is refused), dryRun=All goes in
 * the query of every mutating request in dry-run mode and in a DELETE's
 * options body, and nothing leaves once the migration's deadline has
 * passed; which requests count as idempotent when handing them to rest.c
 * (which owns retries, bounded here by the migration's deadline); apiserver
 * errors turned into Lua values (code, reason, message, details, verb, path,
 * and the fresh continue token of a 410); the preview's overlay (answers
 * from it, writes rewritten against it, PreviewUnsupported noted on the host
 * context); turning host data into Lua values with finalizers held off; the
 * discovery cache, refetched once on a miss; and counters of connections and
 * requests sent. Must never mark a request idempotent whose repetition is
 * unsafe, send a request that did not pass wire(), nor let a script reach
 * the ledger. */
#include "lua/kube.h"

#include <curl/curl.h>
#include <errno.h>
#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "base/defaults.h"
#include "kube/discovery.h"
#include "kube/dryrun.h"
#include "kube/apipath.h"
#include "kube/guard.h"
#include "kube/journal.h"
#include "kube/rest.h"
#include "base/log.h"
#include "lua/luajson.h"
#include "base/mem.h"
#include "kube/overlay.h"
#include "base/util.h"

#define CLIENT_MT "cozy.kube.client"
#define ERROR_MT "cozy.kube.error"

static const char CLIENT_KEY = 'k';

/* One per Lua state, in its host context; the connection is opened on first
 * use, so a script that never talks to the cluster runs without one. */
struct kube_client {
    struct rest_client *rest;
    struct discovery disc;
    int disc_loaded;
    char init_err[512];
    int init_failed;
    struct journal journal;     /* hc->journal points here */
    struct overlay *overlay;    /* preview: loaded on first use, saved by the child */
};

static int client_gc(lua_State *L)
{
    struct kube_client *c = luaL_checkudata(L, 1, CLIENT_MT);
    rest_free(c->rest);
    c->rest = NULL;
    discovery_clear(&c->disc);
    journal_free(&c->journal);
    overlay_free(c->overlay);
    c->overlay = NULL;
    struct host_ctx *hc = host_ctx(L);
    if (hc)
        hc->overlay = NULL;
    return 0;
}

/* The context's client, connected. NULL when the cluster config cannot be
 * resolved (the reason stays in c->init_err for every later call). */
static struct kube_client *client_connect(struct host_ctx *hc)
{
    struct kube_client *c = hc->client;
    if (hc->ended) {
        snprintf(c->init_err, sizeof c->init_err,
                 "the migration has ended: a finalizer may not talk to the cluster");
        return NULL;
    }
    if (c->rest)
        return c;
    if (c->init_failed)
        return NULL;
    const struct kube_options *o = &hc->kube;
    struct rest_policy p = {o->request_timeout, o->max_attempts, o->retry_budget};
    if (!(c->rest = rest_new(&o->cfg, &p, c->init_err, sizeof c->init_err))) {
        c->init_failed = 1;
        return NULL;
    }
    return c;
}

/* ---- error values ---------------------------------------------------- */

static int error_tostring(lua_State *L)
{
    lua_getfield(L, 1, "code");
    lua_Integer code = lua_tointeger(L, -1);
    lua_getfield(L, 1, "reason");
    lua_getfield(L, 1, "message");
    const char *reason = lua_tostring(L, -2), *msg = lua_tostring(L, -1);
    if (code > 0)
        lua_pushfstring(L, "Error from server (%s): %s", reason ? reason : "Unknown",
                        msg ? msg : "");
    else if (reason && strcmp(reason, "ConnectionError") == 0)
        lua_pushfstring(L, "Unable to connect to the server: %s", msg ? msg : "");
    else
        lua_pushfstring(L, "%s: %s", reason ? reason : "error", msg ? msg : "");
    return 1;
}

static void push_error_mt(lua_State *L)
{
    if (luaL_newmetatable(L, ERROR_MT)) {
        lua_pushcfunction(L, error_tostring);
        lua_setfield(L, -2, "__tostring");
        lua_pushliteral(L, "kube.error");
        lua_setfield(L, -2, "__name");
        /* getmetatable(err) gives this name: no script can change how the
         * stdlib's errors read */
        lua_pushliteral(L, "kube.error");
        lua_setfield(L, -2, "__metatable");
    }
}

static int push_json_call(lua_State *L)
{
    ljson_push(L, lua_touserdata(L, 1));
    return 1;
}

/* ljson_push with finalizers held off (host_call_pinned): what is being
 * converted may belong to the host (the overlay, a response), and a __gc
 * calling kube meanwhile could free or replace it. May raise (memory). */
static void push_json(lua_State *L, const cJSON *v)
{
    host_call_pinned(L, push_json_call, (void *)v, 1);
}

static void push_error(lua_State *L, long code, const char *reason, const char *message,
                       const cJSON *details, const char *verb, const char *method,
                       const char *path)
{
    lua_createtable(L, 0, 8);
    lua_pushinteger(L, code);
    lua_setfield(L, -2, "code");
    lua_pushstring(L, reason);
    lua_setfield(L, -2, "reason");
    lua_pushstring(L, message);
    lua_setfield(L, -2, "message");
    if (details) {
        push_json(L, details);
        lua_setfield(L, -2, "details");
    }
    lua_pushstring(L, verb ? verb : method);
    lua_setfield(L, -2, "verb");
    lua_pushstring(L, method);
    lua_setfield(L, -2, "method");
    lua_pushstring(L, path);
    lua_setfield(L, -2, "path");
    push_error_mt(L);
    lua_setmetatable(L, -2);
}

static void push_rest_error(lua_State *L, const struct rest_error *e, const char *verb,
                            const char *method, const char *path)
{
    push_error(L, e->code, e->reason, e->message, e->details, verb, method, path);
    if (e->after_retry) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "after_retry");
    }
    if (e->continue_token) {
        lua_pushstring(L, e->continue_token);
        lua_setfield(L, -2, "continue");
    }
}

/* ---- requests ---------------------------------------------------------- */

struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
};

static void sb_add(struct sbuf *b, const char *s)
{
    size_t l = strlen(s);
    if (b->oom)
        return;
    if (b->n + l + 1 > b->cap) {
        size_t nc = (b->n + l + 1) * 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, l + 1);
    b->n += l;
}

/* A query key as the apiserver names its parameters (labelSelector,
 * fieldManager, ...): letters and digits. dryRun is the host's alone. */
static int query_key_ok(const char *k)
{
    if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z')) || strcasecmp(k, "dryRun") == 0)
        return 0;
    for (; *k; k++)
        if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') || (*k >= '0' && *k <= '9')))
            return 0;
    return 1;
}

/* Appends the spec's query table, URL-escaped. Returns -1 on a bad key or
 * value. May raise (memory). */
static int append_query(struct sbuf *b, lua_State *L, int qidx, int *first)
{
    if (lua_isnil(L, qidx))
        return 0;
    if (!lua_istable(L, qidx))
        return -1;
    lua_pushnil(L);
    while (lua_next(L, qidx) != 0) {
        if (lua_type(L, -2) != LUA_TSTRING || !query_key_ok(lua_tostring(L, -2))) {
            lua_pop(L, 2);
            return -1;
        }
        const char *v = lua_type(L, -1) == LUA_TBOOLEAN ? (lua_toboolean(L, -1) ? "true" : "false")
                        : lua_type(L, -1) == LUA_TNUMBER || lua_type(L, -1) == LUA_TSTRING
                            ? lua_tostring(L, -1)
                            : NULL;
        if (!v) {
            lua_pop(L, 2);
            return -1;
        }
        char *ek = curl_easy_escape(NULL, lua_tostring(L, -2), 0);
        char *ev = curl_easy_escape(NULL, v, 0);
        if (!ek || !ev)
            b->oom = 1;
        else {
            sb_add(b, *first ? "?" : "&");
            sb_add(b, ek);
            sb_add(b, "=");
            sb_add(b, ev);
            *first = 0;
        }
        curl_free(ek);
        curl_free(ev);
        lua_pop(L, 1);
    }
    return 0;
}

static const char *opt_field(lua_State *L, int t, const char *k)
{
    lua_getfield(L, t, k);
    const char *s = lua_tostring(L, -1);
    lua_pop(L, 1); /* the string stays alive: it is owned by the spec table */
    return s;
}

/* Header values a script may ask for: fixed lists, so no text of its own
 * reaches a header line. */
static const char *const CONTENT_TYPES[] = {
    "application/json", "application/merge-patch+json", "application/json-patch+json",
    "application/strategic-merge-patch+json", "application/apply-patch+yaml", NULL};
static const char *const ACCEPTS[] = {"application/json", NULL};

static int allowed(const char *const *list, const char *v)
{
    if (!v)
        return 1;
    for (; *list; list++)
        if (strcmp(*list, v) == 0)
            return 1;
    return 0;
}

/* The C memory one request holds while it calls into Lua (which may raise:
 * the memory cap, a bad query value), boxed in a userdata as lauxlib boxes
 * its buffers: a raise leaves it to __gc, the normal path frees it at once
 * through req_release. */
#define REQ_MT "cozy.kube.req"
struct req {
    char *body;
    cJSON *jbody;
    cJSON *before;
    struct sbuf path;           /* grows while the query is appended */
    struct rest_result res;
    int have_res;
};

static void req_release(struct req *q)
{
    cJSON_free(q->body);
    cJSON_Delete(q->jbody);
    cJSON_Delete(q->before);
    free(q->path.p);
    if (q->have_res)
        rest_result_free(&q->res);
    memset(q, 0, sizeof *q);
}

static int req_gc(lua_State *L)
{
    req_release(luaL_checkudata(L, 1, REQ_MT));
    return 0;
}

/* Pushes a new, empty box. May raise (memory). */
static struct req *req_box(lua_State *L)
{
    struct req *q = lua_newuserdatauv(L, sizeof *q, 0);
    memset(q, 0, sizeof *q);
    ljson_box_metatable(L, REQ_MT, req_gc);
    return q;
}

/* ---- the wire ---------------------------------------------------------- */

/* The guard's view of this state's run: the protected names, the runner's
 * component, and whether requests go out as dry runs. */
static struct guard_target guard_for(const struct host_ctx *hc)
{
    const struct kube_options *ko = &hc->kube;
    struct guard_target gt = {ko->ledger_namespace, ko->ledger_name, ko->lease_name,
                              EVENT_COMPONENT, ko->dry_run};
    return gt;
}

/* One request as it will be sent: path with its query. */
struct wire_req {
    const char *method, *path, *accept, *ctype;
    const char *body;
    size_t body_len;
    int safe;
};

enum wire_rc {
    WIRE_OK = 0,        /* sent, a 2xx came back */
    WIRE_FAILED,        /* sent (or tried): out->err says how it failed */
    WIRE_REFUSED,       /* not sent: the guard refused it (*gv, why) */
    WIRE_LATE,          /* not sent: the migration's deadline has passed */
    WIRE_NOMEM,         /* not sent: no memory to mark it a dry run */
};

/* Whether a query string carries dryRun=All. */
static int has_dry_run(const char *query)
{
    for (const char *p = query; p && *p;) {
        size_t n = strcspn(p, "&");
        if (n == strlen("dryRun=All") && strncmp(p, "dryRun=All", n) == 0)
            return 1;
        p += n + (p[n] == '&');
    }
    return 0;
}

/* A DeleteOptions body marked as a dry run: the apiserver reads a DELETE's
 * options from its body when it has one, and the query's dryRun is then
 * ignored. NULL when the body is not a JSON object (a dry run cannot vouch
 * for it) or memory ran out. */
static char *dry_run_body(const char *body, size_t len)
{
    cJSON *o = cJSON_ParseWithLength(body, len);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return NULL;
    }
    /* every spelling a loose decoder might read */
    for (cJSON *it = o->child, *next; it; it = next) {
        next = it->next;
        if (it->string && strcasecmp(it->string, "dryRun") == 0)
            cJSON_Delete(cJSON_DetachItemViaPointer(o, it));
    }
    const char *all[] = {"All"};
    cJSON *arr = cJSON_CreateStringArray(all, 1);
    if (!arr || !cJSON_AddItemToObject(o, "dryRun", arr)) {
        cJSON_Delete(arr);
        cJSON_Delete(o);
        return NULL;
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* The one door between kube.c and the apiserver: every request a script's
 * call sends, and every one the host builds for it (a read before a write,
 * discovery, the preview's rewrite of a write), goes out here, so the
 * promises hold on what is actually sent. In order: the guard judges the
 * method, path and body as sent; in a dry run the query carries dryRun=All
 * and a DELETE's body says dryRun too; once the migration's deadline has
 * passed nothing leaves (rest.c checks again before each attempt). Makes no
 * Lua call, so nothing here can raise. */
static enum wire_rc wire(struct host_ctx *hc, struct kube_client *c, const struct wire_req *w,
                         struct rest_result *out, enum guard_verdict *gv, char *why,
                         size_t whylen)
{
    memset(out, 0, sizeof *out);
    *gv = GUARD_ALLOW;
    const char *q = strchr(w->path, '?');
    size_t plen = q ? (size_t)(q - w->path) : strlen(w->path);
    char *path = malloc(plen + 1);
    if (!path)
        return WIRE_NOMEM;
    memcpy(path, w->path, plen);
    path[plen] = '\0';
    struct guard_target gt = guard_for(hc);
    *gv = guard_check(&gt, w->method, path, w->body, w->body_len,
                      w->body && !w->ctype ? "application/json" : w->ctype, why, whylen);
    free(path);
    if (*gv != GUARD_ALLOW)
        return WIRE_REFUSED;
    const char *send_path = w->path, *body = w->body;
    size_t body_len = w->body_len;
    char *own_path = NULL, *own_body = NULL;
    if (hc->kube.dry_run && strcmp(w->method, "GET") != 0) {
        if (!has_dry_run(q ? q + 1 : NULL)) {
            size_t n = strlen(w->path) + sizeof "&dryRun=All";
            if (!(own_path = malloc(n)))
                return WIRE_NOMEM;
            snprintf(own_path, n, "%s%s", w->path, q ? "&dryRun=All" : "?dryRun=All");
            send_path = own_path;
        }
        if (strcmp(w->method, "DELETE") == 0 && body) {
            if (!(own_body = dry_run_body(body, body_len))) {
                free(own_path);
                *gv = GUARD_DRY_RUN;
                snprintf(why, whylen, "a dry-run DELETE sends its options as a JSON object the "
                         "host marks dryRun; this body is not one");
                return WIRE_REFUSED;
            }
            body = own_body;
            body_len = strlen(own_body);
        }
    }
    enum wire_rc rc;
    double left = host_ctx_remaining(hc);
    if (hc->deadline && left <= 0) {
        snprintf(why, whylen, "the migration's deadline has passed: nothing more is sent");
        rc = WIRE_LATE;
    } else {
        rc = rest_do(c->rest, w->method, send_path, w->accept, w->ctype, body, body_len, w->safe,
                     left, out) == 0 ? WIRE_OK : WIRE_FAILED;
    }
    free(own_path);
    cJSON_free(own_body);
    return rc;
}

/* A GET the host makes for itself (discovery, a read before a write),
 * through the same door. NULL with err filled when it failed or was not
 * sent. */
static cJSON *wire_get_json(struct host_ctx *hc, struct kube_client *c, const char *path,
                            const char *accept, struct rest_error *err)
{
    struct wire_req w = {"GET", path, accept, NULL, NULL, 0, 1};
    struct rest_result r;
    enum guard_verdict gv;
    char why[512];
    memset(err, 0, sizeof *err);
    enum wire_rc rc = wire(hc, c, &w, &r, &gv, why, sizeof why);
    if (rc == WIRE_REFUSED || rc == WIRE_LATE || rc == WIRE_NOMEM) {
        rest_result_free(&r);
        snprintf(err->reason, sizeof err->reason, "%s",
                 rc == WIRE_LATE ? "Timeout" : rc == WIRE_NOMEM ? "MemoryLimit" : guard_verdict_name(gv));
        snprintf(err->message, sizeof err->message, "GET %s: %s", path,
                 rc == WIRE_NOMEM ? "out of memory" : why);
        return NULL;
    }
    if (rc != WIRE_OK) {
        *err = r.err;
        r.err.details = NULL;
        r.err.continue_token = NULL;
        rest_result_free(&r);
        return NULL;
    }
    cJSON *j = r.json;
    r.json = NULL;
    if (!j) {
        snprintf(err->reason, sizeof err->reason, "InvalidResponse");
        snprintf(err->message, sizeof err->message, "GET %s: the response is not JSON", path);
    }
    rest_result_free(&r);
    return j;
}

/* A request the wire refused, raised: a guard refusal as a kube error
 * value (LedgerProtected, DryRunRefused), the deadline as the sandbox's own
 * timeout. In a preview a dry run's refusal makes the migration
 * unpredictable, not failed. */
static int raise_refusal(lua_State *L, struct host_ctx *hc, enum wire_rc rc,
                         enum guard_verdict gv, const char *why, const char *verb,
                         const char *method, const char *path)
{
    if (rc == WIRE_LATE)
        return luaL_error(L, "timeout: the migration ran past its deadline");
    if (rc == WIRE_NOMEM)
        return luaL_error(L, "kube: out of memory");
    char msg[700];
    if (gv == GUARD_BAD_PATH)
        return luaL_error(L, "kube.%s: %s", verb ? verb : "request", why);
    if (gv == GUARD_DRY_RUN) {
        snprintf(msg, sizeof msg, "%s %s: %s", method, path, why);
        if (hc->overlay_path)
            host_ctx_unpredictable(hc, msg);
        push_error(L, 0, "DryRunRefused", msg, NULL, verb, method, path);
        return lua_error(L);
    }
    snprintf(msg, sizeof msg, "the ledger is written by the runner: scripts may not write it, "
             "its lock, its namespace or the runner's Events (%s)", why);
    push_error(L, 0, "LedgerProtected", msg, NULL, verb, method, path);
    return lua_error(L);
}

/* ---- the upgrade preview (overlay.h) ----------------------------------- */

/* Pushes a PreviewUnsupported error: the preview cannot predict this
 * request, which makes the migration's preview unpredictable (the host
 * context remembers it) rather than a failure of the run. May raise
 * (memory). */
static void push_unsupported(lua_State *L, struct host_ctx *hc, const char *msg, const char *verb,
                             const char *method, const char *path)
{
    char why[600];
    snprintf(why, sizeof why, "%s %s: %s", method, path, msg);
    host_ctx_unpredictable(hc, why);
    push_error(L, 0, "PreviewUnsupported", msg, NULL, verb, method, path);
}

/* How a request goes out; the preview may turn a write into another. */
struct send {
    const char *method;
    const char *ctype;
    size_t body_len;
    int safe;
};

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
    host_call_pinned(L, push_status_call, &a, 1);
}

/* The collection a path's object lives in, with dryRun=All. */
static int collection_of(const char *path, struct sbuf *out)
{
    struct apipath p;
    if (apipath_parse(path, &p) != 0)
        return -1;
    free(out->p);
    memset(out, 0, sizeof *out);
    sb_add(out, p.prefix);
    if (*p.ns) {
        sb_add(out, "/namespaces/");
        sb_add(out, p.ns);
    }
    sb_add(out, "/");
    sb_add(out, p.resource);
    sb_add(out, "?dryRun=All");
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
static int preview_before(lua_State *L, struct host_ctx *hc, struct req *q, struct send *snd,
                          const char *path0, const char *verb, const cJSON **held,
                          enum overlay_state *st)
{
    struct overlay *ov = hc->client->overlay;
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
        push_error(L, 404, "NotFound", lua_pushfstring(L, "%s \"%s\" not found (deleted earlier in "
                   "this preview)", ap.resource, ap.name), NULL, verb, method, path0);
        lua_remove(L, -2);
        return 2;
    }
    if (*st == OV_DELETED) {
        lua_pushnil(L);
        push_unsupported(L, hc, "the preview cannot re-create an object an earlier write of this "
                         "preview deleted", verb, method, path0);
        return 2;
    }
    if (strcmp(method, "GET") == 0) {
        push_status(L, 200, *held);
        return 1;
    }
    if (strcmp(method, "POST") == 0) {
        lua_pushnil(L);
        push_error(L, 409, "AlreadyExists", lua_pushfstring(L, "%s \"%s\" already exists (created "
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
        journal_add(hc->journal, method, verb, path0, 200, NULL, NULL, 1, 1, "");
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
            push_unsupported(L, hc, err, verb, method, path0);
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
static int preview_after(lua_State *L, struct host_ctx *hc, struct overlay *ov, struct req *q,
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
            push_unsupported(L, hc, err, "list", "GET", path0);
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
        push_unsupported(L, hc, "the preview could not keep this write's answer", method, method,
                         path0);
        return -1;
    }
    return 0;
}

/* request{method=, path=, query=, body=, content_type=, accept=, verb=,
 *         idempotent=} -> {status=, body=} | nil, err
 * Not a function of kube.core: only stdlib/kube.lua receives it (see
 * kube_push_private), so a migration reaches the API through the verbs alone.
 * May raise: for misuse, for a write to the ledger, and on memory. */
static int l_request(lua_State *L)
{
    struct host_ctx *hc = host_ctx(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    const char *method = opt_field(L, 1, "method");
    const char *path0 = opt_field(L, 1, "path");
    const char *verb = opt_field(L, 1, "verb");
    const char *ctype = opt_field(L, 1, "content_type");
    const char *accept = opt_field(L, 1, "accept");
    if (!method || !path0)
        return luaL_error(L, "kube.request: method and path are required");
    if (!allowed(CONTENT_TYPES, ctype))
        return luaL_error(L, "kube.%s: content type %s is not one of the API's (json, merge, "
                          "json patch, strategic merge, apply)", verb ? verb : "request", ctype);
    if (!allowed(ACCEPTS, accept))
        return luaL_error(L, "kube.%s: accept %s is not application/json", verb ? verb : "request",
                          accept);
    if (strcmp(method, "GET") != 0 && strcmp(method, "POST") != 0 &&
        strcmp(method, "PUT") != 0 && strcmp(method, "PATCH") != 0 &&
        strcmp(method, "DELETE") != 0)
        return luaL_error(L, "kube.request: method must be GET, POST, PUT, PATCH or DELETE, not %s",
                          method);
    lua_getfield(L, 1, "idempotent");
    int idem_given = !lua_isnil(L, -1), idem = lua_toboolean(L, -1);
    lua_pop(L, 1);
    int mutating = strcmp(method, "GET") != 0;
    int safe = idem_given ? idem : (strcmp(method, "POST") != 0 && strcmp(method, "PUT") != 0);
    struct req *q = req_box(L);
    int box = lua_gettop(L);

    /* body: a table is encoded here (never built from strings by scripts) */
    size_t body_len = 0;
    lua_getfield(L, 1, "body");
    int bidx = lua_gettop(L);
    if (lua_istable(L, bidx) || ljson_isnull(L, bidx)) {
        char err[640];
        if (!(q->jbody = ljson_to_cjson(L, bidx, err, sizeof err)))
            return luaL_error(L, "kube.%s: %s", verb ? verb : "request", err);
        if (!(q->body = cJSON_PrintUnformatted(q->jbody)))
            return luaL_error(L, "kube: out of memory");
        body_len = strlen(q->body);
    } else if (lua_type(L, bidx) == LUA_TSTRING) {
        /* Only the request layer's own callers pass strings (e.g. a JSON
         * patch already encoded by json.encode). */
        const char *s = lua_tolstring(L, bidx, &body_len);
        if (!(q->body = cJSON_malloc(body_len + 1)))
            return luaL_error(L, "kube: out of memory");
        memcpy(q->body, s, body_len + 1);
    }
    /* The guard judges the path and body as the script asked for them
     * before anything is resolved or connected (the query is appended after
     * it, from escaped values with no dryRun); wire() judges again what is
     * finally sent, which the preview may have rewritten. */
    struct guard_target gt = guard_for(hc);
    char why[512];
    enum guard_verdict gv = guard_check(&gt, method, path0, q->body, body_len,
                                        q->body && !ctype ? "application/json" : ctype, why,
                                        sizeof why);
    if (gv != GUARD_ALLOW)
        return raise_refusal(L, hc, WIRE_REFUSED, gv, why, verb, method, path0);

    /* path + the caller's query + dryRun */
    struct sbuf *pb = &q->path;
    int first = 1;
    sb_add(pb, path0);
    lua_getfield(L, 1, "query");
    int qidx = lua_gettop(L);
    if (append_query(pb, L, qidx, &first) != 0)
        return luaL_error(L, "kube: query keys are API parameter names (never dryRun) and values "
                          "strings, numbers or booleans");
    /* The query table stays on the stack: the preview reads its selectors. */
    if (mutating && hc->kube.dry_run)
        sb_add(pb, first ? "?dryRun=All" : "&dryRun=All");
    if (pb->oom)
        return luaL_error(L, "kube: out of memory");

    struct kube_client *c = client_connect(hc);
    if (!c) {
        req_release(q);
        lua_pushnil(L);
        push_error(L, 0, "ConfigError", hc->client->init_err, NULL, verb, method, path0);
        return 2;
    }
    if (q->body && !ctype)
        ctype = "application/json";
    struct overlay *ov = NULL;
    if (hc->overlay_path) {
        char oerr[512];
        if (!c->overlay && !(c->overlay = overlay_load(hc->overlay_path, oerr, sizeof oerr)))
            return luaL_error(L, "kube: preview: %s", oerr);
        ov = hc->overlay = c->overlay;
    }
    struct send snd = {method, ctype, body_len, safe};
    const cJSON *held = NULL;
    enum overlay_state ost = OV_UNKNOWN;
    if (ov) {
        int r = preview_before(L, hc, q, &snd, path0, verb, &held, &ost);
        if (r >= 0) {
            req_release(q);
            return r; /* the top r values: what the overlay answered */
        }
    }
    /* What the object was before a write: in dry run, for the report of the
     * fields it would change; otherwise, for the journal to tell a change
     * from a no-op, read only when no earlier answer of this migration
     * showed it (a create has nothing to read). */
    int report = mutating && hc->kube.dry_run;
    int creating = strcmp(method, "POST") == 0;
    char rv_before[64] = "";
    const char *known = mutating && !creating ? journal_rv(hc->journal, path0) : NULL;
    if (known)
        snprintf(rv_before, sizeof rv_before, "%s", known);
    if (mutating && !creating && strcmp(method, "PUT") == 0 && !*rv_before) {
        const cJSON *rv = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(q->jbody, "metadata"), "resourceVersion");
        if (cJSON_IsString(rv))
            snprintf(rv_before, sizeof rv_before, "%s", rv->valuestring);
    }
    if (held && mutating && !creating) {
        q->before = cJSON_Duplicate(held, 1);
    } else if ((report || (mutating && hc->journal && !*rv_before && strcmp(method, "DELETE") != 0)) &&
               !creating) {
        struct rest_error be;
        q->before = wire_get_json(hc, c, path0, NULL, &be);
        rest_error_free(&be);
    }
    const cJSON *brv = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(q->before, "metadata"), "resourceVersion");
    if (cJSON_IsString(brv) && !*rv_before)
        snprintf(rv_before, sizeof rv_before, "%s", brv->valuestring);
    /* PUT is idempotent only with a resourceVersion (the caller says so). */
    struct wire_req w = {snd.method, q->path.p, accept, snd.ctype, q->body, snd.body_len, snd.safe};
    enum wire_rc wrc = wire(hc, c, &w, &q->res, &gv, why, sizeof why);
    q->have_res = 1;
    if (wrc != WIRE_OK && wrc != WIRE_FAILED)
        return raise_refusal(L, hc, wrc, gv, why, verb, snd.method, path0);
    int rc = wrc == WIRE_OK ? 0 : -1;
    int would = -1;
    char fields[JOURNAL_FIELDS_MAX] = "";
    if (report && rc == 0)
        would = dryrun_report(method, path0, q->before, q->res.json, fields, sizeof fields) > 0;
    if (mutating)
        journal_add(hc->journal, method, verb, path0, rc == 0 ? q->res.status : q->res.err.code,
                    rc == 0 ? q->res.json : NULL, *rv_before ? rv_before : NULL, would,
                    hc->kube.dry_run, fields);
    else if (rc == 0)
        journal_seen(hc->journal, path0, q->res.json);
    if (rc == 0 && ov && preview_after(L, hc, ov, q, method, path0, qidx) != 0)
        return lua_error(L);
    if (rc != 0) {
        lua_pushnil(L);
        push_rest_error(L, &q->res.err, verb, method, path0);
        req_release(q);
        return 2;
    }
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, q->res.status);
    lua_setfield(L, -2, "status");
    if (q->res.json) {
        /* The raw text is not needed once parsed: free it before the Lua
         * copy is built, so a list page is held twice at most, not thrice. */
        mem_free(q->res.body);
        q->res.body = NULL;
        q->res.len = 0;
        push_json(L, q->res.json);
    } else if (q->res.len)
        lua_pushlstring(L, q->res.body, q->res.len);
    else
        lua_pushnil(L);
    lua_setfield(L, -2, "body");
    req_release(q);
    lua_replace(L, box);
    lua_settop(L, box);
    return 1;
}

/* ---- discovery --------------------------------------------------------- */

#define AGG_ACCEPT                                                                   \
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"         \
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"    \
    "application/json"

/* Loads the whole catalogue: aggregated discovery (two requests) when the
 * server offers it, else the legacy walk over every group version. Makes no
 * Lua call, so nothing it holds can leak through a raise: a failure fills
 * err and the path that failed, for the caller to push. */
static int load_discovery(struct host_ctx *hc, struct kube_client *c, struct rest_error *err,
                          char *failed, size_t flen)
{
    discovery_clear(&c->disc);
    c->disc_loaded = 0;
    const char *roots[] = {"/api", "/apis"};
    for (int i = 0; i < 2; i++) {
        snprintf(failed, flen, "%s", roots[i]);
        cJSON *doc = wire_get_json(hc, c, roots[i], AGG_ACCEPT, err);
        if (!doc)
            return -1;
        rest_error_free(err);
        if (discovery_add_aggregated(&c->disc, doc) == 0) {
            cJSON_Delete(doc);
            continue;
        }
        /* Legacy: /api lists versions, /apis lists groups. */
        if (i == 0) {
            const cJSON *v;
            cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(doc, "versions")) {
                if (!cJSON_IsString(v))
                    continue;
                snprintf(failed, flen, "/api/%s", v->valuestring);
                cJSON *rl = wire_get_json(hc, c, failed, "application/json", err);
                if (!rl) {
                    cJSON_Delete(doc);
                    return -1;
                }
                rest_error_free(err);
                discovery_add_resource_list(&c->disc, "", v->valuestring, 1, rl);
                cJSON_Delete(rl);
            }
        } else {
            const cJSON *g;
            cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(doc, "groups")) {
                const cJSON *name = cJSON_GetObjectItemCaseSensitive(g, "name");
                const cJSON *pref = cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetObjectItemCaseSensitive(g, "preferredVersion"), "version");
                const cJSON *v;
                cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(g, "versions")) {
                    const cJSON *gv = cJSON_GetObjectItemCaseSensitive(v, "groupVersion");
                    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(v, "version");
                    if (!cJSON_IsString(gv) || !cJSON_IsString(ver) || !cJSON_IsString(name))
                        continue;
                    char p[512];
                    snprintf(p, sizeof p, "/apis/%s", gv->valuestring);
                    cJSON *rl = wire_get_json(hc, c, p, "application/json", err);
                    rest_error_free(err);
                    if (!rl) {
                        /* An unavailable aggregated API must not hide the rest. */
                        log_warn("kube: discovery of %s failed; skipping it", gv->valuestring);
                        continue;
                    }
                    discovery_add_resource_list(
                        &c->disc, name->valuestring, ver->valuestring,
                        cJSON_IsString(pref) && strcmp(pref->valuestring, ver->valuestring) == 0,
                        rl);
                    cJSON_Delete(rl);
                }
            }
        }
        cJSON_Delete(doc);
    }
    c->disc_loaded = 1;
    return 0;
}

static void set_str(lua_State *L, const char *k, const char *v)
{
    lua_pushstring(L, v);
    lua_setfield(L, -2, k);
}

static int push_resource_call(lua_State *L)
{
    const struct api_resource *r = lua_touserdata(L, 1);
    char buf[600];
    lua_createtable(L, 0, 9);
    set_str(L, "group", r->group);
    set_str(L, "version", r->version);
    set_str(L, "resource", r->resource);
    set_str(L, "kind", r->kind);
    lua_pushboolean(L, r->namespaced);
    lua_setfield(L, -2, "namespaced");
    if (*r->group)
        snprintf(buf, sizeof buf, "%s/%s", r->group, r->version);
    else
        snprintf(buf, sizeof buf, "%s", r->version);
    set_str(L, "api_version", buf);
    if (*r->group)
        snprintf(buf, sizeof buf, "/apis/%s/%s", r->group, r->version);
    else
        snprintf(buf, sizeof buf, "/api/%s", r->version);
    set_str(L, "prefix", buf);
    lua_createtable(L, (int)r->nverbs, 0);
    for (size_t i = 0; i < r->nverbs; i++) {
        lua_pushstring(L, r->verbs[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "verbs");
    return 1;
}

/* The resolved resource as a table, read from the discovery catalogue with
 * finalizers held off: a __gc that resolves a missing name meanwhile would
 * refetch discovery and free the catalogue. May raise (memory). */
static void push_resource(lua_State *L, const struct api_resource *r)
{
    host_call_pinned(L, push_resource_call, (void *)r, 1);
}

/* Pushes nil and the error of a failed discovery. May raise (memory). */
static int discovery_failed(lua_State *L, struct rest_error *e, const char *path)
{
    /* e owns C memory and the push may raise: box it first. */
    struct req *q = req_box(L);
    q->res.err = *e;
    q->have_res = 1;
    memset(e, 0, sizeof *e);
    lua_pushnil(L);
    push_rest_error(L, &q->res.err, "discovery", "GET", path);
    req_release(q);
    lua_remove(L, -3);
    return 2;
}

/* core.resolve(name) -> resource | nil, err. A miss refetches discovery once,
 * since the script may just have created the CRD. May raise (memory). */
static int l_resolve(lua_State *L)
{
    struct host_ctx *hc = host_ctx(L);
    const char *name = luaL_checkstring(L, 1);
    struct kube_client *c = client_connect(hc);
    if (!c) {
        lua_pushnil(L);
        push_error(L, 0, "ConfigError", hc->client->init_err, NULL, "discovery", "GET", "/apis");
        return 2;
    }
    struct rest_error e;
    char failed[600];
    int fetched = 0;
    if (!c->disc_loaded) {
        if (load_discovery(hc, c, &e, failed, sizeof failed) != 0)
            return discovery_failed(L, &e, failed);
        fetched = 1;
    }
    const struct api_resource *r = discovery_resolve(&c->disc, name);
    if (!r && !fetched) {
        if (load_discovery(hc, c, &e, failed, sizeof failed) != 0)
            return discovery_failed(L, &e, failed);
        r = discovery_resolve(&c->disc, name);
    }
    if (!r) {
        lua_pushnil(L);
        push_error(L, 0, "UnknownResource",
                   lua_pushfstring(L, "the server doesn't have a resource type \"%s\"", name),
                   NULL, "discovery", "GET", "/apis");
        lua_remove(L, -2);
        return 2;
    }
    push_resource(L, r);
    return 1;
}

/* ---- small host services the Lua side needs ------------------------------ */

/* core.sleep(seconds): waits, never past the migration's deadline. */
static int l_sleep(lua_State *L)
{
    struct host_ctx *hc = host_ctx(L);
    double s = luaL_checknumber(L, 1);
    double left = host_ctx_remaining(hc);
    if (s > left)
        s = left;
    rest_sleep(s);
    return 0;
}

static int l_now(lua_State *L)
{
    lua_pushnumber(L, now_mono());
    return 1;
}

static int l_connects(lua_State *L)
{
    struct kube_client *c = host_ctx(L)->client;
    lua_pushinteger(L, c->rest ? rest_connects(c->rest) : 0);
    return 1;
}

/* core.requests() -> HTTP requests sent so far (every attempt, discovery
 * included): lets a test prove what was, or was not, sent. */
static int l_requests(lua_State *L)
{
    struct kube_client *c = host_ctx(L)->client;
    lua_pushinteger(L, c->rest ? rest_requests(c->rest) : 0);
    return 1;
}

/* core.config() -> {server, context, namespace, ...} | nil, err.
 * May raise (memory). */
static int l_config(lua_State *L)
{
    struct host_ctx *hc = host_ctx(L);
    struct kube_client *c = client_connect(hc);
    if (!c) {
        lua_pushnil(L);
        lua_pushstring(L, hc->client->init_err);
        return 2;
    }
    struct ljson_box *box = ljson_box(L);
    box->json = kubeconfig_describe(rest_config(c->rest));
    ljson_push(L, box->json);
    ljson_box_free(box);
    lua_remove(L, -2);
    return 1;
}

/* The namespace a verb uses when the script names none: the kubeconfig
 * context's (or the service account's), else "default", as kubectl does. */
static int l_default_namespace(lua_State *L)
{
    struct kube_client *c = client_connect(host_ctx(L));
    const struct kube_config *kc = c ? rest_config(c->rest) : NULL;
    lua_pushstring(L, kc && kc->namespace && *kc->namespace ? kc->namespace : "default");
    return 1;
}

/* core.journal() -> {writes=, changed=, entries={...}, more=} | nil: this
 * migration's writes so far (for specs, and what the runner records). */
static int l_journal(lua_State *L)
{
    struct host_ctx *hc = host_ctx(L);
    if (!hc->journal) {
        lua_pushnil(L);
        return 1;
    }
    struct ljson_box *box = ljson_box(L);
    if (!(box->json = journal_json(hc->journal)))
        return luaL_error(L, "kube: out of memory");
    ljson_push(L, box->json);
    ljson_box_free(box);
    return 1;
}

static int l_make_error(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    push_error_mt(L);
    lua_setmetatable(L, 1);
    return 1;
}

static int l_is_error(lua_State *L)
{
    int r = 0;
    if (lua_getmetatable(L, 1)) {
        luaL_getmetatable(L, ERROR_MT);
        r = lua_rawequal(L, -1, -2);
        lua_pop(L, 2);
    }
    lua_pushboolean(L, r);
    return 1;
}

/* Creates the context's client (unconnected) the first time the module is
 * opened in a state; a second require (busted insulation) shares it. */
static void ensure_client(lua_State *L, struct host_ctx *hc)
{
    if (hc->client)
        return;
    struct kube_client *c = lua_newuserdatauv(L, sizeof *c, 0);
    memset(c, 0, sizeof *c);
    if (luaL_newmetatable(L, CLIENT_MT)) {
        lua_pushcfunction(L, client_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &CLIENT_KEY);
    hc->client = c;
    /* In a migration's child the log is in memory the parent shares, so
     * the journal outlives the child however it ends. */
    journal_init(&c->journal, hc->journal_log);
    hc->journal = &c->journal;
}

static const char PRIVATE_KEY = 'p';

/* Pushes the private table {request = ...} that stdlib/kube.lua is called
 * with (sandbox.c loads it in a pristine environment and hands it this
 * table as its second argument): nothing else can reach it, since it lives
 * only in the registry and in that chunk's arguments. May raise (memory). */
void kube_push_private(lua_State *L)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &PRIVATE_KEY) != LUA_TNIL)
        return;
    lua_pop(L, 1);
    lua_pushcfunction(L, luaopen_kube_core); /* creates it */
    lua_call(L, 0, 1);
    lua_pop(L, 1);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &PRIVATE_KEY);
}

/* May raise (memory, or a state without a host context). */
int luaopen_kube_core(lua_State *L)
{
    static const luaL_Reg f[] = {
        {"resolve", l_resolve},
        {"sleep", l_sleep},
        {"now", l_now},
        {"connects", l_connects},
        {"requests", l_requests},
        {"config", l_config},
        {"default_namespace", l_default_namespace},
        {"make_error", l_make_error},
        {"journal", l_journal},
        {"is_error", l_is_error},
        {NULL, NULL},
    };
    struct host_ctx *hc = host_ctx(L);
    if (!hc)
        return luaL_error(L, "kube.core: this Lua state has no host context");
    ensure_client(L, hc);
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &PRIVATE_KEY) == LUA_TNIL) {
        lua_createtable(L, 0, 1);
        lua_pushcfunction(L, l_request);
        lua_setfield(L, -2, "request");
        lua_rawsetp(L, LUA_REGISTRYINDEX, &PRIVATE_KEY);
    }
    lua_pop(L, 1);
    ljson_init(L);
    push_error_mt(L);
    lua_pop(L, 1);
    luaL_newlib(L, f);
    lua_pushboolean(L, hc->kube.dry_run);
    lua_setfield(L, -2, "dry_run");
    lua_pushstring(L, hc->kube.ledger_namespace);
    lua_setfield(L, -2, "ledger_namespace");
    lua_pushstring(L, hc->kube.ledger_name);
    lua_setfield(L, -2, "ledger_name");
    return 1;
}

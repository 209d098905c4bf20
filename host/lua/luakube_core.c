/* luakube_core.c: `kube.core`, the module every kube verb stands on.
 *
 * Owns the module and its private table (the raw request function, handed
 * to stdlib/kube.lua alone); the client a state keeps while its script runs
 * (the connection, opened on first use; the write journal; the preview's
 * overlay; what the preview could not predict), and the explicit functions
 * the host asks it through once the script has run (luakube.h); apiserver
 * errors as Lua values (code, reason, message, details, verb, path, and the
 * fresh continue token of a 410); turning host data into Lua values with
 * finalizers held off; the discovery cache, refetched once on a miss; and
 * the small services (sleep, now, config, counters of connections and
 * requests sent). The request path is luakube_request.c's, the preview's
 * overlay luakube_preview.c's. */
#include "lua/luakube.h"

#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/stop.h"
#include "base/util.h"
#include "client/apipath.h"
#include "client/options.h"
#include "lua/luakube_int.h"
#include "lua/luajson.h"

#define CLIENT_MT "cozy.kube.client"
#define ERROR_MT "cozy.kube.error"

static const char CLIENT_KEY = 'k';

static int client_gc(lua_State *L)
{
    struct kube_client *c = luaL_checkudata(L, 1, CLIENT_MT);
    /* a tenant leaves its home's list (the home's memory outlives every
     * finalizer: lua_close frees objects only after calling them all) */
    for (struct kube_client **at = c->home ? &c->home->tenants : NULL; at && *at; at = &(*at)->next)
        if (*at == c) {
            *at = c->next;
            break;
        }
    rest_pool_free(c->pool); /* it sends on c->rest's connection settings */
    c->pool = NULL;
    rest_free(c->rest);
    c->rest = NULL;
    discovery_clear(&c->disc);
    journal_free(&c->journal);
    overlay_free(c->overlay);
    c->overlay = NULL;
    return 0;
}

/* The state's client (created when the module is opened), or NULL. */
struct kube_client *luakube_client_of(lua_State *L)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &CLIENT_KEY);
    struct kube_client *c = lua_touserdata(L, -1);
    lua_pop(L, 1);
    return c;
}

struct kube_client *luakube_client_here(lua_State *L)
{
    struct kube_client *c = luaL_testudata(L, lua_upvalueindex(1), CLIENT_MT);
    return c ? c : luakube_client_of(L);
}

static void push_client_mt(lua_State *L)
{
    if (luaL_newmetatable(L, CLIENT_MT)) {
        lua_pushcfunction(L, client_gc);
        lua_setfield(L, -2, "__gc");
        /* a tenant's client is reachable from the verbs' upvalues only;
         * nothing of it is a script's */
        lua_pushliteral(L, "kube.client");
        lua_setfield(L, -2, "__metatable");
    }
}

struct kube_client *luakube_new_client(lua_State *L)
{
    struct kube_client *c = lua_newuserdatauv(L, sizeof *c, 0);
    memset(c, 0, sizeof *c);
    push_client_mt(L);
    lua_setmetatable(L, -2);
    return c;
}

/* Notes that the preview met something it cannot predict (the first why
 * is kept): the migration's preview is then unpredictable, not failed. */
void luakube_note_unpredictable(struct kube_client *c, const char *why)
{
    if (c->home)
        c = c->home;
    if (c->unpredictable)
        return;
    c->unpredictable = 1;
    /* cut to fit (on a whole character): the first line of it is what counts */
    size_t n = why ? strlen(why) : 0;
    if (n >= sizeof c->unpredictable_why)
        n = sizeof c->unpredictable_why - 1;
    memcpy(c->unpredictable_why, why ? why : "", n);
    c->unpredictable_why[n] = '\0';
    utf8_clip(c->unpredictable_why);
}

/* c, connected. NULL when the cluster config cannot be resolved (the
 * reason stays in c->init_err for every later call). */
struct kube_client *luakube_connect(struct kube_client *c, const struct host_ctx *hc)
{
    if (c->ended || (c->home && c->home->ended)) {
        snprintf(c->init_err, sizeof c->init_err,
                 "the migration has ended: a finalizer may not talk to the cluster");
        return NULL;
    }
    if (c->rest)
        return c;
    if (c->init_failed)
        return NULL;
    if (!(c->rest = kube_open(&hc->kube, log_say, c->init_err, sizeof c->init_err))) {
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

/* Pushes the error metatable (kube.error). May raise (memory). */
static void luakube_push_error_mt(lua_State *L)
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

/* ljson_push with finalizers held off (host_ctx_call_pinned): what is being
 * converted may belong to the host (the overlay, a response), and a __gc
 * calling kube meanwhile could free or replace it. May raise (memory). */
void luakube_push_json(lua_State *L, const cJSON *v)
{
    host_ctx_call_pinned(L, push_json_call, (void *)v, 1);
}

/* Sets field "where" of the table on top to the script's place on L's
 * stack: the innermost Lua frame that is not the stdlib's own
 * ("@stdlib/..."), as "FILE:LINE"; nothing when there is none (a request
 * made by the host itself). Run where the error is made, while the stack
 * still holds the call. May raise (memory). */
static void set_where(lua_State *L)
{
    lua_Debug ar;
    for (int level = 0; lua_getstack(L, level, &ar); level++) {
        if (!lua_getinfo(L, "Sl", &ar) || ar.currentline < 1 || strcmp(ar.what, "C") == 0)
            continue;
        if (strncmp(ar.source, "@stdlib/", 8) == 0 || ar.source[0] != '@')
            continue;
        lua_pushfstring(L, "%s:%d", ar.source + 1, ar.currentline);
        lua_setfield(L, -2, "where");
        return;
    }
}

/* "RESOURCE NS/NAME" (or a collection's "RESOURCE in NS") from a request
 * path, into buf; the path itself when it names no resource. */
static void object_of(const char *path, char *buf, size_t len)
{
    struct apipath p;
    if (!path || apipath_parse(path, &p) != 0) {
        snprintf(buf, len, "%s", path ? path : "?");
        return;
    }
    char res[1100];
    snprintf(res, sizeof res, "%s%s%s%s%s", p.resource, *p.group ? "." : "", p.group,
             *p.sub ? "/" : "", p.sub);
    if (*p.name)
        snprintf(buf, len, "%s %s%s%s", res, p.ns, *p.ns ? "/" : "", p.name);
    else if (*p.ns)
        snprintf(buf, len, "%s in %s", res, p.ns);
    else
        snprintf(buf, len, "%s", res);
}

static int error_text_call(lua_State *L)
{
    char *buf = lua_touserdata(L, 2);
    size_t len = (size_t)lua_tointeger(L, 3);
    lua_getfield(L, 1, "where");
    lua_getfield(L, 1, "verb");
    lua_getfield(L, 1, "path");
    const char *where = lua_type(L, -3) == LUA_TSTRING ? lua_tostring(L, -3) : NULL;
    const char *verb = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
    const char *path = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    error_tostring(L); /* pushes the kubectl-like text of the value at 1 */
    const char *text = lua_tostring(L, -1);
    char obj[2400] = "";
    if (verb)
        object_of(path, obj, sizeof obj);
    snprintf(buf, len, "%s%s%s%s%s%s%s", where ? where : "", where ? ": " : "",
             verb ? (strchr(verb, '.') ? "" : "kube.") : "", verb ? verb : "", verb ? " " : "",
             verb ? obj : "", verb ? ": " : "");
    size_t used = strlen(buf);
    snprintf(buf + used, len - used, "%s", text ? text : "");
    return 0;
}

int luakube_error_text(lua_State *L, int idx, char *buf, size_t len)
{
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) != LUA_TTABLE || !lua_getmetatable(L, idx))
        return -1;
    luaL_getmetatable(L, ERROR_MT);
    int mine = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    if (!mine || !len)
        return -1;
    lua_pushcfunction(L, error_text_call);
    lua_pushvalue(L, idx);
    lua_pushlightuserdata(L, buf);
    lua_pushinteger(L, (lua_Integer)len);
    if (lua_pcall(L, 3, 0, 0) != LUA_OK) {
        lua_pop(L, 1);
        return -1;
    }
    return 0;
}

void luakube_push_error(lua_State *L, long code, const char *reason, const char *message,
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
        luakube_push_json(L, details);
        lua_setfield(L, -2, "details");
    }
    lua_pushstring(L, verb ? verb : method);
    lua_setfield(L, -2, "verb");
    lua_pushstring(L, method);
    lua_setfield(L, -2, "method");
    lua_pushstring(L, path);
    lua_setfield(L, -2, "path");
    set_where(L);
    luakube_push_error_mt(L);
    lua_setmetatable(L, -2);
}

void luakube_push_rest_error(lua_State *L, const struct rest_error *e, const char *verb,
                            const char *method, const char *path)
{
    luakube_push_error(L, e->code, e->reason, e->message, e->details, verb, method, path);
    if (e->after_retry) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "after_retry");
    }
    if (e->continue_token) {
        lua_pushstring(L, e->continue_token);
        lua_setfield(L, -2, "continue");
    }
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
        cJSON *doc = luakube_get_json(hc, c, roots[i], AGG_ACCEPT, err);
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
                cJSON *rl = luakube_get_json(hc, c, failed, "application/json", err);
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
                    cJSON *rl = luakube_get_json(hc, c, p, "application/json", err);
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
    host_ctx_call_pinned(L, push_resource_call, (void *)r, 1);
}

/* Pushes nil and the error of a failed discovery. May raise (memory). */
static int discovery_failed(lua_State *L, struct rest_error *e, const char *path)
{
    /* e owns C memory and the push may raise: box it first. */
    struct req *q = luakube_req_box(L);
    q->res.err = *e;
    q->have_res = 1;
    memset(e, 0, sizeof *e);
    lua_pushnil(L);
    luakube_push_rest_error(L, &q->res.err, "discovery", "GET", path);
    luakube_req_release(q);
    lua_remove(L, -3);
    return 2;
}

/* core.resolve(name) -> resource | nil, err. A miss refetches discovery once,
 * since the script may just have created the CRD. May raise (memory). */
int luakube_l_resolve(lua_State *L)
{
    struct host_ctx *hc = host_ctx(L);
    const char *name = luaL_checkstring(L, 1);
    struct kube_client *kc = luakube_client_here(L), *c = luakube_connect(kc, hc);
    if (!c) {
        lua_pushnil(L);
        luakube_push_error(L, 0, "ConfigError", kc->init_err, NULL, "discovery", "GET", "/apis");
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
        luakube_push_error(L, 0, "UnknownResource",
                   lua_pushfstring(L, "the server doesn't have a resource type \"%s\"", name),
                   NULL, "discovery", "GET", "/apis");
        lua_remove(L, -2);
        return 2;
    }
    push_resource(L, r);
    return 1;
}

/* ---- small host services the Lua side needs ------------------------------ */

/* The continuation of a sleep an adopted thread yielded: ctx is the wake
 * time in monotonic milliseconds; resumed before it (by anyone but its
 * sweep's timer), it sleeps on. */
static int sleep_resumed(lua_State *L, int status, lua_KContext ctx)
{
    (void)status;
    double wake = (double)ctx / 1000.0;
    if (now_mono() < wake && !stop_cuts_waits()) {
        lua_settop(L, 0);
        luakube_push_sleeping(L);
        lua_pushnumber(L, wake);
        return lua_yieldk(L, 2, ctx, sleep_resumed);
    }
    return 0;
}

/* core.sleep(seconds): waits, never past the migration's deadline. In a
 * thread fleet.each adopted it yields that thread alone (core.SLEEPING and
 * the time it wakes at): the sweep's other objects go on meanwhile. */
static int l_sleep(lua_State *L)
{
    struct host_ctx *hc = host_ctx(L);
    double s = luaL_checknumber(L, 1);
    double left = host_ctx_remaining(hc);
    if (s > left)
        s = left;
    if (!(s > 0))
        s = 0;
    if (luakube_adopted(L)) {
        double wake = now_mono() + s;
        lua_KContext ctx = (lua_KContext)ceil(wake * 1000.0);
        lua_settop(L, 0);
        luakube_push_sleeping(L);
        lua_pushnumber(L, (double)ctx / 1000.0);
        return lua_yieldk(L, 2, ctx, sleep_resumed);
    }
    rest_sleep(s);
    return 0;
}

static int l_now(lua_State *L)
{
    lua_pushnumber(L, now_mono());
    return 1;
}

int luakube_l_connects(lua_State *L)
{
    struct kube_client *c = luakube_client_here(L);
    lua_pushinteger(L, c->rest ? rest_connects(c->rest) : 0);
    return 1;
}

/* core.requests() -> HTTP requests sent so far (every attempt, discovery
 * included): lets a test prove what was, or was not, sent. */
int luakube_l_requests(lua_State *L)
{
    struct kube_client *c = luakube_client_here(L);
    lua_pushinteger(L, c->rest ? rest_requests(c->rest) : 0);
    return 1;
}

/* core.config() -> {server, context, namespace, ...} | nil, err, where err
 * is a kube error value (reason ConfigError), as every sibling returns.
 * May raise (memory). */
int luakube_l_config(lua_State *L)
{
    struct kube_client *kc = luakube_client_here(L), *c = luakube_connect(kc, host_ctx(L));
    if (!c) {
        lua_pushnil(L);
        luakube_push_error(L, 0, "ConfigError", kc->init_err, NULL, "config", "GET", "");
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
int luakube_l_default_namespace(lua_State *L)
{
    struct kube_client *c = luakube_connect(luakube_client_here(L), host_ctx(L));
    const struct kube_config *kc = c ? rest_config(c->rest) : NULL;
    lua_pushstring(L, kc && kc->namespace && *kc->namespace ? kc->namespace : "default");
    return 1;
}

/* core.journal() -> {writes=, changed=, entries={...}, more=}: this
 * migration's writes so far (for specs, and what the runner records). */
static int l_journal(lua_State *L)
{
    struct kube_client *c = luakube_client_of(L);
    struct ljson_box *box = ljson_box(L);
    if (!(box->json = journal_json(&c->journal)))
        return luaL_error(L, "kube: out of memory");
    ljson_push(L, box->json);
    ljson_box_free(box);
    return 1;
}

/* Registry key: thread -> how many of its writes changed an object (weak
 * keys: a finished coroutine's count goes with it). */
static const char CHANGED_KEY = 'c';

void luakube_push_weak_table(lua_State *L, const void *key)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, key) == LUA_TTABLE)
        return;
    lua_pop(L, 1);
    lua_newtable(L);
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, key);
}

static void push_changed_table(lua_State *L) { luakube_push_weak_table(L, &CHANGED_KEY); }

void luakube_count_change(lua_State *L)
{
    push_changed_table(L);
    lua_pushthread(L);
    lua_pushvalue(L, -1);
    lua_rawget(L, -3);
    lua_Integer n = lua_tointeger(L, -1);
    lua_pop(L, 1);
    lua_pushinteger(L, n + 1);
    lua_rawset(L, -3);
    lua_pop(L, 1);
}

/* changed_by([thread]) -> how many writes sent from thread (default: the
 * caller's) changed an object. */
static int l_changed_by(lua_State *L)
{
    if (lua_isnoneornil(L, 1)) {
        lua_settop(L, 0);
        lua_pushthread(L);
    }
    luaL_checktype(L, 1, LUA_TTHREAD);
    lua_settop(L, 1);
    push_changed_table(L);
    lua_pushvalue(L, 1);
    lua_rawget(L, -2);
    lua_pushinteger(L, lua_tointeger(L, -1));
    return 1;
}

/* error_text(err) -> the text a script's error shows at its top: a kube
 * error's with the script's line, verb and object (luakube_error_text), any
 * other value's tostring. */
static int l_error_text(lua_State *L)
{
    luaL_checkany(L, 1);
    char buf[4096];
    if (luakube_error_text(L, 1, buf, sizeof buf) == 0)
        lua_pushstring(L, buf);
    else
        luaL_tolstring(L, 1, NULL);
    return 1;
}

static int l_make_error(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    if (lua_getfield(L, 1, "where") == LUA_TNIL) {
        lua_pop(L, 1);
        set_where(L);
    } else {
        lua_pop(L, 1);
    }
    luakube_push_error_mt(L);
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

/* Creates the state's client (unconnected) the first time the module is
 * opened in a state; a second require (busted insulation) shares it. */
static void ensure_client(lua_State *L, const struct host_ctx *hc)
{
    if (luakube_client_of(L))
        return;
    struct kube_client *c = luakube_new_client(L);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &CLIENT_KEY);
    /* In a migration's child the log is in memory the parent shares, so
     * the journal outlives the child however it ends. */
    journal_init(&c->journal, hc->journal_log);
}

/* ---- what comes back to the host (luakube.h) ---------------------------- */

void luakube_end(lua_State *L)
{
    struct kube_client *c = luakube_client_of(L);
    if (c)
        c->ended = 1;
}

const char *luakube_unpredictable(lua_State *L)
{
    struct kube_client *c = luakube_client_of(L);
    return c && c->unpredictable ? c->unpredictable_why : NULL;
}

int luakube_preview_save(lua_State *L, char *err, size_t errlen)
{
    struct kube_client *c = luakube_client_of(L);
    const struct host_ctx *hc = host_ctx(L);
    if (!c || !c->overlay || !hc || !hc->overlay_path || !overlay_changed(c->overlay))
        return 0;
    return overlay_save(c->overlay, hc->overlay_path, err, errlen);
}

static const char PRIVATE_KEY = 'p';

/* Pushes the private table {request = ...} that stdlib/kube.lua is called
 * with (sandbox.c loads it in a pristine environment and hands it this
 * table as its second argument): nothing else can reach it, since it lives
 * only in the registry and in that chunk's arguments. May raise (memory). */
void luakube_push_private(lua_State *L)
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
        {"resolve", luakube_l_resolve},
        {"sleep", l_sleep},
        {"now", l_now},
        {"connects", luakube_l_connects},
        {"requests", luakube_l_requests},
        {"config", luakube_l_config},
        {"default_namespace", luakube_l_default_namespace},
        {"make_error", l_make_error},
        {"error_text", l_error_text},
        {"changed_by", l_changed_by},
        {"journal", l_journal},
        {"is_error", l_is_error},
        {"adopt", luakube_l_adopt},
        {"await", luakube_l_await},
        {"pace", luakube_l_pace},
        {"pace_seen", luakube_l_pace_seen},
        {NULL, NULL},
    };
    struct host_ctx *hc = host_ctx(L);
    if (!hc)
        return luaL_error(L, "kube.core: this Lua state has no host context");
    ensure_client(L, hc);
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &PRIVATE_KEY) == LUA_TNIL) {
        lua_createtable(L, 0, 3);
        lua_pushcfunction(L, luakube_l_request);
        lua_setfield(L, -2, "request");
        lua_pushcfunction(L, luakube_l_cluster);
        lua_setfield(L, -2, "cluster");
        lua_pushcfunction(L, luakube_l_cluster_refs);
        lua_setfield(L, -2, "cluster_refs");
        lua_rawsetp(L, LUA_REGISTRYINDEX, &PRIVATE_KEY);
    }
    lua_pop(L, 1);
    ljson_init(L);
    luakube_push_error_mt(L);
    lua_pop(L, 1);
    luaL_newlib(L, f);
    lua_pushboolean(L, hc->kube.dry_run);
    lua_setfield(L, -2, "dry_run");
    lua_pushinteger(L, hc->kube.concurrency > 0 ? hc->kube.concurrency : 1);
    lua_setfield(L, -2, "concurrency");
    luakube_push_pending(L);
    lua_setfield(L, -2, "PENDING");
    luakube_push_sleeping(L);
    lua_setfield(L, -2, "SLEEPING");
    lua_pushstring(L, hc->kube.ledger_namespace);
    lua_setfield(L, -2, "ledger_namespace");
    lua_pushstring(L, hc->kube.ledger_name);
    lua_setfield(L, -2, "ledger_name");
    return 1;
}

/* kube.c: `kube.core`, the request policy under every kube verb.
 *
 * Owns, for each request a script makes: the ledger/lease write guard
 * (checked on the percent-decoded path before anything is sent; a path it
 * cannot judge is refused), dryRun=All on every mutating request in dry-run
 * mode, which requests count as idempotent when handing them to rest.c (which
 * owns retries, bounded here by the migration's deadline), apiserver errors
 * turned into Lua values (code, reason, message, details, verb, path, and
 * the fresh continue token of a 410), the discovery cache, refetched once on
 * a miss, and counters of connections and requests sent. Must never mark a
 * request idempotent whose repetition is unsafe, nor let a script reach the
 * ledger. */
#include "kube.h"

#include <curl/curl.h>
#include <errno.h>
#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "discovery.h"
#include "dryrun.h"
#include "rest.h"
#include "log.h"
#include "luajson.h"
#include "sandbox.h"
#include "util.h"

#define CLIENT_MT "cozy.kube.client"
#define ERROR_MT "cozy.kube.error"

static struct {
    struct kube_options o;
    char *strs[6];
} opts;

void kube_default_options(struct kube_options *o)
{
    memset(o, 0, sizeof *o);
    o->ledger_namespace = "cozy-system";
    o->ledger_name = "cozystack-version";
    o->lease_name = "cozystack-version-lock";
    o->request_timeout = 30;
    o->max_attempts = 6;
    o->retry_budget = 60;
}

static const char *keep(int i, const char *s)
{
    free(opts.strs[i]);
    opts.strs[i] = s ? strdup(s) : NULL;
    return opts.strs[i];
}

void kube_set_options(const struct kube_options *o)
{
    opts.o = *o;
    opts.o.cfg.kubeconfig = keep(0, o->cfg.kubeconfig);
    opts.o.cfg.context = keep(1, o->cfg.context);
    opts.o.ledger_namespace = keep(2, o->ledger_namespace);
    opts.o.ledger_name = keep(3, o->ledger_name);
    opts.o.lease_name = keep(4, o->lease_name);
    opts.o.default_namespace = keep(5, o->default_namespace);
}

static void ensure_options(void)
{
    if (!opts.o.ledger_name) {
        struct kube_options d;
        kube_default_options(&d);
        kube_set_options(&d);
    }
}

struct client {
    struct rest_client *rest;
    struct discovery disc;
    int disc_loaded;
    char init_err[512];
    int init_failed;
};

static const char *client_err(lua_State *L)
{
    return ((struct client *)lua_touserdata(L, lua_upvalueindex(1)))->init_err;
}

static int client_gc(lua_State *L)
{
    struct client *c = luaL_checkudata(L, 1, CLIENT_MT);
    rest_free(c->rest);
    c->rest = NULL;
    discovery_clear(&c->disc);
    return 0;
}

/* The client is created on first use, so a script that never talks to the
 * cluster runs without one. It lives in the module functions' upvalue. */
static struct client *get_client(lua_State *L)
{
    struct client *c = lua_touserdata(L, lua_upvalueindex(1));
    if (c->rest)
        return c;
    if (c->init_failed)
        return NULL;
    ensure_options();
    struct rest_policy p = {opts.o.request_timeout, opts.o.max_attempts, opts.o.retry_budget};
    if (!(c->rest = rest_new(&opts.o.cfg, &p, c->init_err, sizeof c->init_err))) {
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
    }
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
        ljson_push(L, details);
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

/* ---- the ledger guard ------------------------------------------------ */

static int seg_eq(const char *s, size_t len, const char *want)
{
    return want && strlen(want) == len && strncmp(s, want, len) == 0;
}

/* Splits a path (without query) into at most 16 segments. */
static int split(const char *path, const char **seg, size_t *len, int max)
{
    int n = 0;
    const char *p = path;
    while (*p == '/')
        p++;
    while (*p && *p != '?' && n < max) {
        const char *e = p;
        while (*e && *e != '/' && *e != '?')
            e++;
        seg[n] = p;
        len[n] = (size_t)(e - p);
        n++;
        p = e;
        while (*p == '/')
            p++;
    }
    return n;
}

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* The path as the apiserver will route it: the part before the query,
 * percent-decoded (so "cozystack%2Dversion" cannot slip past the guard).
 * Returns a malloc'd string, or NULL with why in err for a path the guard
 * could not judge: an encoded '/' or NUL, a bad escape, a "." or ".."
 * segment (libcurl and the server would fold those). */
static char *canonical_path(const char *path, const char **why)
{
    size_t n = strcspn(path, "?");
    char *out = malloc(n + 1);
    if (!out) {
        *why = "out of memory";
        return NULL;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int ch = (unsigned char)path[i];
        if (ch == '%') {
            int hi = i + 2 < n ? hexval((unsigned char)path[i + 1]) : -1;
            int lo = hi >= 0 ? hexval((unsigned char)path[i + 2]) : -1;
            if (hi < 0 || lo < 0) {
                free(out);
                *why = "a malformed percent-escape";
                return NULL;
            }
            ch = hi * 16 + lo;
            if (ch == '/' || ch == 0) {
                free(out);
                *why = "an encoded '/' or NUL";
                return NULL;
            }
            i += 2;
        }
        out[o++] = (char)ch;
    }
    out[o] = '\0';
    for (const char *seg = out; *seg;) {
        size_t l = strcspn(seg, "/");
        if ((l == 1 && seg[0] == '.') || (l == 2 && seg[0] == '.' && seg[1] == '.')) {
            free(out);
            *why = "a '.' or '..' segment";
            return NULL;
        }
        seg += l;
        while (*seg == '/')
            seg++;
    }
    return out;
}

/* Would this request write the ledger ConfigMap, the runner's Lease, or the
 * namespace holding them? path is canonical (see canonical_path). The
 * body's name matters for a create. */
static int guarded(const char *method, const char *path, const cJSON *body)
{
    if (strcmp(method, "GET") == 0)
        return 0;
    const char *seg[16];
    size_t len[16];
    int n = split(path, seg, len, 16);
    const char *ns = opts.o.ledger_namespace;
    int i;
    const char *want;
    if (n >= 2 && seg_eq(seg[0], len[0], "api") && seg_eq(seg[1], len[1], "v1")) {
        i = 2;
        want = opts.o.ledger_name;
        if (n == 4 && seg_eq(seg[2], len[2], "namespaces") && seg_eq(seg[3], len[3], ns))
            return strcmp(method, "DELETE") == 0;
        if (n < 4 || !seg_eq(seg[2], len[2], "namespaces") || !seg_eq(seg[3], len[3], ns) ||
            !seg_eq(seg[4 < n ? 4 : 0], len[4 < n ? 4 : 0], "configmaps"))
            return 0;
    } else if (n >= 3 && seg_eq(seg[0], len[0], "apis") &&
               seg_eq(seg[1], len[1], "coordination.k8s.io")) {
        i = 3;
        want = opts.o.lease_name;
        if (n < 6 || !seg_eq(seg[3], len[3], "namespaces") || !seg_eq(seg[4], len[4], ns) ||
            !seg_eq(seg[5], len[5], "leases"))
            return 0;
    } else {
        return 0;
    }
    int coll = i + 2; /* index of the collection segment */
    if (n == coll + 1) {
        if (strcmp(method, "DELETE") == 0)
            return 1; /* deletecollection would take the ledger with it */
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(body, "metadata"), "name");
        return cJSON_IsString(name) && strcmp(name->valuestring, want) == 0;
    }
    return n > coll + 1 && seg_eq(seg[coll + 1], len[coll + 1], want);
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

/* Appends the spec's query table, URL-escaped. Returns -1 on a bad value. */
static int append_query(struct sbuf *b, lua_State *L, int qidx, int *first)
{
    if (lua_isnil(L, qidx))
        return 0;
    if (!lua_istable(L, qidx))
        return -1;
    lua_pushnil(L);
    while (lua_next(L, qidx) != 0) {
        if (lua_type(L, -2) != LUA_TSTRING) {
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

/* core.request{method=, path=, query=, body=, content_type=, accept=,
 *              verb=, idempotent=} -> {status=, body=} | nil, err
 * Raises only for misuse and for a write to the ledger. */
static int l_request(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    const char *method = opt_field(L, 1, "method");
    const char *path0 = opt_field(L, 1, "path");
    const char *verb = opt_field(L, 1, "verb");
    const char *ctype = opt_field(L, 1, "content_type");
    const char *accept = opt_field(L, 1, "accept");
    if (!method || !path0 || path0[0] != '/')
        return luaL_error(L, "kube.request: method and an absolute path are required");
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

    /* body: a table is encoded here (never built from strings by scripts) */
    cJSON *jbody = NULL;
    char *body = NULL;
    size_t body_len = 0;
    lua_getfield(L, 1, "body");
    int bidx = lua_gettop(L);
    if (lua_istable(L, bidx) || ljson_isnull(L, bidx)) {
        char err[640];
        jbody = ljson_to_cjson(L, bidx, err, sizeof err);
        if (!jbody)
            return luaL_error(L, "kube.%s: %s", verb ? verb : "request", err);
        body = cJSON_PrintUnformatted(jbody);
        if (!body) {
            cJSON_Delete(jbody);
            return luaL_error(L, "kube: out of memory");
        }
        body_len = strlen(body);
    } else if (lua_type(L, bidx) == LUA_TSTRING) {
        /* Only the request layer's own callers pass strings (e.g. a JSON
         * patch already encoded by json.encode). */
        const char *s = lua_tolstring(L, bidx, &body_len);
        body = malloc(body_len + 1);
        if (!body)
            return luaL_error(L, "kube: out of memory");
        memcpy(body, s, body_len + 1);
        jbody = cJSON_ParseWithLength(s, body_len);
    }
    ensure_options();
    int blocked = 0;
    if (mutating) {
        const char *why = NULL;
        char *canon = canonical_path(path0, &why);
        if (!canon) {
            cJSON_Delete(jbody);
            free(body);
            return luaL_error(L, "kube.%s: refusing path %s: it has %s", verb ? verb : "request",
                              path0, why);
        }
        blocked = guarded(method, canon, jbody);
        free(canon);
    }
    cJSON_Delete(jbody);
    if (blocked) {
        free(body);
        push_error(L, 0, "LedgerProtected",
                   "the ledger is written by the runner: scripts may not write it or its lock",
                   NULL, verb, method, path0);
        return lua_error(L);
    }

    /* path + the caller's query + dryRun */
    struct sbuf pb = {0};
    int first = strchr(path0, '?') == NULL;
    sb_add(&pb, path0);
    lua_getfield(L, 1, "query");
    if (append_query(&pb, L, lua_gettop(L), &first) != 0) {
        free(pb.p);
        free(body);
        return luaL_error(L, "kube: query parameters must be strings, numbers or booleans");
    }
    lua_pop(L, 1);
    if (mutating && opts.o.dry_run)
        sb_add(&pb, first ? "?dryRun=All" : "&dryRun=All");
    if (pb.oom) {
        free(pb.p);
        free(body);
        return luaL_error(L, "kube: out of memory");
    }
    lua_pushstring(L, pb.p);
    free(pb.p);
    const char *path = lua_tostring(L, -1);

    struct client *c = get_client(L);
    if (!c) {
        free(body);
        lua_pushnil(L);
        push_error(L, 0, "ConfigError", client_err(L), NULL, verb, method, path0);
        return 2;
    }
    if (body && !ctype)
        ctype = "application/json";
    /* In dry run, read the object first so the report can name the fields
     * the write would change (a create has nothing to read). */
    cJSON *before = NULL;
    int report = mutating && opts.o.dry_run;
    if (report && strcmp(method, "POST") != 0) {
        struct rest_error be;
        char bpath[2048];
        snprintf(bpath, sizeof bpath, "%s", path0);
        char *q = strchr(bpath, '?');
        if (q)
            *q = '\0';
        before = rest_get_json(c->rest, bpath, NULL, sandbox_remaining(L), &be);
        rest_error_free(&be);
    }
    /* PUT is idempotent only with a resourceVersion (the caller says so). */
    struct rest_result r;
    int rc = rest_do(c->rest, method, path, accept, ctype, body, body_len, safe,
                     sandbox_remaining(L), &r);
    free(body);
    if (report && rc == 0)
        dryrun_report(method, path0, before, r.json);
    cJSON_Delete(before);
    if (rc != 0) {
        lua_pushnil(L);
        push_rest_error(L, &r.err, verb, method, path0);
        rest_result_free(&r);
        return 2;
    }
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, r.status);
    lua_setfield(L, -2, "status");
    if (r.json) {
        /* The raw text is not needed once parsed: free it before the Lua
         * copy is built, so a list page is held twice at most, not thrice. */
        free(r.body);
        r.body = NULL;
        r.len = 0;
        ljson_push(L, r.json);
    } else if (r.len)
        lua_pushlstring(L, r.body, r.len);
    else
        lua_pushnil(L);
    lua_setfield(L, -2, "body");
    rest_result_free(&r);
    return 1;
}

/* ---- discovery --------------------------------------------------------- */

#define AGG_ACCEPT                                                                   \
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"         \
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"    \
    "application/json"

/* Fetches one discovery document; pushes an error and returns NULL on failure. */
static cJSON *fetch_json(lua_State *L, struct client *c, const char *path, const char *accept)
{
    struct rest_error e;
    cJSON *j = rest_get_json(c->rest, path, accept, sandbox_remaining(L), &e);
    if (!j) {
        push_rest_error(L, &e, "discovery", "GET", path);
        rest_error_free(&e);
    }
    return j;
}

/* Loads the whole catalogue: aggregated discovery (two requests) when the
 * server offers it, else the legacy walk over every group version. */
static int load_discovery(lua_State *L, struct client *c)
{
    discovery_clear(&c->disc);
    c->disc_loaded = 0;
    const char *roots[] = {"/api", "/apis"};
    for (int i = 0; i < 2; i++) {
        cJSON *doc = fetch_json(L, c, roots[i], AGG_ACCEPT);
        if (!doc)
            return -1;
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
                char p[128];
                snprintf(p, sizeof p, "/api/%s", v->valuestring);
                cJSON *rl = fetch_json(L, c, p, "application/json");
                if (!rl) {
                    cJSON_Delete(doc);
                    return -1;
                }
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
                    cJSON *rl = fetch_json(L, c, p, "application/json");
                    if (!rl) {
                        /* An unavailable aggregated API must not hide the rest. */
                        log_warn("kube: discovery of %s failed; skipping it", gv->valuestring);
                        lua_pop(L, 1);
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

static void push_resource(lua_State *L, const struct api_resource *r)
{
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
}

/* core.resolve(name) -> resource | nil, err. A miss refetches discovery once,
 * since the script may just have created the CRD. */
static int l_resolve(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    struct client *c = get_client(L);
    if (!c) {
        lua_pushnil(L);
        push_error(L, 0, "ConfigError", client_err(L), NULL, "discovery", "GET", "/apis");
        return 2;
    }
    int fetched = 0;
    if (!c->disc_loaded) {
        if (load_discovery(L, c) != 0) {
            lua_pushnil(L);
            lua_insert(L, -2);
            return 2;
        }
        fetched = 1;
    }
    const struct api_resource *r = discovery_resolve(&c->disc, name);
    if (!r && !fetched) {
        if (load_discovery(L, c) != 0) {
            lua_pushnil(L);
            lua_insert(L, -2);
            return 2;
        }
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

static int l_sleep(lua_State *L)
{
    double s = luaL_checknumber(L, 1);
    double left = sandbox_remaining(L);
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
    struct client *c = lua_touserdata(L, lua_upvalueindex(1));
    lua_pushinteger(L, c->rest ? rest_connects(c->rest) : 0);
    return 1;
}

/* core.requests() -> HTTP requests sent so far (every attempt, discovery
 * included): lets a test prove what was, or was not, sent. */
static int l_requests(lua_State *L)
{
    struct client *c = lua_touserdata(L, lua_upvalueindex(1));
    lua_pushinteger(L, c->rest ? rest_requests(c->rest) : 0);
    return 1;
}

/* core.config() -> {server, context, namespace, dry_run, ...} | nil, err */
static int l_config(lua_State *L)
{
    struct client *c = get_client(L);
    if (!c) {
        lua_pushnil(L);
        lua_pushstring(L, client_err(L));
        return 2;
    }
    cJSON *d = kubeconfig_describe(rest_config(c->rest));
    ljson_push(L, d);
    cJSON_Delete(d);
    return 1;
}

static int l_default_namespace(lua_State *L)
{
    ensure_options();
    if (opts.o.default_namespace) {
        lua_pushstring(L, opts.o.default_namespace);
        return 1;
    }
    struct client *c = get_client(L);
    const struct kube_config *kc = c ? rest_config(c->rest) : NULL;
    lua_pushstring(L, kc && kc->namespace && *kc->namespace ? kc->namespace : "default");
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

int luaopen_kube_core(lua_State *L)
{
    static const luaL_Reg f[] = {
        {"request", l_request},
        {"resolve", l_resolve},
        {"sleep", l_sleep},
        {"now", l_now},
        {"connects", l_connects},
        {"requests", l_requests},
        {"config", l_config},
        {"default_namespace", l_default_namespace},
        {"make_error", l_make_error},
        {"is_error", l_is_error},
        {NULL, NULL},
    };
    ensure_options();
    ljson_init(L);
    push_error_mt(L);
    lua_pop(L, 1);
    luaL_newlibtable(L, f);
    struct client *c = lua_newuserdatauv(L, sizeof *c, 0);
    memset(c, 0, sizeof *c);
    if (luaL_newmetatable(L, CLIENT_MT)) {
        lua_pushcfunction(L, client_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    luaL_setfuncs(L, f, 1);
    lua_pushboolean(L, opts.o.dry_run);
    lua_setfield(L, -2, "dry_run");
    lua_pushstring(L, opts.o.ledger_namespace);
    lua_setfield(L, -2, "ledger_namespace");
    lua_pushstring(L, opts.o.ledger_name);
    lua_setfield(L, -2, "ledger_name");
    return 1;
}

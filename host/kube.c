/* kube.c: `kube.core`, the request policy under every kube verb.
 *
 * Owns, for each request a script makes: the ledger/lease write guard
 * (checked before anything is sent), dryRun=All on every mutating request in
 * dry-run mode, retries (429 honouring Retry-After, 5xx, connection errors,
 * timeouts; bounded by attempts, by a time budget and by the migration's
 * deadline; a POST only when it cannot have been applied), apiserver errors
 * turned into Lua values (code, reason, message, details, verb, path), and
 * the discovery cache, refetched once on a miss. Must never retry a request
 * whose repetition is unsafe, nor let a script reach the ledger. */
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
#include "http.h"
#include "log.h"
#include "luajson.h"
#include "sandbox.h"
#include "util.h"

#define CLIENT_MT "cozy.kube.client"
#define ERROR_MT "cozy.kube.error"
#define MAX_RETRY_SLEEP 10.0
#define ERR_BODY_CAP 2048

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
    struct kube_config cfg;
    struct http_client *http;
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
    http_client_free(c->http);
    c->http = NULL;
    kubeconfig_free(&c->cfg);
    discovery_clear(&c->disc);
    return 0;
}

/* The client is created on first use, so a script that never talks to the
 * cluster runs without one. It lives in the module's upvalue. */
static struct client *get_client(lua_State *L)
{
    struct client *c = lua_touserdata(L, lua_upvalueindex(1));
    if (c->http)
        return c;
    if (c->init_failed)
        return NULL;
    ensure_options();
    char err[512];
    if (kubeconfig_resolve(&opts.o.cfg, &c->cfg, err, sizeof err) != 0 ||
        !(c->http = http_client_new(&c->cfg, err, sizeof err))) {
        snprintf(c->init_err, sizeof c->init_err, "%s", err);
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

static const char *reason_for(long code)
{
    switch (code) {
    case 400: return "BadRequest";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "NotFound";
    case 405: return "MethodNotAllowed";
    case 406: return "NotAcceptable";
    case 409: return "Conflict";
    case 410: return "Expired";
    case 413: return "RequestEntityTooLarge";
    case 415: return "UnsupportedMediaType";
    case 422: return "Invalid";
    case 429: return "TooManyRequests";
    case 500: return "InternalError";
    case 503: return "ServiceUnavailable";
    case 504: return "Timeout";
    default: return code >= 500 ? "InternalError" : "Unknown";
    }
}

/* An apiserver error: a Status object when the body is one, otherwise the
 * body itself as the message (the 429 of priority-and-fairness is text). */
static void push_status_error(lua_State *L, const struct http_response *r, const char *verb,
                              const char *method, const char *path)
{
    cJSON *st = r->len ? cJSON_ParseWithLength(r->body, r->len) : NULL;
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(st, "kind");
    if (cJSON_IsString(kind) && strcmp(kind->valuestring, "Status") == 0) {
        const cJSON *reason = cJSON_GetObjectItemCaseSensitive(st, "reason");
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(st, "message");
        const char *rs = cJSON_IsString(reason) && *reason->valuestring ? reason->valuestring
                                                                         : reason_for(r->status);
        push_error(L, r->status, rs, cJSON_IsString(msg) ? msg->valuestring : "",
                   cJSON_GetObjectItemCaseSensitive(st, "details"), verb, method, path);
    } else {
        char msg[ERR_BODY_CAP + 64];
        size_t n = r->len < ERR_BODY_CAP ? r->len : ERR_BODY_CAP;
        while (n && (r->body[n - 1] == '\n' || r->body[n - 1] == ' '))
            n--;
        if (n)
            snprintf(msg, sizeof msg, "%.*s%s", (int)n, r->body, r->len > n + 1 ? "..." : "");
        else
            snprintf(msg, sizeof msg, "the server responded with HTTP %ld and no body", r->status);
        push_error(L, r->status, reason_for(r->status), msg, NULL, verb, method, path);
    }
    cJSON_Delete(st);
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

/* Would this request write the ledger ConfigMap, the runner's Lease, or the
 * namespace holding them? The body's name matters for a create. */
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

static int retryable_transport(int code)
{
    switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return 1;
    default:
        return 0;
    }
}

/* Could the server have acted on a request that failed this way? Only a
 * failure before the request left, or a refused connection, is certain. */
static int surely_unsent(const struct http_response *r)
{
    return r->transport_error == CURLE_COULDNT_CONNECT ||
           r->transport_error == CURLE_COULDNT_RESOLVE_HOST ||
           r->transport_error == CURLE_SSL_CONNECT_ERROR || !r->sent;
}

static void sleep_s(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - floor(s)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static double jitter(void)
{
    static unsigned seed;
    if (!seed)
        seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    seed = seed * 1103515245u + 12345u;
    return 0.5 + 0.5 * ((seed >> 8) & 0xffff) / 65535.0;
}

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
    lua_getfield(L, 1, "idempotent");
    int idem_given = !lua_isnil(L, -1), idem = lua_toboolean(L, -1);
    lua_pop(L, 1);
    int mutating = strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0;
    int is_post = strcmp(method, "POST") == 0;
    int safe = idem_given ? idem : (!is_post && strcmp(method, "PUT") != 0);

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
    int blocked = mutating && guarded(method, path0, jbody);
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

    double start = now_mono();
    int max = opts.o.max_attempts > 0 ? opts.o.max_attempts : 1;
    int post_retried = 0;
    struct http_response r;
    for (int attempt = 1;; attempt++) {
        double left = sandbox_remaining(L);
        double tmo = opts.o.request_timeout > 0 ? opts.o.request_timeout : 30;
        if (left < tmo)
            tmo = left > 0.001 ? left : 0.001;
        int rc = http_request(c->http, method, path, accept, ctype, body, body_len, tmo, &r);
        const char *cause = NULL;
        char causebuf[300];
        int retry = 0;
        if (rc != 0) {
            snprintf(causebuf, sizeof causebuf, "%s", r.error);
            cause = causebuf;
            retry = retryable_transport(r.transport_error) &&
                    (safe || (is_post && surely_unsent(&r)) ||
                     (is_post && r.transport_error != CURLE_OPERATION_TIMEDOUT));
        } else if (r.status == 429 || (r.status >= 500 && r.status != 501)) {
            snprintf(causebuf, sizeof causebuf, "HTTP %ld %s", r.status, reason_for(r.status));
            cause = causebuf;
            /* 429 is a refusal before the request was processed: safe for POST. */
            retry = safe || r.status == 429;
        }
        if (!retry || attempt >= max) {
            if (cause && attempt > 1)
                log_warn("kube: %s %s: giving up after %d attempts (%s)", method, path0, attempt,
                         cause);
            break;
        }
        double delay = 0.2 * pow(2, attempt - 1);
        if (delay > MAX_RETRY_SLEEP)
            delay = MAX_RETRY_SLEEP;
        delay *= jitter();
        if (rc == 0 && r.retry_after >= 0)
            delay = r.retry_after < MAX_RETRY_SLEEP ? r.retry_after : MAX_RETRY_SLEEP;
        double spent = now_mono() - start;
        if (spent + delay > opts.o.retry_budget || delay >= sandbox_remaining(L)) {
            log_warn("kube: %s %s: no time left to retry (%s)", method, path0, cause);
            break;
        }
        log_warn("kube: retrying %s %s after %s (attempt %d/%d, waiting %.2fs)", method, path0,
                 cause, attempt + 1, max, delay);
        http_response_free(&r);
        if (is_post && rc != 0)
            post_retried = 1;
        sleep_s(delay);
    }
    free(body);

    if (r.transport_error) {
        push_error(L, 0, r.transport_error == CURLE_OPERATION_TIMEDOUT ? "Timeout" : "ConnectionError",
                   r.error, NULL, verb, method, path0);
        http_response_free(&r);
        lua_pushnil(L);
        lua_insert(L, -2);
        return 2;
    }
    if (r.status < 200 || r.status >= 300) {
        push_status_error(L, &r, verb, method, path0);
        if (post_retried && r.status == 409) {
            /* The first POST may have landed before the connection broke:
             * the caller resolves AlreadyExists by reading the object. */
            lua_pushboolean(L, 1);
            lua_setfield(L, -2, "after_retry");
        }
        http_response_free(&r);
        lua_pushnil(L);
        lua_insert(L, -2);
        return 2;
    }
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, r.status);
    lua_setfield(L, -2, "status");
    if (r.len) {
        cJSON *j = strstr(r.content_type, "json") ? cJSON_ParseWithLength(r.body, r.len) : NULL;
        if (j) {
            ljson_push(L, j);
            cJSON_Delete(j);
        } else {
            lua_pushlstring(L, r.body, r.len);
        }
        lua_setfield(L, -2, "body");
    }
    http_response_free(&r);
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
    struct http_response r;
    cJSON *j = NULL;
    for (int attempt = 1; attempt <= 3; attempt++) {
        double left = sandbox_remaining(L);
        double tmo = left < 30 ? (left > 0.001 ? left : 0.001) : 30;
        int rc = http_request(c->http, "GET", path, accept, NULL, NULL, 0, tmo, &r);
        if (rc == 0 && r.status >= 200 && r.status < 300) {
            j = cJSON_ParseWithLength(r.body, r.len);
            http_response_free(&r);
            if (!j)
                push_error(L, 0, "InvalidResponse", "discovery document is not JSON", NULL,
                           "discovery", "GET", path);
            return j;
        }
        int again = (rc != 0 && retryable_transport(r.transport_error)) ||
                    (rc == 0 && (r.status == 429 || r.status >= 500));
        if (!again || attempt == 3)
            break;
        log_warn("kube: retrying discovery GET %s (%s)", path,
                 rc ? r.error : reason_for(r.status));
        http_response_free(&r);
        sleep_s(0.2 * attempt);
    }
    if (r.transport_error)
        push_error(L, 0, "ConnectionError", r.error, NULL, "discovery", "GET", path);
    else
        push_status_error(L, &r, "discovery", "GET", path);
    http_response_free(&r);
    return NULL;
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
    sleep_s(s);
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
    lua_pushinteger(L, c->http ? http_connects(c->http) : 0);
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
    cJSON *d = kubeconfig_describe(&c->cfg);
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
    lua_pushstring(L, c && c->cfg.namespace && *c->cfg.namespace ? c->cfg.namespace : "default");
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

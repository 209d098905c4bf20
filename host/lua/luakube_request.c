/* luakube_request.c: the one request function under every kube verb, a thin
 * caller of the door (door/door.h) that a shell migration's gateway passes
 * too. Owns, for each request a script makes: reading and checking the
 * request table (fixed lists for the method and the headers, the query
 * from escaped values that never name dryRun), the request's C memory
 * boxed while Lua code that may raise runs, requests in flight together
 * for fleet.each (the pool), and turning the door's verdicts and answers
 * into Lua values and raised errors. The judgement itself (the guard, dry
 * run, the deadline, what is safe to repeat, the journal and the dry-run
 * report) is the door's. Must never send a request that did not pass the
 * door, nor let a script reach the ledger. */
#include "lua/luakube_int.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/defaults.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/util.h"
#include "client/apipath.h"
#include "door/door.h"
#include "client/pace.h"
#include "lua/luakube.h"
#include "lua/luajson.h"

/* Writes each line of text (newline-separated) as the migration's own
 * output: what the dry run would change belongs with what the script
 * printed. */
static void luakube_say_lines(const char *text)
{
    for (const char *p = text; *p;) {
        size_t n = strcspn(p, "\n");
        out_line("%.*s", (int)n, p);
        p += n + (p[n] == '\n');
    }
}

/* ---- requests ---------------------------------------------------------- */

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
static int append_query(struct buf *b, lua_State *L, int qidx)
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
        apipath_add_query(b, lua_tostring(L, -2), v);
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

void luakube_req_release(struct req *q)
{
    cJSON_free(q->body);
    cJSON_Delete(q->jbody);
    cJSON_Delete(q->before);
    buf_release(&q->path);
    free(q->jpath);
    if (q->have_res)
        rest_result_free(&q->res);
    memset(q, 0, sizeof *q);
}

static int req_gc(lua_State *L)
{
    luakube_req_release(luaL_checkudata(L, 1, REQ_MT));
    return 0;
}

/* Pushes a new, empty box. May raise (memory). */
struct req *luakube_req_box(lua_State *L)
{
    /* its user value: the thread waiting for its answer, while in the pool */
    struct req *q = lua_newuserdatauv(L, sizeof *q, 1);
    memset(q, 0, sizeof *q);
    ljson_box_metatable(L, REQ_MT, req_gc);
    return q;
}

/* ---- the wire ---------------------------------------------------------- */

/* This state's view of the door (door/door.h): its options, deadline,
 * connection and journal; a dry run's report goes with the script's own
 * output. */
static struct door door_of(struct host_ctx *hc, struct kube_client *c)
{
    struct door d = {&hc->kube, hc->deadline, c->rest, &c->journal, luakube_say_lines};
    return d;
}

/* A GET the host makes for itself (discovery, a read before a write),
 * through the same door. NULL with err filled when it failed or was not
 * sent. */
cJSON *luakube_get_json(struct host_ctx *hc, struct kube_client *c, const char *path,
                     const char *accept, struct rest_error *err)
{
    struct door d = door_of(hc, c);
    return door_get_json(&d, path, accept, err);
}

/* A request the door refused, raised: a guard refusal as a kube error
 * value (LedgerProtected, DryRunRefused), the deadline as the sandbox's own
 * timeout. In a preview a dry run's refusal makes the migration
 * unpredictable, not failed. */
static int raise_refusal(lua_State *L, const struct host_ctx *hc, struct kube_client *c,
                         enum door_rc rc,
                         enum guard_verdict gv, const char *why, const char *verb,
                         const char *method, const char *path)
{
    if (rc == DOOR_LATE)
        return luaL_error(L, "timeout: the migration ran past its deadline");
    if (rc == DOOR_NOMEM)
        return luaL_error(L, "kube: out of memory");
    char msg[700];
    if (gv == GUARD_BAD_PATH)
        return luaL_error(L, "kube.%s: %s", verb ? verb : "request", why);
    if (gv == GUARD_DRY_RUN) {
        snprintf(msg, sizeof msg, "%s %s: %s", method, path, why);
        if (hc->overlay_path)
            luakube_note_unpredictable(c, msg);
        luakube_push_error(L, 0, "DryRunRefused", msg, NULL, verb, method, path);
        return lua_error(L);
    }
    const char *reason = door_refusal(rc, gv, why, msg, sizeof msg);
    luakube_push_error(L, 0, reason, msg, NULL, verb, method, path);
    return lua_error(L);
}

/* The request table at index 1 as the script gave it. */
struct asked {
    const char *method, *path, *verb, *ctype, *accept;
    int mutating;
    int safe;                   /* may be repeated (idempotent) */
};

/* Reads and checks the request table: fixed lists for the method and the
 * headers, so no text of a script's own reaches a request line. Returns 0;
 * may raise (misuse). */
static int read_asked(lua_State *L, struct asked *a)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    const char *method = a->method = opt_field(L, 1, "method");
    const char *verb = a->verb = opt_field(L, 1, "verb");
    const char *ctype = a->ctype = opt_field(L, 1, "content_type");
    const char *accept = a->accept = opt_field(L, 1, "accept");
    a->path = opt_field(L, 1, "path");
    if (!method || !a->path)
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
    a->mutating = strcmp(method, "GET") != 0;
    a->safe = idem_given ? idem : (strcmp(method, "POST") != 0 && strcmp(method, "PUT") != 0);
    return 0;
}

/* The body into q: a table is encoded here (never built from strings by
 * scripts). Returns its length. May raise (memory, a value JSON cannot
 * hold). */
static size_t read_body(lua_State *L, struct req *q, const char *verb)
{
    size_t body_len = 0;
    lua_getfield(L, 1, "body");
    int bidx = lua_gettop(L);
    if (lua_istable(L, bidx) || ljson_isnull(L, bidx)) {
        char err[640];
        if (!(q->jbody = ljson_to_cjson(L, bidx, err, sizeof err)))
            return (size_t)luaL_error(L, "kube.%s: %s", verb ? verb : "request", err);
        if (!(q->body = cJSON_PrintUnformatted(q->jbody)))
            return (size_t)luaL_error(L, "kube: out of memory");
        body_len = strlen(q->body);
    } else if (lua_type(L, bidx) == LUA_TSTRING) {
        /* Only the request layer's own callers pass strings (e.g. a JSON
         * patch already encoded by json.encode). */
        const char *s = lua_tolstring(L, bidx, &body_len);
        if (!(q->body = cJSON_malloc(body_len + 1)))
            return (size_t)luaL_error(L, "kube: out of memory");
        memcpy(q->body, s, body_len + 1);
    }
    lua_pop(L, 1);
    return body_len;
}

/* What a sent request's answer makes of it, whichever way it went out: the
 * dry run's report, the journal entry (a write's, in the order answers
 * arrive), the preview's overlay, and the Lua result (an error value, or
 * {status=, body=}) left on top of the box at index box. May raise. */
static int request_answer(lua_State *L, struct host_ctx *hc, struct kube_client *c,
                          struct req *q, const struct asked *a, int rc, struct overlay *ov,
                          int qidx, int box)
{
    const char *method = a->method, *path0 = a->path, *verb = a->verb;
    struct door d = door_of(hc, c);
    struct door_prior prior = {.before = q->before};
    snprintf(prior.rv_before, sizeof prior.rv_before, "%s", q->rv_before);
    size_t changed = c->journal.log->changed;
    door_after(&d, method, verb, path0, rc == 0, rc == 0 ? q->res.status : q->res.err.code,
               rc == 0 ? q->res.json : NULL, &prior);
    /* entry first, then the pending count down: a kill between the two
     * counts the write twice (once unknown), never not at all */
    if (a->mutating)
        journal_pending(&c->journal, -1);
    if (c->journal.log->changed > changed)
        luakube_count_change(L);
    if (rc == 0 && ov && luakube_preview_after(L, c, ov, q, method, path0, qidx) != 0)
        return lua_error(L);
    if (rc != 0) {
        lua_pushnil(L);
        luakube_push_rest_error(L, &q->res.err, verb, method, path0);
        luakube_req_release(q);
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
        luakube_push_json(L, q->res.json);
    } else if (q->res.len)
        lua_pushlstring(L, q->res.body, q->res.len);
    else
        lua_pushnil(L);
    lua_setfield(L, -2, "body");
    luakube_req_release(q);
    lua_replace(L, box);
    lua_settop(L, box);
    return 1;
}

/* ---- requests in flight together (fleet.each) -------------------------- */

/* Registry keys: WORKERS, a weak-keyed set of the threads whose requests go
 * to the pool (core.adopt); PENDING, box pointer -> the box waiting for
 * that request's answer (its user value: the thread). Its address is also
 * the value a waiting thread yields, so whoever resumes it can tell that
 * yield from a script's own. */
static const char WORKERS_KEY = 'w';
static const char PENDING_KEY = 'q';
static const char SLEEPING_KEY = 's';

int luakube_adopted(lua_State *L)
{
    if (!lua_isyieldable(L))
        return 0;
    lua_rawgetp(L, LUA_REGISTRYINDEX, &WORKERS_KEY);
    if (!lua_istable(L, -1)) {
        lua_pop(L, 1);
        return 0;
    }
    lua_pushthread(L);
    int adopted = lua_rawget(L, -2) != LUA_TNIL;
    lua_pop(L, 2);
    return adopted;
}

void luakube_push_sleeping(lua_State *L) { lua_pushlightuserdata(L, (void *)&SLEEPING_KEY); }

/* Whether this request goes to the pool: the running thread was adopted,
 * can yield, and the pool exists or can be made. */
/* core.pace's settings onto the pool. */
static void apply_pace(struct kube_client *c)
{
    const struct kube_client *s = c->home ? c->home : c; /* a tenant's pool: its home's pace */
    if (!c->pool || s->pace_ceiling <= 0)
        return;
    rest_pool_pace(c->pool, s->pace_ceiling, s->pace_adapt);
    for (int i = 0; i < s->pace_nexempt; i++)
        pace_exempt(rest_pool_pace_of(c->pool), s->pace_exempt[i]);
}

static int pooled(lua_State *L, struct kube_client *c)
{
    int adopted = luakube_adopted(L);
    if (adopted && !c->pool && (c->pool = rest_pool_new(c->rest)))
        apply_pace(c);
    return adopted && c->pool;
}

/* The continuation of a request a thread waited for in the pool: its
 * answer is in the box (core.await put it there). May raise. */
static int request_resumed(lua_State *L, int status, lua_KContext ctx)
{
    (void)status;
    int box = (int)ctx;
    lua_settop(L, box + 1); /* what resumed it passed nothing we read */
    struct req *q = luaL_checkudata(L, box, REQ_MT);
    if (!q->have_res) {
        /* resumed by someone other than core.await, before the answer
         * came: it goes on waiting */
        lua_pushlightuserdata(L, (void *)&PENDING_KEY);
        return lua_yieldk(L, 1, ctx, request_resumed);
    }
    struct asked a = {0};
    read_asked(L, &a);
    struct host_ctx *hc = host_ctx(L);
    struct kube_client *c = q->owner ? q->owner : luakube_client_of(L);
    return request_answer(L, hc, c, q, &a, q->pool_rc, NULL, box + 1, box);
}

/* core.adopt(co): co's requests go to the pool; each one makes co yield
 * core.PENDING until core.await hands its answer back. May raise. */
int luakube_l_adopt(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTHREAD);
    luakube_push_weak_table(L, &WORKERS_KEY);
    lua_pushvalue(L, 1);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
    return 0;
}

/* core.await([max_s]) -> co | false | nil: waits for the next request in
 * the pool to be answered (or to fail after its retries), puts the answer
 * in its box and returns the thread to resume; false when max_s seconds
 * passed first (a sleeping thread's turn), nil when nothing is in flight.
 * May raise (memory). */
/* The pools with requests in flight (the home client's and its
 * tenants'), at most max, into busy; how many. */
static int busy_pools(struct kube_client *home, struct rest_pool **busy, int max)
{
    int n = 0;
    for (struct kube_client *c = home; c && n < max; c = c == home ? home->tenants : c->next)
        if (c->pool && rest_pool_busy(c->pool) > 0)
            busy[n++] = c->pool;
    return n;
}

/* The next answer of any busy pool, within max_s (timed) or until one
 * comes: with one pool busy, that pool's own wait; with several, each
 * moved on in turn, waiting on one a few milliseconds at a time. 1 with
 * the answer, 0 when none came in time. */
#define AWAIT_SLICE_S 0.002
static int next_answer(struct kube_client *home, int timed, double max_s, void **tag, int *rc,
                       struct rest_result *res)
{
    struct rest_pool *busy[64];
    double end = now_mono() + (max_s > 0 ? max_s : 0);
    for (;;) {
        int n = busy_pools(home, busy, 64);
        if (n == 0)
            return 0;
        if (n == 1)
            return timed ? rest_pool_next_within(busy[0], end - now_mono() > 0 ? end - now_mono() : 0,
                                                 tag, rc, res)
                         : rest_pool_next(busy[0], tag, rc, res);
        for (int i = 0; i < n; i++)
            if (rest_pool_collect(busy[i], tag, rc, res))
                return 1;
        double left = timed ? end - now_mono() : AWAIT_SLICE_S;
        if (left <= 0)
            return 0;
        if (rest_pool_next_within(busy[0], left < AWAIT_SLICE_S ? left : AWAIT_SLICE_S, tag, rc, res))
            return 1;
    }
}

int luakube_l_await(lua_State *L)
{
    struct kube_client *c = luakube_client_of(L);
    void *tag = NULL;
    int rc = 0;
    struct rest_result res;
    int timed = !lua_isnoneornil(L, 1);
    double max_s = timed ? luaL_checknumber(L, 1) : 0;
    struct rest_pool *busy[1];
    if (!c || busy_pools(c, busy, 1) == 0) {
        lua_pushnil(L);
        return 1;
    }
    if (!next_answer(c, timed, max_s, &tag, &rc, &res)) {
        if (busy_pools(c, busy, 1) == 0)
            lua_pushnil(L);
        else
            lua_pushboolean(L, 0);
        return 1;
    }
    lua_rawgetp(L, LUA_REGISTRYINDEX, &PENDING_KEY);
    if (lua_rawgetp(L, -1, tag) != LUA_TUSERDATA || lua_touserdata(L, -1) != tag) {
        rest_result_free(&res);
        return luaL_error(L, "kube: an answer came back for a request nobody waits for");
    }
    struct req *q = tag;
    q->res = res;
    q->have_res = 1;
    q->pool_rc = rc;
    lua_getiuservalue(L, -1, 1); /* the thread */
    lua_pushnil(L);
    lua_rawsetp(L, -4, tag);
    return 1;
}

/* core.pace(ceiling, adapt [, exempt]): from now on the pool keeps at most
 * ceiling requests on the wire, under pace.h's adaptive bound when adapt;
 * exempt: a list of the UIDs of the Exempt priority levels (pace_exempt).
 * May raise (a bad argument). */
int luakube_l_pace(lua_State *L)
{
    struct kube_client *c = luakube_client_of(L);
    lua_Integer n = luaL_checkinteger(L, 1);
    luaL_argcheck(L, n >= 1 && n <= REST_POOL_MAX, 1, "a whole number from 1 to 64");
    if (!lua_isnoneornil(L, 3))
        luaL_checktype(L, 3, LUA_TTABLE);
    if (!c)
        return 0;
    c->pace_ceiling = (int)n;
    c->pace_adapt = lua_toboolean(L, 2);
    c->pace_nexempt = 0;
    for (lua_Integer i = 1; lua_istable(L, 3) && c->pace_nexempt < PACE_EXEMPT_MAX; i++) {
        if (lua_rawgeti(L, 3, i) != LUA_TSTRING) {
            lua_pop(L, 1);
            break;
        }
        snprintf(c->pace_exempt[c->pace_nexempt], sizeof c->pace_exempt[0], "%s", lua_tostring(L, -1));
        c->pace_nexempt++;
        lua_pop(L, 1);
    }
    apply_pace(c);
    return 0;
}

/* core.pace_seen() -> {ceiling=, window=, low=, high=, answers=,
 * throttled=, cuts=, level=} | nil (no request went through the pool). */
int luakube_l_pace_seen(lua_State *L)
{
    struct kube_client *c = luakube_client_of(L);
    if (!c || !c->pool) {
        lua_pushnil(L);
        return 1;
    }
    const struct pace *p = rest_pool_pace_seen(c->pool);
    lua_createtable(L, 0, 8);
    lua_pushinteger(L, p->ceiling);
    lua_setfield(L, -2, "ceiling");
    lua_pushinteger(L, pace_allowed(p));
    lua_setfield(L, -2, "window");
    lua_pushinteger(L, p->low);
    lua_setfield(L, -2, "low");
    lua_pushinteger(L, p->high);
    lua_setfield(L, -2, "high");
    lua_pushinteger(L, (lua_Integer)p->answers);
    lua_setfield(L, -2, "answers");
    lua_pushinteger(L, (lua_Integer)p->throttled);
    lua_setfield(L, -2, "throttled");
    lua_pushinteger(L, (lua_Integer)p->cuts);
    lua_setfield(L, -2, "cuts");
    lua_pushboolean(L, p->adapt);
    lua_setfield(L, -2, "adapt");
    lua_pushboolean(L, p->exempt_seen);
    lua_setfield(L, -2, "exempt");
    if (*p->level) {
        lua_pushstring(L, p->level);
        lua_setfield(L, -2, "level");
    }
    return 1;
}

static void settle_pool(struct host_ctx *hc, struct kube_client *c, double end)
{
    struct door d = door_of(hc, c);
    void *tag;
    int rc;
    struct rest_result res;
    while (rest_pool_next_within(c->pool, end - now_mono(), &tag, &rc, &res)) {
        /* the box is alive: core.PENDING holds it until the state closes */
        struct req *q = tag;
        if (q && q->jpath) {
            struct door_prior prior = {.before = q->before};
            snprintf(prior.rv_before, sizeof prior.rv_before, "%s", q->rv_before);
            door_after(&d, q->jmethod, *q->jverb ? q->jverb : NULL, q->jpath, rc == 0,
                       rc == 0 ? res.status : res.err.code, rc == 0 ? res.json : NULL, &prior);
            journal_pending(&c->journal, -1);
        }
        rest_result_free(&res);
    }
}

void luakube_settle(lua_State *L)
{
    struct kube_client *home = luakube_client_of(L);
    struct host_ctx *hc = host_ctx(L);
    if (!home || !hc)
        return;
    double end = now_mono() + KUBE_SETTLE_S;
    for (struct kube_client *c = home; c; c = c == home ? home->tenants : c->next)
        if (c->pool)
            settle_pool(hc, c, end);
}

/* Pushes core.PENDING (the value a thread waiting in the pool yields). */
void luakube_push_pending(lua_State *L)
{
    lua_pushlightuserdata(L, (void *)&PENDING_KEY);
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &PENDING_KEY) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &PENDING_KEY);
    } else
        lua_pop(L, 1);
}

/* request{method=, path=, query=, body=, content_type=, accept=, verb=,
 *         idempotent=} -> {status=, body=} | nil, err
 * Not a function of kube.core: only stdlib/kube.lua receives it (see
 * luakube_push_private), so a migration reaches the API through the verbs alone.
 * May raise: for misuse, for a write to the ledger, and on memory. */
int luakube_l_request(lua_State *L)
{
    struct host_ctx *hc = host_ctx(L);
    struct kube_client *kc = luakube_client_here(L);
    struct asked a = {0};
    read_asked(L, &a);
    const char *method = a.method, *path0 = a.path, *verb = a.verb, *ctype = a.ctype;
    int mutating = a.mutating;
    struct req *q = luakube_req_box(L);
    int box = lua_gettop(L);
    size_t body_len = read_body(L, q, verb);
    /* The guard judges the path and body as the script asked for them
     * before anything is resolved or connected (the query is appended after
     * it, from escaped values with no dryRun); door_send judges again what is
     * finally sent, which the preview may have rewritten. */
    char why[512];
    enum guard_verdict gv = door_judge(&hc->kube, method, path0, q->body, body_len,
                                       q->body && !ctype ? "application/json" : ctype, why,
                                       sizeof why);
    if (gv != GUARD_ALLOW)
        return raise_refusal(L, hc, kc, DOOR_REFUSED, gv, why, verb, method, path0);

    /* path + the caller's query + dryRun */
    struct buf *pb = &q->path;
    buf_adds(pb, path0);
    lua_getfield(L, 1, "query");
    int qidx = lua_gettop(L);
    if (append_query(pb, L, qidx) != 0)
        return luaL_error(L, "kube: query keys are API parameter names (never dryRun) and values "
                          "strings, numbers or booleans");
    /* The query table stays on the stack: the preview reads its selectors. */
    if (mutating && hc->kube.dry_run)
        apipath_add_query(pb, "dryRun", "All");
    if (pb->failed)
        return luaL_error(L, "kube: out of memory");

    struct kube_client *c = luakube_connect(kc, hc);
    if (!c) {
        luakube_req_release(q);
        lua_pushnil(L);
        luakube_push_error(L, 0, "ConfigError", kc->init_err, NULL, verb, method, path0);
        return 2;
    }
    if (q->body && !ctype)
        ctype = "application/json";
    struct overlay *ov = NULL;
    /* the overlay is the management cluster's: a tenant's writes go as plain dry runs */
    if (hc->overlay_path && !c->home) {
        char oerr[512];
        if (!c->overlay && !(c->overlay = overlay_load(hc->overlay_path, oerr, sizeof oerr)))
            return luaL_error(L, "kube: preview: %s", oerr);
        ov = c->overlay;
    }
    struct send snd = {method, ctype, body_len, a.safe};
    const cJSON *held = NULL;
    if (ov) {
        int r = luakube_preview_before(L, c, q, &snd, path0, verb, &held);
        if (r >= 0) {
            luakube_req_release(q);
            return r; /* the top r values: what the overlay answered */
        }
    }
    /* What the object was before a write: in dry run, for the report of the
     * fields it would change; otherwise, for the journal to tell a change
     * from a no-op. */
    struct door d = door_of(hc, c);
    struct door_prior prior;
    door_prior_read(&d, method, path0, q->jbody, held, &prior);
    q->before = prior.before; /* the box owns it from here */
    snprintf(q->rv_before, sizeof q->rv_before, "%s", prior.rv_before);
    /* PUT is idempotent only with a resourceVersion (the caller says so). */
    struct door_req w = {snd.method, q->path.p, a.accept, snd.ctype, q->body, snd.body_len,
                         snd.safe, NULL, 0};
    if (!ov && pooled(L, c)) {
        struct door_out o;
        enum door_rc wrc = door_ready(&d, &w, &o, &gv, why, sizeof why);
        if (wrc != DOOR_OK)
            return raise_refusal(L, hc, c, wrc, gv, why, verb, snd.method, path0);
        if (mutating) {
            if (!(q->jpath = strdup(path0))) {
                door_out_free(&o);
                return luaL_error(L, "kube: out of memory");
            }
            snprintf(q->jmethod, sizeof q->jmethod, "%s", w.method);
            snprintf(q->jverb, sizeof q->jverb, "%s", verb ? verb : "");
            /* from here a write may land: counted until its answer is
             * journaled (luakube_settle, if the script ends first) */
            journal_pending(&c->journal, 1);
        }
        q->owner = c;
        int sub = rest_pool_submit(c->pool, w.method, o.path, w.accept, w.ctype, o.body,
                                   o.body_len, w.safe, o.left, q);
        door_out_free(&o);
        if (sub != 0 && mutating)
            journal_pending(&c->journal, -1); /* not sent: it goes out alone below */
        if (sub == 0) {
            /* PENDING keeps the box (and through it the waiting thread)
             * until core.await puts the answer in it: the pool writes into
             * no box that could have been collected meanwhile. */
            lua_pushthread(L);
            lua_setiuservalue(L, box, 1);
            lua_rawgetp(L, LUA_REGISTRYINDEX, &PENDING_KEY);
            lua_pushvalue(L, box);
            lua_rawsetp(L, -2, q);
            lua_pop(L, 1);
            lua_pushlightuserdata(L, (void *)&PENDING_KEY);
            return lua_yieldk(L, 1, (lua_KContext)box, request_resumed);
        }
        /* the pool is full or out of memory: this one goes out alone */
    }
    if (mutating)
        journal_pending(&c->journal, 1); /* may land from here (door_send) */
    enum door_rc wrc = door_send(&d, &w, &q->res, &gv, why, sizeof why);
    q->have_res = 1;
    if (wrc != DOOR_OK && wrc != DOOR_FAILED) {
        if (mutating)
            journal_pending(&c->journal, -1); /* not sent */
        return raise_refusal(L, hc, c, wrc, gv, why, verb, snd.method, path0);
    }
    return request_answer(L, hc, c, q, &a, wrc == DOOR_OK ? 0 : -1, ov, qidx, box);
}

/* migrate_lua.c: the `migrate` Lua module, the runner's own parsers and
 * planner exposed to specs and tools (never to migrations: the sandbox does
 * not offer it). Owns only the conversion between Lua values and the C
 * structures; every rule stays in header.c, manifest.c, record.c, tree.c,
 * plan.c and pace.c, so a spec tests the code the runner runs. */
#include "run/migrate_lua.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/defaults.h"
#include "door/guard.h"
#include "client/pace.h"
#include "formats/header.h"
#include "formats/ledgerdoc.h"
#include "lua/luajson.h"
#include "lua/sandbox.h"
#include "formats/manifest.h"
#include "run/plan.h"
#include "formats/record.h"
#include "formats/tree.h"
#include "base/util.h"

static int fail(lua_State *L, const char *err)
{
    lua_pushnil(L);
    lua_pushstring(L, err);
    return 2;
}

/* fail, with a parser's buffer released */
static int fail_buf(lua_State *L, struct buf *err)
{
    lua_pushnil(L);
    lua_pushstring(L, buf_str(err));
    buf_release(err);
    return 2;
}

/* header(text, name [, lua=true]) -> {on_error=, requires={}, timeout=} | nil, err */
static int l_header(lua_State *L)
{
    size_t len;
    const char *text = luaL_checklstring(L, 1, &len);
    const char *name = luaL_optstring(L, 2, "script.lua");
    int lua = lua_isnoneornil(L, 3) ? 1 : lua_toboolean(L, 3);
    struct header h;
    char err[512];
    if (header_parse(name, text, len, lua, &h, err, sizeof err) != 0)
        return fail(L, err);
    lua_createtable(L, 0, 3);
    lua_pushstring(L, header_on_error_name(h.on_error));
    lua_setfield(L, -2, "on_error");
    lua_createtable(L, (int)h.nrequires, 0);
    for (size_t i = 0; i < h.nrequires; i++) {
        lua_pushstring(L, h.requires[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "requires");
    if (h.timeout > 0) {
        lua_pushnumber(L, h.timeout);
        lua_setfield(L, -2, "timeout");
    }
    header_free(&h);
    return 1;
}

/* batch(name, text) -> {{slug=, retired=, line=}, ...} | nil, err */
static int l_batch(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    size_t len;
    const char *text = luaL_checklstring(L, 2, &len);
    struct batch b;
    char path[300];
    struct buf err = BUF_INIT;
    snprintf(path, sizeof path, "order.d/%s", name);
    if (manifest_parse_batch(name, path, text, len, &b, &err) != 0)
        return fail_buf(L, &err);
    lua_createtable(L, (int)b.n, 0);
    for (size_t i = 0; i < b.n; i++) {
        lua_createtable(L, 0, 3);
        lua_pushstring(L, b.e[i].slug);
        lua_setfield(L, -2, "slug");
        lua_pushboolean(L, b.e[i].retired);
        lua_setfield(L, -2, "retired");
        lua_pushinteger(L, b.e[i].line);
        lua_setfield(L, -2, "line");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    for (size_t i = 0; i < b.n; i++)
        free(b.e[i].slug);
    free(b.e);
    free(b.name);
    free(b.path);
    return 1;
}

/* revoked(text) -> {slug, ...} | nil, err */
static int l_revoked(lua_State *L)
{
    size_t len;
    const char *text = luaL_checklstring(L, 1, &len);
    struct slug_list sl;
    struct buf err = BUF_INIT;
    if (revoked_parse("revoked", text, len, &sl, &err) != 0)
        return fail_buf(L, &err);
    lua_createtable(L, (int)sl.n, 0);
    for (size_t i = 0; i < sl.n; i++) {
        lua_pushstring(L, sl.slug[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    slug_list_free(&sl);
    return 1;
}

/* legacy_map(text) -> {{number=, slug=}, ...} | nil, err */
static int l_legacy_map(lua_State *L)
{
    size_t len;
    const char *text = luaL_checklstring(L, 1, &len);
    struct legacy_map m;
    struct buf err = BUF_INIT;
    if (legacy_map_parse("legacy-map", text, len, &m, &err) != 0)
        return fail_buf(L, &err);
    lua_createtable(L, (int)m.n, 0);
    for (size_t i = 0; i < m.n; i++) {
        lua_createtable(L, 0, 2);
        lua_pushinteger(L, m.e[i].number);
        lua_setfield(L, -2, "number");
        lua_pushstring(L, m.e[i].slug);
        lua_setfield(L, -2, "slug");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    legacy_map_free(&m);
    return 1;
}

/* Pushes a record as the table its wire JSON decodes to (its tree, never
 * printed and parsed). May raise; r is the caller's either way. */
static void push_record(lua_State *L, const struct record *r)
{
    struct ljson_box *box = ljson_box(L);
    if (!(box->json = record_json(r))) {
        luaL_error(L, "out of memory");
        return;
    }
    ljson_push(L, box->json);
    ljson_box_free(box);
    lua_remove(L, -2);
}

/* record(text) -> {state=, attempts=, ...} | nil, problem */
static int l_record(lua_State *L)
{
    size_t len;
    const char *text = luaL_checklstring(L, 1, &len);
    /* the box first: it may raise, and r owns nothing yet */
    struct ljson_box *box = ljson_box(L);
    struct record r;
    if (record_parse(text, len, &r) != 0) {
        lua_pushnil(L);
        lua_pushstring(L, r.problem);
        return 2;
    }
    box->json = record_json(&r);
    record_free(&r);
    if (!box->json)
        return luaL_error(L, "out of memory");
    ljson_push(L, box->json);
    ljson_box_free(box);
    lua_remove(L, -2);
    return 1;
}

static void push_string_or_nil(lua_State *L, const char *s)
{
    if (s)
        lua_pushstring(L, s);
    else
        lua_pushnil(L);
}

/* plan(dir, data, opts) -> plan table | nil, err
 * dir: a tree on disk; data: the ledger's data map (nil = absent ledger);
 * opts: {tier=, only=, force=, skip={slug...}, skip_reason=, skip_only=,
 * max_attempts=, image=}. */
static int l_plan(lua_State *L)
{
    const char *dir = luaL_checkstring(L, 1);
    char err[2048];
    struct tree t;
    if (tree_load(dir, &t, err, sizeof err) != 0)
        return fail(L, err);
    struct ledger l;
    memset(&l, 0, sizeof l);
    if (!lua_isnoneornil(L, 2)) {
        lua_createtable(L, 0, 1);
        lua_pushvalue(L, 2);
        lua_setfield(L, -2, "data");
        cJSON *cm = ljson_to_cjson(L, -1, err, sizeof err);
        lua_pop(L, 1);
        struct buf perr = BUF_INIT;
        if (!cm || ledger_parse(cm, &l, &perr) != 0) {
            cJSON_Delete(cm);
            tree_free(&t);
            lua_pushstring(L, cm ? buf_str(&perr) : err);
            buf_release(&perr);
            return fail(L, lua_tostring(L, -1));
        }
        cJSON_Delete(cm);
    }
    struct plan_opts po = {.tier = "pre-apply", .now = "2026-01-01T00:00:00Z"};
    const char *skip[16];
    if (lua_istable(L, 3)) {
        lua_getfield(L, 3, "tier");
        lua_getfield(L, 3, "only");
        lua_getfield(L, 3, "max_attempts");
        lua_getfield(L, 3, "image");
        if (lua_isstring(L, -4))
            po.tier = lua_tostring(L, -4);
        po.only = lua_tostring(L, -3);
        po.max_attempts = (int)lua_tointeger(L, -2);
        po.image = lua_tostring(L, -1);
        lua_getfield(L, 3, "force");
        lua_getfield(L, 3, "skip_only");
        lua_getfield(L, 3, "skip_reason");
        po.force = lua_toboolean(L, -3);
        po.skip_only = lua_toboolean(L, -2);
        po.skip_reason = lua_tostring(L, -1);
        lua_getfield(L, 3, "installed_at");
        po.installed_at = lua_tostring(L, -1);
        /* skip = {slug, ...}: the strings stay on the stack while planning */
        lua_getfield(L, 3, "skip");
        if (lua_istable(L, -1)) {
            lua_Integer n = luaL_len(L, -1);
            for (lua_Integer i = 1; i <= n && po.nskip < sizeof skip / sizeof skip[0]; i++) {
                lua_rawgeti(L, -1, i);
                skip[po.nskip++] = luaL_checkstring(L, -1);
                lua_insert(L, -2);
            }
            po.skip = skip;
        }
    }
    struct plan p;
    if (plan_build(&t, &l, &po, &p) != 0) {
        ledger_free(&l);
        tree_free(&t);
        return luaL_error(L, "out of memory");
    }
    lua_createtable(L, 0, 8);
    lua_pushboolean(L, p.fresh_install);
    lua_setfield(L, -2, "fresh_install");
    push_string_or_nil(L, *p.installed_at ? p.installed_at : NULL);
    lua_setfield(L, -2, "installed_at");
    lua_createtable(L, 0, (int)p.nseed);
    for (size_t i = 0; i < p.nseed; i++) {
        push_record(L, &p.seed[i].rec);
        lua_setfield(L, -2, p.seed[i].slug);
    }
    lua_setfield(L, -2, "seed");
    lua_pushinteger(L, p.refuse);
    lua_setfield(L, -2, "refuse");
    push_string_or_nil(L, p.refuse ? p.refuse_msg : NULL);
    lua_setfield(L, -2, "refuse_msg");
    lua_pushboolean(L, p.corrupt);
    lua_setfield(L, -2, "corrupt");
    lua_createtable(L, (int)p.nproblems, 0);
    for (size_t i = 0; i < p.nproblems; i++) {
        lua_pushstring(L, p.problems[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "problems");
    lua_createtable(L, (int)p.nwarnings, 0);
    for (size_t i = 0; i < p.nwarnings; i++) {
        lua_pushstring(L, p.warnings[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "warnings");
    lua_createtable(L, (int)p.n, 0);
    for (size_t i = 0; i < p.n; i++) {
        const struct step *s = &p.s[i];
        lua_createtable(L, 0, 6);
        lua_pushstring(L, step_kind_name(s->kind));
        lua_setfield(L, -2, "kind");
        lua_pushstring(L, s->slug);
        lua_setfield(L, -2, "slug");
        lua_pushstring(L, s->batch);
        lua_setfield(L, -2, "batch");
        lua_pushstring(L, s->tier);
        lua_setfield(L, -2, "tier");
        lua_pushstring(L, s->why);
        lua_setfield(L, -2, "why");
        lua_pushinteger(L, s->prev_attempts);
        lua_setfield(L, -2, "prev_attempts");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "steps");
    plan_free(&p);
    ledger_free(&l);
    tree_free(&t);
    return 1;
}

/* guard(method, path [, body [, content_type [, {ns=, ledger=, lease=, dry_run=}]]])
 * -> verdict ("allow", "LedgerProtected", "BadPath", "BadBody"), why */
static int l_guard(lua_State *L)
{
    const char *method = luaL_checkstring(L, 1);
    const char *path = luaL_checkstring(L, 2);
    size_t blen = 0;
    const char *body = luaL_optlstring(L, 3, NULL, &blen);
    const char *ct = luaL_optstring(L, 4, NULL);
    struct guard_target t = {DEFAULT_NAMESPACE, DEFAULT_LEDGER_NAME,
                             DEFAULT_LEDGER_NAME LEASE_SUFFIX, EVENT_COMPONENT, 0};
    if (lua_istable(L, 5)) {
        lua_getfield(L, 5, "ns");
        lua_getfield(L, 5, "ledger");
        lua_getfield(L, 5, "lease");
        lua_getfield(L, 5, "dry_run");
        if (lua_isstring(L, -4))
            t.ns = lua_tostring(L, -4);
        if (lua_isstring(L, -3))
            t.ledger = lua_tostring(L, -3);
        if (lua_isstring(L, -2))
            t.lease = lua_tostring(L, -2);
        t.dry_run = lua_toboolean(L, -1);
    }
    char why[512];
    enum guard_verdict v = guard_check(&t, method, path, body, blen, ct, why, sizeof why);
    lua_pushstring(L, guard_verdict_name(v));
    lua_pushstring(L, why);
    return 2;
}

/* guard_object(method, path, current_json) -> needs, verdict, why: whether
 * the write waits on the object it acts on, and the verdict given that
 * object as it is (a JSON text; nil: there is none), for the default
 * target. */
static int l_guard_object(lua_State *L)
{
    const char *method = luaL_checkstring(L, 1), *path = luaL_checkstring(L, 2);
    size_t len = 0;
    const char *text = luaL_optlstring(L, 3, NULL, &len);
    struct guard_target t = {DEFAULT_NAMESPACE, DEFAULT_LEDGER_NAME,
                             DEFAULT_LEDGER_NAME LEASE_SUFFIX, EVENT_COMPONENT, 0};
    cJSON *cur = text ? cJSON_ParseWithLength(text, len) : NULL;
    if (text && !cur)
        return luaL_error(L, "guard_object: the object is not JSON");
    char why[512];
    enum guard_verdict v = guard_check_object(&t, path, cur, why, sizeof why);
    cJSON_Delete(cur);
    lua_pushboolean(L, guard_needs_object(method, path));
    lua_pushstring(L, guard_verdict_name(v));
    lua_pushstring(L, why);
    return 3;
}

/* duration(text) -> seconds | nil (util.c's parse_duration, the one parser) */
static int l_duration(lua_State *L)
{
    double d;
    if (parse_duration(luaL_checkstring(L, 1), &d) != 0)
        lua_pushnil(L);
    else
        lua_pushnumber(L, d);
    return 1;
}

static double opt_number(lua_State *L, int t, const char *k, double dflt)
{
    lua_getfield(L, t, k);
    double v = lua_isnil(L, -1) ? dflt : luaL_checknumber(L, -1);
    lua_pop(L, 1);
    return v;
}

/* pace(ceiling, adapt, exempt_uids, answers) -> steps, summary: the sweep's
 * pace (client/pace.c) replayed over answers, each { sent = s, at = s,
 * status = n, status_body = bool (default true), retry_after = s (default
 * none), level = uid }; steps[i] = { allowed, window, throttle } after
 * answer i; summary = { low, high, cuts, throttled, answers }. May raise on
 * arguments of the wrong type. */
static int l_pace(lua_State *L)
{
    struct pace p;
    pace_init(&p, (int)luaL_checkinteger(L, 1), lua_toboolean(L, 2));
    luaL_checktype(L, 3, LUA_TTABLE);
    luaL_checktype(L, 4, LUA_TTABLE);
    for (lua_Integer i = 1; lua_geti(L, 3, i) != LUA_TNIL; i++) {
        pace_exempt(&p, luaL_checkstring(L, -1));
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    lua_newtable(L);
    for (lua_Integer i = 1; lua_geti(L, 4, i) != LUA_TNIL; i++) {
        int a = lua_gettop(L);
        luaL_checktype(L, a, LUA_TTABLE);
        lua_getfield(L, a, "status_body");
        int body = lua_isnil(L, -1) || lua_toboolean(L, -1);
        lua_getfield(L, a, "level");
        const char *level = lua_isnil(L, -1) ? NULL : luaL_checkstring(L, -1);
        int throttle = pace_answer(&p, opt_number(L, a, "sent", 0), opt_number(L, a, "at", 0),
                                   (long)opt_number(L, a, "status", 200), body,
                                   opt_number(L, a, "retry_after", -1), level);
        lua_pop(L, 3);
        lua_createtable(L, 0, 3);
        lua_pushinteger(L, pace_allowed(&p));
        lua_setfield(L, -2, "allowed");
        lua_pushnumber(L, p.window);
        lua_setfield(L, -2, "window");
        lua_pushboolean(L, throttle);
        lua_setfield(L, -2, "throttle");
        lua_seti(L, -2, i);
    }
    lua_pop(L, 1);
    lua_createtable(L, 0, 5);
    lua_pushinteger(L, p.low);
    lua_setfield(L, -2, "low");
    lua_pushinteger(L, p.high);
    lua_setfield(L, -2, "high");
    lua_pushinteger(L, (lua_Integer)p.cuts);
    lua_setfield(L, -2, "cuts");
    lua_pushinteger(L, (lua_Integer)p.throttled);
    lua_setfield(L, -2, "throttled");
    lua_pushinteger(L, (lua_Integer)p.answers);
    lua_setfield(L, -2, "answers");
    return 2;
}

/* slug_valid(s) -> boolean */
static int l_slug_valid(lua_State *L)
{
    lua_pushboolean(L, slug_valid(luaL_checkstring(L, 1)));
    return 1;
}

/* luacheck_std() -> text: the luacheck configuration lint runs with, made
 * from the sandbox's allow-list (sandbox_luacheck_std). */
static int l_luacheck_std(lua_State *L)
{
    char *text = sandbox_luacheck_std();
    if (!text)
        return luaL_error(L, "out of memory");
    lua_pushstring(L, text);
    free(text);
    return 1;
}

int luaopen_migrate(lua_State *L)
{
    static const luaL_Reg f[] = {
        {"luacheck_std", l_luacheck_std},
        {"header", l_header},     {"batch", l_batch},   {"revoked", l_revoked},
        {"legacy_map", l_legacy_map}, {"record", l_record}, {"plan", l_plan},
        {"slug_valid", l_slug_valid}, {"guard", l_guard}, {"guard_object", l_guard_object}, {"duration", l_duration},
        {"pace", l_pace},
        {NULL, NULL},
    };
    ljson_init(L);
    luaL_newlib(L, f);
    return 1;
}

/* luajson.c: Lua <-> cJSON, and the `json` module.
 *
 * Owns the encoding rules every other file relies on: json.null is a unique
 * light userdata; a decoded array carries the array metatable so `[]` survives
 * a round trip; a table is encoded as an array only when it is tagged so or
 * has exactly the keys 1..n; integers are written as integers (raw digits, so
 * 64-bit values are not squeezed through a double). It never guesses: a table
 * with mixed or sparse keys, a function, a cycle is an error naming the path.
 * Prefixes: ljson_ (the bridge's short prefix, as luajson.h names it). */
#include "lua/luajson.h"

#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define MAX_DEPTH 200

/* Addresses used as unique registry keys and as the null value itself. */
static const char NULL_KEY = 'n';
static const char ARRAY_MT_KEY = 'a';
static const char OBJECT_MT_KEY = 'o';

/* Pushes json.null. */
static void ljson_pushnull(lua_State *L) { lua_pushlightuserdata(L, (void *)&NULL_KEY); }

int ljson_isnull(lua_State *L, int idx)
{
    return lua_islightuserdata(L, idx) && lua_touserdata(L, idx) == (void *)&NULL_KEY;
}

static int null_tostring(lua_State *L)
{
    lua_pushliteral(L, "json.null");
    return 1;
}

void ljson_init(lua_State *L)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &ARRAY_MT_KEY) != LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushliteral(L, "array");
    lua_setfield(L, -2, "__jsontype");
    lua_rawsetp(L, LUA_REGISTRYINDEX, &ARRAY_MT_KEY);
    lua_newtable(L);
    lua_pushliteral(L, "object");
    lua_setfield(L, -2, "__jsontype");
    lua_rawsetp(L, LUA_REGISTRYINDEX, &OBJECT_MT_KEY);
    /* Light userdata share one metatable per state; json.null is the only
     * light userdata a script can reach, so giving it a __tostring is safe. */
    ljson_pushnull(L);
    lua_newtable(L);
    lua_pushcfunction(L, null_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_setmetatable(L, -2);
    lua_pop(L, 1);
}

static void set_mt(lua_State *L, const char *key)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, key);
    lua_setmetatable(L, -2);
}

void ljson_push(lua_State *L, const cJSON *v)
{
    luaL_checkstack(L, 4, "json nesting too deep");
    if (v == NULL || cJSON_IsNull(v)) {
        ljson_pushnull(L);
    } else if (cJSON_IsTrue(v)) {
        lua_pushboolean(L, 1);
    } else if (cJSON_IsFalse(v)) {
        lua_pushboolean(L, 0);
    } else if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        /* Integral values within the exactly-representable range stay
         * integers, so counts and generations do not turn into 3.0. */
        if (d == floor(d) && fabs(d) <= 9007199254740992.0)
            lua_pushinteger(L, (lua_Integer)d);
        else
            lua_pushnumber(L, d);
    } else if (cJSON_IsString(v)) {
        lua_pushstring(L, v->valuestring);
    } else if (cJSON_IsRaw(v)) {
        lua_pushstring(L, v->valuestring);
    } else if (cJSON_IsArray(v)) {
        int n = cJSON_GetArraySize(v), i = 1;
        lua_createtable(L, n, 0);
        const cJSON *e;
        cJSON_ArrayForEach(e, v) {
            ljson_push(L, e);
            lua_rawseti(L, -2, i++);
        }
        set_mt(L, &ARRAY_MT_KEY);
    } else if (cJSON_IsObject(v)) {
        lua_createtable(L, 0, 4);
        const cJSON *e;
        cJSON_ArrayForEach(e, v) {
            lua_pushstring(L, e->string);
            ljson_push(L, e);
            lua_rawset(L, -3);
        }
    } else {
        ljson_pushnull(L);
    }
}

/* What kind of JSON container a table is: 1 array, 0 object, -1 error. */
static int table_kind(lua_State *L, int idx, lua_Integer *len, char *err, size_t errlen,
                      const char *path)
{
    if (lua_getmetatable(L, idx)) {
        lua_rawgetp(L, LUA_REGISTRYINDEX, &ARRAY_MT_KEY);
        int is_arr = lua_rawequal(L, -1, -2);
        lua_pop(L, 1);
        lua_rawgetp(L, LUA_REGISTRYINDEX, &OBJECT_MT_KEY);
        int is_obj = lua_rawequal(L, -1, -2);
        lua_pop(L, 2);
        if (is_arr) {
            *len = (lua_Integer)lua_rawlen(L, idx);
            return 1;
        }
        if (is_obj)
            return 0;
    }
    lua_Integer n = 0, max = 0;
    int strings = 0, ints = 0;
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        lua_pop(L, 1);
        if (lua_type(L, -1) == LUA_TSTRING) {
            strings++;
        } else if (lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1) {
            ints++;
            n++;
            if (lua_tointeger(L, -1) > max)
                max = lua_tointeger(L, -1);
        } else {
            lua_pop(L, 1);
            snprintf(err, errlen, "cannot encode a table key of type %s at %s",
                     luaL_typename(L, -1), *path ? path : ".");
            return -1;
        }
    }
    if (strings && ints) {
        snprintf(err, errlen, "cannot encode a table with both string and integer keys at %s",
                 *path ? path : ".");
        return -1;
    }
    if (ints) {
        if (max != n) {
            snprintf(err, errlen, "cannot encode a sparse array at %s", *path ? path : ".");
            return -1;
        }
        *len = n;
        return 1;
    }
    return 0; /* string keys, or empty: an empty plain table is an object */
}

/* Attaches a fresh node where it belongs at once: under key in an object,
 * at the end of an array, or as the root. Returns item, or NULL (deleting
 * it) when cJSON could not take it. */
static cJSON *attach(cJSON *item, cJSON *parent, const char *key, cJSON **root)
{
    if (!item)
        return NULL;
    int ok = !parent                 ? (*root = item, 1)
             : cJSON_IsArray(parent) ? cJSON_AddItemToArray(parent, item)
                                     : cJSON_AddItemToObject(parent, key, item);
    if (!ok) {
        cJSON_Delete(item);
        return NULL;
    }
    return item;
}

/* Converts the value at idx and attaches it (see attach) before descending,
 * so when a Lua call in the middle raises (luaL_checkstack, memory), every
 * node built so far hangs off *root, which the caller keeps in a box.
 * Returns 0, or -1 with err filled. May raise. */
static int to_cjson(lua_State *L, int idx, int depth, char *path, size_t pathcap, char *err,
                    size_t errlen, cJSON *parent, const char *key, cJSON **root)
{
    idx = lua_absindex(L, idx);
    cJSON *item = NULL;
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        item = cJSON_CreateNull();
        break;
    case LUA_TBOOLEAN:
        item = cJSON_CreateBool(lua_toboolean(L, idx));
        break;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            char buf[32];
            snprintf(buf, sizeof buf, "%lld", (long long)lua_tointeger(L, idx));
            item = cJSON_CreateRaw(buf);
        } else {
            double d = lua_tonumber(L, idx);
            if (!isfinite(d)) {
                snprintf(err, errlen, "cannot encode %s number at %s",
                         isnan(d) ? "a NaN" : "an infinite", *path ? path : ".");
                return -1;
            }
            item = cJSON_CreateNumber(d);
        }
        break;
    case LUA_TSTRING: {
        size_t len;
        const char *s = lua_tolstring(L, idx, &len);
        if (strlen(s) != len) {
            snprintf(err, errlen, "cannot encode a string with a NUL byte at %s",
                     *path ? path : ".");
            return -1;
        }
        item = cJSON_CreateString(s);
        break;
    }
    case LUA_TLIGHTUSERDATA:
        if (ljson_isnull(L, idx)) {
            item = cJSON_CreateNull();
            break;
        }
        goto bad;
    case LUA_TTABLE: {
        if (depth >= MAX_DEPTH) {
            snprintf(err, errlen, "cannot encode: nesting deeper than %d (a cycle?) at %s",
                     MAX_DEPTH, *path ? path : ".");
            return -1;
        }
        luaL_checkstack(L, 6, "json nesting too deep");
        lua_Integer n = 0;
        int kind = table_kind(L, idx, &n, err, errlen, path);
        if (kind < 0)
            return -1;
        size_t plen = strlen(path);
        cJSON *out = attach(kind ? cJSON_CreateArray() : cJSON_CreateObject(), parent, key, root);
        if (!out) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        if (kind == 1) {
            for (lua_Integer i = 1; i <= n; i++) {
                snprintf(path + plen, pathcap - plen, "[%lld]", (long long)(i - 1));
                lua_rawgeti(L, idx, i);
                int rc = to_cjson(L, -1, depth + 1, path, pathcap, err, errlen, out, NULL, root);
                lua_pop(L, 1);
                if (rc != 0)
                    return -1;
            }
        } else {
            lua_pushnil(L);
            while (lua_next(L, idx) != 0) {
                const char *k = lua_tostring(L, -2);
                snprintf(path + plen, pathcap - plen, ".%s", k);
                int rc = to_cjson(L, -1, depth + 1, path, pathcap, err, errlen, out, k, root);
                lua_pop(L, 1);
                if (rc != 0) {
                    lua_pop(L, 1);
                    return -1;
                }
            }
        }
        path[plen] = '\0';
        return 0;
    }
    default:
        goto bad;
    }
    if (!attach(item, parent, key, root)) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
bad:
    snprintf(err, errlen, "cannot encode a %s at %s", luaL_typename(L, idx), *path ? path : ".");
    return -1;
}

#define BOX_MT "cozy.json.box"

static int box_gc(lua_State *L)
{
    ljson_box_free(luaL_checkudata(L, 1, BOX_MT));
    return 0;
}

void ljson_box_metatable(lua_State *L, const char *tname, lua_CFunction release)
{
    if (luaL_newmetatable(L, tname)) {
        lua_pushcfunction(L, release);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
}

struct ljson_box *ljson_box(lua_State *L)
{
    struct ljson_box *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->json = NULL;
    b->text = NULL;
    ljson_box_metatable(L, BOX_MT, box_gc);
    return b;
}

void ljson_box_free(struct ljson_box *b)
{
    cJSON_Delete(b->json);
    cJSON_free(b->text);
    b->json = NULL;
    b->text = NULL;
}

cJSON *ljson_to_cjson(lua_State *L, int idx, char *err, size_t errlen)
{
    char path[512] = "";
    idx = lua_absindex(L, idx);
    struct ljson_box *box = ljson_box(L);
    int rc = to_cjson(L, idx, 0, path, sizeof path, err, errlen, NULL, NULL, &box->json);
    cJSON *out = box->json;
    box->json = NULL;
    lua_pop(L, 1);
    if (rc != 0) {
        cJSON_Delete(out);
        return NULL;
    }
    return out;
}

/* json.encode(value [, {pretty = true}]) -> string; raises on an unencodable value,
 * since that is a bug in the script, not a condition to branch on. */
static int l_encode(lua_State *L)
{
    char err[640];
    int pretty = 0;
    if (lua_istable(L, 2)) {
        lua_getfield(L, 2, "pretty");
        pretty = lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
    struct ljson_box *box = ljson_box(L);
    if (!(box->json = ljson_to_cjson(L, 1, err, sizeof err)))
        return luaL_error(L, "json.encode: %s", err);
    box->text = pretty ? cJSON_Print(box->json) : cJSON_PrintUnformatted(box->json);
    if (!box->text)
        return luaL_error(L, "json.encode: out of memory");
    lua_pushstring(L, box->text);
    ljson_box_free(box);
    return 1;
}

/* json.decode(text) -> value | nil, "json: error at byte N". Input comes from
 * outside the script, so a parse error is a value to branch on. */
static int l_decode(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(s, len, &end, 0);
    if (!j) {
        lua_pushnil(L);
        lua_pushfstring(L, "json: invalid JSON at byte %d",
                        (int)(end && end >= s ? end - s : 0) + 1);
        return 2;
    }
    struct ljson_box *box = ljson_box(L);
    box->json = j;
    ljson_push(L, j);
    ljson_box_free(box);
    return 1;
}

static int l_array(lua_State *L)
{
    if (lua_isnoneornil(L, 1))
        lua_newtable(L);
    else
        luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    set_mt(L, &ARRAY_MT_KEY);
    return 1;
}

static int l_object(lua_State *L)
{
    if (lua_isnoneornil(L, 1))
        lua_newtable(L);
    else
        luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    set_mt(L, &OBJECT_MT_KEY);
    return 1;
}

static int l_is_array(lua_State *L)
{
    int r = 0;
    if (lua_istable(L, 1) && lua_getmetatable(L, 1)) {
        lua_rawgetp(L, LUA_REGISTRYINDEX, &ARRAY_MT_KEY);
        r = lua_rawequal(L, -1, -2);
        lua_pop(L, 2);
    }
    lua_pushboolean(L, r);
    return 1;
}

static const luaL_Reg json_funcs[] = {
    {"encode", l_encode},
    {"decode", l_decode},
    {"array", l_array},
    {"object", l_object},
    {"is_array", l_is_array},
    {NULL, NULL},
};

int luaopen_json(lua_State *L)
{
    ljson_init(L);
    luaL_newlib(L, json_funcs);
    ljson_pushnull(L);
    lua_setfield(L, -2, "null");
    return 1;
}

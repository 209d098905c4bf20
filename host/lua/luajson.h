/* luajson.h: the bridge between Lua values and cJSON trees, and the `json`
 * module. Owns the rules that keep JSON faithful through Lua: a null
 * sentinel, arrays tagged with a metatable so an empty array stays `[]`,
 * integers kept as integers. Every C file that hands JSON to Lua or takes it
 * back goes through here; nothing else converts. */
#ifndef COZY_LUAJSON_H
#define COZY_LUAJSON_H
#include <cjson/cJSON.h>
#include <lua.h>
#include <stddef.h>

int luaopen_json(lua_State *L);

/* May raise (memory): keep `v` in a box (ljson_box) if it must not leak.
 * Pushes the Lua value of `v` (objects as tables, arrays as tables carrying
 * the array metatable, null as json.null). Needs the json module registered
 * (ljson_init) in this state. */
void ljson_push(lua_State *L, const cJSON *v);

/* Converts the Lua value at `idx`. May raise (memory, nesting); what it
 * built so far is freed then. Returns NULL and writes why into err
 * (e.g. "cannot encode a function at .spec.x") when it cannot be encoded. */
cJSON *ljson_to_cjson(lua_State *L, int idx, char *err, size_t errlen);

/* A box for C memory held across Lua calls that may raise (lauxlib boxes
 * its buffers the same way): a userdata whose __gc deletes `json`
 * and cJSON_free `text`. Push it, store, make the calls, then
 * ljson_box_free (the box can stay on the stack). May raise (memory). */
struct ljson_box {
    cJSON *json;
    char *text;
};
struct ljson_box *ljson_box(lua_State *L);
/* Gives the userdata on top of the stack the metatable tname, whose __gc
 * calls release: how every C-memory box is made. A raise leaves the box to
 * the collector (no box is a to-be-closed variable: the normal path frees
 * at once with its own release call, and a box may be moved on the stack,
 * which a to-be-closed slot may not). */
void ljson_box_metatable(lua_State *L, const char *tname, lua_CFunction release);
void ljson_box_free(struct ljson_box *b);

/* Registers the null sentinel and the array/object metatables in the
 * registry; luaopen_json calls it, C modules that push JSON call it too. */
void ljson_init(lua_State *L);

int ljson_isnull(lua_State *L, int idx);
#endif

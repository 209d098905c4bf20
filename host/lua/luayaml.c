/* luayaml.c: the `yaml` Lua module, yaml.decode and yaml.encode over the
 * project's one YAML reader and writer (formats/yamldoc.h), with the Lua
 * side through the JSON bridge (luajson.h). Owns boxing the C memory a
 * conversion holds while Lua code that may raise runs. */
#include "lua/luayaml.h"

#include <lauxlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/mem.h"
#include "formats/yamldoc.h"
#include "lua/luajson.h"

#define YAML_BOX "cozy.yaml.box"

/* C allocations live in a userdata while Lua code (which may raise) runs, so a
 * memory error in ljson_push or lua_pushstring cannot leak them. */
struct box { struct yaml_doc doc; cJSON *value; char *text; struct buf err; };

static int box_gc(lua_State *L)
{
    struct box *b = luaL_checkudata(L, 1, YAML_BOX);
    yaml_doc_free(&b->doc);
    cJSON_Delete(b->value);
    mem_free(b->text);
    buf_release(&b->err);
    b->value = NULL;
    b->text = NULL;
    return 0;
}

static struct box *new_box(lua_State *L)
{
    struct box *b = lua_newuserdatauv(L, sizeof *b, 0);
    memset(b, 0, sizeof *b);
    luaL_setmetatable(L, YAML_BOX);
    return b;
}

static int l_decode(lua_State *L)
{
    size_t len;
    const char *text = luaL_checklstring(L, 1, &len);
    const char *name = luaL_optstring(L, 2, "<yaml>");
    struct box *b = new_box(L);
    if (yaml_load(name, text, len, &b->doc, &b->err) < 0) {
        luaL_pushfail(L);
        lua_pushstring(L, buf_str(&b->err));
        return 2;
    }
    ljson_push(L, b->doc.root);
    yaml_doc_free(&b->doc);
    return 1;
}

static int l_encode(lua_State *L)
{
    char err[512];
    luaL_checkany(L, 1);
    struct box *b = new_box(L);
    b->value = ljson_to_cjson(L, 1, err, sizeof err);
    if (!b->value) {
        luaL_pushfail(L);
        lua_pushstring(L, err);
        return 2;
    }
    b->text = yaml_emit_err(b->value, &b->err);
    if (!b->text) {
        luaL_pushfail(L);
        lua_pushstring(L, buf_str(&b->err));
        return 2;
    }
    lua_pushstring(L, b->text);
    cJSON_Delete(b->value);
    mem_free(b->text);
    b->value = NULL;
    b->text = NULL;
    return 1;
}

int luaopen_yaml(lua_State *L)
{
    static const luaL_Reg fns[] = {
        { "decode", l_decode },
        { "encode", l_encode },
        { NULL, NULL },
    };
    ljson_init(L);
    if (luaL_newmetatable(L, YAML_BOX)) {
        lua_pushcfunction(L, box_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_pop(L, 1);
    luaL_newlib(L, fns);
    return 1;
}

/* lualog.c: the `log` Lua module, log.debug/info/warn/error(fmt, ...),
 * writing a migration's diagnostics through base/log.c's formats and
 * streams (so JSON mode covers what a script logs too). Owns formatting the
 * arguments with the string library as it was opened, never with anything
 * a script put in its globals. */
#include "lua/lualog.h"

#include <lauxlib.h>
#include <lualib.h>

#include "base/log.h"

/* log.info(fmt, ...) formats like string.format, so scripts never build
 * messages by hand with tostring/concatenation of nil. */
static int lua_log(lua_State *L, enum log_level l)
{
    int n = lua_gettop(L);
    if (n > 1) {
        /* The string library as it was opened (the registry's copy), never
         * a `string.format` a script put in its globals. */
        luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
        lua_getfield(L, -1, LUA_STRLIBNAME);
        lua_getfield(L, -1, "format");
        lua_remove(L, -2);
        lua_remove(L, -2);
        lua_insert(L, 1);
        lua_call(L, n, 1);
    } else {
        luaL_tolstring(L, 1, NULL);
    }
    log_msg(l, lua_tostring(L, -1));
    return 0;
}
static int l_debug(lua_State *L) { return lua_log(L, LOG_DEBUG); }
static int l_info(lua_State *L) { return lua_log(L, LOG_INFO); }
static int l_warn(lua_State *L) { return lua_log(L, LOG_WARN); }
static int l_error(lua_State *L) { return lua_log(L, LOG_ERROR); }

int luaopen_log(lua_State *L)
{
    static const luaL_Reg f[] = {
        {"debug", l_debug}, {"info", l_info}, {"warn", l_warn}, {"error", l_error}, {NULL, NULL}};
    luaL_newlib(L, f);
    return 1;
}

/* log_lua.h: the `log` Lua module (debug, info, warn, error), over log.h. */
#ifndef COZY_LOG_LUA_H
#define COZY_LOG_LUA_H
#include <lua.h>

int luaopen_log(lua_State *L);
#endif

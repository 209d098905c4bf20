/* lualog.h: the `log` Lua module (debug, info, warn, error), over log.h. */
#ifndef COZY_LUALOG_H
#define COZY_LUALOG_H
#include <lua.h>

int luaopen_log(lua_State *L);
#endif

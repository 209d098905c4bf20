/* migrate_lua.h: the `migrate` module (parsers and planner) for specs and
 * tools; preloaded only in the unrestricted spec state, never in a
 * migration's sandbox. */
#ifndef COZY_MIGRATE_LUA_H
#define COZY_MIGRATE_LUA_H
#include <lua.h>
int luaopen_migrate(lua_State *L);
#endif

/* luayaml.h: the `yaml` Lua module: yaml.decode(text [, name]) -> value |
 * nil, err; yaml.encode(value) -> text | nil, err (formats/yamldoc.h does
 * the YAML, luajson.h the Lua values). */
#ifndef COZY_LUAYAML_H
#define COZY_LUAYAML_H
#include <lua.h>

int luaopen_yaml(lua_State *L);
#endif

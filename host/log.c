/* log.c: the host's and the scripts' log lines, on stderr.
 * Text: "LEVEL prefix: message"; JSON: one object a line with ts, level,
 * prefix and msg, built with cJSON so a message can hold any character.
 * Must never write to stdout (a script's stdout is its own output). */
#include "log.h"

#include <cjson/cJSON.h>
#include <lauxlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static int json_mode;
static enum log_level min_level = LOG_INFO;
static char prefix[128];

void log_set_json(int on) { json_mode = on; }
void log_set_level(enum log_level l) { min_level = l; }
void log_set_prefix(const char *p) { snprintf(prefix, sizeof prefix, "%s", p ? p : ""); }

static const char *names[] = {"debug", "info", "warn", "error"};

static void emit(enum log_level l, const char *msg)
{
    if (l < min_level)
        return;
    if (json_mode) {
        char ts[32];
        now_rfc3339(ts);
        cJSON *o = cJSON_CreateObject();
        if (o && cJSON_AddStringToObject(o, "ts", ts) &&
            cJSON_AddStringToObject(o, "level", names[l]) &&
            (!*prefix || cJSON_AddStringToObject(o, "migration", prefix)) &&
            cJSON_AddStringToObject(o, "msg", msg)) {
            char *s = cJSON_PrintUnformatted(o);
            if (s) {
                fprintf(stderr, "%s\n", s);
                cJSON_free(s);
            }
        }
        cJSON_Delete(o);
    } else if (*prefix) {
        fprintf(stderr, "%s %s: %s\n", names[l], prefix, msg);
    } else {
        fprintf(stderr, "%s: %s\n", names[l], msg);
    }
    fflush(stderr);
}

void logf_(enum log_level l, const char *fmt, ...)
{
    if (l < min_level)
        return;
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    emit(l, buf);
}

/* log.info(fmt, ...) formats like string.format, so scripts never build
 * messages by hand with tostring/concatenation of nil. */
static int lua_log(lua_State *L, enum log_level l)
{
    int n = lua_gettop(L);
    if (n > 1) {
        lua_getglobal(L, "string");
        lua_getfield(L, -1, "format");
        lua_remove(L, -2);
        lua_insert(L, 1);
        lua_call(L, n, 1);
    } else {
        luaL_tolstring(L, 1, NULL);
    }
    emit(l, lua_tostring(L, -1));
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

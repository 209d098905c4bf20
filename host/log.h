/* log.h: every line the host and the scripts print about what they do.
 * Owns the two formats (text for people, JSON lines for machines) and the
 * `log` Lua module. Writes to stderr only; never decides anything. */
#ifndef COZY_LOG_H
#define COZY_LOG_H
enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };
void log_set_json(int on);
void log_set_level(enum log_level l);
void log_set_prefix(const char *p);     /* e.g. the migration's slug */
void logf_(enum log_level l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define log_debug(...) logf_(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) logf_(LOG_INFO, __VA_ARGS__)
#define log_warn(...) logf_(LOG_WARN, __VA_ARGS__)
#define log_error(...) logf_(LOG_ERROR, __VA_ARGS__)
struct lua_State;
int luaopen_log(struct lua_State *L);
#endif

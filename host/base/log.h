/* log.h: every line the program prints, in one of two formats (text for
 * people, JSON lines for machines: --log-format json makes every line on
 * both streams a JSON object). Owns the formats and the streams (the `log`
 * Lua module writes through log_msg). Never decides anything.
 *
 * Recipe: diagnostics (what happens, what went wrong) go through log_*()
 * to stderr; a fatal error that ends a command through log_fatal(); a
 * usage error through log_usage(); a command's own result (progress lines,
 * tables, JSON documents) through out_line() / out_json() to stdout; a
 * script's output through log_script_line(). Nothing else calls printf. */
#ifndef COZY_LOG_H
#define COZY_LOG_H
#include <stddef.h>
#include <cjson/cJSON.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };
void log_set_json(int on);
int log_json(void);
void log_set_prefix(const char *p);     /* e.g. the migration's slug */
void log_write(enum log_level l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One diagnostic line as it is (no format): the `log` Lua module's. */
void log_msg(enum log_level l, const char *msg);
/* log_msg(LOG_WARN, line): where a lower layer's diagnostics go (the REST
 * client's retries, an apiserver's warnings: kube_open's say). */
void log_say(const char *line);
#define log_debug(...) log_write(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_write(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_write(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_write(LOG_ERROR, __VA_ARGS__)

/* "cozy-migrate: MESSAGE" (text) or an error object (JSON), on stderr. */
void log_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "cozy-migrate: MESSAGE (see 'cozy-migrate --help')", or JSON. */
void log_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One line of a migration's output: "[slug] text" or JSON, on stderr, in
 * one write so concurrent writers do not interleave mid-line. */
void log_script_line(const char *slug, const char *s, size_t n);

/* A line of a command's result on stdout; in JSON mode {"ts":..,"msg":..}. */
void out_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A JSON result on stdout, one line (pretty when pretty is set and the
 * format is text). */
void out_json(const cJSON *v, int pretty);
#endif

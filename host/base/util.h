/* util.h: small helpers every part of the host needs (monotonic clock,
 * reading a whole file, ISO timestamps). No policy lives here. */
#ifndef COZY_UTIL_H
#define COZY_UTIL_H
#include <stddef.h>

double now_mono(void);                  /* seconds, CLOCK_MONOTONIC */
/* Seconds since this process was started (exec'd), from the kernel's
 * record of it (/proc/self/stat, in clock ticks: 10 ms); -1 when unknown. */
double util_process_age(void);
/* Writes all n bytes, retrying on EINTR and short writes. 0, or -1 with
 * errno. Async-signal-safe. */
int util_write_all(int fd, const char *p, size_t n);
/* Reads a whole file into a NUL-terminated malloc'd buffer; NULL + errno. */
char *util_read_file(const char *path, size_t *len);
/* The entries of dir whose names do not start with '.', sorted bytewise.
 * Returns 0 with *names (free with util_free_names) and *n, or -1 with errno
 * set (ENOENT when dir does not exist). */
int util_list_dir(const char *dir, char ***names, size_t *n);
/* The same with the names that start with '.' too (but "." and ".."): for
 * directories where a dotfile must be refused or counted, never passed over. */
int util_list_dir_all(const char *dir, char ***names, size_t *n);
void util_free_names(char **names, size_t n);
/* 1 when s ends with suffix (s may be suffix itself), else 0. */
int util_ends_with(const char *s, const char *suffix);
/* "2026-08-12T10:04:00Z" for the current time. */
void now_rfc3339(char buf[32]);

/* A plain decimal integer from 0 to max (max >= 0): digits only, no sign,
 * space or leading zero. 0 with *out set, else -1. */
int parse_decimal(const char *s, long max, long *out);
/* The one parser of durations: "90s", "5m", "1h30m", "500ms". One or more
 * <digits><unit> parts, units h, m, s, ms, each at most once and largest
 * first; nothing else (no bare number, sign, space, fraction or exponent).
 * Positive and at most a week. Seconds in *out; 0 on success, else -1. */
int parse_duration(const char *s, double *out);
/* A duration as people write it: "5m", "1h30m", "90ms", "1.5s" (how a
 * timeout is said in messages and a default in --help). */
void format_duration(double s, char *buf, size_t len);
/* Cuts an incomplete UTF-8 sequence off the end of s (after a byte-count
 * truncation), so what is stored is never a stray byte. */
void utf8_clip(char *s);
/* Skips continuation bytes at the start of a tail cut from a longer text. */
const char *utf8_start(const char *s);
/* s[0..n) as text that is safe on a terminal and valid UTF-8, for showing
 * what a script printed or raised: C0 controls (tab kept, and newline when
 * keep_newline), DEL and bytes that are not valid UTF-8 become "\xNN", the
 * C1 controls (U+0080..U+009F) "\u00NN". Written into out (cap bytes, NUL
 * included), cut on whole characters. Returns the length written. */
size_t text_escape(const char *s, size_t n, char *out, size_t cap, int keep_newline);
/* s[0..n) with every byte that is not part of valid UTF-8 replaced by
 * U+FFFD, NUL-terminated, malloc'd (NULL when out of memory): what a JSON
 * line may carry. */
char *utf8_repair(const char *s, size_t n);
#endif

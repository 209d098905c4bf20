/* util.h: small helpers every part of the host needs (monotonic clock,
 * reading a whole file, ISO timestamps). No policy lives here. */
#ifndef COZY_UTIL_H
#define COZY_UTIL_H
#include <stddef.h>

double now_mono(void);                  /* seconds, CLOCK_MONOTONIC */
/* Reads a whole file into a NUL-terminated malloc'd buffer; NULL + errno. */
char *read_file(const char *path, size_t *len);
/* "2026-08-12T10:04:00Z" for the current time. */
void now_rfc3339(char buf[32]);

/* Parses "90", "90s", "5m", "1h30m", "500ms" into seconds. 0 on success. */
int parse_duration(const char *s, double *out);
/* Cuts an incomplete UTF-8 sequence off the end of s (after a byte-count
 * truncation), so what is stored is never a stray byte. */
void utf8_clip(char *s);
/* Skips continuation bytes at the start of a tail cut from a longer text. */
const char *utf8_start(const char *s);
#endif

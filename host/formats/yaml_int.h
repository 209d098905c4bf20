/* yaml_int.h: what the YAML reader (yamldoc.c) and writer (yamlemit.c)
 * share: the core schema's reading of a plain scalar, the depth bound, and
 * the one-line error helper. Nothing outside formats/ includes it. */
#ifndef COZY_YAML_INT_H
#define COZY_YAML_INT_H
#include <stddef.h>

#include "base/buf.h"

/* cJSON_Delete, cJSON_Duplicate, the emitter and the Lua bridge all recurse. */
#define YAML_MAX_DEPTH 512

enum scalar_kind { SK_STR, SK_NULL, SK_BOOL, SK_INT, SK_FLOAT };

/* Resolves a plain scalar the way YAML 1.2's core schema does. num gets the
 * value of SK_INT/SK_FLOAT, b of SK_BOOL. s is NUL-terminated at n. */
enum scalar_kind yaml_resolve_plain(const char *s, size_t n, double *num, int *b);
/* err = one line (control bytes made spaces); nothing when err is NULL. */
void __attribute__((format(printf, 2, 3))) yaml_seterr(struct buf *err, const char *fmt, ...);
#endif

/* mem.h: the memory budget of a migration's process. The Lua allocator,
 * cJSON (through its hooks), the YAML bridge and the HTTP response buffers
 * all draw from it, so the cap a migration runs under covers the C side
 * too, and passing it is the same clean MemoryLimit wherever it happens.
 * Process-wide on purpose: one migration runs per process (child.c); the
 * runner and the spec state run with no limit.
 *
 * Recipe: mem_set_limit(bytes) once, before the Lua state exists; allocate
 * C buffers a script can grow with mem_realloc and release them
 * with mem_free (plain free() of such a buffer only leaves the count high);
 * after a failure, mem_exceeded() says whether the cap was the cause.
 *
 * Ownership across layers, one rule: memory a function hands to its caller
 * in another file is freed by the function its header names, and that is
 * one of three: mem_free for text and bytes (what buf_detach hands over,
 * buf.h, and whatever a header says is "counted"), cJSON_Delete for a cJSON
 * tree, and a type's own *_free for a struct. Plain free() only for what
 * read_file and strdup made, and only where the header says "malloc'd".
 * cJSON's printed text is cJSON_free'd (it is mem_free once mem_set_limit
 * ran, plain free before). Mixing them never corrupts the heap (the count
 * is by usable size), it only makes the count wrong. */
#ifndef COZY_MEM_H
#define COZY_MEM_H
#include <stddef.h>

/* 0: no limit (counting continues). Also routes cJSON's allocations here. */
void mem_set_limit(size_t limit);
/* Counts n more bytes: 0, or -1 (and mem_exceeded() from then on) when that
 * would pass the limit; nothing is counted then. */
int mem_charge(size_t n);
void mem_release(size_t n);
void *mem_realloc(void *p, size_t n);
void mem_free(void *p);
int mem_exceeded(void);
/* The one way an array grows (git's ALLOC_GROW): room for at least want
 * elements of size bytes at p (NULL: a new array), its contents kept.
 * Returns p itself while the block already holds want (the allocator's
 * usable size says so, no capacity field needed), else p moved to a block
 * half as large again as asked, so n appends cost O(n). NULL when memory
 * runs out or want * size overflows, p then untouched and still the
 * caller's. Plain malloc'd and not counted (the arrays of the loaders and
 * the runner, outside a script's reach): freed with free(). Usage:
 *     struct x *nx = mem_grow(a->x, a->n + 1, sizeof *nx);
 *     if (!nx) return -1;
 *     a->x = nx; a->x[a->n++] = v;
 * tools/conventions refuses a hand-written realloc(... sizeof ...) outside
 * base/. */
void *mem_grow(void *p, size_t want, size_t size);
#endif

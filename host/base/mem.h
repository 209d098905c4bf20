/* mem.h: the memory budget of a migration's process. The Lua allocator,
 * cJSON (through its hooks), the YAML bridge and the HTTP response buffers
 * all draw from it, so the cap a migration runs under covers the C side
 * too, and passing it is the same clean MemoryLimit wherever it happens.
 * Process-wide on purpose: one migration runs per process (child.c); the
 * runner and the spec state run with no limit.
 *
 * Recipe: mem_set_limit(bytes) once, before the Lua state exists; allocate
 * C buffers a script can grow with mem_malloc/mem_realloc and release them
 * with mem_free (plain free() of such a buffer only leaves the count high);
 * after a failure, mem_exceeded() says whether the cap was the cause. */
#ifndef COZY_MEM_H
#define COZY_MEM_H
#include <stddef.h>

/* 0: no limit (counting continues). Also routes cJSON's allocations here. */
void mem_set_limit(size_t limit);
/* Counts n more bytes: 0, or -1 (and mem_exceeded() from then on) when that
 * would pass the limit; nothing is counted then. */
int mem_charge(size_t n);
void mem_release(size_t n);
void *mem_malloc(size_t n);
void *mem_realloc(void *p, size_t n);
void mem_free(void *p);
int mem_exceeded(void);
size_t mem_used(void);
#endif

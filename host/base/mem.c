/* mem.c: the process's memory budget (see mem.h). Owns the count, the
 * limit and the "a refusal happened" flag. C buffers are counted by their
 * usable size (malloc_usable_size), so a free needs no header of ours and a
 * buffer freed by plain free() can never corrupt the heap. Must never
 * refuse when no limit is set. */
#include "base/mem.h"

#include <cjson/cJSON.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>

static size_t used, limit;
static int exceeded;

int mem_charge(size_t n)
{
    if (limit && (n > limit || used > limit - n)) {
        exceeded = 1;
        return -1;
    }
    used += n;
    return 0;
}

void mem_release(size_t n) { used = n > used ? 0 : used - n; }

static void *mem_malloc(size_t n)
{
    return mem_realloc(NULL, n ? n : 1);
}

void *mem_realloc(void *p, size_t n)
{
    size_t old = p ? malloc_usable_size(p) : 0;
    /* Refuse before asking: past the limit nothing is allocated. */
    if (n > old && mem_charge(n - old) != 0)
        return NULL;
    if (n > old)
        mem_release(n - old);
    void *np = realloc(p, n);
    if (!np)
        return NULL;
    /* Count what the allocator really handed out. */
    used = (used > old ? used - old : 0) + malloc_usable_size(np);
    return np;
}

void mem_free(void *p)
{
    if (!p)
        return;
    mem_release(malloc_usable_size(p));
    free(p);
}

static void *cjson_malloc(size_t n) { return mem_malloc(n); }

void mem_set_limit(size_t l)
{
    limit = l;
    cJSON_Hooks h = {cjson_malloc, mem_free};
    cJSON_InitHooks(&h);
}

int mem_exceeded(void) { return exceeded; }
void *mem_grow(void *p, size_t want, size_t size)
{
    if (!want)
        want = 1;
    if (size && want > SIZE_MAX / size)
        return NULL;
    size_t need = want * size;
    if (p && malloc_usable_size(p) >= need)
        return p;
    /* Half again, not double: less waste on the large arrays (a tree of
     * thousands of migrations), the same O(n) over n appends. */
    size_t cap = need < 64 ? 64 : need + need / 2;
    if (cap < need)
        cap = need;
    return realloc(p, cap);
}

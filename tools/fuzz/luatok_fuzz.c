// sources: host/formats/luatok.c
/* luatok_fuzz.c: libFuzzer target for luatok.c, the tokenizer lint's api
 * rule reads Lua migrations with. Owns the properties every input must
 * keep: the reader never reads outside the text (ASan), every token lies
 * inside it and after the one before, lines never go back, each token moves
 * the reader on (so a walk ends), and the walk ends at LT_EOF or LT_ERROR.
 * Must never keep state between inputs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/luatok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly size bytes: no NUL after it to lean on. */
    char *src = malloc(size ? size : 1);
    if (!src)
        return 0;
    memcpy(src, data, size);
    struct luatok_reader r;
    luatok_init(&r, src, size);
    struct luatok t;
    const char *last = src;
    int line = 1;
    for (size_t n = 0;; n++) {
        const char *before = r.p;
        enum luatok_kind k = luatok_next(&r, &t);
        if (r.p < src || r.p > src + size || t.line < line)
            abort();
        line = t.line;
        if (k == LT_EOF || k == LT_ERROR)
            break;
        if (t.p < last || t.p + t.len > src + size || r.p <= before || n > size)
            abort();
        if (strlen(t.text) >= sizeof t.text)
            abort();
        last = t.p + t.len;
    }
    free(src);
    return 0;
}

/* k8sproto.c: metadata.name out of a Kubernetes protobuf body (see
 * k8sproto.h). Owns the wire format's reading: varint keys, the four wire
 * types a message may hold (varint, 64-bit, length-delimited, 32-bit),
 * bounds checked at every step. Must never read past len, nor accept a
 * body with anything left over. */
#include "door/k8sproto.h"

#include <stdint.h>
#include <string.h>

struct pb {
    const unsigned char *p, *end;
};

static int varint(struct pb *b, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (b->p >= b->end)
            return -1;
        unsigned char ch = *b->p++;
        *v |= (uint64_t)(ch & 0x7f) << shift;
        if (!(ch & 0x80))
            return 0;
    }
    return -1;
}

/* The next field: its number and wire type; for a length-delimited one its
 * bytes in *sub. 0, 1 at the end, -1 when malformed. */
static int next(struct pb *b, uint64_t *field, struct pb *sub)
{
    if (b->p == b->end)
        return 1;
    uint64_t key, n;
    if (varint(b, &key) != 0)
        return -1;
    *field = key >> 3;
    sub->p = sub->end = NULL;
    switch (key & 7) {
    case 0:
        return varint(b, &n);
    case 1:
        if (b->end - b->p < 8)
            return -1;
        b->p += 8;
        return 0;
    case 5:
        if (b->end - b->p < 4)
            return -1;
        b->p += 4;
        return 0;
    case 2:
        if (varint(b, &n) != 0 || n > (uint64_t)(b->end - b->p))
            return -1;
        sub->p = b->p;
        sub->end = b->p + n;
        b->p += n;
        return 0;
    default:
        return -1;
    }
}

/* The last field number want (length-delimited) of b: 1 found, 0 none, -1
 * malformed. */
static int last_field(struct pb b, uint64_t want, struct pb *out)
{
    int found = 0;
    uint64_t f;
    struct pb sub;
    int rc;
    while ((rc = next(&b, &f, &sub)) == 0)
        if (f == want) {
            if (!sub.p)
                return -1;
            *out = sub;
            found = 1;
        }
    return rc < 0 ? -1 : found;
}

int k8sproto_name(const char *body, size_t len, char *name, size_t cap)
{
    static const char magic[4] = {'k', '8', 's', '\0'};
    if (!body || len < 4 || memcmp(body, magic, 4) != 0)
        return -1;
    struct pb env = {(const unsigned char *)body + 4, (const unsigned char *)body + len};
    struct pb raw, obj;
    int rc = last_field(env, 2, &raw);
    if (rc <= 0)
        return -1;
    /* every metadata occurrence merges; the last name in any of them wins */
    int have = 0;
    uint64_t f;
    struct pb meta;
    obj = raw;
    while ((rc = next(&obj, &f, &meta)) == 0) {
        if (f != 1)
            continue;
        if (!meta.p)
            return -1;
        struct pb nm;
        int r = last_field(meta, 1, &nm);
        if (r < 0)
            return -1;
        if (r == 1) {
            size_t n = (size_t)(nm.end - nm.p);
            if (n >= cap)
                return -1;
            memcpy(name, nm.p, n);
            name[n] = '\0';
            have = 1;
        }
    }
    return rc < 0 ? -1 : have;
}

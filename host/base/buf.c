/* buf.c: the growable buffer (see buf.h). Owns the growth rule: doubling
 * from 256 bytes, every byte through mem_realloc, never past max. */
#include "base/buf.h"

#include <stdio.h>
#include <string.h>

#include "base/mem.h"

static int grow(struct buf *b, size_t add)
{
    if (b->failed)
        return -1;
    if (add > (size_t)-1 / 2 - b->len || (b->max && b->len + add > b->max)) {
        b->failed = BUF_TOOBIG;
        return -1;
    }
    size_t need = b->len + add + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    if (b->max && cap > b->max + 1)
        cap = b->max + 1;
    char *np = mem_realloc(b->p, cap);
    if (!np) {
        b->failed = BUF_NOMEM;
        return -1;
    }
    b->p = np;
    b->cap = cap;
    return 0;
}

int buf_add(struct buf *b, const void *data, size_t n)
{
    if (grow(b, n) != 0)
        return -1;
    if (n)
        memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

int buf_adds(struct buf *b, const char *s) { return buf_add(b, s, strlen(s)); }

int buf_vaddf(struct buf *b, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int need = vsnprintf(NULL, 0, fmt, ap);
    if (need < 0 || grow(b, (size_t)need) != 0) {
        if (need < 0 && !b->failed)
            b->failed = BUF_NOMEM;
        va_end(again);
        return -1;
    }
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, again);
    va_end(again);
    b->len += (size_t)need;
    return 0;
}

int buf_addf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = buf_vaddf(b, fmt, ap);
    va_end(ap);
    return rc;
}

void buf_consume(struct buf *b, size_t n)
{
    if (n > b->len)
        n = b->len;
    if (!n)
        return;
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
    b->p[b->len] = '\0';
}

void buf_reset(struct buf *b)
{
    b->len = 0;
    b->failed = 0;
    if (b->p)
        b->p[0] = '\0';
}

void buf_release(struct buf *b)
{
    mem_free(b->p);
    size_t max = b->max;
    *b = (struct buf){.max = max};
}

char *buf_detach(struct buf *b, size_t *len)
{
    char *p = NULL;
    if (!b->failed && (b->p || buf_add(b, "", 0) == 0))
        p = b->p;
    if (len)
        *len = p ? b->len : 0;
    if (p)
        *b = (struct buf){.max = b->max};
    else
        buf_release(b);
    return p;
}

int buf_setf(struct buf *b, const char *fmt, ...)
{
    buf_reset(b);
    va_list ap;
    va_start(ap, fmt);
    int rc = buf_vaddf(b, fmt, ap);
    va_end(ap);
    if (rc != 0) {
        buf_reset(b);
        (void)buf_adds(b, "out of memory");
    }
    return rc;
}

const char *buf_str(const struct buf *b)
{
    return b->p ? b->p : "";
}

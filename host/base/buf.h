/* buf.h: the one growable byte buffer of the host (in the manner of git's
 * strbuf and curl's dynbuf), drawn from the capped allocator (mem.h), so a
 * buffer a script can grow counts against the migration's memory limit
 * wherever it grows.
 *
 * Recipe: `struct buf b = BUF_INIT;` (or BUF_MAX(n) for a buffer that must
 * never pass n bytes of content), append with buf_add / buf_adds / buf_addf,
 * read b.p (always NUL-terminated once anything was appended; NULL before)
 * and b.len, then either buf_release(&b) or take the text with buf_detach
 * (the taker frees it with mem_free, the rule of mem.h).
 *
 * A failed append (memory, or the max passed) sets b.failed and leaves the
 * content as it was; every later append is refused at once, so a writer may
 * append a whole document and check once at the end. */
#ifndef COZY_BUF_H
#define COZY_BUF_H
#include <stdarg.h>
#include <stddef.h>

struct buf {
    char *p;
    size_t len, cap;
    size_t max;  /* 0: no bound of its own (the memory cap still holds) */
    int failed;  /* BUF_NOMEM or BUF_TOOBIG once an append was refused */
};
enum { BUF_NOMEM = 1, BUF_TOOBIG = 2 };
#define BUF_INIT {0}
#define BUF_MAX(n) {.max = (n)}

/* 0, or -1 (b->failed says why). */
int buf_add(struct buf *b, const void *data, size_t n);
int buf_adds(struct buf *b, const char *s);
int buf_addf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* buf_addf of a va_list: for a function of its own that takes a format. */
int buf_vaddf(struct buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* An error's message (as git passes `struct strbuf *err`): a callee that
 * fails sets it whole with buf_setf (what it held is replaced, so a caller
 * may pass one buffer to a call in a loop), never cut at a width; the
 * caller reads it with buf_str and releases it. buf_setf: 0, or -1 (the
 * buffer then reads "out of memory" when even that fits, else ""). */
int buf_setf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The text, "" when nothing was appended: never NULL, for a "%s". */
const char *buf_str(const struct buf *b);
/* Drops the first n bytes (all when n >= len): a buffer read as a queue. */
void buf_consume(struct buf *b, size_t n);
/* Empties the content and clears failed; keeps the memory for reuse. */
void buf_reset(struct buf *b);
/* Frees the memory; b is BUF_INIT again (its max kept). */
void buf_release(struct buf *b);
/* Hands the text over (an empty string when nothing was appended; NULL when
 * even that cannot be had, or the buffer failed) and empties b. The caller
 * frees it with mem_free. *len may be NULL. */
char *buf_detach(struct buf *b, size_t *len);
#endif

/* verdict.c: the child's verdict record (see verdict.h). Owns its shape
 * and the check the supervisor makes before trusting one; writing it uses
 * nothing a child between fork and exec may not call. */
#include "proc/verdict.h"

#include <limits.h>
#include <string.h>

#include "base/util.h"

_Static_assert(sizeof(struct child_verdict) <= PIPE_BUF,
               "a verdict is written in one write() no larger than PIPE_BUF: atomic on a pipe");

void verdict_init(struct child_verdict *v, enum verdict_reason reason)
{
    memset(v, 0, sizeof *v);
    v->magic = VERDICT_MAGIC;
    v->reason = (int32_t)reason;
}

void verdict_set(char *field, size_t cap, const char *s)
{
    size_t n = 0;
    for (; s && s[n] && n + 1 < cap; n++)
        field[n] = s[n];
    field[n] = '\0';
}

int verdict_write(int fd, const struct child_verdict *v)
{
    return util_write_all(fd, (const char *)v, sizeof *v);
}

/* Whether a field of cap bytes ends inside itself. */
static int ended(const char *field, size_t cap)
{
    return memchr(field, '\0', cap) != NULL;
}

int verdict_read(const void *buf, size_t len, struct child_verdict *v)
{
    memset(v, 0, sizeof *v);
    if (len < sizeof *v)
        return -1;
    struct child_verdict got;
    memcpy(&got, buf, sizeof got);
    if (got.magic != VERDICT_MAGIC || got.reason < 0 || got.reason >= VERDICT_REASONS ||
        !ended(got.stage, sizeof got.stage) || !ended(got.message, sizeof got.message) ||
        !ended(got.unpredictable, sizeof got.unpredictable))
        return -1;
    *v = got;
    return 0;
}

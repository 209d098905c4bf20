/* childout.c: a migration's output as its supervisor reads it (see
 * childout.h). Owns cutting the stream into lines (a line longer than
 * STREAM_LINE_MAX goes in pieces), streaming each as "[slug] line"
 * (log_script_line), and the tail kept for records: the last
 * OUTPUT_TAIL_LINES lines, each cut to RING_LINE_MAX on a whole character,
 * valid UTF-8, at most OUTPUT_TAIL_MAX bytes.
 * Prefixes: child_output_ (one child's output, as childout.h names it). */
#include "proc/childout.h"

#include <stdlib.h>
#include <string.h>

#include "base/defaults.h"
#include "base/log.h"
#include "base/util.h"

#define TAIL_LINES OUTPUT_TAIL_LINES
#define TAIL_MAX OUTPUT_TAIL_MAX    /* bytes of the tail, NUL included */
#define RING_LINE_MAX 1024      /* one tail line; longer ones end in "..." */
#define STREAM_LINE_MAX 4096    /* a longer line is streamed in pieces */

struct child_output {
    const char *slug;
    int quiet;
    char buf[STREAM_LINE_MAX];      /* the line being assembled */
    size_t len;
    char ring[TAIL_LINES][RING_LINE_MAX + 1];
    size_t ring_len[TAIL_LINES];
    unsigned next, count;
};

static void emit_line(struct child_output *r, const char *s, size_t n)
{
    if (!r->quiet)
        log_script_line(r->slug, s, n);
    /* The tail goes into records and JSON: valid UTF-8 only. */
    char *fixed = utf8_repair(s, n);
    if (fixed) {
        s = fixed;
        n = strlen(fixed);
    }
    char *slot = r->ring[r->next];
    size_t keep = n;
    if (keep > RING_LINE_MAX) {
        keep = RING_LINE_MAX - 3;
        /* Do not cut a UTF-8 sequence in half. */
        while (keep && ((unsigned char)s[keep] & 0xC0) == 0x80)
            keep--;
        memcpy(slot, s, keep);
        memcpy(slot + keep, "...", 3);
        keep += 3;
    } else {
        memcpy(slot, s, keep);
    }
    slot[keep] = 0;
    r->ring_len[r->next] = keep;
    free(fixed);
    r->next = (r->next + 1) % TAIL_LINES;
    if (r->count < TAIL_LINES)
        r->count++;
}

void child_output_feed(struct child_output *r, const char *data, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (data[i] == '\n') {
            emit_line(r, r->buf, r->len);
            r->len = 0;
            continue;
        }
        if (r->len == sizeof r->buf) {
            emit_line(r, r->buf, r->len);
            r->len = 0;
        }
        r->buf[r->len++] = data[i];
    }
}

void child_output_finish(struct child_output *r)
{
    if (r->len) {
        emit_line(r, r->buf, r->len);
        r->len = 0;
    }
}

/* The newest lines that fit in TAIL_LINES and TAIL_MAX, oldest first. */
char *child_output_tail(const struct child_output *r)
{
    size_t total = 0;
    unsigned k = 0;
    while (k < r->count) {
        unsigned idx = (r->next + TAIL_LINES - 1 - k) % TAIL_LINES;
        if (total + r->ring_len[idx] + 1 + 1 > TAIL_MAX)
            break;
        total += r->ring_len[idx] + 1;
        k++;
    }
    char *t = malloc(total + 1);
    if (!t)
        return NULL;
    size_t at = 0;
    for (unsigned i = k; i > 0; i--) {
        unsigned idx = (r->next + TAIL_LINES - i) % TAIL_LINES;
        memcpy(t + at, r->ring[idx], r->ring_len[idx]);
        at += r->ring_len[idx];
        t[at++] = '\n';
    }
    t[at] = 0;
    return t;
}

struct child_output *child_output_new(const char *slug, int quiet)
{
    struct child_output *r = calloc(1, sizeof *r);
    if (r) {
        r->slug = slug;
        r->quiet = quiet;
    }
    return r;
}

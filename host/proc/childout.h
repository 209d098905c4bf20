/* childout.h: the output of one migration's child as its supervisor reads
 * it: streamed line by line to stderr, and its tail kept for the record. */
#ifndef COZY_CHILDOUT_H
#define COZY_CHILDOUT_H
#include <stddef.h>

struct child_output;

/* NULL when out of memory. quiet: keep the tail, stream nothing. Free with
 * free(). */
struct child_output *child_output_new(const char *slug, int quiet);
/* n bytes as they came from the pipe. */
void child_output_feed(struct child_output *r, const char *data, size_t n);
/* The last line, when it had no newline. */
void child_output_finish(struct child_output *r);
/* The newest lines that fit in OUTPUT_TAIL_LINES and OUTPUT_TAIL_MAX,
 * oldest first, each ending in '\n'; malloc'd, NULL when out of memory. */
char *child_output_tail(const struct child_output *r);
#endif

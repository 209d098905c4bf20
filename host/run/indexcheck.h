/* indexcheck.h: how a difference between an index and the tree and image
 * a process runs is told, the same for the hook (indexcheck.c, the index
 * the chart rendered) and the dispatcher (dispatch.c, the live one).
 *
 * Recipe: struct indexcheck_said s = {.label = NAME}; pass indexcheck_say
 * and &s to index_compare (formats/indexdoc.h); then s.n differences were
 * found: one alone is s.first, for the caller's fatal line; several were
 * each logged as an error line "NAME: difference" before it; s.text holds
 * them all, joined and cut, for the Warning Event. */
#ifndef COZY_INDEXCHECK_H
#define COZY_INDEXCHECK_H
#include <stddef.h>

struct indexcheck_said {
    const char *label;          /* names the index in each line */
    char text[1400];
    size_t at, n;
    char first[900];
};

/* index_compare's say: ud is a struct indexcheck_said. */
void indexcheck_say(void *ud, const char *line);
#endif

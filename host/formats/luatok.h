/* luatok.h: Lua source as tokens, for the linter's api rule (which module
 * fields a script uses). The one reader of Lua text outside the Lua
 * library itself: names, strings (with their value when it has no escape),
 * numbers and operators, each with its line; comments and long brackets
 * skipped as Lua's llex.c skips them. It judges nothing: a text
 * Lua would refuse still tokenizes, up to an LT_ERROR. */
#ifndef COZY_LUATOK_H
#define COZY_LUATOK_H
#include <stddef.h>

enum luatok_kind { LT_EOF = 0, LT_NAME, LT_STRING, LT_NUMBER, LT_OP, LT_ERROR };

struct luatok {
    enum luatok_kind kind;
    int line;
    const char *p;          /* the token in the source */
    size_t len;
    char text[128];         /* a name or operator; a string's value when it is short and
                             * has no escape (else ""); cut to fit */
};

struct luatok_reader {
    const char *src, *end, *p;
    int line;
};

void luatok_init(struct luatok_reader *r, const char *src, size_t len);
/* The next token into t; LT_EOF at the end, LT_ERROR (with its line) on an
 * unfinished string, comment or long bracket. */
enum luatok_kind luatok_next(struct luatok_reader *r, struct luatok *t);
/* Whether t is the operator or name `s`. */
int luatok_is(const struct luatok *t, const char *s);
#endif

/* guard.h: the ledger guard, as a pure function. Decides whether one
 * request, exactly as it will go on the wire, may be sent by a migration:
 * scripts never write the ledger ConfigMap, the runner's Lease, or delete
 * the namespace holding them. Owns the path grammar it accepts (an absolute
 * API path: no query, no fragment, no control characters, no empty, "." or
 * ".." segment, no encoded '/' or NUL), its canonical form (percent-decoded,
 * compared without regard to case), and reading a create's body in the
 * format its content type names (JSON without duplicate keys, or YAML).
 * Holds no state and makes no request; kube.c calls it on every request.
 *
 * Recipe: build the path you will send (no query: queries are appended
 * after the guard, from values it has seen escaped), call guard_check with
 * the method, that path, the body bytes and the content type; send only on
 * GUARD_ALLOW. */
#ifndef COZY_GUARD_H
#define COZY_GUARD_H
#include <stddef.h>

struct guard_target {
    const char *ns;         /* the platform namespace */
    const char *ledger;     /* the ledger ConfigMap's name */
    const char *lease;      /* the runner Lease's name */
};

enum guard_verdict {
    GUARD_ALLOW = 0,
    GUARD_PROTECTED,        /* it would write the ledger, the Lease or their namespace */
    GUARD_BAD_PATH,         /* not a path the guard can judge: refused outright */
    GUARD_BAD_BODY,         /* a create aimed at a guarded collection whose body does not
                             * parse into one object with one name */
};

/* why gets one line for anything but GUARD_ALLOW. */
enum guard_verdict guard_check(const struct guard_target *t, const char *method,
                               const char *path, const char *body, size_t body_len,
                               const char *content_type, char *why, size_t whylen);
const char *guard_verdict_name(enum guard_verdict v);
#endif

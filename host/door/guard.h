/* guard.h: the ledger guard, as a pure function. Decides whether one
 * request, exactly as it will go on the wire, may be sent by a migration:
 * scripts never write the ledger ConfigMap, the runner's Lease, the
 * Namespace holding them (any verb, any subresource), or the engine's
 * Events (those named as the engine names its own, any Event claiming the
 * runner's component or naming the ledger or the Lease as its subject, and,
 * through guard_check_object, any existing one that does); and in a dry
 * run, never send a request the apiserver would not dry-run (a TokenRequest
 * answers with a live token; exec, attach and port-forward have no dry run).
 * Owns the path grammar it accepts (an absolute API path: no query, no
 * fragment, no control characters, no empty, "." or ".." segment, no encoded
 * '/' or NUL), its canonical form (percent-decoded, compared without regard
 * to case), how a path names namespace, resource, object and subresource
 * (as the apiserver's RequestInfo reads it), and reading a body in the
 * format its content type names (JSON without duplicate keys, YAML read
 * as the apiserver's YAML 1.1 reads it or refused, or a create's name out
 * of Kubernetes protobuf, k8sproto.h).
 * Holds no state and makes no request; door.c calls it on every request a
 * migration sends, the ones lua/luakube_request.c builds itself included.
 *
 * Recipe: build the path you will send (no query: queries are appended
 * after the guard, from values it has seen escaped), call guard_check with
 * the method, that path, the body bytes and the content type; send only on
 * GUARD_ALLOW. */
#ifndef COZY_GUARD_H
#define COZY_GUARD_H
#include <cjson/cJSON.h>
#include <stddef.h>

struct guard_target {
    const char *ns;         /* the platform namespace */
    const char *ledger;     /* the ledger ConfigMap's name; the runner's Events
                             * on it are named "<ledger>.<suffix>" */
    const char *lease;      /* the runner Lease's name */
    const char *component;  /* the runner's Event source (NULL: EVENT_COMPONENT) */
    int dry_run;            /* the request goes out as a dry run (run --dry-run, preview) */
};

enum guard_verdict {
    GUARD_ALLOW = 0,
    GUARD_PROTECTED,        /* it would write the ledger, the Lease or their namespace */
    GUARD_BAD_PATH,         /* not a path the guard can judge: refused outright */
    GUARD_BAD_BODY,         /* a create aimed at a guarded collection (or a write of an
                             * Event) whose body does not parse into one object with
                             * one name */
    GUARD_DRY_RUN,          /* a dry run may not send it: its dry-run answer is a live
                             * credential, or the apiserver has no dry run for it */
    GUARD_UNREADABLE,       /* a YAML body the apiserver (YAML 1.1) would read otherwise
                             * than the guard, or one that does not parse: sent nowhere */
};

/* why gets one line for anything but GUARD_ALLOW. */
enum guard_verdict guard_check(const struct guard_target *t, const char *method,
                               const char *path, const char *body, size_t body_len,
                               const char *content_type, char *why, size_t whylen);
const char *guard_verdict_name(enum guard_verdict v);

/* Whether guard_check's GUARD_ALLOW of a request still waits on the object
 * it acts on: a write of one named Event, which is the runner's whatever
 * its name when it claims the runner (its source, reporting component or
 * controller) or is about the ledger or the Lease. The caller reads the
 * object with its own client and asks guard_check_object. */
int guard_needs_object(const char *method, const char *path);
/* The verdict on such a write, given the object as it is (NULL: there is
 * none, the write acts on nothing of the runner's). */
enum guard_verdict guard_check_object(const struct guard_target *t, const char *path,
                                      const cJSON *current, char *why, size_t whylen);

/* Whether a content type names YAML (application/yaml, apply-patch+yaml). */
int guard_yaml_type(const char *content_type);
/* The JSON text of a YAML body, read exactly as guard_check reads it: what
 * the door sends in its place, so the apiserver reads what was judged.
 * cJSON_free it; NULL with why when guard_check would not allow it. */
char *guard_yaml_json(const char *body, size_t len, char *why, size_t whylen);
#endif

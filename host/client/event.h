/* event.h: one core/v1 Event about an object, so `kubectl describe` of it
 * shows the engine's history. The one place an Event body is made: the
 * runner's Events on the ledger (ledger.h) and the dispatcher's on the
 * Jobs it creates and on the ledger (dispatch.h) go through it. Their
 * source is EVENT_COMPONENT, which no script may claim (guard.h). */
#ifndef COZY_EVENT_H
#define COZY_EVENT_H
#include <stddef.h>

#include "client/rest.h"

struct event_about {
    const char *api_version, *kind, *ns, *name;
    const char *uid;            /* may be NULL or "" */
};

/* Posts the Event. name: a fixed name (an Event said once: a second post
 * of the same name is a 409, taken as already said), or NULL for a name
 * generated from the object's. Returns 0 when posted, 1 when an Event of
 * that name exists already, -1 with "could not record an Event on ...: why"
 * in err, for the caller to warn (best effort: an Event never changes what
 * a command does). */
int event_post(struct rest_client *c, const struct event_about *about, const char *name,
               const char *type, const char *reason, const char *message, char *err,
               size_t errlen);
/* event_post in two halves, for a caller that does not wait for the
 * answer (the runner's Events: ledger.c): event_build, the body (cJSON_free
 * it; NULL on no memory) and in path the path to POST it to; then, with
 * rest_do's return value and result, event_answered, event_post's return
 * value and err. */
char *event_build(const struct event_about *about, const char *name, const char *type,
                  const char *reason, const char *message, char *path, size_t pathlen);
int event_answered(const struct event_about *about, const char *name, int rc,
                   const struct rest_result *r, char *err, size_t errlen);
#endif

/* watch.h: a watch on the apiserver (a list path with watch=1): the events
 * of the objects it selects, each handed over as it arrives.
 *
 * Owns the streaming request on a connection of its own (a watcher beside
 * the caller's client never shares its handle), splitting the stream into
 * events and parsing each one, and how a stream ends: the server closed it
 * (its timeoutSeconds: watch again from the last resourceVersion seen), the
 * resourceVersion is too old (410 Gone, as an ERROR event or a status:
 * read the object afresh, then watch from its resourceVersion), the caller
 * asked to stop, or it failed (the reason in err). Knows nothing of what
 * the events mean; one caller, one thread.
 *
 * Recipe: kube_watch_new once; kube_watch_read for the object as it is
 * now; kube_watch_run from its resourceVersion, again after each end;
 * kube_watch_free. */
#ifndef COZY_KUBE_WATCH_H
#define COZY_KUBE_WATCH_H
#include <cjson/cJSON.h>
#include <stddef.h>

#include "client/kubeconfig.h"

/* The longest event line a watch takes (a Lease's is a few hundred bytes). */
#define KUBE_WATCH_LINE_MAX (1024 * 1024)

struct kube_watch;

enum kube_watch_end {
    KUBE_WATCH_CLOSED,      /* the server ended the stream: watch again */
    KUBE_WATCH_EXPIRED,     /* 410 Gone: read afresh, then watch again */
    KUBE_WATCH_STOPPED,     /* on_event or keep_going said so */
    KUBE_WATCH_FAILED,      /* err says why */
};

struct kube_watch_fns {
    /* The server answered 200: events follow. */
    void (*on_open)(void *ud);
    /* One event: ADDED, MODIFIED, DELETED or BOOKMARK, and its object.
     * Non-zero ends the stream (KUBE_WATCH_STOPPED). */
    int (*on_event)(void *ud, const char *type, const cJSON *object);
    /* Asked at least every KUBE_WATCH_POLL_S while nothing arrives: 0 ends
     * the stream (KUBE_WATCH_STOPPED). */
    int (*keep_going)(void *ud);
    void *ud;
};
#define KUBE_WATCH_POLL_S 0.2

/* A watcher on cfg's cluster (cfg outlives it). NULL with err. */
struct kube_watch *kube_watch_new(const struct kube_config *cfg, char *err, size_t errlen);
/* Streams path until it ends (timeout_s bounds the whole request; the
 * path's own timeoutSeconds should end it earlier). */
enum kube_watch_end kube_watch_run(struct kube_watch *w, const char *path, double timeout_s,
                                   const struct kube_watch_fns *fns, char *err, size_t errlen);
/* GET path on the watcher's connection: the object (the caller frees it),
 * or NULL with *code (404: absent; 0: no answer) and err. */
cJSON *kube_watch_read(struct kube_watch *w, const char *path, double timeout_s, long *code,
                       char *err, size_t errlen);
void kube_watch_free(struct kube_watch *w);
#endif

/* door.h: the one door every request of a migration passes on its way to
 * the apiserver, whoever makes it: a Lua migration's kube module
 * (lua/luakube_request.c) and a shell migration's kubectl through the runner's
 * loopback gateway (gateway/gateway.h) alike, so the promises are the same
 * for both. Owns, for one request as it will go on the wire: the ledger
 * guard's judgement (guard.h) of its method, path and body; in a dry run,
 * dryRun=All in the query of every mutating request and in a DELETE's
 * options body; nothing leaving once the migration's deadline has passed;
 * which requests count as safe to repeat (rest.h owns the retries); and,
 * around a write, the object as it was before (for the journal and the dry
 * run's report) and what its answer makes of it: the dry run's report
 * (told through say) and the write journal's entry. Knows no Lua and no
 * HTTP server; prints nothing itself.
 *
 * Recipe: fill a struct door for the migration (its options, deadline,
 * connection, journal, say); for each request build a door_req (the path
 * with its query as it will be sent); door_prior_read before a write;
 * door_send (or door_ready, then your own transfer: a pooled request, a
 * stream); door_after with the answer; door_prior_free. A refusal
 * (DOOR_REFUSED, DOOR_LATE) is answered with door_refusal's reason and
 * text, and nothing is sent. */
#ifndef COZY_DOOR_H
#define COZY_DOOR_H
#include <cjson/cJSON.h>
#include <stddef.h>

#include "door/guard.h"
#include "door/journal.h"
#include "client/options.h"
#include "client/rest.h"

struct door {
    const struct kube_options *ko;  /* dry run and the names the guard protects */
    double deadline;                /* monotonic seconds; 0 = none */
    struct rest_client *rest;       /* where door_send and door_get_json send */
    struct journal *journal;        /* the migration's write journal; NULL: none */
    void (*say)(const char *text);  /* a dry run's report, one or more lines; NULL: nowhere */
};

/* One request as it will be sent: path with its query (URL-escaped). */
struct door_req {
    const char *method;             /* GET, POST, PUT, PATCH, DELETE */
    const char *path;
    const char *accept, *ctype;     /* NULL: application/json, none */
    const char *body;
    size_t body_len;
    int safe;                       /* its repetition is harmless (door_safe) */
    const char *const *headers;     /* extra request headers a relay hands on (NULL: none) */
    int flags;                      /* REST_RAW, REST_KEEP_HEADERS (rest.h) */
};

enum door_rc {
    DOOR_OK = 0,        /* sent, a 2xx came back */
    DOOR_FAILED,        /* sent (or tried): the result's err says how it failed */
    DOOR_REFUSED,       /* not sent: the guard refused it (the verdict, why) */
    DOOR_LATE,          /* not sent: the migration's deadline has passed */
    DOOR_NOMEM,         /* not sent: no memory to mark it a dry run */
};

/* What door_ready let out: the path and body as they go on the wire (the
 * dry run's own copies in own_*; door_out_free releases them), and the
 * time the request has. */
struct door_out {
    const char *path, *body;
    const char *ctype;      /* JSON where a YAML body was sent as the JSON the guard read */
    size_t body_len;
    double left;
    char *own_path, *own_body;
};

/* The guard's judgement alone, of a path without its query (what a Lua
 * verb asked for, before anything is resolved or connected). */
enum guard_verdict door_judge(const struct kube_options *ko, const char *method, const char *path,
                              const char *body, size_t body_len, const char *ctype, char *why,
                              size_t whylen);
/* The door's checks, without sending: DOOR_OK with *o filled when the
 * request may leave now; otherwise the verdict and one line in why. */
enum door_rc door_ready(const struct door *d, const struct door_req *r, struct door_out *o,
                        enum guard_verdict *gv, char *why, size_t whylen);
void door_out_free(struct door_out *o);
/* door_ready, then rest_do with d's connection. out is always to be
 * released (rest_result_free). */
enum door_rc door_send(const struct door *d, const struct door_req *r, struct rest_result *out,
                       enum guard_verdict *gv, char *why, size_t whylen);
/* A GET the host makes for itself (discovery, a read before a write),
 * through the same door. NULL with err filled when it failed or was not
 * sent. */
cJSON *door_get_json(const struct door *d, const char *path, const char *accept,
                     struct rest_error *err);

/* Whether a request may be repeated when its answer was lost: reads,
 * patches and deletes; a create never; a replace only with the
 * resourceVersion precondition in its body. */
int door_safe(const char *method, const cJSON *jbody);
/* Whether a GET of path reads something outside the API's resources that
 * clients need to talk to it (version, OpenAPI, health): passed through,
 * since the guard judges resource paths only. */
int door_nonresource_read(const char *method, const char *path);

/* The reason and message a refusal is answered with: LedgerProtected,
 * DryRunRefused, BadPath, Timeout (DOOR_LATE), MemoryLimit (DOOR_NOMEM). */
const char *door_refusal(enum door_rc rc, enum guard_verdict gv, const char *why, char *msg,
                         size_t len);

/* A write's object as it was before it, for the journal (a change told
 * from a no-op) and a dry run's report: rv_before ("" when unknown), and
 * the object itself (owned) when the report needs it, or when nothing
 * earlier showed its resourceVersion. */
struct door_prior {
    char rv_before[64];
    cJSON *before;
};
/* Fills p for a request with the given method and path (no query); jbody
 * its parsed body, held the preview's copy of the object (NULL: none). A
 * read or a create needs nothing. */
void door_prior_read(const struct door *d, const char *method, const char *path,
                     const cJSON *jbody, const cJSON *held, struct door_prior *p);
void door_prior_free(struct door_prior *p);
/* After an answer (ok: 2xx; status the HTTP status or the error's code;
 * answer the parsed body): a dry-run write's report to say, a write's
 * journal entry, a read's resourceVersions remembered. path has no query;
 * verb is how the caller names the write (NULL: from the method). */
void door_after(const struct door *d, const char *method, const char *verb, const char *path,
                int ok, long status, const cJSON *answer, const struct door_prior *p);
#endif

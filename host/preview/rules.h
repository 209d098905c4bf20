/* rules.h: the preview's rules, its copy-on-write overlay (overlay.h) in
 * front of the door: the one set of rules (preview_decide, preview_keep)
 * the Lua module's preview (lua/luakube_preview.c) and the gateway's, for
 * requests that arrive as HTTP (a shell migration's kubectl), both follow.
 * What the overlay answers before anything is sent
 * (an object the preview changed, created or deleted), a write to such an
 * object rewritten as a dry run of the overlay's version, each dry-run
 * answer kept, list pages merged with it, and what it cannot predict
 * called so (the migration's preview is then unpredictable, never a
 * failure of the run). Makes no request itself: the caller sends through
 * the door. The gateway calls it under its lock. */
#ifndef COZY_PREVIEW_RULES_H
#define COZY_PREVIEW_RULES_H
#include <cjson/cJSON.h>
#include <stddef.h>

#include "client/apipath.h"
#include "door/door.h"
#include "preview/overlay.h"

/* What the overlay makes of a request, before anything is sent. */
enum preview_kind {
    PREVIEW_SEND,            /* the overlay holds nothing of it: send it as it is */
    PREVIEW_HELD,            /* a GET of an object the overlay holds: answer it (held) */
    PREVIEW_STATUS,          /* answer with status, reason and message (NotFound, AlreadyExists) */
    PREVIEW_UNSUPPORTED,     /* the preview cannot predict it (message) */
    PREVIEW_DELETED,         /* a delete of an object this preview created: done in the overlay,
                         * answer Success (the caller journals and says it) */
    PREVIEW_REWRITE,         /* send next with method to path instead: a dry run of the
                         * overlay's version */
};

struct preview_verdict {
    enum preview_kind kind;
    struct apipath ap;          /* what path names */
    const cJSON *held;          /* the overlay's object (PREVIEW_HELD, PREVIEW_REWRITE) */
    long status;
    char reason[64];
    char message[700];
    const char *method;         /* PREVIEW_REWRITE: POST (to path, the collection) or PUT (path "":
                                 * the request's own) */
    char path[1400];
    cJSON *next;                /* PREVIEW_REWRITE: the body to send; the caller's */
};

/* Decides for method to path (its query left off; ctype and jbody the
 * request's content type and parsed body). 0, or -1 when out of memory. */
int preview_decide(struct overlay *ov, const char *method, const char *path, const char *ctype,
                       const cJSON *jbody, struct preview_verdict *v);
/* After a successful request: a write's answer (resp) goes in the overlay
 * (a delete's, unless finalizers remain on before or resp), a list page is
 * merged with it (by the selectors ls and fs, either NULL). 0, or -1 with
 * err when the preview cannot keep or merge it. */
int preview_keep(struct overlay *ov, const char *method, const char *path, const char *ls,
                     const char *fs, const cJSON *before, cJSON *resp, char *err, size_t errlen);

/* What the overlay answered (body, or a Status from reason and message),
 * and the request rewritten (own_* hold what the door_req points to). */
struct preview_answer {
    long status;
    cJSON *body;
    char reason[64];
    char message[700];
    int unpredictable;          /* the preview cannot predict this request */
    char *own_path, *own_body;
};

/* 1 when the overlay answered (a filled), 0 to send req (possibly
 * rewritten into a's buffers). path is req's path without its query, jbody
 * its parsed body. preview_answer_free(a) in both cases. */
int preview_before(struct overlay *ov, const struct door *d, struct door_req *req,
                       const char *path, const cJSON *jbody, struct preview_answer *a);
void preview_answer_free(struct preview_answer *a);
/* The overlay's object at path, or NULL. */
const cJSON *preview_held(const struct overlay *ov, const char *path);
/* After a successful request: a write's answer goes in the overlay, a list
 * page (res->json) is merged with it (the selectors read from full_path's
 * query). 0, or -1 with err when the preview cannot keep or merge it. */
int preview_after(struct overlay *ov, const char *method, const char *path,
                      const char *full_path, const cJSON *before, struct rest_result *res,
                      char *err, size_t errlen);
#endif

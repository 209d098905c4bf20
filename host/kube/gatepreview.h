/* gatepreview.h: a preview's copy-on-write overlay (overlay.h) in front of
 * the door, for requests that arrive as HTTP (a shell migration's kubectl
 * through the gateway): what the overlay answers before anything is sent
 * (an object the preview changed, created or deleted), a write to such an
 * object rewritten as a dry run of the overlay's version, each dry-run
 * answer kept, list pages merged with it, and what it cannot predict
 * called so (the migration's preview is then unpredictable, never a
 * failure of the run). The same rules as the Lua side's (lua/
 * luakube_preview.c). Makes no request itself: the gateway sends through
 * the door. Called under the gateway's lock. */
#ifndef COZY_GATEPREVIEW_H
#define COZY_GATEPREVIEW_H
#include <cjson/cJSON.h>
#include <stddef.h>

#include "kube/door.h"
#include "kube/overlay.h"

/* What the overlay answered (body, or a Status from reason and message),
 * and the request rewritten (own_* hold what the door_req points to). */
struct gate_answer {
    long status;
    cJSON *body;
    char reason[64];
    char message[700];
    int unpredictable;          /* the preview cannot predict this request */
    char *own_path, *own_body;
};

/* 1 when the overlay answered (a filled), 0 to send req (possibly
 * rewritten into a's buffers). path is req's path without its query, jbody
 * its parsed body. gatepreview_answer_free(a) in both cases. */
int gatepreview_before(struct overlay *ov, const struct door *d, struct door_req *req,
                       const char *path, const cJSON *jbody, struct gate_answer *a);
void gatepreview_answer_free(struct gate_answer *a);
/* The overlay's object at path, or NULL. */
const cJSON *gatepreview_held(const struct overlay *ov, const char *path);
/* After a successful request: a write's answer goes in the overlay, a list
 * page (res->json) is merged with it (the selectors read from full_path's
 * query). 0, or -1 with err when the preview cannot keep or merge it. */
int gatepreview_after(struct overlay *ov, const char *method, const char *path,
                      const char *full_path, const cJSON *before, struct rest_result *res,
                      char *err, size_t errlen);
#endif

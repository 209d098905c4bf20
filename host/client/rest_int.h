/* rest_int.h: rest.c's retry policy as steps, for the one other driver of
 * attempts, restpool.c (many requests in flight on a multi handle), and
 * rest_http for relay.c, which copies the client's handle. rest_do is
 * these steps in a loop with a sleep; the pool runs the same steps per
 * request, so a request in the pool is retried, given up and told exactly
 * as one sent alone. Nothing outside client/ includes it. */
#ifndef COZY_REST_INT_H
#define COZY_REST_INT_H
#include "client/http.h"
#include "client/rest.h"

/* One logical request's progress through its attempts. method and path
 * are borrowed for its whole life. */
struct rest_try {
    const char *method, *path;
    int idempotent;
    double time_left, start, end;
    int attempt;
    int maybe_applied;
    int raw;                    /* REST_RAW: the body is left unparsed */
};

void rest_try_begin(struct rest_try *t, const char *method, const char *path, int idempotent,
                    double time_left);
/* Before each attempt: 0 with *tmo (this attempt's timeout), or -1 with
 * out filled when the caller's time ran out (nothing may be sent). */
int rest_try_attempt(struct rest_client *c, struct rest_try *t, double *tmo,
                     struct rest_result *out);
/* After an attempt (rc and r from http_request or http_xfer_end): the
 * delay before the next attempt (>= 0, the retry told), or -1 when r is the
 * answer. */
double rest_try_judge(struct rest_client *c, struct rest_try *t, int rc, struct http_response *r);
/* The answer r as the result (r's body moves to out): 0 on a 2xx, -1 with
 * out->err filled. */
int rest_try_finish(struct rest_try *t, struct http_response *r, struct rest_result *out);
struct http_client *rest_http(struct rest_client *c);
#endif

/* restpool.h: many requests in flight at once to the apiserver, bounded.
 * Owns the libcurl multi handle (HTTP/2 streams multiplexed on one
 * connection where the server offers them, else a pool of keep-alive
 * connections no larger than the pool), the slots of the requests in
 * flight, their retries (rest.c's policy, step by step: rest_int.h), and
 * handing the answers out one at a time in the order they completed, and
 * how many are on the wire at once (pace.h: an adaptive bound). A
 * request in the pool is retried, given up and told exactly as rest_do
 * would; the pool never judges what a request may do (the guard and dry
 * run are the caller's, before it submits). Knows no Lua. */
#ifndef COZY_RESTPOOL_H
#define COZY_RESTPOOL_H
#include <stddef.h>

#include "client/rest.h"

/* The most requests on the wire at once: the upper bound of --concurrency. */
#define REST_POOL_MAX 64
/* The most requests one pool holds: a sweep's objects, each waiting for
 * one answer, and the next page of its list. */
#define REST_POOL_SLOTS (REST_POOL_MAX + 1)

struct rest_pool;

/* A pool on c's connection settings (c outlives it). NULL on no memory. */
struct rest_pool *rest_pool_new(struct rest_client *c);
/* Abandons whatever is in flight (nothing is handed out) and frees. */
void rest_pool_free(struct rest_pool *p);
/* Requests held (in flight, waiting to be retried or to be handed out). */
int rest_pool_busy(const struct rest_pool *p);
/* From now on at most ceiling (1..REST_POOL_MAX) attempts are on the wire
 * at once, under the adaptive bound of pace.h unless adapt is 0; what
 * goes past it waits in the pool for its turn. Starts the pace anew (a
 * new sweep). A new pool: REST_POOL_MAX, not adaptive. */
void rest_pool_pace(struct rest_pool *p, int ceiling, int adapt);
/* What the pace saw since rest_pool_pace (pace.h's counters); the pace
 * itself, to name its Exempt levels (pace_exempt) after rest_pool_pace. */
struct pace;
const struct pace *rest_pool_pace_seen(const struct rest_pool *p);
struct pace *rest_pool_pace_of(struct rest_pool *p);
/* Hands one request to the pool, which copies the strings and the body;
 * tag comes back with its answer. 0, or -1 when the pool is full or
 * memory ran out (nothing was sent). time_left as rest_do's. */
int rest_pool_submit(struct rest_pool *p, const char *method, const char *path,
                     const char *accept, const char *content_type, const char *body,
                     size_t body_len, int idempotent, double time_left, void *tag);
/* Waits for the next request to be done (answered, failed or given up
 * after its retries) and hands it out: 1 with *tag and *out (rest_do's
 * result and return value in *rc; release out with rest_result_free), or 0
 * when the pool holds nothing. */
int rest_pool_next(struct rest_pool *p, void **tag, int *rc, struct rest_result *out);
/* rest_pool_next waiting at most max_s seconds: 0 also when nothing was
 * done by then (what is in flight stays in the pool). */
int rest_pool_next_within(struct rest_pool *p, double max_s, void **tag, int *rc,
                          struct rest_result *out);
/* rest_pool_next without waiting: moves what is in flight on as far as it
 * goes now and hands out one that is done (1), or returns 0. */
int rest_pool_collect(struct rest_pool *p, void **tag, int *rc, struct rest_result *out);
/* Moves the requests in flight on until each is on the wire (its
 * connection up, the request written), at most max_s seconds, without
 * waiting for any answer: a caller that goes on with other work leaves
 * the apiserver working on them meanwhile. */
void rest_pool_send(struct rest_pool *p, double max_s);
#endif

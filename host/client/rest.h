/* rest.h: the apiserver REST client in C, shared by the `kube` Lua module
 * and the runner (ledger, lease, events). Owns the retry policy (what is
 * retried, backoff with jitter, Retry-After, attempt and time bounds) and
 * turning a failed response into {code, reason, message, details}. Knows
 * nothing of Lua, dry run or the ledger guard. */
#ifndef COZY_REST_H
#define COZY_REST_H
#include <cjson/cJSON.h>
#include <stddef.h>

#include "client/kubeconfig.h"

struct rest_policy {
    double request_timeout;     /* seconds per attempt */
    int max_attempts;           /* including the first */
    double retry_budget;        /* seconds across all attempts */
    void (*say)(const char *line); /* where a retry, a give-up and an apiserver
                                 * Warning are told, one line each (NULL: nowhere) */
};

struct rest_error {
    long code;                  /* HTTP status; 0 for a transport failure */
    char reason[64];            /* Status.reason, or derived from the code */
    char message[2048];
    cJSON *details;             /* Status.details, owned, may be NULL */
    char *continue_token;       /* Status.metadata.continue (a 410 on a paged
                                 * list carries one), owned, may be NULL */
    int after_retry;            /* an earlier attempt may have been applied: it
                                 * was sent and its connection broke, and the
                                 * request was repeated (idempotent ones only) */
};

struct rest_result {
    long status;
    cJSON *json;                /* parsed body when it is JSON, owned */
    char *body;                 /* raw body, owned, NUL-terminated (mem_free) */
    size_t len;
    char content_type[128];     /* the answer's Content-Type ("" when none) */
    char headers[1024];         /* REST_KEEP_HEADERS: its caching headers (http.h) */
    struct rest_error err;      /* filled when rest_do returns -1 */
};

struct rest_client;

struct rest_client *rest_new(const struct kube_config_opts *o, const struct rest_policy *p,
                             char *err, size_t errlen);
/* rest_new over a config already resolved (a tenant's, from its Secret):
 * takes *cfg over whatever the outcome (it is zeroed). */
struct rest_client *rest_new_config(struct kube_config *cfg, const struct rest_policy *p,
                                    char *err, size_t errlen);
const struct kube_config *rest_config(const struct rest_client *c);

/* One logical request: retried per the policy when its repetition is safe
 * (idempotent) or, for a non-idempotent one, only when it cannot have been
 * applied (a refused connection, a 429). time_left caps the whole call
 * (the migration's deadline); pass HUGE_VAL for none. Once it has run out,
 * no attempt is sent (a Timeout error, never a request with a tiny timeout
 * that may still land). Returns 0 on a 2xx,
 * -1 otherwise with out->err filled. Always release out with
 * rest_result_free. */
int rest_do(struct rest_client *c, const char *method, const char *path, const char *accept,
            const char *content_type, const char *body, size_t body_len, int idempotent,
            double time_left, struct rest_result *out);
void rest_result_free(struct rest_result *r);
/* rest_do with, on every attempt, extra request headers (NULL-terminated
 * "Name: value"; may be NULL) and flags: REST_RAW leaves the body unparsed
 * (json NULL: a relay that hands it on as it came), REST_KEEP_HEADERS keeps
 * the answer's caching headers in out->headers. */
#define REST_RAW 1
#define REST_KEEP_HEADERS 2
int rest_do_ex(struct rest_client *c, const char *method, const char *path, const char *accept,
               const char *content_type, const char *body, size_t body_len, int idempotent,
               double time_left, const char *const *headers, int flags, struct rest_result *out);

/* GET path and return the parsed JSON (NULL with err filled on failure). */
cJSON *rest_get_json(struct rest_client *c, const char *path, const char *accept,
                     double time_left, struct rest_error *err);
/* A GET's result r into its parsed JSON (moved out, r freed): ok says the
 * request succeeded; otherwise, or when the body is not JSON, NULL with err
 * filled (it takes over r's error). */
cJSON *rest_take_json(struct rest_result *r, int ok, const char *path, struct rest_error *err);

long rest_connects(const struct rest_client *c);
/* HTTP requests sent so far, every attempt counted (for tests and benches). */
long rest_requests(const struct rest_client *c);
/* Releases what a rest_error owns (details, continue_token). */
void rest_error_free(struct rest_error *e);
void rest_free(struct rest_client *c);

/* The longest text rest_error_string writes (reason, message and framing). */
#define REST_ERRSTR_MAX (64 + 2048 + 64)
/* "Error from server (NotFound): ..." / "Unable to connect to the server: ..." */
void rest_error_string(const struct rest_error *e, char *buf, size_t len);
void rest_sleep(double s);
#endif

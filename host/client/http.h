/* http.h: the client's HTTPS transport to the apiserver, and the one place
 * a libcurl handle is set up: TLS (verified unless the kubeconfig says
 * otherwise), client certificates, the proxy and the bearer token (a token
 * file wins over an inline token, as in client-go, and is re-read as soon
 * as it changes, as service-account tokens rotate), so every connection
 * the engine opens proves the same identity the same way. An http_client
 * holds one handle, kept alive and reused (HTTP/2 where offered), for
 * requests sent one at a time; it sends exactly one request per call:
 * retrying is the caller's policy (rest.c).
 *
 * That is not the engine's only connection: a pool (restpool.c: many
 * requests on one multi handle), a watch (watch.c) and a relayed stream
 * (relay.c) each run handles copied from a client (http_xfer.h) on a
 * multi handle of their own, so on connections of their own: a watch or a
 * relayed log lasts minutes and is read from its own loop or thread, and
 * a libcurl multi handle is driven by one thread at a time, so sharing one
 * would need an I/O thread to serve them all, and would queue a sweep
 * behind a stream. No libcurl type crosses this interface: a failure is an
 * http_failure, the client is opaque. */
#ifndef COZY_HTTP_H
#define COZY_HTTP_H
#include <stddef.h>

#include "client/kubeconfig.h"

/* How a request failed before an answer arrived: what rest.c's retry and
 * error policy branch on (http.c maps libcurl's codes to it). */
enum http_failure {
    HTTP_FAIL_NONE = 0,     /* an HTTP response arrived */
    HTTP_FAIL_UNREACHED,    /* no connection, name or TLS handshake: never reached the server */
    HTTP_FAIL_BROKEN,       /* the connection broke on the way (send, receive, HTTP/2 stream) */
    HTTP_FAIL_TIMEOUT,
    HTTP_FAIL_REWIND,       /* libcurl's resend of a body that must not go twice, refused */
    HTTP_FAIL_OTHER,        /* TLS verification, memory, a bad argument ...: not retried */
};

struct http_response {
    long status;            /* 0 when no HTTP response arrived */
    char *body;             /* NUL-terminated; may be empty; counted (mem.h): mem_free it */
    size_t len;
    char content_type[128];
    double retry_after;     /* seconds from Retry-After, -1 if absent */
    enum http_failure failure;
    char pf_level[48];      /* X-Kubernetes-PF-PriorityLevel-UID: the API Priority
                             * and Fairness level that admitted or refused it */
    int sent;               /* the request (or part of its body) may have reached the server */
    int resent;             /* libcurl re-sent the request on a fresh connection
                             * because the reused one died before any answer */
    int too_large;          /* the body passed the memory cap (mem.h) */
    char error[1400];       /* libcurl's message for transport errors (TLS ones naming the kubeconfig fields) */
    int keep_headers;       /* http_set_next asked for the caching headers below */
    char headers[1024];     /* ETag, Cache-Control, Last-Modified, Expires of the answer,
                             * "Name: value\n" each (a relay hands them on) */
};

struct http_client;

/* say (may be NULL) is told each Warning header an answer carries, one
 * line "apiserver warning: TEXT". */
struct http_client *http_client_new(const struct kube_config *cfg, void (*say)(const char *line),
                                    char *err, size_t errlen);
/* method "GET"/"POST"/...; path includes the query string; accept and
 * content_type may be NULL. timeout_s bounds the whole request. replayable
 * says whether libcurl may send the body a second time on its own (it
 * silently resends a request whose reused connection died before any
 * response byte arrived): for a request that is not, the resend is refused
 * and the call fails with HTTP_FAIL_REWIND instead. Returns 0 when an
 * HTTP response (any status) arrived, -1 on a transport error (the details
 * in resp). resp must be released with http_response_free. */
int http_request(struct http_client *c, const char *method, const char *path,
                 const char *accept, const char *content_type, const char *body,
                 size_t body_len, int replayable, double timeout_s,
                 struct http_response *resp);
void http_response_free(struct http_response *r);
/* For the next request sent on c only (a relay's, under its lock): extra
 * request headers ("Name: value", NULL-terminated; one holding a line break
 * is dropped) and whether to keep the answer's caching headers. */
void http_set_next(struct http_client *c, const char *const *headers, int keep_headers);

/* Connections libcurl opened so far (1 when keep-alive works). */
long http_connects(struct http_client *c);
/* Requests handed to libcurl so far (every attempt counts). */
long http_requests(struct http_client *c);
void http_client_free(struct http_client *c);
#endif

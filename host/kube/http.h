/* http.h: the one HTTPS connection a migration talks to the apiserver over.
 * Owns the libcurl handle (kept alive and reused for every request, HTTP/2
 * where offered), TLS (verified unless the kubeconfig says otherwise), client
 * certificates, and the bearer token (a token file wins over an inline
 * token, as in client-go, and is re-read as soon as it changes, as
 * service-account tokens rotate). Sends exactly one request
 * per call: retrying is the caller's policy (kube.c). */
#ifndef COZY_HTTP_H
#define COZY_HTTP_H
#include <stddef.h>
#include <curl/curl.h>

#include "kube/kubeconfig.h"

struct http_response {
    long status;            /* 0 when no HTTP response arrived */
    char *body;             /* NUL-terminated; may be empty; counted (mem.h): mem_free it */
    size_t len;
    size_t cap;             /* allocated size of body (grows geometrically) */
    char content_type[128];
    double retry_after;     /* seconds from Retry-After, -1 if absent */
    char pf_level[48];      /* X-Kubernetes-PF-PriorityLevel-UID: the API Priority
                             * and Fairness level that admitted or refused it */
    int transport_error;    /* a CURLcode, 0 when a response arrived */
    int sent;               /* the request (or part of its body) may have reached the server */
    int resent;             /* libcurl re-sent the request on a fresh connection
                             * because the reused one died before any answer */
    int too_large;          /* the body passed the memory cap (mem.h) */
    char error[1400];       /* libcurl's message for transport errors (TLS ones naming the kubeconfig fields) */
    int keep_headers;       /* http_set_next asked for the caching headers below */
    char headers[1024];     /* ETag, Cache-Control, Last-Modified, Expires of the answer,
                             * "Name: value\n" each (a relay hands them on) */
    void (*say)(const char *line); /* the client's: where a Warning header goes */
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
 * and the call fails with CURLE_SEND_FAIL_REWIND instead. Returns 0 when an
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

/* The same request as a transfer a libcurl multi handle runs (restpool.c
 * owns the multi handle and the waiting). http_handle_new: a handle with
 * the client's TLS, credentials and proxy (curl_easy_cleanup it), which
 * waits to multiplex on a connection being set up. http_xfer_start: h set
 * up for one request into resp (body and the other strings must outlive
 * the transfer); NULL with resp filled when it cannot be (nothing sent).
 * http_xfer_end: after the multi handle finished it with curl_code (a
 * CURLcode), frees x and fills resp; 0 when an HTTP response arrived, -1
 * on a transport error, as http_request. */
struct http_xfer;
CURL *http_handle_new(struct http_client *c);
struct http_xfer *http_xfer_start(struct http_client *c, CURL *h, const char *method,
                                  const char *path, const char *accept, const char *content_type,
                                  const char *body, size_t body_len, int replayable,
                                  double timeout_s, struct http_response *resp);
int http_xfer_end(struct http_client *c, struct http_xfer *x, int curl_code);
/* A streamed GET (a watch): the transfer of http_xfer_start, except that
 * each piece of a 2xx answer's body goes to on_data as it arrives, never
 * kept (a non-2xx body is kept in resp as usual, for its Status). on_data
 * returns 0 to go on, non-zero to end the transfer (a CURLE_WRITE_ERROR).
 * End it with http_xfer_end. h must serve streams only, or be set up again
 * by http_xfer_start. */
struct http_xfer *http_stream_start(struct http_client *c, CURL *h, const char *path,
                                    double timeout_s,
                                    int (*on_data)(const char *p, size_t n, void *ud), void *ud,
                                    struct http_response *resp);
/* Connections libcurl opened so far (1 when keep-alive works). */
long http_connects(struct http_client *c);
/* Requests handed to libcurl so far (every attempt counts). */
long http_requests(struct http_client *c);
void http_client_free(struct http_client *c);
#endif

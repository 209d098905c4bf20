/* http_xfer.h: http.h's request as one transfer of a libcurl multi handle,
 * for the three files that drive one (restpool.c, watch.c, relay.c), each
 * on a connection of its own (http.h says why): the only interface of
 * http.c with libcurl types in it, and the client's own (nothing outside
 * client/ includes it, nor names libcurl). */
#ifndef COZY_HTTP_XFER_H
#define COZY_HTTP_XFER_H
#include <stddef.h>
#include <curl/curl.h>

#include "client/http.h"

struct http_xfer;
/* The same request as a transfer a libcurl multi handle runs (restpool.c
 * owns the multi handle and the waiting). http_handle_new: a handle with
 * the client's TLS, credentials and proxy (curl_easy_cleanup it), which
 * waits to multiplex on a connection being set up. http_xfer_start: h set
 * up for one request into resp (body and the other strings must outlive
 * the transfer); NULL with resp filled when it cannot be (nothing sent).
 * http_xfer_end: after the multi handle finished it with curl_code (a
 * CURLcode), frees x and fills resp; 0 when an HTTP response arrived, -1
 * on a transport error, as http_request. */
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
#endif

/* relay.c: a streamed answer for a relay to hand on (see relay.h).
 *
 * Owns the upstream transfer of one watch or followed log: a handle copied
 * from the client's (its TLS, token and proxy), driven by a multi handle of
 * its own from the connection thread that reads it, its headers watched for
 * their end (a watch sends them at once and its first event much later),
 * its body kept only until read. Must never block past a wake-up period
 * without looking at the relay's closing flag, nor outlive its answer. */
#include "client/relay.h"

#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "client/http_xfer.h"
#include "client/rest_int.h"

#define WAKE_MS 200

struct relay {
    struct http_client *http;
    CURLM *m;
    CURL *h;
    struct http_xfer *x;
    struct http_response resp;   /* what http.c's transfer keeps (unused body) */
    struct buf pending;          /* body bytes not read yet */
    int headers_done, done;
    CURLcode code;
    char ctype[128];
    long status;
};

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
    struct relay *s = ud;
    if (buf_add(&s->pending, p, size * n) != 0)
        return 0;
    s->headers_done = 1;
    return size * n;
}

static size_t on_head(char *p, size_t size, size_t n, void *ud)
{
    struct relay *s = ud;
    size_t len = size * n;
    if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
        s->ctype[0] = '\0';
        return len;
    }
    if (len <= 2 && (p[0] == '\r' || p[0] == '\n')) {
        long code = 0;
        curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &code);
        if (code >= 200) {
            s->status = code;
            s->headers_done = 1;
        }
        return len;
    }
    if (len > 13 && strncasecmp(p, "Content-Type:", 13) == 0) {
        const char *v = p + 13;
        size_t vl = len - 13;
        while (vl && (*v == ' ' || *v == '\t')) {
            v++;
            vl--;
        }
        while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
            vl--;
        snprintf(s->ctype, sizeof s->ctype, "%.*s", (int)vl, v);
    }
    return len;
}

struct relay *relay_start(struct rest_client *rest, const char *path,
                                    const char *accept, double left, char *err, size_t errlen)
{
    struct relay *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->http = rest_http(rest);
    s->m = curl_multi_init();
    s->h = s->m ? http_handle_new(s->http) : NULL;
    if (!s->h) {
        snprintf(err, errlen, "out of memory");
        relay_close(s);
        return NULL;
    }
    s->x = http_xfer_start(s->http, s->h, "GET", path, accept, NULL, NULL, 0, 1,
                           isinf(left) ? 0 : left, &s->resp);
    if (!s->x) {
        snprintf(err, errlen, "%s", s->resp.error);
        relay_close(s);
        return NULL;
    }
    if (curl_easy_setopt(s->h, CURLOPT_WRITEFUNCTION, on_data) != CURLE_OK ||
        curl_easy_setopt(s->h, CURLOPT_WRITEDATA, s) != CURLE_OK ||
        curl_easy_setopt(s->h, CURLOPT_HEADERFUNCTION, on_head) != CURLE_OK ||
        curl_easy_setopt(s->h, CURLOPT_HEADERDATA, s) != CURLE_OK ||
        curl_easy_setopt(s->h, CURLOPT_PIPEWAIT, 0L) != CURLE_OK ||
        curl_multi_add_handle(s->m, s->h) != CURLM_OK) {
        snprintf(err, errlen, "libcurl refused the stream's settings");
        relay_close(s);
        return NULL;
    }
    return s;
}

/* One round of the transfer, waiting up to WAKE_MS for something. */
static void pump(struct relay *s)
{
    int running = 0;
    curl_multi_perform(s->m, &running);
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(s->m, &left)))
        if (msg->msg == CURLMSG_DONE && msg->easy_handle == s->h) {
            s->done = 1;
            s->code = msg->data.result;
        }
    if (!s->done && !s->pending.len)
        curl_multi_poll(s->m, NULL, 0, WAKE_MS, NULL);
}

int relay_headers(struct relay *s, const atomic_int *closing, long *status,
                       const char **ctype, char *err, size_t errlen)
{
    while (!s->headers_done && !s->done) {
        if (atomic_load(closing)) {
            snprintf(err, errlen, "the gateway is closing");
            return -1;
        }
        pump(s);
    }
    if (!s->headers_done) {
        snprintf(err, errlen, "%s", curl_easy_strerror(s->code));
        return -1;
    }
    if (!s->status)
        curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &s->status);
    *status = s->status;
    *ctype = s->ctype;
    return 0;
}

ssize_t relay_read(struct relay *s, char *buf, size_t max, const atomic_int *closing)
{
    for (;;) {
        if (s->pending.len) {
            size_t n = s->pending.len < max ? s->pending.len : max;
            memcpy(buf, s->pending.p, n);
            buf_consume(&s->pending, n);
            return (ssize_t)n;
        }
        if (s->done)
            return s->code == CURLE_OK ? 0 : -1;
        if (atomic_load(closing))
            return -1;
        pump(s);
    }
}

void relay_close(struct relay *s)
{
    if (!s)
        return;
    if (s->m && s->h)
        curl_multi_remove_handle(s->m, s->h);
    if (s->x)
        http_xfer_end(s->http, s->x, s->done ? (int)s->code : (int)CURLE_ABORTED_BY_CALLBACK);
    http_response_free(&s->resp);
    if (s->h)
        curl_easy_cleanup(s->h);
    if (s->m)
        curl_multi_cleanup(s->m);
    buf_release(&s->pending);
    free(s);
}

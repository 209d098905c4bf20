/* http.c: the client's transport (see http.h): its easy handle, reused,
 * and the handles it copies for the pool, a watch and a relay.
 *
 * Owns TLS and credentials for every request on every handle, feeding the request body to
 * libcurl (and refusing libcurl's own silent resend of a body that must not
 * be sent twice), and the capture of the status, body, Content-Type,
 * Retry-After and Warning headers. Must never retry, interpret a status, or
 * log a credential: retry policy and error meaning belong to rest.c. */
#include "client/http.h"
#include "client/http_xfer.h"

#include <curl/curl.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "base/mem.h"
#include "base/util.h"

struct http_client {
    CURL *curl;
    CURL *tmpl;             /* configured, never run: what pool handles copy */
    char *server;
    char *token;            /* current bearer token, if any */
    char *token_file;
    double token_read_at;
    struct timespec token_mtime;    /* of the file when last read */
    off_t token_size;
    long connects;
    long requests;
    struct curl_slist *connect_to;
    char *proxy;            /* proxy-url as libcurl takes it */
    char proxy_shown[300];  /* ... as an error names it: the URL without its user part */
    char tls_hint[900];     /* which kubeconfig fields a TLS failure points to */
    void (*say)(const char *line);
    const char *const *next_headers; /* http_set_next: for the next request only */
    int next_keep;
};

void http_set_next(struct http_client *c, const char *const *headers, int keep_headers)
{
    c->next_headers = headers;
    c->next_keep = keep_headers;
}

/* The request body, handed to libcurl through a read callback so that a
 * rewind (libcurl resending the request on a fresh connection) goes through
 * on_seek, which refuses it for a request that is not replayable. */
struct upload {
    const char *data;
    size_t len, off;
    int replayable;
    int refused;            /* a resend was refused */
};

static size_t on_read(char *buf, size_t size, size_t n, void *ud)
{
    struct upload *u = ud;
    size_t want = size * n, left = u->len - u->off;
    if (want > left)
        want = left;
    memcpy(buf, u->data + u->off, want);
    u->off += want;
    return want;
}

static int on_seek(void *ud, curl_off_t offset, int origin)
{
    struct upload *u = ud;
    if (origin != SEEK_SET || offset < 0 || (size_t)offset > u->len)
        return CURL_SEEKFUNC_FAIL;
    if (!u->replayable && u->off > 0) {
        /* The body went out once already: the server may have acted on
         * it. Fail the transfer rather than let libcurl send it again. */
        u->refused = 1;
        return CURL_SEEKFUNC_FAIL;
    }
    u->off = (size_t)offset;
    return CURL_SEEKFUNC_OK;
}

/* One request in flight: what the handle points to until xfer_finish. */
struct http_xfer {
    CURL *h;
    char *url;
    struct curl_slist *hdrs;
    struct upload up;
    struct http_response *r;
    struct buf body;        /* the answer's body as it arrives, handed to r at the end */
    void (*say)(const char *line); /* the client's: where a Warning header goes */
    int (*on_data)(const char *p, size_t n, void *ud); /* a stream's (http_stream_start) */
    void *data_ud;
};

static int curl_ready;

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    struct http_xfer *x = ud;
    /* Counted against the migration's memory cap (buf.h): a response too
     * large for it ends the transfer instead of the process. */
    if (buf_add(&x->body, p, size * n) != 0) {
        x->r->too_large = 1;
        return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
    }
    return size * n;
}

/* The body so far becomes the response's (once): "" after a refusal, so
 * a response's body is never NULL once it had memory for one. */
static void hand_body(struct http_xfer *x)
{
    if (x->r->body)
        return;
    if (x->body.failed)
        buf_reset(&x->body);
    x->r->body = buf_detach(&x->body, &x->r->len);
}

/* libcurl resends a request by itself when a reused connection dies
 * before any response byte; it says so only in its verbose text. Counting
 * it lets the caller log that retry like its own. */
static int on_debug(CURL *h, curl_infotype type, char *data, size_t size, void *ud)
{
    (void)h;
    struct http_xfer *x = ud;
    struct http_response *r = x ? x->r : NULL;
    if (type != CURLINFO_TEXT || !r)
        return 0;
    if ((size >= 15 && strncmp(data, "Connection died", 15) == 0) ||
        (size >= 14 && strncmp(data, "REFUSED_STREAM", 14) == 0))
        r->resent++;
    return 0;
}

static void trim_copy(char *dst, size_t cap, const char *src, size_t len)
{
    while (len && isspace((unsigned char)*src)) {
        src++;
        len--;
    }
    while (len && isspace((unsigned char)src[len - 1]))
        len--;
    if (len >= cap)
        len = cap - 1;
    memcpy(dst, src, len);
    dst[len] = '\0';
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    struct http_xfer *x = ud;
    struct http_response *r = x->r;
    size_t len = size * n;
    /* A new status line (after a 100-continue or a redirect) starts over. */
    if (len > 5 && strncmp(p, "HTTP/", 5) == 0) {
        r->retry_after = -1;
        r->content_type[0] = '\0';
        r->pf_level[0] = '\0';
        return len;
    }
    char *colon = memchr(p, ':', len);
    if (!colon)
        return len;
    size_t klen = (size_t)(colon - p);
    const char *v = colon + 1;
    size_t vlen = len - klen - 1;
    if (klen == 12 && strncasecmp(p, "Content-Type", 12) == 0) {
        trim_copy(r->content_type, sizeof r->content_type, v, vlen);
    } else if (klen == 11 && strncasecmp(p, "Retry-After", 11) == 0) {
        char buf[64];
        trim_copy(buf, sizeof buf, v, vlen);
        char *end;
        double s = strtod(buf, &end);
        /* An HTTP-date form is rare from the apiserver; treat it as 1s. */
        r->retry_after = (end != buf && s >= 0) ? s : 1;
    } else if (klen == 33 && strncasecmp(p, "X-Kubernetes-PF-PriorityLevel-UID", 33) == 0) {
        trim_copy(r->pf_level, sizeof r->pf_level, v, vlen);
    } else if (r->keep_headers &&
               ((klen == 4 && strncasecmp(p, "ETag", 4) == 0) ||
                (klen == 13 && strncasecmp(p, "Cache-Control", 13) == 0) ||
                (klen == 13 && strncasecmp(p, "Last-Modified", 13) == 0) ||
                (klen == 7 && strncasecmp(p, "Expires", 7) == 0))) {
        char val[512];
        trim_copy(val, sizeof val, v, vlen);
        size_t used = strlen(r->headers);
        snprintf(r->headers + used, sizeof r->headers - used, "%.*s: %s\n", (int)klen, p, val);
    } else if (klen == 7 && strncasecmp(p, "Warning", 7) == 0) {
        char buf[1024], line[1100];
        trim_copy(buf, sizeof buf, v, vlen);
        snprintf(line, sizeof line, "apiserver warning: %s", buf);
        if (x->say)
            x->say(line);
    }
    return len;
}

/* A token file (tokenFile, or the service account's, which the kubelet
 * rotates) is read again as soon as it changes, and at least once a minute
 * in case a change kept the same size and time stamp. */
static int load_token(struct http_client *c)
{
    if (!c->token_file)
        return 0;
    struct stat st;
    int have_st = stat(c->token_file, &st) == 0;
    int changed = have_st && (st.st_mtim.tv_sec != c->token_mtime.tv_sec ||
                              st.st_mtim.tv_nsec != c->token_mtime.tv_nsec ||
                              st.st_size != c->token_size);
    if (c->token && !changed && now_mono() - c->token_read_at < 60)
        return 0;
    if (have_st) {
        c->token_mtime = st.st_mtim;
        c->token_size = st.st_size;
    }
    size_t len;
    char *t = util_read_file(c->token_file, &len);
    if (!t) {
        /* Keep using the previous token through a rotation hiccup. */
        if (c->token)
            return 0;
        return -1;
    }
    while (len && isspace((unsigned char)t[len - 1]))
        t[--len] = '\0';
    free(c->token);
    c->token = t;
    c->token_read_at = now_mono();
    return 0;
}

static int set_blob(CURL *curl, CURLoption opt, const char *data, size_t len)
{
    struct curl_blob b = {.data = (void *)data, .len = len, .flags = CURL_BLOB_COPY};
    return curl_easy_setopt(curl, opt, &b) == CURLE_OK ? 0 : -1;
}

/* tls-server-name: the URL names the certificate's host (so SNI and
 * verification use it) and CONNECT_TO sends the connection to the real one. */
static int use_server_name(struct http_client *c, const char *name, char *err, size_t errlen)
{
    const char *hp = strstr(c->server, "://");
    hp = hp ? hp + 3 : c->server;
    const char *slash = strchr(hp, '/');
    size_t hlen = slash ? (size_t)(slash - hp) : strlen(hp);
    char host[512], port[16] = "443";
    if (hlen >= sizeof host) {
        snprintf(err, errlen, "server %s: host too long", c->server);
        return -1;
    }
    memcpy(host, hp, hlen);
    host[hlen] = '\0';
    char *colon = strrchr(host, ':');
    if (colon && !strchr(colon, ']')) {
        snprintf(port, sizeof port, "%s", colon + 1);
        *colon = '\0';
    }
    char conn[1200], url[1200];
    snprintf(conn, sizeof conn, "%s:%s:%s:%s", name, port, host, port);
    snprintf(url, sizeof url, "https://%s:%s%s", name, port, slash ? slash : "");
    struct curl_slist *l = curl_slist_append(NULL, conn);
    char *nu = strdup(url);
    if (!l || !nu || curl_easy_setopt(c->curl, CURLOPT_CONNECT_TO, l) != CURLE_OK) {
        curl_slist_free_all(l);
        free(nu);
        snprintf(err, errlen, "cannot apply tls-server-name %s", name);
        return -1;
    }
    c->connect_to = l;
    free(c->server);
    c->server = nu;
    return 0;
}

struct http_client *http_client_new(const struct kube_config *cfg, void (*say)(const char *line),
                                    char *err, size_t errlen)
{
    if (!curl_ready) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
            snprintf(err, errlen, "libcurl failed to initialise");
            return NULL;
        }
        curl_ready = 1;
    }
    struct http_client *c = calloc(1, sizeof *c);
    if (c)
        c->say = say;
    if (!c || !(c->curl = curl_easy_init()) || !(c->server = strdup(cfg->server))) {
        snprintf(err, errlen, "out of memory");
        http_client_free(c);
        return NULL;
    }
    CURL *h = c->curl;
    int bad = 0;
    bad |= curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "") != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_USERAGENT, "cozy-migrate/1") != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_DEBUGFUNCTION, on_debug) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_VERBOSE, 1L) != CURLE_OK;
    if (cfg->insecure) {
        bad |= curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L) != CURLE_OK;
        bad |= curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L) != CURLE_OK;
    }
    if (cfg->ca_pem)
        bad |= set_blob(h, CURLOPT_CAINFO_BLOB, cfg->ca_pem, cfg->ca_len);
    else if (cfg->ca_file)
        bad |= curl_easy_setopt(h, CURLOPT_CAINFO, cfg->ca_file) != CURLE_OK;
    if (cfg->cert_pem)
        bad |= set_blob(h, CURLOPT_SSLCERT_BLOB, cfg->cert_pem, cfg->cert_len);
    else if (cfg->cert_file)
        bad |= curl_easy_setopt(h, CURLOPT_SSLCERT, cfg->cert_file) != CURLE_OK;
    if (cfg->key_pem)
        bad |= set_blob(h, CURLOPT_SSLKEY_BLOB, cfg->key_pem, cfg->key_len);
    else if (cfg->key_file)
        bad |= curl_easy_setopt(h, CURLOPT_SSLKEY, cfg->key_file) != CURLE_OK;
    /* proxy-url, as client-go takes it: every request through it, whatever
     * the environment's proxies and NO_PROXY say ("" disables those). A
     * socks5 proxy resolves the server's name itself, as Go's does. */
    if (cfg->proxy_url) {
        int socks = strncmp(cfg->proxy_url, "socks5://", 9) == 0;
        size_t n = strlen(cfg->proxy_url) + 2;
        if (!(c->proxy = malloc(n))) {
            snprintf(err, errlen, "out of memory");
            http_client_free(c);
            return NULL;
        }
        snprintf(c->proxy, n, "%s%s", socks ? "socks5h://" : "", socks ? cfg->proxy_url + 9
                                                                        : cfg->proxy_url);
        bad |= curl_easy_setopt(h, CURLOPT_PROXY, c->proxy) != CURLE_OK;
        /* A proxy URL may carry a password: an error shows it without. */
        const char *sep = strstr(cfg->proxy_url, "://"), *at = strrchr(cfg->proxy_url, '@');
        if (sep && at && at > sep)
            snprintf(c->proxy_shown, sizeof c->proxy_shown, "%.*s://***@%.200s",
                     (int)(sep - cfg->proxy_url), cfg->proxy_url, at + 1);
        else
            snprintf(c->proxy_shown, sizeof c->proxy_shown, "%.280s", cfg->proxy_url);
        bad |= curl_easy_setopt(h, CURLOPT_NOPROXY, "") != CURLE_OK;
    }
    if (bad) {
        snprintf(err, errlen, "libcurl refused the TLS or proxy settings for %s", cfg->server);
        http_client_free(c);
        return NULL;
    }
    if (cfg->in_cluster)
        snprintf(c->tls_hint, sizeof c->tls_hint, "the service account's CA %.200s",
                 cfg->ca_file ? cfg->ca_file : "(none: the system roots)");
    else
        snprintf(c->tls_hint, sizeof c->tls_hint, "cluster \"%.100s\" (%s%.200s%s) and user "
                 "\"%.100s\" (client certificate) of context \"%.100s\" in %.200s",
                 cfg->cluster ? cfg->cluster : "?",
                 cfg->ca_pem ? "certificate-authority-data" : cfg->ca_file ? "certificate-authority "
                                                                           : "no CA: the system roots",
                 cfg->ca_file && !cfg->ca_pem ? cfg->ca_file : "", cfg->tls_server_name ?
                 ", tls-server-name" : "", cfg->user ? cfg->user : "?",
                 cfg->context ? cfg->context : "?", cfg->source ? cfg->source : "?");
    if (cfg->tls_server_name && use_server_name(c, cfg->tls_server_name, err, errlen) != 0) {
        http_client_free(c);
        return NULL;
    }
    /* Copied before any request sets per-request options on c->curl. */
    if (!(c->tmpl = curl_easy_duphandle(h))) {
        snprintf(err, errlen, "out of memory");
        http_client_free(c);
        return NULL;
    }
    /* client-go's rule: a tokenFile wins over an inline token. */
    if (!cfg->token_file && cfg->token && !(c->token = strdup(cfg->token))) {
        snprintf(err, errlen, "out of memory");
        http_client_free(c);
        return NULL;
    }
    if (cfg->token_file) {
        if (!(c->token_file = strdup(cfg->token_file)) || load_token(c) != 0) {
            snprintf(err, errlen, "%s: cannot read token: %s", cfg->token_file, strerror(errno));
            http_client_free(c);
            return NULL;
        }
    }
    return c;
}

/* One transfer's state while libcurl runs it: the URL, the header list and
 * the upload the handle points to, and the response being filled. */

/* A stream's body: a 2xx answer's goes to its reader as it comes; any
 * other is kept for its Status. */
static size_t on_stream(char *p, size_t size, size_t n, void *ud)
{
    struct http_xfer *x = ud;
    long status = 0;
    curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
    if (status < 200 || status > 299)
        return on_body(p, size, n, x);
    return x->on_data(p, size * n, x->data_ud) == 0 ? size * n : 0;
}

/* Sets h up for one request into r (x keeps what h points to until
 * xfer_finish). CURLE_OK, or why not with r->error filled (nothing is sent
 * then). */
static CURLcode xfer_setup(struct http_client *c, struct http_xfer *x, CURL *h, const char *method,
                      const char *path, const char *accept, const char *content_type,
                      const char *body, size_t body_len, int replayable, double timeout_s,
                      struct http_response *r)
{
    memset(x, 0, sizeof *x);
    x->h = h;
    x->r = r;
    x->say = c->say;
    memset(r, 0, sizeof *r);
    r->retry_after = -1;
    if (buf_add(&x->body, "", 0) != 0) {
        snprintf(r->error, sizeof r->error, "out of memory");
        return CURLE_OUT_OF_MEMORY;
    }
    /* A header value is one line: a CR or LF would start another header. */
    if ((accept && strpbrk(accept, "\r\n")) || (content_type && strpbrk(content_type, "\r\n"))) {
        snprintf(r->error, sizeof r->error, "a header value holds a line break");
        return CURLE_BAD_FUNCTION_ARGUMENT;
    }
    load_token(c);
    size_t ulen = strlen(c->server) + strlen(path) + 1;
    char *url = x->url = malloc(ulen);
    if (!url) {
        snprintf(r->error, sizeof r->error, "out of memory");
        return CURLE_OUT_OF_MEMORY;
    }
    snprintf(url, ulen, "%s%s", c->server, path);

    struct curl_slist *hdrs = NULL, *t;
    char line[8192];
    snprintf(line, sizeof line, "Accept: %s", accept ? accept : "application/json");
    if ((t = curl_slist_append(hdrs, line)))
        hdrs = t;
    if (content_type) {
        snprintf(line, sizeof line, "Content-Type: %s", content_type);
        if ((t = curl_slist_append(hdrs, line)))
            hdrs = t;
    }
    if (c->token) {
        snprintf(line, sizeof line, "Authorization: Bearer %s", c->token);
        if ((t = curl_slist_append(hdrs, line)))
            hdrs = t;
    }
    for (const char *const *e = c->next_headers; e && *e; e++)
        if (!strpbrk(*e, "\r\n") && strncasecmp(*e, "Authorization:", 14) != 0 &&
            (t = curl_slist_append(hdrs, *e)))
            hdrs = t;
    r->keep_headers = c->next_keep;
    c->next_headers = NULL;
    c->next_keep = 0;
    /* Without this libcurl sends Expect: 100-continue on large bodies and
     * waits a round trip for nothing. */
    if ((t = curl_slist_append(hdrs, "Expect:")))
        hdrs = t;
    x->hdrs = hdrs;

    /* Rounded up: a request cut short of the migration's deadline by the
     * rounding frees its slot before the deadline, and fleet.each sends the
     * next object's write with under a millisecond left; it lands on the
     * apiserver though nothing may be sent at the deadline (door.c). */
    long ms = timeout_s > 0 ? (long)ceil(timeout_s * 1000) : 0;
    if (timeout_s > 0 && ms < 1)
        ms = 1;
    int bad = 0;
    bad |= curl_easy_setopt(h, CURLOPT_URL, url) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ms) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_WRITEDATA, x) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_HEADERDATA, x) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_DEBUGDATA, x) != CURLE_OK;
    x->up = (struct upload){.data = body ? body : "", .len = body ? body_len : 0,
                            .replayable = replayable};
    if (!body && strcmp(method, "POST") != 0) {
        /* GET, and DELETE without options: no body, no Content-Type. */
        bad |= curl_easy_setopt(h, CURLOPT_HTTPGET, 1L) != CURLE_OK;
        bad |= curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST,
                                strcmp(method, "GET") == 0 ? NULL : method) != CURLE_OK;
    } else {
        bad |= curl_easy_setopt(h, CURLOPT_POST, 1L) != CURLE_OK;
        bad |= curl_easy_setopt(h, CURLOPT_POSTFIELDS, NULL) != CURLE_OK;
        bad |= curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read) != CURLE_OK;
        bad |= curl_easy_setopt(h, CURLOPT_READDATA, &x->up) != CURLE_OK;
        bad |= curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek) != CURLE_OK;
        bad |= curl_easy_setopt(h, CURLOPT_SEEKDATA, &x->up) != CURLE_OK;
        bad |= curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->up.len) != CURLE_OK;
        bad |= curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST,
                                strcmp(method, "POST") == 0 ? NULL : method) != CURLE_OK;
    }
    c->requests++;
    if (bad) {
        snprintf(r->error, sizeof r->error, "%s", curl_easy_strerror(CURLE_BAD_FUNCTION_ARGUMENT));
        return CURLE_BAD_FUNCTION_ARGUMENT;
    }
    return CURLE_OK;
}

/* What rest.c's policy needs to know of a libcurl code. */
static enum http_failure failure_of(CURLcode rc)
{
    switch (rc) {
    case CURLE_OK:
        return HTTP_FAIL_NONE;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_SSL_CONNECT_ERROR:
        return HTTP_FAIL_UNREACHED;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return HTTP_FAIL_BROKEN;
    case CURLE_OPERATION_TIMEDOUT:
        return HTTP_FAIL_TIMEOUT;
    case CURLE_SEND_FAIL_REWIND:
        return HTTP_FAIL_REWIND;
    default:
        return HTTP_FAIL_OTHER;
    }
}

/* After libcurl finished x with rc (or setup failed: rc is then r's own
 * error): releases what the handle pointed to and fills the response.
 * Returns 0 when an HTTP response arrived, -1 otherwise. */
static int xfer_finish(struct http_client *c, struct http_xfer *x, CURLcode rc)
{
    CURL *h = x->h;
    struct http_response *r = x->r;
    /* The upload state lives in x only. */
    curl_easy_setopt(h, CURLOPT_READDATA, NULL);
    curl_easy_setopt(h, CURLOPT_SEEKDATA, NULL);
    curl_easy_setopt(h, CURLOPT_DEBUGDATA, NULL);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, NULL);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, NULL);
    if (rc == CURLE_SEND_FAIL_REWIND)
        r->resent = 0; /* refused: nothing was re-sent */
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(x->hdrs);
    x->hdrs = NULL;
    free(x->url);
    x->url = NULL;
    hand_body(x);
    long nconn = 0;
    if (curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &nconn) == CURLE_OK)
        c->connects += nconn;
    if (rc != CURLE_OK) {
        r->failure = failure_of(rc);
        /* TLS failures in the words of the configuration that causes them. */
        int tls = rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE ||
                  rc == CURLE_SSL_CERTPROBLEM || rc == CURLE_SSL_CONNECT_ERROR ||
                  rc == CURLE_SSL_ISSUER_ERROR;
        if (r->too_large)
            snprintf(r->error, sizeof r->error, "the response does not fit in the migration's "
                     "memory cap");
        else if (tls)
            snprintf(r->error, sizeof r->error, "TLS with %.200s failed: %.100s%s: check %s", c->server,
                     curl_easy_strerror(rc),
                     rc == CURLE_PEER_FAILED_VERIFICATION ? " (the server's certificate is not "
                                                            "signed by the CA, or not for this name)"
                                                          : "",
                     c->tls_hint);
        else if (c->proxy && (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_PROXY ||
                              rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR ||
                              rc == CURLE_GOT_NOTHING))
            /* Every request goes through the proxy: its failure is the
             * proxy's until shown otherwise, and kubectl's words do not
             * say so. */
            snprintf(r->error, sizeof r->error, "proxy-url %s (the kubeconfig's proxy to "
                     "%.200s) failed: %s", c->proxy_shown, c->server, curl_easy_strerror(rc));
        else
            snprintf(r->error, sizeof r->error, "%s", curl_easy_strerror(rc));
        curl_off_t upn = 0;
        /* Body bytes read by libcurl may have gone out even when the
         * upload counter says otherwise; a refused resend surely did. */
        r->sent = (curl_easy_getinfo(h, CURLINFO_SIZE_UPLOAD_T, &upn) == CURLE_OK && upn > 0) ||
                  x->up.off > 0 || x->up.refused;
        return -1;
    }
    r->sent = 1;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    return 0;
}

/* A request that could not be set up: nothing was sent. */
static void setup_failed(struct http_client *c, struct http_xfer *x, CURLcode e)
{
    if (x->url || x->hdrs)
        xfer_finish(c, x, e);
    hand_body(x);
    x->r->failure = failure_of(e);
}

int http_request(struct http_client *c, const char *method, const char *path,
                 const char *accept, const char *content_type, const char *body,
                 size_t body_len, int replayable, double timeout_s,
                 struct http_response *r)
{
    struct http_xfer x;
    CURLcode e = xfer_setup(c, &x, c->curl, method, path, accept, content_type, body, body_len,
                            replayable, timeout_s, r);
    if (e != CURLE_OK) {
        setup_failed(c, &x, e);
        return -1;
    }
    return xfer_finish(c, &x, curl_easy_perform(c->curl));
}

/* ---- transfers run by a multi handle (restpool.c) ---------------------- */

CURL *http_handle_new(struct http_client *c)
{
    CURL *h = curl_easy_duphandle(c->tmpl);
    /* Wait for the connection being set up to say whether it multiplexes
     * rather than open one per transfer started at once. */
    if (h && curl_easy_setopt(h, CURLOPT_PIPEWAIT, 1L) != CURLE_OK) {
        curl_easy_cleanup(h);
        return NULL;
    }
    return h;
}

struct http_xfer *http_xfer_start(struct http_client *c, CURL *h, const char *method,
                                  const char *path, const char *accept, const char *content_type,
                                  const char *body, size_t body_len, int replayable,
                                  double timeout_s, struct http_response *r)
{
    struct http_xfer *x = malloc(sizeof *x);
    if (!x) {
        memset(r, 0, sizeof *r);
        snprintf(r->error, sizeof r->error, "out of memory");
        r->failure = HTTP_FAIL_OTHER;
        return NULL;
    }
    CURLcode e = xfer_setup(c, x, h, method, path, accept, content_type, body, body_len,
                            replayable, timeout_s, r);
    if (e != CURLE_OK) {
        setup_failed(c, x, e);
        free(x);
        return NULL;
    }
    return x;
}

struct http_xfer *http_stream_start(struct http_client *c, CURL *h, const char *path,
                                    double timeout_s,
                                    int (*on_data)(const char *p, size_t n, void *ud), void *ud,
                                    struct http_response *r)
{
    struct http_xfer *x = http_xfer_start(c, h, "GET", path, NULL, NULL, NULL, 0, 1, timeout_s, r);
    if (!x)
        return NULL;
    x->on_data = on_data;
    x->data_ud = ud;
    if (curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_stream) != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_WRITEDATA, x) != CURLE_OK) {
        http_xfer_end(c, x, CURLE_BAD_FUNCTION_ARGUMENT);
        return NULL;
    }
    return x;
}

int http_xfer_end(struct http_client *c, struct http_xfer *x, int curl_code)
{
    int rc = xfer_finish(c, x, (CURLcode)curl_code);
    free(x);
    return rc;
}

void http_response_free(struct http_response *r)
{
    mem_free(r->body);
    r->body = NULL;
    r->len = 0;
}

long http_connects(struct http_client *c) { return c->connects; }
long http_requests(struct http_client *c) { return c->requests; }

void http_client_free(struct http_client *c)
{
    if (!c)
        return;
    if (c->curl)
        curl_easy_cleanup(c->curl);
    if (c->tmpl)
        curl_easy_cleanup(c->tmpl);
    curl_slist_free_all(c->connect_to);
    free(c->proxy);
    free(c->server);
    free(c->token);
    free(c->token_file);
    free(c);
}

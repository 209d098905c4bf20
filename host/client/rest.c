/* rest.c: requests to the apiserver with client-go's retry discipline.
 *
 * Owns: which failures are retried (429 honouring Retry-After, 5xx but 501,
 * connection refused/reset, timeouts), for which requests (idempotent ones;
 * any other only when it cannot have been applied: see http.c for libcurl's
 * own resend, which is refused for those), the bounded exponential
 * backoff with jitter, telling every retry with its cause (to the policy's
 * say: this file prints nothing), and the error value of a failed request.
 * Must never decide what a status means to a caller beyond that, and never
 * tell a request body or a credential. */
#include "client/rest.h"
#include "client/rest_int.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/mem.h"
#include "base/stop.h"
#include "base/util.h"
#include "client/http.h"

#define MAX_RETRY_SLEEP 10.0

/* One line to the policy's say, when it has one. */
static void say(const struct rest_client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

struct rest_client {
    struct kube_config cfg;
    struct http_client *http;
    struct rest_policy pol;
};

static void say(const struct rest_client *c, const char *fmt, ...)
{
    if (!c->pol.say)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    c->pol.say(line);
}

struct rest_client *rest_new(const struct kube_config_opts *o, const struct rest_policy *p,
                             char *err, size_t errlen)
{
    struct rest_client *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->pol = *p;
    if (c->pol.max_attempts < 1)
        c->pol.max_attempts = 1;
    if (c->pol.request_timeout <= 0)
        c->pol.request_timeout = 30;
    if (kubeconfig_resolve(o, &c->cfg, err, errlen) != 0) {
        free(c);
        return NULL;
    }
    if (!(c->http = http_client_new(&c->cfg, c->pol.say, err, errlen))) {
        kubeconfig_free(&c->cfg);
        free(c);
        return NULL;
    }
    return c;
}

struct rest_client *rest_new_config(struct kube_config *cfg, const struct rest_policy *p,
                                    char *err, size_t errlen)
{
    struct rest_client *c = calloc(1, sizeof *c);
    if (!c) {
        kubeconfig_free(cfg);
        memset(cfg, 0, sizeof *cfg);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->pol = *p;
    if (c->pol.max_attempts < 1)
        c->pol.max_attempts = 1;
    if (c->pol.request_timeout <= 0)
        c->pol.request_timeout = 30;
    c->cfg = *cfg;
    memset(cfg, 0, sizeof *cfg);
    if (!(c->http = http_client_new(&c->cfg, c->pol.say, err, errlen))) {
        kubeconfig_free(&c->cfg);
        free(c);
        return NULL;
    }
    return c;
}

const struct kube_config *rest_config(const struct rest_client *c) { return &c->cfg; }
long rest_connects(const struct rest_client *c) { return http_connects(c->http); }
long rest_requests(const struct rest_client *c) { return http_requests(c->http); }

void rest_error_free(struct rest_error *e)
{
    cJSON_Delete(e->details);
    e->details = NULL;
    free(e->continue_token);
    e->continue_token = NULL;
}

void rest_free(struct rest_client *c)
{
    if (!c)
        return;
    http_client_free(c->http);
    kubeconfig_free(&c->cfg);
    free(c);
}

static const char *rest_reason_for(long code)
{
    switch (code) {
    case 400: return "BadRequest";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "NotFound";
    case 405: return "MethodNotAllowed";
    case 406: return "NotAcceptable";
    case 409: return "Conflict";
    case 410: return "Expired";
    case 413: return "RequestEntityTooLarge";
    case 415: return "UnsupportedMediaType";
    case 422: return "Invalid";
    case 429: return "TooManyRequests";
    case 500: return "InternalError";
    case 503: return "ServiceUnavailable";
    case 504: return "Timeout";
    default: return code >= 500 ? "InternalError" : "Unknown";
    }
}

void rest_error_string(const struct rest_error *e, char *buf, size_t len)
{
    if (e->code > 0)
        snprintf(buf, len, "Error from server (%s): %s", e->reason, e->message);
    else if (strcmp(e->reason, "ConnectionError") == 0)
        snprintf(buf, len, "Unable to connect to the server: %s", e->message);
    else
        snprintf(buf, len, "%s: %s", e->reason, e->message);
}

void rest_sleep(double s)
{
    if (s <= 0)
        return;
    /* A stop signal (stop.h) ends the wait: nanosleep returns EINTR for it. */
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - floor(s)) * 1e9)};
    while (!stop_cuts_waits() && nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static double jitter(void)
{
    static unsigned seed;
    if (!seed)
        seed = (unsigned)time(NULL) ^ ((unsigned)getpid() << 16);
    seed = seed * 1103515245u + 12345u;
    return 0.5 + 0.5 * ((seed >> 8) & 0xffff) / 65535.0;
}

static int retryable_transport(enum http_failure f)
{
    return f == HTTP_FAIL_UNREACHED || f == HTTP_FAIL_BROKEN || f == HTTP_FAIL_TIMEOUT;
}

/* Could the server have acted on a request that failed this way? A refused
 * connection or a failed handshake is certain not to have been applied. */
static int surely_unapplied(const struct http_response *r)
{
    return r->failure == HTTP_FAIL_UNREACHED || !r->sent;
}

/* A Status object when the body is one, otherwise the body itself (the 429
 * of priority-and-fairness is plain text). */
static void fill_error(struct rest_error *e, const struct http_response *r, const cJSON *j)
{
    e->code = r->status;
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(j, "kind");
    if (cJSON_IsString(kind) && strcmp(kind->valuestring, "Status") == 0) {
        const cJSON *reason = cJSON_GetObjectItemCaseSensitive(j, "reason");
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(j, "message");
        snprintf(e->reason, sizeof e->reason, "%s",
                 cJSON_IsString(reason) && *reason->valuestring ? reason->valuestring
                                                                : rest_reason_for(r->status));
        snprintf(e->message, sizeof e->message, "%s", cJSON_IsString(msg) ? msg->valuestring : "");
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "details");
        e->details = d ? cJSON_Duplicate(d, 1) : NULL;
        const cJSON *cont = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(j, "metadata"), "continue");
        if (cJSON_IsString(cont) && *cont->valuestring)
            e->continue_token = strdup(cont->valuestring);
        return;
    }
    snprintf(e->reason, sizeof e->reason, "%s", rest_reason_for(r->status));
    size_t n = r->len;
    while (n && (r->body[n - 1] == '\n' || r->body[n - 1] == ' ' || r->body[n - 1] == '\r'))
        n--;
    if (n)
        snprintf(e->message, sizeof e->message, "%.*s", (int)(n < 1800 ? n : 1800), r->body);
    else
        snprintf(e->message, sizeof e->message, "the server responded with HTTP %ld and no body",
                 r->status);
}

void rest_try_begin(struct rest_try *t, const char *method, const char *path, int idempotent,
                    double time_left)
{
    memset(t, 0, sizeof *t);
    t->method = method;
    t->path = path;
    t->idempotent = idempotent;
    t->time_left = time_left;
    t->start = now_mono();
    t->end = t->start + time_left;
}

int rest_try_attempt(struct rest_client *c, struct rest_try *t, double *tmo,
                     struct rest_result *out)
{
    t->attempt++;
    double left = t->end - now_mono();
    if (left <= 0 && !isinf(t->time_left)) {
        /* Past the caller's time (a migration's deadline): nothing more
         * leaves, not even with a tiny timeout, which would still land. */
        memset(out, 0, sizeof *out);
        snprintf(out->err.reason, sizeof out->err.reason, "Timeout");
        snprintf(out->err.message, sizeof out->err.message,
                 "%s %s: not sent: its time ran out%s", t->method, t->path,
                 t->attempt > 1 ? " before it could be retried" : "");
        out->err.after_retry = t->maybe_applied;
        return -1;
    }
    *tmo = c->pol.request_timeout;
    if (left < *tmo)
        *tmo = left;
    return 0;
}

double rest_try_judge(struct rest_client *c, struct rest_try *t, int rc, struct http_response *r)
{
    const char *method = t->method, *path = t->path;
    if (r->resent) {
        say(c, "kube: retrying %s %s after the reused connection died before an answer "
                 "(libcurl re-sent it on a fresh connection)", method, path);
        /* The first copy may have been applied: what the second one
         * hears (a 409, a 404) proves nothing about it. */
        if (strcmp(method, "GET") != 0)
            t->maybe_applied = 1;
    }
    char cause[300] = "";
    int retry = 0;
    if (rc != 0) {
        snprintf(cause, sizeof cause, "%.299s", r->error);
        retry = retryable_transport(r->failure) &&
                (t->idempotent || surely_unapplied(r));
    } else if (r->status == 429 || (r->status >= 500 && r->status != 501)) {
        snprintf(cause, sizeof cause, "HTTP %ld %s", r->status, rest_reason_for(r->status));
        /* A 429 is a refusal before processing: safe even for a POST. */
        retry = t->idempotent || r->status == 429;
    }
    if (!retry || t->attempt >= c->pol.max_attempts) {
        if (*cause && t->attempt > 1)
            say(c, "kube: %s %s: giving up after %d attempts (%s)", method, path, t->attempt,
                     cause);
        return -1;
    }
    double delay = 0.2 * pow(2, t->attempt - 1);
    if (delay > MAX_RETRY_SLEEP)
        delay = MAX_RETRY_SLEEP;
    delay *= jitter();
    if (rc == 0 && r->retry_after >= 0)
        delay = r->retry_after < MAX_RETRY_SLEEP ? r->retry_after : MAX_RETRY_SLEEP;
    double now = now_mono();
    if (stop_cuts_waits()) {
        say(c, "kube: %s %s: not retrying, the runner is stopping (%s)", method, path, cause);
        return -1;
    }
    if (now + delay - t->start > c->pol.retry_budget || now + delay >= t->end) {
        say(c, "kube: %s %s: no time left to retry (%s)", method, path, cause);
        return -1;
    }
    say(c, "kube: retrying %s %s after %s (attempt %d/%d in %.2fs)", method, path, cause,
             t->attempt + 1, c->pol.max_attempts, delay);
    /* A write whose connection broke after sending, or that a 5xx
     * answered (an apiserver may time out after storing), may have been
     * applied: its repeat's refusal is then no proof of anything. */
    if ((rc != 0 && r->sent) || (rc == 0 && r->status >= 500 && strcmp(method, "GET") != 0))
        t->maybe_applied = 1;
    return delay;
}

int rest_try_finish(struct rest_try *t, struct http_response *r, struct rest_result *out)
{
    memset(out, 0, sizeof *out);
    out->status = r->status;
    out->body = r->body;
    out->len = r->len;
    snprintf(out->content_type, sizeof out->content_type, "%s", r->content_type);
    snprintf(out->headers, sizeof out->headers, "%s", r->headers);
    r->body = NULL;
    if (r->failure) {
        snprintf(out->err.reason, sizeof out->err.reason, "%s",
                 r->too_large                                   ? "MemoryLimit"
                 : r->failure == HTTP_FAIL_TIMEOUT ? "Timeout"
                                                   : "ConnectionError");
        if (r->failure == HTTP_FAIL_REWIND || (!t->idempotent && r->sent))
            snprintf(out->err.message, sizeof out->err.message,
                     "%s: the connection broke after the request was sent; not repeating it, "
                     "since the server may have applied it (%s)",
                     t->method, r->error);
        else
            snprintf(out->err.message, sizeof out->err.message, "%s", r->error);
        out->err.after_retry = t->maybe_applied;
        return -1;
    }
    if (out->len && strstr(r->content_type, "json") && !t->raw)
        out->json = cJSON_ParseWithLength(out->body, out->len);
    if (r->status < 200 || r->status >= 300) {
        r->body = out->body; /* fill_error reads a text body through r */
        fill_error(&out->err, r, out->json);
        r->body = NULL;
        out->err.after_retry = t->maybe_applied;
        return -1;
    }
    return 0;
}

struct http_client *rest_http(struct rest_client *c) { return c->http; }

int rest_do(struct rest_client *c, const char *method, const char *path, const char *accept,
            const char *content_type, const char *body, size_t body_len, int idempotent,
            double time_left, struct rest_result *out)
{
    return rest_do_ex(c, method, path, accept, content_type, body, body_len, idempotent,
                      time_left, NULL, 0, out);
}

int rest_do_ex(struct rest_client *c, const char *method, const char *path, const char *accept,
               const char *content_type, const char *body, size_t body_len, int idempotent,
               double time_left, const char *const *headers, int flags, struct rest_result *out)
{
    struct rest_try t;
    rest_try_begin(&t, method, path, idempotent, time_left);
    t.raw = (flags & REST_RAW) != 0;
    struct http_response r;
    for (;;) {
        double tmo = 0;
        if (rest_try_attempt(c, &t, &tmo, out) != 0)
            return -1;
        if (headers || (flags & REST_KEEP_HEADERS))
            http_set_next(c->http, headers, (flags & REST_KEEP_HEADERS) != 0);
        int rc = http_request(c->http, method, path, accept, content_type, body, body_len,
                              idempotent, tmo, &r);
        double delay = rest_try_judge(c, &t, rc, &r);
        if (delay < 0)
            break;
        http_response_free(&r);
        rest_sleep(delay);
    }
    return rest_try_finish(&t, &r, out);
}

void rest_result_free(struct rest_result *r)
{
    cJSON_Delete(r->json);
    rest_error_free(&r->err);
    mem_free(r->body);
    memset(r, 0, sizeof *r);
}

cJSON *rest_get_json(struct rest_client *c, const char *path, const char *accept,
                     double time_left, struct rest_error *err)
{
    struct rest_result r;
    memset(err, 0, sizeof *err);
    return rest_take_json(&r, rest_do(c, "GET", path, accept, NULL, NULL, 0, 1, time_left, &r) == 0,
                          path, err);
}

cJSON *rest_take_json(struct rest_result *r, int ok, const char *path, struct rest_error *err)
{
    if (!ok) {
        *err = r->err;
        r->err.details = NULL;
        r->err.continue_token = NULL;
        rest_result_free(r);
        return NULL;
    }
    cJSON *j = r->json;
    r->json = NULL;
    if (!j) {
        snprintf(err->reason, sizeof err->reason, "InvalidResponse");
        snprintf(err->message, sizeof err->message, "GET %s: the response is not JSON", path);
    }
    rest_result_free(r);
    return j;
}

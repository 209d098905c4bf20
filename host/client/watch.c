/* watch.c: a watch stream (see watch.h). Owns its own HTTP connection and
 * the libcurl multi handle the stream runs in (so it can wait for bytes
 * and still ask keep_going every KUBE_WATCH_POLL_S), the line buffer
 * events are cut from, and the parse of each event. Must never hand over
 * half an event, nor take a line longer than KUBE_WATCH_LINE_MAX.
 * Prefixes: kube_ (the name its callers know it by, kube_watch_).
 * Unreferenced: kube_watch_free (the recipe's last step: today's one user,
 * the lock watcher, is a process that exits holding its watch). */
#include "client/watch.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "client/http_xfer.h"
#include "client/rest.h"

struct kube_watch {
    struct http_client *http;
    CURLM *multi;
    CURL *h;                    /* streams only */
    struct buf line;            /* the event being received, at most KUBE_WATCH_LINE_MAX */
    const struct kube_watch_fns *fns;
    enum kube_watch_end end;    /* set by what ended the stream from inside */
    int ended;
    char why[512];
};

struct kube_watch *kube_watch_new(const struct kube_config *cfg, char *err, size_t errlen)
{
    struct kube_watch *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    w->line = (struct buf)BUF_MAX(KUBE_WATCH_LINE_MAX - 1);
    if (!(w->http = http_client_new(cfg, NULL, err, errlen)) || !(w->multi = curl_multi_init()) ||
        !(w->h = http_handle_new(w->http))) {
        if (w->http && (!w->multi || !w->h))
            snprintf(err, errlen, "out of memory");
        kube_watch_free(w);
        return NULL;
    }
    return w;
}

void kube_watch_free(struct kube_watch *w)
{
    if (!w)
        return;
    if (w->h)
        curl_easy_cleanup(w->h);
    if (w->multi)
        curl_multi_cleanup(w->multi);
    http_client_free(w->http);
    buf_release(&w->line);
    free(w);
}

/* One whole line of the stream: an event. 0 to go on. */
static int event_line(struct kube_watch *w, const char *text, size_t n)
{
    cJSON *ev = cJSON_ParseWithLength(text, n);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(ev, "type");
    const cJSON *obj = cJSON_GetObjectItemCaseSensitive(ev, "object");
    int rc = 0;
    if (!cJSON_IsString(type) || !cJSON_IsObject(obj)) {
        snprintf(w->why, sizeof w->why, "the watch sent something that is not an event");
        w->end = KUBE_WATCH_FAILED;
        rc = 1;
    } else if (strcmp(type->valuestring, "ERROR") == 0) {
        /* a Status: 410 when the resourceVersion is too old */
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(obj, "code");
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(obj, "message");
        w->end = cJSON_IsNumber(code) && code->valuedouble == 410 ? KUBE_WATCH_EXPIRED
                                                                   : KUBE_WATCH_FAILED;
        snprintf(w->why, sizeof w->why, "the watch ended with an error: %s",
                 cJSON_IsString(msg) ? msg->valuestring : "(no message)");
        rc = 1;
    } else if (w->fns->on_event(w->fns->ud, type->valuestring, obj) != 0) {
        w->end = KUBE_WATCH_STOPPED;
        rc = 1;
    }
    cJSON_Delete(ev);
    if (rc)
        w->ended = 1;
    return rc;
}

/* The stream's bytes, cut into lines. 0 to go on. */
static int on_data(const char *p, size_t n, void *ud)
{
    struct kube_watch *w = ud;
    while (n) {
        const char *nl = memchr(p, '\n', n);
        size_t take = nl ? (size_t)(nl - p) : n;
        if (buf_add(&w->line, p, take) != 0) {
            snprintf(w->why, sizeof w->why, "a watch event longer than %d bytes, or out of "
                     "memory", KUBE_WATCH_LINE_MAX);
            w->end = KUBE_WATCH_FAILED;
            w->ended = 1;
            return 1;
        }
        p += take;
        n -= take;
        if (!nl)
            break;
        p++;
        n--;
        size_t len = w->line.len;
        int stop = len && event_line(w, w->line.p, len) != 0;
        buf_reset(&w->line);
        if (stop)
            return 1;
    }
    return 0;
}

enum kube_watch_end kube_watch_run(struct kube_watch *w, const char *path, double timeout_s,
                                   const struct kube_watch_fns *fns, char *err, size_t errlen)
{
    w->fns = fns;
    buf_reset(&w->line);
    w->ended = 0;
    w->end = KUBE_WATCH_CLOSED;
    w->why[0] = '\0';
    struct http_response r;
    struct http_xfer *x = http_stream_start(w->http, w->h, path, timeout_s, on_data, w, &r);
    if (!x) {
        snprintf(err, errlen, "watch %s: %s", path, r.error);
        http_response_free(&r);
        return KUBE_WATCH_FAILED;
    }
    if (curl_multi_add_handle(w->multi, w->h) != CURLM_OK) {
        http_xfer_end(w->http, x, CURLE_OUT_OF_MEMORY);
        http_response_free(&r);
        snprintf(err, errlen, "watch %s: out of memory", path);
        return KUBE_WATCH_FAILED;
    }
    int opened = 0, stopped = 0;
    CURLcode done = CURLE_OK;
    for (;;) {
        int running = 0;
        if (curl_multi_perform(w->multi, &running) != CURLM_OK) {
            done = CURLE_OUT_OF_MEMORY;
            break;
        }
        long status = 0;
        if (!opened && curl_easy_getinfo(w->h, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK &&
            status == 200) {
            opened = 1;
            if (fns->on_open)
                fns->on_open(fns->ud);
        }
        int left;
        CURLMsg *m = curl_multi_info_read(w->multi, &left);
        if (m && m->msg == CURLMSG_DONE) {
            done = m->data.result;
            break;
        }
        /* (once ended, the transfer ends with the write error it returned) */
        if (!w->ended && fns->keep_going && !fns->keep_going(fns->ud)) {
            stopped = 1;
            done = CURLE_ABORTED_BY_CALLBACK;
            break;
        }
        curl_multi_poll(w->multi, NULL, 0, (int)(KUBE_WATCH_POLL_S * 1000), NULL);
    }
    curl_multi_remove_handle(w->multi, w->h);
    int hrc = http_xfer_end(w->http, x, done);
    enum kube_watch_end end;
    if (stopped) {
        end = KUBE_WATCH_STOPPED;
    } else if (w->ended) {
        end = w->end;
        snprintf(err, errlen, "%s", w->why);
    } else if (hrc != 0) {
        end = KUBE_WATCH_FAILED;
        snprintf(err, errlen, "watch: %s", r.error);
    } else if (r.status == 410) {
        end = KUBE_WATCH_EXPIRED;
        snprintf(err, errlen, "watch: the resourceVersion is too old (410 Gone)");
    } else if (r.status != 200) {
        end = KUBE_WATCH_FAILED;
        snprintf(err, errlen, "watch: HTTP %ld%s%.300s", r.status, r.len ? ": " : "",
                 r.body ? r.body : "");
    } else {
        end = KUBE_WATCH_CLOSED;
    }
    http_response_free(&r);
    return end;
}

cJSON *kube_watch_read(struct kube_watch *w, const char *path, double timeout_s, long *code,
                       char *err, size_t errlen)
{
    struct http_response r;
    *code = 0;
    if (http_request(w->http, "GET", path, NULL, NULL, NULL, 0, 1, timeout_s, &r) != 0) {
        snprintf(err, errlen, "GET %s: %s", path, r.error);
        http_response_free(&r);
        return NULL;
    }
    *code = r.status;
    cJSON *o = r.status == 200 ? cJSON_ParseWithLength(r.body, r.len) : NULL;
    if (!o)
        snprintf(err, errlen, "GET %s: HTTP %ld", path, r.status);
    http_response_free(&r);
    return o;
}

/* restpool.c: bounded concurrent requests on one libcurl multi handle.
 *
 * Owns the slots of the requests in flight (each with its own easy handle,
 * reused, and its own copy of what it sends), driving the multi handle
 * until one is done, the wait before a retry (a slot waiting for its time
 * is not in the multi handle, so a backoff holds up no other request), and
 * the order answers are handed out in (completion order), and how many
 * attempts are on the wire at once: no more than the pace allows (pace.h;
 * the others wait their turn in submission order, retries by their due
 * time). Retry decisions are rest.c's (rest_int.h), one step per attempt.
 * Must never send a request nobody submitted, nor repeat one rest.c would
 * not repeat. */
#include "client/restpool.h"

#include <curl/curl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/stop.h"
#include "base/util.h"
#include "client/http_xfer.h"
#include "client/pace.h"
#include "client/rest_int.h"

enum op_state { OP_FREE = 0, OP_RUNNING, OP_WAITING, OP_DONE };

struct op {
    enum op_state state;
    CURL *h;                    /* created on the slot's first use, kept */
    struct http_xfer *x;        /* while running */
    struct http_response r;     /* the attempt's answer */
    struct rest_try t;
    char *method, *path, *accept, *ctype, *body;
    size_t body_len;
    double due;                 /* OP_WAITING: when the next attempt may start */
    double sent_at;             /* OP_RUNNING: when this attempt started */
    unsigned long order;        /* submission order: who goes first when due */
    int rc;                     /* OP_DONE: rest_do's return value */
    struct rest_result res;     /* OP_DONE: the result, until handed out */
    unsigned long seq;          /* OP_DONE: completion order */
    void *tag;
};

struct rest_pool {
    struct rest_client *rest;
    CURLM *multi;
    struct op ops[REST_POOL_SLOTS];
    int busy;
    int running;                /* attempts on the wire (OP_RUNNING) */
    unsigned long seq, submitted;
    struct pace pace;
};

struct rest_pool *rest_pool_new(struct rest_client *c)
{
    struct rest_pool *p = calloc(1, sizeof *p);
    if (!p || !(p->multi = curl_multi_init())) {
        free(p);
        return NULL;
    }
    p->rest = c;
    pace_init(&p->pace, REST_POOL_MAX, 0);
    /* Over HTTP/1.1 each request in flight needs its own connection: no
     * more than the pool holds. HTTP/2 multiplexes them on one. */
    if (curl_multi_setopt(p->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX) != CURLM_OK ||
        curl_multi_setopt(p->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)REST_POOL_MAX) !=
            CURLM_OK) {
        curl_multi_cleanup(p->multi);
        free(p);
        return NULL;
    }
    return p;
}

static long start_due(struct rest_pool *p);

static void op_clear(struct op *o)
{
    free(o->method);
    free(o->path);
    free(o->accept);
    free(o->ctype);
    free(o->body);
    o->method = o->path = o->accept = o->ctype = o->body = NULL;
    o->state = OP_FREE;
}

void rest_pool_free(struct rest_pool *p)
{
    if (!p)
        return;
    struct http_client *hc = rest_http(p->rest);
    for (int i = 0; i < REST_POOL_SLOTS; i++) {
        struct op *o = &p->ops[i];
        if (o->state == OP_RUNNING) {
            curl_multi_remove_handle(p->multi, o->h);
            http_xfer_end(hc, o->x, CURLE_ABORTED_BY_CALLBACK);
            http_response_free(&o->r);
        }
        if (o->state == OP_DONE)
            rest_result_free(&o->res);
        op_clear(o);
        if (o->h)
            curl_easy_cleanup(o->h);
    }
    curl_multi_cleanup(p->multi);
    free(p);
}

int rest_pool_busy(const struct rest_pool *p) { return p->busy; }

void rest_pool_pace(struct rest_pool *p, int ceiling, int adapt)
{
    pace_init(&p->pace, ceiling > REST_POOL_MAX ? REST_POOL_MAX : ceiling, adapt);
}

const struct pace *rest_pool_pace_seen(const struct rest_pool *p) { return &p->pace; }

struct pace *rest_pool_pace_of(struct rest_pool *p) { return &p->pace; }

static char *dup_or_null(const char *s, int *oom)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *oom = 1;
    return d;
}

/* The slot's answer is final: rest_try_finish makes it the result. */
static void op_done(struct rest_pool *p, struct op *o)
{
    o->rc = rest_try_finish(&o->t, &o->r, &o->res);
    http_response_free(&o->r);
    o->state = OP_DONE;
    o->seq = ++p->seq;
}

/* After an attempt ended (rc as http_request's): retried later, or done. */
static void op_judge(struct rest_pool *p, struct op *o, int rc)
{
    if (rc == 0)
        pace_answer(&p->pace, o->sent_at, now_mono(), o->r.status,
                    strstr(o->r.content_type, "json") != NULL, o->r.retry_after, o->r.pf_level);
    double delay = rest_try_judge(p->rest, &o->t, rc, &o->r);
    if (delay < 0) {
        op_done(p, o);
        return;
    }
    http_response_free(&o->r);
    o->state = OP_WAITING;
    o->due = now_mono() + delay;
}

/* Starts the slot's next attempt: in the multi handle, or done at once
 * when its time ran out or it could not be set up. */
static void op_start(struct rest_pool *p, struct op *o)
{
    double tmo = 0;
    if (rest_try_attempt(p->rest, &o->t, &tmo, &o->res) != 0) {
        o->rc = -1;
        o->state = OP_DONE;
        o->seq = ++p->seq;
        return;
    }
    struct http_client *hc = rest_http(p->rest);
    o->x = http_xfer_start(hc, o->h, o->method, o->path, o->accept, o->ctype, o->body,
                           o->body ? o->body_len : 0, o->t.idempotent, tmo, &o->r);
    if (!o->x) {
        op_judge(p, o, -1);
        return;
    }
    if (curl_multi_add_handle(p->multi, o->h) != CURLM_OK) {
        http_xfer_end(hc, o->x, CURLE_OUT_OF_MEMORY);
        o->x = NULL;
        op_judge(p, o, -1);
        return;
    }
    o->state = OP_RUNNING;
    o->sent_at = now_mono();
    p->running++;
}

int rest_pool_submit(struct rest_pool *p, const char *method, const char *path,
                     const char *accept, const char *content_type, const char *body,
                     size_t body_len, int idempotent, double time_left, void *tag)
{
    struct op *o = NULL;
    for (int i = 0; i < REST_POOL_SLOTS && !o; i++)
        if (p->ops[i].state == OP_FREE)
            o = &p->ops[i];
    if (!o)
        return -1;
    if (!o->h) {
        if (!(o->h = http_handle_new(rest_http(p->rest))))
            return -1;
        curl_easy_setopt(o->h, CURLOPT_PRIVATE, (void *)o);
    }
    int oom = 0;
    o->method = dup_or_null(method, &oom);
    o->path = dup_or_null(path, &oom);
    o->accept = dup_or_null(accept, &oom);
    o->ctype = dup_or_null(content_type, &oom);
    if (body) {
        if ((o->body = malloc(body_len + 1))) {
            memcpy(o->body, body, body_len);
            o->body[body_len] = '\0';
        } else
            oom = 1;
    }
    o->body_len = body_len;
    if (oom) {
        op_clear(o);
        return -1;
    }
    o->tag = tag;
    memset(&o->res, 0, sizeof o->res);
    rest_try_begin(&o->t, o->method, o->path, idempotent, time_left);
    p->busy++;
    o->order = ++p->submitted;
    o->state = OP_WAITING;
    o->due = 0; /* its turn comes as the pace allows (start_due) */
    start_due(p);
    return 0;
}

/* The done slot that completed first, or NULL. */
static struct op *first_done(struct rest_pool *p)
{
    struct op *best = NULL;
    for (int i = 0; i < REST_POOL_SLOTS; i++)
        if (p->ops[i].state == OP_DONE && (!best || p->ops[i].seq < best->seq))
            best = &p->ops[i];
    return best;
}

/* Starts the waiting attempts whose time has come, as many as the pace
 * allows, the earliest due first (then in submission order); returns the
 * milliseconds until the next one is due (1000 when none waits; those
 * the pace holds wait for an answer, which wakes the poll). */
static long start_due(struct rest_pool *p)
{
    double now = now_mono(), next = HUGE_VAL;
    for (;;) {
        struct op *first = NULL;
        for (int i = 0; i < REST_POOL_SLOTS; i++) {
            struct op *o = &p->ops[i];
            if (o->state != OP_WAITING)
                continue;
            /* a stop cuts the wait short, as rest_sleep's */
            if (o->due > now && !stop_cuts_waits()) {
                if (o->due < next)
                    next = o->due;
                continue;
            }
            if (!first || o->due < first->due || (o->due == first->due && o->order < first->order))
                first = o;
        }
        if (!first)
            break;
        if (p->running >= pace_allowed(&p->pace) && !stop_cuts_waits())
            break;
        op_start(p, first);
    }
    if (isinf(next))
        return 1000;
    long ms = (long)ceil((next - now) * 1000);
    return ms < 1 ? 1 : ms > 1000 ? 1000 : ms;
}

/* Collects the transfers the multi handle finished. */
static void reap(struct rest_pool *p)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(p->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        struct op *o = NULL;
        CURL *h = m->easy_handle;
        CURLcode code = m->data.result;
        if (curl_easy_getinfo(h, CURLINFO_PRIVATE, (char **)&o) != CURLE_OK || !o)
            continue;
        curl_multi_remove_handle(p->multi, h);
        p->running--;
        int rc = http_xfer_end(rest_http(p->rest), o->x, code);
        o->x = NULL;
        op_judge(p, o, rc);
    }
}

/* Hands out the done slot that completed first: 1, or 0 when none is. */
static int hand_out(struct rest_pool *p, void **tag, int *rc, struct rest_result *out)
{
    struct op *o = first_done(p);
    if (!o)
        return 0;
    *tag = o->tag;
    *rc = o->rc;
    *out = o->res;
    memset(&o->res, 0, sizeof o->res);
    op_clear(o);
    p->busy--;
    return 1;
}

/* One turn of the multi handle without waiting: due retries started,
 * transfers moved on as far as they can go, the finished ones judged. */
static void drive(struct rest_pool *p)
{
    int running = 0;
    if (curl_multi_perform(p->multi, &running) != CURLM_OK) {
        /* the multi handle itself failed: every transfer in it ends so */
        for (int i = 0; i < REST_POOL_SLOTS; i++) {
            struct op *r = &p->ops[i];
            if (r->state != OP_RUNNING)
                continue;
            curl_multi_remove_handle(p->multi, r->h);
            p->running--;
            int hrc = http_xfer_end(rest_http(p->rest), r->x, CURLE_OUT_OF_MEMORY);
            r->x = NULL;
            op_judge(p, r, hrc);
        }
        return;
    }
    reap(p);
}

/* Hands out the next done request, waiting until end (monotonic; HUGE_VAL:
 * for ever). 1, or 0 when the pool is empty or end came first. */
static int next_until(struct rest_pool *p, double end, void **tag, int *rc,
                      struct rest_result *out)
{
    for (;;) {
        if (hand_out(p, tag, rc, out))
            return 1;
        if (p->busy == 0)
            return 0;
        long wait_ms = start_due(p);
        if (first_done(p))
            continue;
        drive(p);
        if (first_done(p))
            continue;
        double left = end - now_mono();
        if (left <= 0)
            return 0;
        if (left * 1000 < wait_ms)
            wait_ms = (long)ceil(left * 1000);
        curl_multi_poll(p->multi, NULL, 0, (int)wait_ms, NULL);
    }
}

int rest_pool_next(struct rest_pool *p, void **tag, int *rc, struct rest_result *out)
{
    return next_until(p, HUGE_VAL, tag, rc, out);
}

int rest_pool_next_within(struct rest_pool *p, double max_s, void **tag, int *rc,
                          struct rest_result *out)
{
    return next_until(p, now_mono() + max_s, tag, rc, out);
}

int rest_pool_collect(struct rest_pool *p, void **tag, int *rc, struct rest_result *out)
{
    if (hand_out(p, tag, rc, out))
        return 1;
    if (p->busy == 0)
        return 0;
    start_due(p);
    drive(p);
    return hand_out(p, tag, rc, out);
}

void rest_pool_send(struct rest_pool *p, double max_s)
{
    double end = now_mono() + max_s;
    for (;;) {
        drive(p);
        int waiting = 0;
        for (int i = 0; i < REST_POOL_SLOTS; i++) {
            curl_off_t pre = 0;
            struct op *o = &p->ops[i];
            /* past pretransfer the request is being written: one more turn
             * below puts it on the wire */
            if (o->state == OP_RUNNING &&
                (curl_easy_getinfo(o->h, CURLINFO_PRETRANSFER_TIME_T, &pre) != CURLE_OK || pre == 0))
                waiting = 1;
        }
        if (!waiting) {
            drive(p);
            return;
        }
        double left = end - now_mono();
        if (left <= 0)
            return;
        curl_multi_poll(p->multi, NULL, 0, (int)(left * 1000) + 1, NULL);
    }
}

/* server.c: the runner's loopback gateway for one shell migration, its
 * HTTPS server (see gateway.h).
 *
 * Owns the server (libmicrohttpd, a thread per connection, on the socket
 * the runner bound to 127.0.0.1), who may talk to it (the migration's
 * bearer token, compared in constant time; nothing else is answered but a
 * 401), reading each request as sent (its raw path and query, its headers
 * of meaning, its body; impersonation refused, never dropped), which
 * requests stream (a watch as the apiserver reads one), handing it to the door (door.h) under one lock so
 * the journal, the connection and the overlay see one request at a time,
 * the legacy stamp (stamp.h) answered by rule, a preview's overlay
 * (preview/rules.h), streams handed on through client/relay.h outside the lock, and
 * every answer as the apiserver gave it (status, content type, body) or, for
 * what the door refused, a Status a kubectl prints as it prints the
 * server's. Must never send a request that did not pass the door, answer a
 * request without the token, or hold the runner's credentials where the
 * shell can read them (they stay in this process's memory). */
#include "gateway/gateway.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/util.h"
#include "door/door.h"
#include "preview/rules.h"
#include "gateway/mint.h"
#include "client/relay.h"
#include "door/journal.h"
#include "preview/overlay.h"
#include "gateway/stamp.h"

#define BODY_MAX (16u << 20)     /* a request body; the apiserver's own limit is 3 MiB */
#define STREAM_BLOCK 16384

struct gateway {
    struct gateway_opts o;
    struct MHD_Daemon *d;
    pthread_mutex_t mu;         /* one request at a time through the door */
    struct rest_client *rest;
    struct journal journal;
    struct door door;
    struct overlay *ov;         /* preview */
    atomic_int closing;
};

/* One request, from its first line on. */
struct greq {
    char *uri;                  /* path and query, raw */
    struct buf body;            /* at most BODY_MAX */
    int started;
};

/* ---- the listening socket and the token (the runner, before the fork) --- */

int gateway_listen(int *fd, int *port, char *err, size_t errlen)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 64) != 0 ||
        getsockname(s, (struct sockaddr *)&a, &al) != 0) {
        snprintf(err, errlen, "the runner's gateway cannot listen on 127.0.0.1: %s",
                 strerror(errno));
        if (s >= 0)
            close(s);
        return -1;
    }
    *fd = s;
    *port = ntohs(a.sin_port);
    return 0;
}

/* ---- answers ------------------------------------------------------------ */

/* Adds "Name: value\n" lines (the answer's caching headers) to r. */
static void add_headers(struct MHD_Response *r, const char *lines)
{
    for (const char *p = lines; p && *p;) {
        size_t n = strcspn(p, "\n");
        const char *colon = memchr(p, ':', n);
        if (colon && colon[1] == ' ') {
            char name[64], value[512];
            snprintf(name, sizeof name, "%.*s", (int)(colon - p), p);
            snprintf(value, sizeof value, "%.*s", (int)(n - (size_t)(colon - p) - 2), colon + 2);
            MHD_add_response_header(r, name, value);
        }
        p += n + (p[n] == '\n');
    }
}

static enum MHD_Result reply_with(struct MHD_Connection *con, unsigned code, const char *ctype,
                                  const char *headers, const char *body, size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body,
                                                             MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    if (ctype && *ctype)
        MHD_add_response_header(r, "Content-Type", ctype);
    add_headers(r, headers);
    enum MHD_Result rc = MHD_queue_response(con, code, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result reply(struct MHD_Connection *con, unsigned code, const char *ctype,
                             const char *body, size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body,
                                                             MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    if (ctype && *ctype)
        MHD_add_response_header(r, "Content-Type", ctype);
    enum MHD_Result rc = MHD_queue_response(con, code, r);
    MHD_destroy_response(r);
    return rc;
}

/* s as the inside of a JSON string, into out (cut to fit). */
static void json_escape(const char *s, char *out, size_t cap)
{
    size_t o = 0;
    for (; *s && o + 7 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            out[o++] = '\\';
            out[o++] = (char)ch;
        } else if (ch < 0x20) {
            o += (size_t)snprintf(out + o, cap - o, "\\u%04x", ch);
        } else {
            out[o++] = (char)ch;
        }
    }
    out[o] = '\0';
}

/* A Status as the apiserver writes one, which kubectl prints as
 * "Error from server (REASON): MESSAGE". Built without cJSON: it is
 * answered from connection threads outside the gateway's lock, and cJSON's
 * allocations go through the process's one memory count (base/mem.h). */
static enum MHD_Result status_reply(struct MHD_Connection *con, unsigned code, const char *reason,
                                    const char *msg)
{
    char m[1400], r[128], text[1700];
    json_escape(msg, m, sizeof m);
    json_escape(reason, r, sizeof r);
    int n = snprintf(text, sizeof text, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
                     "\"status\":\"Failure\",\"message\":\"%s\",\"reason\":\"%s\",\"code\":%u}",
                     m, r, code);
    return reply(con, code, "application/json", text, n > 0 && (size_t)n < sizeof text ? (size_t)n
                                                                                        : strlen(text));
}

static enum MHD_Result json_reply(struct MHD_Connection *con, unsigned code, const cJSON *body)
{
    char *text = body ? cJSON_PrintUnformatted(body) : NULL;
    enum MHD_Result rc = text ? reply(con, code, "application/json", text, strlen(text))
                              : status_reply(con, 500, "InternalError", "out of memory");
    cJSON_free(text);
    return rc;
}

/* Counts a refusal; the first one is kept for the record. */
static void note_refusal(struct gateway *g, const char *reason, const char *method,
                         const char *path, const char *msg)
{
    struct gateway_shared *sh = g->o.shared;
    sh->refused++;
    if (sh->refusal[0])
        return;
    snprintf(sh->refusal_reason, sizeof sh->refusal_reason, "%s", reason);
    snprintf(sh->refusal, sizeof sh->refusal, "%.8s %.200s: %.400s", method, path, msg);
}

/* Preview: the first request the preview cannot predict is kept. */
static void note_unpredictable(struct gateway *g, const char *method, const char *path,
                               const char *msg)
{
    struct gateway_shared *sh = g->o.shared;
    if (!sh->unpredictable[0])
        snprintf(sh->unpredictable, sizeof sh->unpredictable, "%.8s %.150s: %.300s", method, path,
                 msg);
}

/* ---- one request -------------------------------------------------------- */

static int token_ok(const struct gateway *g, const char *auth)
{
    if (!auth || strncmp(auth, "Bearer ", 7) != 0)
        return 0;
    const char *t = auth + 7;
    size_t n = strlen(t);
    unsigned char diff = n != GATEWAY_TOKEN_LEN;
    for (size_t i = 0; i < GATEWAY_TOKEN_LEN; i++)
        diff |= (unsigned char)(i < n ? t[i] : 0) ^ (unsigned char)g->o.cred->token[i];
    return diff == 0;
}

/* One query key or value as Go's url.ParseQuery reads it ('+' a space,
 * %XX a byte), lower-cased, into out (cut to fit). */
static void query_text(const char *p, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        int ch = (unsigned char)p[i];
        if (ch == '+')
            ch = ' ';
        else if (ch == '%' && i + 2 < n) {
            char hex[3] = {p[i + 1], p[i + 2], 0}, *end;
            long v = strtol(hex, &end, 16);
            if (*end == '\0' && hex[0] != '-' && hex[0] != '+' && hex[0] != ' ') {
                ch = (int)v;
                i += 2;
            }
        }
        out[o++] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
    }
    out[o] = '\0';
}

/* A watch or a followed log: its answer streams. The apiserver takes a
 * list for a watch when the first `watch` parameter is anything but "0"
 * or "false" (`watch=t`, `watch=1`, `watch=`), or the path has a watch
 * segment; `follow` of a log reads the same way. Erring toward a stream
 * costs nothing: a plain answer streams through as well. */
static int streams(const char *path, const char *query)
{
    int seen_watch = 0, seen_follow = 0;
    for (const char *p = query; p && *p;) {
        size_t n = strcspn(p, "&;");
        size_t kn = strcspn(p, "=");
        if (kn > n)
            kn = n;
        char key[16], val[16];
        query_text(p, kn, key, sizeof key);
        query_text(p + kn + (kn < n), kn < n ? n - kn - 1 : 0, val, sizeof val);
        int *seen = strcmp(key, "watch") == 0 ? &seen_watch
                    : strcmp(key, "follow") == 0 ? &seen_follow : NULL;
        if (seen && !*seen) {
            *seen = 1;
            if (strcmp(val, "0") != 0 && strcmp(val, "false") != 0)
                return 1;
        }
        p += n + (p[n] != '\0');
    }
    char seg[16];
    /* /api/v1/watch/..., /apis/GROUP/VERSION/watch/..., in any spelling */
    int skip = strncmp(path, "/apis/", 6) == 0 ? 3 : 2;
    const char *q = path;
    for (int i = 0; i < skip && q; i++)
        q = strchr(q + 1, '/');
    if (!q)
        return 0;
    const char *end = strchr(q + 1, '/');
    query_text(q + 1, end ? (size_t)(end - q - 1) : strlen(q + 1), seg, sizeof seg);
    return strcmp(seg, "watch") == 0;
}

/* A discovery read (/api, /api/v1, /apis, /apis/G, /apis/G/V): nothing the
 * journal, the guard or the overlay reads. */
static int discovery(const char *path)
{
    int segs = 0;
    for (const char *p = path; *p; p++)
        segs += *p == '/';
    return (strncmp(path, "/api", 4) == 0 && (path[4] == '\0' || (path[4] == '/' && segs <= 2))) ||
           (strncmp(path, "/apis", 5) == 0 && (path[5] == '\0' || (path[5] == '/' && segs <= 3)));
}

/* How the journal names a write. */
static const char *verb_of(const char *method, const char *ctype)
{
    if (strcmp(method, "POST") == 0)
        return "create";
    if (strcmp(method, "PUT") == 0)
        return "update";
    if (strcmp(method, "DELETE") == 0)
        return "delete";
    return ctype && strstr(ctype, "apply-patch") ? "apply" : "patch";
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max);
static void stream_free(void *cls);

struct stream_cls {
    struct gateway *g;
    struct relay *s;
};

/* A streamed answer: the door's checks under the lock, the transfer out of
 * it. */
static enum MHD_Result answer_stream(struct gateway *g, struct MHD_Connection *con,
                                     const struct door_req *w)
{
    struct door_out o;
    enum guard_verdict gv;
    char why[512], err[512], msg[700];
    pthread_mutex_lock(&g->mu);
    enum door_rc rc = door_ready(&g->door, w, &o, &gv, why, sizeof why);
    struct relay *s = NULL;
    if (rc == DOOR_OK) {
        s = relay_start(g->rest, o.path, w->accept, o.left, err, sizeof err);
        door_out_free(&o);
    } else {
        const char *reason = door_refusal(rc, gv, why, msg, sizeof msg);
        note_refusal(g, reason, w->method, w->path, msg);
    }
    g->o.shared->requests++;
    pthread_mutex_unlock(&g->mu);
    if (rc != DOOR_OK)
        return status_reply(con, rc == DOOR_LATE ? 504 : 403,
                            door_refusal(rc, gv, why, msg, sizeof msg), msg);
    if (!s)
        return status_reply(con, 503, "ServiceUnavailable", err);
    long status;
    const char *ctype;
    if (relay_headers(s, &g->closing, &status, &ctype, err, sizeof err) != 0) {
        pthread_mutex_lock(&g->mu);
        relay_close(s);
        pthread_mutex_unlock(&g->mu);
        return status_reply(con, 503, "ServiceUnavailable", err);
    }
    struct stream_cls *sc = malloc(sizeof *sc);
    struct MHD_Response *r = sc ? MHD_create_response_from_callback(
                                      MHD_SIZE_UNKNOWN, STREAM_BLOCK, stream_read, sc, stream_free)
                                : NULL;
    if (!r) {
        free(sc);
        pthread_mutex_lock(&g->mu);
        relay_close(s);
        pthread_mutex_unlock(&g->mu);
        return MHD_NO;
    }
    *sc = (struct stream_cls){g, s};
    if (*ctype)
        MHD_add_response_header(r, "Content-Type", ctype);
    enum MHD_Result mr = MHD_queue_response(con, (unsigned)status, r);
    MHD_destroy_response(r);
    return mr;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct stream_cls *sc = cls;
    ssize_t n = relay_read(sc->s, buf, max, &sc->g->closing);
    return n > 0 ? n : n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void stream_free(void *cls)
{
    struct stream_cls *sc = cls;
    pthread_mutex_lock(&sc->g->mu);
    relay_close(sc->s);
    pthread_mutex_unlock(&sc->g->mu);
    free(sc);
}

/* A write of the ledger object in the legacy tier: a stamp is answered as
 * the apiserver would answer it and left for the runner to carry out;
 * anything else is LedgerProtected. Under the lock. */
/* Whether a query asks for a dry run (`kubectl apply --dry-run=server`):
 * any dryRun parameter, in any case, counts. */
static int asks_dry_run(const char *query)
{
    for (const char *p = query; p && *p;) {
        size_t n = strcspn(p, "&;"), kn = strcspn(p, "=");
        char key[16];
        query_text(p, kn < n ? kn : n, key, sizeof key);
        if (strcmp(key, "dryrun") == 0)
            return 1;
        p += n + (p[n] != '\0');
    }
    return 0;
}

static enum MHD_Result answer_stamp(struct gateway *g, struct MHD_Connection *con,
                                    const char *method, const char *path, const char *ctype,
                                    const struct greq *r)
{
    const struct kube_options *ko = g->o.ko;
    struct rest_error e;
    char why[512], msg[700];
    cJSON *cur = door_get_json(&g->door, path, NULL, &e);
    if (strcmp(method, "POST") == 0) {
        snprintf(why, sizeof why, "configmaps \"%s\" already exists", ko->ledger_name);
        cJSON_Delete(cur);
        rest_error_free(&e);
        return status_reply(con, 409, "AlreadyExists", why);
    }
    if (!cur) {
        snprintf(msg, sizeof msg, "reading the ledger to judge a stamp of version: %.500s",
                 e.message);
        rest_error_free(&e);
        return status_reply(con, 503, "ServiceUnavailable", msg);
    }
    rest_error_free(&e);
    long version;
    cJSON *after = NULL;
    enum stamp_verdict v = stamp_judge(cur, method, ctype, r->body.p, r->body.len, g->o.stamp_allowed,
                                       &version, &after, why, sizeof why);
    cJSON_Delete(cur);
    if (v != STAMP_ABSORB) {
        snprintf(msg, sizeof msg, "the ledger is written by the runner: scripts may not write "
                 "it, its lock, its namespace or the runner's Events (it would write %s/%s: %s)",
                 ko->ledger_namespace, ko->ledger_name, why);
        note_refusal(g, "LedgerProtected", method, path, msg);
        return status_reply(con, 403, "LedgerProtected", msg);
    }
    const char *q = strchr(r->uri, '?');
    if (asks_dry_run(q ? q + 1 : NULL)) {
        /* the script's own dry run: answered as the apiserver answers one,
         * and nothing is taken over */
        enum MHD_Result drc = json_reply(con, 200, after);
        cJSON_Delete(after);
        return drc;
    }
    g->o.shared->stamped = 1;
    g->o.shared->stamp = version;
    if (g->o.say) {
        snprintf(msg, sizeof msg, "%sthe runner takes over this script's stamp of %s/%s "
                 "version=%ld: it is written with the script's record%s",
                 ko->dry_run ? "dry-run: " : "", ko->ledger_namespace, ko->ledger_name, version,
                 ko->dry_run ? " (nothing is recorded in a dry run)" : "");
        g->o.say(msg);
    }
    enum MHD_Result rc = json_reply(con, 200, after);
    cJSON_Delete(after);
    return rc;
}

/* Everything else: through the door, the answer as the apiserver gave it.
 * Under the lock. */
static enum MHD_Result answer_plain(struct gateway *g, struct MHD_Connection *con,
                                   const struct door_req *w, const char *path)
{
    enum guard_verdict gv;
    char why[512], msg[700];
    cJSON *jbody = w->body && (!w->ctype || strstr(w->ctype, "json"))
                       ? cJSON_ParseWithLength(w->body, w->body_len) : NULL;
    if (mint_refuses(w->method, path, w->body, w->body_len, jbody, why, sizeof why)) {
        note_refusal(g, "CredentialRefused", w->method, path, why);
        cJSON_Delete(jbody);
        return status_reply(con, 403, "CredentialRefused", why);
    }
    struct door_req req = *w;
    req.safe = door_safe(w->method, jbody);
    struct preview_answer pa;
    memset(&pa, 0, sizeof pa);
    if (g->ov && preview_before(g->ov, &g->door, &req, path, jbody, &pa)) {
        cJSON_Delete(jbody);
        if (pa.unpredictable)
            note_unpredictable(g, w->method, path, pa.message);
        enum MHD_Result mr = pa.body ? json_reply(con, (unsigned)pa.status, pa.body)
                                     : status_reply(con, (unsigned)pa.status, pa.reason,
                                                    pa.message);
        preview_answer_free(&pa);
        return mr;
    }
    struct door_prior prior;
    door_prior_read(&g->door, w->method, path, jbody, g->ov ? preview_held(g->ov, path) : NULL,
                    &prior);
    struct rest_result res;
    enum door_rc rc = door_send(&g->door, &req, &res, &gv, why, sizeof why);
    if (rc == DOOR_REFUSED || rc == DOOR_LATE || rc == DOOR_NOMEM) {
        const char *reason = door_refusal(rc, gv, why, msg, sizeof msg);
        note_refusal(g, reason, w->method, path, msg);
        if (g->ov && gv == GUARD_DRY_RUN)
            note_unpredictable(g, w->method, path, msg);
        rest_result_free(&res);
        door_prior_free(&prior);
        preview_answer_free(&pa);
        cJSON_Delete(jbody);
        return status_reply(con, rc == DOOR_LATE ? 504 : rc == DOOR_NOMEM ? 500
                                 : gv == GUARD_BAD_PATH || gv == GUARD_UNREADABLE ? 400 : 403,
                            reason, msg);
    }
    int ok = rc == DOOR_OK;
    door_after(&g->door, w->method, verb_of(w->method, w->ctype), path, ok,
               ok ? res.status : res.err.code, ok ? res.json : NULL, &prior);
    int merged = ok && g->ov && res.json && strcmp(w->method, "GET") == 0 &&
                 cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(res.json, "items"));
    if (ok && g->ov) {
        char perr[512];
        if (preview_after(g->ov, w->method, path, w->path, prior.before, &res, perr,
                              sizeof perr) != 0)
            note_unpredictable(g, w->method, path, perr);
    }
    door_prior_free(&prior);
    preview_answer_free(&pa);
    cJSON_Delete(jbody);
    enum MHD_Result mr;
    if (res.status == 0)
        mr = status_reply(con, 503, "ServiceUnavailable", res.err.message);
    else if (merged) {
        /* the page as merged with the overlay, in the type it came in */
        char *text = cJSON_PrintUnformatted(res.json);
        mr = text ? reply(con, (unsigned)res.status, res.content_type, text, strlen(text))
                  : status_reply(con, 500, "InternalError", "out of memory");
        cJSON_free(text);
    }
    else
        mr = reply_with(con, (unsigned)res.status, res.content_type, res.headers,
                        res.body ? res.body : "", res.len);
    rest_result_free(&res);
    return mr;
}

/* Counts the impersonation headers (kubectl's --as, --as-group, --as-uid,
 * Impersonate-Extra-*): the gateway sends with the runner's credentials
 * alone, so one dropped silently would leave a script that narrowed itself
 * with the runner's rights. Its name is kept for the refusal. */
static enum MHD_Result impersonation(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    (void)kind;
    (void)value;
    char *first = cls;
    if (key && strncasecmp(key, "Impersonate-", 12) == 0 && !*first)
        snprintf(first, 64, "%s", key);
    return MHD_YES;
}

static enum MHD_Result answer(struct gateway *g, struct MHD_Connection *con, const char *method,
                              struct greq *r)
{
    if (!token_ok(g, MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Authorization")))
        return status_reply(con, 401, "Unauthorized", "the runner's gateway answers only this "
                            "migration's own token");
    if (atomic_load(&g->closing))
        return status_reply(con, 503, "ServiceUnavailable", "the migration is over");
    if (r->body.failed)
        return status_reply(con, 413, "RequestEntityTooLarge", "the request body is too large");
    char imp[64] = "";
    MHD_get_connection_values(con, MHD_HEADER_KIND, impersonation, imp);
    /* discovery reads the same for anyone, and kubectl cannot print a
     * refusal of it: the request after it gets the one line */
    size_t ulen = strcspn(r->uri, "?");
    char *upath = strndup(r->uri, ulen);
    if (!upath)
        return MHD_NO;
    int plain_read = strcmp(method, "GET") == 0 &&
                     (discovery(upath) || door_nonresource_read(method, r->uri));
    free(upath);
    if (*imp && !plain_read) {
        char msg[300];
        snprintf(msg, sizeof msg, "the runner's gateway does not relay impersonation (%.60s: "
                 "kubectl --as, --as-group, --as-uid): a migration's requests go as the runner",
                 imp);
        pthread_mutex_lock(&g->mu);
        note_refusal(g, "Forbidden", method, r->uri, msg);
        pthread_mutex_unlock(&g->mu);
        return status_reply(con, 403, "Forbidden", msg);
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "POST") != 0 && strcmp(method, "PUT") != 0 &&
        strcmp(method, "PATCH") != 0 && strcmp(method, "DELETE") != 0)
        return status_reply(con, 405, "MethodNotAllowed", "the runner's gateway relays GET, POST, "
                            "PUT, PATCH and DELETE");
    char *q = strchr(r->uri, '?');
    size_t plen = q ? (size_t)(q - r->uri) : strlen(r->uri);
    char *path = strndup(r->uri, plen);
    if (!path)
        return MHD_NO;
    const char *accept = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Accept");
    /* The journal, the dry run's report, the stamp and the preview read the
     * answers as JSON: kubectl asks for JSON too, and decodes by the
     * answer's type. A preview merges list pages with its overlay, which a
     * Table cannot be: kubectl then prints a plain list itself. */
    if (accept && !door_nonresource_read(method, r->uri) &&
        (strstr(accept, "protobuf") || strstr(accept, "cbor") ||
         (g->ov && strstr(accept, "as=Table"))))
        accept = "application/json";
    const char *ctype = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Content-Type");
    const char *upgrade = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Upgrade");
    struct door_req w = {method, r->uri, accept,
                         r->body.len || strcmp(method, "GET") != 0 ? ctype : NULL,
                         r->body.len ? r->body.p : NULL, r->body.len, 0, NULL, 0};
    /* kubectl's HTTP cache (OpenAPI documents, discovery) works through the
     * gateway as it does direct: its validators go up, the answer's caching
     * headers come back, and such a body is handed on unparsed. */
    char inm[300] = "", ims[200] = "";
    const char *fwd[3] = {NULL, NULL, NULL};
    int nf = 0;
    if (strcmp(method, "GET") == 0) {
        const char *v = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "If-None-Match");
        if (v && snprintf(inm, sizeof inm, "If-None-Match: %s", v) < (int)sizeof inm)
            fwd[nf++] = inm;
        v = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "If-Modified-Since");
        if (v && snprintf(ims, sizeof ims, "If-Modified-Since: %s", v) < (int)sizeof ims)
            fwd[nf++] = ims;
        w.headers = nf ? fwd : NULL;
        w.flags = REST_KEEP_HEADERS |
                  (door_nonresource_read(method, r->uri) || discovery(path) ? REST_RAW : 0);
    }
    enum MHD_Result mr;
    const struct kube_options *ko = g->o.ko;
    if (upgrade) {
        /* the door still speaks first: a dry run's exec is DryRunRefused */
        struct door_out o;
        enum guard_verdict gv;
        char why[512], msg[700];
        pthread_mutex_lock(&g->mu);
        enum door_rc rc = door_ready(&g->door, &w, &o, &gv, why, sizeof why);
        door_out_free(&o);
        if (rc != DOOR_OK) {
            const char *reason = door_refusal(rc, gv, why, msg, sizeof msg);
            note_refusal(g, reason, method, path, msg);
            pthread_mutex_unlock(&g->mu);
            mr = status_reply(con, 403, reason, msg);
        } else {
            note_refusal(g, "Forbidden", method, path, "a connection upgrade (exec, attach, "
                         "port-forward) is not relayed by the runner's gateway");
            pthread_mutex_unlock(&g->mu);
            mr = status_reply(con, 403, "Forbidden", "the runner's gateway does not relay exec, "
                              "attach or port-forward (connection upgrades)");
        }
    } else if (strcmp(method, "GET") == 0 && streams(path, q ? q + 1 : NULL)) {
        if (g->ov) {
            pthread_mutex_lock(&g->mu);
            note_unpredictable(g, method, path, "a watch sees the cluster's events, not the "
                               "preview's changes");
            pthread_mutex_unlock(&g->mu);
        }
        mr = answer_stream(g, con, &w);
    } else {
        pthread_mutex_lock(&g->mu);
        g->o.shared->requests++;
        if (stamp_targets(method, path, ko->ledger_namespace, ko->ledger_name, w.body, w.body_len,
                          ctype))
            mr = answer_stamp(g, con, method, path, ctype, r);
        else
            mr = answer_plain(g, con, &w, path);
        pthread_mutex_unlock(&g->mu);
    }
    free(path);
    return mr;
}

/* ---- the server's callbacks ---------------------------------------------- */

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *con)
{
    (void)cls;
    (void)con;
    struct greq *r = calloc(1, sizeof *r);
    if (r)
        r->body = (struct buf)BUF_MAX(BODY_MAX);
    if (r && !(r->uri = strdup(uri))) {
        free(r);
        r = NULL;
    }
    return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *con, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    (void)url;
    (void)version;
    struct greq *r = *con_cls;
    if (!r)
        return MHD_NO;
    if (!r->started) {
        r->started = 1;
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        buf_add(&r->body, upload, n); /* a refusal is answered once it is all read */
        return MHD_YES;
    }
    return answer(cls, con, method, r);
}

static void on_done(void *cls, struct MHD_Connection *con, void **con_cls,
                    enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)con;
    (void)toe;
    struct greq *r = *con_cls;
    if (r) {
        free(r->uri);
        buf_release(&r->body);
        free(r);
    }
    *con_cls = NULL;
}

static void gateway_say(void (*say)(const char *), const char *line)
{
    if (say)
        say(line);
}

static struct gateway *the_gateway; /* for the retry policy's say: one per process */

static void policy_say(const char *line)
{
    if (the_gateway)
        gateway_say(the_gateway->o.say, line);
}

struct gateway *gateway_start(const struct gateway_opts *o, char *err, size_t errlen)
{
    struct gateway *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, errlen, "the runner's gateway: out of memory");
        close(o->listen_fd);
        return NULL;
    }
    g->o = *o;
    the_gateway = g;
    pthread_mutex_init(&g->mu, NULL);
    char rerr[1024];
    if (!(g->rest = kube_open(o->ko, policy_say, rerr, sizeof rerr))) {
        snprintf(err, errlen, "the runner's gateway cannot reach the cluster: %s", rerr);
        close(o->listen_fd);
        return NULL;
    }
    journal_init(&g->journal, &o->shared->journal);
    g->door = (struct door){o->ko, o->deadline, g->rest, &g->journal, o->say};
    if (o->overlay_path) {
        char oerr[512];
        if (!(g->ov = overlay_load(o->overlay_path, oerr, sizeof oerr))) {
            snprintf(err, errlen, "the runner's gateway: preview: %s", oerr);
            close(o->listen_fd);
            return NULL;
        }
    } else if (o->ko->dry_run && !(g->ov = overlay_empty())) {
        /* A plain dry run keeps the script's own dry-run answers for the
         * script alone: kubectl reads back what it wrote (`delete` waits
         * for the object to be gone, which a dry-run delete never makes
         * it). */
        snprintf(err, errlen, "the runner's gateway: out of memory");
        close(o->listen_fd);
        return NULL;
    }
    g->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                                MHD_USE_POLL | MHD_USE_TLS,
                            0, NULL, NULL, on_request, g, MHD_OPTION_LISTEN_SOCKET, o->listen_fd,
                            MHD_OPTION_HTTPS_MEM_KEY, o->cred->key_pem,
                            MHD_OPTION_HTTPS_MEM_CERT, o->cred->cert_pem,
                            MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
                            MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(256 * 1024),
                            MHD_OPTION_END);
    if (!g->d) {
        snprintf(err, errlen, "the runner's gateway: the HTTP server did not start on its "
                 "loopback socket");
        close(o->listen_fd);
        return NULL;
    }
    return g;
}

static long peak_rss_kb(void)
{
    size_t len;
    char *t = util_read_file("/proc/self/status", &len);
    const char *p = t ? strstr(t, "VmHWM:") : NULL;
    long kb = p ? strtol(p + 6, NULL, 10) : 0;
    free(t);
    return kb;
}

int gateway_finish(struct gateway *g, char *err, size_t errlen)
{
    if (!g)
        return 0;
    atomic_store(&g->closing, 1);
    pthread_mutex_lock(&g->mu);
    int rc = 0;
    if (g->ov && g->o.overlay_path && overlay_changed(g->ov) &&
        overlay_save(g->ov, g->o.overlay_path, err, errlen) != 0)
        rc = -1;
    g->o.shared->peak_rss_kb = peak_rss_kb();
    pthread_mutex_unlock(&g->mu);
    return rc;
}

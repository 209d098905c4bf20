/* ledger.c: reads and writes the ledger ConfigMap, and its Events.
 *
 * Owns the requests: reading it (the document is formats/ledgerdoc.c's,
 * which alone knows the `m.` key prefix); the fresh-install create with
 * its no-delete label and keep annotation (and the same two given once to a
 * ledger an older chart rendered); merge patches of `data.m.*`; and telling
 * a ledger deleted under a write (404) or full (FieldValueTooLong) from
 * other refusals. Must never read-modify-write the object, use
 * client-side apply, or delete a key, and write `version` only as a legacy
 * script's stamp the gateway absorbed (in the same patch as that script's
 * ok record). Keys written by merge patch are not in
 * last-applied-configuration, so they also survive a `kubectl apply` of
 * `version` that reaches the apiserver some other way (an older runner, a
 * person). */
#include "run/ledger.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "formats/manifest.h"
#include "base/util.h"
#include "client/event.h"

/* What a write asks back: the object's metadata alone. The writer needs
 * nothing of the answer but its status, and the whole ledger (2,000 records
 * are over half a megabyte) would be encoded by the apiserver, sent and
 * parsed here on every record. Errors still come back as a JSON Status. */
#define METADATA_ONLY "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

static void cm_path(char *buf, size_t n, const struct ledger_loc *at, int item)
{
    snprintf(buf, n, "/api/v1/namespaces/%s/configmaps%s%s", at->ns, item ? "/" : "",
             item ? at->name : "");
}

/* at->rv from an answer that is the ledger or its metadata (left as it was
 * when the answer has none: the next write then conflicts and refreshes). */
static void take_rv(struct ledger_loc *at, const cJSON *obj)
{
    const cJSON *rv = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "resourceVersion");
    if (cJSON_IsString(rv) && strlen(rv->valuestring) < sizeof at->rv)
        snprintf(at->rv, sizeof at->rv, "%s", rv->valuestring);
}

enum ledger_rc ledger_read(struct ledger_loc *at, struct ledger *l, struct buf *err)
{
    char path[512];
    cm_path(path, sizeof path, at, 1);
    struct rest_result r;
    memset(l, 0, sizeof *l);
    if (rest_do(at->rest, "GET", path, NULL, NULL, NULL, 0, 1, HUGE_VAL, &r) != 0) {
        /* Absent only when the apiserver says so of this ConfigMap: a 404
         * from a path no API serves (a wrong prefix in the server URL, a
         * proxy) names nothing, and this cluster may well have a ledger. */
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(r.err.details, "kind");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(r.err.details, "name");
        if (r.err.code == 404 && strcmp(r.err.reason, "NotFound") == 0 && cJSON_IsString(kind) &&
            strcmp(kind->valuestring, "configmaps") == 0 && cJSON_IsString(name) &&
            strcmp(name->valuestring, at->name) == 0) {
            rest_result_free(&r);
            return LEDGER_OK;
        }
        if (r.err.code == 404) {
            buf_setf(err, "reading the ledger %s/%s: %s answered 404 without saying the "
                     "ConfigMap is absent (no NotFound Status for configmaps \"%s\"): is the "
                     "server URL right? A path that serves no API answers so",
                     at->ns, at->name, rest_config(at->rest)->server, at->name);
            rest_result_free(&r);
            return LEDGER_ERROR;
        }
        char m[REST_ERRSTR_MAX];
        rest_error_string(&r.err, m, sizeof m);
        buf_setf(err, "reading the ledger %s/%s: %s", at->ns, at->name, m);
        rest_result_free(&r);
        return LEDGER_ERROR;
    }
    struct buf why = BUF_INIT;
    at->rv[0] = '\0';
    take_rv(at, r.json);
    int rc = r.json ? ledger_parse(r.json, l, &why) : -1;
    if (rc == 0)
        ledger_mark_nul(r.body, r.len, l);
    if (!r.json)
        buf_setf(&why, "the response is not JSON");
    rest_result_free(&r);
    if (rc != 0)
        buf_setf(err, "ledger %s/%s: %s", at->ns, at->name, buf_str(&why));
    buf_release(&why);
    if (rc != 0)
        return LEDGER_UNTRUSTED;
    return LEDGER_OK;
}

/* Sends body; *code gets the HTTP status (0 for a transport failure), and
 * *too_long whether a refusal was for the object's size (a cause of
 * reason FieldValueTooLong, or 413). */
static int send(struct ledger_loc *at, const char *method, const char *path,
                const char *accept, const char *ctype, cJSON *body, struct buf *err,
                long *code, int *too_long)
{
    *too_long = 0;
    char *s = cJSON_PrintUnformatted(body);
    if (!s) {
        buf_setf(err, "out of memory");
        return -1;
    }
    struct rest_result r;
    /* A merge patch of whole string values is idempotent; a create is not,
     * and its AlreadyExists is handled by the caller re-reading. */
    double left = at->deadline ? at->deadline - now_mono() : HUGE_VAL;
    int rc = rest_do(at->rest, method, path, accept, ctype, s, strlen(s),
                     strcmp(method, "PATCH") == 0, left > 0.001 ? left : 0.001, &r);
    free(s);
    *code = rc == 0 ? r.status : r.err.code;
    if (rc == 0)
        take_rv(at, r.json);
    if (rc != 0 && (r.err.code == 413 || r.err.code == 422)) {
        const cJSON *cause;
        cJSON_ArrayForEach(cause, cJSON_GetObjectItemCaseSensitive(r.err.details, "causes")) {
            const cJSON *why = cJSON_GetObjectItemCaseSensitive(cause, "reason");
            if (cJSON_IsString(why) && strcmp(why->valuestring, "FieldValueTooLong") == 0)
                *too_long = 1;
        }
        *too_long |= r.err.code == 413;
    }
    if (rc != 0) {
        char m[REST_ERRSTR_MAX];
        rest_error_string(&r.err, m, sizeof m);
        buf_setf(err, "%s", m);
    }
    rest_result_free(&r);
    return rc;
}

/* Whether the runner's identity may `verb` the ledger ConfigMap (name NULL:
 * in its namespace), as the apiserver answers a SelfSubjectAccessReview:
 * 1 yes, 0 no, -1 unknown. */
static int rbac_allows(const struct ledger_loc *at, const char *verb, int named)
{
    cJSON *r = cJSON_CreateObject();
    cJSON *spec = cJSON_AddObjectToObject(r, "spec");
    cJSON *ra = cJSON_AddObjectToObject(spec, "resourceAttributes");
    char *body = NULL;
    if (ra && cJSON_AddStringToObject(r, "apiVersion", "authorization.k8s.io/v1") &&
        cJSON_AddStringToObject(r, "kind", "SelfSubjectAccessReview") &&
        cJSON_AddStringToObject(ra, "namespace", at->ns) &&
        cJSON_AddStringToObject(ra, "verb", verb) &&
        cJSON_AddStringToObject(ra, "resource", "configmaps") &&
        (!named || cJSON_AddStringToObject(ra, "name", at->name)))
        body = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    if (!body)
        return -1;
    struct rest_result res;
    int rc = rest_do(at->rest, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                     NULL, "application/json", body, strlen(body), 1, 10, &res);
    cJSON_free(body);
    const cJSON *allowed = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(res.json, "status"), "allowed");
    int v = rc != 0 || !cJSON_IsBool(allowed) ? -1 : cJSON_IsTrue(allowed);
    rest_result_free(&res);
    return v;
}

/* A refused ledger write: denied by admission when RBAC allows it (a 403
 * from a webhook, the 422 of a ValidatingAdmissionPolicy), which err then
 * says in so many words. */
static enum ledger_rc refused(const struct ledger_loc *at, const char *verb, int named, long code,
                              struct buf *err)
{
    if ((code == 403 || code == 422) && rbac_allows(at, verb, named) == 1) {
        /* the server's words, kept whole after the runner's */
        char *server = buf_detach(err, NULL);
        buf_setf(err, "the write to the ledger %s/%s was denied by admission or policy "
                 "(RBAC allows this runner to %s it; a webhook or admission policy refused it): %s",
                 at->ns, at->name, verb, server ? server : "");
        mem_free(server);
        return LEDGER_DENIED;
    }
    return LEDGER_ERROR;
}

enum ledger_rc ledger_create(struct ledger_loc *at, const struct ledger_entry *e,
                             size_t n, struct buf *err)
{
    cJSON *cm = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(cm, "metadata");
    cJSON *labels = cJSON_AddObjectToObject(meta, "labels");
    cJSON *ann = cJSON_AddObjectToObject(meta, "annotations");
    cJSON *d = ledger_records_data(e, n, NULL);
    if (!cm || !meta || !labels || !ann || !d ||
        !cJSON_AddStringToObject(cm, "apiVersion", "v1") ||
        !cJSON_AddStringToObject(cm, "kind", "ConfigMap") ||
        !cJSON_AddStringToObject(meta, "name", at->name) ||
        !cJSON_AddStringToObject(meta, "namespace", at->ns) ||
        !cJSON_AddStringToObject(labels, NO_DELETE_LABEL, "true") ||
        !cJSON_AddStringToObject(ann, KEEP_ANNOTATION, "keep") ||
        !cJSON_AddItemToObject(cm, "data", d)) {
        cJSON_Delete(cm);
        buf_setf(err, "out of memory");
        return LEDGER_ERROR;
    }
    char path[512];
    cm_path(path, sizeof path, at, 0);
    long code;
    int too_long;
    int rc = send(at, "POST", path, NULL, "application/json", cm, err, &code, &too_long);
    cJSON_Delete(cm);
    if (rc != 0)
        return code == 409 ? LEDGER_EXISTS : too_long ? LEDGER_FULL
                                     : refused(at, "create", 0, code, err);
    return LEDGER_OK;
}

int ledger_namespace_exists(struct ledger_loc *at, struct buf *err)
{
    char path[512];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s", at->ns);
    struct rest_result r;
    if (rest_do(at->rest, "GET", path, NULL, NULL, NULL, 0, 1, HUGE_VAL, &r) == 0) {
        rest_result_free(&r);
        return 1;
    }
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(r.err.details, "kind");
    int absent = r.err.code == 404 && strcmp(r.err.reason, "NotFound") == 0 &&
                 cJSON_IsString(kind) && strcmp(kind->valuestring, "namespaces") == 0;
    char m[REST_ERRSTR_MAX];
    rest_error_string(&r.err, m, sizeof m);
    buf_setf(err, "reading namespace %s: %s", at->ns, m);
    rest_result_free(&r);
    return absent ? 0 : -1;
}

enum ledger_rc ledger_namespace_create(struct ledger_loc *at, struct buf *err)
{
    cJSON *ns = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(ns, "metadata");
    if (!meta || !cJSON_AddStringToObject(ns, "apiVersion", "v1") ||
        !cJSON_AddStringToObject(ns, "kind", "Namespace") ||
        !cJSON_AddStringToObject(meta, "name", at->ns)) {
        cJSON_Delete(ns);
        buf_setf(err, "out of memory");
        return LEDGER_ERROR;
    }
    long code;
    int too_long;
    int rc = send(at, "POST", "/api/v1/namespaces", NULL, "application/json", ns, err,
                  &code, &too_long);
    cJSON_Delete(ns);
    if (rc != 0)
        return code == 409 ? LEDGER_EXISTS : LEDGER_ERROR;
    return LEDGER_OK;
}

/* One patch of the ledger's keys (consumed), conditional on at->rv: the
 * apiserver applies it only to the ledger this runner last saw. A strategic
 * merge patch (the ConfigMap is a built-in type): for data's flat map of
 * strings it means what a JSON merge patch means (a key set, null removes
 * it), keys written so stay out of kubectl's last-applied-configuration as
 * well, and the apiserver applies it in about half the time of a JSON merge
 * patch of the same keys (docs/performance.md, (d)). */
static enum ledger_rc patch(struct ledger_loc *at, cJSON *p, struct buf *err)
{
    if (*at->rv) {
        cJSON *meta = cJSON_GetObjectItemCaseSensitive(p, "metadata");
        if (!meta)
            meta = cJSON_AddObjectToObject(p, "metadata");
        if (!meta || !cJSON_AddStringToObject(meta, "resourceVersion", at->rv)) {
            cJSON_Delete(p);
            buf_setf(err, "out of memory");
            return LEDGER_ERROR;
        }
    }
    char path[512];
    cm_path(path, sizeof path, at, 1);
    long code;
    int too_long;
    int rc = send(at, "PATCH", path, METADATA_ONLY, "application/strategic-merge-patch+json", p,
                  err, &code, &too_long);
    cJSON_Delete(p);
    if (rc == 0)
        return LEDGER_OK;
    if (code == 404)
        return LEDGER_GONE;
    if (code == 409)
        return LEDGER_CONFLICT;
    if (too_long)
        return LEDGER_FULL;
    if (code == 0 || code == 429 || code >= 500)
        return LEDGER_UNAVAILABLE;
    return refused(at, "patch", 1, code, err);
}

enum ledger_rc ledger_refresh(struct ledger_loc *at, struct buf *err)
{
    char path[512];
    cm_path(path, sizeof path, at, 1);
    struct rest_result r;
    double left = at->deadline ? at->deadline - now_mono() : HUGE_VAL;
    int rc = rest_do(at->rest, "GET", path, METADATA_ONLY, NULL, NULL, 0, 1, left > 0.001 ? left : 0.001,
                     &r);
    enum ledger_rc out = LEDGER_OK;
    if (rc == 0) {
        at->rv[0] = '\0';
        take_rv(at, r.json);
    } else {
        char m[REST_ERRSTR_MAX];
        rest_error_string(&r.err, m, sizeof m);
        buf_setf(err, "reading the ledger %s/%s again: %s", at->ns, at->name, m);
        out = r.err.code == 404 ? LEDGER_GONE
              : r.err.code == 0 || r.err.code == 429 || r.err.code >= 500 ? LEDGER_UNAVAILABLE
                                                                           : LEDGER_ERROR;
    }
    rest_result_free(&r);
    return out;
}

enum ledger_rc ledger_write(struct ledger_loc *at, const struct ledger_entry *e, size_t n,
                            size_t *sent, struct buf *err)
{
    return ledger_write_stamped(at, e, n, -1, sent, err);
}

enum ledger_rc ledger_write_stamped(struct ledger_loc *at, const struct ledger_entry *e, size_t n,
                                    long version, size_t *sent, struct buf *err)
{
    cJSON *p = cJSON_CreateObject();
    cJSON *d = ledger_records_data(e, n, sent);
    char v[32];
    snprintf(v, sizeof v, "%ld", version);
    if (!p || !d || !cJSON_AddItemToObject(p, "data", d) ||
        (version >= 0 && !cJSON_AddStringToObject(d, "version", v))) {
        cJSON_Delete(p);
        cJSON_Delete(d);
        buf_setf(err, "out of memory");
        return LEDGER_ERROR;
    }
    return patch(at, p, err);
}

enum ledger_rc ledger_protect(struct ledger_loc *at, struct buf *err)
{
    cJSON *p = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(p, "metadata");
    cJSON *labels = cJSON_AddObjectToObject(meta, "labels");
    cJSON *ann = cJSON_AddObjectToObject(meta, "annotations");
    if (!labels || !ann || !cJSON_AddStringToObject(labels, NO_DELETE_LABEL, "true") ||
        !cJSON_AddStringToObject(ann, KEEP_ANNOTATION, "keep")) {
        cJSON_Delete(p);
        buf_setf(err, "out of memory");
        return LEDGER_ERROR;
    }
    return patch(at, p, err);
}

enum ledger_rc ledger_note_failures(struct ledger_loc *at, const char *text, struct buf *err)
{
    cJSON *p = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(p, "metadata");
    cJSON *ann = cJSON_AddObjectToObject(meta, "annotations");
    if (!ann || !cJSON_AddStringToObject(ann, FAILURES_ANNOTATION, text)) {
        cJSON_Delete(p);
        buf_setf(err, "out of memory");
        return LEDGER_ERROR;
    }
    return patch(at, p, err);
}

/* The most Events in flight at once: a run that makes them faster than
 * the apiserver answers waits for the oldest (memory stays bounded). */
#define EVENTS_IN_FLIGHT 16

/* An Event's answer: a failure is logged, as one sent alone would be. */
static void event_reply(const struct ledger_loc *at, int rc, struct rest_result *r)
{
    struct event_about about = {"v1", "ConfigMap", at->ns, at->name, NULL};
    char err[ERRLINE_MAX];
    if (event_answered(&about, NULL, rc, r, err, sizeof err) < 0)
        log_warn("%s", err);
    rest_result_free(r);
}

void ledger_events_flush(struct ledger_loc *at)
{
    if (!at->events)
        return;
    void *tag;
    int rc;
    struct rest_result r;
    while (rest_pool_next(at->events, &tag, &rc, &r))
        event_reply(at, rc, &r);
    rest_pool_free(at->events);
    at->events = NULL;
}

/* Hands the Event to the pool and puts it on the wire: 0, or -1 when it
 * must go out alone (no pool, no room, no memory). */
static int event_send(struct ledger_loc *at, const char *path, const char *body)
{
    if (!at->events && !(at->events = rest_pool_new(at->rest)))
        return -1;
    void *tag;
    int rc;
    struct rest_result r;
    while (rest_pool_collect(at->events, &tag, &rc, &r))
        event_reply(at, rc, &r);
    while (rest_pool_busy(at->events) >= EVENTS_IN_FLIGHT &&
           rest_pool_next(at->events, &tag, &rc, &r))
        event_reply(at, rc, &r);
    if (rest_pool_submit(at->events, "POST", path, NULL, "application/json", body, strlen(body),
                         0, 30, NULL) != 0)
        return -1;
    rest_pool_send(at->events, 2);
    return 0;
}

void ledger_event(struct ledger_loc *at, const char *uid, const char *type,
                  const char *reason, const char *message)
{
    struct event_about about = {"v1", "ConfigMap", at->ns, at->name, uid};
    char err[ERRLINE_MAX], path[512];
    char *body = event_build(&about, NULL, type, reason, message, path, sizeof path);
    if (body && event_send(at, path, body) == 0) {
        cJSON_free(body);
        return;
    }
    cJSON_free(body);
    /* no pool to take it: sent alone, waited for */
    if (event_post(at->rest, &about, NULL, type, reason, message, err, sizeof err) < 0)
        log_warn("%s", err);
}

/* door.c: the one door between a migration and the apiserver (see door.h).
 *
 * Owns the judgement of a request as it goes on the wire (the guard on its
 * path without the query and on its body as sent, a YAML body sent as the
 * JSON the guard read, a write of one Event judged on the Event as it is,
 * the dry run's marks, the deadline), which requests are reviews (no
 * writes), which are safe to repeat, the read of a write's
 * object before it, and the bookkeeping of its answer (the dry-run report,
 * the journal). Lifted out of the Lua binding so that a shell migration's
 * requests, through the gateway, pass exactly the same checks. Must never
 * let a request out that the guard did not allow as sent, send a mutating
 * request of a dry run without dryRun=All, send anything after the
 * deadline, or mark a create as safe to repeat. */
#include "door/door.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/defaults.h"
#include "base/util.h"
#include "door/dryrun.h"

/* Seconds before the deadline (negative once passed); HUGE_VAL without one. */
static double door_remaining(const struct door *d)
{
    if (!d->deadline)
        return HUGE_VAL;
    return d->deadline - now_mono();
}

enum guard_verdict door_judge(const struct kube_options *ko, const char *method, const char *path,
                              const char *body, size_t body_len, const char *ctype, char *why,
                              size_t whylen)
{
    struct guard_target gt = {ko->ledger_namespace, ko->ledger_name, ko->lease_name,
                              EVENT_COMPONENT, ko->dry_run};
    return guard_check(&gt, method, path, body, body_len, ctype, why, whylen);
}

int door_safe(const char *method, const cJSON *jbody)
{
    if (strcmp(method, "POST") == 0)
        return 0;
    if (strcmp(method, "PUT") == 0) {
        const cJSON *rv = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(jbody, "metadata"), "resourceVersion");
        return cJSON_IsString(rv) && *rv->valuestring;
    }
    return 1;
}

int door_nonresource_read(const char *method, const char *path)
{
    static const char *const exact[] = {"/version", "/healthz", "/livez", "/readyz",
                                        "/openapi/v2", "/openapi/v3", NULL};
    if (strcmp(method, "GET") != 0)
        return 0;
    size_t n = strcspn(path, "?");
    for (const char *const *e = exact; *e; e++)
        if (strlen(*e) == n && strncmp(path, *e, n) == 0)
            return 1;
    /* one OpenAPI v3 document per group version: /openapi/v3/apis/apps/v1 */
    if (strncmp(path, "/openapi/v3/", 12) != 0)
        return 0;
    for (size_t i = 12; i < n; i++) {
        char ch = path[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' ||
              ch == '/') || (ch == '.' && path[i - 1] == '/') || (ch == '/' && path[i - 1] == '/'))
            return 0;
    }
    return 1;
}

/* Whether a query string carries dryRun=All. */
static int has_dry_run(const char *query)
{
    for (const char *p = query; p && *p;) {
        size_t n = strcspn(p, "&");
        if (n == strlen("dryRun=All") && strncmp(p, "dryRun=All", n) == 0)
            return 1;
        p += n + (p[n] == '&');
    }
    return 0;
}

/* A DeleteOptions body marked as a dry run: the apiserver reads a DELETE's
 * options from its body when it has one, and the query's dryRun is then
 * ignored. NULL when the body is not a JSON object (a dry run cannot vouch
 * for it) or memory ran out. */
static char *dry_run_body(const char *body, size_t len)
{
    cJSON *o = cJSON_ParseWithLength(body, len);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return NULL;
    }
    /* every spelling a loose decoder might read */
    for (cJSON *it = o->child, *next; it; it = next) {
        next = it->next;
        if (it->string && strcasecmp(it->string, "dryRun") == 0)
            cJSON_Delete(cJSON_DetachItemViaPointer(o, it));
    }
    const char *all[] = {"All"};
    cJSON *arr = cJSON_CreateStringArray(all, 1);
    if (!arr || !cJSON_AddItemToObject(o, "dryRun", arr)) {
        cJSON_Delete(arr);
        cJSON_Delete(o);
        return NULL;
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* A write of an Event is judged on the Event as it is, read with the
 * runner's own client: one the engine wrote claims the runner, whatever
 * its name, and no script may change or delete it. One that cannot be read
 * cannot be judged, and is refused. */
static enum guard_verdict judge_object(const struct door *d, const char *path, char *why,
                                       size_t whylen)
{
    struct rest_error e;
    cJSON *cur = door_get_json(d, path, "application/json", &e);
    enum guard_verdict v;
    if (!cur && e.code == 404) {
        v = GUARD_ALLOW;
    } else if (!cur) {
        snprintf(why, whylen, "the Event it acts on could not be read to judge the write: %.300s",
                 e.message);
        v = GUARD_BAD_BODY;
    } else {
        struct guard_target gt = {d->ko->ledger_namespace, d->ko->ledger_name, d->ko->lease_name,
                                  EVENT_COMPONENT, d->ko->dry_run};
        v = guard_check_object(&gt, path, cur, why, whylen);
    }
    cJSON_Delete(cur);
    rest_error_free(&e);
    return v;
}

void door_out_free(struct door_out *o)
{
    free(o->own_path);
    cJSON_free(o->own_body);
    o->own_path = o->own_body = NULL;
}

enum door_rc door_ready(const struct door *d, const struct door_req *w, struct door_out *o,
                        enum guard_verdict *gv, char *why, size_t whylen)
{
    memset(o, 0, sizeof *o);
    *gv = GUARD_ALLOW;
    *why = '\0';
    const char *q = strchr(w->path, '?');
    if (!door_nonresource_read(w->method, w->path)) {
        size_t plen = q ? (size_t)(q - w->path) : strlen(w->path);
        char *path = malloc(plen + 1);
        if (!path)
            return DOOR_NOMEM;
        memcpy(path, w->path, plen);
        path[plen] = '\0';
        *gv = door_judge(d->ko, w->method, path, w->body, w->body_len,
                         w->body && !w->ctype ? "application/json" : w->ctype, why, whylen);
        if (*gv == GUARD_ALLOW && guard_needs_object(w->method, path))
            *gv = judge_object(d, path, why, whylen);
        free(path);
        if (*gv != GUARD_ALLOW)
            return DOOR_REFUSED;
    }
    const char *send_path = w->path, *body = w->body, *ctype = w->ctype;
    size_t body_len = w->body_len;
    char *own_path = NULL, *own_body = NULL;
    if (body && guard_yaml_type(ctype)) {
        /* judge what you send, send what you judged: the apiserver reads
         * the JSON the guard read, never the YAML it might read otherwise */
        if (!(own_body = guard_yaml_json(body, body_len, why, whylen))) {
            *gv = GUARD_UNREADABLE;
            return DOOR_REFUSED;
        }
        body = own_body;
        body_len = strlen(own_body);
        if (!strcasestr(ctype, "apply-patch"))
            ctype = "application/json";
        else
            ctype = "application/apply-patch+yaml"; /* JSON is YAML */
    }
    if (d->ko->dry_run && strcmp(w->method, "GET") != 0) {
        if (!has_dry_run(q ? q + 1 : NULL)) {
            size_t n = strlen(w->path) + sizeof "&dryRun=All";
            if (!(own_path = malloc(n)))
                return DOOR_NOMEM;
            snprintf(own_path, n, "%s%s", w->path, q ? (q[1] ? "&dryRun=All" : "dryRun=All")
                                                     : "?dryRun=All");
            send_path = own_path;
        }
        if (strcmp(w->method, "DELETE") == 0 && body && body_len) {
            char *marked = dry_run_body(body, body_len);
            cJSON_free(own_body);
            own_body = marked;
            if (!own_body) {
                free(own_path);
                *gv = GUARD_DRY_RUN;
                snprintf(why, whylen, "a dry-run DELETE sends its options as a JSON object the "
                         "host marks dryRun; this body is not one");
                return DOOR_REFUSED;
            }
            body = own_body;
            body_len = strlen(own_body);
        }
    }
    o->path = send_path;
    o->body = body;
    o->ctype = ctype;
    o->body_len = body_len;
    o->own_path = own_path;
    o->own_body = own_body;
    o->left = door_remaining(d);
    if (d->deadline && o->left <= 0) {
        snprintf(why, whylen, "the migration's deadline has passed: nothing more is sent");
        door_out_free(o);
        return DOOR_LATE;
    }
    return DOOR_OK;
}

enum door_rc door_send(const struct door *d, const struct door_req *w, struct rest_result *out,
                       enum guard_verdict *gv, char *why, size_t whylen)
{
    memset(out, 0, sizeof *out);
    struct door_out o;
    enum door_rc rc = door_ready(d, w, &o, gv, why, whylen);
    if (rc != DOOR_OK)
        return rc;
    rc = rest_do_ex(d->rest, w->method, o.path, w->accept, o.ctype, o.body, o.body_len, w->safe,
                    o.left, w->headers, w->flags, out) == 0 ? DOOR_OK : DOOR_FAILED;
    door_out_free(&o);
    return rc;
}

cJSON *door_get_json(const struct door *d, const char *path, const char *accept,
                     struct rest_error *err)
{
    struct door_req w = {"GET", path, accept, NULL, NULL, 0, 1, NULL, 0};
    struct rest_result r;
    enum guard_verdict gv;
    char why[512];
    memset(err, 0, sizeof *err);
    enum door_rc rc = door_send(d, &w, &r, &gv, why, sizeof why);
    if (rc == DOOR_REFUSED || rc == DOOR_LATE || rc == DOOR_NOMEM) {
        rest_result_free(&r);
        char msg[700];
        snprintf(err->reason, sizeof err->reason, "%s", door_refusal(rc, gv, why, msg, sizeof msg));
        snprintf(err->message, sizeof err->message, "GET %s: %s", path, msg);
        return NULL;
    }
    return rest_take_json(&r, rc == DOOR_OK, path, err);
}

const char *door_refusal(enum door_rc rc, enum guard_verdict gv, const char *why, char *msg,
                         size_t len)
{
    if (rc == DOOR_LATE) {
        snprintf(msg, len, "%s", why);
        return "Timeout";
    }
    if (rc == DOOR_NOMEM) {
        snprintf(msg, len, "out of memory");
        return "MemoryLimit";
    }
    if (gv == GUARD_PROTECTED || gv == GUARD_BAD_BODY) {
        snprintf(msg, len, "the ledger is written by the runner: scripts may not write it, its "
                 "lock, its namespace or the runner's Events (%s)", why);
        return "LedgerProtected";
    }
    snprintf(msg, len, "%s", why);
    return gv == GUARD_DRY_RUN ? "DryRunRefused" : gv == GUARD_UNREADABLE ? "BadRequest"
                                                                         : "BadPath";
}

void door_prior_read(const struct door *d, const char *method, const char *path,
                     const cJSON *jbody, const cJSON *held, struct door_prior *p)
{
    memset(p, 0, sizeof *p);
    int mutating = strcmp(method, "GET") != 0, creating = strcmp(method, "POST") == 0;
    if (!mutating || creating)
        return;
    int report = d->ko->dry_run;
    const char *known = d->journal ? journal_rv(d->journal, path) : NULL;
    if (known)
        snprintf(p->rv_before, sizeof p->rv_before, "%s", known);
    if (strcmp(method, "PUT") == 0 && !*p->rv_before) {
        const cJSON *rv = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(jbody, "metadata"), "resourceVersion");
        if (cJSON_IsString(rv))
            snprintf(p->rv_before, sizeof p->rv_before, "%s", rv->valuestring);
    }
    if (held) {
        p->before = cJSON_Duplicate(held, 1);
    } else if (report || (!*p->rv_before && strcmp(method, "DELETE") != 0)) {
        struct rest_error be;
        p->before = door_get_json(d, path, NULL, &be);
        rest_error_free(&be);
    }
    const cJSON *brv = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(p->before, "metadata"), "resourceVersion");
    if (cJSON_IsString(brv) && !*p->rv_before)
        snprintf(p->rv_before, sizeof p->rv_before, "%s", brv->valuestring);
}

void door_prior_free(struct door_prior *p)
{
    cJSON_Delete(p->before);
    memset(p, 0, sizeof *p);
}

/* Whether a request is a review (SelfSubjectAccessReview: `kubectl auth
 * can-i`; SelfSubjectReview: `auth whoami`; the rules, subject and token
 * reviews): a POST that asks and persists nothing, so no write. */
static int door_review(const char *method, const char *path)
{
    static const char *const reviews[] = {
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        "/apis/authentication.k8s.io/v1beta1/selfsubjectreviews",
        "/apis/authentication.k8s.io/v1alpha1/selfsubjectreviews", NULL};
    if (strcmp(method, "POST") != 0)
        return 0;
    size_t n = strcspn(path, "?");
    for (const char *const *r = reviews; *r; r++)
        if (strlen(*r) == n && strncmp(path, *r, n) == 0)
            return 1;
    /* localsubjectaccessreviews live in a namespace */
    const char *ns = "/apis/authorization.k8s.io/v1/namespaces/", *tail = "/localsubjectaccessreviews";
    size_t l = strlen(ns), t = strlen(tail);
    return n > l + t && strncmp(path, ns, l) == 0 && strncmp(path + n - t, tail, t) == 0 &&
           memchr(path + l, '/', n - t - l) == NULL;
}

void door_after(const struct door *d, const char *method, const char *verb, const char *path,
                int ok, long status, const cJSON *answer, const struct door_prior *p)
{
    /* a review (auth can-i, auth whoami) is a question: it stores nothing */
    int mutating = strcmp(method, "GET") != 0 && !door_review(method, path);
    if (!mutating) {
        if (ok && d->journal)
            journal_seen(d->journal, path, answer);
        return;
    }
    int would = -1;
    char fields[JOURNAL_FIELDS_MAX] = "";
    if (d->ko->dry_run && ok) {
        char text[4096];
        would = dryrun_report(method, path, p ? p->before : NULL, answer, text, sizeof text,
                              fields, sizeof fields) > 0;
        if (d->say)
            d->say(text);
    }
    if (d->journal)
        journal_add(d->journal, method, verb, path, status, ok ? answer : NULL,
                    p && *p->rv_before ? p->rv_before : NULL, would, d->ko->dry_run, fields);
}

/* ledger.c: reads and writes the ledger ConfigMap, and its Events.
 *
 * Owns the ledger's wire shape: `version` (read only) and `m.<slug>` records
 * (the prefix is known here and nowhere else); the fresh-install create with
 * its no-delete label and keep annotation (and the same two given once to a
 * ledger an older chart rendered); merge patches of `data.m.*`; and telling
 * a ledger deleted under a write (404) or full (FieldValueTooLong) from
 * other refusals. Must never read-modify-write the object, use
 * client-side apply, write `version`, or delete a key: legacy scripts still
 * `kubectl apply` the `version` key, and keys written by merge patch are not
 * in last-applied-configuration, so they survive that apply. */
#include "run/ledger.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "formats/manifest.h"
#include "base/util.h"
#include "kube/event.h"

#define PREFIX "m."
#define NO_DELETE_LABEL "platform.cozystack.io/no-delete"
#define KEEP_ANNOTATION "helm.sh/resource-policy"
/* What a write asks back: the object's metadata alone. The writer needs
 * nothing of the answer but its status, and the whole ledger (2,000 records
 * are over half a megabyte) would be encoded by the apiserver, sent and
 * parsed here on every record. Errors still come back as a JSON Status. */
#define METADATA_ONLY "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

void ledger_free(struct ledger *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->e[i].slug);
    free(l->e);
    memset(l, 0, sizeof *l);
}

const struct record *ledger_find(const struct ledger *l, const char *slug)
{
    const struct ledger_entry *e = ledger_find_entry(l, slug);
    return e ? &e->rec : NULL;
}

const struct ledger_entry *ledger_find_entry(const struct ledger *l, const char *slug)
{
    /* The planner asks once per manifest slug: a linear scan made planning
     * over 2,000 records quadratic (4 million strcmp). */
    if (l->sorted) {
        size_t lo = 0, hi = l->n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            int c = strcmp(l->e[mid].slug, slug);
            if (c == 0)
                return &l->e[mid];
            if (c < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        return NULL;
    }
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->e[i].slug, slug) == 0)
            return &l->e[i];
    return NULL;
}

/* A value as it can sit inside "..." in a one-line message: control
 * characters and quotes escaped, cut (whole UTF-8 sequences) to fit. */
static void quote_for_message(const char *v, char *out, size_t cap)
{
    size_t at = 0;
    for (const unsigned char *p = (const unsigned char *)v; *p && at + 5 < cap; p++) {
        if (*p == '\n' || *p == '\t' || *p == '"' || *p == '\\')
            at += (size_t)snprintf(out + at, cap - at, "\\%c",
                                   *p == '\n' ? 'n' : *p == '\t' ? 't' : (char)*p);
        else if (*p < 0x20 || *p == 0x7f)
            at += (size_t)snprintf(out + at, cap - at, "\\x%02x", *p);
        else
            out[at++] = (char)*p;
    }
    out[at] = '\0';
    utf8_clip(out);
}

/* The JSON text of the ConfigMap, already parsed (so well formed), walked
 * again for what cJSON cannot say: a value under `data` holding the escape
 * \u0000. cJSON decodes it to a NUL byte and every C string then ends there,
 * so "{...}\u0000junk" would read as the object alone. */
static const char *skip_ws(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* p at '"': just past the closing quote; *nul set when it holds \u0000. */
static const char *string_end(const char *p, const char *e, int *nul)
{
    for (p++; p < e && *p != '"'; p++)
        if (*p == '\\') {
            if (e - p >= 6 && memcmp(p + 1, "u0000", 5) == 0)
                *nul = 1;
            p++;
        }
    return p < e ? p + 1 : e;
}

/* p at a value: just past it. */
static const char *value_end(const char *p, const char *e)
{
    int depth = 0, nul = 0;
    do {
        p = skip_ws(p, e);
        if (p >= e)
            return e;
        if (*p == '"')
            p = string_end(p, e, &nul);
        else if (*p == '{' || *p == '[')
            depth++, p++;
        else if (*p == '}' || *p == ']')
            depth--, p++;
        else if (depth == 0)
            while (p < e && !strchr(",}] \t\r\n", *p))
                p++;
        else
            p++;
    } while (depth > 0 && p < e);
    return p;
}

static void mark_nul(struct ledger *l, const char *key, size_t klen)
{
    if (klen == 7 && memcmp(key, "version", 7) == 0) {
        l->has_version = 0;
        l->version_bad = 1;
        snprintf(l->version_raw, sizeof l->version_raw, "(a value holding a NUL byte)");
        return;
    }
    if (klen < strlen(PREFIX) || memcmp(key, PREFIX, strlen(PREFIX)) != 0)
        return;
    for (size_t i = 0; i < l->n; i++)
        if (strlen(l->e[i].slug) == klen - strlen(PREFIX) &&
            memcmp(l->e[i].slug, key + strlen(PREFIX), klen - strlen(PREFIX)) == 0) {
            l->e[i].rec.state = REC_UNKNOWN;
            snprintf(l->e[i].rec.problem, sizeof l->e[i].rec.problem, "holds a NUL byte");
        }
}

/* Each data value of the object text that holds a NUL byte: its record
 * (or `version`) is unreadable. Keys are compared as they are written: a
 * ConfigMap key is [-._a-zA-Z0-9]+ and needs no escape. */
static void mark_nul_values(const char *body, size_t len, struct ledger *l)
{
    const char *e = body + len, *p = skip_ws(body, e);
    if (!memmem(body, len, "\\u0000", 6) || p >= e || *p != '{')
        return;
    for (p++;;) {
        p = skip_ws(p, e);
        if (p >= e || *p != '"')
            return;
        int nul = 0;
        const char *key = p + 1;
        p = string_end(p, e, &nul);
        size_t klen = (size_t)(p - 1 - key);
        p = skip_ws(p, e);
        if (p >= e || *p != ':')
            return;
        p = skip_ws(p + 1, e);
        if (klen == 4 && memcmp(key, "data", 4) == 0 && p < e && *p == '{') {
            for (p++;;) {
                p = skip_ws(p, e);
                if (p >= e || *p != '"')
                    break;
                const char *k = p + 1;
                p = string_end(p, e, &nul);
                size_t kl = (size_t)(p - 1 - k);
                p = skip_ws(p, e);
                if (p >= e || *p != ':')
                    return;
                p = skip_ws(p + 1, e);
                nul = 0;
                if (p < e && *p == '"')
                    p = string_end(p, e, &nul);
                else
                    p = value_end(p, e);
                if (nul)
                    mark_nul(l, k, kl);
                p = skip_ws(p, e);
                if (p < e && *p == ',')
                    p++;
            }
            p = skip_ws(p, e);
            if (p < e && *p == '}')
                p++;
        } else {
            p = value_end(p, e);
        }
        p = skip_ws(p, e);
        if (p >= e || *p != ',')
            return;
        p++;
    }
}

int ledger_parse(const cJSON *cm, struct ledger *l, char *err, size_t errlen)
{
    memset(l, 0, sizeof *l);
    l->exists = 1;
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(cm, "metadata");
    const cJSON *uid = cJSON_GetObjectItemCaseSensitive(meta, "uid");
    if (cJSON_IsString(uid))
        snprintf(l->uid, sizeof l->uid, "%s", uid->valuestring);
    const cJSON *label = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(meta, "labels"), NO_DELETE_LABEL);
    const cJSON *keep = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(meta, "annotations"), KEEP_ANNOTATION);
    l->protected_ = cJSON_IsString(label) && strcmp(label->valuestring, "true") == 0 &&
                    cJSON_IsString(keep) && strcmp(keep->valuestring, "keep") == 0;
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(cm, "data");
    const cJSON *kv;
    /* One allocation for every record: a record is some 22 KiB, nearly all
     * of it the output and journal buffers that record_parse leaves
     * untouched, so pages nobody writes are never faulted in. */
    size_t cap = 0;
    cJSON_ArrayForEach(kv, data)
        if (cJSON_IsString(kv) && strncmp(kv->string, PREFIX, strlen(PREFIX)) == 0)
            cap++;
    if (cap && !(l->e = malloc(cap * sizeof *l->e))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    cJSON_ArrayForEach(kv, data) {
        if (!cJSON_IsString(kv))
            continue;
        size_t kvbytes = strlen(kv->string) + strlen(kv->valuestring);
        l->bytes += kvbytes;
        if (strcmp(kv->string, "version") == 0) {
            /* A plain decimal within what any legacy map can mean; anything
             * else is reported (with every other bad key) by the planner. */
            long n;
            if (parse_decimal(kv->valuestring, LEGACY_NUMBER_MAX + 1L, &n) != 0) {
                l->version_bad = 1;
                quote_for_message(kv->valuestring, l->version_raw, sizeof l->version_raw);
                continue;
            }
            l->has_version = 1;
            l->version = n;
            continue;
        }
        if (strncmp(kv->string, PREFIX, strlen(PREFIX)) != 0)
            continue;
        struct ledger_entry *ne = l->e;
        if (!(ne[l->n].slug = strdup(kv->string + strlen(PREFIX)))) {
            snprintf(err, errlen, "out of memory");
            ledger_free(l);
            return -1;
        }
        ne[l->n].bytes = kvbytes;
        record_parse(kv->valuestring, strlen(kv->valuestring), &ne[l->n].rec);
        /* m.<anything but a slug> is no record the engine writes, and no
         * --only or skip can name it. */
        if (!slug_valid(ne[l->n].slug)) {
            ne[l->n].rec.state = REC_UNKNOWN;
            snprintf(ne[l->n].rec.problem, sizeof ne[l->n].rec.problem,
                     "not a record key: '%.60s' is not a slug", ne[l->n].slug);
        }
        l->n++;
    }
    /* The engine reads data alone: a key kept in binaryData is one it
     * would not see (a record, or `version`), so the ledger is refused. */
    const cJSON *bin = cJSON_GetObjectItemCaseSensitive(cm, "binaryData");
    cJSON_ArrayForEach(kv, bin) {
        if (!l->binary_keys++ && kv->string)
            snprintf(l->binary_key, sizeof l->binary_key, "%s", kv->string);
    }
    l->sorted = 1;
    for (size_t i = 1; i < l->n && l->sorted; i++)
        l->sorted = strcmp(l->e[i - 1].slug, l->e[i].slug) < 0;
    return 0;
}

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

enum ledger_rc ledger_read(struct ledger_loc *at, struct ledger *l, char *err,
                           size_t errlen)
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
            snprintf(err, errlen, "reading the ledger %s/%s: %s answered 404 without saying the "
                     "ConfigMap is absent (no NotFound Status for configmaps \"%s\"): is the "
                     "server URL right? A path that serves no API answers so",
                     at->ns, at->name, rest_config(at->rest)->server, at->name);
            rest_result_free(&r);
            return LEDGER_ERROR;
        }
        char m[REST_ERRSTR_MAX];
        rest_error_string(&r.err, m, sizeof m);
        snprintf(err, errlen, "reading the ledger %s/%s: %s", at->ns, at->name, m);
        rest_result_free(&r);
        return LEDGER_ERROR;
    }
    char why[256];
    at->rv[0] = '\0';
    take_rv(at, r.json);
    int rc = r.json ? ledger_parse(r.json, l, why, sizeof why) : -1;
    if (rc == 0)
        mark_nul_values(r.body, r.len, l);
    if (!r.json)
        snprintf(why, sizeof why, "the response is not JSON");
    rest_result_free(&r);
    if (rc != 0) {
        snprintf(err, errlen, "ledger %s/%s: %s", at->ns, at->name, why);
        return LEDGER_UNTRUSTED;
    }
    return LEDGER_OK;
}

/* Sends body; *code gets the HTTP status (0 for a transport failure), and
 * *too_long whether a refusal was for the object's size (a cause of
 * reason FieldValueTooLong, or 413). */
static int send(struct ledger_loc *at, const char *method, const char *path,
                const char *accept, const char *ctype, cJSON *body, char *err, size_t errlen,
                long *code, int *too_long)
{
    *too_long = 0;
    char *s = cJSON_PrintUnformatted(body);
    if (!s) {
        snprintf(err, errlen, "out of memory");
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
        snprintf(err, errlen, "%s", m);
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
                              char *err, size_t errlen)
{
    if ((code == 403 || code == 422) && rbac_allows(at, verb, named) == 1) {
        char server[ERRLINE_MAX];
        snprintf(server, sizeof server, "%s", err);
        snprintf(err, errlen, "the write to the ledger %s/%s was denied by admission or policy "
                 "(RBAC allows this runner to %s it; a webhook or admission policy refused it): %s",
                 at->ns, at->name, verb, server);
        utf8_clip(err);
        return LEDGER_DENIED;
    }
    return LEDGER_ERROR;
}

/* {"m.<slug>": "<record>", ...}, or NULL when out of memory. */
static cJSON *records_data(const struct ledger_entry *e, size_t n)
{
    cJSON *d = cJSON_CreateObject();
    for (size_t i = 0; d && i < n; i++) {
        char key[128];
        snprintf(key, sizeof key, PREFIX "%s", e[i].slug);
        char *v = record_format(&e[i].rec);
        if (!v || !cJSON_AddStringToObject(d, key, v)) {
            cJSON_Delete(d);
            d = NULL;
        }
        free(v);
    }
    return d;
}

size_t ledger_key_bytes(const char *slug) { return strlen(PREFIX) + strlen(slug); }

size_t ledger_entry_bytes(const struct ledger_entry *e, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        char *v = record_format(&e[i].rec);
        total += ledger_key_bytes(e[i].slug) + (v ? strlen(v) : 0);
        free(v);
    }
    return total;
}

enum ledger_rc ledger_create(struct ledger_loc *at, const struct ledger_entry *e,
                             size_t n, char *err, size_t errlen)
{
    cJSON *cm = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(cm, "metadata");
    cJSON *labels = cJSON_AddObjectToObject(meta, "labels");
    cJSON *ann = cJSON_AddObjectToObject(meta, "annotations");
    cJSON *d = records_data(e, n);
    if (!cm || !meta || !labels || !ann || !d ||
        !cJSON_AddStringToObject(cm, "apiVersion", "v1") ||
        !cJSON_AddStringToObject(cm, "kind", "ConfigMap") ||
        !cJSON_AddStringToObject(meta, "name", at->name) ||
        !cJSON_AddStringToObject(meta, "namespace", at->ns) ||
        !cJSON_AddStringToObject(labels, NO_DELETE_LABEL, "true") ||
        !cJSON_AddStringToObject(ann, KEEP_ANNOTATION, "keep") ||
        !cJSON_AddItemToObject(cm, "data", d)) {
        cJSON_Delete(cm);
        snprintf(err, errlen, "out of memory");
        return LEDGER_ERROR;
    }
    char path[512];
    cm_path(path, sizeof path, at, 0);
    long code;
    int too_long;
    int rc = send(at, "POST", path, NULL, "application/json", cm, err, errlen, &code, &too_long);
    cJSON_Delete(cm);
    if (rc != 0)
        return code == 409 ? LEDGER_EXISTS : too_long ? LEDGER_FULL
                                     : refused(at, "create", 0, code, err, errlen);
    return LEDGER_OK;
}

/* One merge patch of the ledger (consumed), conditional on at->rv: the
 * apiserver applies it only to the ledger this runner last saw. */
static enum ledger_rc patch(struct ledger_loc *at, cJSON *p, char *err, size_t errlen)
{
    if (*at->rv) {
        cJSON *meta = cJSON_GetObjectItemCaseSensitive(p, "metadata");
        if (!meta)
            meta = cJSON_AddObjectToObject(p, "metadata");
        if (!meta || !cJSON_AddStringToObject(meta, "resourceVersion", at->rv)) {
            cJSON_Delete(p);
            snprintf(err, errlen, "out of memory");
            return LEDGER_ERROR;
        }
    }
    char path[512];
    cm_path(path, sizeof path, at, 1);
    long code;
    int too_long;
    int rc = send(at, "PATCH", path, METADATA_ONLY, "application/merge-patch+json", p, err, errlen,
                  &code, &too_long);
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
    return refused(at, "patch", 1, code, err, errlen);
}

enum ledger_rc ledger_refresh(struct ledger_loc *at, char *err, size_t errlen)
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
        snprintf(err, errlen, "reading the ledger %s/%s again: %s", at->ns, at->name, m);
        out = r.err.code == 404 ? LEDGER_GONE
              : r.err.code == 0 || r.err.code == 429 || r.err.code >= 500 ? LEDGER_UNAVAILABLE
                                                                           : LEDGER_ERROR;
    }
    rest_result_free(&r);
    return out;
}

enum ledger_rc ledger_write(struct ledger_loc *at, const struct ledger_entry *e, size_t n,
                            char *err, size_t errlen)
{
    cJSON *p = cJSON_CreateObject();
    cJSON *d = records_data(e, n);
    if (!p || !d || !cJSON_AddItemToObject(p, "data", d)) {
        cJSON_Delete(p);
        cJSON_Delete(d);
        snprintf(err, errlen, "out of memory");
        return LEDGER_ERROR;
    }
    return patch(at, p, err, errlen);
}

enum ledger_rc ledger_protect(struct ledger_loc *at, char *err, size_t errlen)
{
    cJSON *p = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(p, "metadata");
    cJSON *labels = cJSON_AddObjectToObject(meta, "labels");
    cJSON *ann = cJSON_AddObjectToObject(meta, "annotations");
    if (!labels || !ann || !cJSON_AddStringToObject(labels, NO_DELETE_LABEL, "true") ||
        !cJSON_AddStringToObject(ann, KEEP_ANNOTATION, "keep")) {
        cJSON_Delete(p);
        snprintf(err, errlen, "out of memory");
        return LEDGER_ERROR;
    }
    return patch(at, p, err, errlen);
}

void ledger_event(const struct ledger_loc *at, const char *uid, const char *type,
                  const char *reason, const char *message)
{
    struct event_about about = {"v1", "ConfigMap", at->ns, at->name, uid};
    event_post(at->rest, &about, NULL, type, reason, message);
}

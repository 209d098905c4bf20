/* guard.c: the ledger guard (see guard.h).
 *
 * Owns the decision on one request as it goes on the wire. It judges the
 * path libcurl will send, not a text a check happened to look at: anything
 * libcurl or the apiserver would rewrite (a fragment, dot segments, empty
 * segments, escapes of '/') or that could carry a second request line
 * (control characters) is refused before any decision, and names compare
 * without regard to case, so the guard never judges a different object
 * than the server acts on. A path is then read as the apiserver's
 * RequestInfo reads it (namespace, resource, object, subresource), so a
 * Namespace's own subresources (status, finalize) are never taken for a
 * collection in it. Must never allow a mutating request it cannot parse
 * where it protects something, and never read a process global: the
 * protected names are given. */
#include "door/guard.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/defaults.h"
#include "formats/indexdoc.h"
#include "formats/yaml11.h"
#include "formats/yamldoc.h"
#include "door/k8sproto.h"

#define MAX_SEGS 16
#define SEG_MAX 256

struct segs {
    char s[MAX_SEGS][SEG_MAX];  /* percent-decoded, lower-cased */
    int n;
};

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

static int lower(int ch) { return ch >= 'A' && ch <= 'Z' ? ch + 32 : ch; }

/* Splits and decodes path. 0, or -1 with why. */
static int parse_path(const char *path, struct segs *out, const char **why)
{
    out->n = 0;
    if (!path || path[0] != '/') {
        *why = "it is not an absolute path";
        return -1;
    }
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if (*p <= ' ' || *p >= 0x7f) {
            *why = "it holds a control, space or non-ASCII character";
            return -1;
        }
        if (*p == '#' || *p == '?' || *p == '\\') {
            *why = *p == '#'   ? "it holds a fragment ('#')"
                   : *p == '?' ? "it holds a query (queries are passed as a table)"
                               : "it holds a backslash";
            return -1;
        }
    }
    const char *p = path + 1;
    for (;;) {
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 0) {
            *why = "it has an empty segment ('//' or a trailing '/')";
            return -1;
        }
        if (out->n == MAX_SEGS || len >= SEG_MAX) {
            *why = "it is longer than any API path";
            return -1;
        }
        char *seg = out->s[out->n];
        size_t o = 0;
        for (size_t i = 0; i < len; i++) {
            int ch = (unsigned char)p[i];
            if (ch == '%') {
                int hi = i + 2 < len ? hexval((unsigned char)p[i + 1]) : -1;
                int lo = i + 2 < len ? hexval((unsigned char)p[i + 2]) : -1;
                if (hi < 0 || lo < 0) {
                    *why = "it has a malformed percent-escape";
                    return -1;
                }
                ch = hi * 16 + lo;
                if (ch == '/' || ch < ' ' || ch >= 0x7f) {
                    *why = "it has an escaped '/', control or non-ASCII character";
                    return -1;
                }
                i += 2;
            }
            seg[o++] = (char)lower(ch);
        }
        seg[o] = '\0';
        if (strcmp(seg, ".") == 0 || strcmp(seg, "..") == 0) {
            *why = "it has a '.' or '..' segment";
            return -1;
        }
        out->n++;
        if (!end)
            break;
        p = end + 1;
    }
    if (strcmp(out->s[0], "api") != 0 && strcmp(out->s[0], "apis") != 0) {
        *why = "it is not under /api or /apis";
        return -1;
    }
    return 0;
}

/* The path for a message: what cannot be printed as \xNN, so the message
 * stays one line whatever the script sent. */
static void printable(const char *s, char *out, size_t cap)
{
    size_t o = 0;
    for (; *s && o + 5 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch < ' ' || ch >= 0x7f)
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
        else
            out[o++] = (char)ch;
    }
    out[o] = '\0';
}

static int eq(const char *seg, const char *name) { return name && strcasecmp(seg, name) == 0; }

/* The one item of o whose key is k (ignoring case: a decoder that matches
 * keys loosely must not see a second one the guard did not). *count gets how
 * many there are. */
static const cJSON *only_item(const cJSON *o, const char *k, int *count)
{
    const cJSON *found = NULL, *it;
    *count = 0;
    cJSON_ArrayForEach(it, o) {
        if (it->string && strcasecmp(it->string, k) == 0) {
            found = it;
            (*count)++;
        }
    }
    return found;
}

static int is_yaml(const char *ct)
{
    return ct && strcasestr(ct, "yaml") != NULL;
}

static int is_json(const char *ct)
{
    return !ct || strcmp(ct, "application/json") == 0 || strstr(ct, "+json") != NULL;
}

/* A YAML body as the apiserver reads it: one document, every node read
 * the same under YAML 1.1 (yaml11.h). NULL with why otherwise. */
static cJSON *yaml_body(const char *body, size_t len, char *why, size_t whylen)
{
    struct yaml_doc doc;
    struct buf err = BUF_INIT;
    if (yaml11_check(body, len, &err) != 0 ||
        yaml_load_single("body", body, len, &doc, &err) != 0) {
        snprintf(why, whylen, "the YAML body is not one the guard reads as the apiserver does "
                 "(%s)", buf_str(&err));
        buf_release(&err);
        return NULL;
    }
    buf_release(&err);
    cJSON *obj = doc.root;
    doc.root = NULL;
    yaml_doc_free(&doc);
    return obj;
}

int guard_yaml_type(const char *content_type) { return is_yaml(content_type); }

char *guard_yaml_json(const char *body, size_t len, char *why, size_t whylen)
{
    cJSON *obj = yaml_body(body, len, why, whylen);
    if (!obj)
        return NULL;
    /* A body that is JSON already (what kubectl and the kube module send
     * as an apply) goes as written: read the same by both, and its
     * numbers keep every digit a double would lose. */
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    while (j && end && end < body + len && *end && strchr(" \t\r\n", *end))
        end++;
    char *text;
    if (j && end == body + len) {
        if ((text = cJSON_malloc(len + 1)) != NULL) {
            memcpy(text, body, len);
            text[len] = '\0';
        }
    } else {
        text = cJSON_PrintUnformatted(obj);
    }
    if (!text)
        snprintf(why, whylen, "out of memory");
    cJSON_Delete(j);
    cJSON_Delete(obj);
    return text;
}

/* The body as the server's decoder would read it: one JSON value (nothing
 * after it) or one YAML document, by content type. NULL with why when it is
 * not one of those. */
static cJSON *parse_body(const char *body, size_t len, const char *ct, char *why, size_t whylen)
{
    cJSON *obj = NULL;
    if (!body) {
        snprintf(why, whylen, "the request needs a body the guard can read");
        return NULL;
    }
    if (is_yaml(ct)) {
        return yaml_body(body, len, why, whylen);
    } else if (is_json(ct)) {
        const char *end = NULL;
        obj = cJSON_ParseWithLengthOpts(body, len, &end, 0);
        /* Trailing text after the object is something a decoder might read. */
        while (obj && end && end < body + len && (*end == ' ' || *end == '\n' || *end == '\r' ||
                                                  *end == '\t'))
            end++;
        if (obj && end != body + len) {
            cJSON_Delete(obj);
            obj = NULL;
        }
    } else {
        snprintf(why, whylen, "content type %s is not one the guard reads", ct);
        return NULL;
    }
    if (!obj)
        snprintf(why, whylen, "the body does not parse as %s", is_yaml(ct) ? "YAML" : "JSON");
    return obj;
}

/* A create in a guarded collection: decided by the name in its body. */
static enum guard_verdict check_create(const char *want, const char *body, size_t len,
                                       const char *ct, char *why, size_t whylen)
{
    if (!body) {
        snprintf(why, whylen, "a create in a guarded collection needs a body the guard can read");
        return GUARD_BAD_BODY;
    }
    if (ct && strcmp(ct, K8SPROTO_CONTENT_TYPE) == 0) {
        /* kubectl's typed clients send protobuf (`kubectl create configmap`) */
        char name[SEG_MAX];
        int r = k8sproto_name(body, len, name, sizeof name);
        if (r < 0) {
            snprintf(why, whylen, "the protobuf body of a create in a guarded collection does not "
                     "read as one object");
            return GUARD_BAD_BODY;
        }
        if (r == 1 && strcasecmp(name, want) == 0) {
            snprintf(why, whylen, "it would create %s", want);
            return GUARD_PROTECTED;
        }
        return GUARD_ALLOW;
    }
    if (!is_yaml(ct) && !is_json(ct)) {
        snprintf(why, whylen, "content type %s is not one the guard reads", ct);
        return GUARD_BAD_BODY;
    }
    cJSON *obj = parse_body(body, len, ct, why, whylen);
    enum guard_verdict v = GUARD_ALLOW;
    int n = 0;
    const cJSON *meta = cJSON_IsObject(obj) ? only_item(obj, "metadata", &n) : NULL;
    if (!cJSON_IsObject(obj)) {
        snprintf(why, whylen, "the body of a create in a guarded collection is not one object");
        v = GUARD_BAD_BODY;
    } else if (n > 1) {
        snprintf(why, whylen, "the body has %d 'metadata' keys", n);
        v = GUARD_BAD_BODY;
    } else if (meta) {
        const cJSON *name = only_item(meta, "name", &n);
        if (n > 1) {
            snprintf(why, whylen, "the body has %d 'metadata.name' keys", n);
            v = GUARD_BAD_BODY;
        } else if (name && !cJSON_IsString(name)) {
            snprintf(why, whylen, "the body's metadata.name is not a string");
            v = GUARD_BAD_BODY;
        } else if (name && strcasecmp(name->valuestring, want) == 0) {
            snprintf(why, whylen, "it would create %s", want);
            v = GUARD_PROTECTED;
        }
    }
    cJSON_Delete(obj);
    return v;
}

/* ---- what a path names ------------------------------------------------- */

/* A path read the way the apiserver's RequestInfo reads it. Pointers into
 * the segments; NULL where the path has no such part. */
struct target {
    int core;               /* /api (the core group) rather than /apis/GROUP */
    const char *group;      /* "" for the core group */
    const char *ns;         /* the namespace of a namespaced path */
    const char *resource;   /* NULL: a discovery path (/api/v1, /apis/g/v) */
    const char *name;       /* NULL: the collection */
    const char *sub;        /* the subresource */
};

static void read_target(const struct segs *sg, struct target *t)
{
    memset(t, 0, sizeof *t);
    int p;
    if (eq(sg->s[0], "api")) {
        t->core = 1;
        t->group = "";
        p = 2;
    } else {
        t->group = sg->n >= 2 ? sg->s[1] : "";
        p = 3;
    }
    if (p < sg->n && eq(sg->s[p], "watch"))
        p++;
    int r = sg->n - p;
    const char(*rest)[SEG_MAX] = sg->s + p;
    if (r <= 0)
        return;
    if (eq(rest[0], "namespaces") && r >= 2) {
        /* status and finalize are the Namespace's own subresources; anything
         * else after a namespace is a resource in it */
        if (r == 2 || eq(rest[2], "status") || eq(rest[2], "finalize")) {
            t->resource = rest[0];
            t->name = rest[1];
            t->sub = r >= 3 ? rest[2] : NULL;
            return;
        }
        t->ns = rest[1];
        rest += 2;
        r -= 2;
    }
    t->resource = rest[0];
    t->name = r >= 2 ? rest[1] : NULL;
    t->sub = r >= 3 ? rest[2] : NULL;
}

/* ---- Events ------------------------------------------------------------ */

/* Whether an Event object (or a patch shaped like one) claims to come from
 * the runner or to be about the ledger or its Lease. Every spelling of a key
 * counts (a decoder that matches loosely must not see one the guard did
 * not). */
static int event_claims(const struct guard_target *t, const cJSON *ev, const char *path_ns,
                        char *why, size_t whylen)
{
    static const char *const comps[][2] = {
        {"source", "component"}, {"reportingComponent", NULL}, {"reportingController", NULL},
        {"deprecatedSource", "component"}};
    static const char *const subjects[] = {"involvedObject", "regarding", "related"};
    const char *component = t->component ? t->component : EVENT_COMPONENT;
    const cJSON *a, *b;
    cJSON_ArrayForEach(a, ev) {
        if (!a->string)
            continue;
        for (size_t i = 0; i < sizeof comps / sizeof *comps; i++) {
            if (strcasecmp(a->string, comps[i][0]) != 0)
                continue;
            if (!comps[i][1]) {
                if (cJSON_IsString(a) && strcasecmp(a->valuestring, component) == 0)
                    goto claims_runner;
                continue;
            }
            cJSON_ArrayForEach(b, a)
                if (b->string && strcasecmp(b->string, comps[i][1]) == 0 && cJSON_IsString(b) &&
                    strcasecmp(b->valuestring, component) == 0)
                    goto claims_runner;
        }
        for (size_t i = 0; i < sizeof subjects / sizeof *subjects; i++) {
            if (strcasecmp(a->string, subjects[i]) != 0 || !cJSON_IsObject(a))
                continue;
            const char *kind = NULL, *name = NULL, *ns = NULL;
            cJSON_ArrayForEach(b, a) {
                if (!b->string || !cJSON_IsString(b))
                    continue;
                if (strcasecmp(b->string, "kind") == 0)
                    kind = b->valuestring;
                else if (strcasecmp(b->string, "name") == 0)
                    name = b->valuestring;
                else if (strcasecmp(b->string, "namespace") == 0)
                    ns = b->valuestring;
            }
            if (!ns)
                ns = path_ns;
            if (!name || !ns || strcasecmp(ns, t->ns) != 0)
                continue;
            if ((!kind || strcasecmp(kind, "ConfigMap") == 0) && strcasecmp(name, t->ledger) == 0) {
                snprintf(why, whylen, "an Event about the ledger %s/%s is the runner's to write",
                         t->ns, t->ledger);
                return 1;
            }
            if ((!kind || strcasecmp(kind, "Lease") == 0) && strcasecmp(name, t->lease) == 0) {
                snprintf(why, whylen, "an Event about the runner's Lease %s/%s is the runner's "
                         "to write", t->ns, t->lease);
                return 1;
            }
        }
    }
    return 0;
claims_runner:
    snprintf(why, whylen, "an Event claiming the runner's component %s is the runner's to write",
             component);
    return 1;
}

/* A name in the shape of the engine's Events: the runner's and the
 * dispatcher's on the ledger, the dispatcher's on the index (fixed names,
 * an Event said once: one a script made first would silence it). */
static int has_runner_prefix(const struct guard_target *t, const char *name)
{
    const char *prefixes[] = {t->ledger, INDEX_NAME};
    for (size_t i = 0; name && i < sizeof prefixes / sizeof *prefixes; i++) {
        size_t l = strlen(prefixes[i]);
        if (strncasecmp(name, prefixes[i], l) == 0 && name[l] == '.')
            return 1;
    }
    return 0;
}

/* A JSON patch op on a field that names an Event's source or subject: the
 * guard cannot see the object it would produce, so only remove and test
 * pass. */
static int event_patch_claims(const cJSON *ops, char *why, size_t whylen)
{
    static const char *const fields[] = {"source", "reportingComponent", "reportingController",
                                         "deprecatedSource", "involvedObject", "regarding",
                                         "related"};
    const cJSON *op;
    cJSON_ArrayForEach(op, ops) {
        int n;
        const cJSON *kind = cJSON_IsObject(op) ? only_item(op, "op", &n) : NULL;
        const char *k = cJSON_GetStringValue(kind);
        if (k && (strcasecmp(k, "remove") == 0 || strcasecmp(k, "test") == 0))
            continue;
        const cJSON *paths[2] = {cJSON_IsObject(op) ? only_item(op, "path", &n) : NULL,
                                 cJSON_IsObject(op) ? only_item(op, "from", &n) : NULL};
        for (int i = 0; i < 2; i++) {
            const char *p = cJSON_GetStringValue(paths[i]);
            if (!p)
                continue;
            if (strcmp(p, "") == 0 || strcmp(p, "/") == 0)
                goto refuse;
            for (size_t f = 0; f < sizeof fields / sizeof *fields; f++) {
                size_t l = strlen(fields[f]);
                if (p[0] == '/' && strncasecmp(p + 1, fields[f], l) == 0 &&
                    (p[1 + l] == '\0' || p[1 + l] == '/'))
                    goto refuse;
            }
        }
    }
    return 0;
refuse:
    snprintf(why, whylen, "a JSON patch may not set an Event's source or subject (the guard "
             "cannot see what it would claim)");
    return 1;
}

/* Events: the runner's own (named "<ledger>.<suffix>" in the ledger's
 * namespace) are read-only, and no write may make an Event claim the
 * runner's component or the ledger as its subject, in any namespace. */
static enum guard_verdict check_event(const struct guard_target *t, const struct target *x,
                                      const char *method, const char *body, size_t len,
                                      const char *ct, char *why, size_t whylen)
{
    int in_ns = x->ns && eq(x->ns, t->ns);
    if (!x->ns && !x->name) {
        snprintf(why, whylen, "it would write Events in every namespace");
        return GUARD_PROTECTED;
    }
    if (in_ns && x->name && has_runner_prefix(t, x->name)) {
        snprintf(why, whylen, "the Event %s/%s is the runner's", t->ns, x->name);
        return GUARD_PROTECTED;
    }
    if (strcmp(method, "DELETE") == 0) {
        if (in_ns && !x->name) {
            snprintf(why, whylen, "it would delete the runner's Events in %s", t->ns);
            return GUARD_PROTECTED;
        }
        return GUARD_ALLOW;
    }
    cJSON *obj = parse_body(body, len, ct, why, whylen);
    if (!obj)
        return GUARD_BAD_BODY;
    enum guard_verdict v = GUARD_ALLOW;
    if (cJSON_IsArray(obj)) {
        if (!(ct && strstr(ct, "json-patch")) || event_patch_claims(obj, why, whylen))
            v = ct && strstr(ct, "json-patch") ? GUARD_PROTECTED : GUARD_BAD_BODY;
        if (v == GUARD_BAD_BODY)
            snprintf(why, whylen, "the body of an Event write is not one object");
    } else if (!cJSON_IsObject(obj)) {
        snprintf(why, whylen, "the body of an Event write is not one object");
        v = GUARD_BAD_BODY;
    } else if (event_claims(t, obj, x->ns, why, whylen)) {
        v = GUARD_PROTECTED;
    } else if (in_ns && strcmp(method, "POST") == 0) {
        /* a name, or a generated one, in the runner's own shape */
        const cJSON *m, *k;
        cJSON_ArrayForEach(m, obj) {
            if (!m->string || strcasecmp(m->string, "metadata") != 0)
                continue;
            cJSON_ArrayForEach(k, m)
                if (k->string && cJSON_IsString(k) &&
                    (strcasecmp(k->string, "name") == 0 || strcasecmp(k->string, "generateName") == 0) &&
                    has_runner_prefix(t, k->valuestring)) {
                    snprintf(why, whylen, "an Event named %s.* or %s.* in %s is the engine's",
                             t->ledger, INDEX_NAME, t->ns);
                    v = GUARD_PROTECTED;
                }
        }
    }
    cJSON_Delete(obj);
    return v;
}

/* ---- the decision -------------------------------------------------------- */

/* A ConfigMap or Lease the guard protects, in the ledger's namespace. */
static enum guard_verdict check_guarded(const struct guard_target *t, const struct target *x,
                                        const char *coll, const char *want, const char *method,
                                        const char *body, size_t len, const char *ct, char *why,
                                        size_t whylen)
{
    int del = strcmp(method, "DELETE") == 0;
    if (!x->ns && !x->name) {
        snprintf(why, whylen, "it would write %s in every namespace", coll);
        return GUARD_PROTECTED;
    }
    if (!x->ns || !eq(x->ns, t->ns))
        return GUARD_ALLOW;
    if (!x->name) {
        if (strcmp(method, "POST") == 0)
            return check_create(want, body, len, ct, why, whylen);
        snprintf(why, whylen, "it would %s the %s in %s", del ? "delete every one of" : "write",
                 coll, t->ns);
        return GUARD_PROTECTED;
    }
    if (eq(x->name, want)) {
        snprintf(why, whylen, "it would write %s/%s", t->ns, want);
        return GUARD_PROTECTED;
    }
    return GUARD_ALLOW;
}

enum guard_verdict guard_check(const struct guard_target *t, const char *method,
                               const char *path, const char *body, size_t body_len,
                               const char *content_type, char *why, size_t whylen)
{
    struct segs sg;
    const char *bad = NULL;
    *why = '\0';
    if (!method) {
        snprintf(why, whylen, "no method");
        return GUARD_BAD_PATH;
    }
    if (parse_path(path, &sg, &bad) != 0) {
        char shown[256];
        printable(path ? path : "(none)", shown, sizeof shown);
        snprintf(why, whylen, "refusing path %s: %s", shown, bad);
        return GUARD_BAD_PATH;
    }
    struct target x;
    read_target(&sg, &x);
    /* A YAML body goes out as the JSON the guard read (door.c): one it
     * cannot read as the apiserver would is sent nowhere. */
    if (strcmp(method, "GET") != 0 && body && is_yaml(content_type)) {
        cJSON *y = yaml_body(body, body_len, why, whylen);
        if (!y)
            return GUARD_UNREADABLE;
        cJSON_Delete(y);
    }
    /* Connecting subresources act for real whatever dryRun says. */
    if (t->dry_run && x.resource && x.name && x.sub &&
        (eq(x.sub, "exec") || eq(x.sub, "attach") || eq(x.sub, "portforward"))) {
        snprintf(why, whylen, "a dry run cannot %s: the apiserver has no dry run for it", x.sub);
        return GUARD_DRY_RUN;
    }
    if (strcmp(method, "GET") == 0)
        return GUARD_ALLOW;
    /* A proxy subresource forwards a request the guard cannot see. */
    for (int i = 1; i < sg.n; i++)
        if (eq(sg.s[i], "proxy")) {
            snprintf(why, whylen, "a write through a proxy could reach the ledger");
            return GUARD_PROTECTED;
        }
    if (t->dry_run && x.resource && x.name && x.sub && eq(x.sub, "token")) {
        snprintf(why, whylen, "a dry run may not request a token: the apiserver's answer to a "
                 "dry-run TokenRequest is a live credential");
        return GUARD_DRY_RUN;
    }
    if (!x.resource)
        return GUARD_ALLOW;
    if (x.core && eq(x.resource, "namespaces") && !x.ns) {
        if (!x.name) {
            if (strcmp(method, "POST") == 0)
                return check_create(t->ns, body, body_len, content_type, why, whylen);
            snprintf(why, whylen, "it would %s every namespace",
                     strcmp(method, "DELETE") == 0 ? "delete" : "write");
            return GUARD_PROTECTED;
        }
        if (eq(x.name, t->ns)) {
            snprintf(why, whylen, "the namespace %s holding the ledger is read-only to "
                     "migrations (%s%s%s)", t->ns, method, x.sub ? " " : "", x.sub ? x.sub : "");
            return GUARD_PROTECTED;
        }
        return GUARD_ALLOW;
    }
    if (x.core && eq(x.resource, "configmaps"))
        return check_guarded(t, &x, "configmaps", t->ledger, method, body, body_len, content_type,
                             why, whylen);
    if (eq(x.group, "coordination.k8s.io") && eq(x.resource, "leases"))
        return check_guarded(t, &x, "leases", t->lease, method, body, body_len, content_type, why,
                             whylen);
    if ((x.core || eq(x.group, "events.k8s.io")) && eq(x.resource, "events"))
        return check_event(t, &x, method, body, body_len, content_type, why, whylen);
    return GUARD_ALLOW;
}

/* A path that reads; NULL when the guard would refuse it anyway. */
static int path_target(const char *path, struct segs *sg, struct target *x)
{
    const char *bad;
    if (parse_path(path, sg, &bad) != 0)
        return -1;
    read_target(sg, x);
    return 0;
}

int guard_needs_object(const char *method, const char *path)
{
    struct segs sg;
    struct target x;
    if (!method || strcmp(method, "GET") == 0 || strcmp(method, "POST") == 0 ||
        path_target(path, &sg, &x) != 0)
        return 0;
    return x.resource && x.name && (x.core || eq(x.group, "events.k8s.io")) &&
           eq(x.resource, "events");
}

enum guard_verdict guard_check_object(const struct guard_target *t, const char *path,
                                      const cJSON *current, char *why, size_t whylen)
{
    struct segs sg;
    struct target x;
    char claim[300];
    *why = '\0';
    if (path_target(path, &sg, &x) != 0 || !current)
        return GUARD_ALLOW;
    if (!cJSON_IsObject(current)) {
        snprintf(why, whylen, "the Event it acts on does not read as one object");
        return GUARD_BAD_BODY;
    }
    if (event_claims(t, current, x.ns, claim, sizeof claim)) {
        snprintf(why, whylen, "the Event %s/%s it acts on is the runner's: %s", x.ns ? x.ns : "",
                 x.name, claim);
        return GUARD_PROTECTED;
    }
    return GUARD_ALLOW;
}

const char *guard_verdict_name(enum guard_verdict v)
{
    switch (v) {
    case GUARD_ALLOW: return "allow";
    case GUARD_PROTECTED: return "LedgerProtected";
    case GUARD_BAD_PATH: return "BadPath";
    case GUARD_BAD_BODY: return "BadBody";
    case GUARD_DRY_RUN: return "DryRunRefused";
    case GUARD_UNREADABLE: return "BadRequest";
    }
    return "unknown";
}

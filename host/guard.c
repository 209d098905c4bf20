/* guard.c: the ledger guard (see guard.h).
 *
 * Owns the decision on one request as it goes on the wire. It judges the
 * path libcurl will send, not a text a check happened to look at: anything
 * libcurl or the apiserver would rewrite (a fragment, dot segments, empty
 * segments, escapes of '/') or that could carry a second request line
 * (control characters) is refused before any decision, and names compare
 * without regard to case, so the guard never judges a different object
 * than the server acts on. Must never allow a mutating request it cannot
 * parse, and never read a process global: the protected names are given. */
#include "guard.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "yaml.h"

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
    return ct && (strstr(ct, "yaml") != NULL);
}

static int is_json(const char *ct)
{
    return !ct || strcmp(ct, "application/json") == 0 || strstr(ct, "+json") != NULL;
}

/* A create in a guarded collection: decided by the name in its body. */
static enum guard_verdict check_create(const char *want, const char *body, size_t len,
                                       const char *ct, char *why, size_t whylen)
{
    cJSON *obj = NULL;
    if (!body) {
        snprintf(why, whylen, "a create in a guarded collection needs a body the guard can read");
        return GUARD_BAD_BODY;
    }
    if (is_yaml(ct)) {
        struct yaml_doc doc;
        char err[256];
        if (yaml_load("body", body, len, &doc, err, sizeof err) == 0) {
            obj = doc.root;
            doc.root = NULL;
            yaml_doc_free(&doc);
        }
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
        return GUARD_BAD_BODY;
    }
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
    if (strcmp(method, "GET") == 0)
        return GUARD_ALLOW;
    int del = strcmp(method, "DELETE") == 0, create = strcmp(method, "POST") == 0;
    const char(*s)[SEG_MAX] = sg.s;
    int n = sg.n;
    /* Where the namespaced part starts, and what it protects there. */
    int at;
    const char *coll, *want;
    if (eq(s[0], "api") && n >= 2) {
        at = 2;
        coll = "configmaps";
        want = t->ledger;
        if (n == 3 && eq(s[2], "namespaces") && del) {
            snprintf(why, whylen, "it would delete every namespace");
            return GUARD_PROTECTED;
        }
        if (n == 4 && eq(s[2], "namespaces") && eq(s[3], t->ns) && del) {
            snprintf(why, whylen, "it would delete the namespace %s holding the ledger", t->ns);
            return GUARD_PROTECTED;
        }
    } else if (eq(s[0], "apis") && n >= 3 && eq(s[1], "coordination.k8s.io")) {
        at = 3;
        coll = "leases";
        want = t->lease;
    } else {
        at = -1;
        coll = want = NULL;
    }
    /* A proxy subresource forwards a request the guard cannot see. */
    for (int i = 1; i < n; i++)
        if (eq(s[i], "proxy")) {
            snprintf(why, whylen, "a write through a proxy could reach the ledger");
            return GUARD_PROTECTED;
        }
    if (at < 0)
        return GUARD_ALLOW;
    /* The collection across all namespaces. */
    if (n == at + 1 && eq(s[at], coll)) {
        snprintf(why, whylen, "it would write %s in every namespace", coll);
        return GUARD_PROTECTED;
    }
    if (n < at + 3 || !eq(s[at], "namespaces") || !eq(s[at + 1], t->ns) || !eq(s[at + 2], coll))
        return GUARD_ALLOW;
    if (n == at + 3) {
        if (create)
            return check_create(want, body, body_len, content_type, why, whylen);
        snprintf(why, whylen, "it would %s the %s in %s", del ? "delete every one of" : "write",
                 coll, t->ns);
        return GUARD_PROTECTED;
    }
    if (eq(s[at + 3], want)) {
        snprintf(why, whylen, "it would write %s/%s", t->ns, want);
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
    }
    return "unknown";
}

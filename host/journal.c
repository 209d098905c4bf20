/* journal.c: the write journal (see journal.h).
 *
 * Owns how a request path names an object (API prefix, namespace,
 * resource, name), the bounded cache of resourceVersions seen, and deciding
 * whether a write changed its object: a create or delete that succeeded
 * did; a patch or replace did when the resourceVersion moved (the
 * apiserver leaves it alone for a no-op). Must never make a request or
 * guess: an outcome it cannot know is recorded as unknown. */
#include "journal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_CAP 4096
#define BUCKETS 8192            /* a power of two */

/* An object's place, from a request path. */
struct objref {
    char prefix[600];       /* /api/v1 or /apis/<group>/<version> */
    char group[256];
    char ns[256];
    char resource[256];
    char name[256];
};

static int hexv(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                        : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Splits path into decoded segments (at most max). */
static int segments(const char *path, char seg[][256], int max)
{
    int n = 0;
    const char *p = path;
    while (*p == '/')
        p++;
    while (*p && *p != '?' && n < max) {
        size_t o = 0;
        while (*p && *p != '/' && *p != '?') {
            int c = (unsigned char)*p;
            if (c == '%' && hexv(p[1]) >= 0 && hexv(p[2]) >= 0) {
                c = hexv(p[1]) * 16 + hexv(p[2]);
                p += 2;
            }
            if (o + 1 < 256)
                seg[n][o++] = (char)c;
            p++;
        }
        seg[n][o] = '\0';
        n++;
        while (*p == '/')
            p++;
    }
    return n;
}

/* 0 when path names a resource (with or without an object name). */
static int parse_ref(const char *path, struct objref *r)
{
    char s[12][256];
    int n = segments(path, s, 12), i;
    memset(r, 0, sizeof *r);
    if (n >= 2 && strcmp(s[0], "api") == 0) {
        snprintf(r->prefix, sizeof r->prefix, "/api/%s", s[1]);
        i = 2;
    } else if (n >= 3 && strcmp(s[0], "apis") == 0) {
        snprintf(r->prefix, sizeof r->prefix, "/apis/%s/%s", s[1], s[2]);
        snprintf(r->group, sizeof r->group, "%s", s[1]);
        i = 3;
    } else {
        return -1;
    }
    if (n - i >= 3 && strcmp(s[i], "namespaces") == 0) {
        snprintf(r->ns, sizeof r->ns, "%s", s[i + 1]);
        i += 2;
    }
    if (i >= n)
        return -1;
    snprintf(r->resource, sizeof r->resource, "%s", s[i]);
    if (i + 1 < n)
        snprintf(r->name, sizeof r->name, "%s", s[i + 1]);
    return 0;
}

static void key_of(const struct objref *r, const char *ns, const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s|%s|%s|%s", r->prefix, ns ? ns : "", r->resource, name ? name : "");
}

int journal_init(struct journal *j)
{
    memset(j, 0, sizeof *j);
    j->cache = calloc(CACHE_CAP, sizeof *j->cache);
    j->buckets = malloc(BUCKETS * sizeof *j->buckets);
    if (!j->cache || !j->buckets) {
        journal_free(j);
        return -1;
    }
    for (size_t i = 0; i < BUCKETS; i++)
        j->buckets[i] = -1;
    j->cache_cap = CACHE_CAP;
    return 0;
}

void journal_free(struct journal *j)
{
    for (size_t i = 0; j->cache && i < j->cache_cap; i++)
        free(j->cache[i].key);
    free(j->cache);
    free(j->buckets);
    memset(j, 0, sizeof *j);
}

static unsigned hash(const char *s)
{
    unsigned h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static struct rv_slot *find(const struct journal *j, const char *key)
{
    if (!j->buckets)
        return NULL;
    unsigned h = hash(key);
    for (int i = j->buckets[h & (BUCKETS - 1)]; i >= 0; i = j->cache[i].next)
        if (j->cache[i].hash == h && strcmp(j->cache[i].key, key) == 0)
            return &j->cache[i];
    return NULL;
}

static void unlink_slot(struct journal *j, int idx)
{
    int *at = &j->buckets[j->cache[idx].hash & (BUCKETS - 1)];
    while (*at >= 0 && *at != idx)
        at = &j->cache[*at].next;
    if (*at == idx)
        *at = j->cache[idx].next;
}

static void remember(struct journal *j, const char *key, const char *rv)
{
    if (!j->cache || !rv || !*rv)
        return;
    struct rv_slot *s = find(j, key);
    if (!s) {
        int idx = (int)j->cache_next;
        j->cache_next = (j->cache_next + 1) % j->cache_cap;
        s = &j->cache[idx];
        if (s->key) {
            unlink_slot(j, idx);
            free(s->key);
        }
        if (!(s->key = strdup(key)))
            return;
        s->hash = hash(key);
        s->next = j->buckets[s->hash & (BUCKETS - 1)];
        j->buckets[s->hash & (BUCKETS - 1)] = idx;
    }
    snprintf(s->rv, sizeof s->rv, "%s", rv);
}

static const char *meta_str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "metadata"), k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

void journal_seen(struct journal *j, const char *path, const cJSON *body)
{
    struct objref r;
    if (!j || !body || parse_ref(path, &r) != 0)
        return;
    char key[1400];
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(body, "items");
    if (!*r.name && cJSON_IsArray(items)) {
        const cJSON *it;
        cJSON_ArrayForEach(it, items) {
            const char *ns = meta_str(it, "namespace");
            key_of(&r, ns ? ns : r.ns, meta_str(it, "name"), key, sizeof key);
            remember(j, key, meta_str(it, "resourceVersion"));
        }
        return;
    }
    if (*r.name) {
        key_of(&r, r.ns, r.name, key, sizeof key);
        remember(j, key, meta_str(body, "resourceVersion"));
    }
}

const char *journal_rv(const struct journal *j, const char *path)
{
    struct objref r;
    if (!j || !j->cache || parse_ref(path, &r) != 0 || !*r.name)
        return NULL;
    char key[1400];
    key_of(&r, r.ns, r.name, key, sizeof key);
    const struct rv_slot *s = find(j, key);
    return s ? s->rv : NULL;
}

void journal_add(struct journal *j, const char *method, const char *verb, const char *path,
                 long status, const cJSON *answer, const char *rv_before, int changed_hint,
                 int dry_run)
{
    if (!j)
        return;
    struct objref r;
    if (parse_ref(path, &r) != 0)
        memset(&r, 0, sizeof r);
    const char *name = *r.name ? r.name : meta_str(answer, "name");
    const char *after = meta_str(answer, "resourceVersion");
    int ok = status >= 200 && status < 300;
    int changed;
    if (changed_hint >= 0)
        changed = changed_hint;
    else if (!ok)
        changed = status == 0 ? -1 : 0;
    else if (strcmp(method, "POST") == 0 || strcmp(method, "DELETE") == 0)
        changed = 1;
    else if (!rv_before || !after)
        changed = -1;
    else
        changed = strcmp(rv_before, after) != 0;
    j->writes++;
    if (changed > 0)
        j->changed++;
    if (changed < 0)
        j->unknown++;
    /* A write's answer is the freshest resourceVersion of its object. */
    if (ok && after && name) {
        char key[1400];
        key_of(&r, *r.ns ? r.ns : meta_str(answer, "namespace"), name, key, sizeof key);
        remember(j, key, after);
    }
    if (j->kept == JOURNAL_KEEP)
        return;
    struct journal_entry *e = &j->e[j->kept++];
    memset(e, 0, sizeof *e);
    snprintf(e->verb, sizeof e->verb, "%s", verb ? verb : method);
    if (*r.group)
        snprintf(e->resource, sizeof e->resource, "%.63s.%.63s", r.resource, r.group);
    else
        snprintf(e->resource, sizeof e->resource, "%.127s", r.resource);
    snprintf(e->ns, sizeof e->ns, "%.63s", r.ns);
    snprintf(e->name, sizeof e->name, "%s", name ? name : "");
    e->status = status;
    e->changed = changed;
    e->dry_run = dry_run;
}

cJSON *journal_json(const struct journal *j)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(o, "entries");
    if (!o || !arr || !cJSON_AddNumberToObject(o, "writes", (double)j->writes) ||
        !cJSON_AddNumberToObject(o, "changed", (double)j->changed) ||
        (j->unknown && !cJSON_AddNumberToObject(o, "unknown", (double)j->unknown)) ||
        (j->writes > j->kept && !cJSON_AddNumberToObject(o, "more", (double)(j->writes - j->kept)))) {
        cJSON_Delete(o);
        return NULL;
    }
    for (size_t i = 0; i < j->kept; i++) {
        const struct journal_entry *e = &j->e[i];
        cJSON *x = cJSON_CreateObject();
        if (!x || !cJSON_AddItemToArray(arr, x) || !cJSON_AddStringToObject(x, "verb", e->verb) ||
            !cJSON_AddStringToObject(x, "resource", e->resource) ||
            (*e->ns && !cJSON_AddStringToObject(x, "namespace", e->ns)) ||
            !cJSON_AddStringToObject(x, "name", e->name) ||
            !cJSON_AddNumberToObject(x, "status", (double)e->status) ||
            !(e->changed < 0 ? cJSON_AddNullToObject(x, "changed")
                             : cJSON_AddBoolToObject(x, "changed", e->changed)) ||
            (e->dry_run && !cJSON_AddTrueToObject(x, "dry_run"))) {
            cJSON_Delete(o);
            return NULL;
        }
    }
    return o;
}

void journal_summary(size_t writes, size_t changed, char *buf, size_t len)
{
    snprintf(buf, len, "%zu write%s, %zu changed", writes, writes == 1 ? "" : "s", changed);
}

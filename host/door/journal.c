/* journal.c: the write journal (see journal.h).
 *
 * Owns how a request path names an object (API prefix, namespace,
 * resource, name), the bounded cache of resourceVersions seen, and deciding
 * whether a write changed its object: a create or delete that succeeded
 * did; a patch or replace did when the resourceVersion moved (the
 * apiserver leaves it alone for a no-op). Must never make a request or
 * guess: an outcome it cannot know is recorded as unknown. */
#include "door/journal.h"

#include "client/apipath.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_CAP 4096
#define BUCKETS 8192            /* a power of two */

static void setup(struct journal *j, struct journal_log *log, int reset)
{
    memset(j, 0, sizeof *j);
    j->log = log ? log : &j->own;
    if (reset) {
        memset(j->log, 0, sizeof *j->log);
        j->log->active = 1;
    }
    j->cache = calloc(CACHE_CAP, sizeof *j->cache);
    j->buckets = malloc(BUCKETS * sizeof *j->buckets);
    if (!j->cache || !j->buckets) {
        free(j->cache);
        free(j->buckets);
        j->cache = NULL;
        j->buckets = NULL;
        return;
    }
    for (size_t i = 0; i < BUCKETS; i++)
        j->buckets[i] = -1;
    j->cache_cap = CACHE_CAP;
}

void journal_init(struct journal *j, struct journal_log *log) { setup(j, log, 1); }

void journal_attach(struct journal *j, struct journal_log *log, const char *cluster)
{
    setup(j, log, 0);
    snprintf(j->cluster, sizeof j->cluster, "%s", cluster ? cluster : "");
}

void journal_free(struct journal *j)
{
    for (size_t i = 0; j->cache && i < j->cache_cap; i++)
        free(j->cache[i].key);
    free(j->cache);
    free(j->buckets);
    /* a shared log stays as it is: the parent reads it after the child */
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
    struct apipath r;
    if (!j || !body || apipath_parse(path, &r) != 0)
        return;
    char key[1400];
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(body, "items");
    if (!*r.name && cJSON_IsArray(items)) {
        const cJSON *it;
        cJSON_ArrayForEach(it, items) {
            const char *ns = meta_str(it, "namespace");
            apipath_key(&r, ns ? ns : r.ns, meta_str(it, "name"), key, sizeof key);
            remember(j, key, meta_str(it, "resourceVersion"));
        }
        return;
    }
    if (*r.name) {
        apipath_key(&r, r.ns, r.name, key, sizeof key);
        remember(j, key, meta_str(body, "resourceVersion"));
    }
}

const char *journal_rv(const struct journal *j, const char *path)
{
    struct apipath r;
    if (!j || !j->cache || apipath_parse(path, &r) != 0 || !*r.name)
        return NULL;
    char key[1400];
    apipath_key(&r, r.ns, r.name, key, sizeof key);
    const struct rv_slot *s = find(j, key);
    return s ? s->rv : NULL;
}

void journal_add(struct journal *j, const char *method, const char *verb, const char *path,
                 long status, const cJSON *answer, const char *rv_before, int changed_hint,
                 int dry_run, const char *fields)
{
    if (!j)
        return;
    struct apipath r;
    if (apipath_parse(path, &r) != 0)
        memset(&r, 0, sizeof r);
    const char *name = *r.name ? r.name : meta_str(answer, "name");
    const char *after = meta_str(answer, "resourceVersion");
    int ok = status >= 200 && status < 300;
    int changed;
    if (changed_hint >= 0)
        changed = changed_hint;
    else if (!ok)
        changed = status == 0 ? -1 : 0;
    else if (strcmp(method, "POST") == 0 || strcmp(method, "DELETE") == 0 || status == 201)
        changed = 1; /* 201: a server-side apply that created its object */
    else if (!rv_before || !after)
        changed = -1;
    else
        changed = strcmp(rv_before, after) != 0;
    struct journal_log *lg = j->log;
    /* A write's answer is the freshest resourceVersion of its object. */
    if (ok && after && name) {
        char key[1400];
        apipath_key(&r, *r.ns ? r.ns : meta_str(answer, "namespace"), name, key, sizeof key);
        remember(j, key, after);
    }
    if (lg->kept < JOURNAL_KEEP) {
        struct journal_entry *e = &lg->e[lg->kept];
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
        snprintf(e->fields, sizeof e->fields, "%s", fields ? fields : "");
        snprintf(e->cluster, sizeof e->cluster, "%s", j->cluster);
    }
    /* The entry is whole before the counts publish it (a kill between two
     * stores must leave no half entry counted). */
    atomic_signal_fence(memory_order_seq_cst);
    if (lg->kept < JOURNAL_KEEP)
        lg->kept++;
    if (changed > 0)
        lg->changed++;
    if (changed < 0)
        lg->unknown++;
    lg->writes++;
}

void journal_pending(struct journal *j, int delta)
{
    if (!j)
        return;
    struct journal_log *lg = j->log;
    if (delta > 0)
        lg->pending++;
    else if (lg->pending > 0)
        lg->pending--;
}

cJSON *journal_json(const struct journal *j)
{
    return journal_log_json(j->log);
}

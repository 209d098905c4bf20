/* journal.h: the write journal of one migration: every mutating request it
 * sent (verb, resource, namespace, name, HTTP status) and whether it changed
 * the object, so an operator can tell "touched nothing, safe to retry" from
 * "changed three objects", and a spec can prove a second run changed
 * nothing. Owns the entries (the first JOURNAL_KEEP, and counts of all),
 * the resourceVersions the migration has seen (a bounded cache, so telling
 * a no-op patch from a change costs no request when the object was read
 * first), and the journal's JSON form. Makes no request and knows no Lua.
 *
 * Recipe (kube.c): after every successful read, journal_seen(path, body);
 * before a write, journal_rv(path) for the resourceVersion it had (NULL:
 * read it first if you need to know); after the write, journal_add. */
#ifndef COZY_JOURNAL_H
#define COZY_JOURNAL_H
#include <stddef.h>
#include <cjson/cJSON.h>

#define JOURNAL_KEEP 50          /* entries a record carries; the rest are counted */
#define JOURNAL_FIELDS_MAX 1024  /* dry run: "path: old -> new" lines of one write */

struct journal_entry {
    char verb[16];               /* create, patch, replace, update, delete, apply */
    char resource[128];          /* plural, with its group: deployments.apps */
    char ns[64];
    char name[256];
    long status;                 /* HTTP status; 0 when no answer arrived */
    int changed;                 /* 1, 0, or -1 when it cannot be known */
    int dry_run;
    char fields[JOURNAL_FIELDS_MAX]; /* dry run: what would change, one field a line */
};

struct rv_slot {
    char *key;
    char rv[32];
    unsigned hash;
    int next;                    /* the next slot in its bucket, or -1 */
};

struct journal {
    struct journal_entry e[JOURNAL_KEEP];
    size_t kept;
    size_t writes, changed, unknown;
    struct rv_slot *cache;       /* ring of seen resourceVersions, oldest reused first */
    int *buckets;                /* hash -> first slot, or -1 */
    size_t cache_cap, cache_next;
};

int journal_init(struct journal *j);
void journal_free(struct journal *j);
/* Remembers the resourceVersion of the object (or of every item of the
 * list) a read of path returned. */
void journal_seen(struct journal *j, const char *path, const cJSON *body);
/* The resourceVersion last seen for the object at path, or NULL. */
const char *journal_rv(const struct journal *j, const char *path);
/* One write: method and verb as sent; path of the request (a create's
 * object name comes from its answer); answer is the response body (NULL on
 * failure); rv_before as known before sending (NULL: unknown). changed_hint
 * >= 0 overrides the decision (dry run: whether the report found fields
 * that would change). */
void journal_add(struct journal *j, const char *method, const char *verb, const char *path,
                 long status, const cJSON *answer, const char *rv_before, int changed_hint,
                 int dry_run, const char *fields);
/* {"writes":N,"changed":N,"unknown":N,"entries":[...],"more":N}. NULL on OOM. */
cJSON *journal_json(const struct journal *j);
/* "12 writes, 3 changed" */
void journal_summary(size_t writes, size_t changed, char *buf, size_t len);
#endif

/* journal.h: recording the write journal of one migration: every mutating
 * request it sent (verb, resource, namespace, name, HTTP status) and whether
 * it changed the object, so an operator can tell "touched nothing, safe to
 * retry" from "changed three objects", and a spec can prove a second run
 * changed nothing. Owns turning a request into an entry of the log
 * (formats/journaldoc.h has the log, its JSON form and its cutting) and the
 * resourceVersions the migration has seen (a bounded cache, so telling a
 * no-op patch from a change costs no request when the object was read
 * first). Makes no request and knows no Lua.
 *
 * Recipe (lua/luakube_request.c): after every successful read,
 * journal_seen(path, body); before a write, journal_rv(path) for the
 * resourceVersion it had (NULL: read it first if you need to know); after
 * the write, journal_add (journal_pending brackets the time the write is on
 * the wire). The supervisor (proc/child.c) reads the shared log
 * with journal_log_json. */
#ifndef COZY_JOURNAL_H
#define COZY_JOURNAL_H
#include <cjson/cJSON.h>
#include <stddef.h>

#include "formats/journaldoc.h"

struct rv_slot {
    char *key;
    char rv[32];
    unsigned hash;
    int next;                    /* the next slot in its bucket, or -1 */
};

struct journal {
    struct journal_log *log;     /* &own, or the log given to journal_init */
    struct journal_log own;
    struct rv_slot *cache;       /* ring of seen resourceVersions, oldest reused first */
    int *buckets;                /* hash -> first slot, or -1 */
    size_t cache_cap, cache_next;
    char cluster[128];           /* what its entries name as their cluster ("": management) */
};

/* Starts a journal writing into log (shared memory from child.c), or into
 * its own when log is NULL. Never fails: without memory for the cache of
 * resourceVersions it still counts and keeps every write (changes are then
 * more often unknown). */
void journal_init(struct journal *j, struct journal_log *log);
/* Another cluster's journal over the same log (a tenant client's): its
 * entries name cluster, the log's counts are shared; the log is not reset. */
void journal_attach(struct journal *j, struct journal_log *log, const char *cluster);
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
/* A write is about to leave (delta +1), or its answer is journaled or it
 * did not leave after all (-1). Until then it counts as a write of
 * unknown outcome however the migration ends (a deadline, a kill): a
 * request on the wire may land whether or not its answer ever comes. */
void journal_pending(struct journal *j, int delta);
/* The journal's JSON form (journaldoc.h). NULL on OOM. */
cJSON *journal_json(const struct journal *j);
#endif

/* journal.h: the write journal of one migration: every mutating request it
 * sent (verb, resource, namespace, name, HTTP status) and whether it changed
 * the object, so an operator can tell "touched nothing, safe to retry" from
 * "changed three objects", and a spec can prove a second run changed
 * nothing. Owns the entries (the first JOURNAL_KEEP, and counts of all)
 * in a log that holds no pointer, so it can live in memory the supervising
 * parent shares with the migration's child and be read however the child
 * ended (killed at its deadline, out of memory); the resourceVersions the
 * migration has seen (a bounded cache, so telling a no-op patch from a
 * change costs no request when the object was read first); the journal's
 * JSON form; and cutting that form to a size (journal_fit), always with a
 * marker and the true counts. Makes no request and knows no Lua.
 *
 * Recipe (kube.c): after every successful read, journal_seen(path, body);
 * before a write, journal_rv(path) for the resourceVersion it had (NULL:
 * read it first if you need to know); after the write, journal_add. The
 * parent (child.c) reads the shared log with journal_log_json. */
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

/* The entries and counts, plain data. An entry is written whole before the
 * counts that publish it move, so a reader after the writer was killed
 * mid-write sees every finished write and no half of one. */
struct journal_log {
    int active;                  /* a journal exists (the kube module was opened) */
    size_t kept;
    size_t writes, changed, unknown;
    struct journal_entry e[JOURNAL_KEEP];
};

struct journal {
    struct journal_log *log;     /* &own, or the log given to journal_init */
    struct journal_log own;
    struct rv_slot *cache;       /* ring of seen resourceVersions, oldest reused first */
    int *buckets;                /* hash -> first slot, or -1 */
    size_t cache_cap, cache_next;
};

/* Starts a journal writing into log (shared memory from child.c), or into
 * its own when log is NULL. Never fails: without memory for the cache of
 * resourceVersions it still counts and keeps every write (changes are then
 * more often unknown). */
void journal_init(struct journal *j, struct journal_log *log);
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
/* The same from a log another process wrote (its strings and counts are
 * checked, not trusted): NULL when the log is not active, or on OOM. */
cJSON *journal_log_json(const struct journal_log *log);

/* The journal's JSON text cut to fit in cap bytes (NUL included): the
 * entries that do not fit are dropped from the end and counted in `more`,
 * with "truncated": true saying the list was cut to fit; writes, changed
 * and unknown stay the true counts. The one place a journal is shortened
 * (a failed record's journal, RECORD_JOURNAL_CAP; a ledger near its size
 * limit). malloc'd; NULL when text is not a journal or memory ran out. */
char *journal_fit(const char *text, size_t cap);
/* "12 writes, 3 changed" */
void journal_summary(size_t writes, size_t changed, char *buf, size_t len);
#endif

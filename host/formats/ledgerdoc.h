/* ledgerdoc.h: the ledger ConfigMap as a document: its records by slug,
 * its legacy `version`, what makes it untrustworthy, and its size against
 * the apiserver's object limit (the growth budget). The one parser of it;
 * reading it from the cluster and writing it back is run/ledger.h's. */
#ifndef COZY_LEDGERDOC_H
#define COZY_LEDGERDOC_H
#include <cjson/cJSON.h>
#include <stddef.h>

#include "base/buf.h"
#include "formats/record.h"

/* What protects it: the label a no-delete policy matches, and Helm's keep
 * annotation (a chart uninstall leaves it). */
#define NO_DELETE_LABEL "platform.cozystack.io/no-delete"
#define KEEP_ANNOTATION "helm.sh/resource-policy"

#define LEDGER_LIMIT (1024 * 1024)   /* the apiserver's object size limit */

/* The last failure of each pending slug (an on-error=abort failure records
 * nothing, so a record cannot say it): an annotation of the ledger, JSON
 * {"<slug>": {"tier","at","reason","message","runner"}}, written by the
 * runner under its lock, at most LEDGER_FAILURES_KEEP slugs (the newest),
 * each message cut to LEDGER_FAILURE_MESSAGE bytes. Cluster input: parsed
 * here, and a bad entry is left out. */
#define FAILURES_ANNOTATION "platform.cozystack.io/pending-failures"
#define LEDGER_FAILURES_KEEP 4
#define LEDGER_FAILURE_MESSAGE 240

struct ledger_failure {
    char slug[64], tier[16], at[40], reason[64];
    char message[LEDGER_FAILURE_MESSAGE + 1];
    char runner[256];
};

struct ledger_entry {
    char *slug;
    size_t bytes;           /* read: its key and value as the object limit counts them */
    struct record rec;
};

struct ledger {
    int exists;
    int has_version;
    long version;           /* key `version`, the legacy integer */
    int version_bad;        /* `version` is present but not a plain decimal from 0
                             * to LEGACY_NUMBER_MAX + 1 (has_version is 0) */
    char version_raw[48];   /* its text, cut, for messages */
    struct ledger_entry *e;
    size_t n;
    int sorted;             /* e is in strictly increasing slug order (the
                             * apiserver's): ledger_find bisects */
    size_t bytes;           /* keys + values of data, and FAILURES_ANNOTATION: what the
                             * object limit counts */
    size_t binary_keys;     /* keys under binaryData (the engine reads data alone: any
                             * makes the ledger untrustworthy), and the first one */
    char binary_key[128];
    char uid[64];           /* for Events about it, and the Lease's mark (lock.h) */
    int protected_;         /* it carries the no-delete label and the keep annotation */
    struct ledger_failure failures[LEDGER_FAILURES_KEEP]; /* FAILURES_ANNOTATION, oldest
                                                             * first */
    size_t nfailures;
    size_t failures_bytes;  /* the annotation's key and value (counted in bytes) */
};

/* The growth budget (docs/internals.md, "The ledger"). Past LEDGER_SHRINK_AT a failed
 * record is written shrunk (record_shrink); LEDGER_RESERVE is left free for
 * what legacy scripts write (`version`) beside the records. */
#define LEDGER_SHRINK_AT (LEDGER_LIMIT / 10 * 8)
#define LEDGER_RESERVE 1024

/* Parses a ConfigMap object. Returns 0, or -1 when out of memory. A bad
 * `version` (version_bad), record (REC_UNKNOWN; a key m.X whose X is not a
 * slug too) or binaryData (binary_keys) is not an error here: the planner
 * reports every bad key together and refuses. */
int ledger_parse(const cJSON *cm, struct ledger *l, struct buf *err);
const struct record *ledger_find(const struct ledger *l, const char *slug);
const struct ledger_entry *ledger_find_entry(const struct ledger *l, const char *slug);
void ledger_free(struct ledger *l);
/* Marks unreadable what the parsed object cannot show: a data value of the
 * object text body[0..len) that holds the escape \u0000 (cJSON decodes it
 * to a NUL byte, and "{...}\u0000junk" would read as the object alone): its
 * record becomes REC_UNKNOWN, or `version` bad. */
void ledger_mark_nul(const char *body, size_t len, struct ledger *l);
/* The scan ledger_mark_nul makes, for any ConfigMap's JSON text (the
 * migrations index's too, indexdoc.h): each(ud, key, klen) for each data
 * value that holds the escape \u0000. */
void configmap_nul_values(const char *body, size_t len,
                          void (*each)(void *ud, const char *key, size_t klen), void *ud);

/* The last failure of slug the annotation keeps, or NULL. */
const struct ledger_failure *ledger_find_failure(const struct ledger *l, const char *slug);
/* FAILURES_ANNOTATION's value for l's failures with f added (replacing one
 * of its slug), the slugs that have a record in l, or that recorded(ud,
 * slug) says were recorded since l was read, left out, and the oldest past
 * LEDGER_FAILURES_KEEP; f's strings are cut to fit. malloc'd (free), or
 * NULL when out of memory. */
char *ledger_failures_with(const struct ledger *l, const struct ledger_failure *f,
                           int (*recorded)(void *ud, const char *slug), void *ud);

/* The bytes key m.<slug> takes beside its value. */
size_t ledger_key_bytes(const char *slug);
/* {"m.<slug>": "<record>", ...}: the data a create or a merge patch carries
 * for the n records (each record's text made here, once), or NULL when out
 * of memory. *bytes (may be NULL): the size they take in the object, key
 * and value bytes (what the ledger's size limit counts). */
cJSON *ledger_records_data(const struct ledger_entry *e, size_t n, size_t *bytes);
#endif

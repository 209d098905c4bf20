/* ledger.h: the ConfigMap that records what ran. Owns its wire shape (key
 * `version`, read only; keys `m.<slug>` holding records), reading it (absent
 * vs every other error), the only writes the engine ever makes to it (a
 * create at fresh install, JSON merge patches of `m.*` keys), and the Events
 * about it. No other file knows the key prefix.
 *
 * Recipe: fill a ledger_loc (the connection, namespace, name); ledger_read;
 * plan on the result; write outcomes with ledger_write (one record, or many
 * in one patch when seeding); ledger_event for the history. */
#ifndef COZY_LEDGER_H
#define COZY_LEDGER_H
#include <stddef.h>
#include <cjson/cJSON.h>

#include "record.h"
#include "rest.h"

#define LEDGER_LIMIT (1024 * 1024)   /* the apiserver's object size limit */

struct ledger_entry {
    char *slug;
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
    size_t bytes;           /* keys + values, to warn before the object limit */
    size_t binary_keys;     /* keys under binaryData (the engine reads data alone: any
                             * makes the ledger untrustworthy), and the first one */
    char binary_key[128];
    char uid[64];           /* for Events about it */
};

struct ledger_loc {
    struct rest_client *rest;
    const char *ns;
    const char *name;
    double deadline;        /* monotonic: a write must be over by then (the runner's
                             * hold on its lock); 0 = none */
};

enum ledger_rc {
    LEDGER_OK = 0,
    LEDGER_EXISTS,          /* ledger_create: someone created it first (re-read it) */
    LEDGER_UNTRUSTED,       /* ledger_read: the answer is not a ConfigMap it can read */
    LEDGER_ERROR,           /* the apiserver refused (err says why) */
    LEDGER_UNAVAILABLE,     /* throttled, 5xx or out of reach past every retry (or the
                             * deadline): it may work later */
    LEDGER_DENIED,          /* refused (403/422) although RBAC allows the runner the write:
                             * admission or a policy denied it (err has the server's words) */
};

/* Parses a ConfigMap object. Returns 0, or -1 when out of memory. A bad
 * `version` (version_bad), record (REC_UNKNOWN; a key m.X whose X is not a
 * slug too) or binaryData (binary_keys) is not an error here: the planner
 * reports every bad key together and refuses. */
int ledger_parse(const cJSON *cm, struct ledger *l, char *err, size_t errlen);
const struct record *ledger_find(const struct ledger *l, const char *slug);
void ledger_free(struct ledger *l);

/* Reads the ledger. LEDGER_OK with l->exists 0 when it is absent (a 404
 * whose Status says NotFound of this ConfigMap; any other 404 is
 * LEDGER_ERROR); LEDGER_UNTRUSTED or LEDGER_ERROR with err filled otherwise.
 * A value holding a NUL byte (\u0000 on the wire) is unreadable: its record
 * REC_UNKNOWN, or `version` bad. */
enum ledger_rc ledger_read(const struct ledger_loc *at, struct ledger *l, char *err,
                           size_t errlen);
/* Creates it holding the n records, with the no-delete label and the keep
 * annotation. LEDGER_OK, LEDGER_EXISTS (409), LEDGER_DENIED or
 * LEDGER_ERROR. */
enum ledger_rc ledger_create(const struct ledger_loc *at, const struct ledger_entry *e,
                             size_t n, char *err, size_t errlen);
/* Writes the n records with one JSON merge patch. Never touches `version`,
 * never deletes. LEDGER_OK, LEDGER_ERROR, LEDGER_UNAVAILABLE or
 * LEDGER_DENIED. */
enum ledger_rc ledger_write(const struct ledger_loc *at, const struct ledger_entry *e, size_t n,
                            char *err, size_t errlen);
/* The size the n records add to the object (key and value bytes). */
size_t ledger_entry_bytes(const struct ledger_entry *e, size_t n);

/* An Event on the ledger (uid may be ""), so `kubectl describe` shows the
 * history. Best effort: a failure is logged, never returned. */
void ledger_event(const struct ledger_loc *at, const char *uid, const char *type,
                  const char *reason, const char *message);
#endif

/* ledger.h: the ConfigMap that records what ran. Owns reading it (absent vs
 * every other error), parsing its keys, and the only writes the engine ever
 * makes to it: a create (fresh install) and JSON merge patches of `m.*` keys. */
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
    struct ledger_entry *e;
    size_t n;
    size_t bytes;           /* keys + values, to warn before the object limit */
    char uid[64];           /* for Events about it */
};

/* Parses a ConfigMap object. Returns 0, or -1 when it cannot be trusted at
 * all (a `version` that is not an integer), with the reason in err. A bad
 * record is not an error here: it becomes REC_UNKNOWN. */
int ledger_parse(const cJSON *cm, struct ledger *l, char *err, size_t errlen);
const struct record *ledger_find(const struct ledger *l, const char *slug);
void ledger_free(struct ledger *l);

/* Reads ns/name. Returns 0 (l->exists says whether it was there: 404 is
 * "absent"), or -1 on any other failure (err says which; *code gets the
 * HTTP code, 0 for transport failures, -2 for an untrustworthy ledger). */
int ledger_read(struct rest_client *c, const char *ns, const char *name, struct ledger *l,
                long *code, char *err, size_t errlen);

/* Creates the ledger with `data` (key -> string) plus the no-delete label
 * and the keep annotation. Returns 0, 1 when it already exists (409: the
 * caller re-reads), -1 on failure. */
int ledger_create(struct rest_client *c, const char *ns, const char *name, const cJSON *data,
                  char *err, size_t errlen);
/* Writes `data` (key -> string) with one JSON merge patch. Never touches
 * `version`, never deletes. */
int ledger_patch(struct rest_client *c, const char *ns, const char *name, const cJSON *data,
                 char *err, size_t errlen);
/* Writes one record under m.<slug>. */
int ledger_put(struct rest_client *c, const char *ns, const char *name, const char *slug,
               const struct record *r, char *err, size_t errlen);
#endif

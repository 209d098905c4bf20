/* ledger.h: the ConfigMap that records what ran, on the cluster (its
 * document, records and key prefix are formats/ledgerdoc.h's). Owns reading
 * it (absent vs every other error), the only writes the engine ever makes to
 * it (a create at fresh install, strategic merge patches of `m.*` keys, the
 * protection and the last failures of pending slugs in its metadata), and
 * the Events about it (sent without waiting for their answers).
 *
 * Recipe: fill a ledger_loc (the connection, namespace, name); ledger_read;
 * plan on the result; ledger_protect when it lacks its label; write outcomes
 * with ledger_write (one record, or many in one patch when seeding), each
 * only when ledger_key_bytes + its largest value fits under LEDGER_LIMIT;
 * ledger_event for the history. */
#ifndef COZY_LEDGER_H
#define COZY_LEDGER_H
#include <stddef.h>
#include <cjson/cJSON.h>

#include "base/buf.h"
#include "formats/ledgerdoc.h"
#include "client/rest.h"
#include "client/restpool.h"

struct ledger_loc {
    struct rest_client *rest;
    const char *ns;
    const char *name;
    double deadline;        /* monotonic: a write must be over by then (the runner's
                             * hold on its lock); 0 = none */
    char rv[64];            /* the ledger's resourceVersion as this runner's last read
                             * or write left it ("" = unknown): every merge patch carries
                             * it as a precondition, so a write that reaches the apiserver
                             * late (a runner stopped mid-request, its lock taken over
                             * and the ledger written since) is refused, never applied */
    struct rest_pool *events;   /* the Events in flight (ledger_event), made on first use */
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
    LEDGER_GONE,            /* ledger_write: NotFound: the ledger was deleted */
    LEDGER_FULL,            /* the write would take the object past its size limit */
    LEDGER_CONFLICT,        /* ledger_write, ledger_protect: the ledger changed since
                             * at->rv (409): ask the lock, ledger_refresh, write again */
};

/* Reads the ledger. LEDGER_OK with l->exists 0 when it is absent (a 404
 * whose Status says NotFound of this ConfigMap; any other 404 is
 * LEDGER_ERROR); LEDGER_UNTRUSTED or LEDGER_ERROR with err filled otherwise.
 * A value holding a NUL byte (\u0000 on the wire) is unreadable: its record
 * REC_UNKNOWN, or `version` bad. */
enum ledger_rc ledger_read(struct ledger_loc *at, struct ledger *l, struct buf *err);
/* Creates it holding the n records, with the no-delete label and the keep
 * annotation. LEDGER_OK, LEDGER_EXISTS (409), LEDGER_FULL, LEDGER_DENIED or
 * LEDGER_ERROR. */
enum ledger_rc ledger_create(struct ledger_loc *at, const struct ledger_entry *e,
                             size_t n, struct buf *err);
/* Whether the ledger's namespace exists: 1, 0 (NotFound of that namespace:
 * a cluster no hook ever ran on), or -1 (any other answer, with err: the
 * caller goes on, and the request that needs the namespace says what is
 * wrong). */
int ledger_namespace_exists(struct ledger_loc *at, struct buf *err);
/* Creates the ledger's namespace (a local run told --create-namespace).
 * LEDGER_OK, LEDGER_EXISTS, or LEDGER_ERROR with err. */
enum ledger_rc ledger_namespace_create(struct ledger_loc *at, struct buf *err);
/* Writes the n records with one strategic merge patch. Never touches `version`
 * (but for ledger_write_stamped below),
 * never deletes; conditional on at->rv when known (then updated from the
 * answer). *sent: the bytes the records take in the object (keys and
 * values, as the size limit counts them), whatever the answer; 0 when the
 * patch could not be made. LEDGER_OK, LEDGER_GONE (404), LEDGER_FULL,
 * LEDGER_CONFLICT, LEDGER_ERROR, LEDGER_UNAVAILABLE or LEDGER_DENIED. */
enum ledger_rc ledger_write(struct ledger_loc *at, const struct ledger_entry *e, size_t n,
                            size_t *sent, struct buf *err);
/* The same, with `version` set to version in the same patch: a legacy
 * script's stamp the gateway absorbed (gateway/stamp.h), carried out by the
 * runner as part of its ok record. version < 0: none (ledger_write). */
enum ledger_rc ledger_write_stamped(struct ledger_loc *at, const struct ledger_entry *e, size_t n,
                                    long version, size_t *sent, struct buf *err);
/* Reads the ledger's resourceVersion alone (its metadata) into at->rv.
 * LEDGER_OK, LEDGER_GONE, LEDGER_UNAVAILABLE or LEDGER_ERROR. */
enum ledger_rc ledger_refresh(struct ledger_loc *at, struct buf *err);
/* Gives a ledger the engine did not create (an older chart rendered it) the
 * no-delete label and the keep annotation: one merge patch of its metadata.
 * LEDGER_OK, LEDGER_GONE, LEDGER_ERROR or LEDGER_UNAVAILABLE. */
enum ledger_rc ledger_protect(struct ledger_loc *at, struct buf *err);

/* Sets the ledger's FAILURES_ANNOTATION (ledgerdoc.h) to text: one merge
 * patch of its metadata, conditional on at->rv as a record's is. The codes
 * of ledger_write. */
enum ledger_rc ledger_note_failures(struct ledger_loc *at, const char *text, struct buf *err);

/* An Event on the ledger (uid may be ""), so `kubectl describe` shows the
 * history. Best effort: a failure is logged, never returned. It is put on
 * the wire and left in flight (what the runner does next does not wait for
 * its answer); its answer is read at the next ledger_event or at
 * ledger_events_flush, and a failure is logged then. */
void ledger_event(struct ledger_loc *at, const char *uid, const char *type,
                  const char *reason, const char *message);
/* Waits for every Event still in flight (logging each failure) and frees
 * what held them: before at->rest is freed. */
void ledger_events_flush(struct ledger_loc *at);
#endif

/* record.h: a ledger record, the JSON value of key `m.<slug>`. The one
 * parser and the one writer of it. */
#ifndef COZY_RECORD_H
#define COZY_RECORD_H
#include <cjson/cJSON.h>

enum rec_state {
    REC_NONE = 0,           /* no record */
    REC_OK,
    REC_FAILED,
    REC_LEGACY,
    REC_REVOKED,
    REC_SKIPPED_FRESH,
    REC_SKIPPED,            /* an operator's skip (reason Operator, message, by) */
    REC_UNKNOWN,            /* present but unparseable: recorded, state unknown */
};

#include "base/defaults.h"

#define OUTPUT_CAP OUTPUT_TAIL_MAX
/* The most of a record's `journal` (JSON, NUL included): a longer one is cut
 * by journal_fit (journaldoc.h), its list shortened with "truncated": true and
 * `more`, its counts kept true. */
#define RECORD_JOURNAL_CAP 16384

/* Ownership. A record owns two heap fields, output and journal, and
 * nothing else; every other field is a value. So:
 *  - record_init and record_parse start a record that owns nothing (a
 *    fresh one, or one record_free emptied) and overwrite it whole;
 *  - record_free releases what it owns and leaves it empty (NULLs): a
 *    record is freed once, by whoever holds it (a ledger's entries by
 *    ledger_free, a plan's seeds by plan_free, the runner's own by the
 *    runner);
 *  - copying a struct record by value makes a view, not a copy: the view
 *    is never freed and never outlives the record it was taken from;
 *  - record_set_output copies the text it is given, record_set_journal
 *    takes the tree it is given (freed even when it refuses it). */
struct record {
    enum rec_state state;
    char at[40];
    char sha256[72];        /* of the script */
    char lib_sha256[72];    /* of the shared code it ran with */
    char batch[128];
    char tier[24];
    char image[256];
    char runner[256];       /* the lock holder that wrote it */
    long attempts;
    long duration_ms;
    int journaled;          /* writes/changed hold the journal's counts */
    long writes, changed;   /* mutating requests sent, objects they changed */
    char reason[64];
    char message[1024];
    char by[256];           /* skipped: who (the identity the runner's config resolved) */
    char problem[256];      /* why it is REC_UNKNOWN */
    char stamp[48];         /* a legacy script's stamp the runner carried out with this
                             * record ("version=N"; "" when none: gateway/stamp.h) */
    char *output;           /* heap: last lines of the script's output (at most
                             * OUTPUT_CAP bytes, NUL included); NULL when none */
    cJSON *journal;         /* heap: failed records: the bounded write journal as
                             * a tree (journaldoc.h: an object with writes,
                             * changed, entries, more), NULL when absent; made
                             * once from the child's log or the ledger's text,
                             * printed only into the record's JSON */
};

/* Starts a record: the given fields (NULL or "" = absent), the rest empty.
 * The one place a record is made, for seeds and for outcomes alike. */
void record_init(struct record *r, enum rec_state st, const char *at, const char *batch,
                 const char *tier, const char *image, const char *sha256,
                 const char *lib_sha256);
/* Releases output and journal; r owns nothing after. NULL is a no-op. */
void record_free(struct record *r);
/* Parses a record's JSON text (len bytes). Returns 0, or -1 leaving state
 * REC_UNKNOWN, nothing owned and the reason in r->problem: not JSON, not
 * exactly one object (text or a NUL byte after it), a key given twice, an
 * unknown state, a field of the wrong type, an `at` that is not an RFC 3339
 * UTC time. The journal's subtree is taken out of the parsed document, not
 * printed and parsed again. */
int record_parse(const char *text, size_t len, struct record *r);
/* Such a time (a record's `at`, an apiserver's timestamp) in seconds since
 * the epoch; -1 when it is not one. */
double record_time_epoch(const char *s);
/* Replaces r->output with the last bytes of text that fit in OUTPUT_CAP
 * (cut at a character's start); NULL or "" leaves none. 0, or -1 out of
 * memory (r->output then NULL). */
int record_set_output(struct record *r, const char *text);
/* Takes a write journal (journaldoc.h's tree: journal_log_json's, or a
 * record's as read) as r->journal, cut to fit in cap bytes of text (at
 * most RECORD_JOURNAL_CAP) by journal_fit: the one way a record gets a
 * journal, so one too long is shortened with a marker and its true
 * counts, never dropped. The tree is r's (or freed) whatever the result:
 * 0, or -1 (r->journal NULL) when it is not a journal or memory ran out. */
int record_set_journal(struct record *r, cJSON *journal, size_t cap);
/* The record as its JSON tree (keys in a fixed order; the journal a copy):
 * the caller's, cJSON_Delete. NULL when out of memory. */
cJSON *record_json(const struct record *r);
/* The JSON text of a record (compact, keys in a fixed order); malloc'd. */
char *record_format(const struct record *r);

/* What a shrunk failed record keeps of its output (record_shrink). */
#define RECORD_SHRUNK_OUTPUT 512
/* The longest text record_format can give for an outcome of the migration
 * base describes (its at, checksums, batch, tier, image and runner set):
 * an ok record with the largest counts, and when may_fail a failed one with
 * every field full and every byte escaped at its widest (\u00XX); shrunk:
 * as record_shrink leaves a failed one. 0 when out of memory. */
size_t record_max_bytes(const struct record *base, int may_fail, int shrunk);
/* Shrinks a failed record for a ledger near its limit: the output keeps
 * its last RECORD_SHRUNK_OUTPUT bytes (whole lines where it can) after a
 * marker line giving the true size, and the journal only its counts
 * (entries listed: none; `more`: all of them; `cut` says why). */
void record_shrink(struct record *r);
const char *rec_state_name(enum rec_state s);
#endif

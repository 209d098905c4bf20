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
    /* The two large buffers stay last: a record is cleared up to them and
     * they get only their first byte, so a ledger of thousands of records
     * never touches (faults in) their pages. record.c asserts at compile
     * time that nothing follows them, and lists every field once (its
     * `fields` table: a new field is a member here and a line there). */
    char output[OUTPUT_CAP];    /* last lines of the script's output */
    char journal[RECORD_JOURNAL_CAP]; /* failed records: the bounded write journal
                                       * as compact JSON (journaldoc.h: an object with
                                       * writes, changed, entries, more), "" when
                                       * absent; shown by status, written back */
};

/* Starts a record: zeroed, then the given fields (NULL or "" = absent).
 * The one place a record is made, for seeds and for outcomes alike. */
void record_init(struct record *r, enum rec_state st, const char *at, const char *batch,
                 const char *tier, const char *image, const char *sha256,
                 const char *lib_sha256);
/* Parses a record's JSON text (len bytes). Returns 0, or -1 leaving state
 * REC_UNKNOWN and the reason in r->problem: not JSON, not exactly one
 * object (text or a NUL byte after it), a key given twice, an unknown
 * state, a field of the wrong type, an `at` that is not an RFC 3339 UTC
 * time. */
int record_parse(const char *text, size_t len, struct record *r);
/* YYYY-MM-DDTHH:MM:SS[.fraction]Z with every field in range. */
int record_time_valid(const char *s);
/* Such a time (a record's `at`, an apiserver's timestamp) in seconds since
 * the epoch; -1 when it is not one. */
double record_time_epoch(const char *s);
/* Stores a write journal (journaldoc.h's JSON: journal_log_json's, or a
 * record's as read) in r->journal as text, cut to fit in cap bytes (at
 * most RECORD_JOURNAL_CAP) by journal_fit: the one way a record gets a
 * journal, so one too long is shortened with a marker and its true
 * counts, never dropped. 0, or -1 (r->journal left empty) when it is not a
 * journal or memory ran out. */
int record_set_journal(struct record *r, const cJSON *journal, size_t cap);
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

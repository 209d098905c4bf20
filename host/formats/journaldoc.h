/* journaldoc.h: the write journal of one migration as data: its entries
 * and counts in a log that holds no pointer (so it can live in memory a
 * migration's child shares with its supervisor and be read however the
 * child ended), its JSON form (what a record's `journal` holds, what status
 * and preview show), and cutting that form to a size (journal_fit), always
 * with a marker and the true counts. Recording the writes is
 * door/journal.h's. */
#ifndef COZY_JOURNALDOC_H
#define COZY_JOURNALDOC_H
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
    char cluster[128];           /* "" the management cluster; else the tenant cluster's
                                  * name: the Secret its kubeconfig came from, NS/NAME */
    char fields[JOURNAL_FIELDS_MAX]; /* dry run: what would change, one field a line */
};

/* The entries and counts, plain data. An entry is written whole before the
 * counts that publish it move, so a reader after the writer was killed
 * mid-write sees every finished write and no half of one. */
struct journal_log {
    int active;                  /* a journal exists (the kube module was opened) */
    size_t kept;
    size_t writes, changed, unknown;
    size_t pending;              /* writes sent whose answer is not journaled yet: however
                                  * the migration ends, each counts as a write of unknown
                                  * outcome ("unanswered") */
    struct journal_entry e[JOURNAL_KEEP];
};

/* {"writes":N,"changed":N,"unknown":N,"unanswered":N,"entries":[...],
 * "more":N} from a log, possibly one another process wrote (its strings
 * and counts are checked, not trusted): NULL when the log is not active,
 * or on OOM. The writes still pending count in writes and unknown, and
 * alone in unanswered (they have no entry: "more" counts the entries left
 * out of the list, not them). */
cJSON *journal_log_json(const struct journal_log *log);
/* *j = a copy of shared (which another process may have written) with
 * every count and string cut to its bounds: a log the supervisor can hand
 * on as data. */
void journal_log_read(struct journal_log *j, const struct journal_log *shared);
/* The counts a record and the JSON give: the writes (pending ones
 * included) and how many changed something. */
void journal_log_counts(const struct journal_log *j, size_t *writes, size_t *changed);

/* The journal's JSON (an object with "entries") cut so that its compact
 * text fits in cap bytes (NUL included): the entries that do not fit are
 * dropped from the end and counted in `more`, with "truncated": true
 * saying the list was cut to fit; writes, changed and unknown stay the
 * true counts. The one place a journal is shortened (a failed record's
 * journal, RECORD_JOURNAL_CAP; a ledger near its size limit). A new tree
 * (the caller's, cJSON_Delete); NULL when it is not a journal, not even
 * its counts fit, or memory ran out. */
cJSON *journal_fit(const cJSON *journal, size_t cap);
/* "12 writes, 3 changed" */
void journal_summary(size_t writes, size_t changed, char *buf, size_t len);
#endif

/* record.c: parses and formats ledger records.
 *
 * Owns the record schema: which states exist, which fields are strings or
 * integers, and the fixed key order written; and a record's side of the
 * ledger's growth budget: the most bytes one can take, and the shrunk form
 * of a failed one near the limit. A record is parsed with cJSON,
 * never pattern-matched; anything it cannot trust becomes REC_UNKNOWN with a
 * reason, so the caller reports it and leaves the key alone.
 * Prefixes: rec_ (record.h's, as its enum rec_state). */
#include "formats/record.h"

#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "formats/journaldoc.h"
#include "base/util.h"

static const char *const state_names[] = {
    [REC_NONE] = "none",       [REC_OK] = "ok",           [REC_FAILED] = "failed",
    [REC_LEGACY] = "legacy",   [REC_REVOKED] = "revoked", [REC_SKIPPED_FRESH] = "skipped-fresh-install",
    [REC_SKIPPED] = "skipped", [REC_UNKNOWN] = "unknown",
};

const char *rec_state_name(enum rec_state s)
{
    return s <= REC_UNKNOWN ? state_names[s] : "unknown";
}

static void set(char *dst, size_t cap, const char *v)
{
    snprintf(dst, cap, "%s", v ? v : "");
}

/* Every field of a record's JSON beside `state`, in the order record_format
 * writes them: the one list record_parse and record_format both walk, so a
 * new field is this line and its member in struct record. */
enum field_kind {
    FIELD_STRING,           /* written when not empty */
    FIELD_COUNT,            /* a non-negative integer, always written */
    FIELD_JOURNAL_COUNT,    /* the same, written when the record is journaled */
    FIELD_OUTPUT,           /* the output's tail, a heap string, written when set */
    FIELD_JOURNAL,          /* the write journal, a heap tree, written when set */
};
static const struct record_field {
    const char *key;
    enum field_kind kind;
    size_t off, cap;        /* the member; cap: its size (strings, output) */
} fields[] = {
#define FIELD(name, kind) {#name, kind, offsetof(struct record, name), sizeof ((struct record *)0)->name}
    FIELD(at, FIELD_STRING),          FIELD(sha256, FIELD_STRING),
    FIELD(lib_sha256, FIELD_STRING),  FIELD(batch, FIELD_STRING),
    FIELD(tier, FIELD_STRING),        FIELD(image, FIELD_STRING),
    FIELD(runner, FIELD_STRING),      FIELD(attempts, FIELD_COUNT),
    FIELD(duration_ms, FIELD_COUNT),  FIELD(writes, FIELD_JOURNAL_COUNT),
    FIELD(changed, FIELD_JOURNAL_COUNT), FIELD(reason, FIELD_STRING),
    FIELD(message, FIELD_STRING),
    {"output", FIELD_OUTPUT, offsetof(struct record, output), OUTPUT_CAP},
    FIELD(by, FIELD_STRING),          FIELD(stamp, FIELD_STRING),
    {"journal", FIELD_JOURNAL, offsetof(struct record, journal), RECORD_JOURNAL_CAP},
#undef FIELD
};
#define NFIELDS (sizeof fields / sizeof fields[0])

/* Empties a record that owns nothing (record.h: Ownership). */
static void record_clear(struct record *r)
{
    memset(r, 0, sizeof *r);
}

void record_free(struct record *r)
{
    if (!r)
        return;
    free(r->output);
    r->output = NULL;
    cJSON_Delete(r->journal);
    r->journal = NULL;
}

int record_set_output(struct record *r, const char *text)
{
    free(r->output);
    r->output = NULL;
    if (!text || !*text)
        return 0;
    size_t len = strlen(text);
    const char *from = len >= OUTPUT_CAP ? text + len - (OUTPUT_CAP - 1) : text;
    return (r->output = strdup(utf8_start(from))) ? 0 : -1;
}

void record_init(struct record *r, enum rec_state st, const char *at, const char *batch,
                 const char *tier, const char *image, const char *sha256,
                 const char *lib_sha256)
{
    record_clear(r);
    r->state = st;
    set(r->at, sizeof r->at, at);
    set(r->batch, sizeof r->batch, batch);
    set(r->tier, sizeof r->tier, tier);
    set(r->image, sizeof r->image, image);
    set(r->sha256, sizeof r->sha256, sha256);
    set(r->lib_sha256, sizeof r->lib_sha256, lib_sha256);
}

static int get_str(const cJSON *o, const char *k, char *dst, size_t cap, struct record *r)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v)
        return 0;
    if (!cJSON_IsString(v)) {
        snprintf(r->problem, sizeof r->problem, "field '%s' is not a string", k);
        return -1;
    }
    snprintf(dst, cap, "%s", v->valuestring);
    return 0;
}

static int get_int(const cJSON *o, const char *k, long *dst, struct record *r)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v)
        return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != (double)(long)v->valuedouble) {
        snprintf(r->problem, sizeof r->problem, "field '%s' is not a non-negative integer", k);
        return -1;
    }
    *dst = (long)v->valuedouble;
    return 0;
}

/* `output`: kept as read, up to OUTPUT_CAP (what the runner wrote fits). */
static int get_output(const cJSON *o, struct record *r)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "output");
    if (!v)
        return 0;
    if (!cJSON_IsString(v)) {
        snprintf(r->problem, sizeof r->problem, "field 'output' is not a string");
        return -1;
    }
    if (*v->valuestring && !(r->output = strndup(v->valuestring, OUTPUT_CAP - 1))) {
        snprintf(r->problem, sizeof r->problem, "out of memory");
        return -1;
    }
    return 0;
}

/* `journal`: the write journal, an object (journaldoc.h), taken out of the
 * parsed document as it is (or a note when too long even cut). */
static int get_journal(cJSON *o, struct record *r)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "journal");
    if (!v)
        return 0;
    if (!cJSON_IsObject(v)) {
        snprintf(r->problem, sizeof r->problem, "field 'journal' is not an object");
        return -1;
    }
    if (record_set_journal(r, cJSON_DetachItemViaPointer(o, v), RECORD_JOURNAL_CAP) == 0)
        return 0;
    cJSON *note = cJSON_CreateObject();
    if (!note || !cJSON_AddStringToObject(note, "note", "too long to show")) {
        cJSON_Delete(note);
        snprintf(r->problem, sizeof r->problem, "out of memory");
        return -1;
    }
    r->journal = note;
    return 0;
}

static int num(const char *s, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++)
        v = v * 10 + (s[i] - '0');
    return v;
}

/* RFC 3339 in UTC as the engine (and Kubernetes) writes it:
 * YYYY-MM-DDTHH:MM:SS, an optional fraction of 1 to 9 digits, then Z; every
 * field in range (the day for its month, leap years counted). */
/* YYYY-MM-DDTHH:MM:SS[.fraction]Z with every field in range. */
static int record_time_valid(const char *s)
{
    static const char shape[] = "dddd-dd-ddTdd:dd:dd";
    for (size_t i = 0; shape[i]; i++)
        if (shape[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != shape[i])
            return 0;
    const char *p = s + sizeof shape - 1;
    if (*p == '.') {
        size_t n = 0;
        while (p[1 + n] >= '0' && p[1 + n] <= '9')
            n++;
        if (n < 1 || n > 9)
            return 0;
        p += 1 + n;
    }
    if (strcmp(p, "Z") != 0)
        return 0;
    int y = num(s, 4), mo = num(s + 5, 2), d = num(s + 8, 2);
    int hh = num(s + 11, 2), mi = num(s + 14, 2), ss = num(s + 17, 2);
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (mo < 1 || mo > 12 || d < 1)
        return 0;
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    int dim = days[mo - 1] + (mo == 2 && leap);
    /* 60: RFC 3339 allows a leap second. */
    return d <= dim && hh <= 23 && mi <= 59 && ss <= 60;
}

double record_time_epoch(const char *s)
{
    if (!s || !record_time_valid(s))
        return -1;
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    tm.tm_year = num(s, 4) - 1900;
    tm.tm_mon = num(s + 5, 2) - 1;
    tm.tm_mday = num(s + 8, 2);
    tm.tm_hour = num(s + 11, 2);
    tm.tm_min = num(s + 14, 2);
    tm.tm_sec = num(s + 17, 2);
    double t = (double)timegm(&tm);
    if (s[19] == '.')
        t += strtod(s + 19, NULL);
    return t;
}

/* The first key that appears twice in an object (at any depth), or NULL:
 * cJSON keeps both and answers with the first, other readers (jq) with
 * the last, so such a text means two things. */
static const char *duplicate_key(const cJSON *o)
{
    for (const cJSON *a = o ? o->child : NULL; a; a = a->next) {
        if (cJSON_IsObject(o))
            for (const cJSON *b = a->next; b; b = b->next)
                if (a->string && b->string && strcmp(a->string, b->string) == 0)
                    return a->string;
        const char *inner = cJSON_IsObject(a) || cJSON_IsArray(a) ? duplicate_key(a) : NULL;
        if (inner)
            return inner;
    }
    return NULL;
}


int record_set_journal(struct record *r, cJSON *journal, size_t cap)
{
    cJSON_Delete(r->journal);
    r->journal = NULL;
    if (!journal)
        return -1;
    if (cap > RECORD_JOURNAL_CAP)
        cap = RECORD_JOURNAL_CAP;
    char *text = cJSON_PrintUnformatted(journal);
    size_t len = text ? strlen(text) : 0;
    cJSON_free(text);
    if (text && len < cap) {
        r->journal = journal;
        return 0;
    }
    r->journal = journal_fit(journal, cap);
    cJSON_Delete(journal);
    return r->journal ? 0 : -1;
}

int record_parse(const char *text, size_t len, struct record *r)
{
    record_clear(r);
    r->state = REC_UNKNOWN;
    if (memchr(text, '\0', len)) {
        snprintf(r->problem, sizeof r->problem, "holds a NUL byte");
        return -1;
    }
    /* Exactly one JSON value and only white space after it. */
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (o && end) {
        while (end < text + len && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r'))
            end++;
        if (end != text + len) {
            snprintf(r->problem, sizeof r->problem, "not one JSON object: text follows it");
            cJSON_Delete(o);
            return -1;
        }
    }
    if (!o || !cJSON_IsObject(o)) {
        snprintf(r->problem, sizeof r->problem, "%s", o ? "not a JSON object" : "not JSON");
        cJSON_Delete(o);
        return -1;
    }
    const char *dup = duplicate_key(o);
    if (dup) {
        snprintf(r->problem, sizeof r->problem, "key '%.60s' appears twice", dup);
        cJSON_Delete(o);
        return -1;
    }
    char state[64] = "";
    int rc = -1;
    if (get_str(o, "state", state, sizeof state, r) != 0)
        goto out;
    if (!*state) {
        snprintf(r->problem, sizeof r->problem, "no state");
        goto out;
    }
    enum rec_state st = REC_NONE;
    for (int i = REC_OK; i < REC_UNKNOWN; i++)
        if (strcmp(state, state_names[i]) == 0)
            st = (enum rec_state)i;
    if (st == REC_NONE) {
        snprintf(r->problem, sizeof r->problem, "unknown state '%.60s'", state);
        goto out;
    }
    for (size_t i = 0; i < NFIELDS; i++) {
        const struct record_field *f = &fields[i];
        char *at = (char *)r + f->off;
        if (f->kind == FIELD_STRING ? get_str(o, f->key, at, f->cap, r)
            : f->kind == FIELD_OUTPUT  ? get_output(o, r)
            : f->kind == FIELD_JOURNAL ? get_journal(o, r)
                                       : get_int(o, f->key, (long *)(void *)at, r))
            goto out;
    }
    const cJSON *at = cJSON_GetObjectItemCaseSensitive(o, "at");
    if (at && !record_time_valid(at->valuestring)) {
        snprintf(r->problem, sizeof r->problem, "field 'at' is \"%.40s\", not a UTC time like "
                 "2026-08-12T10:04:00Z", at->valuestring);
        goto out;
    }
    r->journaled = cJSON_GetObjectItemCaseSensitive(o, "writes") != NULL;
    r->state = st;
    rc = 0;
out:
    if (rc != 0)
        record_free(r);
    cJSON_Delete(o);
    return rc;
}

cJSON *record_json(const struct record *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    int ok = cJSON_AddStringToObject(o, "state", rec_state_name(r->state)) != NULL;
    for (size_t i = 0; ok && i < NFIELDS; i++) {
        const struct record_field *f = &fields[i];
        const char *at = (const char *)r + f->off;
        switch (f->kind) {
        case FIELD_STRING:
            if (*at)
                ok = cJSON_AddStringToObject(o, f->key, at) != NULL;
            break;
        case FIELD_JOURNAL_COUNT:
            if (!r->journaled)
                break;
            /* fall through */
        case FIELD_COUNT:
            ok = cJSON_AddNumberToObject(o, f->key, (double)*(const long *)(const void *)at) != NULL;
            break;
        case FIELD_OUTPUT:
            if (r->output && *r->output)
                ok = cJSON_AddStringToObject(o, f->key, r->output) != NULL;
            break;
        case FIELD_JOURNAL:
            if (r->journal) {
                cJSON *j = cJSON_Duplicate(r->journal, 1);
                ok = j && cJSON_AddItemToObject(o, f->key, j);
                if (!ok)
                    cJSON_Delete(j);
            }
            break;
        }
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

char *record_format(const struct record *r)
{
    cJSON *o = record_json(r);
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

/* ---- the growth budget ------------------------------------------------- */

/* A string field of cap bytes (NUL included) as record_format can write it
 * at most: key, quotes, colon, comma, and each byte escaped as \u00XX. */
static size_t widest(const char *key, size_t cap)
{
    return strlen(key) + 6 + 6 * (cap - 1);
}

#define SHRUNK_MARKER "[cozy-migrate: output cut, the ledger is near its size limit: " \
                      "the last %zu of %zu bytes (%zu lines) are kept]\n"

size_t record_max_bytes(const struct record *base, int may_fail, int shrunk)
{
    struct record rec, *r = &rec;
    record_init(r, may_fail ? REC_FAILED : REC_OK, base->at, base->batch, base->tier,
                base->image, base->sha256, base->lib_sha256);
    snprintf(r->runner, sizeof r->runner, "%s", base->runner);
    r->attempts = 999999999;
    r->duration_ms = 999999999999;
    r->journaled = 1;
    r->writes = r->changed = 999999999;
    char *text = record_format(r);
    record_free(r);
    if (!text)
        return 0;
    size_t n = strlen(text) + widest("stamp", sizeof base->stamp);
    free(text);
    if (!may_fail)
        return n;
    n += widest("reason", sizeof base->reason) + widest("message", sizeof base->message);
    if (shrunk) {
        /* the marker with the largest counts, then the kept bytes */
        n += widest("output", RECORD_SHRUNK_OUTPUT + 1) + sizeof SHRUNK_MARKER + 3 * 20;
        /* {"writes":N,"changed":N,"unknown":N,"entries":[],"more":N,"cut":"..."} */
        n += strlen(",\"journal\":") + 200;
    } else {
        n += widest("output", OUTPUT_CAP);
        /* journal text as the child gave it, printed again by cJSON */
        n += strlen(",\"journal\":") + RECORD_JOURNAL_CAP + 64;
    }
    return n;
}

/* The output's last RECORD_SHRUNK_OUTPUT bytes (whole lines where it can)
 * after a marker giving the true size; output left as it was when memory
 * runs out. */
static void shrink_output(struct record *r)
{
    size_t len = r->output ? strlen(r->output) : 0;
    if (len <= RECORD_SHRUNK_OUTPUT)
        return;
    size_t lines = 0;
    for (const char *p = r->output; *p; p++)
        lines += *p == '\n';
    const char *from = r->output + len - RECORD_SHRUNK_OUTPUT;
    const char *nl = strchr(from, '\n');
    if (nl && nl[1])
        from = nl + 1;
    from = utf8_start(from);
    size_t kept = strlen(from);
    int n = snprintf(NULL, 0, SHRUNK_MARKER "%s", kept, len, lines, from);
    char *out = n < 0 ? NULL : malloc((size_t)n + 1);
    if (!out)
        return;
    snprintf(out, (size_t)n + 1, SHRUNK_MARKER "%s", kept, len, lines, from);
    free(r->output);
    r->output = out;
}

/* The journal's counts alone (entries: none; more: all of them; cut: why);
 * dropped when even that cannot be made. */
static void shrink_journal(struct record *r)
{
    const cJSON *j = r->journal;
    if (!j)
        return;
    const cJSON *entries = cJSON_GetObjectItemCaseSensitive(j, "entries");
    double listed = cJSON_IsArray(entries) ? cJSON_GetArraySize(entries) : 0;
    double more = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(j, "more"));
    cJSON *c = cJSON_CreateObject();
    static const char *const counts[] = {"writes", "changed", "unknown", "unanswered"};
    int ok = c != NULL;
    for (size_t i = 0; ok && i < sizeof counts / sizeof *counts; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, counts[i]);
        ok = !cJSON_IsNumber(v) || cJSON_AddNumberToObject(c, counts[i], v->valuedouble);
    }
    ok = ok && cJSON_AddArrayToObject(c, "entries") &&
         cJSON_AddNumberToObject(c, "more", listed + (more == more ? more : 0)) &&
         cJSON_AddStringToObject(c, "cut", "the ledger is near its size limit");
    cJSON_Delete(r->journal);
    r->journal = ok ? c : NULL;
    if (!ok)
        cJSON_Delete(c);
}

void record_shrink(struct record *r)
{
    shrink_output(r);
    shrink_journal(r);
}

/* ledgerdoc.c: the ledger ConfigMap as a document (see ledgerdoc.h).
 *
 * Owns its shape: `version`, the legacy integer (read, never written), and
 * `m.<slug>` keys holding records (the prefix is known here and nowhere
 * else); what makes it untrustworthy (a bad `version`, an unreadable record,
 * a key under binaryData, a value holding a NUL byte) noted for the planner
 * rather than refused; its size as the object limit counts it. Reading and
 * writing it on the cluster is run/ledger.c's.
 * Prefixes: ledger_ configmap_ (the ledger ConfigMap's document and its data). */
#include "formats/ledgerdoc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "formats/manifest.h"

#define PREFIX "m."

void ledger_free(struct ledger *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->e[i].slug);
        record_free(&l->e[i].rec);
    }
    free(l->e);
    memset(l, 0, sizeof *l);
}

const struct record *ledger_find(const struct ledger *l, const char *slug)
{
    const struct ledger_entry *e = ledger_find_entry(l, slug);
    return e ? &e->rec : NULL;
}

const struct ledger_entry *ledger_find_entry(const struct ledger *l, const char *slug)
{
    /* The planner asks once per manifest slug: a linear scan made planning
     * over 2,000 records quadratic (4 million strcmp). */
    if (l->sorted) {
        size_t lo = 0, hi = l->n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            int c = strcmp(l->e[mid].slug, slug);
            if (c == 0)
                return &l->e[mid];
            if (c < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        return NULL;
    }
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->e[i].slug, slug) == 0)
            return &l->e[i];
    return NULL;
}

/* A value as it can sit inside "..." in a one-line message: control
 * characters and quotes escaped, cut (whole UTF-8 sequences) to fit. */
static void quote_for_message(const char *v, char *out, size_t cap)
{
    size_t at = 0;
    for (const unsigned char *p = (const unsigned char *)v; *p && at + 5 < cap; p++) {
        if (*p == '\n' || *p == '\t' || *p == '"' || *p == '\\')
            at += (size_t)snprintf(out + at, cap - at, "\\%c",
                                   *p == '\n' ? 'n' : *p == '\t' ? 't' : (char)*p);
        else if (*p < 0x20 || *p == 0x7f)
            at += (size_t)snprintf(out + at, cap - at, "\\x%02x", *p);
        else
            out[at++] = (char)*p;
    }
    out[at] = '\0';
    utf8_clip(out);
}

/* The JSON text of the ConfigMap, already parsed (so well formed), walked
 * again for what cJSON cannot say: a value under `data` holding the escape
 * \u0000. cJSON decodes it to a NUL byte and every C string then ends there,
 * so "{...}\u0000junk" would read as the object alone. */
static const char *skip_ws(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* p at '"': just past the closing quote; *nul set when it holds \u0000. */
static const char *string_end(const char *p, const char *e, int *nul)
{
    for (p++; p < e && *p != '"'; p++)
        if (*p == '\\') {
            if (e - p >= 6 && memcmp(p + 1, "u0000", 5) == 0)
                *nul = 1;
            p++;
        }
    return p < e ? p + 1 : e;
}

/* p at a value: just past it. */
static const char *value_end(const char *p, const char *e)
{
    int depth = 0, nul = 0;
    do {
        p = skip_ws(p, e);
        if (p >= e)
            return e;
        if (*p == '"')
            p = string_end(p, e, &nul);
        else if (*p == '{' || *p == '[')
            depth++, p++;
        else if (*p == '}' || *p == ']')
            depth--, p++;
        else if (depth == 0)
            while (p < e && !strchr(",}] \t\r\n", *p))
                p++;
        else
            p++;
    } while (depth > 0 && p < e);
    return p;
}

static void mark_nul(struct ledger *l, const char *key, size_t klen)
{
    if (klen == 7 && memcmp(key, "version", 7) == 0) {
        l->has_version = 0;
        l->version_bad = 1;
        snprintf(l->version_raw, sizeof l->version_raw, "(a value holding a NUL byte)");
        return;
    }
    if (klen < strlen(PREFIX) || memcmp(key, PREFIX, strlen(PREFIX)) != 0)
        return;
    for (size_t i = 0; i < l->n; i++)
        if (strlen(l->e[i].slug) == klen - strlen(PREFIX) &&
            memcmp(l->e[i].slug, key + strlen(PREFIX), klen - strlen(PREFIX)) == 0) {
            record_free(&l->e[i].rec); /* an unknown record owns nothing (record.h) */
            l->e[i].rec.state = REC_UNKNOWN;
            snprintf(l->e[i].rec.problem, sizeof l->e[i].rec.problem, "holds a NUL byte");
        }
}

/* Each data value of the ConfigMap's JSON text that holds a NUL byte, to
 * each(ud, key, klen). Keys are compared as they are written: a ConfigMap
 * key is [-._a-zA-Z0-9]+ and needs no escape. */
void configmap_nul_values(const char *body, size_t len,
                          void (*each)(void *ud, const char *key, size_t klen), void *ud)
{
    const char *e = body + len, *p = skip_ws(body, e);
    if (!memmem(body, len, "\\u0000", 6) || p >= e || *p != '{')
        return;
    for (p++;;) {
        p = skip_ws(p, e);
        if (p >= e || *p != '"')
            return;
        int nul = 0;
        const char *key = p + 1;
        p = string_end(p, e, &nul);
        size_t klen = (size_t)(p - 1 - key);
        p = skip_ws(p, e);
        if (p >= e || *p != ':')
            return;
        p = skip_ws(p + 1, e);
        if (klen == 4 && memcmp(key, "data", 4) == 0 && p < e && *p == '{') {
            for (p++;;) {
                p = skip_ws(p, e);
                if (p >= e || *p != '"')
                    break;
                const char *k = p + 1;
                p = string_end(p, e, &nul);
                size_t kl = (size_t)(p - 1 - k);
                p = skip_ws(p, e);
                if (p >= e || *p != ':')
                    return;
                p = skip_ws(p + 1, e);
                nul = 0;
                if (p < e && *p == '"')
                    p = string_end(p, e, &nul);
                else
                    p = value_end(p, e);
                if (nul)
                    each(ud, k, kl);
                p = skip_ws(p, e);
                if (p < e && *p == ',')
                    p++;
            }
            p = skip_ws(p, e);
            if (p < e && *p == '}')
                p++;
        } else {
            p = value_end(p, e);
        }
        p = skip_ws(p, e);
        if (p >= e || *p != ',')
            return;
        p++;
    }
}

/* One entry of FAILURES_ANNOTATION into f: 0, or -1 when it is not one
 * (a bad slug, a missing or non-string field). */
static int failure_of(const cJSON *kv, struct ledger_failure *f)
{
    static const char *const names[] = {"tier", "at", "reason", "message", "runner"};
    char *const dst[] = {f->tier, f->at, f->reason, f->message, f->runner};
    const size_t len[] = {sizeof f->tier, sizeof f->at, sizeof f->reason, sizeof f->message,
                          sizeof f->runner};
    memset(f, 0, sizeof *f);
    if (!kv->string || strlen(kv->string) >= sizeof f->slug || !slug_valid(kv->string) ||
        !cJSON_IsObject(kv))
        return -1;
    snprintf(f->slug, sizeof f->slug, "%s", kv->string);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(kv, names[i]);
        if (!cJSON_IsString(v))
            return -1;
        snprintf(dst[i], len[i], "%s", v->valuestring);
        utf8_clip(dst[i]);
    }
    return 0;
}

/* FAILURES_ANNOTATION's text into l (what does not parse is left out). */
static void failures_of(const char *text, struct ledger *l)
{
    cJSON *o = cJSON_Parse(text);
    const cJSON *kv;
    const cJSON *obj = cJSON_IsObject(o) ? o : NULL;
    cJSON_ArrayForEach(kv, obj) {
        struct ledger_failure f;
        if (failure_of(kv, &f) != 0)
            continue;
        if (l->nfailures == LEDGER_FAILURES_KEEP) {
            memmove(l->failures, l->failures + 1, (LEDGER_FAILURES_KEEP - 1) * sizeof f);
            l->nfailures--;
        }
        l->failures[l->nfailures++] = f;
    }
    cJSON_Delete(o);
}

const struct ledger_failure *ledger_find_failure(const struct ledger *l, const char *slug)
{
    for (size_t i = 0; i < l->nfailures; i++)
        if (strcmp(l->failures[i].slug, slug) == 0)
            return &l->failures[i];
    return NULL;
}

static cJSON *failure_json(const struct ledger_failure *f)
{
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddStringToObject(o, "tier", f->tier) ||
        !cJSON_AddStringToObject(o, "at", f->at) || !cJSON_AddStringToObject(o, "reason", f->reason) ||
        !cJSON_AddStringToObject(o, "message", f->message) ||
        !cJSON_AddStringToObject(o, "runner", f->runner)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

char *ledger_failures_with(const struct ledger *l, const struct ledger_failure *f,
                           int (*recorded)(void *ud, const char *slug), void *ud)
{
    struct ledger_failure all[LEDGER_FAILURES_KEEP + 1];
    size_t n = 0;
    for (size_t i = 0; i < l->nfailures; i++) {
        const char *slug = l->failures[i].slug;
        if (strcmp(slug, f->slug) != 0 && !ledger_find(l, slug) && !(recorded && recorded(ud, slug)))
            all[n++] = l->failures[i];
    }
    all[n] = *f;
    utf8_clip(all[n].message);
    n++;
    size_t from = n > LEDGER_FAILURES_KEEP ? n - LEDGER_FAILURES_KEEP : 0;
    cJSON *o = cJSON_CreateObject();
    for (size_t i = from; o && i < n; i++) {
        cJSON *e = failure_json(&all[i]);
        if (!e || !cJSON_AddItemToObject(o, all[i].slug, e)) {
            cJSON_Delete(e);
            cJSON_Delete(o);
            o = NULL;
        }
    }
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    char *out = text ? strdup(text) : NULL;
    cJSON_free(text);
    return out;
}

static void mark_nul_cb(void *ud, const char *key, size_t klen)
{
    mark_nul(ud, key, klen);
}

/* Each data value of the object text that holds a NUL byte: its record
 * (or `version`) is unreadable. */
void ledger_mark_nul(const char *body, size_t len, struct ledger *l)
{
    configmap_nul_values(body, len, mark_nul_cb, l);
}

int ledger_parse(const cJSON *cm, struct ledger *l, struct buf *err)
{
    memset(l, 0, sizeof *l);
    l->exists = 1;
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(cm, "metadata");
    const cJSON *uid = cJSON_GetObjectItemCaseSensitive(meta, "uid");
    if (cJSON_IsString(uid))
        snprintf(l->uid, sizeof l->uid, "%s", uid->valuestring);
    const cJSON *label = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(meta, "labels"), NO_DELETE_LABEL);
    const cJSON *keep = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(meta, "annotations"), KEEP_ANNOTATION);
    l->protected_ = cJSON_IsString(label) && strcmp(label->valuestring, "true") == 0 &&
                    cJSON_IsString(keep) && strcmp(keep->valuestring, "keep") == 0;
    const cJSON *failed = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(meta, "annotations"), FAILURES_ANNOTATION);
    if (cJSON_IsString(failed)) {
        failures_of(failed->valuestring, l);
        l->failures_bytes = strlen(FAILURES_ANNOTATION) + strlen(failed->valuestring);
        l->bytes += l->failures_bytes;
    }
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(cm, "data");
    const cJSON *kv;
    /* One allocation for every record, counted first. */
    size_t cap = 0;
    cJSON_ArrayForEach(kv, data)
        if (cJSON_IsString(kv) && strncmp(kv->string, PREFIX, strlen(PREFIX)) == 0)
            cap++;
    if (cap && !(l->e = malloc(cap * sizeof *l->e))) {
        buf_setf(err, "out of memory");
        return -1;
    }
    cJSON_ArrayForEach(kv, data) {
        if (!cJSON_IsString(kv))
            continue;
        size_t kvbytes = strlen(kv->string) + strlen(kv->valuestring);
        l->bytes += kvbytes;
        if (strcmp(kv->string, "version") == 0) {
            /* A plain decimal within what any legacy map can mean; anything
             * else is reported (with every other bad key) by the planner. */
            long n;
            if (parse_decimal(kv->valuestring, LEGACY_NUMBER_MAX + 1L, &n) != 0) {
                l->version_bad = 1;
                quote_for_message(kv->valuestring, l->version_raw, sizeof l->version_raw);
                continue;
            }
            l->has_version = 1;
            l->version = n;
            continue;
        }
        if (strncmp(kv->string, PREFIX, strlen(PREFIX)) != 0)
            continue;
        struct ledger_entry *ne = l->e;
        if (!(ne[l->n].slug = strdup(kv->string + strlen(PREFIX)))) {
            buf_setf(err, "out of memory");
            ledger_free(l);
            return -1;
        }
        ne[l->n].bytes = kvbytes;
        record_parse(kv->valuestring, strlen(kv->valuestring), &ne[l->n].rec);
        /* m.<anything but a slug> is no record the engine writes, and no
         * --only or skip can name it. */
        if (!slug_valid(ne[l->n].slug)) {
            ne[l->n].rec.state = REC_UNKNOWN;
            snprintf(ne[l->n].rec.problem, sizeof ne[l->n].rec.problem,
                     "not a record key: '%.60s' is not a slug", ne[l->n].slug);
        }
        l->n++;
    }
    /* The engine reads data alone: a key kept in binaryData is one it
     * would not see (a record, or `version`), so the ledger is refused. */
    const cJSON *bin = cJSON_GetObjectItemCaseSensitive(cm, "binaryData");
    cJSON_ArrayForEach(kv, bin) {
        if (!l->binary_keys++ && kv->string)
            snprintf(l->binary_key, sizeof l->binary_key, "%s", kv->string);
    }
    l->sorted = 1;
    for (size_t i = 1; i < l->n && l->sorted; i++)
        l->sorted = strcmp(l->e[i - 1].slug, l->e[i].slug) < 0;
    return 0;
}

/* {"m.<slug>": "<record>", ...}, or NULL when out of memory. */
cJSON *ledger_records_data(const struct ledger_entry *e, size_t n, size_t *bytes)
{
    cJSON *d = cJSON_CreateObject();
    size_t total = 0;
    for (size_t i = 0; d && i < n; i++) {
        char key[128];
        snprintf(key, sizeof key, PREFIX "%s", e[i].slug);
        char *v = record_format(&e[i].rec);
        if (!v || !cJSON_AddStringToObject(d, key, v)) {
            cJSON_Delete(d);
            d = NULL;
        }
        total += ledger_key_bytes(e[i].slug) + (v ? strlen(v) : 0);
        free(v);
    }
    if (bytes)
        *bytes = d ? total : 0;
    return d;
}

size_t ledger_key_bytes(const char *slug) { return strlen(PREFIX) + strlen(slug); }

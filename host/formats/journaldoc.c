/* journaldoc.c: the write journal as a document (see journaldoc.h). Owns
 * its JSON form (writes, changed, unknown, entries, more, truncated), reading
 * a log another process wrote without trusting a count or a string past its
 * bounds, and cutting the JSON to a size with a marker and the true counts.
 * Knows nothing of requests: door/journal.c records the writes.
 * Prefixes: journal_ (the journal document, as journaldoc.h names it). */
#include "formats/journaldoc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "fields": ["path: old -> new", ...] from the newline-separated text. */
static int add_fields(cJSON *x, const char *text)
{
    cJSON *arr = cJSON_AddArrayToObject(x, "fields");
    if (!arr)
        return 0;
    for (const char *p = text; *p;) {
        size_t n = strcspn(p, "\n");
        cJSON *line = cJSON_CreateString("");
        char *copy = malloc(n + 1);
        if (!line || !copy || !cJSON_AddItemToArray(arr, line)) {
            cJSON_Delete(line);
            free(copy);
            return 0;
        }
        memcpy(copy, p, n);
        copy[n] = '\0';
        cJSON_SetValuestring(line, copy);
        free(copy);
        p += n + (p[n] == '\n');
    }
    return 1;
}

static cJSON *log_json(const struct journal_log *j);

void journal_log_read(struct journal_log *j, const struct journal_log *shared)
{
    /* Another process wrote it: read a copy, and trust no count or string
     * beyond its bounds. */
    memcpy(j, shared, sizeof *j);
    if (j->kept > JOURNAL_KEEP)
        j->kept = JOURNAL_KEEP;
    if (j->writes < j->kept)
        j->writes = j->kept;
    if (j->changed > j->writes)
        j->changed = j->writes;
    if (j->unknown > j->writes - j->changed)
        j->unknown = j->writes - j->changed;
    /* no more than a pool holds, and the one sent alone */
    if (j->pending > 1024)
        j->pending = 1024;
    for (size_t i = 0; i < j->kept; i++) {
        struct journal_entry *e = &j->e[i];
        e->verb[sizeof e->verb - 1] = e->resource[sizeof e->resource - 1] = '\0';
        e->ns[sizeof e->ns - 1] = e->name[sizeof e->name - 1] = '\0';
        e->fields[sizeof e->fields - 1] = e->cluster[sizeof e->cluster - 1] = '\0';
        if (e->changed < -1 || e->changed > 1)
            e->changed = -1;
    }
}

cJSON *journal_log_json(const struct journal_log *shared)
{
    if (!shared || !shared->active)
        return NULL;
    struct journal_log *j = malloc(sizeof *j);
    if (!j)
        return NULL;
    journal_log_read(j, shared);
    cJSON *o = log_json(j);
    free(j);
    return o;
}

void journal_log_counts(const struct journal_log *j, size_t *writes, size_t *changed)
{
    *writes = j->writes + j->pending;
    *changed = j->changed;
}

static cJSON *log_json(const struct journal_log *j)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(o, "entries");
    size_t unknown = j->unknown + j->pending;
    if (!o || !arr || !cJSON_AddNumberToObject(o, "writes", (double)(j->writes + j->pending)) ||
        !cJSON_AddNumberToObject(o, "changed", (double)j->changed) ||
        (unknown && !cJSON_AddNumberToObject(o, "unknown", (double)unknown)) ||
        (j->pending && !cJSON_AddNumberToObject(o, "unanswered", (double)j->pending)) ||
        (j->writes > j->kept && !cJSON_AddNumberToObject(o, "more", (double)(j->writes - j->kept)))) {
        cJSON_Delete(o);
        return NULL;
    }
    for (size_t i = 0; i < j->kept; i++) {
        const struct journal_entry *e = &j->e[i];
        cJSON *x = cJSON_CreateObject();
        if (!x || !cJSON_AddItemToArray(arr, x) || !cJSON_AddStringToObject(x, "verb", e->verb) ||
            !cJSON_AddStringToObject(x, "resource", e->resource) ||
            (*e->ns && !cJSON_AddStringToObject(x, "namespace", e->ns)) ||
            !cJSON_AddStringToObject(x, "name", e->name) ||
            (*e->cluster && !cJSON_AddStringToObject(x, "cluster", e->cluster)) ||
            !cJSON_AddNumberToObject(x, "status", (double)e->status) ||
            !(e->changed < 0 ? cJSON_AddNullToObject(x, "changed")
                             : cJSON_AddBoolToObject(x, "changed", e->changed)) ||
            (e->dry_run && !cJSON_AddTrueToObject(x, "dry_run")) ||
            (*e->fields && !add_fields(x, e->fields))) {
            cJSON_Delete(o);
            return NULL;
        }
    }
    return o;
}

void journal_summary(size_t writes, size_t changed, char *buf, size_t len)
{
    snprintf(buf, len, "%zu write%s, %zu changed", writes, writes == 1 ? "" : "s", changed);
}

/* The length of a tree's compact text, NUL included; 0 when out of memory. */
static size_t printed_size(const cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    size_t n = s ? strlen(s) + 1 : 0;
    cJSON_free(s);
    return n;
}

cJSON *journal_fit(const cJSON *journal, size_t cap)
{
    cJSON *o = cJSON_IsObject(journal) ? cJSON_Duplicate(journal, 1) : NULL;
    cJSON *entries = cJSON_GetObjectItemCaseSensitive(o, "entries");
    if (!cJSON_IsObject(o) || !cJSON_IsArray(entries)) {
        cJSON_Delete(o);
        return NULL;
    }
    size_t n = printed_size(o);
    while (n > cap && cJSON_GetArraySize(entries) > 0) {
        /* Halve what is over rather than one entry at a time: a journal of
         * 50 large entries fits in a few steps. */
        int k = cJSON_GetArraySize(entries), cut = k > 8 ? k / 4 : 1;
        for (int i = 0; i < cut; i++)
            cJSON_DeleteItemFromArray(entries, cJSON_GetArraySize(entries) - 1);
        const cJSON *more = cJSON_GetObjectItemCaseSensitive(o, "more");
        double was = cJSON_IsNumber(more) ? more->valuedouble : 0;
        cJSON_DeleteItemFromObjectCaseSensitive(o, "more");
        cJSON_DeleteItemFromObjectCaseSensitive(o, "truncated");
        if (!cJSON_AddNumberToObject(o, "more", was + cut) || !cJSON_AddTrueToObject(o, "truncated")) {
            cJSON_Delete(o);
            return NULL;
        }
        n = printed_size(o);
    }
    if (!n || n > cap) {
        /* Not even the counts fit: no journal at all beats a broken one. */
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

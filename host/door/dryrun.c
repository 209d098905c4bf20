/* dryrun.c: reports what a dry-run request would change.
 *
 * Owns the comparison of an object before a write with the apiserver's
 * dryRun=All answer (so server-side defaulting and merge semantics are the
 * apiserver's, not a guess), ignoring the bookkeeping fields every write
 * moves, as text for the caller to show (this file prints nothing). Must
 * never send anything: the kube module has already made both requests. */
#include "door/dryrun.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MAX_FIELDS 20

static int ignored(const char *path)
{
    static const char *const skip[] = {"metadata.resourceVersion", "metadata.managedFields",
                                       "metadata.generation", "metadata.uid",
                                       "metadata.creationTimestamp", NULL};
    for (const char *const *s = skip; *s; s++)
        if (strcmp(path, *s) == 0)
            return 1;
    return 0;
}

struct diff {
    char *out;
    size_t cap, len;
    int n, max;
};

static void add(struct diff *d, const char *path, const cJSON *from, const cJSON *to)
{
    d->n++;
    if (d->n > d->max || d->len + 1 >= d->cap)
        return;
    char *a = from ? cJSON_PrintUnformatted(from) : NULL;
    char *b = to ? cJSON_PrintUnformatted(to) : NULL;
    int w = snprintf(d->out + d->len, d->cap - d->len, "%s%s: %.60s -> %.60s", d->len ? "\n" : "",
                     *path ? path : ".", a ? a : "(absent)", b ? b : "(absent)");
    cJSON_free(a);
    cJSON_free(b);
    if (w > 0)
        d->len += (size_t)w < d->cap - d->len ? (size_t)w : d->cap - d->len - 1;
}

static void walk(struct diff *d, const cJSON *a, const cJSON *b, char *path, size_t pcap)
{
    if (ignored(path))
        return;
    /* A map that appears or disappears is reported leaf by leaf. */
    int ao = cJSON_IsObject(a) && cJSON_GetArraySize(a) > 0;
    int bo = cJSON_IsObject(b) && cJSON_GetArraySize(b) > 0;
    if ((a && b && cJSON_IsObject(a) && cJSON_IsObject(b)) || (!a && bo) || (!b && ao)) {
        size_t pl = strlen(path);
        const cJSON *x;
        cJSON_ArrayForEach(x, a) {
            snprintf(path + pl, pcap - pl, "%s%s", pl ? "." : "", x->string);
            walk(d, x, b ? cJSON_GetObjectItemCaseSensitive(b, x->string) : NULL, path, pcap);
        }
        cJSON_ArrayForEach(x, b) {
            if (a && cJSON_GetObjectItemCaseSensitive(a, x->string))
                continue;
            snprintf(path + pl, pcap - pl, "%s%s", pl ? "." : "", x->string);
            walk(d, NULL, x, path, pcap);
        }
        path[pl] = '\0';
        return;
    }
    if (!a || !b || !cJSON_Compare(a, b, 1))
        add(d, path, a, b);
}

/* Collects up to max differing leaf paths ("metadata.labels.app") between
 * a and b into out (newline separated). Returns how many differ in total. */
static int dryrun_diff(const cJSON *a, const cJSON *b, char *out, size_t cap, int max)
{
    char path[1024] = "";
    struct diff d = {.out = out, .cap = cap, .max = max};
    if (cap)
        out[0] = '\0';
    walk(&d, a, b, path, sizeof path);
    return d.n;
}

/* "/api/v1/namespaces/ns/configmaps/name" -> "configmaps ns/name" */
static void describe(const char *path, const char *new_name, char *buf, size_t cap)
{
    char p[1024];
    snprintf(p, sizeof p, "%s", path);
    char *q = strchr(p, '?');
    if (q)
        *q = '\0';
    const char *seg[16];
    int n = 0;
    for (char *save = NULL, *t = strtok_r(p, "/", &save); t && n < 16; t = strtok_r(NULL, "/", &save))
        seg[n++] = t;
    int i = (n > 0 && strcmp(seg[0], "api") == 0) ? 2 : 3; /* skip api/v1 or apis/g/v */
    const char *ns = NULL;
    if (i + 1 < n && strcmp(seg[i], "namespaces") == 0 && i + 2 < n) {
        ns = seg[i + 1];
        i += 2;
    }
    if (i >= n) {
        snprintf(buf, cap, "%s", path);
        return;
    }
    const char *res = seg[i], *name = i + 1 < n ? seg[i + 1] : new_name;
    const char *sub = i + 2 < n ? seg[i + 2] : NULL;
    snprintf(buf, cap, "%s%s%s %s%s%s", res, sub ? "/" : "", sub ? sub : "", ns ? ns : "",
             ns ? "/" : "", name ? name : "(unnamed)");
}

/* Appends one line to the report (cut when it is full). */
static void line(char *out, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void line(char *out, size_t cap, size_t *len, const char *fmt, ...)
{
    if (*len + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(out + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (w < 0)
        return;
    *len += (size_t)w < cap - *len ? (size_t)w : cap - *len - 1;
    if (*len + 1 < cap) {
        out[(*len)++] = '\n';
        out[*len] = '\0';
    }
}

int dryrun_report(const char *method, const char *path, const cJSON *before, const cJSON *after,
                  char *report, size_t report_cap, char *fields_out, size_t cap)
{
    size_t rl = 0;
    if (report_cap)
        *report = '\0';
    if (cap)
        *fields_out = '\0';
    char what[600];
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(after, "metadata"), "name");
    describe(path, cJSON_IsString(name) ? name->valuestring : NULL, what, sizeof what);
    const char *verb = strcmp(method, "POST") == 0     ? "create"
                       : strcmp(method, "DELETE") == 0 ? "delete"
                       : strcmp(method, "PUT") == 0    ? "replace"
                                                       : "patch";
    if (strcmp(method, "DELETE") == 0) {
        line(report, report_cap, &rl, "dry-run: would delete %s", what);
        return 1;
    }
    if (strcmp(method, "POST") == 0 || !before) {
        line(report, report_cap, &rl, "dry-run: would create %s", what);
        return 1;
    }
    char fields[4096];
    int n = dryrun_diff(before, after, fields, sizeof fields, MAX_FIELDS);
    if (n == 0) {
        line(report, report_cap, &rl, "dry-run: %s %s: no change", verb, what);
        return 0;
    }
    snprintf(fields_out, cap, "%s", fields);
    line(report, report_cap, &rl, "dry-run: would %s %s, %d field%s:", verb, what, n,
         n == 1 ? "" : "s");
    for (char *save = NULL, *l = strtok_r(fields, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        line(report, report_cap, &rl, "  %s", l);
    if (n > MAX_FIELDS)
        line(report, report_cap, &rl, "  ... and %d more", n - MAX_FIELDS);
    return n;
}

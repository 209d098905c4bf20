/* chartcheck.c: `index --check-chart` (chartcheck.h): a platform chart's
 * rendering, one YAML document at a time, checked for what the engine
 * needs of the chart around it. Split on helm's document lines ("---"),
 * each document parsed whole with the project's YAML reader; the index
 * ConfigMap read and compared by formats/indexdoc.c. */
#include "release/chartcheck.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/util.h"
#include "formats/yamldoc.h"

struct doc_at {
    const char *file;
    int n;                  /* 1-based document number */
    char source[160];       /* helm's "# Source: PATH", or "" */
};

static const char *str_of(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void problem(const struct doc_at *d, long *n, const char *what, const char *name, const char *why)
{
    out_line("%s: document %d%s%s%s: %s %s: %s", d->file, d->n, *d->source ? " (" : "", d->source,
             *d->source ? ")" : "", what, name, why);
    (*n)++;
}

static void say_index(void *ud, const char *line)
{
    const struct doc_at *d = ud;
    out_line("%s: document %d (%s): the index: %s", d->file, d->n, d->source, line);
}

/* Whether a Job is a pre-install or pre-upgrade hook, and whether it is
 * the engine's: its container gets the index the render gate used (env
 * MIGRATIONS_INDEX), or it is the snippet's stand-in for a replaced hook
 * (annotation platform.cozystack.io/replaces). */
static int foreign_hook(const cJSON *job)
{
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(job, "metadata"),
                                                        "annotations");
    const char *hook = str_of(ann, "helm.sh/hook");
    if (!hook || (!strstr(hook, "pre-install") && !strstr(hook, "pre-upgrade")))
        return 0;
    if (str_of(ann, "platform.cozystack.io/replaces"))
        return 0;
    const cJSON *pod = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(job, "spec"), "template"),
        "spec");
    const cJSON *c, *e;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(pod, "containers"))
    {
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(c, "env"))
        {
            const char *n = str_of(e, "name");
            if (n && strcmp(n, INDEX_ENV) == 0)
                return 0;
        }
    }
    return 1;
}

/* Whether [s, e) holds more than blank lines and comments. */
static int has_content(const char *s, const char *e)
{
    while (s < e) {
        while (s < e && (*s == ' ' || *s == '\t'))
            s++;
        if (s < e && *s != '\n' && *s != '#')
            return 1;
        while (s < e && *s != '\n')
            s++;
        s++;
    }
    return 0;
}

/* One document: its problems added to *n, an index found counted in
 * *indexes. 0, or -1 with err (it does not parse). */
static int check_doc(struct doc_at *d, const char *text, size_t len, const struct index *want,
                     const char *ledger, const char *tree, long *n, int *indexes, struct buf *err)
{
    const char *src = strstr(text, "# Source: ");
    if (src && (src == text || src[-1] == '\n'))
        snprintf(d->source, sizeof d->source, "%.*s", (int)strcspn(src + 10, "\n"), src + 10);
    char name[64];
    snprintf(name, sizeof name, "%s document %d", d->file, d->n);
    struct yaml_doc y;
    if (yaml_load_single(name, text, len, &y, err) != 0)
        return -1;
    const cJSON *o = y.root;
    const char *kind = str_of(o, "kind");
    const char *nm = str_of(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "name");
    if (kind && nm && strcmp(kind, "ConfigMap") == 0 && strcmp(nm, ledger) == 0)
        problem(d, n, "ConfigMap", nm,
                "the chart renders the ledger; the engine's hook creates it (on a fresh install "
                "both would, and Helm fails with AlreadyExists): delete the template, the live "
                "ledger stays by its keep annotation (docs/shipping.md, \"Replacing a numbered "
                "hook\")");
    if (kind && nm && strcmp(kind, "Job") == 0 && foreign_hook(o))
        problem(d, n, "Job", nm,
                "a pre-install/pre-upgrade hook that is not the engine's (it would run beside "
                "it): delete the old hook's template, and name its Job, ServiceAccount and "
                "binding in migrations.replaces (docs/shipping.md, \"Replacing a numbered hook\")");
    if (kind && nm && strcmp(kind, "ConfigMap") == 0 && strcmp(nm, INDEX_NAME) == 0) {
        struct index got;
        if (index_from_configmap(name, o, NULL, 0, &got, err) != 0) {
            yaml_doc_free(&y);
            return -1;
        }
        (*indexes)++;
        *n += (long)index_compare(&got, want, tree, say_index, d);
        index_free(&got);
    }
    yaml_doc_free(&y);
    return 0;
}

long chart_check(const char *file, const struct index *want, const char *ledger, const char *tree,
                 struct buf *err)
{
    size_t len;
    char *text = util_read_file(file, &len);
    if (!text) {
        buf_setf(err, "%s: cannot be read", file);
        return -1;
    }
    if (memchr(text, '\0', len)) {
        buf_setf(err, "%s: a NUL byte at byte %zu", file,
                 (size_t)((char *)memchr(text, '\0', len) - text));
        free(text);
        return -1;
    }
    long n = 0;
    int indexes = 0, docno = 0;
    char *start = text;
    for (char *p = text;; p++) {
        int end = *p == '\0';
        int sep = !end && (p == text || p[-1] == '\n') && strncmp(p, "---", 3) == 0 &&
                  (p[3] == '\n' || p[3] == '\0' || p[3] == ' ');
        if (!end && !sep)
            continue;
        /* the document [start, p): skipped when only blank lines and comments */
        size_t dlen = (size_t)(p - start);
        int content = has_content(start, p);
        if (content) {
            char saved = *p;
            *p = '\0';
            struct doc_at d = {.file = file, .n = ++docno};
            int rc = check_doc(&d, start, dlen, want, ledger, tree, &n, &indexes, err);
            *p = saved;
            if (rc != 0) {
                free(text);
                return -1;
            }
        }
        if (end)
            break;
        p += 3;
        start = p;
    }
    free(text);
    if (!indexes) {
        out_line("%s: renders no ConfigMap %s: the snippet's templates are not in the chart, or "
                 "migrations.enabled is false in this rendering", file, INDEX_NAME);
        n++;
    }
    return n;
}

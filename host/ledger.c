/* ledger.c: reads and writes the ledger ConfigMap.
 *
 * Owns the ledger's wire shape: `version` (read only) and `m.<slug>` records;
 * the fresh-install create with its no-delete label and keep annotation; and
 * merge patches of `data.m.*`. Must never read-modify-write the object, use
 * client-side apply, write `version`, or delete a key: legacy scripts still
 * `kubectl apply` the `version` key, and keys written by merge patch are not
 * in last-applied-configuration, so they survive that apply. */
#include "ledger.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define PREFIX "m."

void ledger_free(struct ledger *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->e[i].slug);
    free(l->e);
    memset(l, 0, sizeof *l);
}

const struct record *ledger_find(const struct ledger *l, const char *slug)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->e[i].slug, slug) == 0)
            return &l->e[i].rec;
    return NULL;
}

int ledger_parse(const cJSON *cm, struct ledger *l, char *err, size_t errlen)
{
    memset(l, 0, sizeof *l);
    l->exists = 1;
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(cm, "metadata");
    const cJSON *uid = cJSON_GetObjectItemCaseSensitive(meta, "uid");
    if (cJSON_IsString(uid))
        snprintf(l->uid, sizeof l->uid, "%s", uid->valuestring);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(cm, "data");
    const cJSON *kv;
    cJSON_ArrayForEach(kv, data) {
        if (!cJSON_IsString(kv))
            continue;
        l->bytes += strlen(kv->string) + strlen(kv->valuestring);
        if (strcmp(kv->string, "version") == 0) {
            const char *v = kv->valuestring;
            char *end;
            long n = strtol(v, &end, 10);
            while (*end == ' ' || *end == '\n')
                end++;
            if (!*v || *end || n < 0) {
                snprintf(err, errlen, "key 'version' is \"%.40s\", not a non-negative integer", v);
                ledger_free(l);
                return -1;
            }
            l->has_version = 1;
            l->version = n;
            continue;
        }
        if (strncmp(kv->string, PREFIX, strlen(PREFIX)) != 0)
            continue;
        struct ledger_entry *ne = realloc(l->e, (l->n + 1) * sizeof *ne);
        if (!ne) {
            snprintf(err, errlen, "out of memory");
            ledger_free(l);
            return -1;
        }
        l->e = ne;
        if (!(ne[l->n].slug = strdup(kv->string + strlen(PREFIX)))) {
            snprintf(err, errlen, "out of memory");
            ledger_free(l);
            return -1;
        }
        record_parse(kv->valuestring, &ne[l->n].rec);
        l->n++;
    }
    return 0;
}

static void cm_path(char *buf, size_t n, const char *ns, const char *name)
{
    snprintf(buf, n, "/api/v1/namespaces/%s/configmaps%s%s", ns, name ? "/" : "", name ? name : "");
}

int ledger_read(struct rest_client *c, const char *ns, const char *name, struct ledger *l,
                long *code, char *err, size_t errlen)
{
    char path[512];
    cm_path(path, sizeof path, ns, name);
    struct rest_result r;
    memset(l, 0, sizeof *l);
    *code = 0;
    if (rest_do(c, "GET", path, NULL, NULL, NULL, 0, 1, 1e9, &r) != 0) {
        *code = r.err.code;
        if (r.err.code == 404) {
            rest_result_free(&r);
            return 0;
        }
        char m[2300];
        rest_error_string(&r.err, m, sizeof m);
        snprintf(err, errlen, "reading the ledger %s/%s: %s", ns, name, m);
        rest_result_free(&r);
        return -1;
    }
    char why[256];
    int rc = r.json ? ledger_parse(r.json, l, why, sizeof why) : -1;
    if (!r.json)
        snprintf(why, sizeof why, "the response is not JSON");
    if (rc != 0) {
        *code = -2;
        snprintf(err, errlen, "ledger %s/%s: %s", ns, name, why);
    }
    rest_result_free(&r);
    return rc;
}

static int send(struct rest_client *c, const char *method, const char *path, const char *ctype,
                cJSON *body, char *err, size_t errlen, long *code)
{
    char *s = cJSON_PrintUnformatted(body);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    struct rest_result r;
    /* A merge patch of whole string values is idempotent; a create is not,
     * and its AlreadyExists is handled by the caller re-reading. */
    int rc = rest_do(c, method, path, NULL, ctype, s, strlen(s), strcmp(method, "PATCH") == 0,
                     1e9, &r);
    free(s);
    *code = rc == 0 ? r.status : r.err.code;
    if (rc != 0) {
        char m[2300];
        rest_error_string(&r.err, m, sizeof m);
        snprintf(err, errlen, "%s", m);
    }
    rest_result_free(&r);
    return rc;
}

int ledger_create(struct rest_client *c, const char *ns, const char *name, const cJSON *data,
                  char *err, size_t errlen)
{
    cJSON *cm = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(cm, "metadata");
    cJSON *labels = cJSON_AddObjectToObject(meta, "labels");
    cJSON *ann = cJSON_AddObjectToObject(meta, "annotations");
    cJSON *d = cJSON_Duplicate(data, 1);
    if (!cm || !meta || !labels || !ann || !d ||
        !cJSON_AddStringToObject(cm, "apiVersion", "v1") ||
        !cJSON_AddStringToObject(cm, "kind", "ConfigMap") ||
        !cJSON_AddStringToObject(meta, "name", name) ||
        !cJSON_AddStringToObject(meta, "namespace", ns) ||
        !cJSON_AddStringToObject(labels, "platform.cozystack.io/no-delete", "true") ||
        !cJSON_AddStringToObject(ann, "helm.sh/resource-policy", "keep") ||
        !cJSON_AddItemToObject(cm, "data", d)) {
        cJSON_Delete(cm);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    char path[512];
    cm_path(path, sizeof path, ns, NULL);
    long code;
    int rc = send(c, "POST", path, "application/json", cm, err, errlen, &code);
    cJSON_Delete(cm);
    if (rc != 0 && code == 409)
        return 1;
    return rc;
}

int ledger_patch(struct rest_client *c, const char *ns, const char *name, const cJSON *data,
                 char *err, size_t errlen)
{
    cJSON *p = cJSON_CreateObject();
    cJSON *d = cJSON_Duplicate(data, 1);
    if (!p || !d || !cJSON_AddItemToObject(p, "data", d)) {
        cJSON_Delete(p);
        cJSON_Delete(d);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (cJSON_GetObjectItemCaseSensitive(d, "version")) {
        cJSON_Delete(p);
        snprintf(err, errlen, "refusing to write key 'version'");
        return -1;
    }
    char path[512];
    cm_path(path, sizeof path, ns, name);
    long code;
    int rc = send(c, "PATCH", path, "application/merge-patch+json", p, err, errlen, &code);
    cJSON_Delete(p);
    return rc;
}

int ledger_put(struct rest_client *c, const char *ns, const char *name, const char *slug,
               const struct record *r, char *err, size_t errlen)
{
    char *v = record_format(r);
    cJSON *d = cJSON_CreateObject();
    char key[128];
    snprintf(key, sizeof key, PREFIX "%s", slug);
    if (!v || !d || !cJSON_AddStringToObject(d, key, v)) {
        free(v);
        cJSON_Delete(d);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    free(v);
    int rc = ledger_patch(c, ns, name, d, err, errlen);
    cJSON_Delete(d);
    return rc;
}

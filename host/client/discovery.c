/* discovery.c: the apiserver's resource catalogue and kubectl-style names.
 *
 * Owns reading both discovery formats into one table and the matching rules
 * (plural, singular, short name, Kind case-insensitively, resource.group,
 * resource.version.group). Must never fetch or cache across processes: the
 * caller (lua/luakube_core.c) decides when to (re)fetch. */
#include "client/discovery.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/mem.h"

static char *dupstr(const char *s) { return strdup(s ? s : ""); }

static void free_res(struct api_resource *r)
{
    free(r->group);
    free(r->version);
    free(r->resource);
    free(r->singular);
    free(r->kind);
    for (size_t i = 0; i < r->nshort; i++)
        free(r->short_names[i]);
    free(r->short_names);
    for (size_t i = 0; i < r->nverbs; i++)
        free(r->verbs[i]);
    free(r->verbs);
}

void discovery_clear(struct discovery *d)
{
    for (size_t i = 0; i < d->n; i++)
        free_res(&d->res[i]);
    free(d->res);
    memset(d, 0, sizeof *d);
}

static char **str_array(const cJSON *a, size_t *n)
{
    *n = 0;
    int cnt = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0;
    if (cnt <= 0)
        return NULL;
    char **out = calloc((size_t)cnt, sizeof *out);
    if (!out)
        return NULL;
    const cJSON *e;
    cJSON_ArrayForEach(e, a) {
        if (cJSON_IsString(e) && (out[*n] = strdup(e->valuestring)))
            (*n)++;
    }
    return out;
}

static int add(struct discovery *d, const char *group, const char *version, int preferred,
               const char *resource, const char *singular, const char *kind, int namespaced,
               const cJSON *shorts, const cJSON *verbs)
{
    if (!resource || !*resource || strchr(resource, '/'))
        return 0; /* subresources are addressed through their parent */
    struct api_resource *nr = mem_grow(d->res, d->n + 1, sizeof *nr);
    if (!nr)
        return -1;
    d->res = nr;
    struct api_resource *r = &d->res[d->n];
    memset(r, 0, sizeof *r);
    r->group = dupstr(group);
    r->version = dupstr(version);
    r->resource = dupstr(resource);
    /* Older servers leave singularName empty; kubectl lower-cases the Kind. */
    r->singular = dupstr(singular && *singular ? singular : kind);
    for (char *p = r->singular; p && *p; p++)
        *p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
    r->kind = dupstr(kind);
    r->namespaced = namespaced;
    r->preferred = preferred;
    r->short_names = str_array(shorts, &r->nshort);
    r->verbs = str_array(verbs, &r->nverbs);
    if (!r->group || !r->version || !r->resource || !r->singular || !r->kind) {
        free_res(r);
        return -1;
    }
    d->n++;
    return 0;
}

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int discovery_add_aggregated(struct discovery *d, const cJSON *doc)
{
    const char *kind = jstr(doc, "kind");
    if (!kind || strcmp(kind, "APIGroupDiscoveryList") != 0)
        return -1;
    const cJSON *g;
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(doc, "items")) {
        const char *group = jstr(cJSON_GetObjectItemCaseSensitive(g, "metadata"), "name");
        int first = 1;
        const cJSON *v;
        cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(g, "versions")) {
            const char *version = jstr(v, "version");
            if (!version)
                continue;
            const cJSON *r;
            cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(v, "resources")) {
                const char *k = jstr(cJSON_GetObjectItemCaseSensitive(r, "responseKind"), "kind");
                const char *scope = jstr(r, "scope");
                if (add(d, group ? group : "", version, first, jstr(r, "resource"),
                        jstr(r, "singularResource"), k ? k : "",
                        scope && strcmp(scope, "Namespaced") == 0,
                        cJSON_GetObjectItemCaseSensitive(r, "shortNames"),
                        cJSON_GetObjectItemCaseSensitive(r, "verbs")) != 0)
                    return -1;
            }
            first = 0; /* versions are listed in preference order */
        }
    }
    return 0;
}

int discovery_add_resource_list(struct discovery *d, const char *group, const char *version,
                                int preferred, const cJSON *doc)
{
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(doc, "resources")) {
        if (add(d, group, version, preferred, jstr(r, "name"), jstr(r, "singularName"),
                jstr(r, "kind"), cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "namespaced")),
                cJSON_GetObjectItemCaseSensitive(r, "shortNames"),
                cJSON_GetObjectItemCaseSensitive(r, "verbs")) != 0)
            return -1;
    }
    return 0;
}

static int plain_match(const struct api_resource *r, const char *name)
{
    if (strcasecmp(r->resource, name) == 0 || strcasecmp(r->singular, name) == 0 ||
        strcasecmp(r->kind, name) == 0)
        return 1;
    for (size_t i = 0; i < r->nshort; i++)
        if (strcasecmp(r->short_names[i], name) == 0)
            return 1;
    return 0;
}

/* Best of the candidates: a preferred version beats another version; among
 * equals the first in discovery order (the core group comes first). */
static const struct api_resource *pick(const struct discovery *d, const char *name,
                                       const char *group, const char *version)
{
    const struct api_resource *best = NULL;
    for (size_t i = 0; i < d->n; i++) {
        const struct api_resource *r = &d->res[i];
        if (group && strcmp(r->group, group) != 0)
            continue;
        if (version && strcmp(r->version, version) != 0)
            continue;
        if (group ? !(strcasecmp(r->resource, name) == 0 || strcasecmp(r->singular, name) == 0 ||
                      strcasecmp(r->kind, name) == 0)
                  : !plain_match(r, name))
            continue;
        if (!best || (r->preferred && !best->preferred))
            best = r;
    }
    return best;
}

const struct api_resource *discovery_resolve(const struct discovery *d, const char *name)
{
    if (!name || !*name)
        return NULL;
    const char *dot = strchr(name, '.');
    if (!dot)
        return pick(d, name, NULL, NULL);
    char res[256];
    size_t rl = (size_t)(dot - name);
    if (rl >= sizeof res)
        return NULL;
    memcpy(res, name, rl);
    res[rl] = '\0';
    const char *rest = dot + 1;
    /* resource.version.group, when the part after the first dot is a served
     * version of the group that follows it. */
    const char *dot2 = strchr(rest, '.');
    if (dot2) {
        char ver[64];
        size_t vl = (size_t)(dot2 - rest);
        if (vl < sizeof ver) {
            memcpy(ver, rest, vl);
            ver[vl] = '\0';
            const struct api_resource *r = pick(d, res, dot2 + 1, ver);
            if (r)
                return r;
        }
    }
    const struct api_resource *r = pick(d, res, rest, NULL);
    if (r)
        return r;
    /* "deployments.v1" names the version of the core group only. */
    return pick(d, res, "", rest);
}

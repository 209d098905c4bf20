/* discovery.h: what resources the apiserver serves, and what a kubectl-style
 * name ("cm", "ConfigMap", "deploy", "helmreleases.helm.toolkit.fluxcd.io",
 * "deployments.v1.apps") means on it. Owns parsing discovery documents
 * (aggregated v2/v2beta1, and the legacy per-group-version lists) and the
 * name-resolution rules. Holds no connection: the caller fetches. */
#ifndef COZY_DISCOVERY_H
#define COZY_DISCOVERY_H
#include <cjson/cJSON.h>
#include <stddef.h>

struct api_resource {
    char *group;        /* "" for the core group */
    char *version;
    char *resource;     /* plural, lower case */
    char *singular;
    char *kind;
    char **short_names;
    size_t nshort;
    int namespaced;
    int preferred;      /* this version is the group's preferred one */
    char **verbs;
    size_t nverbs;
};

struct discovery {
    struct api_resource *res;
    size_t n;
};

/* Adds the resources of an aggregated discovery document (APIGroupDiscoveryList).
 * Returns 0, or -1 when the document is not one. */
int discovery_add_aggregated(struct discovery *d, const cJSON *doc);
/* Legacy: an APIResourceList for group/version. preferred says whether that
 * version is the group's preferred one. */
int discovery_add_resource_list(struct discovery *d, const char *group, const char *version,
                                int preferred, const cJSON *doc);
void discovery_clear(struct discovery *d);

/* Resolves a name as kubectl does. Returns the resource or NULL when nothing
 * matches. On an ambiguous plain name the preferred version of the first
 * group in discovery order wins (the core group first), as kubectl does. */
const struct api_resource *discovery_resolve(const struct discovery *d, const char *name);
#endif

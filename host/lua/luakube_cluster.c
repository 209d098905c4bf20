/* luakube_cluster.c: `kube` for a cluster the platform hosts (a tenant
 * cluster), reached through its kubeconfig Secret in the management
 * cluster (Kamaji's admin kubeconfig).
 *
 * Owns opening such a client: reading the Secret with the state's own
 * client (through the same door as every read), parsing the kubeconfig it
 * holds in memory (kubeconfig_from_secret: inline credentials only, never
 * a file, never written anywhere), opening its connection with the
 * options' retry policy, and a first request (GET /version) so that a
 * cluster that is down, or refuses the credential, is an error value the
 * script can branch on, named with the Secret, before any verb runs. The
 * client is a userdata no script reaches: the verbs stdlib/kube.lua builds
 * for it are kube.core's own functions bound to it as their upvalue, so
 * every request passes the same door (guard, dry run, deadline, retries)
 * and the journal entries it makes name the cluster. Also lists the
 * Secrets a label selector picks (their names and labels only: no
 * Secret's data ever becomes a Lua value). */
#include "lua/luakube_int.h"

#include <lauxlib.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/util.h"
#include "client/apipath.h"
#include "door/door.h"
#include "client/kubeconfig.h"
#include "client/options.h"
#include "lua/luajson.h"

#define PROBE_S_DEFAULT 10.0

/* A namespace or object name as the apiserver allows it (a DNS
 * subdomain): nothing that could steer the path elsewhere. */
static int dns_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' || *s == '.'))
            return 0;
    return 1;
}

/* A Secret's data key: [-._a-zA-Z0-9]+, as the apiserver validates it. */
static int data_key(const char *s)
{
    if (!*s || strlen(s) > 253)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '-' || *s == '.' || *s == '_'))
            return 0;
    return 1;
}

/* Pushes nil and an error value naming the Secret (fields cluster and
 * secret besides the usual ones). May raise (memory). */
static int failed(lua_State *L, long code, const char *reason, const char *message,
                  const char *path, const char *ns, const char *name, const char *key)
{
    lua_pushnil(L);
    luakube_push_error(L, code, reason, message, NULL, "cluster", "GET", path);
    lua_pushfstring(L, "%s/%s", ns, name);
    lua_setfield(L, -2, "cluster");
    lua_createtable(L, 0, 3);
    lua_pushstring(L, ns);
    lua_setfield(L, -2, "namespace");
    lua_pushstring(L, name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, key);
    lua_setfield(L, -2, "key");
    lua_setfield(L, -2, "secret");
    return 2;
}

/* A REST error's reason, message and code copied out (it owns memory and
 * what follows may raise), then released. */
struct copied {
    long code;
    char reason[64];
    char message[2400];
};

static void copy_error(struct copied *c, struct rest_error *e, const char *what)
{
    c->code = e->code;
    snprintf(c->reason, sizeof c->reason, "%s", *e->reason ? e->reason : "ConnectionError");
    snprintf(c->message, sizeof c->message, "%s: %s", what, e->message);
    utf8_clip(c->message);
    rest_error_free(e);
}

/* The verbs' C functions, bound to the client at index t. */
static void push_bound(lua_State *L, int t)
{
    static const luaL_Reg fns[] = {
        {"request", luakube_l_request},
        {"resolve", luakube_l_resolve},
        {"config", luakube_l_config},
        {"default_namespace", luakube_l_default_namespace},
        {"requests", luakube_l_requests},
        {"connects", luakube_l_connects},
        {NULL, NULL},
    };
    lua_createtable(L, 0, 6);
    for (const luaL_Reg *f = fns; f->name; f++) {
        lua_pushvalue(L, t);
        lua_pushcclosure(L, f->func, 1);
        lua_setfield(L, -2, f->name);
    }
}

/* private.cluster(namespace, name, key [, probe_seconds]) -> {request=,
 * resolve=, config=, default_namespace=, requests=, connects=} bound to the
 * tenant's client | nil, err. err names the Secret (err.cluster "NS/NAME",
 * err.secret {namespace=, name=, key=}); its reason: the apiserver's
 * (NotFound, Forbidden) when the Secret cannot be read, BadKubeconfig when
 * what it holds cannot be used, and the first request's (ConnectionError,
 * Timeout, Unauthorized...) when the cluster does not answer as it should.
 * May raise (misuse, memory). */
int luakube_l_cluster(lua_State *L)
{
    struct host_ctx *hc = host_ctx(L);
    const char *ns = luaL_checkstring(L, 1), *name = luaL_checkstring(L, 2);
    const char *key = luaL_checkstring(L, 3);
    double probe = luaL_optnumber(L, 4, PROBE_S_DEFAULT);
    if (!dns_name(ns) || !dns_name(name))
        return luaL_error(L, "kube.cluster: the Secret's namespace and name must be DNS names");
    if (!data_key(key))
        return luaL_error(L, "kube.cluster: key must be a Secret data key ([-._a-zA-Z0-9]+)");
    char path[600], what[600];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/secrets/%s", ns, name);
    snprintf(what, sizeof what, "tenant cluster of Secret %s/%s", ns, name);
    struct kube_client *home = luakube_client_of(L), *m = luakube_connect(home, hc);
    if (!m)
        return failed(L, 0, "ConfigError", home->init_err, path, ns, name, key);
    struct kube_client *t = luakube_new_client(L);
    int tidx = lua_gettop(L);
    t->home = home;
    snprintf(t->cluster, sizeof t->cluster, "%s/%s", ns, name);
    journal_attach(&t->journal, home->journal.log, t->cluster);

    struct rest_error e;
    struct copied ce;
    cJSON *sec = luakube_get_json(hc, m, path, NULL, &e);
    if (!sec) {
        copy_error(&ce, &e, what);
        return failed(L, ce.code, ce.reason, ce.message, path, ns, name, key);
    }
    rest_error_free(&e);
    struct kube_config cfg;
    char err[1024];
    int rc = kubeconfig_from_secret(sec, what, key, &cfg, err, sizeof err);
    cJSON_Delete(sec);
    if (rc != 0 || !(t->rest = kube_open_config(&hc->kube, &cfg, log_say, err, sizeof err)))
        return failed(L, 0, "BadKubeconfig", err, path, ns, name, key);

    /* Does it answer, as whom the kubeconfig says? Bounded by probe
     * seconds (and the migration's deadline), so one cluster that is down
     * costs the sweep that much, not the retry budget of a verb. */
    double deadline = now_mono() + (probe > 0 ? probe : PROBE_S_DEFAULT);
    if (hc->deadline > 0 && hc->deadline < deadline)
        deadline = hc->deadline;
    struct door d = {&hc->kube, deadline, t->rest, NULL, NULL};
    char where[800];
    snprintf(where, sizeof where, "%s (%s)", what, rest_config(t->rest)->server);
    cJSON *v = door_get_json(&d, "/version", NULL, &e);
    if (!v) {
        copy_error(&ce, &e, where);
        return failed(L, ce.code, ce.reason, ce.message, path, ns, name, key);
    }
    cJSON_Delete(v);
    t->next = home->tenants;
    home->tenants = t;
    push_bound(L, tidx);
    return 1;
}

/* One page of Secrets into refs: {namespace=, name=, labels=} each, their
 * metadata only. The continue token into cont ("" at the end). 0, or -1 with e. */
static int refs_page(struct host_ctx *hc, struct kube_client *m, const char *ns,
                     const char *sel, char *cont, size_t clen, cJSON *refs, struct rest_error *e)
{
    struct buf b = {0};
    if (ns)
        buf_addf(&b, "/api/v1/namespaces/%s/secrets", ns);
    else
        buf_adds(&b, "/api/v1/secrets");
    apipath_add_query(&b, "labelSelector", sel);
    apipath_add_query(&b, "limit", "500");
    if (*cont)
        apipath_add_query(&b, "continue", cont);
    if (b.failed) {
        buf_release(&b);
        memset(e, 0, sizeof *e);
        snprintf(e->reason, sizeof e->reason, "MemoryLimit");
        snprintf(e->message, sizeof e->message, "out of memory");
        return -1;
    }
    cJSON *list = luakube_get_json(hc, m, b.p, NULL, e);
    buf_release(&b);
    if (!list)
        return -1;
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(list, "items")) {
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(it, "metadata");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(meta, "name");
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(meta, "namespace");
        const cJSON *lb = cJSON_GetObjectItemCaseSensitive(meta, "labels");
        if (!cJSON_IsString(n) || !cJSON_IsString(s))
            continue;
        cJSON *r = cJSON_CreateObject();
        cJSON *labels = cJSON_IsObject(lb) ? cJSON_Duplicate(lb, 1) : cJSON_CreateObject();
        if (labels && r && !cJSON_AddItemToObject(r, "labels", labels))
            cJSON_Delete(labels);
        else if (!r)
            cJSON_Delete(labels);
        if (!labels || !r || !cJSON_GetObjectItemCaseSensitive(r, "labels") ||
            !cJSON_AddStringToObject(r, "namespace", s->valuestring) ||
            !cJSON_AddStringToObject(r, "name", n->valuestring) || !cJSON_AddItemToArray(refs, r)) {
            /* a Secret left out would be a tenant silently skipped */
            cJSON_Delete(r);
            cJSON_Delete(list);
            memset(e, 0, sizeof *e);
            snprintf(e->reason, sizeof e->reason, "MemoryLimit");
            snprintf(e->message, sizeof e->message, "out of memory");
            return -1;
        }
    }
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(list, "metadata"), "continue");
    snprintf(cont, clen, "%s", cJSON_IsString(c) ? c->valuestring : "");
    cJSON_Delete(list);
    return 0;
}

/* private.cluster_refs(selector [, namespace]) -> {{namespace=, name=, labels=}...}
 * in the order the apiserver lists them | nil, err: the Secrets of the
 * management cluster the label selector picks, every page read. May raise
 * (misuse, memory). */
int luakube_l_cluster_refs(lua_State *L)
{
    struct host_ctx *hc = host_ctx(L);
    const char *sel = luaL_checkstring(L, 1);
    const char *ns = luaL_optstring(L, 2, NULL);
    if (ns && !dns_name(ns))
        return luaL_error(L, "kube.clusters: namespace must be a DNS name");
    struct kube_client *home = luakube_client_of(L), *m = luakube_connect(home, hc);
    if (!m) {
        lua_pushnil(L);
        luakube_push_error(L, 0, "ConfigError", home->init_err, NULL, "clusters", "GET",
                           "/api/v1/secrets");
        return 2;
    }
    struct ljson_box *box = ljson_box(L);
    if (!(box->json = cJSON_CreateArray()))
        return luaL_error(L, "kube: out of memory");
    char cont[4096] = "";
    struct rest_error e;
    do {
        if (refs_page(hc, m, ns, sel, cont, sizeof cont, box->json, &e) != 0) {
            struct copied ce;
            copy_error(&ce, &e, "listing the clusters' Secrets");
            ljson_box_free(box);
            lua_pushnil(L);
            luakube_push_error(L, ce.code, ce.reason, ce.message, NULL, "clusters", "GET",
                               "/api/v1/secrets");
            return 2;
        }
        rest_error_free(&e);
    } while (*cont);
    luakube_push_json(L, box->json);
    ljson_box_free(box);
    return 1;
}

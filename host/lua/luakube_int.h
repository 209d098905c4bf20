/* luakube_int.h: what the three files of the `kube.core` binding share
 * (luakube_core.c: the module, its client, errors, discovery, small services;
 * luakube_request.c: the one request function and the wire under it;
 * luakube_preview.c: the upgrade preview's overlay). Nothing outside them
 * includes it. */
#ifndef COZY_LUAKUBE_INT_H
#define COZY_LUAKUBE_INT_H
#include <stddef.h>
#include <cjson/cJSON.h>
#include <lua.h>

#include "base/buf.h"
#include "client/discovery.h"
#include "door/journal.h"
#include "preview/overlay.h"
#include "client/rest.h"
#include "client/pace.h"
#include "client/restpool.h"
#include "lua/hostctx.h"

/* One per Lua state, a userdata in its registry: what the module keeps
 * while the script runs (the host context holds the inputs only). The
 * connection is opened on first use, so a script that never talks to the
 * cluster runs without one. */
struct kube_client {
    struct rest_client *rest;
    struct rest_pool *pool;     /* fleet.each's requests in flight: made on first use */
    int pace_ceiling, pace_adapt; /* core.pace's, for the pool (0: none asked) */
    char pace_exempt[PACE_EXEMPT_MAX][48];    /* core.pace's Exempt priority levels (pace.h) */
    int pace_nexempt;
    struct discovery disc;
    int disc_loaded;
    char init_err[512];
    int init_failed;
    struct journal journal;     /* writes into the context's journal_log when it has one */
    struct overlay *overlay;    /* preview: loaded on first use, luakube_preview_save writes it */
    int ended;                  /* luakube_end: the script is over (its state is closing) */
    int unpredictable;          /* preview: a request the preview cannot predict was
                                 * refused (PreviewUnsupported, DryRunRefused) */
    char unpredictable_why[512]; /* the first such refusal, one line */
    /* a tenant cluster's client (luakube_cluster.c): its connection opened
     * from a kubeconfig Secret, its journal entries naming it; home is the
     * state's own client (the management cluster's), which decides when
     * the script is over and notes what a preview cannot predict */
    struct kube_client *home;
    char cluster[128];          /* NS/NAME of the Secret ("" for the home client) */
    /* the home client's list of its tenants' clients (head in home->tenants,
     * linked by next), so that core.await and luakube_settle reach every
     * pool: fleet.clusters keeps requests to several clusters in flight */
    struct kube_client *tenants, *next;
};

/* The state's client (created when the module is opened), or NULL. */
struct kube_client *luakube_client_of(lua_State *L);
/* The client the running C function serves: its first upvalue when that
 * is a client (a tenant cluster's verbs, luakube_cluster.c), else the
 * state's. */
struct kube_client *luakube_client_here(lua_State *L);
/* Pushes a new, unconnected client userdata (zeroed, collected like the
 * state's). May raise (memory). */
struct kube_client *luakube_new_client(lua_State *L);
/* kube.core's functions that act on a cluster, for luakube_cluster.c to
 * bind to a tenant's client. */
int luakube_l_resolve(lua_State *L);
int luakube_l_config(lua_State *L);
int luakube_l_default_namespace(lua_State *L);
int luakube_l_requests(lua_State *L);
int luakube_l_connects(lua_State *L);
/* private.cluster and private.cluster_refs (luakube_cluster.c). */
int luakube_l_cluster(lua_State *L);
int luakube_l_cluster_refs(lua_State *L);
/* c, connected. NULL when the cluster config cannot be resolved (the
 * reason stays in c->init_err for every later call). */
struct kube_client *luakube_connect(struct kube_client *c, const struct host_ctx *hc);
/* Notes that the preview met something it cannot predict (the first why
 * is kept): the migration's preview is then unpredictable, not failed. */
void luakube_note_unpredictable(struct kube_client *c, const char *why);

/* ---- error values (luakube_core.c) ---- */

/* Pushes an error value {code, reason, message, details, verb, method,
 * path}. May raise (memory). */
void luakube_push_error(lua_State *L, long code, const char *reason, const char *message,
                     const cJSON *details, const char *verb, const char *method,
                     const char *path);
/* The same from a REST error, with after_retry and the continue token of a
 * 410. May raise (memory). */
/* One write sent from L's thread changed an object: counted per thread
 * (core.changed_by), so fleet.each can tell which fn changed its object
 * when fn did not say so. May raise (memory). */
void luakube_count_change(lua_State *L);
void luakube_push_rest_error(lua_State *L, const struct rest_error *e, const char *verb,
                          const char *method, const char *path);
/* ljson_push with finalizers held off (host_ctx_call_pinned): what is being
 * converted may belong to the host. May raise (memory). */
void luakube_push_json(lua_State *L, const cJSON *v);

/* ---- requests (luakube_request.c) ---- */


/* The C memory one request holds while it calls into Lua (which may raise:
 * the memory cap, a bad query value), boxed in a userdata as lauxlib boxes
 * its buffers: a raise leaves it to __gc, the normal path frees it at once
 * through luakube_req_release. */
#define REQ_MT "cozy.kube.req"
struct req {
    char *body;
    cJSON *jbody;
    cJSON *before;
    struct buf path;           /* grows while the query is appended */
    struct rest_result res;
    int have_res;
    int pool_rc;                /* sent through the pool: rest_do's return value */
    char rv_before[64];         /* the object's resourceVersion before a write ("": unknown) */
    struct kube_client *owner;  /* in a pool: the client whose pool it is */
    /* a write in the pool: what its journal entry needs should the script
     * end before its answer is handed back (luakube_settle) */
    char *jpath;
    char jmethod[8], jverb[24];
};
void luakube_req_release(struct req *q);
/* Pushes a new, empty box. May raise (memory). */
struct req *luakube_req_box(lua_State *L);

/* How a request goes out; the preview may turn a write into another. */
struct send {
    const char *method;
    const char *ctype;
    size_t body_len;
    int safe;
};

/* A GET the host makes for itself (discovery, a read before a write),
 * through the one door every request passes. NULL with err filled when it
 * failed or was not sent. Makes no Lua call. */
cJSON *luakube_get_json(struct host_ctx *hc, struct kube_client *c, const char *path,
                     const char *accept, struct rest_error *err);
/* Pushes the registry table under key, made with weak keys (a finished
 * coroutine's entry goes with it) the first time. May raise (memory). */
void luakube_push_weak_table(lua_State *L, const void *key);
/* The raw request function only stdlib/kube.lua receives (luakube_push_private). */
int luakube_l_request(lua_State *L);
/* core.adopt(co), core.await(), core.PENDING: requests of adopted threads
 * go to the pool in flight together, and the thread yields until its
 * answer is back (stdlib/fleet.lua drives them). May raise (memory). */
int luakube_l_adopt(lua_State *L);
int luakube_l_await(lua_State *L);
void luakube_push_pending(lua_State *L);
/* core.pace(ceiling, adapt): the in-flight bound of the sweep that starts
 * (pace.h); core.pace_seen() -> what it saw, or nil. */
int luakube_l_pace(lua_State *L);
int luakube_l_pace_seen(lua_State *L);
/* Whether the running thread is one core.adopt took and may yield: its
 * waits (a request, core.sleep) yield it alone. */
int luakube_adopted(lua_State *L);
/* core.SLEEPING: what an adopted thread in core.sleep yields, with the
 * monotonic time it wakes at. */
void luakube_push_sleeping(lua_State *L);

/* ---- the preview (luakube_preview.c) ---- */

/* What the overlay answers before anything is sent: the number of Lua
 * results it pushed, or -1 to send (q and snd possibly rewritten so that a
 * write to an object the overlay holds goes out as a dry run of the
 * overlay's version). *held is the overlay's object when it has one. May
 * raise. */
int luakube_preview_before(lua_State *L, struct kube_client *c, struct req *q, struct send *snd,
                        const char *path0, const char *verb, const cJSON **held);
/* After a successful request in a preview: a write's answer goes in the
 * overlay; a list page is merged with it. 0, or -1 with an error pushed. May
 * raise. */
int luakube_preview_after(lua_State *L, struct kube_client *c, struct overlay *ov, struct req *q,
                       const char *method, const char *path0, int qidx);
#endif

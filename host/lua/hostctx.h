/* hostctx.h: what the host tells one Lua state about the run it serves.
 *
 * Redis keeps a script's run context in its Lua state and fetches it at the
 * top of every API function; so do we. The creator of a state (sandbox.c,
 * for a migration or the spec runner) attaches one host_ctx; every native
 * module function starts with `struct host_ctx *hc = host_ctx(L);` and reads
 * its options there, never from a process global or the environment. It
 * holds plain data: the kube module keeps its connection in `client` and the
 * write journal (journal.h) in `journal`, both owned by Lua userdata so they
 * are released when the state closes. */
#ifndef COZY_HOSTCTX_H
#define COZY_HOSTCTX_H
#include <lua.h>

#include "kube/kubeconfig.h"

/* What every request a script makes depends on. The strings are borrowed:
 * they must outlive every state the options are attached to (argv, or
 * static storage in main.c). */
struct kube_options {
    struct kube_config_opts cfg;    /* which cluster, as whom */
    int dry_run;                    /* every mutating request gets dryRun=All */
    const char *ledger_namespace;   /* the platform namespace: ledger and lock live there */
    const char *ledger_name;        /* the ledger ConfigMap no script may write */
    const char *lease_name;         /* the runner lock no script may write */
    double request_timeout;         /* seconds per attempt */
    int max_attempts;               /* per request, including the first */
    double retry_budget;            /* seconds across all attempts */
};

/* The defaults of defaults.h: cozy-system / cozystack-version /
 * cozystack-version-lock, 30s per attempt, 6 attempts, 60s budget. */
void kube_default_options(struct kube_options *o);

struct kube_client;                 /* kube.c's, created on first use */
struct journal;                     /* journal.h */
struct journal_log;                 /* journal.h */
struct overlay;                     /* overlay.h */

struct host_ctx {
    struct kube_options kube;
    double deadline;                /* monotonic seconds; 0 = none */
    const char *stdlib_dir;         /* where stdlib/ modules load from (set by the sandbox) */
    struct kube_client *client;     /* owned by kube.c (a userdata in the registry) */
    struct journal *journal;        /* NULL: writes are not journaled */
    struct journal_log *journal_log; /* where the journal keeps its entries: memory the
                                     * child's supervisor shares (child.c); NULL: its own */
    const char *overlay_path;       /* preview: the overlay file (overlay.h); NULL otherwise */
    struct overlay *overlay;        /* preview: loaded by kube.c on first use */
    int ended;                      /* the script is over (its state is closing):
                                     * no more requests */
    int unpredictable;              /* preview: a request the preview cannot predict
                                     * was refused (PreviewUnsupported, DryRunRefused) */
    char unpredictable_why[512];    /* the first such refusal, one line */
};

/* Copies *src into a userdata anchored in the registry and makes it L's
 * context. Call once, right after creating the state. May raise (memory). */
void host_ctx_attach(lua_State *L, const struct host_ctx *src);
/* L's context. Never NULL once attached; NULL before. */
struct host_ctx *host_ctx(lua_State *L);
/* Calls f while the collector is stopped, so no finalizer (a script's
 * __gc) can run, call back into the host and free or change host-owned
 * memory f is reading (the discovery catalogue, a preview's overlay) while
 * f turns it into Lua values. f finds ud as a light userdata at index 1 and
 * leaves nres results. Emergency collections still run (they never call
 * finalizers). May raise what f raises, after restarting the collector. */
void host_call_pinned(lua_State *L, lua_CFunction f, void *ud, int nres);
/* Notes that the preview met something it cannot predict (the first why
 * is kept): the migration's preview is then unpredictable, not failed. */
void host_ctx_unpredictable(struct host_ctx *hc, const char *why);
/* Seconds before the deadline (negative once passed); HUGE_VAL without one. */
double host_ctx_remaining(const struct host_ctx *hc);
#endif

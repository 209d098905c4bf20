/* kube.h: the C core of the `kube` Lua module (`kube.core`). Owns what every
 * script request passes through: the ledger/lease write guard, dry run and
 * its change report, apiserver errors as Lua values, and discovery caching.
 * Retries live in rest.c; the verbs are thin Lua in stdlib/kube.lua. */
#ifndef COZY_KUBE_H
#define COZY_KUBE_H
#include "kubeconfig.h"

struct kube_options {
    struct kube_config_opts cfg;
    int dry_run;                    /* every mutating request gets dryRun=All */
    const char *ledger_namespace;   /* the objects no script may write */
    const char *ledger_name;
    const char *lease_name;
    const char *default_namespace;  /* overrides the context's namespace */
    double request_timeout;         /* seconds per attempt */
    int max_attempts;               /* per request, including the first */
    double retry_budget;            /* seconds across all attempts */
};

/* Process-wide: one migration per process. Copies the strings. */
void kube_set_options(const struct kube_options *o);
/* Defaults: cozy-system / cozystack-version / cozystack-version-lock, 30s,
 * 6 attempts, 60s budget. */
void kube_default_options(struct kube_options *o);

struct lua_State;
int luaopen_kube_core(struct lua_State *L);
#endif

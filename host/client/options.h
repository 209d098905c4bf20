/* options.h: what every request to the cluster depends on: which cluster
 * and as whom, dry run, the names no script may write, and the retry
 * policy's bounds. Filled by the CLI, read by the runner, the preview and
 * a migration's kube module (through its host context). */
#ifndef COZY_KUBE_OPTIONS_H
#define COZY_KUBE_OPTIONS_H

#include "client/kubeconfig.h"
#include "client/rest.h"

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
    int concurrency;                /* fleet.each's requests in flight at once (1..64) */
    int stdlib_internals;           /* `lua --stdlib-internals` alone (the engine's own
                                     * specs): the script may require the stdlib's private
                                     * modules (kube.core); never under run, exec or preview */
};

/* The defaults of defaults.h (the ledger's names, the request timeout, the
 * attempts and the retry budget). */
void kube_default_options(struct kube_options *o);

/* Opens the cluster connection of these options: the one place every
 * client (the runner's, dispatch's, the gateway's, a migration's kube
 * module) takes its cluster, credentials and retry policy from them. say
 * gets the client's diagnostics (a retry, an apiserver warning), one line
 * each; the layers below print nothing themselves. NULL with err when the
 * kubeconfig cannot be used. Free it with rest_free. */
struct rest_client *kube_open(const struct kube_options *o, void (*say)(const char *line),
                              char *err, size_t errlen);
/* The same for another cluster, a config already resolved (a tenant's,
 * kubeconfig_from_secret): these options' retry policy over it. Takes
 * *cfg over (zeroed). */
struct rest_client *kube_open_config(const struct kube_options *o, struct kube_config *cfg,
                                     void (*say)(const char *line), char *err, size_t errlen);
#endif

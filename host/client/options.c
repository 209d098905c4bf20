/* options.c: the kube options' defaults and the connection opened from
 * them (see options.h). Owns which default of defaults.h each option
 * starts from; nothing else copies an option into a rest_policy or calls
 * rest_new or rest_new_config.
 * Prefixes: kube_ (the kube options, as options.h names them). */
#include "client/options.h"

#include <string.h>

#include "base/defaults.h"

void kube_default_options(struct kube_options *o)
{
    memset(o, 0, sizeof *o);
    o->ledger_namespace = DEFAULT_NAMESPACE;
    o->ledger_name = DEFAULT_LEDGER_NAME;
    o->lease_name = DEFAULT_LEDGER_NAME LEASE_SUFFIX;
    o->request_timeout = DEFAULT_REQUEST_TIMEOUT_S;
    o->max_attempts = DEFAULT_REQUEST_ATTEMPTS;
    o->retry_budget = DEFAULT_RETRY_BUDGET_S;
    o->concurrency = DEFAULT_CONCURRENCY;
}

static struct rest_policy policy_of(const struct kube_options *o, void (*say)(const char *line))
{
    struct rest_policy p = {.request_timeout = o->request_timeout,
                            .max_attempts = o->max_attempts,
                            .retry_budget = o->retry_budget,
                            .say = say};
    return p;
}

struct rest_client *kube_open(const struct kube_options *o, void (*say)(const char *line),
                              char *err, size_t errlen)
{
    struct rest_policy p = policy_of(o, say);
    return rest_new(&o->cfg, &p, err, errlen);
}

struct rest_client *kube_open_config(const struct kube_options *o, struct kube_config *cfg,
                                     void (*say)(const char *line), char *err, size_t errlen)
{
    struct rest_policy p = policy_of(o, say);
    return rest_new_config(cfg, &p, err, errlen);
}

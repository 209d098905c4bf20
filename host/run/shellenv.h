/* shellenv.h: the environment of a shell migration: what the old hook gave
 * its scripts (NAMESPACE, CURRENT_VERSION: the ledger's legacy integer,
 * TARGET_VERSION: one past the highest legacy number), MIGRATION_SLUG, the
 * dry-run variable its header names, what a shell and kubectl need from the
 * runner's own (PATH, HOME, locale, proxies, the in-cluster service host),
 * and every variable --pass-env / PASS_ENV names (a chart value such as a
 * skip-backup switch). Nothing else of the runner's environment reaches it,
 * and the cluster identity is always the runner's. */
#ifndef COZY_SHELLENV_H
#define COZY_SHELLENV_H
#include <stddef.h>

#define SHELL_ENV_MAX 96
struct shell_env {
    char *v[SHELL_ENV_MAX + 1];  /* NAME=VALUE entries, NULL-terminated: child_spec.env */
    char buf[16384];
    size_t used, n;
};

struct shell_env_in {
    const char *ns;              /* NAMESPACE: the platform namespace */
    const char *slug;            /* MIGRATION_SLUG */
    int has_version;             /* the ledger holds `version` ... */
    long version;                /* ... CURRENT_VERSION ("" without one) */
    long top_legacy;             /* the highest legacy-map number: TARGET_VERSION is one more */
    const char *dry_run_var;     /* set to 1 (a dry run of a script that names one); NULL: none */
    const char *pass_env;        /* comma-separated names passed through; NULL: none */
    const char *kubeconfig;      /* KUBECONFIG: the private kubeconfig's path; NULL: the
                                  * runner's own variable, as it is */
    int gateway;                 /* the shell reaches the cluster through the runner's
                                  * gateway only: the in-cluster service address is not
                                  * passed, so kubectl has no other way */
    const char *cache_dir;       /* KUBECACHEDIR: kubectl's caches for the run; NULL: none */
};

/* Fills e. 0, or -1 when it does not fit (SHELL_ENV_MAX entries, buf). */
int shell_env_build(struct shell_env *e, const struct shell_env_in *in);

/* The names the runner sets or decides itself, which --pass-env may not
 * name: the cluster identity (KUBECONFIG, the in-cluster service address,
 * the proxies the runner's own requests use) and the four variables above.
 * NULL-terminated. */
extern const char *const shell_env_reserved[];
#endif

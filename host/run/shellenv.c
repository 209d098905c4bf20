/* shellenv.c: a shell migration's environment (see shellenv.h). Owns which
 * of the runner's variables pass (an allow-list), the order in which the
 * runner's own values win, and the list --pass-env may not name. */
#include "run/shellenv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const shell_env_reserved[] = {
    "KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT",
    "KUBERNETES_SERVICE_PORT_HTTPS", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
    "http_proxy", "https_proxy", "no_proxy", "all_proxy", "NAMESPACE", "MIGRATION_SLUG",
    "CURRENT_VERSION", "TARGET_VERSION", "KUBECACHEDIR", NULL,
};

/* Sets name=value; a later value of the same name replaces the earlier
 * one, so what the runner sets itself always wins (one entry per name:
 * which of two a program reads is its own choice). */
static int env_add(struct shell_env *e, const char *name, const char *value)
{
    if (!value)
        return 0;
    size_t need = strlen(name) + strlen(value) + 2, nl = strlen(name);
    if (e->used + need > sizeof e->buf)
        return -1;
    char *at = e->buf + e->used;
    snprintf(at, need, "%s=%s", name, value);
    for (size_t i = 0; i < e->n; i++)
        if (strncmp(e->v[i], name, nl) == 0 && e->v[i][nl] == '=') {
            e->used += need;
            e->v[i] = at;
            return 0;
        }
    if (e->n == SHELL_ENV_MAX)
        return -1;
    e->used += need;
    e->v[e->n++] = at;
    e->v[e->n] = NULL;
    return 0;
}

int shell_env_build(struct shell_env *e, const struct shell_env_in *in)
{
    static const char *const keep[] = {
        "PATH", "HOME", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "KUBECONFIG",
        "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBERNETES_SERVICE_PORT_HTTPS",
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy", NULL};
    memset(e, 0, sizeof *e);
    char cur[32] = "", target[32];
    snprintf(target, sizeof target, "%ld", in->top_legacy + 1);
    if (in->has_version)
        snprintf(cur, sizeof cur, "%ld", in->version);
    int bad = 0;
    for (const char *const *k = keep; *k; k++)
        if (!(in->kubeconfig && strcmp(*k, "KUBECONFIG") == 0) &&
            !(in->gateway && strncmp(*k, "KUBERNETES_SERVICE_", 19) == 0))
            bad |= env_add(e, *k, getenv(*k));
    const char *list = in->pass_env;
    while (list && *list) {
        size_t len = strcspn(list, ",");
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), list);
        if (*name)
            bad |= env_add(e, name, getenv(name));
        list += len + (list[len] == ',');
    }
    bad |= env_add(e, "NAMESPACE", in->ns);
    bad |= env_add(e, "MIGRATION_SLUG", in->slug);
    bad |= env_add(e, "CURRENT_VERSION", cur);
    bad |= env_add(e, "TARGET_VERSION", target);
    if (in->dry_run_var && *in->dry_run_var)
        bad |= env_add(e, in->dry_run_var, "1");
    /* Last: the cluster identity is the runner's, whatever --pass-env says
     * (the CLI refuses such names too: shell_env_reserved). */
    if (in->kubeconfig)
        bad |= env_add(e, "KUBECONFIG", in->kubeconfig);
    if (in->cache_dir)
        bad |= env_add(e, "KUBECACHEDIR", in->cache_dir);
    return bad ? -1 : 0;
}

/* shellroom.c: a shell migration's room, made by the parent before the
 * fork (child_int.h): its own private directory (HOME, TMPDIR and
 * KUBECACHEDIR made in it, 0700) and what the kernel holds bash to there
 * (confine.h's ruleset: the migration's own files, its gateway's port, none
 * of the runner's credentials), with the policy where the kernel lacks a
 * protection (docs/internals.md, "Confinement"): in-cluster the shell is
 * refused unless the operator named each missing protection in
 * COZY_ALLOW_UNCONFINED; elsewhere the run says so once and goes on. Must
 * never let a root bash may read hold one of the runner's credentials, nor
 * let a refused shell run. */
#include "proc/child_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "base/log.h"
#include "base/paths.h"
#include "client/kubeconfig.h"
#include "proc/confine.h"

#define SA_DIR_DEFAULT "/var/run/secrets/kubernetes.io/serviceaccount"
#define ALLOW_UNCONFINED_ENV "COZY_ALLOW_UNCONFINED"

/* HOME, TMPDIR and KUBECACHEDIR inside the migration's private directory
 * (made here, 0700), after spec->env so they win: nothing of the runner's
 * home (its ~/.kube/config) nor a cache another migration wrote. */
int child_room_env(const struct child_spec *spec, char ***extra, char **own)
{
    static const char *const sub[][2] = {{"HOME", "home"}, {"TMPDIR", "tmp"}, {"KUBECACHEDIR", "cache"}};
    size_t n = 0, len = strlen(spec->private_dir);
    for (char *const *e = spec->env; e && *e; e++)
        n++;
    if (!(*extra = calloc(n + 4, sizeof **extra)) || !(*own = malloc(3 * (len + 32))))
        return -1;
    memcpy(*extra, spec->env, n * sizeof **extra);
    char *at = *own;
    for (size_t i = 0; i < 3; i++) {
        int w = sprintf(at, "%s=%s/%s", sub[i][0], spec->private_dir, sub[i][1]);
        if (mkdir(at + strlen(sub[i][0]) + 1, 0700) != 0 && errno != EEXIST)
            return -1;
        (*extra)[n++] = at;
        at += w + 1;
    }
    return 0;
}

/* The service-account directory and the directory every migration's
 * private one sits in (these two first), the runner's credential files
 * (its kubeconfig, client certificate and key, token file): what no root a
 * confined shell reads may hold. Pointers into kc and srcs (the kubeconfig
 * files, split). */
static void secrets_of(const struct kube_config *kc, char *srcs, const char **out, size_t cap)
{
    size_t n = 0;
    const char *sa = getenv("COZY_SERVICEACCOUNT_DIR");
    out[n++] = sa && *sa ? sa : SA_DIR_DEFAULT;
    out[n++] = paths_tmpdir();
    if (kc) {
        const char *files[] = {kc->cert_file, kc->key_file, kc->token_file};
        for (size_t i = 0; i < 3; i++)
            if (files[i])
                out[n++] = files[i];
        for (char *tok = srcs ? strtok(srcs, ":") : NULL; tok && n + 1 < cap; tok = strtok(NULL, ":"))
            if (tok[0] == '/')
                out[n++] = tok;
    }
    out[n] = NULL;
}

/* 1 when every protection in missing is named in the operator's opt-out
 * (a comma-separated list, or "all"). */
static int opted_out(const char *missing)
{
    const char *allow = getenv(ALLOW_UNCONFINED_ENV);
    if (!allow || !*allow)
        return 0;
    if (strcmp(allow, "all") == 0)
        return 1;
    for (const char *m = missing; *m;) {
        size_t n = strcspn(m, ",");
        int named = 0;
        for (const char *a = allow; *a && !named;) {
            size_t k = strcspn(a, ",");
            named = k == n && strncmp(a, m, n) == 0;
            a += k + (a[k] == ',');
        }
        if (!named)
            return 0;
        m += n + (m[n] == ',');
    }
    return 1;
}

int child_room_confine(const struct child_spec *spec, const char *script, char *const *envp,
                       struct confine *cf, char *why, size_t len)
{
    struct kube_options dflt;
    const struct kube_options *ko = spec->kube;
    if (!ko) {
        kube_default_options(&dflt);
        ko = &dflt;
    }
    struct kube_config kc;
    char err[1024];
    int have = kubeconfig_resolve(&ko->cfg, &kc, err, sizeof err) == 0;
    char *srcs = have && kc.source && !kc.in_cluster ? strdup(kc.source) : NULL;
    const char *secrets[16];
    secrets_of(have ? &kc : NULL, srcs, secrets, sizeof secrets / sizeof *secrets);
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    int port = getsockname(spec->gateway->listen_fd, (struct sockaddr *)&sa, &sl) == 0 &&
                       sa.sin_family == AF_INET ? ntohs(sa.sin_port) : 0;
    const char *path_env = NULL;
    for (char *const *e = envp; e && *e; e++)
        if (strncmp(*e, "PATH=", 5) == 0)
            path_env = *e + 5;
    struct confine_spec cs = {
        .private_dir = spec->private_dir,
        .workdir = spec->workdir,
        .script = script,
        .path_env = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin",
        .shared_rw = getenv("COZY_SHELL_RW"),
        .gateway_port = port,
        .secrets = secrets,
        .rw_secrets = (const char *const[]){secrets[0], secrets[1], NULL},
    };
    int in_cluster = have && kc.in_cluster;
    int rc = confine_prepare(&cs, cf, err, sizeof err);
    free(srcs);
    if (have)
        kubeconfig_free(&kc);
    if (rc != 0) {
        snprintf(why, len, "cannot confine the shell: %s", err);
        return -1;
    }
    static int said_note, said_missing;
    if (cf->note[0] && !said_note++)
        log_warn("confinement: left out of what shell migrations may read: %s", cf->note);
    if (!cf->missing[0])
        return 0;
    if (in_cluster && !opted_out(cf->missing)) {
        snprintf(why, len, "refused: this kernel lacks %s (Landlock ABI %d) to confine a shell "
                 "migration in-cluster; %s=%s runs it anyway", cf->missing, cf->abi,
                 ALLOW_UNCONFINED_ENV, cf->missing);
        return -2;
    }
    if (!said_missing++)
        log_warn("confinement: this kernel lacks %s (Landlock ABI %d): shell migrations run less "
                 "confined%s", cf->missing, cf->abi, in_cluster ? " (the operator allowed it)" : "");
    return 0;
}

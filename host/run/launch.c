/* launch.c: turns "run this migration (or this file) with these options"
 * into a supervised child (launch.h), for run, preview, lua and exec.
 *
 * Owns a migration's deadline (--timeout, its header's, the default, and
 * the words that say which), a shell's way to the cluster (the gateway's
 * credentials, its loopback socket, the private kubeconfig naming them and
 * the environment pointing at it) and filling child_spec, once, for every
 * command. The child itself is proc/child.c's; the shell's environment is
 * shellenv.c's; what to run, and what its outcome means, the caller's. Must
 * never let a shell run when its gateway could not be made (nothing falls
 * back to the runner's own credentials), nor leave a private kubeconfig or
 * a gateway credential behind a launch. */
#include "run/launch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/defaults.h"
#include "base/exitcodes.h"
#include "base/log.h"
#include "base/util.h"
#include "formats/tree.h"

void launch_init(struct launcher *L)
{
    memset(L, 0, sizeof *L);
    L->gw_fd = -1;
}

void launch_close(struct launcher *L)
{
    if (L->gw_fd >= 0)
        close(L->gw_fd);
    L->gw_fd = -1;
}

static void launch_zero(struct launch *j)
{
    memset(j, 0, sizeof *j);
    j->gw.listen_fd = -1;
}

void launch_migration(struct launch *j, const struct launcher *L, const struct migration *m,
                      const char *slug, const char *root)
{
    launch_zero(j);
    j->slug = slug;
    j->path = m->path;
    j->is_shell = m->is_shell;
    j->timeout_s = L->timeout > 0 ? L->timeout : m->h.timeout > 0 ? m->h.timeout : DEFAULT_TIMEOUT_S;
    j->timeout_why = header_timeout_why(&m->h, m->path, L->timeout, j->why, sizeof j->why);
    if (m->is_shell) {
        snprintf(j->workdir_buf, sizeof j->workdir_buf, "%s/legacy-sh", root);
        j->workdir = j->workdir_buf;
    }
}

int launch_file(struct launch *j, const char *cmd, const char *slug, const char *file, int shell,
                const double *timeout)
{
    launch_zero(j);
    j->slug = slug ? slug : file;
    j->path = file;
    j->is_shell = shell;
    size_t len;
    char *text = util_read_file(file, &len);
    if (!text) {
        log_fatal("%s: %s: %s", cmd, file, strerror(errno));
        return EXIT_USAGE;
    }
    struct header h;
    char err[ERRLINE_MAX];
    int rc = header_parse(file, text, len, !shell, &h, err, sizeof err);
    free(text);
    if (rc != 0 && !h.missing) {
        log_fatal("%s: %s", cmd, err);
        return EXIT_PACKAGING;
    }
    if (timeout) {
        j->timeout_s = *timeout;
    } else {
        j->timeout_s = rc == 0 && h.timeout > 0 ? h.timeout : DEFAULT_TIMEOUT_S;
        j->timeout_why = header_timeout_why(rc == 0 ? &h : NULL, rc == 0 ? file : NULL, 0, j->why,
                                            sizeof j->why);
    }
    if (rc == 0)
        header_free(&h);
    return 0;
}

/* The namespace a shell's private kubeconfig names into ns (*has 0 when
 * unset): L->cfg's, or k's configuration's. 0; 1 when none resolves and no
 * option named a cluster (no gateway: there is no cluster to narrow to);
 * -1 with err. */
static int gateway_ns(const struct launcher *L, char *ns, size_t len, int *has, char *err,
                      size_t errlen)
{
    *ns = '\0';
    if (L->cfg) {
        if ((*has = L->cfg->namespace != NULL))
            snprintf(ns, len, "%s", L->cfg->namespace);
        return 0;
    }
    struct kube_config kc;
    const struct kube_config_opts *ko = &L->k->cfg;
    if (kubeconfig_resolve(ko, &kc, err, errlen) != 0)
        return !ko->kubeconfig && !ko->context && !ko->local ? 1 : -1;
    if ((*has = kc.namespace != NULL))
        snprintf(ns, len, "%s", kc.namespace);
    kubeconfig_free(&kc);
    return 0;
}

/* A shell's gateway: fresh credentials, the launcher's socket (bound at
 * the first), a private kubeconfig naming them and nothing else. 0; 1 when
 * the shell runs without one (gateway_ns); -1 with err. */
static int gateway_attach(struct launcher *L, struct launch *j, char *err, size_t errlen)
{
    char ns[256];
    int has = 0, r = gateway_ns(L, ns, sizeof ns, &has, err, errlen);
    if (r != 0)
        return r;
    if (gateway_cred_new(&j->cred, err, errlen) != 0)
        return -1;
    if (L->gw_fd < 0 && gateway_listen(&L->gw_fd, &L->gw_port, err, errlen) != 0)
        return -1;
    if (kubeconfig_private_gateway(L->gw_port, j->cred.token, j->cred.cert_pem, has ? ns : NULL,
                                   &j->kp, err, errlen) != 0)
        return -1;
    j->gw.listen_fd = L->gw_fd;
    j->gw.cred = &j->cred;
    j->gw.stamp_allowed = j->stamp_allowed;
    j->through_gateway = 1;
    return 0;
}

/* The shell's environment: shellenv's whole one (KUBECONFIG the private
 * file), or the given entries with KUBECONFIG last (it wins over an --env
 * KUBECONFIG). 0, or -1 when it does not fit. */
static int shell_environment(struct launch *j)
{
    if (j->whole_env) {
        j->env_in.kubeconfig = j->kp.path;
        return shell_env_build(&j->se, &j->env_in);
    }
    if (!j->through_gateway)
        return 0;
    size_t n = 0;
    for (char *const *e = j->env; e && *e; e++)
        n++;
    if (!(j->envv = calloc(n + 2, sizeof *j->envv)))
        return -1;
    for (size_t i = 0; i < n; i++)
        j->envv[i] = j->env[i];
    snprintf(j->kc_env, sizeof j->kc_env, "KUBECONFIG=%s", j->kp.path);
    j->envv[n] = j->kc_env;
    return 0;
}

/* What launch_prepare made (a zeroed or freed j is a no-op). */
static void launch_free(struct launch *j)
{
    kubeconfig_private_remove(&j->kp);
    gateway_cred_free(&j->cred);
    free(j->envv);
    j->envv = NULL;
    j->through_gateway = 0;
    j->gw.listen_fd = -1; /* the launcher's: launch_close closes it */
}

int launch_prepare(struct launcher *L, struct launch *j)
{
    if (!j->is_shell)
        return 0;
    char err[ERRLINE_MAX];
    const char *who = L->say_as ? L->say_as : j->slug;
    if (gateway_attach(L, j, err, sizeof err) < 0) {
        log_fatal("%s: %s", who, err);
        launch_free(j);
        return EXIT_CLUSTER;
    }
    if (shell_environment(j) != 0) {
        launch_free(j);
        log_fatal("%s: the environment for its shell does not fit", j->slug);
        return EXIT_FAILED;
    }
    return 0;
}

void launch_run(struct launcher *L, struct launch *j, struct child_result *res)
{
    char *const *env = j->whole_env ? j->se.v : j->envv ? j->envv : j->env;
    struct child_spec spec = {
        .slug = j->slug,
        .path = j->path,
        .is_shell = j->is_shell,
        .workdir = j->workdir,
        .env = j->is_shell ? env : NULL,
        .env_only = j->whole_env,
        .timeout_s = j->timeout_s,
        .timeout_why = j->timeout_why,
        .grace_s = L->grace,
        .lua_mem_limit = L->memory,
        .kube = L->k,
        .overlay_path = L->overlay_path,
        .tick = L->tick,
        .tick_every = L->tick_every,
        .ud = L->ud,
        .lease_until_us = L->lease_until_us,
        .quiet = L->quiet,
        .passthrough = L->passthrough,
        .gateway = j->through_gateway ? &j->gw : NULL,
        /* what the shell's supervisor removes when the runner dies under it */
        .remove_on_orphan = j->through_gateway ? j->kp.path : NULL,
        .private_dir = j->through_gateway ? j->kp.dir : NULL,
    };
    child_run(&spec, res);
    launch_free(j);
}

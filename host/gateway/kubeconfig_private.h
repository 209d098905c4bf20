/* kubeconfig_private.h: the one kubeconfig the engine writes, a shell
 * child's private file that points its kubectl at the runner's gateway
 * (gateway.h) with the migration's own token: never the runner's identity,
 * whose credentials stay in the runner's memory. */
#ifndef COZY_KUBECONFIG_PRIVATE_H
#define COZY_KUBECONFIG_PRIVATE_H
#include <stddef.h>

/* A kubeconfig for a shell migration, which reaches the cluster through
 * the runner's gateway alone: written with the YAML writer into a fresh
 * directory (0700) as PATH/kubeconfig (0600), under $TMPDIR or /tmp. The
 * caller removes it once the child has ended (a stop signal ends the child
 * first, stop.h; a runner killed outright leaves it to the shell child's
 * supervisor, child.c). */
struct kube_private {
    char dir[4096];
    char path[4200];            /* set KUBECONFIG=path for the child */
};
/* Server https://127.0.0.1:port with the gateway's own certificate as its
 * authority (ca_pem), the migration's bearer token, namespace ns (NULL:
 * none), and nothing of the runner's own credentials. */
int kubeconfig_private_gateway(int port, const char *token, const char *ca_pem, const char *ns,
                               struct kube_private *kp, char *err, size_t errlen);
/* Removes the file and its directory (a zeroed kp is a no-op). */
void kubeconfig_private_remove(struct kube_private *kp);
#endif

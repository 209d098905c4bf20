/* kubeconfig_secret.c: a tenant cluster's kubeconfig as a Secret of the
 * management cluster holds it (Kamaji's admin kubeconfig: data key
 * super-admin.conf), parsed in memory by the one kubeconfig parser
 * (kubeconfig_resolve_inline), never written to disk. Owns taking it out
 * of the Secret (its key, base64) and wiping the decoded text. Its
 * credentials must be inline: a path in it (a CA, a certificate, a key, a
 * token file) would be read on the runner's own filesystem, so whoever can
 * write that Secret could send the runner's service-account token to a
 * server of their choosing; the parser refuses it without reading it.
 * Prefixes: kubeconfig_ (kubeconfig.h). */
#include "client/kubeconfig.h"
#include "client/kubeconfig_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void wipe_free(char *p, size_t n)
{
    if (!p)
        return;
    volatile char *v = p;
    for (size_t i = 0; i < n; i++)
        v[i] = 0;
    free(p);
}

int kubeconfig_from_secret(const cJSON *secret, const char *what, const char *key,
                           struct kube_config *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(secret, "data");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(data, key);
    if (!cJSON_IsString(v))
        return kc_fail(err, errlen, "%s has no key %s", what, key);
    char *text = NULL;
    size_t len = 0;
    int rc = kc_b64_decode(v->valuestring, &text, &len);
    if (rc == -2)
        return kc_nomem(err, errlen);
    if (rc < 0)
        return kc_fail(err, errlen, "%s: key %s is not valid base64", what, key);
    char name[600];
    snprintf(name, sizeof name, "%s key %s", what, key);
    rc = kubeconfig_resolve_inline(name, text, len, out, err, errlen);
    wipe_free(text, len);
    return rc;
}

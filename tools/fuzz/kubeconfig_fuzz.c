// sources: host/client/kubeconfig.c host/client/kubeconfig_fields.c host/formats/yamldoc.c host/base/mem.c host/base/util.c host/base/buf.c
/* kubeconfig_fuzz.c: libFuzzer target for host/client/kubeconfig.c through
 * kubeconfig_resolve_buffer. Owns checking that any input resolves or fails
 * with one non-empty line, and that a resolved config describes itself and
 * frees cleanly. Must never write files or keep state between inputs. */
#include "client/kubeconfig.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kube_config kc;
    char err[1024];
    /* A first line "#ctx NAME" picks --context, so lookups by name get fuzzed
     * as well as current-context. */
    char ctx[64], *want = NULL;
    if (size > 5 && !memcmp(data, "#ctx ", 5)) {
        size_t i = 5, n = 0;
        while (i < size && data[i] != '\n' && n < sizeof ctx - 1)
            ctx[n++] = (char)data[i++];
        ctx[n] = '\0';
        want = ctx;
    }
    if (kubeconfig_resolve_buffer("fuzz.yaml", (const char *)data, size, want, &kc, err,
                                  sizeof err) < 0) {
        if (!err[0] || strchr(err, '\n'))
            abort();
        return 0;
    }
    if (!kc.server || !kc.server[0] || !kc.source)
        abort();
    cJSON *d = kubeconfig_describe(&kc);
    if (!d)
        abort();
    char *s = cJSON_PrintUnformatted(d);
    if (!s)
        abort();
    free(s);
    cJSON_Delete(d);
    kubeconfig_free(&kc);
    return 0;
}

/* podsec.h: whether a pod template meets Pod Security `restricted` (the
 * Kubernetes Pod Security Standards, as the apiserver's PodSecurity
 * admission enforces them), for the dispatcher's background Jobs
 * (dispatch.c): DESIGN says every pod the dispatcher makes meets it, so a
 * template that asks for less is refused before any Job is made, rather
 * than left for admission to refuse its pods. */
#ifndef COZY_PODSEC_H
#define COZY_PODSEC_H
#include <cjson/cJSON.h>
#include <stddef.h>

/* tmpl is a Job's spec.template (metadata and spec). 0, or -1 with one
 * line in err naming the first field that breaks `restricted`
 * ("spec.template.spec.containers[0].securityContext.runAsUser: 0 ...").
 * What the dispatcher then sets itself (runAsNonRoot, a RuntimeDefault
 * seccomp profile, no privilege escalation, every capability dropped) may
 * be absent; only a value that contradicts it is refused. */
int podsec_check(const cJSON *tmpl, char *err, size_t errlen);
#endif

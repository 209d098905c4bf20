/* podsec.c: Pod Security `restricted` of a pod template (see podsec.h).
 *
 * Owns the rules, as the Pod Security Standards state them for the
 * baseline and restricted levels (latest): no host namespaces or ports,
 * no privilege or escalation, no capability added but NET_BIND_SERVICE,
 * non-root (no runAsNonRoot false, no runAsUser 0), seccomp RuntimeDefault
 * or Localhost, AppArmor not unconfined (field or annotation), SELinux
 * types of the container family and no user or role, the default /proc
 * mount, only the safe sysctls, no Windows host process, and only the
 * volume types restricted allows. Names the field in the path a reader
 * finds it at. Must never pass a template whose pods admission would
 * refuse for a field it knows; changes nothing. */
#include "run/podsec.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define POD "spec.template.spec"

static int refuse(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int refuse(char *err, size_t errlen, const char *fmt, ...)
{
    char what[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(err, errlen, "%s: Pod Security \"restricted\" forbids it, and every pod the "
             "dispatcher makes meets it", what);
    return -1;
}

static const cJSON *at(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = at(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int in(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return 1;
    return 0;
}

/* The rules a pod's and a container's securityContext share. where names
 * the context ("spec.template.spec.securityContext"). */
static int context_check(const cJSON *sc, const char *where, char *err, size_t errlen)
{
    static const char *const seccomp[] = {"RuntimeDefault", "Localhost", NULL};
    static const char *const apparmor[] = {"RuntimeDefault", "Localhost", NULL};
    static const char *const selinux[] = {"", "container_t", "container_init_t", "container_kvm_t",
                                          "container_engine_t", NULL};
    if (!sc)
        return 0;
    if (!cJSON_IsObject(sc))
        return refuse(err, errlen, "%s: not an object", where);
    if (cJSON_IsFalse(at(sc, "runAsNonRoot")))
        return refuse(err, errlen, "%s.runAsNonRoot: false", where);
    const cJSON *uid = at(sc, "runAsUser");
    if (cJSON_IsNumber(uid) && uid->valuedouble == 0)
        return refuse(err, errlen, "%s.runAsUser: 0 (root)", where);
    const char *t = str(at(sc, "seccompProfile"), "type");
    if (at(sc, "seccompProfile") && (!t || !in(t, seccomp)))
        return refuse(err, errlen, "%s.seccompProfile.type: %s (RuntimeDefault or Localhost)",
                      where, t ? t : "(none)");
    t = str(at(sc, "appArmorProfile"), "type");
    if (at(sc, "appArmorProfile") && (!t || !in(t, apparmor)))
        return refuse(err, errlen, "%s.appArmorProfile.type: %s (RuntimeDefault or Localhost)",
                      where, t ? t : "(none)");
    const cJSON *se = at(sc, "seLinuxOptions");
    if (se) {
        t = str(se, "type");
        if (t && !in(t, selinux))
            return refuse(err, errlen, "%s.seLinuxOptions.type: %s", where, t);
        if ((str(se, "user") && *str(se, "user")) || (str(se, "role") && *str(se, "role")))
            return refuse(err, errlen, "%s.seLinuxOptions: a user or role", where);
    }
    if (cJSON_IsTrue(at(at(sc, "windowsOptions"), "hostProcess")))
        return refuse(err, errlen, "%s.windowsOptions.hostProcess: true", where);
    return 0;
}

static int container_check(const cJSON *c, const char *where, char *err, size_t errlen)
{
    char w[160];
    const cJSON *p;
    cJSON_ArrayForEach(p, at(c, "ports"))
    {
        const cJSON *hp = at(p, "hostPort");
        if (cJSON_IsNumber(hp) && hp->valuedouble != 0)
            return refuse(err, errlen, "%s.ports: hostPort %d", where, (int)hp->valuedouble);
    }
    const cJSON *sc = at(c, "securityContext");
    snprintf(w, sizeof w, "%s.securityContext", where);
    if (context_check(sc, w, err, errlen) != 0)
        return -1;
    if (cJSON_IsTrue(at(sc, "privileged")))
        return refuse(err, errlen, "%s.privileged: true", w);
    if (cJSON_IsTrue(at(sc, "allowPrivilegeEscalation")))
        return refuse(err, errlen, "%s.allowPrivilegeEscalation: true", w);
    const char *pm = str(sc, "procMount");
    if (pm && strcmp(pm, "Default") != 0)
        return refuse(err, errlen, "%s.procMount: %s", w, pm);
    const cJSON *cap;
    cJSON_ArrayForEach(cap, at(at(sc, "capabilities"), "add"))
    {
        if (!cJSON_IsString(cap) || strcmp(cap->valuestring, "NET_BIND_SERVICE") != 0)
            return refuse(err, errlen, "%s.capabilities.add: %s", w,
                          cJSON_IsString(cap) ? cap->valuestring : "?");
    }
    return 0;
}

static int sysctls_check(const cJSON *psc, char *err, size_t errlen)
{
    static const char *const safe[] = {
        "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem", NULL};
    const cJSON *s;
    cJSON_ArrayForEach(s, at(psc, "sysctls"))
    {
        const char *n = str(s, "name");
        if (!n || !in(n, safe))
            return refuse(err, errlen, POD ".securityContext.sysctls: %s is not a safe sysctl",
                          n ? n : "(no name)");
    }
    return 0;
}

static int volumes_check(const cJSON *pod, char *err, size_t errlen)
{
    static const char *const allowed[] = {"name", "configMap", "csi", "downwardAPI", "emptyDir",
                                          "ephemeral", "persistentVolumeClaim", "projected",
                                          "secret", NULL};
    const cJSON *v, *k;
    cJSON_ArrayForEach(v, at(pod, "volumes"))
    {
        cJSON_ArrayForEach(k, v)
        {
            if (k->string && !in(k->string, allowed))
                return refuse(err, errlen, POD ".volumes: '%s' is a %s volume",
                              str(v, "name") ? str(v, "name") : "?", k->string);
        }
    }
    return 0;
}

int podsec_check(const cJSON *tmpl, char *err, size_t errlen)
{
    const cJSON *pod = at(tmpl, "spec");
    static const char *const host[] = {"hostNetwork", "hostPID", "hostIPC", NULL};
    for (const char *const *h = host; *h; h++)
        if (cJSON_IsTrue(at(pod, *h)))
            return refuse(err, errlen, POD ".%s: true", *h);
    const cJSON *psc = at(pod, "securityContext");
    if (context_check(psc, POD ".securityContext", err, errlen) != 0 ||
        sysctls_check(psc, err, errlen) != 0 || volumes_check(pod, err, errlen) != 0)
        return -1;
    static const char *const lists[] = {"containers", "initContainers", "ephemeralContainers",
                                        NULL};
    for (const char *const *l = lists; *l; l++) {
        const cJSON *c;
        int i = 0;
        cJSON_ArrayForEach(c, at(pod, *l))
        {
            char where[80];
            snprintf(where, sizeof where, POD ".%s[%d]", *l, i++);
            if (container_check(c, where, err, errlen) != 0)
                return -1;
        }
    }
    const cJSON *a;
    cJSON_ArrayForEach(a, at(at(tmpl, "metadata"), "annotations"))
    {
        const char *pre = "container.apparmor.security.beta.kubernetes.io/";
        if (a->string && strncmp(a->string, pre, strlen(pre)) == 0 &&
            (!cJSON_IsString(a) || (strcmp(a->valuestring, "runtime/default") != 0 &&
                                    strncmp(a->valuestring, "localhost/", 10) != 0)))
            return refuse(err, errlen, "spec.template.metadata.annotations[%s]: %s", a->string,
                          cJSON_IsString(a) ? a->valuestring : "?");
    }
    return 0;
}

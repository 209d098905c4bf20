/* dispatch_job.c: a background Job as the dispatcher writes and reads it
 * (dispatch_job.h).
 *
 * Owns the Job made for one slug's attempt: its name, the release's
 * template (or the built-in one) checked for what it may hold, made
 * restricted whatever it says, and stamped with the dispatcher's proof of
 * ownership (a controller ownerReference to the ledger, its uid in a
 * label); and the same proof read back, which tells a Job the dispatcher
 * made from a foreign one. Pure: JSON in, JSON out, no cluster call
 * (dispatch.c lists, creates and reports). Must never let a template
 * choose the image or the command the Job runs, nor give its pod a host
 * namespace, privilege or a volume over the image's tree. */
#include "run/dispatch_job.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/defaults.h"
#include "formats/manifest.h"
#include "run/podsec.h"

#define CONTAINER "migrate"

static const char *str_at(const cJSON *o, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);
    if (b)
        v = cJSON_GetObjectItemCaseSensitive(v, b);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ---- whose Job it is ---------------------------------------------------- */

/* Why the Job is not this dispatcher's for this ledger, or NULL when it
 * is: an ownerReference (controller) to the ledger's uid, the same uid in
 * its label, a valid slug, not suspended. */
const char *dispatch_job_not_ours(const struct dispatch_owner *c, const cJSON *it)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(it, "metadata");
    const char *slug = str_at(meta, "labels", DISPATCH_SLUG_LABEL);
    const char *uid = str_at(meta, "labels", DISPATCH_LEDGER_UID_LABEL);
    if (!c->ledger_uid || !*c->ledger_uid)
        return "there is no ledger to own it";
    int owned = 0;
    const cJSON *ref;
    cJSON_ArrayForEach(ref, cJSON_GetObjectItemCaseSensitive(meta, "ownerReferences"))
    {
        const char *k = str_at(ref, "kind", NULL), *n = str_at(ref, "name", NULL),
                   *u = str_at(ref, "uid", NULL), *av = str_at(ref, "apiVersion", NULL);
        owned |= k && n && u && av && strcmp(av, "v1") == 0 && strcmp(k, "ConfigMap") == 0 &&
                 strcmp(n, c->ledger) == 0 && strcmp(u, c->ledger_uid) == 0 &&
                 cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ref, "controller"));
    }
    if (!owned)
        return "no ownerReference to the ledger";
    if (!uid || strcmp(uid, c->ledger_uid) != 0)
        return "its " DISPATCH_LEDGER_UID_LABEL " label is not the ledger's uid";
    if (!slug || !slug_valid(slug))
        return "no valid " DISPATCH_SLUG_LABEL " label";
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(it, "spec");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(spec, "suspend")))
        return "it is suspended (the dispatcher never makes a suspended Job)";
    return NULL;
}

/* Whether the Job claims this ledger: its uid label, its ledger
 * annotation, or a name this dispatcher would give. */
int dispatch_job_claims(const struct dispatch_owner *c, const cJSON *it)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(it, "metadata");
    const char *uid = str_at(meta, "labels", DISPATCH_LEDGER_UID_LABEL);
    const char *ledger = str_at(meta, "annotations", DISPATCH_LEDGER_ANNOTATION);
    const char *name = str_at(meta, "name", NULL);
    char prefix[300];
    snprintf(prefix, sizeof prefix, "mig-%s-", c->ledger);
    return (uid && c->ledger_uid && strcmp(uid, c->ledger_uid) == 0) ||
           (ledger && strcmp(ledger, c->ledger) == 0) ||
           (name && strncmp(name, prefix, strlen(prefix)) == 0);
}


/* ---- the Job made ------------------------------------------------------ */

/* A Job name of at most 63 characters (its pods carry it as a label):
 * mig-<ledger>-<slug>-<attempt>[-<again>][-x<taken>] (taken: names foreign
 * Jobs hold), the ledger and slug cut and a hash of both added when that
 * is too long. */
void dispatch_job_name(const char *ledger, const char *slug, long attempt, size_t again, int taken,
                       char out[64])
{
    char tail[64] = "";
    size_t t = 0;
    t += (size_t)snprintf(tail + t, sizeof tail - t, "-%ld", attempt);
    if (again)
        t += (size_t)snprintf(tail + t, sizeof tail - t, "-%zu", again);
    if (taken)
        snprintf(tail + t, sizeof tail - t, "-x%d", taken);
    char full[400];
    snprintf(full, sizeof full, "mig-%s-%s%s", ledger, slug, tail);
    if (strlen(full) <= 63) {
        memcpy(out, full, strlen(full) + 1);
        return;
    }
    char both[300];
    snprintf(both, sizeof both, "%s-%s", ledger, slug);
    unsigned h = 2166136261u; /* FNV-1a of ledger-slug */
    for (const unsigned char *p = (const unsigned char *)both; *p; p++)
        h = (h ^ *p) * 16777619u;
    size_t keep = 63 - strlen("mig-") - 9 - strlen(tail);
    char cut[64];
    snprintf(cut, sizeof cut, "%.*s", (int)keep, both);
    for (size_t n = strlen(cut); n && (cut[n - 1] == '-' || cut[n - 1] == '.');)
        cut[--n] = '\0';
    snprintf(full, sizeof full, "mig-%s-%08x%s", cut, h, tail);
    snprintf(out, 64, "%.63s", full);
}

/* The built-in template, when the dispatcher's spec carries none: the pod
 * the chart renders for the Jobs that are not hooks. */
static cJSON *builtin_template(const char *sa)
{
    char text[2400];
    snprintf(text, sizeof text,
             "{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"spec\":{\"backoffLimit\":0,"
             "\"activeDeadlineSeconds\":%d,\"ttlSecondsAfterFinished\":%d,\"template\":{\"spec\":{"
             "\"serviceAccountName\":\"%s\",\"restartPolicy\":\"Never\","
             "\"securityContext\":{\"runAsNonRoot\":true,\"runAsUser\":65534,\"runAsGroup\":65534},"
             "\"containers\":[{\"name\":\"" CONTAINER "\",\"image\":\"\",\"imagePullPolicy\":\"IfNotPresent\","
             "\"args\":[\"--tier\",\"background\",\"--lock-timeout\",\"%ds\"],"
             "\"terminationMessagePolicy\":\"FallbackToLogsOnError\","
             "\"securityContext\":{\"readOnlyRootFilesystem\":true},"
             "\"volumeMounts\":[{\"name\":\"tmp\",\"mountPath\":\"/tmp\"}]}],"
             "\"volumes\":[{\"name\":\"tmp\",\"emptyDir\":{}}]}}}}",
             DEFAULT_JOB_LOCK_WAIT_S + 60, DEFAULT_JOB_TTL_S, sa, DEFAULT_JOB_LOCK_WAIT_S);
    return cJSON_Parse(text);
}

static int set_env(cJSON *c, const char *name, const char *value)
{
    cJSON *env = cJSON_GetObjectItemCaseSensitive(c, "env");
    if (!env) {
        env = cJSON_AddArrayToObject(c, "env");
        if (!env)
            return -1;
    }
    if (!cJSON_IsArray(env))
        return -1;
    for (int i = cJSON_GetArraySize(env) - 1; i >= 0; i--) {
        const char *n = str_at(cJSON_GetArrayItem(env, i), "name", NULL);
        if (n && strcmp(n, name) == 0)
            cJSON_DeleteItemFromArray(env, i);
    }
    cJSON *e = cJSON_CreateObject();
    if (!e || !cJSON_AddStringToObject(e, "name", name) || !cJSON_AddStringToObject(e, "value", value) ||
        !cJSON_AddItemToArray(env, e)) {
        cJSON_Delete(e);
        return -1;
    }
    return 0;
}

static int set_str(cJSON *o, const char *k, const char *v)
{
    cJSON_DeleteItemFromObjectCaseSensitive(o, k);
    return cJSON_AddStringToObject(o, k, v) ? 0 : -1;
}

static int set_num(cJSON *o, const char *k, double v)
{
    cJSON_DeleteItemFromObjectCaseSensitive(o, k);
    return cJSON_AddNumberToObject(o, k, v) ? 0 : -1;
}

static cJSON *object_at(cJSON *o, const char *k)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsObject(v))
        return v;
    cJSON_DeleteItemFromObjectCaseSensitive(o, k);
    return cJSON_AddObjectToObject(o, k);
}

static int labels(cJSON *meta, const char *slug, const char *ledger_uid)
{
    cJSON *l = object_at(meta, "labels");
    return l && set_str(l, DISPATCH_LABEL, DISPATCH_BY) == 0 &&
                   set_str(l, DISPATCH_SLUG_LABEL, slug) == 0 &&
                   set_str(l, DISPATCH_LEDGER_UID_LABEL, ledger_uid) == 0 &&
                   set_str(l, "app.kubernetes.io/name", "cozy-migrate") == 0 &&
                   set_str(l, "app.kubernetes.io/component", "background-migration") == 0
               ? 0
               : -1;
}

/* Whether an argument is one the engine's background run takes (the
 * chart's ValidatingAdmissionPolicy admits the same set). */
static int arg_allowed(const char *a)
{
    static const char *const words[] = {"--tier", "background", "--lock-timeout", "--log-format",
                                        "text", "json", NULL};
    for (const char *const *w = words; *w; w++)
        if (strcmp(a, *w) == 0)
            return 1;
    size_t n = strlen(a);
    if (n < 2 || n > 7 || a[n - 1] != 's')
        return 0;
    for (size_t i = 0; i + 1 < n; i++)
        if (a[i] < '0' || a[i] > '9')
            return 0;
    return 1;
}

static int bad(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t errlen, const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(err, errlen, "the background Jobs' template (%s, or the built-in one): %s",
             DISPATCH_TEMPLATE_ENV, what);
    return -1;
}

/* PASS_ENV in a background Job's template: the chart's values that shell
 * migrations read (its extraEnv and named hatches) reach them as they do in
 * the hook, so every name it lists must be a literal value of the same
 * template's env: nothing comes from the image's or the node's environment.
 * 0, or -1 with err. */
static int pass_env_given(const cJSON *ctr, const char *list, char *err, size_t errlen)
{
    while (*list) {
        size_t len = strcspn(list, ",");
        int found = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(ctr, "env"))
        {
            const char *n = str_at(e, "name", NULL);
            if (n && strlen(n) == len && strncmp(n, list, len) == 0 && strcmp(n, "PASS_ENV") != 0 &&
                cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "value")))
                found = 1;
        }
        if (len && !found)
            return bad(err, errlen, "env PASS_ENV names '%.*s', which the template's env does not "
                       "give a value", (int)(len > 60 ? 60 : len), list);
        list += len + (list[len] == ',');
    }
    return 0;
}

/* What the template may hold: one container running the engine's
 * background run, no host namespace, no privilege, no volume but an
 * emptyDir, nothing that runs another command (probes, lifecycle hooks,
 * init or ephemeral containers), no env the runner reads as an operator's
 * (SKIP) or that would take the Job's own ONLY and image. Even from the
 * release's own spec: a Job made as the jobs' cluster-admin identity is
 * checked here, and the admission policy checks it again. 0, or -1 with
 * err. */
static int template_check(const cJSON *pod, const cJSON *ctr, char *err, size_t errlen)
{
    static const char *const host[] = {"hostNetwork", "hostPID", "hostIPC", NULL};
    for (const char *const *h = host; *h; h++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(pod, *h);
        if (v && !cJSON_IsFalse(v))
            return bad(err, errlen, "spec.template.spec.%s: a background Job shares no host "
                       "namespace", *h);
    }
    static const char *const none[] = {"initContainers", "ephemeralContainers", NULL};
    for (const char *const *k = none; *k; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(pod, *k);
        if (v && cJSON_GetArraySize(v) > 0)
            return bad(err, errlen, "spec.template.spec.%s: the engine is the Job's only "
                       "container", *k);
    }
    if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(pod, "containers")) != 1)
        return bad(err, errlen, "spec.template.spec.containers: exactly one container");
    const cJSON *vol;
    cJSON_ArrayForEach(vol, cJSON_GetObjectItemCaseSensitive(pod, "volumes"))
    {
        int only_empty = cJSON_GetObjectItemCaseSensitive(vol, "emptyDir") &&
                         cJSON_GetArraySize(vol) == 2 && cJSON_GetObjectItemCaseSensitive(vol, "name");
        if (!only_empty)
            return bad(err, errlen, "volume '%s': only emptyDir volumes (no hostPath, no "
                       "ConfigMap or Secret over the image's tree)",
                       str_at(vol, "name", NULL) ? str_at(vol, "name", NULL) : "?");
    }
    static const char *const cmd[] = {"command", "lifecycle", "livenessProbe", "readinessProbe",
                                      "startupProbe", "envFrom", "workingDir", NULL};
    for (const char *const *k = cmd; *k; k++)
        if (cJSON_GetObjectItemCaseSensitive(ctr, *k))
            return bad(err, errlen, "the container's %s: the Job runs the image's entrypoint "
                       "and nothing else", *k);
    const cJSON *a;
    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(ctr, "args"))
    {
        if (!cJSON_IsString(a) || !arg_allowed(a->valuestring))
            return bad(err, errlen, "the container's args: '%.60s' is not an argument of the "
                       "engine's background run", cJSON_IsString(a) ? a->valuestring : "?");
    }
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(ctr, "securityContext");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sc, "privileged")) ||
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(sc, "capabilities"), "add"))
        return bad(err, errlen, "the container's securityContext: no privilege, no capability "
                   "added");
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(ctr, "env"))
    {
        const char *n = str_at(e, "name", NULL);
        if (!n || strcmp(n, "SKIP") == 0 || strcmp(n, "SKIP_REASON") == 0 ||
            strcmp(n, "DRY_RUN") == 0 || strncmp(n, "LD_", 3) == 0)
            return bad(err, errlen, "env '%.40s' is not for a background Job", n ? n : "?");
        const char *pass = strcmp(n, "PASS_ENV") == 0 ? str_at(e, "value", NULL) : NULL;
        if (strcmp(n, "PASS_ENV") == 0 && !pass)
            return bad(err, errlen, "env PASS_ENV: a list of names given as a value");
        if (pass && pass_env_given(ctr, pass, err, errlen) != 0)
            return -1;
    }
    return 0;
}

/* Restricted Pod Security, whatever the template says: non-root,
 * RuntimeDefault seccomp, no privilege escalation, every capability
 * dropped. 0, or -1 when out of memory. */
static int restricted(cJSON *pod, cJSON *ctr)
{
    cJSON *psc = object_at(pod, "securityContext");
    cJSON *seccomp = psc ? object_at(psc, "seccompProfile") : NULL;
    cJSON *csc = object_at(ctr, "securityContext");
    cJSON *caps = csc ? object_at(csc, "capabilities") : NULL;
    if (!psc || !seccomp || !csc || !caps)
        return -1;
    cJSON_DeleteItemFromObjectCaseSensitive(psc, "runAsNonRoot");
    cJSON_DeleteItemFromObjectCaseSensitive(seccomp, "localhostProfile");
    cJSON_DeleteItemFromObjectCaseSensitive(csc, "allowPrivilegeEscalation");
    cJSON_DeleteItemFromObjectCaseSensitive(csc, "privileged");
    cJSON_DeleteItemFromObjectCaseSensitive(caps, "drop");
    cJSON *drop = cJSON_AddArrayToObject(caps, "drop");
    cJSON *all = cJSON_CreateString("ALL");
    if (!drop || !all || !cJSON_AddItemToArray(drop, all)) {
        cJSON_Delete(all);
        return -1;
    }
    return cJSON_AddTrueToObject(psc, "runAsNonRoot") && set_str(seccomp, "type", "RuntimeDefault") == 0 &&
                   cJSON_AddFalseToObject(csc, "allowPrivilegeEscalation")
               ? 0
               : -1;
}

/* spec.podFailurePolicy: an exit no retry changes fails the Job at once,
 * and the dispatcher reads that (reason PodFailurePolicy) as final. */
static int final_exits(cJSON *spec)
{
    cJSON_DeleteItemFromObjectCaseSensitive(spec, "podFailurePolicy");
    char text[300];
    snprintf(text, sizeof text, "{\"rules\":[{\"action\":\"FailJob\",\"onExitCodes\":{"
             "\"containerName\":\"" CONTAINER "\",\"operator\":\"In\",\"values\":[%s]}}]}",
             DISPATCH_FINAL_EXITS);
    cJSON *p = cJSON_Parse(text);
    if (!p || !cJSON_AddItemToObject(spec, "podFailurePolicy", p)) {
        cJSON_Delete(p);
        return -1;
    }
    return 0;
}

/* The Job for the verdict's pick: the release's template (checked), its
 * name, labels, owner, the slug, this dispatcher's own image, restricted
 * Pod Security, the deadline. NULL with err (exit 3: the template cannot
 * be used) or oom set. */
cJSON *dispatch_job_make(const struct dispatch_opts *d, const struct dispatch_job_want *w, int *oom,
                        char *err, size_t errlen)
{
    const char *sa = d->service_account ? d->service_account : DEFAULT_JOB_SERVICE_ACCOUNT;
    *oom = 0;
    cJSON *job = d->job_template ? cJSON_Parse(d->job_template) : builtin_template(sa);
    cJSON *spec = cJSON_GetObjectItemCaseSensitive(job, "spec");
    cJSON *tmpl = cJSON_GetObjectItemCaseSensitive(spec, "template");
    cJSON *pod = cJSON_GetObjectItemCaseSensitive(tmpl, "spec");
    cJSON *ctr = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(pod, "containers"), 0);
    const char *kind = str_at(job, "kind", NULL);
    if (!cJSON_IsObject(spec) || !cJSON_IsObject(pod) || !cJSON_IsObject(ctr) ||
        (kind && strcmp(kind, "Job") != 0)) {
        bad(err, errlen, "not a Job with a pod template and a container");
        cJSON_Delete(job);
        return NULL;
    }
    char why[600];
    if (template_check(pod, ctr, err, errlen) != 0) {
        cJSON_Delete(job);
        return NULL;
    }
    if (podsec_check(tmpl, why, sizeof why) != 0) {
        bad(err, errlen, "%s", why);
        cJSON_Delete(job);
        return NULL;
    }
    const cJSON *dl = cJSON_GetObjectItemCaseSensitive(spec, "activeDeadlineSeconds");
    double base = cJSON_IsNumber(dl) && dl->valuedouble > 0 ? dl->valuedouble
                                                           : DEFAULT_JOB_LOCK_WAIT_S + 60;
    const cJSON *ttl = cJSON_GetObjectItemCaseSensitive(spec, "ttlSecondsAfterFinished");
    char attempts[24];
    snprintf(attempts, sizeof attempts, "%ld", w->attempt - 1);
    static const char *const drop[] = {"selector", "manualSelector", "suspend", "completions",
                                       "parallelism", "completionMode", "successPolicy",
                                       "backoffLimitPerIndex", "maxFailedIndexes",
                                       "podReplacementPolicy", "managedBy", NULL};
    for (const char *const *k = drop; *k; k++)
        cJSON_DeleteItemFromObjectCaseSensitive(spec, *k);
    cJSON_DeleteItemFromObjectCaseSensitive(job, "metadata");
    cJSON_DeleteItemFromObjectCaseSensitive(job, "status");
    cJSON_DeleteItemFromObjectCaseSensitive(ctr, "image");
    cJSON *meta = cJSON_AddObjectToObject(job, "metadata");
    cJSON *ann = meta ? cJSON_AddObjectToObject(meta, "annotations") : NULL;
    cJSON *owners = meta ? cJSON_AddArrayToObject(meta, "ownerReferences") : NULL;
    cJSON *owner = cJSON_CreateObject();
    if (owner && owners && !cJSON_AddItemToArray(owners, owner)) {
        cJSON_Delete(owner);
        owner = NULL;
    }
    cJSON *tmeta = object_at(tmpl, "metadata");
    char job_sa[256];
    const char *given_sa = str_at(pod, "serviceAccountName", NULL);
    snprintf(job_sa, sizeof job_sa, "%s", given_sa ? given_sa : sa);
    int failed = !meta || !ann || !owner || !tmeta || set_str(job, "apiVersion", "batch/v1") ||
                 set_str(job, "kind", "Job") || set_str(meta, "name", w->name) ||
                 set_str(meta, "namespace", w->owner.ns) ||
                 labels(meta, w->slug, w->owner.ledger_uid) ||
                 set_str(ann, DISPATCH_LEDGER_ANNOTATION, w->owner.ledger) ||
                 set_str(ann, DISPATCH_ATTEMPTS_ANNOTATION, attempts) ||
                 set_str(owner, "apiVersion", "v1") || set_str(owner, "kind", "ConfigMap") ||
                 set_str(owner, "name", w->owner.ledger) || set_str(owner, "uid", w->owner.ledger_uid) ||
                 !cJSON_AddTrueToObject(owner, "controller") ||
                 !cJSON_AddFalseToObject(owner, "blockOwnerDeletion") ||
                 labels(tmeta, w->slug, w->owner.ledger_uid) ||
                 /* retries are the dispatcher's, with a backoff, counted in the ledger */
                 set_num(spec, "backoffLimit", 0) || final_exits(spec) ||
                 set_num(spec, "activeDeadlineSeconds",
                         ceil(base + w->timeout_s + DEFAULT_GRACE_S)) ||
                 (!cJSON_IsNumber(ttl) && set_num(spec, "ttlSecondsAfterFinished", DEFAULT_JOB_TTL_S)) ||
                 set_str(pod, "restartPolicy", "Never") ||
                 set_str(pod, "serviceAccountName", job_sa) ||
                 set_str(ctr, "name", CONTAINER) || set_str(ctr, "image", w->image) ||
                 set_env(ctr, "ONLY", w->slug) || set_env(ctr, "MIGRATIONS_IMAGE", w->image) ||
                 restricted(pod, ctr);
    if (failed) {
        *oom = 1;
        snprintf(err, errlen, "out of memory");
        cJSON_Delete(job);
        return NULL;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(pod, "serviceAccount");
    return job;
}

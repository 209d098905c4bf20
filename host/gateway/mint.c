/* mint.c: which gateway requests mint a credential (mint.h). Owns
 * recognising them from the method, the parsed path (apipath.h) and the
 * JSON body; decides nothing else and sends nothing. */
#include "gateway/mint.h"

#include <stdio.h>
#include <string.h>

#include "client/apipath.h"

static const char *str_at(const cJSON *o, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);
    if (b)
        v = cJSON_GetObjectItemCaseSensitive(v, b);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

#define SA_TOKEN "kubernetes.io/service-account-token"

static int holds(const char *body, size_t len, const char *s)
{
    return body && memmem(body, len, s, strlen(s)) != NULL;
}

static int judge(const char *method, const char *path, const char *body, size_t body_len,
                 const cJSON *jbody, char *why, size_t whylen);

int mint_refuses(const char *method, const char *path, const char *body, size_t body_len,
                     const cJSON *jbody, char *why, size_t whylen)
{
    /* a server-side apply is YAML by its type and JSON as kubectl sends it */
    cJSON *own = body && !jbody ? cJSON_ParseWithLength(body, body_len) : NULL;
    int r = judge(method, path, body, body_len, jbody ? jbody : own, why, whylen);
    cJSON_Delete(own);
    return r;
}

static int judge(const char *method, const char *path, const char *body, size_t body_len,
                 const cJSON *jbody, char *why, size_t whylen)
{
    int has_body = body != NULL && body_len > 0;
    /* a PATCH creates too (server-side apply); type and roleRef are
     * immutable, so a patch of an existing object cannot make one */
    int creates = strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 ||
                  strcmp(method, "PATCH") == 0;
    struct apipath p;
    if (!creates || apipath_parse(path, &p) != 0)
        return 0;
    if (!*p.group && strcmp(p.resource, "serviceaccounts") == 0 && strcmp(p.sub, "token") == 0) {
        snprintf(why, whylen, "a TokenRequest mints a credential: a legacy script may not make one");
        return 1;
    }
    int secret = !*p.group && strcmp(p.resource, "secrets") == 0 && !*p.sub;
    int binding = strcmp(p.group, "rbac.authorization.k8s.io") == 0 && !*p.sub &&
                  (strcmp(p.resource, "rolebindings") == 0 ||
                   strcmp(p.resource, "clusterrolebindings") == 0);
    if (!secret && !binding)
        return 0;
    /* kubectl sends built-in kinds as protobuf, whose strings are bytes
     * as they are: such a body is judged by whether it holds the name at
     * all (a subject or label of that name is refused too) */
    int raw = has_body && !jbody;
    const char *type = str_at(jbody, "type", NULL);
    if (secret && ((type && strcmp(type, SA_TOKEN) == 0) || (raw && holds(body, body_len, SA_TOKEN)))) {
        snprintf(why, whylen, "a Secret of type kubernetes.io/service-account-token mints a "
                 "credential: a legacy script may not make one");
        return 1;
    }
    const char *kind = str_at(jbody, "roleRef", "kind"), *name = str_at(jbody, "roleRef", "name");
    if (binding && ((kind && name && strcmp(kind, "ClusterRole") == 0 &&
                     strcmp(name, "cluster-admin") == 0) ||
                    (raw && holds(body, body_len, "cluster-admin")))) {
        snprintf(why, whylen, "a binding to cluster-admin grants a credential every right: a "
                 "legacy script may not make one");
        return 1;
    }
    return 0;
}

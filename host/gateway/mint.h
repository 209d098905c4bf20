/* mint.h: the writes a legacy shell script may not send through the
 * runner's gateway because their effect is a new credential: a TokenRequest
 * (serviceaccounts/NAME/token), a Secret of type
 * kubernetes.io/service-account-token (the token controller fills it), a
 * RoleBinding or ClusterRoleBinding to the ClusterRole cluster-admin. A
 * confined script could not use such a credential itself (its TCP goes to
 * the gateway alone), but it would outlive the migration in the cluster for
 * anyone to take. None of the frozen legacy scripts makes one; a Lua
 * migration's requests do not pass here. */
#ifndef COZY_GATEWAY_MINT_H
#define COZY_GATEWAY_MINT_H
#include <stddef.h>
#include <cjson/cJSON.h>

/* 1 with why (one line) when the request mints a credential, else 0. path
 * without its query; body as it came (NULL: none) and jbody its parse when
 * the caller has one (NULL: read here). A body that is not JSON (kubectl's
 * protobuf) is judged by whether it holds the role's or the type's name. */
int mint_refuses(const char *method, const char *path, const char *body, size_t body_len,
                     const cJSON *jbody, char *why, size_t whylen);
#endif

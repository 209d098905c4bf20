/* k8sproto.h: the little of Kubernetes' protobuf encoding the ledger guard
 * needs to judge a create kubectl sends as protobuf (its typed clients do,
 * `kubectl create configmap` among them): the object's metadata.name.
 * Owns reading the envelope ("k8s\0", then a runtime.Unknown whose field 2
 * holds the object) and the object's field 1 (its ObjectMeta, field 1 the
 * name), with protobuf's rules for repeated fields (the last scalar wins,
 * repeated messages merge). Pure; never guesses: a body it cannot read
 * whole is an error. */
#ifndef COZY_K8SPROTO_H
#define COZY_K8SPROTO_H
#include <stddef.h>

#define K8SPROTO_CONTENT_TYPE "application/vnd.kubernetes.protobuf"

/* The object's metadata.name into name (cap bytes): 1 when it has one, 0
 * when it has none, -1 when the body is not an envelope it can read whole
 * (or the name does not fit). */
int k8sproto_name(const char *body, size_t len, char *name, size_t cap);
#endif

/* yaml11.h: where the apiserver's YAML (1.1: sigs.k8s.io/yaml over go-yaml
 * v2) and the project's reader (yamldoc.h, the 1.2 core schema) would read
 * one text differently. A request body read by both must not hold such a
 * node: the guard refuses it rather than judge one object and have the
 * apiserver store another. */
#ifndef COZY_YAML11_H
#define COZY_YAML11_H
#include <stddef.h>

#include "base/buf.h"

/* 0 when every node of text reads the same under both; -1 with one line in
 * err ("line N: what, and how to write it") naming the first that does not
 * (a merge key, an explicit tag, a 1.1 boolean or number spelling, a key
 * the apiserver would turn into other text), or the text does not parse. */
int yaml11_check(const char *text, size_t len, struct buf *err);
#endif

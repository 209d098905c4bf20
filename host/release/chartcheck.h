/* chartcheck.h: `index --check-chart FILE`: a platform chart's rendering
 * (`helm template`, or `helm upgrade --dry-run` of it), checked for the
 * shape the engine needs: the index ConfigMap, agreeing with the tree; no
 * ledger ConfigMap (the hook creates it: a chart that renders it too fails
 * every fresh install with AlreadyExists); no pre-install or pre-upgrade
 * hook Job but the engine's (a numbered hook left in runs beside it). */
#ifndef COZY_CHARTCHECK_H
#define COZY_CHARTCHECK_H
#include "formats/indexdoc.h"

/* Checks the rendering in FILE against want (the tree's index, its image
 * and policy as --check expects them), printing one line per problem
 * ("FILE: document N (SOURCE): ..."). Returns the number of problems, or
 * -1 with err when FILE cannot be read or a document does not parse. */
long chart_check(const char *file, const struct index *want, const char *ledger, const char *tree,
                 struct buf *err);
#endif

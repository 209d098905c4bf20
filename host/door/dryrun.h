/* dryrun.h: what a dry-run write would have changed. Owns comparing the
 * object before a write with the apiserver's dry-run answer and the text
 * that tells the verb, the object and the fields that would change. */
#ifndef COZY_DRYRUN_H
#define COZY_DRYRUN_H
#include <cjson/cJSON.h>

/* The intended change, as lines ("dry-run: would patch configmaps ns/x, 2
 * fields:", then "  path: old -> new" each) in report, each ending in a
 * newline. before is the object as it is (NULL when absent or not known),
 * after the dry-run response (NULL for a DELETE that returned a Status).
 * Returns how many fields would change (a create or delete counts 1), their
 * "path: old -> new" lines in fields. */
int dryrun_report(const char *method, const char *path, const cJSON *before, const cJSON *after,
                  char *report, size_t report_cap, char *fields, size_t cap);
#endif

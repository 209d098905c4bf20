/* stamp.h: the one ledger write the frozen legacy scripts make, the stamp
 * of `data.version` at the end of each (`kubectl create configmap
 * cozystack-version --from-literal=version=N+1 --dry-run=client -o yaml |
 * kubectl apply -f -`), judged as a pure function. A write to the ledger
 * ConfigMap is a stamp when, applied to the ledger as it is, it changes
 * `data.version` and nothing else (kubectl's own last-applied annotation
 * and the server's bookkeeping aside), to exactly the number this legacy
 * script's place in the legacy map allows (script N stamps N+1). The
 * gateway answers such a write as the apiserver would and the runner
 * carries it out itself, in the patch of the script's ok record; any other
 * write to the ledger is the guard's (LedgerProtected). Makes no request. */
#ifndef COZY_STAMP_H
#define COZY_STAMP_H
#include <cjson/cJSON.h>
#include <stddef.h>

enum stamp_verdict {
    STAMP_NONE = 0,     /* not a replace, patch or create of the ledger object itself */
    STAMP_ABSORB,       /* a stamp: *answer is the ledger as the write leaves it */
    STAMP_EXISTS,       /* a create of the ledger, which exists: the apiserver's 409 */
    STAMP_REFUSE,       /* a write to the ledger that is not an allowed stamp (why) */
};

/* Whether method and path (no query) name a write of the ledger ns/name
 * itself (PUT or PATCH of its path, POST to its collection naming it in
 * the body) in the canonical spelling kubectl sends; any other spelling is
 * left to the guard. */
int stamp_targets(const char *method, const char *path, const char *ns, const char *name,
                  const char *body, size_t len, const char *ctype);

/* Judges the write (method, content type, body) against the ledger as it
 * is (current), allowing only `version` = allowed (allowed <= 0: no stamp
 * is allowed here, every write is refused). STAMP_ABSORB with *version and
 * *answer (owned) filled; STAMP_REFUSE with why. */
enum stamp_verdict stamp_judge(const cJSON *current, const char *method, const char *ctype,
                               const char *body, size_t len, long allowed, long *version,
                               cJSON **answer, char *why, size_t whylen);
#endif

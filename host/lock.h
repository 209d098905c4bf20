/* lock.h: the runner lock, a coordination.k8s.io/v1 Lease next to the
 * ledger. Owns taking it (create, or take over once expired), renewing it
 * while migrations run, and releasing it. Two runners never hold it at once. */
#ifndef COZY_LOCK_H
#define COZY_LOCK_H
#include "rest.h"

struct lock {
    struct rest_client *c;
    char ns[128], name[128], holder[256];
    char rv[64];            /* resourceVersion of our last write */
    int duration_s;         /* leaseDurationSeconds */
    double renewed_at;      /* monotonic */
    int held;
};

/* Tries for up to wait_s seconds. Returns 0 when held; -1 with err naming the
 * holder when someone else kept it (*busy = 1), or the API error (*busy = 0). */
int lock_acquire(struct lock *lk, struct rest_client *c, const char *ns, const char *name,
                 int duration_s, double wait_s, int *busy, char *err, size_t errlen);
/* Renews when a quarter of the lease has passed; cheap to call often. Returns
 * -1 when the lease was lost (someone else holds it now). */
int lock_renew(struct lock *lk, char *err, size_t errlen);
void lock_release(struct lock *lk);
#endif

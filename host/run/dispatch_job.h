/* dispatch_job.h: a background Job as the dispatcher writes and reads it
 * (dispatch.h says what the dispatcher does with it). */
#ifndef COZY_DISPATCH_JOB_H
#define COZY_DISPATCH_JOB_H
#include <cjson/cJSON.h>
#include <stddef.h>

#include "run/dispatch.h"

/* The ledger a dispatcher works for: what its Jobs' proof of ownership
 * names. */
struct dispatch_owner {
    const char *ns, *ledger;
    const char *ledger_uid;     /* NULL or "" when there is no ledger */
};

/* Why the Job is not this dispatcher's for this ledger, or NULL when it
 * is: an ownerReference (controller) to the ledger's uid, the same uid in
 * its label, a valid slug, not suspended. */
const char *dispatch_job_not_ours(const struct dispatch_owner *o, const cJSON *job);
/* Whether the Job claims this ledger: its uid label, its ledger
 * annotation, or a name this dispatcher would give (a foreign one that
 * does is reported; another ledger's are its dispatcher's business). */
int dispatch_job_claims(const struct dispatch_owner *o, const cJSON *job);

/* The name of the Job for slug's attempt: mig-<ledger>-<slug>-<attempt>
 * [-<again>][-x<taken>], at most 63 characters (cut and hashed past
 * that); taken counts the names foreign Jobs hold. */
void dispatch_job_name(const char *ledger, const char *slug, long attempt, size_t again, int taken,
                       char out[64]);

/* One slug's attempt, to be run as a Job. */
struct dispatch_job_want {
    struct dispatch_owner owner;
    const char *name;           /* dispatch_job_name's */
    const char *slug, *image;   /* what it runs: ONLY=slug in the dispatcher's own image */
    long attempt;               /* 1 for the first */
    double timeout_s;           /* the slug's, added to the template's deadline */
};
/* The Job for w, from d's template (or the built-in one). NULL with err:
 * *oom set when out of memory, else the template cannot be used (exit 3). */
cJSON *dispatch_job_make(const struct dispatch_opts *d, const struct dispatch_job_want *w, int *oom,
                         char *err, size_t errlen);
#endif

/* plan.h: what a run will do, decided from data alone. plan_build is a pure
 * function of the loaded tree, the ledger and the options: `run` executes
 * its steps, `plan` prints them, and most runner tests test it. */
#ifndef COZY_PLAN_H
#define COZY_PLAN_H
#include <stddef.h>
#include <cjson/cJSON.h>

#include "ledger.h"
#include "tree.h"

enum step_kind { STEP_RUN, STEP_RECORD_REVOKED, STEP_SKIP };

struct step {
    enum step_kind kind;
    const char *slug;
    const struct migration *m;  /* NULL for a retired slug */
    const char *batch;
    const char *tier;
    long prev_attempts;         /* attempts recorded before this run */
    char why[160];              /* for STEP_SKIP, and for a retry or a re-run */
};

struct plan {
    int fresh_install;          /* the ledger is absent: create it with `seed` */
    struct ledger_entry *seed;  /* records to write before the walk (fresh install, legacy) */
    size_t nseed;
    struct step *s;
    size_t n;
    char **warnings;            /* checksum mismatches, unparseable records */
    size_t nwarnings;
    int corrupt;                /* an unparseable record was found */
    int refuse;                 /* exit code when the run must not proceed, else 0 */
    char refuse_msg[512];
};

struct plan_opts {
    const char *tier;           /* "pre-apply" (default) or "background" */
    const char *only;           /* re-run exactly this slug */
    int max_attempts;           /* background retries bound (0 = DEFAULT_MAX_ATTEMPTS) */
    const char *image;
    const char *now;            /* RFC 3339 timestamp for seeded records */
};

/* A record for what the step did (state st), stamped like the plan's seeds
 * (batch, tier, image, now) and with the script's checksums when the step
 * has a script. */
void plan_record(const struct tree *t, const struct step *s, const struct plan_opts *o,
                 enum rec_state st, struct record *r);

/* Never fails for a reason of the data: a refusal is a plan with refuse set.
 * Returns -1 only when out of memory. */
int plan_build(const struct tree *t, const struct ledger *l, const struct plan_opts *o,
               struct plan *p);
void plan_free(struct plan *p);
/* The part of --only that needs no ledger: a revoked slug or one absent from
 * the image is refused (returns the exit code, message in msg), else 0. */
int plan_check_only(const struct tree *t, const char *only, char *msg, size_t len);
const char *step_kind_name(enum step_kind k);
#endif

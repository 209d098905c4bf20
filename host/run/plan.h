/* plan.h: what a run will do, decided from data alone. plan_build is a pure
 * function of the loaded tree, the ledger and the options: `run` executes
 * its steps, `plan` prints them, and most runner tests test it. */
#ifndef COZY_PLAN_H
#define COZY_PLAN_H
#include <stddef.h>
#include <cjson/cJSON.h>

#include "formats/ledgerdoc.h"
#include "formats/tree.h"

enum step_kind {
    STEP_RUN,
    STEP_RECORD_REVOKED,
    STEP_SKIP,              /* nothing to do (why says which) */
    STEP_BLOCKED,           /* not run: a slug it requires is not recorded ok,
                             * legacy or skipped-fresh-install (why says which) */
    STEP_RECORD_SKIPPED,    /* an operator's skip: record `skipped` */
};

struct step {
    enum step_kind kind;
    const char *slug;
    const struct migration *m;  /* NULL for a retired slug */
    const char *batch;
    const char *tier;
    long prev_attempts;         /* attempts recorded before this run */
    char why[160];              /* for STEP_SKIP and STEP_BLOCKED ("blocked: requires X
                                 * (failed)"), and for a retry or a re-run */
};

struct plan {
    int fresh_install;          /* the ledger is absent: create it with `seed` */
    char installed_at[128];     /* and seed it as a fresh install at this batch would
                                 * have ("" when everything is seeded, as the hook does;
                                 * "none": nothing), then walk the rest (--as-installed-at) */
    struct ledger_entry *seed;  /* records to write before the walk (fresh install, legacy) */
    size_t nseed;
    struct step *s;
    size_t n;
    char **warnings;            /* checksum mismatches, bad keys this run leaves alone */
    size_t nwarnings;
    char **problems;            /* every key that makes the ledger untrustworthy, one
                                 * line each naming the command that repairs it */
    size_t nproblems;
    size_t nversion;            /* how many of them (the first) are about `version` */
    int corrupt;                /* nproblems > 0 */
    int refuse;                 /* exit code when the run must not proceed, else 0 */
    char refuse_msg[2048];
};

struct plan_opts {
    const char *tier;           /* "pre-apply" (default) or "background" */
    int tier_given;             /* tier was asked for (--tier): an --only of the other
                                 * tier is refused rather than run in its own */
    const char *only;           /* re-run exactly this slug */
    int force;                  /* --only: even a legacy slug below `version`, even
                                 * with a requires not met */
    const char *const *skip;    /* operator skips (env SKIP, or the skip command) */
    size_t nskip;
    const char *skip_reason;    /* their message; an unchanged skipped record is not
                                 * written again */
    int skip_only;              /* the skip command: plan the skips and nothing else */
    int survey;                 /* status: plan the walk whatever the ledger holds
                                 * (problems listed, nothing refused; nothing runs) */
    int max_attempts;           /* background retries bound (0 = DEFAULT_MAX_ATTEMPTS) */
    const char *image;
    const char *now;            /* RFC 3339 timestamp for seeded records */
    const char *ns, *ledger;    /* the ledger's namespace and name, for the repairs a
                                 * person runs (NULL: cozy-system/cozystack-version) */
    const char *installed_at;   /* a local run on a cluster without a ledger: seed it as
                                 * if the cluster had been installed at this release
                                 * ("latest": the last batch but the untagged one;
                                 * "none": seed nothing; a batch's release, e.g. v1.2.0
                                 * or legacy, or its whole name), and run what comes
                                 * after it. NULL: the hook's fresh install */
};

/* The repair of an unreadable record m.SLUG, as one clause: 'run --only' or
 * 'skip' when this image can run or skip SLUG (or t is NULL: no tree to
 * tell); otherwise what a person does with kubectl (remove the key, or for
 * a retired slug write a valid record), since the engine never deletes. */
void plan_repair(const struct tree *t, const struct plan_opts *o, const char *slug, char *buf,
                 size_t len);
/* "kubectl -n NS patch configmap LEDGER --type=json -p '[remove PATH]'" in buf. */
const char *plan_kubectl_remove(const struct plan_opts *o, const char *path, char *buf,
                                size_t len);

/* A record for what the step did (state st), stamped like the plan's seeds
 * (batch, tier, image, now) and with the script's checksums when the step
 * has a script. */
void plan_record(const struct tree *t, const struct step *s, const struct plan_opts *o,
                 enum rec_state st, struct record *r);


/* Never fails for a reason of the data: a refusal is a plan with refuse set
 * (EXIT_USAGE: a slug the image cannot run or skip; EXIT_LEDGER: a bad key,
 * listed in problems; EXIT_REFUSED: what the ledger records forbids it;
 * EXIT_FLOOR). Returns -1 only when out of memory. */
int plan_build(const struct tree *t, const struct ledger *l, const struct plan_opts *o,
               struct plan *p);
void plan_free(struct plan *p);
/* The part of --only that needs no ledger: a revoked slug, one absent from
 * the image, or one of another tier than `tier` (NULL: none asked for) is
 * refused (returns the exit code, message in msg), else 0. */
int plan_check_only(const struct tree *t, const char *only, const char *tier, char *msg,
                    size_t len);
/* The same for a slug to skip ("skip SLUG: ..."). */
int plan_check_skip(const struct tree *t, const char *slug, char *msg, size_t len);

/* What a run knows of a slug it may already have executed: NULL when it has
 * not, "ok" when it succeeded, else why it did not ("failed in this run",
 * "blocked"). */
typedef const char *(*plan_ran_fn)(void *ud, const char *slug);
/* Whether m may run: 0 when every slug it requires is recorded ok, legacy or
 * skipped-fresh-install in l or p's seeds, or ran ok in this run (ran may be
 * NULL); else 1 with "blocked: requires X (state)" in why. The runner asks
 * again before executing, with what actually ran. */
int plan_blocked(const struct plan *p, const struct ledger *l, const struct migration *m,
                 plan_ran_fn ran, void *ud, char *why, size_t len);
const char *step_kind_name(enum step_kind k);
#endif

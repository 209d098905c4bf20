/* status.c: the read-only commands, `plan` and `status`: what a run would
 * do, and the ledger as the runner finds it (their tables are report.c's).
 * Take no lock and write nothing. */
#include "run/runner_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/exitcodes.h"
#include "base/log.h"
#include "client/kubeconfig.h"
#include "run/dispatch.h"
#include "run/report.h"

int runner_plan(const struct runner_opts *o)
{
    struct runner_ctx c;
    struct plan p;
    memset(&p, 0, sizeof p);
    int rc = runner_load_plan(&c, o, &p);
    if (rc == 0) {
        struct report_opts ro = runner_report_opts(o);
        report_plan(&c.t, &c.l, &p, &ro);
    }
    plan_free(&p);
    runner_ctx_free(&c);
    return rc;
}

/* status: the ledger, with the tree when there is one (checksums, order,
 * what run would leave blocked). */
int runner_status(const struct runner_opts *o)
{
    struct runner_ctx c;
    int have_tree = 0;
    struct plan plans[2];
    memset(plans, 0, sizeof plans);
    struct manifest man;
    memset(&man, 0, sizeof man);
    int have_man = 0;
    char err[ERRLINE_MAX];
    int rc = runner_ctx_open(&c, o, 0, &have_tree);
    if (rc != 0 || (rc = runner_read_ledger(&c)) != 0)
        goto out;
    /* The growth budget (docs/internals.md, "The ledger"): past LEDGER_SHRINK_AT it
     * needs a person before it is full. */
    int needs_person = c.l.exists && runner_shrinking(&c);
    /* An absent ledger the Lease says existed: a run refuses (exit 12). */
    char mark[64] = "";
    if (!c.l.exists &&
        lock_read_ledger_mark(c.rest, c.loc.ns, o->k.lease_name, mark, sizeof mark, err,
                              sizeof err) == 0 && *mark)
        log_warn("the ledger %s/%s is absent, but the Lease %s/%s records that this cluster had "
                 "one (uid %s): it was deleted, and a run refuses (exit 12) until it is restored "
                 "(docs/internals.md: The ledger)", c.loc.ns, c.loc.name, c.loc.ns, o->k.lease_name, mark);
    needs_person |= *mark != '\0';
    if (c.l.exists && runner_shrinking(&c))
        log_warn("the ledger %s/%s holds %zu of its %d-byte limit (%zu%%): failed records are "
                 "written shrunk, and a migration whose largest record cannot fit is not run "
                 "(exit 13); make room by running again or skipping the failed migrations "
                 "(docs/internals.md: The ledger, growth budget)", c.loc.ns, c.loc.name, c.l.bytes,
                 LEDGER_LIMIT, c.l.bytes * 100 / LEDGER_LIMIT);
    struct status_view v = {.l = &c.l, .t = have_tree ? &c.t : NULL};
    char *version_problem[2];
    char vp[200], bp[700];
    if (have_tree && c.l.exists) {
        static const char *const tiers[] = {"pre-apply", "background"};
        for (size_t i = 0; i < 2; i++) {
            struct plan_opts po = {.tier = tiers[i], .max_attempts = o->max_attempts,
                                   .now = c.now, .survey = 1, .ns = o->k.ledger_namespace,
                                   .ledger = o->k.ledger_name};
            if (plan_build(&c.t, &c.l, &po, &plans[i]) != 0) {
                log_fatal("out of memory");
                rc = EXIT_FAILED;
                goto out;
            }
        }
        v.plans = plans;
        v.nplans = 2;
        v.problems = plans[0].problems;
        v.nproblems = plans[0].nversion;
    } else if (!have_tree) {
        /* Ordered by a manifest when one can be read, else by time. */
        char dir[4200] = "";
        if (o->dir) /* none: an install without a tree, quietly the ledger alone */
            tree_order_d(o->dir, dir, sizeof dir);
        struct buf merr = BUF_INIT; /* an unreadable manifest: ordered by time instead */
        if (*dir && access(dir, F_OK) == 0 && manifest_load(dir, &man, &merr) == 0) {
            have_man = 1;
            v.man = &man;
        }
        buf_release(&merr);
        if (c.l.version_bad) {
            snprintf(vp, sizeof vp, "key 'version' is \"%s\", not a plain decimal", c.l.version_raw);
            version_problem[v.nproblems++] = vp;
        }
        if (c.l.binary_keys) {
            char cmd[400];
            snprintf(bp, sizeof bp, "key '%s'%s under binaryData, where the engine never looks: "
                     "move each into data, or remove binaryData by hand: %s", c.l.binary_key,
                     c.l.binary_keys > 1 ? " (and more) are" : " is",
                     plan_kubectl_remove(&c.po, "/binaryData", cmd, sizeof cmd));
            version_problem[v.nproblems++] = bp;
        }
        v.problems = version_problem;
    }
    /* The background tier as the dispatcher sees it (its Jobs, retries,
     * backoff), when the chart's index is there. */
    struct bg_view *bg = NULL;
    size_t nbg = 0;
    if (c.l.exists && !o->status_slug && dispatch_survey(c.rest, o, &c.l, &bg, &nbg) == 0) {
        v.bg = bg;
        v.nbg = nbg;
    }
    struct report_opts ro = runner_report_opts(o);
    if (o->status_slug) {
        int r = report_record(&v, o->status_slug, &ro);
        if (r < 0) {
            log_fatal("out of memory");
            rc = EXIT_FAILED;
        } else if (r > 0) {
            log_fatal("%s: no record in the ledger %s/%s%s", o->status_slug, c.loc.ns, c.loc.name,
                      have_tree ? " and no such migration in this image" : "");
            rc = EXIT_FAILED;
        }
        goto out;
    }
    int need = report_status(&v, &ro);
    dispatch_view_free(bg, nbg);
    if (need < 0) {
        log_fatal("out of memory");
        rc = EXIT_FAILED;
    } else if (o->failed_only && (need > 0 || needs_person)) {
        rc = EXIT_FAILED;
    }
out:
    plan_free(&plans[0]);
    plan_free(&plans[1]);
    if (have_man)
        manifest_free(&man);
    runner_ctx_free(&c);
    return rc;
}

int runner_config(const struct runner_opts *o)
{
    struct kube_config kc;
    char err[1024];
    if (kubeconfig_resolve(&o->k.cfg, &kc, err, sizeof err) != 0) {
        log_fatal("%s", err);
        return EXIT_CLUSTER;
    }
    cJSON *d = kubeconfig_describe(&kc);
    int rc = EXIT_OK;
    if (d)
        out_json(d, 1);
    else {
        log_fatal("out of memory");
        rc = EXIT_FAILED;
    }
    cJSON_Delete(d);
    kubeconfig_free(&kc);
    return rc;
}

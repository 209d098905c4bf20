/* context.c: one command's context (runner_int.h's struct runner_ctx),
 * opened and freed for run, skip, plan, status and preview alike (and the
 * options' defaults it starts from): the tree
 * loaded (a header that does not parse fails only what would run it), the
 * connection, the ledger's location, who the runner acts as, how its
 * migrations are launched; then the ledger read and planned. Must never
 * contact the cluster before the tree is judged (a bad tree exits first). */
#include "run/runner_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/exitcodes.h"
#include "base/log.h"
#include "base/util.h"
#include "base/defaults.h"
#include "client/kubeconfig.h"
#include "client/restpool.h"

const int runner_concurrency_max = REST_POOL_MAX;

void runner_opts_defaults(struct runner_opts *o)
{
    memset(o, 0, sizeof *o);
    kube_default_options(&o->k);
    o->tier = "pre-apply";
    o->timeout = DEFAULT_TIMEOUT_S;
    o->lock_timeout = DEFAULT_LOCK_WAIT_S;
    o->lease_duration = DEFAULT_LEASE_S;
    o->grace = DEFAULT_GRACE_S;
    o->max_attempts = DEFAULT_MAX_ATTEMPTS;
    o->memory = (size_t)DEFAULT_MEMORY_MB << 20;
}

struct rest_client *runner_connect(const struct runner_opts *o)
{
    char err[ERRLINE_MAX];
    struct rest_client *c = kube_open(&o->k, log_say, err, sizeof err);
    if (!c)
        log_fatal("%s", err);
    return c;
}

struct report_opts runner_report_opts(const struct runner_opts *o)
{
    struct report_opts r = {.ns = o->k.ledger_namespace, .ledger = o->k.ledger_name,
                            .tier = o->tier, .only = o->only, .dry_run = o->k.dry_run,
                            .output_json = o->output_json, .failed_only = o->failed_only};
    return r;
}

void runner_ctx_free(struct runner_ctx *c)
{
    launch_close(&c->L);
    free(c->ran);
    lock_release(&c->lk);
    ledger_free(&c->l);
    tree_free(&c->t);
    ledger_events_flush(&c->loc); /* before the connection settings go */
    rest_free(c->rest);
}

/* A header that does not parse fails only what would run that script:
 * the whole tier (run, plan, preview: DESIGN "What run does", step 2), or
 * --only of that very slug. --only of another slug, skip (it runs
 * nothing) and status (it reads) go on, saying which headers are broken.
 * 0, or -1 after the fatal line. */
static int headers_gate(struct runner_ctx *c, const struct runner_opts *o, int need_tree)
{
    const struct migration *bad = tree_first_bad(&c->t);
    if (need_tree == TREE_NEEDED && !o->only) {
        log_fatal("%s", bad->header_err);
        return -1;
    }
    const struct migration *own = o->only ? tree_find(&c->t, o->only) : NULL;
    if (need_tree == TREE_NEEDED && own && own->header_err) {
        log_fatal("%s", own->header_err);
        return -1;
    }
    for (size_t i = 0; i < c->t.n; i++)
        if (c->t.m[i].header_err)
            log_warn("%s (it fails only its own runs; `run` of the whole tier refuses it)",
                     c->t.m[i].header_err);
    return 0;
}

int runner_ctx_open(struct runner_ctx *c, const struct runner_opts *o, int need_tree, int *have_tree)
{
    memset(c, 0, sizeof *c);
    launch_init(&c->L);
    c->L.k = &o->k;
    c->L.timeout = o->timeout;
    c->L.grace = o->grace;
    c->L.memory = o->memory;
    c->o = o;
    c->po = (struct plan_opts){.tier = o->tier, .tier_given = o->tier_given, .only = o->only,
                               .ns = o->k.ledger_namespace, .ledger = o->k.ledger_name,
                               .max_attempts = o->max_attempts,
                               .image = o->image, .now = c->now, .force = o->force,
                               .skip = o->skip, .nskip = o->nskip, .skip_reason = o->skip_reason,
                               .installed_at = o->installed_at};
    char err[ERRLINE_MAX];
    /* Without a manifest there is no tree to show (status reads the ledger
     * alone, quietly); a tree that is there but broken is said. */
    char man_dir[4200] = "";
    if (o->dir)
        tree_order_d(o->dir, man_dir, sizeof man_dir);
    int loaded = o->dir && (need_tree || o->manifest || access(man_dir, F_OK) == 0) &&
                 tree_load_with(o->dir, o->manifest, &c->t, err, sizeof err) == 0;
    if (!o->dir)
        snprintf(err, sizeof err, "no migrations tree (--dir)");
    if (have_tree)
        *have_tree = loaded;
    if (!loaded && need_tree) {
        log_fatal("%s", err);
        return EXIT_PACKAGING;
    }
    if (!loaded && *man_dir && access(man_dir, F_OK) == 0)
        log_warn("%s (showing the ledger alone)", err);
    if (loaded && c->t.nbad && headers_gate(c, o, need_tree) != 0)
        return EXIT_PACKAGING;
    if (!(c->rest = runner_connect(o)))
        return EXIT_CLUSTER;
    c->loc = (struct ledger_loc){.rest = c->rest, .ns = o->k.ledger_namespace, .name = o->k.ledger_name};
    kubeconfig_identity(rest_config(c->rest), c->identity, sizeof c->identity);
    c->L.cfg = rest_config(c->rest);
    return 0;
}

int runner_read_and_plan(struct runner_ctx *c, struct plan *p)
{
    int rc;
    plan_free(p);
    if ((rc = runner_read_ledger(c)) != 0 || (rc = runner_check_ledger(c)) != 0)
        return rc;
    now_rfc3339(c->now);
    if (plan_build(&c->t, &c->l, &c->po, p) != 0) {
        log_fatal("out of memory while planning");
        return EXIT_FAILED;
    }
    if (p->refuse) {
        if (p->refuse == EXIT_LEDGER)
            log_fatal("ledger %s/%s: %s", c->loc.ns, c->loc.name, p->refuse_msg);
        else
            log_fatal("%s", p->refuse_msg);
        return p->refuse;
    }
    return 0;
}

int runner_load_plan(struct runner_ctx *c, const struct runner_opts *o, struct plan *p)
{
    int rc = runner_ctx_open(c, o, 1, NULL);
    if (rc == 0)
        rc = runner_fresh_cluster(c, 1);
    return rc ? rc : runner_read_and_plan(c, p);
}

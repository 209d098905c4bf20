/* fresh.c: what a run does before its first migration on a cluster whose
 * ledger is absent or holds only the old hook's `version`: a --local run's
 * questions (how the cluster was installed, --as-installed-at; its
 * namespace, --create-namespace) asked before the lock, and the records
 * seeded under it (skipped-fresh-install for a fresh install, legacy below
 * the old hook's version). Must never seed a ledger the Lease says existed
 * (a deleted one is refused, exit 12), create anything in a dry run or a
 * prediction, or let a --local run on a cluster this engine never ran on
 * decide for itself how it was installed. */
#include "run/runner_int.h"

#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/exitcodes.h"
#include "base/log.h"
#include "formats/manifest.h"

/* The line a local run on a cluster without a ledger stops with (exit 2):
 * what the hook would do there, and the choices, counted from the plans
 * each would make. */
static void explain_fresh(struct runner_ctx *c, int ns_missing)
{
    const struct runner_opts *o = c->o;
    struct ledger none;
    memset(&none, 0, sizeof none);
    struct plan hook, latest;
    struct plan_opts po = c->po;
    po.installed_at = NULL;
    int ok = plan_build(&c->t, &none, &po, &hook) == 0;
    po.installed_at = "latest";
    ok = plan_build(&c->t, &none, &po, &latest) == 0 && ok;
    size_t total = hook.nseed, untagged = 0, run = runner_work_steps(&latest);
    char names[300] = "", untagged_names[300] = "", releases[300] = "";
    size_t at = 0, ut = 0, rt = 0;
    for (size_t i = 0; ok && i < latest.n; i++)
        if (latest.s[i].kind != STEP_SKIP && at < sizeof names)
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", at ? ", " : "",
                                   latest.s[i].slug);
    for (size_t b = 0; b < c->t.man.n; b++) {
        const struct batch *bt = &c->t.man.b[b];
        if (strcmp(bt->name, UNTAGGED_BATCH) == 0) {
            for (size_t i = 0; i < bt->n && ut < sizeof untagged_names; i++, untagged++)
                ut += (size_t)snprintf(untagged_names + ut, sizeof untagged_names - ut, "%s%s",
                                       i ? ", " : "", bt->e[i].slug);
        } else if (rt < sizeof releases) {
            rt += (size_t)snprintf(releases + rt, sizeof releases - rt, "%s%s", rt ? ", " : "",
                                   strchr(bt->name, '-') + 1);
        }
    }
    char mine[400] = "";
    if (untagged)
        snprintf(mine, sizeof mine, " (the untagged too: %s)", untagged_names);
    char latest_does[700];
    if (*latest.installed_at && strcmp(latest.installed_at, "none") != 0)
        snprintf(latest_does, sizeof latest_does, "records the %zu migration%s of the batches up "
                 "to %s and runs the %zu after (%s)", latest.nseed, latest.nseed == 1 ? "" : "s",
                 latest.installed_at, run, *names ? names : "none");
    else
        snprintf(latest_does, sizeof latest_does, "(no release yet) records none and runs %zu "
                 "(%s)", run, *names ? names : "none");
    char nsline[300] = "";
    if (ns_missing)
        snprintf(nsline, sizeof nsline, "; add --create-namespace to create namespace %s",
                 o->k.ledger_namespace);
    log_fatal("--local: the ledger %s/%s is absent%s%s: a cluster this engine never ran on. The "
              "hook would record %s %zu migration%s there skipped-fresh-install and run none%s; a "
              "local run asks how the cluster was installed instead: --as-installed-at latest %s; "
              "--as-installed-at none runs every one%s%s%s%s (nothing was written)",
              c->loc.ns, c->loc.name, ns_missing ? ", and so is its namespace " : "",
              ns_missing ? o->k.ledger_namespace : "", total == 1 ? "its" : "all", total,
              total == 1 ? "" : "s", mine, latest_does, *releases ? "; or name a release (" : "",
              releases, *releases ? ")" : "", nsline);
    plan_free(&hook);
    plan_free(&latest);
}

int runner_fresh_cluster(struct runner_ctx *c, int predict)
{
    const struct runner_opts *o = c->o;
    int local = o->k.cfg.local;
    char err[ERRLINE_MAX];
    if (!local && !predict)
        return 0; /* the hook's run: its namespace exists before it runs */
    struct ledger l;
    struct buf lerr = BUF_INIT; /* unread: the run's own read says what is wrong */
    enum ledger_rc lr = ledger_read(&c->loc, &l, &lerr);
    buf_release(&lerr);
    int exists = l.exists;
    ledger_free(&l);
    if (lr != LEDGER_OK)
        return 0; /* the run's own read says what is wrong */
    if (exists) {
        if (o->installed_at)
            log_info("the ledger %s/%s exists: --as-installed-at applies to a cluster without "
                     "one, and changes nothing here", c->loc.ns, c->loc.name);
        return 0;
    }
    /* A ledger the Lease says existed was deleted: no fresh cluster; the
     * run refuses it under the lock (exit 12), whatever it is told. */
    char mark[64] = "";
    if (lock_read_ledger_mark(c->rest, c->loc.ns, o->k.lease_name, mark, sizeof mark, err,
                              sizeof err) == 0 && *mark)
        return 0;
    struct buf nerr = BUF_INIT; /* unread, as before: an unknown answer is not "absent" */
    int ns = ledger_namespace_exists(&c->loc, &nerr);
    buf_release(&nerr);
    if (!local) {
        if (ns != 0)
            return 0;
        log_fatal("namespace %s does not exist on this cluster, so the run would fail (exit 6): "
                  "its lock and the ledger live there, and the hook's namespace exists before "
                  "it runs (helm install --create-namespace); against a development cluster, "
                  "see run --local --create-namespace", o->k.ledger_namespace);
        return EXIT_CLUSTER;
    }
    if (!o->installed_at) {
        explain_fresh(c, ns == 0);
        return EXIT_USAGE;
    }
    if (ns != 0)
        return 0;
    if (!o->create_namespace) {
        log_fatal("--local: namespace %s does not exist on this cluster: the ledger and the "
                  "runner's lock live there; add --create-namespace to create it (or --namespace "
                  "NS for one that exists)", o->k.ledger_namespace);
        return EXIT_USAGE;
    }
    if (predict) {
        out_line("would create namespace %s (--create-namespace)", o->k.ledger_namespace);
        return 0;
    }
    struct buf cerr = BUF_INIT;
    enum ledger_rc cr = ledger_namespace_create(&c->loc, &cerr);
    if (cr != LEDGER_OK && cr != LEDGER_EXISTS)
        log_fatal("creating namespace %s: %s", o->k.ledger_namespace, buf_str(&cerr));
    buf_release(&cerr);
    if (cr != LEDGER_OK && cr != LEDGER_EXISTS)
        return EXIT_CLUSTER;
    out_line("created namespace %s (--create-namespace)", o->k.ledger_namespace);
    return 0;
}

/* Fresh install and legacy seeding. Returns 0 or an exit code. */
int runner_seed(struct runner_ctx *c, struct plan *p)
{
    const struct runner_opts *o = c->o;
    char err[ERRLINE_MAX];
    char as[300] = "";
    if (*p->installed_at)
        snprintf(as, sizeof as, " %s%s (--as-installed-at %s)",
                 strcmp(p->installed_at, "none") ? "as installed at " : "with no release installed",
                 strcmp(p->installed_at, "none") ? p->installed_at : "", o->installed_at);
    if (p->fresh_install) {
        if (o->k.dry_run) {
            out_line("fresh install%s: would create the ledger %s/%s recording %zu migrations as "
                     "skipped-fresh-install", as, c->loc.ns, c->loc.name, p->nseed);
            return 0;
        }
        int held = runner_hold(c, "creating the ledger");
        if (held != 0)
            return held;
        for (size_t i = 0; i < p->nseed; i++)
            snprintf(p->seed[i].rec.runner, sizeof p->seed[i].rec.runner, "%s", c->lk.holder);
        struct buf cerr = BUF_INIT;
        enum ledger_rc rc = ledger_create(&c->loc, p->seed, p->nseed, &cerr);
        if (rc == LEDGER_FULL)
            log_fatal("creating the ledger %s/%s: its %zu fresh-install records do not fit in "
                      "the %d-byte object limit: %s", c->loc.ns, c->loc.name, p->nseed,
                      LEDGER_LIMIT, buf_str(&cerr));
        if (rc == LEDGER_ERROR || rc == LEDGER_DENIED)
            log_fatal("creating the ledger %s/%s: %s", c->loc.ns, c->loc.name, buf_str(&cerr));
        buf_release(&cerr);
        if (rc == LEDGER_FULL)
            return EXIT_LEDGER_FULL;
        if (rc == LEDGER_ERROR || rc == LEDGER_DENIED)
            return rc == LEDGER_DENIED ? EXIT_DENIED : EXIT_CLUSTER;
        if (rc == LEDGER_EXISTS) {
            /* Someone created it between our read and our create. */
            log_info("the ledger appeared while creating it; reading it again");
            int r2;
            if ((r2 = runner_read_and_plan(c, p)) != 0)
                return r2;
            if (p->fresh_install) {
                log_fatal("the ledger %s/%s exists but cannot be read", c->loc.ns, c->loc.name);
                return EXIT_CLUSTER;
            }
            return runner_seed(c, p);
        }
        if (*p->installed_at)
            out_line("fresh install%s: created the ledger %s/%s, recorded %zu migrations as "
                     "skipped-fresh-install; %zu to run", as, c->loc.ns, c->loc.name, p->nseed,
                     runner_work_steps(p));
        else
            out_line("fresh install: created the ledger %s/%s, recorded %zu migrations as "
                     "skipped-fresh-install; %s%s",
                     c->loc.ns, c->loc.name, p->nseed, o->only ? "running only --only " : "nothing to run",
                     o->only ? o->only : "");
        if (runner_read_ledger(c) == 0) {
            runner_event(c, "Normal", "LedgerCreated", "fresh install: %zu migrations recorded as "
                  "skipped-fresh-install", p->nseed);
            if (c->l.exists && lock_note_ledger(&c->lk, c->l.uid, err, sizeof err) != 0) {
                c->lock_lost = 1;
                log_error("%s", err);
                log_fatal("stopping after creating the ledger: this runner no longer holds the "
                          "lock (exit 5)");
                return EXIT_LOCK;
            }
        }
        return 0;
    }
    if (p->nseed) {
        if (o->k.dry_run) {
            out_line("legacy: would record %zu migrations below version %ld as legacy", p->nseed,
                     c->l.version);
            return 0;
        }
        int held = runner_hold(c, "seeding legacy records");
        if (held != 0)
            return held;
        for (size_t i = 0; i < p->nseed; i++)
            snprintf(p->seed[i].rec.runner, sizeof p->seed[i].rec.runner, "%s", c->lk.holder);
        if ((held = runner_protect_once(c)) != 0)
            return held;
        enum ledger_rc wrc;
        int tries = 0;
        size_t sent = 0;
        struct buf werr = BUF_INIT;
        while ((wrc = ledger_write(&c->loc, p->seed, p->nseed, &sent, &werr)) == LEDGER_CONFLICT)
            if (!runner_after_conflict(c, "seeding legacy records", &tries, &held))
                break;
        if (wrc == LEDGER_FULL)
            log_fatal("seeding legacy records: %zu of them do not fit in the ledger %s/%s "
                      "(%zu of its %d-byte limit used): %s", p->nseed, c->loc.ns, c->loc.name,
                      c->ledger_bytes, LEDGER_LIMIT, buf_str(&werr));
        else if (wrc != LEDGER_OK && wrc != LEDGER_CONFLICT && wrc != LEDGER_GONE)
            log_fatal("seeding legacy records: %s", buf_str(&werr));
        buf_release(&werr);
        if (wrc == LEDGER_CONFLICT)
            return held;
        if (wrc == LEDGER_GONE)
            return runner_ledger_gone(c, "seeding legacy records");
        if (wrc == LEDGER_FULL)
            return EXIT_LEDGER_FULL;
        if (wrc != LEDGER_OK)
            return wrc == LEDGER_DENIED ? EXIT_DENIED : EXIT_CLUSTER;
        c->ledger_bytes += sent;
        out_line("legacy: recorded %zu migrations below version %ld as legacy", p->nseed,
                 c->l.version);
        runner_event(c, "Normal", "LegacySeeded", "%zu legacy migrations below version %ld recorded",
              p->nseed, c->l.version);
    }
    return 0;
}

/* runner.c: executes a plan against the cluster.
 *
 * Owns the order of effects in `run`: validate the tree, take the lease,
 * read the ledger fresh, seed, then for each step run the migration in a
 * child and record the outcome (the parent alone writes the ledger, after
 * the child has ended), with a progress line and an Event each; `skip`
 * through the same opening (runner_session). The read-only `plan` and
 * `status` are status.c's, the ledger writes recording.c's, the context
 * context.c's, a cluster without a ledger and seeding fresh.c's, launching
 * a migration's child (with a shell's gateway) launch.c's; this file says
 * what a step's shell gets (runner_launch_step). Must never record a
 * migration that did not succeed as ok, record anything after an abort,
 * run a slug whose requires did not succeed in the ledger or in this run,
 * or write in dry run. */
#include "run/runner_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/exitcodes.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/stop.h"
#include "base/termlog.h"
#include "base/util.h"
#include "formats/journaldoc.h"
#include "formats/shellreach.h"
#include "formats/tree.h"
#include "client/rest.h"

/* ---- output ------------------------------------------------------------- */

static void progress(size_t k, size_t n, const char *tier, const char *slug, const char *outcome,
                     long ms, const char *detail)
{
    if (log_json()) {
        cJSON *j = cJSON_CreateObject();
        char ts[32];
        now_rfc3339(ts);
        if (j && cJSON_AddStringToObject(j, "ts", ts) && cJSON_AddNumberToObject(j, "step", (double)k) &&
            cJSON_AddNumberToObject(j, "steps", (double)n) && cJSON_AddStringToObject(j, "tier", tier) &&
            cJSON_AddStringToObject(j, "migration", slug) &&
            cJSON_AddStringToObject(j, "outcome", outcome) &&
            (ms < 0 || cJSON_AddNumberToObject(j, "duration_ms", (double)ms)) &&
            (!detail || cJSON_AddStringToObject(j, "detail", detail)))
            out_json(j, 0);
        cJSON_Delete(j);
        return;
    }
    char dur[32] = "";
    if (ms >= 0)
        snprintf(dur, sizeof dur, " (%ld ms)", ms);
    out_line("[%zu/%zu] %s %s ... %s%s%s%s", k, n, tier, slug, outcome, dur, detail ? ": " : "",
             detail ? detail : "");
}

void runner_event(struct runner_ctx *c, const char *type, const char *reason, const char *fmt, ...)
{
    if (c->o->k.dry_run || !c->l.exists)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ledger_event(&c->loc, c->l.uid, type, reason, msg);
}

/* The one line a stop signal ends the run with (the lock released first,
 * so the line can say so). Returns 128 + the signal. */
static int say_stopped(struct runner_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int say_stopped(struct runner_ctx *c, const char *fmt, ...)
{
    char where[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(where, sizeof where, fmt, ap);
    va_end(ap);
    int had = c->lk.held;
    int released = lock_release(&c->lk) == 0;
    if (!c->stop_said)
        log_fatal("stopped by %s %s%s (exit %d)", stop_name(stop_signal()), where,
                  !had ? "" : released ? "; the runner lock is released"
                                      : "; the runner lock could not be released (it expires by itself)",
                  stop_exit_code());
    c->stop_said = 1;
    return stop_exit_code();
}

/* At a step boundary: 0, or the stop line's exit code. */
static int stop_between(struct runner_ctx *c, const char *next)
{
    if (!stop_signal())
        return 0;
    if (next && c->last_slug)
        return say_stopped(c, "after %s, before %s started: nothing more runs", c->last_slug, next);
    if (next)
        return say_stopped(c, "before %s started: nothing ran", next);
    return say_stopped(c, "%s", c->last_slug ? "after the last migration" : "before any migration ran");
}

/* While a child runs: renew, and stop it at once when the lock is lost. */
static int renew_tick(void *ud)
{
    struct runner_ctx *c = ud;
    char err[ERRLINE_MAX];
    if (lock_renew(&c->lk, err, sizeof err) == 0)
        return 0;
    if (!c->lock_lost) {
        c->lock_lost = 1;
        log_error("%s", err);
    }
    return 1;
}

/* ---- operator control: what a shell child reaches, requires, skips ----- */

void runner_launch_step(struct runner_ctx *c, const struct step *s, struct launch *j)
{
    launch_migration(j, &c->L, s->m, s->slug, c->t.root);
    if (!s->m->is_shell)
        return;
    long top = 0;
    for (size_t i = 0; i < c->t.legacy.n; i++)
        if (c->t.legacy.e[i].number > top)
            top = c->t.legacy.e[i].number;
    j->whole_env = 1;
    j->env_in = (struct shell_env_in){
        .ns = c->o->k.ledger_namespace,
        .slug = s->slug,
        .has_version = c->l.has_version,
        .version = c->l.version,
        .top_legacy = top,
        .dry_run_var = c->L.k->dry_run ? s->m->h.dry_run_var : NULL,
        .pass_env = c->o->pass_env,
        .gateway = 1,
        /* KUBECONFIG: the launcher's private file; KUBECACHEDIR: the
         * migration's own (child.h, private_dir) */
    };
    /* Legacy script N stamps N+1 (gateway/stamp.h). */
    for (size_t i = 0; i < c->t.legacy.n; i++)
        if (strcmp(c->t.legacy.e[i].slug, s->slug) == 0)
            j->stamp_allowed = c->t.legacy.e[i].number + 1;
}

/* What happens next after a failure that records nothing, said truly:
 * --only leaves an earlier record as it was. */
static const char *next_time(struct runner_ctx *c, const char *slug)
{
    static char buf[200];
    const struct record *r = ledger_find(&c->l, slug);
    if (c->o->only && r)
        snprintf(buf, sizeof buf, "its earlier record (%s) is left as it was", rec_state_name(r->state));
    else if (c->o->k.dry_run)
        snprintf(buf, sizeof buf, "nothing is recorded (dry run)");
    else
        snprintf(buf, sizeof buf, "nothing is recorded, so it runs again next time");
    return buf;
}

static void note_ran(struct runner_ctx *c, const char *slug, const char *how)
{
    struct ran *nr = mem_grow(c->ran, c->nran + 1, sizeof *nr);
    if (!nr)
        return; /* then it reads as not run: its dependents are blocked */
    c->ran = nr;
    nr[c->nran++] = (struct ran){slug, how};
}

static const char *ran_in_run(void *ud, const char *slug)
{
    struct runner_ctx *c = ud;
    for (size_t i = c->nran; i-- > 0;)
        if (strcmp(c->ran[i].slug, slug) == 0)
            return c->ran[i].how;
    return NULL;
}

/* A step whose requires did not succeed: not run, nothing recorded; an
 * abort one stops the run. */
static int blocked_step(struct runner_ctx *c, const struct step *s, const char *why, size_t k, size_t n,
                        int *blocked_warn)
{
    int abort = s->m && s->m->h.on_error == ON_ERROR_ABORT;
    progress(k, n, s->tier, s->slug, abort ? "NOT RUN (abort)" : "NOT RUN (warn)", -1, why);
    runner_event(c, "Warning", "MigrationBlocked", "%s (%s) not run, on-error=%s: %s", s->slug, s->tier,
          abort ? "abort" : "warn", why);
    note_ran(c, s->slug, "blocked");
    if (abort) {
        log_fatal("%s is %s and its on-error is abort: stopping; %s", s->slug, why,
                  next_time(c, s->slug));
        return EXIT_FAILED;
    }
    *blocked_warn = 1;
    return 0;
}

/* An operator's skip: recorded `skipped`, reason Operator, with who and why. */
static int skipped_step(struct runner_ctx *c, const struct step *s, size_t k, size_t n)
{
    struct record r;
    runner_new_record(c, s, REC_SKIPPED, &r);
    r.attempts = s->prev_attempts;
    snprintf(r.reason, sizeof r.reason, "Operator");
    snprintf(r.message, sizeof r.message, "%s", c->o->skip_reason ? c->o->skip_reason : "");
    utf8_clip(r.message);
    snprintf(r.by, sizeof r.by, "%s", c->identity);
    utf8_clip(r.by);
    if (c->o->k.dry_run) {
        progress(k, n, s->tier, s->slug, "would record skipped (dry run)", -1, r.message);
        return 0;
    }
    int rc = runner_write_record(c, s->slug, &r, 0);
    if (rc != 0)
        return rc;
    progress(k, n, s->tier, s->slug, "skipped by the operator, recorded", -1, r.message);
    runner_event(c, "Warning", "MigrationSkipped", "%s (%s) skipped by %s: %s", s->slug, s->tier, r.by,
          r.message);
    return 0;
}

/* ---- run ---------------------------------------------------------------- */

static const char *ran_in_run(void *ud, const char *slug);

/* Whether this run recorded slug (ok, or failed under on-error=warn). */
static int recorded_in_run(void *ud, const char *slug)
{
    const char *how = ran_in_run(ud, slug);
    return how && strcmp(how, "blocked") != 0;
}

/* An on-error=abort failure of the upgrade records nothing (it runs again
 * next time), so no record can say why it failed: its reason is kept on
 * the ledger (FAILURES_ANNOTATION, ledgerdoc.h) while the slug is pending,
 * for status --failed. Under the lock, like a record; best effort: a
 * failure to keep it is said, and the run ends as it would anyway. */
static void keep_failure(struct runner_ctx *c, const struct step *s, const struct record *r)
{
    if (c->o->k.dry_run || !c->l.exists || c->lock_lost)
        return;
    struct ledger_failure f;
    memset(&f, 0, sizeof f);
    snprintf(f.slug, sizeof f.slug, "%s", s->slug);
    snprintf(f.tier, sizeof f.tier, "%s", s->tier);
    snprintf(f.at, sizeof f.at, "%s", r->at);
    snprintf(f.reason, sizeof f.reason, "%s", r->reason);
    snprintf(f.message, sizeof f.message, "%.*s", (int)sizeof f.message - 1, r->message);
    snprintf(f.runner, sizeof f.runner, "%s", c->lk.holder);
    char *text = ledger_failures_with(&c->l, &f, recorded_in_run, c);
    if (!text) {
        log_warn("out of memory keeping the failure of %s on the ledger", s->slug);
        return;
    }
    size_t bytes = strlen(FAILURES_ANNOTATION) + strlen(text);
    char err[ERRLINE_MAX];
    struct buf werr = BUF_INIT; /* the ledger's refusal, whole */
    enum ledger_rc rc = LEDGER_FULL;
    if (c->ledger_bytes - c->l.failures_bytes + bytes + LEDGER_RESERVE <= LEDGER_LIMIT) {
        if (lock_confirm(&c->lk, err, sizeof err) != 0) {
            c->lock_lost = 1;
            log_error("%s", err);
            free(text);
            return;
        }
        c->loc.deadline = now_mono() + lock_left(&c->lk);
        char what[200];
        snprintf(what, sizeof what, "keeping the failure of %s on the ledger", s->slug);
        int tries = 0, xrc = 0;
        while ((rc = ledger_note_failures(&c->loc, text, &werr)) == LEDGER_CONFLICT)
            if (!runner_after_conflict(c, what, &tries, &xrc))
                break;
    } else {
        buf_setf(&werr, "the ledger is near its size limit");
    }
    if (rc == LEDGER_OK) {
        c->ledger_bytes += bytes - c->l.failures_bytes;
        c->l.failures_bytes = bytes;
    } else if (rc != LEDGER_CONFLICT) {
        log_warn("could not keep the failure of %s on the ledger %s/%s (%s): status --failed "
                 "will not show it; the Event MigrationFailed and this log do", s->slug, c->loc.ns,
                 c->loc.name, buf_str(&werr));
    }
    buf_release(&werr);
    free(text);
}

/* What follows a migration's end: the lock, the progress line, the record,
 * the Event. 0 or an exit code. */
static int finish_step(struct runner_ctx *c, const struct step *s, size_t k, size_t n, struct record *r,
                       int ok, int aborted, const char *summary, int *failed_warn)
{
    const struct runner_opts *o = c->o;
    const struct migration *m = s->m;
    int rc;
    /* The lock first: a migration stopped because the lock was lost (by
     * the tick, or by its own lease watch) did not fail on its own. */
    char err[ERRLINE_MAX];
    if (!o->k.dry_run && !c->lock_lost && lock_confirm(&c->lk, err, sizeof err) != 0) {
        c->lock_lost = 1;
        log_error("%s", err);
    }
    if (!o->k.dry_run && !c->lock_lost)
        c->loc.deadline = now_mono() + lock_left(&c->lk);
    if (c->lock_lost || aborted) {
        log_fatal("lost the runner lock while %s ran: it was stopped and is not recorded "
                  "(it runs again next time)", s->slug);
        return EXIT_LOCK;
    }
    if (ok) {
        progress(k, n, s->tier, s->slug, o->k.dry_run ? "ok (dry run)" : "ok", r->duration_ms,
                 summary);
        if ((rc = runner_write_record(c, s->slug, r, !o->k.dry_run)) != 0)
            return rc;
        runner_event(c, "Normal", "MigrationSucceeded", "%s (%s, batch %s) succeeded in %ld ms%s%s",
              s->slug, s->tier, s->batch, r->duration_ms, summary ? ", " : "",
              summary ? summary : "");
        return 0;
    }
    int abort = m->h.on_error == ON_ERROR_ABORT;
    char detail[1200];
    snprintf(detail, sizeof detail, "%s: %s%s%s%s", r->reason, r->message, summary ? " (" : "",
             summary ? summary : "", summary ? ")" : "");
    utf8_clip(detail);
    progress(k, n, s->tier, s->slug, abort ? "FAILED (abort)" : "FAILED (warn)", r->duration_ms,
             detail);
    runner_event(c, "Warning", "MigrationFailed", "%s (%s) failed, on-error=%s: %s: %s", s->slug, s->tier,
          abort ? "abort" : "warn", r->reason, r->message);
    termlog_failure(s->slug, s->tier, r->reason, r->message);
    /* A background failure is recorded whatever on-error says: its retries
     * (dispatch.h) count the attempts; abort still stops what follows. */
    int background = strcmp(s->tier, "background") == 0;
    if (abort && !background) {
        if (!ledger_find(&c->l, s->slug))
            keep_failure(c, s, r);
        log_fatal("%s failed and its on-error is abort: stopping; %s", s->slug,
                  next_time(c, s->slug));
        return EXIT_FAILED;
    }
    if ((rc = runner_write_record(c, s->slug, r, 0)) != 0)
        return rc;
    if (abort) {
        log_fatal("%s failed and its on-error is abort: recorded failed (attempt %ld); stopping, "
                  "so the background migrations after it wait until it is recorded ok or skipped",
                  s->slug, r->attempts);
        return EXIT_FAILED;
    }
    *failed_warn = 1;
    return 0;
}

/* Whether a hand-over request on the Lease we hold is one to honour: a
 * live runner's (lock.c judged its shape and its age) for a step the
 * upgrade has pending: not a background migration, no record in the
 * ledger we hold (no other runner writes it meanwhile). Says once why
 * one is ignored. */
static int handover_honoured(struct runner_ctx *c, const struct lock_request *rq)
{
    char why[300] = "";
    const struct migration *m = rq->valid ? tree_find(&c->t, rq->step) : NULL;
    const struct record *r = rq->valid ? ledger_find(&c->l, rq->step) : NULL;
    if (!rq->valid)
        snprintf(why, sizeof why, "it is not a runner's request ({\"by\": IDENTITY, \"step\": "
                 "SLUG, \"n\": N})");
    else if (!rq->live)
        snprintf(why, sizeof why, "its writer stopped asking (unchanged for %g lease durations)",
                 LOCK_REQUEST_LIVES);
    else if (m && strcmp(m->tier, "background") == 0)
        snprintf(why, sizeof why, "it names %s, a background migration, not a step of the "
                 "upgrade", rq->step);
    else if (r)
        snprintf(why, sizeof why, "its step %s is recorded already (%s): nothing of the upgrade "
                 "is pending there", rq->step, rec_state_name(r->state));
    if (!*why)
        return 1;
    char key[sizeof c->ignored];
    snprintf(key, sizeof key, "%s|%s", rq->valid ? rq->by : "", why);
    if (strcmp(key, c->ignored) != 0) {
        char text[sizeof rq->text * 4];
        text_escape(rq->text, strlen(rq->text), text, sizeof text, 0);
        log_warn("lock: ignoring the hand-over request on the Lease %s/%s (%s): %s; the "
                 "background tier goes on", c->loc.ns, c->o->k.lease_name, text, why);
        snprintf(c->ignored, sizeof c->ignored, "%s", key);
    }
    return 0;
}

/* A dry run's shell step that connects to another cluster on its own
 * (formats/shellreach.h): its writes there would not be dry runs, so it is
 * not run, and the run says so. */
static int reaches_other_cluster(const struct step *s, size_t k, size_t n)
{
    char reach[600];
    if (shellreach_file(s->m->path, reach, sizeof reach) == 0)
        return 0;
    out_line("[%zu/%zu] %s %s ... unpredictable (not run in a dry run): %s", k, n, s->tier, s->slug,
             reach);
    return 1;
}

static int execute(struct runner_ctx *c, const struct step *s, size_t k, size_t n, int *failed_warn)
{
    const struct runner_opts *o = c->o;
    const struct migration *m = s->m;
    int rc = runner_room_for(c, s);
    if (rc != 0)
        return rc;
    char what[200];
    snprintf(what, sizeof what, "starting %s", s->slug);
    if ((rc = runner_hold(c, what)) != 0)
        return rc;
    /* The upgrade asked for the lock: hand it over here, between two
     * migrations (the one before is recorded), never inside one. */
    const struct lock_request *rq = o->k.dry_run ? NULL : lock_handover(&c->lk);
    if (rq && handover_honoured(c, rq)) {
        char by[256];
        snprintf(by, sizeof by, "%s", rq->by);
        int released = lock_release(&c->lk) == 0;
        out_line("yielded the runner lock to the upgrade (pre-apply runner %s asked for it) %s%s, "
                 "before %s: %s; the next dispatch runs the rest", by,
                 c->last_done ? "after " : "before any migration ran", c->last_done ? c->last_done : "",
                 s->slug, released ? "released" : "it expires by itself");
        runner_event(c, "Normal", "MigrationsYielded", "the background tier handed the runner lock to the "
              "upgrade before %s (asked by %s)", s->slug, by);
        c->yielded = 1;
        return 0;
    }
    /* a shell child's kubectl reaches the runner's cluster only through
     * the runner's gateway, the same door as a Lua migration's requests */
    if (m->is_shell && o->k.dry_run && reaches_other_cluster(s, k, n))
        return 0;
    struct launch j;
    runner_launch_step(c, s, &j);
    if ((rc = launch_prepare(&c->L, &j)) != 0)
        return rc;
    c->L.tick = o->k.dry_run ? NULL : renew_tick;
    c->L.lease_until_us = o->k.dry_run ? NULL : lock_watch(&c->lk);
    /* Often enough to renew well inside the lease, however short it is, and
     * to read the Lease back every LOCK_CHECK_S (lock_renew paces both). */
    c->L.tick_every = o->lease_duration / 8.0 < LOCK_CHECK_S ? o->lease_duration / 8.0 : LOCK_CHECK_S;
    c->L.ud = c;
    if (!log_json())
        out_line("[%zu/%zu] %s %s ... running%s%s%s", k, n, s->tier, s->slug,
                 *s->why ? " (" : "", s->why, *s->why ? ")" : "");
    struct child_result res;
    launch_run(&c->L, &j, &res);
    if (stop_signal()) {
        /* Whatever it reported, it ran while the runner was told to stop:
         * nothing is recorded for it. */
        child_result_free(&res);
        return say_stopped(c, "while %s %s ran: it was stopped and is not recorded (it runs again "
                           "next time)", s->tier, s->slug);
    }
    struct record r;
    int ok = res.outcome == CHILD_OK;
    runner_new_record(c, s, ok ? REC_OK : REC_FAILED, &r);
    r.attempts = s->prev_attempts + 1;
    r.duration_ms = res.duration_ms;
    /* An ok record carries the journal's counts, a failed one the journal
     * itself (bounded), so an operator can tell what it touched. */
    char summary[64] = "";
    if (res.journal) {
        size_t writes, changed;
        journal_log_counts(res.journal, &writes, &changed);
        r.journaled = 1;
        r.writes = (long)writes;
        r.changed = (long)changed;
        journal_summary(writes, changed, summary, sizeof summary);
    }
    c->stamp = -1;
    if (ok && res.stamped) {
        snprintf(r.stamp, sizeof r.stamp, "version=%ld", res.stamp);
        c->stamp = res.stamp;
    }
    if (!ok) {
        snprintf(r.reason, sizeof r.reason, "%s", res.reason ? res.reason : "Failed");
        snprintf(r.message, sizeof r.message, "%s", res.message);
        /* A shell that failed after the door refused one of its requests:
         * the refusal is what an operator needs to read. */
        if (*res.gw_refusal && strcmp(r.reason, "ExitCode") == 0) {
            snprintf(r.reason, sizeof r.reason, "%s", res.gw_refusal_reason);
            snprintf(r.message, sizeof r.message, "%.100s after the runner's gateway refused %.700s%s",
                     res.message, res.gw_refusal,
                     res.gw_refused > 1 ? " (and more, counted in the output)" : "");
        }
        utf8_clip(r.message);
        record_set_output(&r, res.tail);
        /* the tree made once from the child's log, the record's from here */
        record_set_journal(&r, res.journal ? journal_log_json(res.journal) : NULL, RECORD_JOURNAL_CAP);
    }
    int aborted = res.outcome == CHILD_ABORTED;
    child_result_free(&res);
    rc = finish_step(c, s, k, n, &r, ok, aborted, *summary ? summary : NULL, failed_warn);
    record_free(&r);
    return rc;
}

/* The steps that do something (a STEP_SKIP only says why nothing does). */
size_t runner_work_steps(const struct plan *p)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->s[i].kind != STEP_SKIP)
            n++;
    return n;
}

static void say_nothing_to_run(const struct runner_ctx *c)
{
    if (!log_json())
        out_line("nothing to run for the %s tier", c->o->only ? "requested" : c->o->tier);
}

static int run_steps(struct runner_ctx *c, struct plan *p)
{
    size_t n = runner_work_steps(p), k = 0;
    int failed_warn = 0, blocked_warn = 0;
    for (size_t i = 0; i < p->n; i++) {
        const struct step *s = &p->s[i];
        if (s->kind == STEP_SKIP)
            continue;
        k++;
        int stopped = stop_between(c, s->slug);
        if (stopped)
            return stopped;
        c->last_slug = s->slug;
        if (s->kind == STEP_RECORD_REVOKED) {
            struct record r;
            runner_new_record(c, s, REC_REVOKED, &r);
            progress(k, n, s->tier, s->slug,
                     c->o->k.dry_run ? "revoked, would record revoked (dry run)" : "revoked, recorded",
                     -1, NULL);
            int rc = runner_write_record(c, s->slug, &r, 0);
            if (rc != 0)
                return rc;
            runner_event(c, "Normal", "MigrationRevoked", "%s is revoked and will never run", s->slug);
            continue;
        }
        /* operator: skips are recorded, requires re-checked with what ran */
        int rc;
        char why[160];
        if (s->kind == STEP_RECORD_SKIPPED) {
            if ((rc = skipped_step(c, s, k, n)) != 0)
                return rc;
            continue;
        }
        if (s->kind == STEP_BLOCKED ||
            (!(c->o->only && c->o->force) && plan_blocked(p, &c->l, s->m, ran_in_run, c, why, sizeof why))) {
            if ((rc = blocked_step(c, s, s->kind == STEP_BLOCKED ? s->why : why, k, n, &blocked_warn)) != 0)
                return rc;
            continue;
        }
        int fw = 0;
        rc = execute(c, s, k, n, &fw);
        if (c->yielded)
            return 0;
        note_ran(c, s->slug, fw ? "failed in this run" : "ok");
        c->last_done = s->slug;
        failed_warn |= fw;
        if (rc != 0)
            return rc;
    }
    if (n == 0)
        say_nothing_to_run(c);
    if ((failed_warn || blocked_warn) && c->o->only)
        return EXIT_FAILED;
    return 0;
}

/* Who this run is on the lock (lock.h "hand-over"): the upgrade (the
 * pre-apply tier, or --only of a pre-apply slug) goes first; the background
 * tier (a dispatched Job's --only of a background slug too) yields to it;
 * skip neither asks nor yields. */
static enum lock_role lock_role(const struct runner_ctx *c)
{
    const struct runner_opts *o = c->o;
    if (c->po.skip_only)
        return LOCK_ROLE_NONE;
    const struct migration *m = o->only ? tree_find(&c->t, o->only) : NULL;
    const char *tier = m ? m->tier : o->tier;
    return strcmp(tier, "background") == 0 ? LOCK_ROLE_BACKGROUND : LOCK_ROLE_PRE_APPLY;
}

/* The runner lock, for run and skip: 0, or an exit code after saying why. */
static int take_lock(struct runner_ctx *c)
{
    const struct runner_opts *o = c->o;
    char err[ERRLINE_MAX];
    int busy = 0;
    const char *step = o->only ? o->only : c->ask_step;
    if (lock_acquire(&c->lk, c->rest, o->k.ledger_namespace, o->k.lease_name, lock_role(c), step,
                     o->lease_duration, o->lock_timeout, &busy, err, sizeof err) != 0) {
        if (stop_signal())
            return say_stopped(c, "while waiting for the runner lock %s/%s: nothing ran",
                               o->k.ledger_namespace, o->k.lease_name);
        if (busy == LOCK_YIELD) {
            out_line("the runner lock %s/%s is %s: the background tier yields to the upgrade; "
                     "nothing ran (the next dispatch runs it)", o->k.ledger_namespace,
                     o->k.lease_name, err);
            c->yielded = 1;
            return EXIT_OK;
        }
        if (busy)
            log_fatal("the runner lock %s/%s is %s; gave up after %gs", o->k.ledger_namespace,
                      o->k.lease_name, err, o->lock_timeout);
        else
            log_fatal("%s", err);
        return busy ? EXIT_LOCK : EXIT_CLUSTER;
    }
    return 0;
}

/* For run and skip: the lock taken (none in dry run), then the ledger read
 * fresh, since the previous holder may just have written it, and planned;
 * the planner's warnings said. 0 or an exit code. */
static int lock_and_plan(struct runner_ctx *c, struct plan *p)
{
    int rc;
    if (!c->o->k.dry_run && ((rc = take_lock(c)) != 0 || c->yielded))
        return rc;
    if ((rc = runner_read_and_plan(c, p)) != 0)
        return rc;
    for (size_t i = 0; i < p->nwarnings; i++)
        log_warn("%s", p->warnings[i]);
    if (c->o->k.dry_run)
        return 0;
    /* No Lease, while the ledger carries the protection a runner gives it
     * as soon as it holds the lock (below): a runner held the Lease before
     * (it outlives every run), so someone deleted it, maybe by force under
     * a live holder. That holder notices within a round trip (its watch) or
     * a read-back; its migration in flight is given that long to stop
     * before this run starts one (lock.h). */
    if (c->lk.created && c->l.exists && c->l.protected_) {
        log_info("lock: there was no lease %s/%s, yet a runner held it on this ledger before: it "
                 "was deleted; waiting %gs so that a runner still holding it stops first",
                 c->o->k.ledger_namespace, c->o->k.lease_name, LOCK_NEW_LEASE_GRACE_S);
        char err[ERRLINE_MAX];
        /* held meanwhile: renewed as a short lease needs */
        for (double end = now_mono() + LOCK_NEW_LEASE_GRACE_S; now_mono() < end && !stop_signal();) {
            if (lock_renew(&c->lk, err, sizeof err) != 0) {
                c->lock_lost = 1;
                log_error("%s", err);
                log_fatal("stopping before any migration: this runner no longer holds the lock "
                          "(exit 5)");
                return EXIT_LOCK;
            }
            double left = end - now_mono();
            rest_sleep(left < 0.05 ? left : 0.05);
        }
    }
    /* Protected before anything runs, so that "protected" says a runner
     * held the lock on this ledger (the wait above), even one whose Lease
     * was deleted during its first migration. */
    if (c->l.exists && !c->l.protected_ && ((rc = runner_hold(c, "labelling the ledger")) != 0 ||
                                            (rc = runner_protect_once(c)) != 0))
        return rc;
    return 0;
}

/* A run with nothing to do takes no lock: the lock keeps two runners from
 * executing or recording at once, and this one would do neither. One read of
 * the ledger, without the lock, is planned; when the plan has no step, no
 * record to seed and nothing refused, and the Lease already carries this
 * ledger's mark (so a deleted ledger is still told from a fresh install,
 * exit 12) and the ledger its protection, that is the run: what a read
 * shows done stays done, since records are only added (under the lock) and
 * a pending one makes the next run take the lock. Anything else (an error
 * included) returns 0, and the run goes the locked way, which reads again
 * and says what is wrong. 1 when the run is over. */
static int idle_unlocked(struct runner_ctx *c, struct plan *p)
{
    char err[ERRLINE_MAX], mark[64] = "";
    ledger_free(&c->l);
    struct buf lerr = BUF_INIT; /* unread: the locked way reads again and says it */
    enum ledger_rc lr = ledger_read(&c->loc, &c->l, &lerr);
    buf_release(&lerr);
    if (lr != LEDGER_OK || !c->l.exists)
        return 0;
    now_rfc3339(c->now);
    plan_free(p);
    /* planned even when the run goes the locked way: its first step is
     * what a hand-over request names */
    if (plan_build(&c->t, &c->l, &c->po, p) != 0 || p->refuse || p->corrupt || p->fresh_install ||
        p->nseed || runner_work_steps(p) || !c->l.protected_)
        return 0;
    if (lock_read_ledger_mark(c->rest, c->loc.ns, c->o->k.lease_name, mark, sizeof mark, err,
                              sizeof err) != 0 || strcmp(mark, c->l.uid) != 0)
        return 0;
    for (size_t i = 0; i < p->nwarnings; i++)
        log_warn("%s", p->warnings[i]);
    say_nothing_to_run(c);
    return 1;
}

/* What runner_run and runner_skip do once their context is open; each
 * returns an exit code, and says why when it is not 0. */
typedef int (*runner_body)(struct runner_ctx *c, struct plan *p);
/* After a stop signal: the line that says where the command stopped. */
typedef int (*runner_stopped)(struct runner_ctx *c, int rc);

/* The one opening and closing of a command that works under the lock:
 * the context (tree, cluster, ledger location) opened, body run, a stop
 * said, everything freed. */
static int runner_session(const struct runner_opts *o, int need_tree, runner_body body,
                          runner_stopped stopped)
{
    struct runner_ctx c;
    struct plan p;
    memset(&p, 0, sizeof p);
    int rc = runner_ctx_open(&c, o, need_tree, NULL);
    if (rc == 0)
        rc = body(&c, &p);
    if (stop_signal())
        rc = stopped(&c, rc);
    plan_free(&p);
    runner_ctx_free(&c);
    return rc;
}

/* The run's account in the termination message (termlog_done): where its
 * seconds went from the process's start, so a hook's time can be told
 * from its pod's start (make cluster-test prints both). started: the
 * process's start on the monotonic clock; steps, steps_end: the
 * migrations' (0: none ran). */
static void say_timings(double started, double steps, double steps_end, int ran)
{
    double end = now_mono();
    char line[256];
    if (!steps)
        steps = steps_end = end;
    snprintf(line, sizeof line,
             "ok: %d step%s in %.3f s from the process's start: start-up %.3f s "
             "(configuration, tree, index, ledger, lock), migrations %.3f s, the rest %.3f s",
             ran, ran == 1 ? "" : "s", end - started, steps - started, steps_end - steps,
             end - steps_end);
    termlog_done(line);
}

/* When the migrations of a run started and ended, and how many there were. */
struct run_times {
    double steps, steps_end;
    int ran;
};

static int run_work(struct runner_ctx *c, struct plan *p, struct run_times *tm)
{
    const struct runner_opts *o = c->o;
    char err[ERRLINE_MAX];
    int rc;
    if ((rc = runner_index_check_release(c)) != 0)
        return rc;
    /* A request the image cannot serve is refused before waiting for the
     * lock another runner may hold. */
    if (o->only && (rc = plan_check_only(&c->t, o->only, o->tier_given ? o->tier : NULL, err,
                                         sizeof err)) != 0) {
        log_fatal("%s", err);
        return rc;
    }
    if ((rc = runner_fresh_cluster(c, o->k.dry_run)) != 0)
        return rc;
    if (!o->k.dry_run && !o->only && idle_unlocked(c, p))
        return 0;
    /* The step a hand-over request names: the first this run has to do, as
     * a read without the lock plans it (lock.h "hand-over"). */
    for (size_t i = 0; i < p->n && !*c->ask_step; i++)
        if (p->s[i].kind == STEP_RUN || p->s[i].kind == STEP_RECORD_REVOKED)
            snprintf(c->ask_step, sizeof c->ask_step, "%s", p->s[i].slug);
    if ((rc = lock_and_plan(c, p)) != 0 || c->yielded || (rc = runner_seed(c, p)) != 0)
        return rc;
    /* A ledger that cannot be trusted was refused by the planner before
     * anything ran; what is left here is the repair (--only, SKIP) of a bad
     * record, the others reported in the warnings above. A fresh install
     * runs nothing, unless a local run said how the cluster was installed. */
    if (!p->fresh_install || o->only || *p->installed_at) {
        tm->steps = now_mono();
        rc = run_steps(c, p);
        tm->steps_end = now_mono();
        tm->ran = (int)runner_work_steps(p);
    }
    return rc;
}

static int run_body(struct runner_ctx *c, struct plan *p)
{
    double age = util_process_age();
    double started = now_mono() - (age > 0 ? age : 0);
    struct run_times tm = {0, 0, 0};
    int rc = run_work(c, p, &tm);
    if (rc == 0 && !c->o->k.dry_run && !stop_signal())
        say_timings(started, tm.steps, tm.steps_end, tm.ran);
    return rc;
}

/* A stop that cut a request short ends here, with its line. */
static int run_stopped(struct runner_ctx *c, int rc)
{
    (void)rc;
    return stop_between(c, NULL);
}

int runner_run(const struct runner_opts *o)
{
    return runner_session(o, 1, run_body, run_stopped);
}

/* skip SLUG --reason TEXT: one record, under the lock, nothing run. */
static int skip_body(struct runner_ctx *c, struct plan *p)
{
    char err[ERRLINE_MAX];
    int rc;
    c->po.skip_only = 1;
    /* A slug the image cannot skip is refused before waiting for the lock. */
    if ((rc = plan_check_skip(&c->t, c->o->skip[0], err, sizeof err)) != 0) {
        log_fatal("%s", err);
        return rc;
    }
    if ((rc = lock_and_plan(c, p)) != 0)
        return rc;
    for (size_t i = 0; rc == 0 && i < p->n; i++) {
        if (p->s[i].kind == STEP_RECORD_SKIPPED)
            rc = skipped_step(c, &p->s[i], 1, 1);
        else
            out_line("%s is already %s with this reason; nothing to write", p->s[i].slug,
                     p->s[i].why);
    }
    return rc;
}

static int skip_stopped(struct runner_ctx *c, int rc)
{
    return say_stopped(c, "%s", rc == 0 ? "after the skip was recorded"
                                        : "before the skip was recorded: nothing recorded");
}

int runner_skip(const struct runner_opts *o)
{
    return runner_session(o, TREE_NEEDED_ANY_HEADER, skip_body, skip_stopped);
}

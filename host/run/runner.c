/* runner.c: executes a plan against the cluster.
 *
 * Owns the order of effects in `run`: validate the tree, take the lease,
 * read the ledger fresh, seed, then for each step run the migration in a
 * child and record the outcome (the parent alone writes the ledger, after
 * the child has ended), with a progress line and an Event each; `skip`
 * through the same opening (runner_session). The read-only `plan` and
 * `status` are status.c's, the ledger writes recording.c's, launching a
 * migration's child (with a shell's gateway) launch.c's; this file says
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
#include "base/paths.h"
#include "formats/journaldoc.h"
#include "formats/shellreach.h"
#include "kube/kubeconfig.h"
#include "base/log.h"
#include "kube/rest.h"
#include "base/stop.h"
#include "formats/tree.h"
#include "base/util.h"
#include "base/termlog.h"

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

/* An Event on the ledger; none in dry run or before the ledger exists. */
static void event(struct runner_ctx *c, const char *type, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void event(struct runner_ctx *c, const char *type, const char *reason, const char *fmt, ...)
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
    /* Legacy script N stamps N+1 (kube/stamp.h). */
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
    struct ran *nr = realloc(c->ran, (c->nran + 1) * sizeof *nr);
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
    event(c, "Warning", "MigrationBlocked", "%s (%s) not run, on-error=%s: %s", s->slug, s->tier,
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
    event(c, "Warning", "MigrationSkipped", "%s (%s) skipped by %s: %s", s->slug, s->tier, r.by,
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
        while ((rc = ledger_note_failures(&c->loc, text, err, sizeof err)) == LEDGER_CONFLICT)
            if (!runner_after_conflict(c, what, &tries, &xrc))
                break;
    } else {
        snprintf(err, sizeof err, "the ledger is near its size limit");
    }
    if (rc == LEDGER_OK) {
        c->ledger_bytes += bytes - c->l.failures_bytes;
        c->l.failures_bytes = bytes;
    } else if (rc != LEDGER_CONFLICT) {
        log_warn("could not keep the failure of %s on the ledger %s/%s (%s): status --failed "
                 "will not show it; the Event MigrationFailed and this log do", s->slug, c->loc.ns,
                 c->loc.name, err);
    }
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
        event(c, "Normal", "MigrationSucceeded", "%s (%s, batch %s) succeeded in %ld ms%s%s",
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
    event(c, "Warning", "MigrationFailed", "%s (%s) failed, on-error=%s: %s: %s", s->slug, s->tier,
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
        event(c, "Normal", "MigrationsYielded", "the background tier handed the runner lock to the "
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
        if (res.tail) {
            size_t tl = strlen(res.tail);
            const char *from = tl >= sizeof r.output ? res.tail + tl - (sizeof r.output - 1) : res.tail;
            snprintf(r.output, sizeof r.output, "%s", utf8_start(from));
        }
        cJSON *jn = res.journal ? journal_log_json(res.journal) : NULL;
        record_set_journal(&r, jn, RECORD_JOURNAL_CAP);
        cJSON_Delete(jn);
    }
    int aborted = res.outcome == CHILD_ABORTED;
    child_result_free(&res);
    rc = finish_step(c, s, k, n, &r, ok, aborted, *summary ? summary : NULL, failed_warn);
    return rc;
}

/* The steps that do something (a STEP_SKIP only says why nothing does). */
static size_t work_steps(const struct plan *p)
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
    size_t n = work_steps(p), k = 0;
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
            event(c, "Normal", "MigrationRevoked", "%s is revoked and will never run", s->slug);
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

/* Fresh install and legacy seeding. Returns 0 or an exit code. */
static int seed(struct runner_ctx *c, struct plan *p)
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
        enum ledger_rc rc = ledger_create(&c->loc, p->seed, p->nseed, err, sizeof err);
        if (rc == LEDGER_FULL) {
            log_fatal("creating the ledger %s/%s: its %zu fresh-install records do not fit in "
                      "the %d-byte object limit: %s", c->loc.ns, c->loc.name, p->nseed,
                      LEDGER_LIMIT, err);
            return EXIT_LEDGER_FULL;
        }
        if (rc == LEDGER_ERROR || rc == LEDGER_DENIED) {
            log_fatal("creating the ledger %s/%s: %s", c->loc.ns, c->loc.name, err);
            return rc == LEDGER_DENIED ? EXIT_DENIED : EXIT_CLUSTER;
        }
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
            return seed(c, p);
        }
        if (*p->installed_at)
            out_line("fresh install%s: created the ledger %s/%s, recorded %zu migrations as "
                     "skipped-fresh-install; %zu to run", as, c->loc.ns, c->loc.name, p->nseed,
                     work_steps(p));
        else
            out_line("fresh install: created the ledger %s/%s, recorded %zu migrations as "
                     "skipped-fresh-install; %s%s",
                     c->loc.ns, c->loc.name, p->nseed, o->only ? "running only --only " : "nothing to run",
                     o->only ? o->only : "");
        if (runner_read_ledger(c) == 0) {
            event(c, "Normal", "LedgerCreated", "fresh install: %zu migrations recorded as "
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
        while ((wrc = ledger_write(&c->loc, p->seed, p->nseed, &sent, err, sizeof err)) ==
               LEDGER_CONFLICT)
            if (!runner_after_conflict(c, "seeding legacy records", &tries, &held))
                return held;
        if (wrc == LEDGER_GONE)
            return runner_ledger_gone(c, "seeding legacy records");
        if (wrc == LEDGER_FULL) {
            log_fatal("seeding legacy records: %zu of them do not fit in the ledger %s/%s "
                      "(%zu of its %d-byte limit used): %s", p->nseed, c->loc.ns, c->loc.name,
                      c->ledger_bytes, LEDGER_LIMIT, err);
            return EXIT_LEDGER_FULL;
        }
        if (wrc != LEDGER_OK) {
            log_fatal("seeding legacy records: %s", err);
            return wrc == LEDGER_DENIED ? EXIT_DENIED : EXIT_CLUSTER;
        }
        c->ledger_bytes += sent;
        out_line("legacy: recorded %zu migrations below version %ld as legacy", p->nseed,
                 c->l.version);
        event(c, "Normal", "LegacySeeded", "%zu legacy migrations below version %ld recorded",
              p->nseed, c->l.version);
    }
    return 0;
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

int runner_load_plan(struct runner_ctx *c, const struct runner_opts *o, struct plan *p)
{
    int rc = runner_ctx_open(c, o, 1, NULL);
    if (rc == 0)
        rc = runner_fresh_cluster(c, 1);
    return rc ? rc : runner_read_and_plan(c, p);
}

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
    size_t total = hook.nseed, untagged = 0, run = work_steps(&latest);
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
    enum ledger_rc lr = ledger_read(&c->loc, &l, err, sizeof err);
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
    int ns = ledger_namespace_exists(&c->loc, err, sizeof err);
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
    enum ledger_rc cr = ledger_namespace_create(&c->loc, err, sizeof err);
    if (cr != LEDGER_OK && cr != LEDGER_EXISTS) {
        log_fatal("creating namespace %s: %s", o->k.ledger_namespace, err);
        return EXIT_CLUSTER;
    }
    out_line("created namespace %s (--create-namespace)", o->k.ledger_namespace);
    return 0;
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
    if (ledger_read(&c->loc, &c->l, err, sizeof err) != LEDGER_OK || !c->l.exists)
        return 0;
    now_rfc3339(c->now);
    plan_free(p);
    /* planned even when the run goes the locked way: its first step is
     * what a hand-over request names */
    if (plan_build(&c->t, &c->l, &c->po, p) != 0 || p->refuse || p->corrupt || p->fresh_install ||
        p->nseed || work_steps(p) || !c->l.protected_)
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
    if ((rc = lock_and_plan(c, p)) != 0 || c->yielded || (rc = seed(c, p)) != 0)
        return rc;
    /* A ledger that cannot be trusted was refused by the planner before
     * anything ran; what is left here is the repair (--only, SKIP) of a bad
     * record, the others reported in the warnings above. A fresh install
     * runs nothing, unless a local run said how the cluster was installed. */
    if (!p->fresh_install || o->only || *p->installed_at) {
        tm->steps = now_mono();
        rc = run_steps(c, p);
        tm->steps_end = now_mono();
        tm->ran = (int)work_steps(p);
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

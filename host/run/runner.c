/* runner.c: executes a plan against the cluster.
 *
 * Owns the order of effects in `run`: validate the tree, take the lease,
 * read the ledger fresh, seed, then for each step run the migration in a
 * child and record the outcome (the parent alone writes the ledger, after
 * the child has ended), with a progress line and an Event each. Also the
 * read-only `plan` and `status` (their tables are report.c's), and `skip`.
 * Also what a shell child may reach: a private kubeconfig of the runner's
 * own context. Must never record a migration that did not succeed as ok,
 * record anything after an abort, run a slug whose requires did not succeed
 * in the ledger or in this run, or write in dry run. */
#include "run/runner.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run/child.h"
#include "base/defaults.h"
#include "base/exitcodes.h"
#include "kube/journal.h"
#include "kube/kubeconfig.h"
#include "run/ledger.h"
#include "run/lock.h"
#include "base/log.h"
#include "run/plan.h"
#include "run/report.h"
#include "kube/rest.h"
#include "base/stop.h"
#include "formats/tree.h"
#include "base/util.h"
#include "run/dispatch.h"
#include "base/termlog.h"

struct ctx {
    const struct runner_opts *o;
    struct rest_client *rest;
    struct ledger_loc loc;
    struct tree t;
    struct ledger l;
    struct lock lk;
    struct plan_opts po;
    char now[32];           /* po.now: refreshed before each record */
    size_t ledger_bytes;
    int size_warned;        /* the 80% warning is given once a run */
    int lock_lost;
    int stop_said;          /* the stop line was printed */
    const char *last_slug;  /* the last step begun, for the stop line */
    const char *last_done;  /* the last migration executed and recorded */
    struct ran { const char *slug; const char *how; } *ran; /* what this run executed */
    size_t nran;
    char identity[256];     /* who the runner acts as, for skipped records (record.by) */
    int yielded;            /* the background run handed the lock to the upgrade */
};

static struct rest_client *connect_cluster(const struct runner_opts *o)
{
    char err[ERRLINE_MAX];
    struct rest_policy p = {o->k.request_timeout, o->k.max_attempts, o->k.retry_budget};
    struct rest_client *c = rest_new(&o->k.cfg, &p, err, sizeof err);
    if (!c)
        log_fatal("%s", err);
    return c;
}

static struct report_opts report_opts(const struct runner_opts *o)
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
static void event(struct ctx *c, const char *type, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void event(struct ctx *c, const char *type, const char *reason, const char *fmt, ...)
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

/* ---- ledger access ------------------------------------------------------ */

static int read_ledger(struct ctx *c)
{
    char err[ERRLINE_MAX];
    ledger_free(&c->l);
    enum ledger_rc rc = ledger_read(&c->loc, &c->l, err, sizeof err);
    if (rc != LEDGER_OK) {
        log_fatal("%s", err);
        return rc == LEDGER_UNTRUSTED ? EXIT_LEDGER : EXIT_CLUSTER;
    }
    c->ledger_bytes = c->l.bytes;
    return 0;
}

/* How to get a deleted ledger back, for the messages of exit 12. */
static void restore_advice(const struct ctx *c, char *buf, size_t len)
{
    snprintf(buf, len, "restore it from a backup, or create it empty (kubectl create configmap %s "
             "-n %s, with --from-literal=version=N if the cluster was at legacy version N) so that "
             "the next run runs every migration again (they are idempotent)", c->loc.name, c->loc.ns);
}

/* A record write found the ledger gone: exit 12, saying so. */
static int ledger_gone(struct ctx *c, const char *what)
{
    char how[600];
    restore_advice(c, how, sizeof how);
    log_fatal("%s: the ledger %s/%s was deleted during the run (NotFound): nothing more runs or "
              "is recorded. To go on, %s; until then every run refuses (exit 12), since the "
              "Lease %s/%s records that this cluster had a ledger", what, c->loc.ns, c->loc.name,
              how, c->loc.ns, c->o->k.lease_name);
    return EXIT_LEDGER_GONE;
}

/* After a read: an absent ledger where the Lease records that this cluster
 * had one is refused (a fresh install would record every migration
 * skipped-fresh-install, the ones that never ran among them); a present one
 * read under the lock gets its uid recorded in the Lease (lock.h "ledger").
 * 0 or an exit code. */
static int check_ledger(struct ctx *c)
{
    char err[ERRLINE_MAX], mark[64] = "";
    int locked = c->lk.held && !c->o->k.dry_run;
    if (!c->l.exists) {
        if (locked)
            snprintf(mark, sizeof mark, "%s", c->lk.mark);
        else if (lock_read_ledger_mark(c->rest, c->loc.ns, c->o->k.lease_name, mark, sizeof mark,
                                       err, sizeof err) != 0)
            log_warn("cannot tell whether this cluster had a ledger before (%s)", err);
        if (!*mark)
            return 0;
        char how[600];
        restore_advice(c, how, sizeof how);
        log_fatal("the ledger %s/%s is absent, but the Lease %s/%s records that this cluster had "
                  "one (uid %s): it was deleted, and nothing runs, since a fresh install would "
                  "record every migration skipped-fresh-install, those that never ran among them "
                  "(exit 12). To go on, %s; for a cluster really installed anew, remove the mark "
                  "(kubectl annotate lease %s -n %s %s-)", c->loc.ns, c->loc.name, c->loc.ns,
                  c->o->k.lease_name, mark, how, c->o->k.lease_name, c->loc.ns,
                  LOCK_LEDGER_ANNOTATION);
        return EXIT_LEDGER_GONE;
    }
    if (!locked)
        return 0;
    if (lock_note_ledger(&c->lk, c->l.uid, err, sizeof err) != 0) {
        c->lock_lost = 1;
        log_error("%s", err);
        log_fatal("stopping before any migration: this runner no longer holds the lock (exit 5)");
        return EXIT_LOCK;
    }
    return 0;
}

static int hold(struct ctx *c, const char *what);

/* After a ledger write answered LEDGER_CONFLICT: someone wrote the ledger
 * since this runner last saw it. Either a shell migration of this run (its
 * `kubectl apply` of `version`), or another runner that took the lock over
 * while this one was stopped, in which case the write must not land. The
 * Lease tells which: 1 when it is still ours and at->rv was read afresh
 * (write again), 0 with *rc the exit code otherwise. */
static int after_conflict(struct ctx *c, const char *what, int *tries, int *rc)
{
    char err[ERRLINE_MAX];
    if (++*tries > 3) {
        log_fatal("%s: the ledger %s/%s changed under this runner at every try (409 Conflict): "
                  "something besides the runner and its migrations writes it", what, c->loc.ns,
                  c->loc.name);
        *rc = EXIT_CLUSTER;
        return 0;
    }
    if ((*rc = hold(c, what)) != 0)
        return 0;
    enum ledger_rc lrc = ledger_refresh(&c->loc, err, sizeof err);
    if (lrc == LEDGER_GONE) {
        *rc = ledger_gone(c, what);
        return 0;
    }
    if (lrc != LEDGER_OK) {
        log_fatal("%s: %s", what, err);
        *rc = EXIT_CLUSTER;
        return 0;
    }
    log_info("%s: the ledger changed since this runner last read it (resourceVersion now %s); "
             "the lock is still held, so it writes again", what, c->loc.rv);
    return 1;
}

/* Before the run's first write to a ledger the engine did not create (an
 * older chart rendered it): its no-delete label and keep annotation, one
 * metadata merge patch. A refusal is said and the write goes on. 0, or
 * EXIT_LEDGER_GONE. */
static int protect_once(struct ctx *c)
{
    if (c->l.protected_ || !c->l.exists)
        return 0;
    char err[ERRLINE_MAX];
    enum ledger_rc rc;
    int tries = 0, xrc = 0;
    while ((rc = ledger_protect(&c->loc, err, sizeof err)) == LEDGER_CONFLICT)
        if (!after_conflict(c, "labelling the ledger", &tries, &xrc))
            return xrc;
    if (rc == LEDGER_GONE)
        return ledger_gone(c, "labelling the ledger");
    if (rc != LEDGER_OK)
        log_warn("could not give the ledger %s/%s its no-delete label and keep annotation: %s",
                 c->loc.ns, c->loc.name, err);
    c->l.protected_ = 1; /* tried once a run */
    return 0;
}

/* The one line a stop signal ends the run with (the lock released first,
 * so the line can say so). Returns 128 + the signal. */
static int say_stopped(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int say_stopped(struct ctx *c, const char *fmt, ...)
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
static int stop_between(struct ctx *c, const char *next)
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
    struct ctx *c = ud;
    char err[ERRLINE_MAX];
    if (lock_renew(&c->lk, err, sizeof err) == 0)
        return 0;
    if (!c->lock_lost) {
        c->lock_lost = 1;
        log_error("%s", err);
    }
    return 1;
}

/* Before a migration starts and before a record is written: do we still
 * hold the lock? 0, or EXIT_LOCK after saying so. A write that follows may
 * take only as long as the hold is certain. */
static int hold(struct ctx *c, const char *what)
{
    if (c->o->k.dry_run)
        return 0;
    char err[ERRLINE_MAX];
    if (!c->lock_lost && lock_confirm(&c->lk, err, sizeof err) == 0) {
        c->loc.deadline = now_mono() + lock_left(&c->lk);
        return 0;
    }
    if (!c->lock_lost) {
        c->lock_lost = 1;
        log_error("%s", err);
    }
    log_fatal("stopping before %s: this runner no longer holds the lock; nothing more is "
              "recorded (exit 5)", what);
    return EXIT_LOCK;
}

static void new_record(struct ctx *c, const struct step *s, enum rec_state st, struct record *r);

/* The bytes slug's record takes in the ledger as read (0 when none): a
 * new record of it replaces them. */
static size_t old_bytes(const struct ctx *c, const char *slug)
{
    const struct ledger_entry *e = ledger_find_entry(&c->l, slug);
    return e ? e->bytes : 0;
}

/* Past LEDGER_SHRINK_AT failed records are written shrunk (record.h). */
static int shrinking(const struct ctx *c) { return c->ledger_bytes > LEDGER_SHRINK_AT; }

/* The ledger has no room for a record: exit 13, naming the size, the limit
 * and the way out. */
static int ledger_full(struct ctx *c, const char *slug, size_t need, size_t have, int ran)
{
    log_fatal("%s %s: its record may take up to %zu bytes, and the ledger %s/%s holds %zu of "
              "its %d-byte limit (%d kept free): %s. Make room: failed records are the large "
              "ones (cozy-migrate status --failed); running each again once fixed (run --only "
              "SLUG) or skipping it (cozy-migrate skip SLUG --reason TEXT) rewrites it in a few "
              "hundred bytes (README: The ledger, growth budget)", ran ? "recording" : "not running",
              slug, need, c->loc.ns, c->loc.name, have, LEDGER_LIMIT, LEDGER_RESERVE,
              ran ? "the apiserver refused it as too large; it is not recorded and runs again next time"
                  : "it would run with no room to record its outcome, so nothing ran (exit 13)");
    return EXIT_LEDGER_FULL;
}

/* Before a migration runs: room for the largest record its outcome can
 * write (an ok one; a failed one too unless on-error=abort, which records
 * nothing on failure), shrunk when the ledger is past LEDGER_SHRINK_AT. */
static int room_for(struct ctx *c, const struct step *s)
{
    if (c->o->k.dry_run)
        return 0;
    struct record *base = malloc(sizeof *base);
    if (!base) {
        log_fatal("out of memory");
        return EXIT_FAILED;
    }
    new_record(c, s, REC_OK, base);
    snprintf(base->runner, sizeof base->runner, "%s", c->lk.holder);
    int may_fail = s->m && (s->m->h.on_error != ON_ERROR_ABORT || strcmp(s->tier, "background") == 0);
    size_t max = record_max_bytes(base, may_fail, shrinking(c));
    free(base);
    size_t need = ledger_key_bytes(s->slug) + max;
    size_t have = c->ledger_bytes - old_bytes(c, s->slug);
    if (max && have + need + LEDGER_RESERVE <= LEDGER_LIMIT)
        return 0;
    return ledger_full(c, s->slug, need, c->ledger_bytes, 0);
}

/* 0, EXIT_LOCK (the lock is gone: not written), EXIT_LEDGER_GONE,
 * EXIT_LEDGER_FULL, EXIT_DENIED (admission refused it) or EXIT_CLUSTER. held: the lock was confirmed for this
 * write just before (finish_step). */
static int write_record(struct ctx *c, const char *slug, struct record *r, int held)
{
    if (c->o->k.dry_run)
        return 0;
    char what[200];
    snprintf(what, sizeof what, "recording %s", slug);
    int rc = held ? 0 : hold(c, what);
    if (rc != 0)
        return rc;
    if ((rc = protect_once(c)) != 0)
        return rc;
    char err[ERRLINE_MAX];
    snprintf(r->runner, sizeof r->runner, "%s", c->lk.holder);
    if (r->state == REC_FAILED && shrinking(c))
        record_shrink(r);
    struct ledger_entry e = {.slug = (char *)slug, .rec = *r};
    enum ledger_rc lrc;
    int tries = 0;
    while ((lrc = ledger_write(&c->loc, &e, 1, err, sizeof err)) == LEDGER_CONFLICT)
        if (!after_conflict(c, what, &tries, &rc))
            return rc;
    if (lrc == LEDGER_GONE)
        return ledger_gone(c, what);
    if (lrc == LEDGER_FULL)
        return ledger_full(c, slug, ledger_entry_bytes(&e, 1), c->ledger_bytes, 1);
    if (lrc == LEDGER_UNAVAILABLE) {
        /* Retried as long as the lock is certain, and no longer: a record
         * landing after another runner took over would lie. When the hold
         * lapsed meanwhile (the runner was stopped mid-write), that is the
         * cause the operator needs to read, not the timeout. */
        char lerr[ERRLINE_MAX];
        if (!c->lock_lost && lock_renew(&c->lk, lerr, sizeof lerr) != 0) {
            c->lock_lost = 1;
            log_error("%s", lerr);
        }
        log_fatal("recording %s: not confirmed while this runner held the lock (%s); it runs "
                  "again next time (exit 5)", slug, err);
        return EXIT_LOCK;
    }
    if (lrc != LEDGER_OK) {
        log_fatal("recording %s: %s", slug, err);
        return lrc == LEDGER_DENIED ? EXIT_DENIED : EXIT_CLUSTER;
    }
    c->ledger_bytes += ledger_entry_bytes(&e, 1) - old_bytes(c, slug);
    if (!c->size_warned && shrinking(c)) {
        c->size_warned = 1;
        log_warn("the ledger %s/%s holds about %zu KiB, past 80%% of the 1 MiB object limit: "
                 "failed records are written shrunk from now on (README: The ledger, growth budget)",
                 c->loc.ns, c->loc.name, c->ledger_bytes / 1024);
    }
    return 0;
}

/* A record for step s, stamped now. */
static void new_record(struct ctx *c, const struct step *s, enum rec_state st, struct record *r)
{
    now_rfc3339(c->now);
    plan_record(&c->t, s, &c->po, st, r);
}

/* ---- operator control: what a shell child reaches, requires, skips ----- */

/* KUBECONFIG=<a private kubeconfig of the runner's context> in env, for a
 * shell child (kp removes it afterwards). 0, or -1 after reporting. */
static int shell_kubeconfig(struct ctx *c, struct kube_private *kp, char *env, size_t len)
{
    char err[ERRLINE_MAX];
    if (kubeconfig_private_write(rest_config(c->rest), kp, err, sizeof err) != 0) {
        log_fatal("%s", err);
        return -1;
    }
    snprintf(env, len, "KUBECONFIG=%s", kp->path);
    return 0;
}

/* What happens next after a failure that records nothing, said truly:
 * --only leaves an earlier record as it was. */
static const char *next_time(struct ctx *c, const char *slug)
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

static void note_ran(struct ctx *c, const char *slug, const char *how)
{
    struct ran *nr = realloc(c->ran, (c->nran + 1) * sizeof *nr);
    if (!nr)
        return; /* then it reads as not run: its dependents are blocked */
    c->ran = nr;
    nr[c->nran++] = (struct ran){slug, how};
}

static const char *ran_in_run(void *ud, const char *slug)
{
    struct ctx *c = ud;
    for (size_t i = c->nran; i-- > 0;)
        if (strcmp(c->ran[i].slug, slug) == 0)
            return c->ran[i].how;
    return NULL;
}

/* A step whose requires did not succeed: not run, nothing recorded; an
 * abort one stops the run. */
static int blocked_step(struct ctx *c, const struct step *s, const char *why, size_t k, size_t n,
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
static int skipped_step(struct ctx *c, const struct step *s, size_t k, size_t n)
{
    struct record r;
    new_record(c, s, REC_SKIPPED, &r);
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
    int rc = write_record(c, s->slug, &r, 0);
    if (rc != 0)
        return rc;
    progress(k, n, s->tier, s->slug, "skipped by the operator, recorded", -1, r.message);
    event(c, "Warning", "MigrationSkipped", "%s (%s) skipped by %s: %s", s->slug, s->tier, r.by,
          r.message);
    return 0;
}

/* ---- run ---------------------------------------------------------------- */

/* The environment of a shell migration: what the old hook gave its scripts
 * (NAMESPACE, CURRENT_VERSION: the ledger's legacy integer, TARGET_VERSION:
 * one past the highest legacy number), MIGRATION_SLUG, the dry-run variable
 * its header names, what a shell and kubectl need from the runner's own
 * (PATH, HOME, locale, proxies, the in-cluster service host), and every
 * variable --pass-env / PASS_ENV names (a chart value such as a skip-backup
 * switch). Nothing else of the runner's environment reaches it. */
#define SHELL_ENV_MAX 96
struct shell_env {
    char *v[SHELL_ENV_MAX + 1];
    char buf[16384];
    size_t used, n;
};

/* Sets name=value; a later value of the same name replaces the earlier
 * one, so what the runner sets itself always wins (one entry per name:
 * which of two a program reads is its own choice). */
static int env_add(struct shell_env *e, const char *name, const char *value)
{
    if (!value)
        return 0;
    size_t need = strlen(name) + strlen(value) + 2, nl = strlen(name);
    if (e->used + need > sizeof e->buf)
        return -1;
    char *at = e->buf + e->used;
    snprintf(at, need, "%s=%s", name, value);
    for (size_t i = 0; i < e->n; i++)
        if (strncmp(e->v[i], name, nl) == 0 && e->v[i][nl] == '=') {
            e->used += need;
            e->v[i] = at;
            return 0;
        }
    if (e->n == SHELL_ENV_MAX)
        return -1;
    e->used += need;
    e->v[e->n++] = at;
    e->v[e->n] = NULL;
    return 0;
}

/* kubeconfig: "KUBECONFIG=<the private one>", or "" to pass the runner's. */
static int shell_env(struct ctx *c, const struct step *s, const char *kubeconfig,
                     struct shell_env *e)
{
    static const char *const keep[] = {
        "PATH", "HOME", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "KUBECONFIG",
        "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBERNETES_SERVICE_PORT_HTTPS",
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy", NULL};
    memset(e, 0, sizeof *e);
    char cur[32] = "", target[32];
    long top = 0;
    for (size_t i = 0; i < c->t.legacy.n; i++)
        if (c->t.legacy.e[i].number > top)
            top = c->t.legacy.e[i].number;
    snprintf(target, sizeof target, "%ld", top + 1);
    if (c->l.has_version)
        snprintf(cur, sizeof cur, "%ld", c->l.version);
    int bad = 0;
    for (const char *const *k = keep; *k; k++)
        if (!(*kubeconfig && strcmp(*k, "KUBECONFIG") == 0))
            bad |= env_add(e, *k, getenv(*k));
    const char *list = c->o->pass_env;
    while (list && *list) {
        size_t len = strcspn(list, ",");
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), list);
        if (*name)
            bad |= env_add(e, name, getenv(name));
        list += len + (list[len] == ',');
    }
    bad |= env_add(e, "NAMESPACE", c->o->k.ledger_namespace);
    bad |= env_add(e, "MIGRATION_SLUG", s->slug);
    bad |= env_add(e, "CURRENT_VERSION", cur);
    bad |= env_add(e, "TARGET_VERSION", target);
    if (c->o->k.dry_run && s->m && *s->m->h.dry_run_var)
        bad |= env_add(e, s->m->h.dry_run_var, "1");
    /* Last: the cluster identity is the runner's, whatever --pass-env says
     * (main.c refuses such names too). */
    if (*kubeconfig)
        bad |= env_add(e, "KUBECONFIG", kubeconfig + strlen("KUBECONFIG="));
    return bad ? -1 : 0;
}

/* What follows a migration's end: the lock, the progress line, the record,
 * the Event. 0 or an exit code. */
static int finish_step(struct ctx *c, const struct step *s, size_t k, size_t n, struct record *r,
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
        if ((rc = write_record(c, s->slug, r, !o->k.dry_run)) != 0)
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
        log_fatal("%s failed and its on-error is abort: stopping; %s", s->slug,
                  next_time(c, s->slug));
        return EXIT_FAILED;
    }
    if ((rc = write_record(c, s->slug, r, 0)) != 0)
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

static int execute(struct ctx *c, const struct step *s, size_t k, size_t n, int *failed_warn)
{
    const struct runner_opts *o = c->o;
    const struct migration *m = s->m;
    if (o->k.dry_run && m->is_shell && !*m->h.dry_run_var) {
        progress(k, n, s->tier, s->slug, "not dry-runnable (shell, no dry-run= header), not executed",
                 -1, NULL);
        return 0;
    }
    int rc = room_for(c, s);
    if (rc != 0)
        return rc;
    char what[200];
    snprintf(what, sizeof what, "starting %s", s->slug);
    if ((rc = hold(c, what)) != 0)
        return rc;
    /* The upgrade asked for the lock: hand it over here, between two
     * migrations (the one before is recorded), never inside one. */
    const char *asked = o->k.dry_run ? NULL : lock_handover(&c->lk);
    if (asked) {
        char by[256];
        snprintf(by, sizeof by, "%s", asked);
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
    /* a shell child's kubectl reaches the runner's cluster only, as the
     * runner's identity */
    char env_kc[sizeof ((struct kube_private *)0)->path + 16] = "";
    struct kube_private kp;
    memset(&kp, 0, sizeof kp);
    if (m->is_shell && shell_kubeconfig(c, &kp, env_kc, sizeof env_kc) != 0)
        return EXIT_CLUSTER;
    struct shell_env se;
    if (m->is_shell && shell_env(c, s, env_kc, &se) != 0) {
        kubeconfig_private_remove(&kp);
        log_fatal("%s: the environment for its shell does not fit", s->slug);
        return EXIT_FAILED;
    }
    char workdir[4096];
    snprintf(workdir, sizeof workdir, "%s/legacy-sh", c->t.root);
    struct child_spec spec = {
        .slug = s->slug,
        .path = m->path,
        .is_shell = m->is_shell,
        .workdir = m->is_shell ? workdir : NULL,
        .env = m->is_shell ? se.v : NULL,
        .env_only = 1,
        .timeout_s = o->timeout > 0 ? o->timeout : m->h.timeout > 0 ? m->h.timeout : DEFAULT_TIMEOUT_S,
        .grace_s = o->grace,
        .lua_mem_limit = o->memory,
        .kube = &o->k,
        .tick = o->k.dry_run ? NULL : renew_tick,
        .lease_until_us = o->k.dry_run ? NULL : lock_watch(&c->lk),
        /* Often enough to renew well inside the lease, however short it
         * is, and to read the Lease back every LOCK_CHECK_S (lock_renew
         * paces both). */
        .tick_every = o->lease_duration / 8.0 < LOCK_CHECK_S ? o->lease_duration / 8.0 : LOCK_CHECK_S,
        .ud = c,
        .remove_on_orphan = *kp.path ? kp.path : NULL, /* operator */
    };
    if (!log_json())
        out_line("[%zu/%zu] %s %s ... running%s%s%s", k, n, s->tier, s->slug,
                 *s->why ? " (" : "", s->why, *s->why ? ")" : "");
    struct child_result res;
    child_run(&spec, &res);
    kubeconfig_private_remove(&kp);
    if (stop_signal()) {
        /* Whatever it reported, it ran while the runner was told to stop:
         * nothing is recorded for it. */
        child_result_free(&res);
        return say_stopped(c, "while %s %s ran: it was stopped and is not recorded (it runs again "
                           "next time)", s->tier, s->slug);
    }
    struct record r;
    int ok = res.outcome == CHILD_OK;
    new_record(c, s, ok ? REC_OK : REC_FAILED, &r);
    r.attempts = s->prev_attempts + 1;
    r.duration_ms = res.duration_ms;
    /* An ok record carries the journal's counts, a failed one the journal
     * itself (bounded), so an operator can tell what it touched. */
    char summary[64] = "";
    cJSON *jn = res.journal ? cJSON_Parse(res.journal) : NULL;
    if (jn) {
        r.journaled = 1;
        r.writes = (long)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(jn, "writes"));
        r.changed = (long)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(jn, "changed"));
        journal_summary((size_t)r.writes, (size_t)r.changed, summary, sizeof summary);
        cJSON_Delete(jn);
    }
    if (!ok) {
        snprintf(r.reason, sizeof r.reason, "%s", res.reason ? res.reason : "Failed");
        snprintf(r.message, sizeof r.message, "%s", res.message);
        utf8_clip(r.message);
        if (res.tail) {
            size_t tl = strlen(res.tail);
            const char *from = tl >= sizeof r.output ? res.tail + tl - (sizeof r.output - 1) : res.tail;
            snprintf(r.output, sizeof r.output, "%s", utf8_start(from));
        }
        record_set_journal(&r, res.journal, RECORD_JOURNAL_CAP);
    }
    int aborted = res.outcome == CHILD_ABORTED;
    child_result_free(&res);
    rc = finish_step(c, s, k, n, &r, ok, aborted, *summary ? summary : NULL, failed_warn);
    return rc;
}

static int run_steps(struct ctx *c, struct plan *p)
{
    size_t n = 0, k = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->s[i].kind != STEP_SKIP)
            n++;
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
            new_record(c, s, REC_REVOKED, &r);
            progress(k, n, s->tier, s->slug,
                     c->o->k.dry_run ? "revoked, would record revoked (dry run)" : "revoked, recorded",
                     -1, NULL);
            int rc = write_record(c, s->slug, &r, 0);
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
    if (n == 0 && !log_json())
        out_line("nothing to run for the %s tier", c->o->only ? "requested" : c->o->tier);
    if ((failed_warn || blocked_warn) && c->o->only)
        return EXIT_FAILED;
    return 0;
}

/* Reads the ledger and plans; a refusal is reported. 0 or an exit code. */
static int read_and_plan(struct ctx *c, struct plan *p)
{
    int rc;
    plan_free(p);
    if ((rc = read_ledger(c)) != 0 || (rc = check_ledger(c)) != 0)
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
static int seed(struct ctx *c, struct plan *p)
{
    const struct runner_opts *o = c->o;
    char err[ERRLINE_MAX];
    if (p->fresh_install) {
        if (o->k.dry_run) {
            out_line("fresh install: would create the ledger %s/%s recording %zu migrations as "
                     "skipped-fresh-install", c->loc.ns, c->loc.name, p->nseed);
            return 0;
        }
        int held = hold(c, "creating the ledger");
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
            if ((r2 = read_and_plan(c, p)) != 0)
                return r2;
            if (p->fresh_install) {
                log_fatal("the ledger %s/%s exists but cannot be read", c->loc.ns, c->loc.name);
                return EXIT_CLUSTER;
            }
            return seed(c, p);
        }
        out_line("fresh install: created the ledger %s/%s, recorded %zu migrations as "
                 "skipped-fresh-install; %s%s",
                 c->loc.ns, c->loc.name, p->nseed, o->only ? "running only --only " : "nothing to run",
                 o->only ? o->only : "");
        if (read_ledger(c) == 0) {
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
        int held = hold(c, "seeding legacy records");
        if (held != 0)
            return held;
        for (size_t i = 0; i < p->nseed; i++)
            snprintf(p->seed[i].rec.runner, sizeof p->seed[i].rec.runner, "%s", c->lk.holder);
        if ((held = protect_once(c)) != 0)
            return held;
        enum ledger_rc wrc;
        int tries = 0;
        while ((wrc = ledger_write(&c->loc, p->seed, p->nseed, err, sizeof err)) == LEDGER_CONFLICT)
            if (!after_conflict(c, "seeding legacy records", &tries, &held))
                return held;
        if (wrc == LEDGER_GONE)
            return ledger_gone(c, "seeding legacy records");
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
        c->ledger_bytes += ledger_entry_bytes(p->seed, p->nseed);
        out_line("legacy: recorded %zu migrations below version %ld as legacy", p->nseed,
                 c->l.version);
        event(c, "Normal", "LegacySeeded", "%zu legacy migrations below version %ld recorded",
              p->nseed, c->l.version);
    }
    return 0;
}

static void ctx_free(struct ctx *c)
{
    free(c->ran);
    lock_release(&c->lk);
    ledger_free(&c->l);
    tree_free(&c->t);
    rest_free(c->rest);
}

/* The tree first (a bad one exits before any cluster contact), then the
 * connection. Returns 0 or an exit code, with c ready to free either way.
 * need_tree 0: a tree that does not load is reported and left empty. */
static int open_ctx(struct ctx *c, const struct runner_opts *o, int need_tree, int *have_tree)
{
    memset(c, 0, sizeof *c);
    c->o = o;
    c->po = (struct plan_opts){.tier = o->tier, .tier_given = o->tier_given, .only = o->only,
                               .ns = o->k.ledger_namespace, .ledger = o->k.ledger_name,
                               .max_attempts = o->max_attempts,
                               .image = o->image, .now = c->now, .force = o->force,
                               .skip = o->skip, .nskip = o->nskip, .skip_reason = o->skip_reason};
    char err[ERRLINE_MAX];
    /* Without a manifest there is no tree to show (status reads the ledger
     * alone, quietly); a tree that is there but broken is said. */
    char man_dir[4200];
    snprintf(man_dir, sizeof man_dir, "%s/migrations/order.d", o->dir);
    int loaded = (need_tree || access(man_dir, F_OK) == 0) &&
                 tree_load(o->dir, &c->t, err, sizeof err) == 0;
    if (have_tree)
        *have_tree = loaded;
    if (!loaded && need_tree) {
        log_fatal("%s", err);
        return EXIT_PACKAGING;
    }
    if (!loaded && access(man_dir, F_OK) == 0)
        log_warn("%s (showing the ledger alone)", err);
    if (!(c->rest = connect_cluster(o)))
        return EXIT_CLUSTER;
    c->loc = (struct ledger_loc){.rest = c->rest, .ns = o->k.ledger_namespace, .name = o->k.ledger_name};
    kubeconfig_identity(rest_config(c->rest), c->identity, sizeof c->identity);
    return 0;
}

/* Who this run is on the lock (lock.h "hand-over"): the upgrade (the
 * pre-apply tier, or --only of a pre-apply slug) goes first; the background
 * tier (a dispatched Job's --only of a background slug too) yields to it;
 * skip neither asks nor yields. */
static enum lock_role lock_role(const struct ctx *c)
{
    const struct runner_opts *o = c->o;
    if (c->po.skip_only)
        return LOCK_ROLE_NONE;
    const struct migration *m = o->only ? tree_find(&c->t, o->only) : NULL;
    const char *tier = m ? m->tier : o->tier;
    return strcmp(tier, "background") == 0 ? LOCK_ROLE_BACKGROUND : LOCK_ROLE_PRE_APPLY;
}

/* The runner lock, for run and skip: 0, or an exit code after saying why. */
static int take_lock(struct ctx *c)
{
    const struct runner_opts *o = c->o;
    char err[ERRLINE_MAX];
    int busy = 0;
    if (lock_acquire(&c->lk, c->rest, o->k.ledger_namespace, o->k.lease_name, lock_role(c),
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
static int lock_and_plan(struct ctx *c, struct plan *p)
{
    int rc;
    if (!c->o->k.dry_run && ((rc = take_lock(c)) != 0 || c->yielded))
        return rc;
    if ((rc = read_and_plan(c, p)) != 0)
        return rc;
    for (size_t i = 0; i < p->nwarnings; i++)
        log_warn("%s", p->warnings[i]);
    return 0;
}

int runner_run(const struct runner_opts *o)
{
    struct ctx c;
    struct plan p;
    memset(&p, 0, sizeof p);
    char err[ERRLINE_MAX];
    int rc = open_ctx(&c, o, 1, NULL);
    if (rc != 0)
        goto out;
    /* A request the image cannot serve is refused before waiting for the
     * lock another runner may hold. */
    if (o->only && (rc = plan_check_only(&c.t, o->only, o->tier_given ? o->tier : NULL, err,
                                         sizeof err)) != 0) {
        log_fatal("%s", err);
        goto out;
    }
    if ((rc = lock_and_plan(&c, &p)) != 0 || c.yielded || (rc = seed(&c, &p)) != 0)
        goto out;
    /* A ledger that cannot be trusted was refused by the planner before
     * anything ran; what is left here is the repair (--only, SKIP) of a bad
     * record, the others reported in the warnings above. */
    if (!p.fresh_install || o->only)
        rc = run_steps(&c, &p);
out:
    /* A stop that cut a request short ends here, with its line. */
    if (stop_signal())
        rc = stop_between(&c, NULL);
    plan_free(&p);
    ctx_free(&c);
    return rc;
}

int runner_plan(const struct runner_opts *o)
{
    struct ctx c;
    struct plan p;
    memset(&p, 0, sizeof p);
    int rc = open_ctx(&c, o, 1, NULL);
    if (rc == 0 && (rc = read_and_plan(&c, &p)) == 0) {
        struct report_opts ro = report_opts(o);
        report_plan(&c.t, &c.l, &p, &ro);
    }
    plan_free(&p);
    ctx_free(&c);
    return rc;
}

/* status: the ledger, with the tree when there is one (checksums, order,
 * what run would leave blocked). */
int runner_status(const struct runner_opts *o)
{
    struct ctx c;
    int have_tree = 0;
    struct plan plans[2];
    memset(plans, 0, sizeof plans);
    struct manifest man;
    memset(&man, 0, sizeof man);
    int have_man = 0;
    char err[ERRLINE_MAX];
    int rc = open_ctx(&c, o, 0, &have_tree);
    if (rc != 0 || (rc = read_ledger(&c)) != 0)
        goto out;
    /* The growth budget (README "The ledger"): past LEDGER_SHRINK_AT it
     * needs a person before it is full. */
    int needs_person = c.l.exists && shrinking(&c);
    /* An absent ledger the Lease says existed: a run refuses (exit 12). */
    char mark[64] = "";
    if (!c.l.exists &&
        lock_read_ledger_mark(c.rest, c.loc.ns, o->k.lease_name, mark, sizeof mark, err,
                              sizeof err) == 0 && *mark)
        log_warn("the ledger %s/%s is absent, but the Lease %s/%s records that this cluster had "
                 "one (uid %s): it was deleted, and a run refuses (exit 12) until it is restored "
                 "(README: The ledger)", c.loc.ns, c.loc.name, c.loc.ns, o->k.lease_name, mark);
    needs_person |= *mark != '\0';
    if (c.l.exists && shrinking(&c))
        log_warn("the ledger %s/%s holds %zu of its %d-byte limit (%zu%%): failed records are "
                 "written shrunk, and a migration whose largest record cannot fit is not run "
                 "(exit 13); make room by running again or skipping the failed migrations "
                 "(README: The ledger, growth budget)", c.loc.ns, c.loc.name, c.l.bytes,
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
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/migrations/order.d", o->dir);
        if (access(dir, F_OK) == 0 && manifest_load(dir, &man, err, sizeof err) == 0) {
            have_man = 1;
            v.man = &man;
        }
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
    struct report_opts ro = report_opts(o);
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
    ctx_free(&c);
    return rc;
}

/* skip SLUG --reason TEXT: one record, under the lock, nothing run. */
int runner_skip(const struct runner_opts *o)
{
    struct ctx c;
    struct plan p;
    memset(&p, 0, sizeof p);
    char err[ERRLINE_MAX];
    int rc = open_ctx(&c, o, 1, NULL);
    if (rc != 0)
        goto out;
    c.po.skip_only = 1;
    /* A slug the image cannot skip is refused before waiting for the lock. */
    if ((rc = plan_check_skip(&c.t, o->skip[0], err, sizeof err)) != 0) {
        log_fatal("%s", err);
        goto out;
    }
    if ((rc = lock_and_plan(&c, &p)) != 0)
        goto out;
    for (size_t i = 0; rc == 0 && i < p.n; i++) {
        if (p.s[i].kind == STEP_RECORD_SKIPPED)
            rc = skipped_step(&c, &p.s[i], 1, 1);
        else
            out_line("%s is already %s with this reason; nothing to write", p.s[i].slug,
                     p.s[i].why);
    }
out:
    if (stop_signal())
        rc = say_stopped(&c, "%s", rc == 0 ? "after the skip was recorded"
                                           : "before the skip was recorded: nothing recorded");
    plan_free(&p);
    ctx_free(&c);
    return rc;
}

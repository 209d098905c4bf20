/* recording.c: the runner's side of the ledger: reading it fresh, and
 * every write a run makes to it under the lock (see runner_int.h).
 *
 * Owns: refusing an absent ledger the Lease says existed (exit 12); the
 * lock confirmed before every write, a write bounded by how long the hold
 * is certain; a conflicting write (the ledger changed since it was read)
 * written again only while the Lease is still ours; the growth budget
 * (room for the largest record before a migration runs, failed records
 * shrunk past LEDGER_SHRINK_AT, exit 13 when there is none); and the one
 * label-and-annotation patch a ledger an older chart rendered gets. Must
 * never write after the lock is lost, nor in dry run. */
#include "run/runner_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/exitcodes.h"
#include "base/log.h"
#include "base/util.h"

int runner_read_ledger(struct runner_ctx *c)
{
    struct buf err = BUF_INIT;
    ledger_free(&c->l);
    enum ledger_rc rc = ledger_read(&c->loc, &c->l, &err);
    if (rc != LEDGER_OK)
        log_fatal("%s", buf_str(&err));
    buf_release(&err);
    if (rc != LEDGER_OK)
        return rc == LEDGER_UNTRUSTED ? EXIT_LEDGER : EXIT_CLUSTER;
    c->ledger_bytes = c->l.bytes;
    return 0;
}

/* How to get a deleted ledger back, for the messages of exit 12. */
static void restore_advice(const struct runner_ctx *c, char *buf, size_t len)
{
    snprintf(buf, len, "restore it from a backup, or create it empty (kubectl create configmap %s "
             "-n %s, with --from-literal=version=N if the cluster was at legacy version N) so that "
             "the next run runs every migration again (they are idempotent)", c->loc.name, c->loc.ns);
}

/* A record write found the ledger gone: exit 12, saying so. */
int runner_ledger_gone(struct runner_ctx *c, const char *what)
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
int runner_check_ledger(struct runner_ctx *c)
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

/* After a ledger write answered LEDGER_CONFLICT: someone wrote the ledger
 * since this runner last saw it. Either a shell migration of this run (its
 * `kubectl apply` of `version`), or another runner that took the lock over
 * while this one was stopped, in which case the write must not land. The
 * Lease tells which: 1 when it is still ours and at->rv was read afresh
 * (write again), 0 with *rc the exit code otherwise. */
int runner_after_conflict(struct runner_ctx *c, const char *what, int *tries, int *rc)
{
    if (++*tries > 3) {
        log_fatal("%s: the ledger %s/%s changed under this runner at every try (409 Conflict): "
                  "something besides the runner and its migrations writes it", what, c->loc.ns,
                  c->loc.name);
        *rc = EXIT_CLUSTER;
        return 0;
    }
    if ((*rc = runner_hold(c, what)) != 0)
        return 0;
    struct buf err = BUF_INIT;
    enum ledger_rc lrc = ledger_refresh(&c->loc, &err);
    if (lrc != LEDGER_OK && lrc != LEDGER_GONE)
        log_fatal("%s: %s", what, buf_str(&err));
    buf_release(&err);
    if (lrc == LEDGER_GONE) {
        *rc = runner_ledger_gone(c, what);
        return 0;
    }
    if (lrc != LEDGER_OK) {
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
int runner_protect_once(struct runner_ctx *c)
{
    if (c->l.protected_ || !c->l.exists)
        return 0;
    struct buf err = BUF_INIT;
    enum ledger_rc rc;
    int tries = 0, xrc = 0;
    while ((rc = ledger_protect(&c->loc, &err)) == LEDGER_CONFLICT)
        if (!runner_after_conflict(c, "labelling the ledger", &tries, &xrc))
            break;
    if (rc != LEDGER_OK && rc != LEDGER_CONFLICT && rc != LEDGER_GONE)
        log_warn("could not give the ledger %s/%s its no-delete label and keep annotation: %s",
                 c->loc.ns, c->loc.name, buf_str(&err));
    buf_release(&err);
    if (rc == LEDGER_CONFLICT)
        return xrc;
    if (rc == LEDGER_GONE)
        return runner_ledger_gone(c, "labelling the ledger");
    c->l.protected_ = 1; /* tried once a run */
    return 0;
}

/* Before a migration starts and before a record is written: do we still
 * hold the lock? 0, or EXIT_LOCK after saying so. A write that follows may
 * take only as long as the hold is certain. */
int runner_hold(struct runner_ctx *c, const char *what)
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

/* The bytes slug's record takes in the ledger as read (0 when none): a
 * new record of it replaces them. */
static size_t old_bytes(const struct runner_ctx *c, const char *slug)
{
    const struct ledger_entry *e = ledger_find_entry(&c->l, slug);
    return e ? e->bytes : 0;
}

/* Past LEDGER_SHRINK_AT failed records are written shrunk (record.h). */
int runner_shrinking(const struct runner_ctx *c) { return c->ledger_bytes > LEDGER_SHRINK_AT; }

/* The ledger has no room for a record: exit 13, naming the size, the limit
 * and the way out. */
static int ledger_full(struct runner_ctx *c, const char *slug, size_t need, size_t have, int ran)
{
    log_fatal("%s %s: its record may take up to %zu bytes, and the ledger %s/%s holds %zu of "
              "its %d-byte limit (%d kept free): %s. Make room: failed records are the large "
              "ones (cozy-migrate status --failed); running each again once fixed (run --only "
              "SLUG) or skipping it (cozy-migrate skip SLUG --reason TEXT) rewrites it in a few "
              "hundred bytes (docs/internals.md: The ledger, growth budget)", ran ? "recording" : "not running",
              slug, need, c->loc.ns, c->loc.name, have, LEDGER_LIMIT, LEDGER_RESERVE,
              ran ? "the apiserver refused it as too large; it is not recorded and runs again next time"
                  : "it would run with no room to record its outcome, so nothing ran (exit 13)");
    return EXIT_LEDGER_FULL;
}

/* Before a migration runs: room for the largest record its outcome can
 * write (an ok one; a failed one too unless a pre-apply on-error=abort,
 * which records nothing on failure: a background one is recorded failed
 * whatever on-error says), shrunk when the ledger is past LEDGER_SHRINK_AT. */
int runner_room_for(struct runner_ctx *c, const struct step *s)
{
    if (c->o->k.dry_run)
        return 0;
    struct record *base = malloc(sizeof *base);
    if (!base) {
        log_fatal("out of memory");
        return EXIT_FAILED;
    }
    runner_new_record(c, s, REC_OK, base);
    snprintf(base->runner, sizeof base->runner, "%s", c->lk.holder);
    int may_fail = s->m && (s->m->h.on_error != ON_ERROR_ABORT || strcmp(s->tier, "background") == 0);
    size_t max = record_max_bytes(base, may_fail, runner_shrinking(c));
    record_free(base);
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
/* A record write the ledger did not take (lrc not LEDGER_OK): said, and its
 * exit code. */
static int write_refused(struct runner_ctx *c, const char *slug, const char *what,
                         enum ledger_rc lrc, size_t sent, const char *err)
{
    if (lrc == LEDGER_GONE)
        return runner_ledger_gone(c, what);
    if (lrc == LEDGER_FULL)
        return ledger_full(c, slug, sent, c->ledger_bytes, 1);
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
    log_fatal("recording %s: %s", slug, err);
    return lrc == LEDGER_DENIED ? EXIT_DENIED : EXIT_CLUSTER;
}

int runner_write_record(struct runner_ctx *c, const char *slug, struct record *r, int held)
{
    if (c->o->k.dry_run)
        return 0;
    char what[200];
    snprintf(what, sizeof what, "recording %s", slug);
    int rc = held ? 0 : runner_hold(c, what);
    if (rc != 0)
        return rc;
    if ((rc = runner_protect_once(c)) != 0)
        return rc;
    snprintf(r->runner, sizeof r->runner, "%s", c->lk.holder);
    if (r->state == REC_FAILED && runner_shrinking(c))
        record_shrink(r);
    /* a view of r (record.h: Ownership), never freed */
    struct ledger_entry e = {.slug = (char *)slug, .rec = *r};
    enum ledger_rc lrc;
    int tries = 0, stopped = 0;
    size_t sent = 0;
    /* A legacy script's stamp the gateway absorbed goes with its ok record,
     * in the same patch: the two land together or not at all. */
    long stamp = r->state == REC_OK && *r->stamp ? c->stamp : -1;
    struct buf err = BUF_INIT;
    while ((lrc = ledger_write_stamped(&c->loc, &e, 1, stamp, &sent, &err)) == LEDGER_CONFLICT)
        if (!runner_after_conflict(c, what, &tries, &rc)) {
            stopped = 1;
            break;
        }
    if (!stopped && lrc != LEDGER_OK)
        rc = write_refused(c, slug, what, lrc, sent, buf_str(&err));
    buf_release(&err);
    if (stopped || lrc != LEDGER_OK)
        return rc;
    c->ledger_bytes += sent - old_bytes(c, slug);
    if (stamp >= 0) {
        /* what the next legacy script's CURRENT_VERSION says */
        c->l.has_version = 1;
        c->l.version = stamp;
    }
    if (!c->size_warned && runner_shrinking(c)) {
        c->size_warned = 1;
        log_warn("the ledger %s/%s holds about %zu KiB, past 80%% of the 1 MiB object limit: "
                 "failed records are written shrunk from now on (docs/internals.md: The ledger, growth budget)",
                 c->loc.ns, c->loc.name, c->ledger_bytes / 1024);
    }
    return 0;
}

/* A record for step s, stamped now. */
void runner_new_record(struct runner_ctx *c, const struct step *s, enum rec_state st, struct record *r)
{
    now_rfc3339(c->now);
    plan_record(&c->t, s, &c->po, st, r);
}

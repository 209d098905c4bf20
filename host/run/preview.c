/* preview.c: `cozy-migrate preview`: what an upgrade would do to this
 * cluster. Every pending Lua migration of the tier runs, in manifest order,
 * in its supervised child as `run` would, with every write sent dryRun=All
 * and the apiserver's answers kept in a copy-on-write overlay (overlay.h)
 * that the next reads, and the next migrations, see. Owns the order of the
 * preview, collecting each migration's outcome and changes (its write
 * journal), the records the run would write, and the report (text, or one
 * JSON document). Must never write anything that persists: it takes no
 * lock, writes no record and no Event, and every write it lets a migration
 * send is a dry run. A shell migration's kubectl goes through the runner's
 * gateway in front of the same overlay, so it is previewed as a Lua one is.
 * What follows a migration that met a request the preview cannot predict
 * (which is reported unpredictable, never as a failure of the run) is
 * predicted without its effects. */
#include "run/preview.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/exitcodes.h"
#include "base/log.h"
#include "base/paths.h"
#include "base/stop.h"
#include "formats/shellreach.h"
#include "preview/overlay.h"
#include "proc/child.h"
#include "run/runner_int.h"

struct preview {
    const struct runner_opts *o;
    struct kube_options k;          /* o->k with dry_run set */
    struct runner_ctx c;                   /* the tree, the connection and the ledger, as run has them */
    struct plan p;
    char dir[4096], overlay[4200]; /* the overlay lives in a private directory under TMPDIR */
    cJSON *doc;                     /* the JSON report being built */
    cJSON *migrations, *records;
    cJSON *ran;                     /* slug -> "ok" | "failed in this run" | "blocked" */
    const char *unpredictable;      /* the first migration the preview could not predict */
};

/* plan_ran_fn: what this preview predicts of a slug it already went past. */
static const char *preview_ran(void *ud, const char *slug)
{
    struct preview *v = ud;
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v->ran, slug));
}

static void preview_free(struct preview *v)
{
    if (*v->overlay)
        unlink(v->overlay);
    if (*v->dir)
        rmdir(v->dir);
    plan_free(&v->p);
    runner_ctx_free(&v->c);
    cJSON_Delete(v->doc);
    cJSON_Delete(v->ran);
}

/* A record the run would write. */
static void would_record(struct preview *v, const char *slug, const char *state, const char *reason)
{
    cJSON *r = cJSON_CreateObject();
    if (!r || !cJSON_AddItemToArray(v->records, r) || !cJSON_AddStringToObject(r, "migration", slug) ||
        !cJSON_AddStringToObject(r, "state", state) ||
        (reason && !cJSON_AddStringToObject(r, "reason", reason)))
        log_warn("preview: out of memory");
}

/* Loads, reads and plans through the very function `plan` uses, so the
 * steps are run's (SKIP and SKIP_REASON, --only, --tier included), without
 * the lock. 0 or an exit code. */
static int prepare(struct preview *v)
{
    const struct runner_opts *o = v->o;
    int rc = runner_load_plan(&v->c, o, &v->p);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < v->p.nwarnings; i++)
        log_warn("%s", v->p.warnings[i]);
    snprintf(v->dir, sizeof v->dir, "%s/cozy-preview-XXXXXX", paths_tmpdir());
    if (!mkdtemp(v->dir)) {
        *v->dir = '\0';
        log_fatal("preview: cannot make a private directory in %s: %s", paths_tmpdir(),
                  strerror(errno));
        return EXIT_FAILED;
    }
    snprintf(v->overlay, sizeof v->overlay, "%s/overlay.json", v->dir);
    v->k = o->k;
    v->k.dry_run = 1;
    v->c.L.k = &v->k;
    v->c.L.overlay_path = v->overlay;
    v->ran = cJSON_CreateObject();
    v->doc = cJSON_CreateObject();
    v->migrations = cJSON_AddArrayToObject(v->doc, "migrations");
    v->records = cJSON_AddArrayToObject(v->doc, "records");
    if (!v->ran || !v->doc || !v->migrations || !v->records ||
        !cJSON_AddStringToObject(v->doc, "tier", o->tier)) {
        log_fatal("out of memory");
        return EXIT_FAILED;
    }
    return 0;
}

/* The text of one migration's changes, from its journal entries. */
static void print_changes(const cJSON *journal)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(journal, "entries")) {
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "changed")))
            continue;
        const char *ns = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "namespace"));
        out_line("    %s %s %s%s%s", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "verb")),
                 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "resource")), ns ? ns : "",
                 ns ? "/" : "", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "name")));
        const cJSON *f;
        cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(e, "fields"))
            out_line("      %s", f->valuestring);
    }
    const cJSON *more = cJSON_GetObjectItemCaseSensitive(journal, "more");
    if (cJSON_IsNumber(more))
        out_line("    ... and %d more writes", (int)more->valuedouble);
}

/* A step the run would record or hold without running it (revoked,
 * skipped by the operator, blocked). Returns -1 when the step runs, else 1
 * when the run would stop there, 0 when it goes on. */
static int preview_without_running(struct preview *v, const struct step *s, cJSON *mj, size_t k,
                                   size_t n)
{
    const struct runner_opts *o = v->o;
    const struct migration *m = s->m;
    if (s->kind == STEP_RECORD_REVOKED) {
        cJSON_AddStringToObject(mj, "outcome", "revoked");
        if (!o->output_json)
            out_line("[%zu/%zu] %s ... revoked: the run would record it revoked", k, n, s->slug);
        would_record(v, s->slug, "revoked", NULL);
        return 0;
    }
    if (s->kind == STEP_RECORD_SKIPPED) {
        cJSON_AddStringToObject(mj, "outcome", "skipped");
        if (!o->output_json)
            out_line("[%zu/%zu] %s ... skipped by the operator: the run would record it skipped", k,
                     n, s->slug);
        would_record(v, s->slug, "skipped", "Operator");
        return 0;
    }
    char why[160] = "";
    if (s->kind == STEP_BLOCKED || plan_blocked(&v->p, &v->c.l, m, preview_ran, v, why, sizeof why)) {
        int stop = m && m->h.on_error == ON_ERROR_ABORT;
        const char *because = s->kind == STEP_BLOCKED ? s->why : why;
        cJSON_AddStringToObject(mj, "outcome", "blocked");
        cJSON_AddStringToObject(mj, "message", because);
        cJSON_AddBoolToObject(mj, "stops_upgrade", stop);
        cJSON_AddStringToObject(v->ran, s->slug, "blocked");
        if (!o->output_json)
            out_line("[%zu/%zu] %s ... would not run (%s)%s", k, n, s->slug, because,
                     stop ? "; on-error=abort: the upgrade would stop here" : "");
        return stop;
    }
    return -1;
}

/* Previews one step. Returns 1 when the run would stop there, else 0. */
static int preview_step(struct preview *v, const struct step *s, size_t k, size_t n, int *blind)
{
    const struct runner_opts *o = v->o;
    const struct migration *m = s->m;
    cJSON *mj = cJSON_CreateObject();
    if (!mj || !cJSON_AddItemToArray(v->migrations, mj) ||
        !cJSON_AddStringToObject(mj, "migration", s->slug) ||
        !cJSON_AddStringToObject(mj, "tier", s->tier) || !cJSON_AddStringToObject(mj, "batch", s->batch)) {
        log_warn("preview: out of memory");
        return 0;
    }
    int held = preview_without_running(v, s, mj, k, n);
    if (held >= 0)
        return held;
    /* A shell migration's kubectl goes through the runner's gateway with
     * the same overlay, so what it would do is previewed like a Lua
     * migration's. */
    struct launch j;
    runner_launch_step(&v->c, s, &j);
    char reach[600];
    int reaches = m->is_shell && shellreach_file(m->path, reach, sizeof reach) != 0;
    if (reaches || launch_prepare(&v->c.L, &j) != 0) {
        /* a script that connects to another cluster on its own is not run:
         * its writes there would not be dry runs */
        cJSON_AddStringToObject(mj, "outcome", "unpredictable");
        cJSON_AddStringToObject(mj, "message", reaches ? reach : "its gateway could not be started");
        if (reaches && !v->o->output_json)
            out_line("[%zu/%zu] %s ... unpredictable (not run): %s", k, n, s->slug, reach);
        *blind = 1;
        v->unpredictable = v->unpredictable ? v->unpredictable : s->slug;
        would_record(v, s->slug, "unpredictable", "the preview cannot predict its outcome");
        cJSON_AddStringToObject(v->ran, s->slug, "ok");
        return 0;
    }
    struct child_result res;
    launch_run(&v->c.L, &j, &res);
    cJSON *journal = res.journal ? journal_log_json(res.journal) : NULL;
    if (*res.unpredictable && res.outcome != CHILD_TIMEOUT && res.outcome != CHILD_NOMEM) {
        /* The preview met a write it cannot predict (a strategic merge on an
         * object it changed, a verb a dry run may not send): whatever the
         * script did next tells nothing about the real run. */
        cJSON_AddStringToObject(mj, "outcome", "unpredictable");
        cJSON_AddStringToObject(mj, "message", res.unpredictable);
        if (!o->output_json) {
            out_line("[%zu/%zu] %s ... unpredictable: %s%s", k, n, s->slug, res.unpredictable,
                     *blind ? "" : "; what follows is predicted without its effects");
            if (journal)
                print_changes(journal);
        }
        if (journal && !cJSON_AddItemToObject(mj, "journal", journal))
            cJSON_Delete(journal);
        *blind = 1;
        v->unpredictable = v->unpredictable ? v->unpredictable : s->slug;
        would_record(v, s->slug, "unpredictable", "the preview cannot predict its outcome");
        cJSON_AddStringToObject(v->ran, s->slug, "ok");
        child_result_free(&res);
        return 0;
    }
    int ok = res.outcome == CHILD_OK, stop = !ok && m->h.on_error == ON_ERROR_ABORT;
    cJSON_AddStringToObject(mj, "outcome", ok ? "ok" : "failed");
    if (!ok) {
        cJSON_AddStringToObject(mj, "reason", res.reason ? res.reason : "Failed");
        cJSON_AddStringToObject(mj, "message", res.message);
        cJSON_AddBoolToObject(mj, "stops_upgrade", stop);
    }
    if (!o->output_json) {
        char summary[64] = "";
        if (journal)
            snprintf(summary, sizeof summary, ": %d writes, %d would change",
                     (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(journal, "writes")),
                     (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(journal, "changed")));
        if (ok)
            out_line("[%zu/%zu] %s ... ok%s", k, n, s->slug, summary);
        else
            out_line("[%zu/%zu] %s ... would FAIL (%s: %s)%s%s", k, n, s->slug, res.reason,
                     res.message, summary, stop ? "; on-error=abort: the upgrade would stop here" : "");
        if (journal)
            print_changes(journal);
    }
    if (journal && !cJSON_AddItemToObject(mj, "journal", journal))
        cJSON_Delete(journal);
    cJSON_AddStringToObject(v->ran, s->slug, ok ? "ok" : "failed in this run");
    if (ok)
        would_record(v, s->slug, "ok", NULL);
    else if (!stop)
        would_record(v, s->slug, "failed", res.reason);
    child_result_free(&res);
    return stop;
}

int preview_run(const struct runner_opts *o)
{
    struct preview v;
    memset(&v, 0, sizeof v);
    v.o = o;
    int rc = prepare(&v);
    if (rc != 0) {
        preview_free(&v);
        return rc;
    }
    struct plan *p = &v.p;
    for (size_t i = 0; i < p->nseed; i++)
        would_record(&v, p->seed[i].slug, rec_state_name(p->seed[i].rec.state), NULL);
    size_t n = 0, k = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->s[i].kind != STEP_SKIP && !(p->fresh_install && !o->only && !*p->installed_at))
            n++;
    if (!o->output_json) {
        if (p->fresh_install && *p->installed_at)
            out_line("fresh install %s%s (--as-installed-at): the run would create the ledger "
                     "recording %zu migrations as skipped-fresh-install, then run what follows",
                     strcmp(p->installed_at, "none") ? "as installed at " :
                     "with no release installed", strcmp(p->installed_at, "none") ?
                     p->installed_at : "", p->nseed);
        else if (p->fresh_install)
            out_line("fresh install: the run would create the ledger recording %zu migrations as "
                     "skipped-fresh-install and run %s", p->nseed, o->only ? "only --only" : "nothing");
        else if (p->nseed)
            out_line("legacy: the run would record %zu migrations below version %ld as legacy",
                     p->nseed, v.c.l.version);
        out_line("preview of the %s tier: %zu pending, each dry-run in order against a "
                 "copy-on-write view of the cluster; nothing is written", o->only ? "requested" : o->tier,
                 n);
    }
    const char *stopped = NULL, *shell = NULL;
    int blind = 0;
    for (size_t i = 0; i < p->n && !stopped; i++) {
        const struct step *s = &p->s[i];
        if (s->kind == STEP_SKIP || (p->fresh_install && !o->only && !*p->installed_at))
            continue;
        k++;
        if (stop_signal())
            break;
        if (preview_step(&v, s, k, n, &blind))
            stopped = s->slug;
        if (stop_signal()) {
            log_fatal("stopped by %s while previewing %s (exit %d)", stop_name(stop_signal()),
                      s->slug, stop_exit_code());
            preview_free(&v);
            return stop_exit_code();
        }
        if (blind && !shell && s->m && v.unpredictable == s->slug)
            shell = s->slug;
    }
    if (stop_signal()) {
        log_fatal("stopped by %s (exit %d)", stop_name(stop_signal()), stop_exit_code());
        preview_free(&v);
        return stop_exit_code();
    }
    char err[512];
    struct overlay *ov = overlay_load(v.overlay, err, sizeof err);
    cJSON *objects = ov ? overlay_objects(ov) : NULL;
    overlay_free(ov);
    if (!objects || !cJSON_AddItemToObject(v.doc, "objects", objects) ||
        !(stopped ? cJSON_AddStringToObject(v.doc, "stops_at", stopped)
                  : cJSON_AddNullToObject(v.doc, "stops_at")) ||
        !(shell ? cJSON_AddStringToObject(v.doc, "predicted_without_effects_from", shell)
                : cJSON_AddNullToObject(v.doc, "predicted_without_effects_from"))) {
        cJSON_Delete(objects);
        log_fatal("preview: out of memory");
        preview_free(&v);
        return EXIT_FAILED;
    }
    if (o->output_json) {
        out_json(v.doc, 0);
    } else {
        if (n == 0)
            out_line("nothing to run for the %s tier", o->only ? "requested" : o->tier);
        out_line("ledger records the run would write:");
        const cJSON *r;
        cJSON_ArrayForEach(r, v.records)
            out_line("    %s: %s", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "migration")),
                     cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "state")));
        if (stopped)
            out_line("the run would stop at %s (on-error=abort): exit 1", stopped);
        else if (v.unpredictable)
            out_line("the run would succeed as far as the preview can tell: %s could not be "
                     "predicted, and what follows it is predicted without its effects",
                     v.unpredictable);
        else
            out_line("the run would succeed");
    }
    preview_free(&v);
    return stopped ? EXIT_FAILED : EXIT_OK;
}

/* report.c: the `plan` and `status` tables.
 *
 * Owns how a plan and a ledger read to a person (fixed-width columns) and
 * to a machine (JSON), printed through log.c: the order of status rows,
 * which rows need a person (failed, blocked, unreadable), one whole record.
 * Must never read the cluster or the tree itself, nor decide anything the
 * planner decides (what is blocked comes from its plans): it prints what it
 * is given. */
#include "run/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"
#include "run/dispatch.h"

#define PLAN_ROW "%-8s %-11s %-16s %-40s %s"
#define STATUS_ROW "%-40s %-22s %-20s %-8s %-16s %-11s %s"
#define FAILED_ROW "%-40s %-22s %-20s %-8s %-11s %s"

static size_t count_kind(const struct plan *p, enum step_kind k)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n; i++)
        n += p->s[i].kind == k;
    return n;
}

/* A record's text as it may reach a terminal: what a script printed or
 * raised is shown with its control bytes escaped (text_escape). */
static const char *escaped(const char *text, char *buf, size_t cap)
{
    text_escape(text, strlen(text), buf, cap, 0);
    return buf;
}

static const char *action_name(enum step_kind k)
{
    switch (k) {
    case STEP_RUN: return "run";
    case STEP_RECORD_REVOKED: return "revoke";
    case STEP_BLOCKED: return "blocked";
    case STEP_RECORD_SKIPPED: return "skipped";
    case STEP_SKIP: break;
    }
    return "skip";
}

void report_plan(const struct tree *t, const struct ledger *l, const struct plan *p,
                 const struct report_opts *o)
{
    (void)t;
    if (p->fresh_install && *p->installed_at)
        out_line("fresh install %s%s (--as-installed-at): the ledger %s/%s is absent; run would "
                 "create it, record %zu migrations%s as skipped-fresh-install, then run what "
                 "follows", strcmp(p->installed_at, "none") ? "as installed at " :
                 "with no release installed", strcmp(p->installed_at, "none") ? p->installed_at : "",
                 o->ns, o->ledger, p->nseed,
                 strcmp(p->installed_at, "none") ? " (the batches up to it)" : "");
    else if (p->fresh_install)
        out_line("fresh install: the ledger %s/%s is absent; run would create it, record %zu "
                 "migrations as skipped-fresh-install and run nothing%s",
                 o->ns, o->ledger, p->nseed, o->only ? " but --only" : "");
    else if (p->nseed)
        out_line("legacy: run would record %zu migrations below version %ld as legacy", p->nseed,
                 l->version);
    for (size_t i = 0; i < p->nwarnings; i++)
        log_warn("%s", p->warnings[i]);
    /* Revoked and skipped slugs are recorded, not run: counted with the
     * runs as before; a blocked one is said apart. */
    size_t blocked = count_kind(p, STEP_BLOCKED);
    size_t acting = p->n - count_kind(p, STEP_SKIP) - blocked;
    if (blocked)
        out_line("%zu to run for the %s tier, %zu blocked:", acting, o->only ? "requested" : o->tier,
                 blocked);
    else
        out_line("%zu to run for the %s tier:", acting, o->only ? "requested" : o->tier);
    out_line(PLAN_ROW, "ACTION", "TIER", "BATCH", "MIGRATION", "WHY");
    for (size_t i = 0; i < p->n; i++) {
        const struct step *s = &p->s[i];
        if (p->fresh_install && !o->only && !*p->installed_at)
            break;
        const char *why = *s->why ? s->why : s->kind == STEP_RUN ? "pending" : "revoked, no record";
        out_line(PLAN_ROW, action_name(s->kind), s->tier, s->batch, s->slug, why);
    }
}

/* The record's script checksum against the shipped script: "match",
 * "DIFFERS", "-" (none recorded), "absent" (not shipped), "n/a" (no tree). */
static const char *checksum_state(const struct tree *t, const char *slug, const struct record *r)
{
    if (!t)
        return "n/a";
    const struct migration *m = tree_find(t, slug);
    if (!m)
        return "absent";
    if (!r || !*r->sha256)
        return "-";
    return strcmp(r->sha256, m->sha256) == 0 ? "match" : "DIFFERS";
}

/* The same for lib_sha256 against the shared code shipped with the script
 * (stdlib/ that runs for Lua, legacy-sh/lib/ for shell). */
static const char *lib_state(const struct tree *t, const char *slug, const struct record *r)
{
    const struct migration *m = t ? tree_find(t, slug) : NULL;
    if (!m)
        return t ? "absent" : "n/a";
    if (!r || !*r->lib_sha256)
        return "-";
    return strcmp(r->lib_sha256, m->is_shell ? t->lib_sh : t->lib_lua) == 0 ? "match" : "DIFFERS";
}

/* What the CHECKSUM column says: the script first, then the shared code. */
static const char *column_state(const char *sum, const char *lib)
{
    return strcmp(sum, "DIFFERS") != 0 && strcmp(lib, "DIFFERS") == 0 ? "LIB DIFFERS" : sum;
}

/* "blocked: requires X (failed)" when run would not run slug, else NULL. */
static const char *blocked_why(const struct status_view *v, const char *slug)
{
    for (size_t i = 0; i < v->nplans; i++)
        for (size_t j = 0; j < v->plans[i].n; j++)
            if (v->plans[i].s[j].kind == STEP_BLOCKED && strcmp(v->plans[i].s[j].slug, slug) == 0)
                return v->plans[i].s[j].why;
    return NULL;
}

/* One slug as status sees it. */
struct row {
    const char *slug;
    const struct record *r;
    const char *state;          /* the record's, "pending" or "blocked" */
    const char *batch, *tier, *sum, *lib;
    const char *blocked;        /* why, when blocked */
    const struct ledger_failure *failure; /* pending, its last failure kept on the ledger */
    int needs_person;           /* failed, blocked, unreadable, or pending after a failure */
    char detail[1200];          /* for --failed: what is wrong */
};

static void fill_row(const struct status_view *v, const struct report_opts *o, const char *slug,
                     struct row *w)
{
    memset(w, 0, sizeof *w);
    const struct tree *t = v->t;
    w->slug = slug;
    w->r = ledger_find(v->l, slug);
    w->blocked = w->r ? NULL : blocked_why(v, slug);
    w->state = w->r ? rec_state_name(w->r->state) : w->blocked ? "blocked" : "pending";
    w->sum = checksum_state(t, slug, w->r);
    w->lib = lib_state(t, slug, w->r);
    const struct migration *m = t ? tree_find(t, slug) : NULL;
    w->batch = w->r && *w->r->batch ? w->r->batch : m ? t->man.b[m->batch].name : "-";
    w->tier = w->r && *w->r->tier ? w->r->tier : m ? m->tier : "-";
    if (w->blocked) {
        w->needs_person = 1;
        snprintf(w->detail, sizeof w->detail, "%s", w->blocked);
    } else if (w->r && w->r->state == REC_FAILED) {
        w->needs_person = 1;
        snprintf(w->detail, sizeof w->detail, "%s: %s", w->r->reason, w->r->message);
    } else if (!w->r && (w->failure = ledger_find_failure(v->l, slug))) {
        /* an on-error=abort failure records nothing: the runner kept it */
        const struct ledger_failure *f = w->failure;
        w->needs_person = 1;
        snprintf(w->detail, sizeof w->detail, "not recorded (on-error=abort), last failed at %s: "
                 "%s: %s (kept by runner %s in the ledger's annotation %s)", f->at, f->reason,
                 f->message, f->runner, FAILURES_ANNOTATION);
    } else if (w->r && w->r->state == REC_UNKNOWN) {
        w->needs_person = 1;
        char repair[800];
        struct plan_opts po = {.ns = o->ns, .ledger = o->ledger};
        plan_repair(t, &po, slug, repair, sizeof repair);
        snprintf(w->detail, sizeof w->detail, "cannot be read (%s): %s", w->r->problem, repair);
    }
}

/* The background tier's state of slug, as dispatch sees it; NULL when it
 * is not a background slug of the index. */
static const char *bg_state(const struct status_view *v, const char *slug)
{
    for (size_t i = 0; i < v->nbg; i++)
        if (strcmp(v->bg[i].slug, slug) == 0)
            return v->bg[i].state;
    return NULL;
}

/* "last_failure": the failure the runner kept for a pending slug, and
 * where it came from. 0 when out of memory. */
static int add_failure(cJSON *j, const struct ledger_failure *f)
{
    cJSON *o = cJSON_AddObjectToObject(j, "last_failure");
    return o && cJSON_AddStringToObject(o, "at", f->at) &&
           cJSON_AddStringToObject(o, "tier", f->tier) &&
           cJSON_AddStringToObject(o, "reason", f->reason) &&
           cJSON_AddStringToObject(o, "message", f->message) &&
           cJSON_AddStringToObject(o, "runner", f->runner) &&
           cJSON_AddStringToObject(o, "recorded", "no (on-error=abort records nothing)") &&
           cJSON_AddStringToObject(o, "source", "the ledger's annotation " FAILURES_ANNOTATION);
}

/* One status row as JSON. NULL when out of memory. */
static cJSON *status_json(const struct status_view *v, const struct row *w)
{
    const char *bg = bg_state(v, w->slug);
    const struct record *r = w->r;
    cJSON *j = cJSON_CreateObject();
    if (!j || !cJSON_AddStringToObject(j, "migration", w->slug) ||
        !cJSON_AddStringToObject(j, "state", w->state) ||
        (r && r->state == REC_UNKNOWN && !cJSON_AddStringToObject(j, "problem", r->problem)) ||
        !cJSON_AddStringToObject(j, "at", r ? r->at : "") ||
        !cJSON_AddNumberToObject(j, "attempts", r ? (double)r->attempts : 0) ||
        !cJSON_AddStringToObject(j, "batch", w->batch) || !cJSON_AddStringToObject(j, "tier", w->tier) ||
        !cJSON_AddStringToObject(j, "checksum", w->sum) ||
        !cJSON_AddStringToObject(j, "lib_checksum", w->lib) ||
        (r && *r->reason && !cJSON_AddStringToObject(j, "reason", r->reason)) ||
        (r && *r->message && !cJSON_AddStringToObject(j, "message", r->message)) ||
        (r && *r->by && !cJSON_AddStringToObject(j, "by", r->by)) ||
        (w->blocked && !cJSON_AddStringToObject(j, "blocked", w->blocked)) ||
        (bg && !cJSON_AddStringToObject(j, "background", bg)) ||
        (w->failure && !add_failure(j, w->failure))) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* Records by time, then slug (RFC 3339 UTC sorts as text); ud is the
 * ledger (qsort_r: no file-scope state). */
static int by_time(const void *a, const void *b, void *ud)
{
    const struct ledger *l = ud;
    const char *sa = *(const char *const *)a, *sb = *(const char *const *)b;
    const struct record *ra = ledger_find(l, sa), *rb = ledger_find(l, sb);
    int c = strcmp(ra ? ra->at : "", rb ? rb->at : "");
    return c ? c : strcmp(sa, sb);
}

/* The slugs status lists, in its order; NULL when out of memory. */
static const char **status_slugs(const struct status_view *v, size_t *ns)
{
    const struct manifest *man = v->t ? &v->t->man : v->man;
    const struct ledger *l = v->l;
    size_t total = l->n;
    for (size_t i = 0; man && i < man->n; i++)
        total += man->b[i].n;
    const char **slugs = calloc(total + 1, sizeof *slugs);
    if (!slugs)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; man && i < man->n; i++)
        for (size_t j = 0; j < man->b[i].n; j++)
            slugs[n++] = man->b[i].e[j].slug;
    size_t known = n;
    for (size_t i = 0; i < l->n; i++) {
        int seen = 0;
        for (size_t j = 0; j < known && !seen; j++)
            seen = strcmp(slugs[j], l->e[i].slug) == 0;
        if (!seen)
            slugs[n++] = l->e[i].slug;
    }
    if (n > known)
        qsort_r(slugs + known, n - known, sizeof *slugs, by_time, (void *)l);
    *ns = n;
    return slugs;
}

int report_status(const struct status_view *v, const struct report_opts *o)
{
    const struct ledger *l = v->l;
    if (!l->exists) {
        if (o->output_json) {
            cJSON *empty = cJSON_CreateArray();
            if (empty)
                out_json(empty, 1);
            cJSON_Delete(empty);
        } else {
            out_line("no ledger %s/%s: nothing has run on this cluster", o->ns, o->ledger);
        }
        return 0;
    }
    int need = 0;
    for (size_t i = 0; i < v->nproblems; i++, need++)
        log_warn("ledger %s/%s: %s", o->ns, o->ledger, v->problems[i]);
    size_t ns = 0;
    const char **slugs = status_slugs(v, &ns);
    if (!slugs)
        return -1;
    struct row *w = malloc(sizeof *w);
    cJSON *arr = o->output_json ? cJSON_CreateArray() : NULL;
    int rc = 0;
    if (!w || (o->output_json && !arr))
        rc = -1;
    if (rc == 0 && !o->output_json) {
        if (o->failed_only)
            out_line(FAILED_ROW, "MIGRATION", "STATE", "AT", "ATTEMPTS", "TIER", "DETAIL");
        else
            out_line(STATUS_ROW, "MIGRATION", "STATE", "AT", "ATTEMPTS", "BATCH", "TIER", "CHECKSUM");
    }
    for (size_t i = 0; rc == 0 && i < ns; i++) {
        fill_row(v, o, slugs[i], w);
        need += w->needs_person;
        if (o->failed_only && !w->needs_person)
            continue;
        if (arr) {
            cJSON *j = status_json(v, w);
            if (!j || !cJSON_AddItemToArray(arr, j)) {
                cJSON_Delete(j);
                rc = -1;
            }
            continue;
        }
        char attempts[24];
        snprintf(attempts, sizeof attempts, "%ld", w->r ? w->r->attempts : 0L);
        const char *at = w->r && *w->r->at ? w->r->at : "-";
        char detail[4 * sizeof w->detail];
        if (o->failed_only)
            out_line(FAILED_ROW, w->slug, w->state, at, attempts, w->tier,
                     escaped(w->detail, detail, sizeof detail));
        else
            out_line(STATUS_ROW, w->slug, w->state, at, attempts, w->batch, w->tier,
                     column_state(w->sum, w->lib));
    }
    if (rc == 0 && !o->output_json && !o->failed_only && v->nbg) {
        out_line("%s", "");
        out_line("background tier (dispatched one Job per migration; `cozy-migrate dispatch`):");
        for (size_t i = 0; i < v->nbg; i++)
            out_line("  %-40s %s", v->bg[i].slug, v->bg[i].state);
    }
    if (arr && rc == 0)
        out_json(arr, 1);
    cJSON_Delete(arr);
    free(w);
    free(slugs);
    return rc < 0 ? -1 : need;
}

/* "  line" for each line of text. */
static void indented(const char *text)
{
    const char *p = text;
    char line[4 * OUTPUT_CAP];
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        text_escape(p, len, line, sizeof line, 0);
        out_line("  %s", line);
        p += len + (nl ? 1 : 0);
    }
}

int report_record(const struct status_view *v, const char *slug, const struct report_opts *o)
{
    struct row *w = malloc(sizeof *w);
    if (!w)
        return -1;
    fill_row(v, o, slug, w);
    const struct record *r = w->r;
    if (!r && !(v->t && tree_find(v->t, slug))) {
        free(w);
        return 1;
    }
    int rc = 0;
    if (o->output_json) {
        cJSON *j = r ? record_json(r) : cJSON_CreateObject();
        if (!j || !cJSON_AddStringToObject(j, "migration", slug) ||
            (!r && !cJSON_AddStringToObject(j, "state", w->state)) ||
            (w->failure && !add_failure(j, w->failure)) ||
            (r && r->state == REC_UNKNOWN && !cJSON_AddStringToObject(j, "problem", r->problem)) ||
            !cJSON_AddStringToObject(j, "checksum", w->sum) ||
            !cJSON_AddStringToObject(j, "lib_checksum", w->lib) ||
            (w->blocked && !cJSON_AddStringToObject(j, "blocked", w->blocked)))
            rc = -1;
        else
            out_json(j, 1);
        cJSON_Delete(j);
        free(w);
        return rc;
    }
    out_line("migration:   %s", slug);
    out_line("state:       %s", w->state);
    if (w->blocked)
        out_line("blocked:     %s", w->blocked);
    if (!r) {
        out_line("batch:       %s", w->batch);
        out_line("tier:        %s", w->tier);
        out_line("record:      none");
        if (w->failure) {
            char buf[4 * sizeof w->detail];
            out_line("last failure: %s", escaped(w->detail, buf, sizeof buf));
        }
        free(w);
        return 0;
    }
    if (r->state == REC_UNKNOWN)
        out_line("problem:     %s", w->detail);
    out_line("at:          %s", *r->at ? r->at : "-");
    out_line("attempts:    %ld", r->attempts);
    out_line("duration_ms: %ld", r->duration_ms);
    out_line("batch:       %s", w->batch);
    out_line("tier:        %s", w->tier);
    if (*r->image)
        out_line("image:       %s", r->image);
    if (*r->sha256)
        out_line("sha256:      %s (checksum %s)", r->sha256, w->sum);
    if (*r->lib_sha256)
        out_line("lib_sha256:  %s (checksum %s)", r->lib_sha256, w->lib);
    char buf[4 * sizeof r->message];
    if (*r->reason)
        out_line("reason:      %s", escaped(r->reason, buf, sizeof buf));
    if (*r->message)
        out_line("message:     %s", escaped(r->message, buf, sizeof buf));
    if (*r->by)
        out_line("by:          %s", escaped(r->by, buf, sizeof buf));
    if (*r->runner)
        out_line("runner:      %s", r->runner);
    if (r->output && *r->output) {
        out_line("output:");
        indented(r->output);
    }
    if (r->journal) {
        char *pretty = cJSON_Print(r->journal);
        out_line("journal:");
        indented(pretty ? pretty : "(out of memory)");
        cJSON_free(pretty);
    }
    free(w);
    return 0;
}

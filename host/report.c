/* report.c: the `plan` and `status` tables.
 *
 * Owns how a plan and a ledger read to a person (fixed-width columns) and
 * to a machine (JSON), printed through log.c. Must never read the cluster
 * or the tree itself, nor decide anything the planner decides: it prints
 * what it is given. */
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define PLAN_ROW "%-8s %-11s %-16s %-40s %s"
#define STATUS_ROW "%-40s %-22s %-20s %-8s %-16s %-11s %s"

static size_t runnable(const struct plan *p)
{
    size_t k = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->s[i].kind != STEP_SKIP)
            k++;
    return k;
}

void report_plan(const struct tree *t, const struct ledger *l, const struct plan *p,
                 const struct report_opts *o)
{
    (void)t;
    if (p->fresh_install)
        out_line("fresh install: the ledger %s/%s is absent; run would create it, record %zu "
                 "migrations as skipped-fresh-install and run nothing%s",
                 o->ns, o->ledger, p->nseed, o->only ? " but --only" : "");
    else if (p->nseed)
        out_line("legacy: run would record %zu migrations below version %ld as legacy", p->nseed,
                 l->version);
    for (size_t i = 0; i < p->nwarnings; i++)
        log_warn("%s", p->warnings[i]);
    out_line("%zu to run for the %s tier:", runnable(p), o->only ? "requested" : o->tier);
    out_line(PLAN_ROW, "ACTION", "TIER", "BATCH", "MIGRATION", "WHY");
    for (size_t i = 0; i < p->n; i++) {
        const struct step *s = &p->s[i];
        if (p->fresh_install && !o->only)
            break;
        const char *action = s->kind == STEP_RUN ? "run"
                             : s->kind == STEP_RECORD_REVOKED ? "revoke"
                                                              : "skip";
        const char *why = *s->why ? s->why : s->kind == STEP_RUN ? "pending" : "revoked, no record";
        if (s->kind == STEP_RUN && s->m && s->m->is_shell && !*s->m->h.dry_run_var && o->dry_run)
            why = "pending (shell: not dry-runnable)";
        out_line(PLAN_ROW, action, s->tier, s->batch, s->slug, why);
    }
}

static const char *checksum_state(const struct tree *t, const char *slug, const struct record *r)
{
    if (!t)
        return "?";
    const struct migration *m = tree_find(t, slug);
    if (!m)
        return "absent";
    if (!r || !*r->sha256)
        return "-";
    return strcmp(r->sha256, m->sha256) == 0 ? "match" : "DIFFERS";
}

/* One status row as JSON. NULL when out of memory. */
static cJSON *status_json(const char *slug, const char *state, const struct record *r,
                          const char *batch, const char *tier, const char *sum)
{
    cJSON *j = cJSON_CreateObject();
    if (!j || !cJSON_AddStringToObject(j, "migration", slug) ||
        !cJSON_AddStringToObject(j, "state", state) ||
        (r && r->state == REC_UNKNOWN && !cJSON_AddStringToObject(j, "problem", r->problem)) ||
        !cJSON_AddStringToObject(j, "at", r ? r->at : "") ||
        !cJSON_AddNumberToObject(j, "attempts", r ? (double)r->attempts : 0) ||
        !cJSON_AddStringToObject(j, "batch", batch) || !cJSON_AddStringToObject(j, "tier", tier) ||
        !cJSON_AddStringToObject(j, "checksum", sum) ||
        (r && *r->reason && !cJSON_AddStringToObject(j, "reason", r->reason))) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

int report_status(const struct tree *t, const struct ledger *l, const struct report_opts *o)
{
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
    /* Manifest order first, then records the image does not know. */
    size_t total = l->n, ns = 0;
    for (size_t i = 0; t && i < t->man.n; i++)
        total += t->man.b[i].n;
    const char **slugs = calloc(total + 1, sizeof *slugs);
    if (!slugs)
        return -1;
    for (size_t i = 0; t && i < t->man.n; i++)
        for (size_t j = 0; j < t->man.b[i].n; j++)
            slugs[ns++] = t->man.b[i].e[j].slug;
    for (size_t i = 0; i < l->n; i++) {
        int seen = 0;
        for (size_t j = 0; j < ns && !seen; j++)
            seen = strcmp(slugs[j], l->e[i].slug) == 0;
        if (!seen)
            slugs[ns++] = l->e[i].slug;
    }
    cJSON *arr = o->output_json ? cJSON_CreateArray() : NULL;
    int rc = 0;
    if (o->output_json && !arr)
        rc = -1;
    if (!o->output_json)
        out_line(STATUS_ROW, "MIGRATION", "STATE", "AT", "ATTEMPTS", "BATCH", "TIER", "CHECKSUM");
    for (size_t i = 0; rc == 0 && i < ns; i++) {
        const struct record *r = ledger_find(l, slugs[i]);
        const char *state = r ? rec_state_name(r->state) : "pending";
        const char *sum = checksum_state(t, slugs[i], r);
        const struct migration *m = t ? tree_find(t, slugs[i]) : NULL;
        const char *batch = r && *r->batch ? r->batch : m ? t->man.b[m->batch].name : "-";
        const char *tier = r && *r->tier ? r->tier : m ? m->tier : "-";
        if (arr) {
            cJSON *j = status_json(slugs[i], state, r, batch, tier, sum);
            if (!j || !cJSON_AddItemToArray(arr, j)) {
                cJSON_Delete(j);
                rc = -1;
            }
        } else {
            char attempts[24];
            snprintf(attempts, sizeof attempts, "%ld", r ? r->attempts : 0L);
            out_line(STATUS_ROW, slugs[i], state, r && *r->at ? r->at : "-", attempts, batch, tier,
                     sum);
        }
    }
    if (arr && rc == 0)
        out_json(arr, 1);
    cJSON_Delete(arr);
    free(slugs);
    return rc;
}

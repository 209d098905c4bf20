/* indexcheck.c: the hook's check of the index the chart rendered (env
 * INDEX_ENV, indexdoc.h) against the tree and image the runner runs.
 *
 * The render gate decided on that index (a pre-apply slug it omits renders
 * no hook; one it names that the image lacks renders a hook at every
 * upgrade), so the runner compares it whole with its own tree and image
 * before anything runs: a difference is a line naming it, one Warning
 * Event on the ledger and exit 9 (the hook's podFailurePolicy fails the
 * upgrade at once). The live ConfigMap is not what it reads: a pre-upgrade
 * hook runs before Helm applies the new one. Also owns how a difference is
 * told (indexcheck.h), which the dispatcher shares. The format and the
 * comparison are formats/indexdoc.c's.
 * Prefixes: runner_ (the check, a step of the runner's, as runner_int.h names it). */
#include "run/indexcheck.h"

#include "run/runner_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/exitcodes.h"
#include "base/log.h"
#include "formats/indexdoc.h"
#include "client/event.h"

void indexcheck_say(void *ud, const char *line)
{
    struct indexcheck_said *s = ud;
    if (s->n == 0)
        snprintf(s->first, sizeof s->first, "%s", line);
    else if (s->n == 1)
        log_error("%s: %s", s->label, s->first);
    if (s->n >= 1)
        log_error("%s: %s", s->label, line);
    s->n++;
    if (s->at + 4 < sizeof s->text)
        s->at += (size_t)snprintf(s->text + s->at, sizeof s->text - s->at, "%s%s",
                                  s->at ? "; " : "", line);
    if (s->at >= sizeof s->text)
        s->at = sizeof s->text - 1;
}

int runner_index_check_release(struct runner_ctx *c)
{
    const struct runner_opts *o = c->o;
    const char *text = o->index_json;
    if (!text || !*text)
        return 0;
    char err[ERRLINE_MAX];
    struct index got, want;
    struct buf why = BUF_INIT;
    if (index_parse(INDEX_ENV, text, strlen(text), &got, &why) != 0) {
        log_fatal("%s (the index the chart gives the hook; nothing ran)", buf_str(&why));
        buf_release(&why);
        return EXIT_PACKAGING;
    }
    if (index_from_tree(&c->t, o->image, &want) != 0) {
        index_free(&got);
        log_fatal("out of memory");
        return EXIT_FAILED;
    }
    struct indexcheck_said s = {.label = INDEX_ENV};
    size_t n = index_compare(&got, &want, o->dir, indexcheck_say, &s);
    index_free(&got);
    index_free(&want);
    if (!n)
        return 0;
    log_fatal("the index the chart rendered (%s) differs from the tree and image this runner runs "
              "(%s, %s) in %zu place%s%s%s: the render gate decided on it, so nothing ran (exit "
              "9). Ship the chart with this image's index (cozy-migrate index --image REF > "
              "files/cozy-migrate-index.json)", INDEX_ENV, o->dir, o->image ? o->image : "no image",
              n, n == 1 ? "" : "s", n == 1 ? ": " : "", n == 1 ? s.first : "");
    if (!o->k.dry_run) {
        /* the ledger may not exist yet (a fresh install): the Event names
         * it all the same, and `kubectl get events` shows it */
        char uid[64] = "";
        struct ledger l;
        struct buf lerr = BUF_INIT;
        if (ledger_read(&c->loc, &l, &lerr) == LEDGER_OK) {
            snprintf(uid, sizeof uid, "%s", l.exists ? l.uid : "");
            ledger_free(&l);
        }
        buf_release(&lerr);
        struct event_about about = {"v1", "ConfigMap", c->loc.ns, c->loc.name, uid};
        char msg[1600];
        snprintf(msg, sizeof msg, "the index the chart rendered differs from the image %s (%zu "
                 "difference%s): %s; the hook ran nothing", o->image ? o->image : "(none)", n,
                 n == 1 ? "" : "s", s.text);
        if (event_post(c->rest, &about, NULL, "Warning", "MigrationsIndexMismatch", msg, err,
                       sizeof err) < 0)
            log_warn("%s", err);
    }
    return EXIT_RELEASED;
}

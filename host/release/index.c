/* index.c: the `index` command (index.h): the index of the packaged tree,
 * as the file the chart includes or as its ConfigMap, or --check that a
 * file (the chart's copy, a rendered or live ConfigMap) agrees with the
 * tree, naming each slug that differs. The format is formats/indexdoc.c's. */
#include "release/index.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/defaults.h"
#include "base/exitcodes.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/util.h"
#include "formats/yamldoc.h"

/* The position of s in v, or -1. */
static long pos_of(char *const *v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], s) == 0)
            return (long)i;
    return -1;
}

struct diff {
    const char *file, *dir;
    size_t n;
};

static void differ(struct diff *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void differ(struct diff *d, const char *fmt, ...)
{
    char line[800];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    out_line("%s: %s", d->file, line);
    d->n++;
}

/* One list compared: each slug missing, extra, or out of order (among the
 * slugs both hold, a different position). */
static void compare_list(struct diff *d, const char *what, char *const *got, size_t ngot,
                         char *const *want, size_t nwant)
{
    for (size_t i = 0; i < nwant; i++)
        if (pos_of(got, ngot, want[i]) < 0)
            differ(d, "%s slug '%s' is shipped by the tree (%s) but absent from the index", what,
                   want[i], d->dir);
    for (size_t i = 0; i < ngot; i++)
        if (pos_of(want, nwant, got[i]) < 0)
            differ(d, "%s slug '%s' is in the index but the tree (%s) does not ship it%s", what,
                   got[i], d->dir, strcmp(what, "revoked") == 0 ? " as revoked" : " in that tier");
    size_t a = 0, b = 0;
    long ka = 0;
    while (a < ngot && b < nwant) {
        if (pos_of(want, nwant, got[a]) < 0) {
            a++;
            continue;
        }
        if (pos_of(got, ngot, want[b]) < 0) {
            b++;
            continue;
        }
        if (strcmp(got[a], want[b]) != 0) {
            differ(d, "%s slug '%s' is at place %ld of the index's common slugs, the tree's "
                   "manifest has '%s' there (the order differs)", what, got[a], ka + 1, want[b]);
            return; /* one order difference says it; the rest follow from it */
        }
        a++, b++, ka++;
    }
}

static char **bg_slugs(const struct index *ix)
{
    char **v = calloc(ix->nbg + 1, sizeof *v);
    for (size_t i = 0; v && i < ix->nbg; i++)
        v[i] = ix->bg[i].slug;
    return v;
}

static const struct index_bg *bg_find(const struct index *ix, const char *slug)
{
    for (size_t i = 0; i < ix->nbg; i++)
        if (strcmp(ix->bg[i].slug, slug) == 0)
            return &ix->bg[i];
    return NULL;
}

static void compare(struct diff *d, const struct index *got, const struct index *want,
                    const char *image)
{
    compare_list(d, "pre-apply", got->pre, got->npre, want->pre, want->npre);
    char **gb = bg_slugs(got), **wb = bg_slugs(want);
    if (!gb || !wb) {
        differ(d, "out of memory");
    } else {
        compare_list(d, "background", gb, got->nbg, wb, want->nbg);
        for (size_t i = 0; i < want->nbg; i++) {
            const struct index_bg *w = &want->bg[i], *g = bg_find(got, w->slug);
            if (!g)
                continue;
            if (g->timeout_s != w->timeout_s)
                differ(d, "background slug '%s': timeout %.0fs in the index, %.0fs in the tree",
                       w->slug, g->timeout_s, w->timeout_s);
            if (g->on_error != w->on_error)
                differ(d, "background slug '%s': on-error=%s in the index, %s in the tree", w->slug,
                       on_error_name(g->on_error), on_error_name(w->on_error));
            int same = g->nrequires == w->nrequires;
            for (size_t r = 0; same && r < w->nrequires; r++)
                same = strcmp(g->requires[r], w->requires[r]) == 0;
            if (!same)
                differ(d, "background slug '%s': its requires differ from the tree's header",
                       w->slug);
        }
    }
    free(gb);
    free(wb);
    compare_list(d, "revoked", got->revoked, got->nrevoked, want->revoked, want->nrevoked);
    if (image && (!got->image || strcmp(got->image, image) != 0))
        differ(d, "the index names the image '%s', not the '%s' given with --image",
               got->image ? got->image : "(none)", image);
}

int index_cmd(const struct index_opts *o)
{
    char err[ERRLINE_MAX];
    if (o->image && index_image_check(o->image, o->require_digest, err, sizeof err) != 0) {
        log_usage("index", "--image %s", err);
        return EXIT_USAGE;
    }
    struct tree t;
    if (tree_load(o->dir, &t, err, sizeof err) != 0) {
        log_fatal("%s", err);
        return EXIT_PACKAGING;
    }
    struct index want;
    if (index_from_tree(&t, o->image, &want) != 0) {
        tree_free(&t);
        log_fatal("out of memory");
        return EXIT_FAILED;
    }
    tree_free(&t);
    int rc = EXIT_OK;
    if (o->check) {
        struct index got;
        if (index_load_file(o->check, &got, err, sizeof err) != 0) {
            log_fatal("%s", err);
            index_free(&want);
            return EXIT_PACKAGING;
        }
        struct diff d = {.file = o->check, .dir = o->dir};
        if (o->require_digest && !o->image &&
            (!got.image || index_image_check(got.image, 1, err, sizeof err) != 0))
            differ(&d, "the index does not name its image by digest (--require-digest): %s",
                   got.image ? err : "it names no image");
        compare(&d, &got, &want, o->image);
        if (d.n) {
            log_fatal("%s does not agree with the tree %s: %zu difference%s (regenerate it with "
                      "'cozy-migrate index --dir %s%s%s > FILE')", o->check, o->dir, d.n,
                      d.n == 1 ? "" : "s", o->dir, o->image ? " --image " : "",
                      o->image ? o->image : "");
            rc = EXIT_RELEASED;
        } else {
            out_line("%s agrees with the tree %s: %zu pre-apply, %zu background, %zu revoked "
                     "slugs%s%s", o->check, o->dir, want.npre, want.nbg, want.nrevoked,
                     got.image ? ", image " : "", got.image ? got.image : "");
        }
        index_free(&got);
        index_free(&want);
        return rc;
    }
    char *text = index_format(&want);
    if (!text) {
        index_free(&want);
        log_fatal("out of memory");
        return EXIT_FAILED;
    }
    if (!o->configmap) {
        fputs(text, stdout);
        fflush(stdout);
    } else {
        cJSON *cm = cJSON_CreateObject();
        int head = cm && cJSON_AddStringToObject(cm, "apiVersion", "v1") &&
                   cJSON_AddStringToObject(cm, "kind", "ConfigMap");
        cJSON *meta = head ? cJSON_AddObjectToObject(cm, "metadata") : NULL;
        cJSON *labels = cJSON_AddObjectToObject(meta, "labels");
        cJSON *data = meta ? cJSON_AddObjectToObject(cm, "data") : NULL;
        char *y = NULL;
        if (meta && labels && data && cJSON_AddStringToObject(meta, "name", INDEX_NAME) &&
            cJSON_AddStringToObject(meta, "namespace", o->ns) &&
            cJSON_AddStringToObject(labels, "app.kubernetes.io/name", "cozy-migrate") &&
            cJSON_AddStringToObject(labels, "app.kubernetes.io/component", "migrations-index") &&
            cJSON_AddStringToObject(data, INDEX_KEY, text) &&
            (!o->image || cJSON_AddStringToObject(data, INDEX_KEY_IMAGE, o->image)))
            y = yaml_emit(cm);
        cJSON_Delete(cm);
        if (!y) {
            log_fatal("out of memory");
            rc = EXIT_FAILED;
        } else {
            fputs(y, stdout);
            fflush(stdout);
            mem_free(y);
        }
    }
    free(text);
    index_free(&want);
    return rc;
}

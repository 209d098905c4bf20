/* index.c: the `index` command (index.h): the index of the packaged tree,
 * as the file the chart includes or as its ConfigMap, or --check that a
 * file (the chart's copy, a rendered or live ConfigMap) agrees with the
 * tree, naming each difference. The format and the comparison are
 * formats/indexdoc.c's. */
#include "release/index.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/defaults.h"
#include "base/buf.h"
#include "base/exitcodes.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/util.h"
#include "formats/yamldoc.h"
#include "release/chartcheck.h"

static void say_line(void *ud, const char *line)
{
    out_line("%s: %s", (const char *)ud, line);
}

/* The retry policy as the ConfigMap's keys. 0, or -1 when out of memory. */
static int policy_data(cJSON *data, const struct index_policy *p)
{
    char n[32], a[32], b[32];
    snprintf(n, sizeof n, "%ld", p->max_attempts);
    format_duration(p->backoff, a, sizeof a);
    format_duration(p->backoff_max, b, sizeof b);
    return cJSON_AddStringToObject(data, INDEX_KEY_ATTEMPTS, n) &&
                   cJSON_AddStringToObject(data, INDEX_KEY_BACKOFF, a) &&
                   cJSON_AddStringToObject(data, INDEX_KEY_BACKOFF_MAX, b)
               ? 0
               : -1;
}

/* --check-chart: the rendering's index compared as a ConfigMap's (its
 * image with the one expected), and the chart's shape. */
static int check_chart(const struct index_opts *o, struct index *want)
{
    struct buf err = BUF_INIT;
    want->configmap = 1;
    free(want->image);
    want->image = NULL;
    if (o->check_image && !(want->image = strdup(o->check_image))) {
        index_free(want);
        log_fatal("out of memory");
        return EXIT_FAILED;
    }
    long n = chart_check(o->check_chart, want, o->ledger, o->dir, &err);
    index_free(want);
    if (n < 0)
        log_fatal("%s", buf_str(&err));
    buf_release(&err);
    if (n < 0)
        return EXIT_PACKAGING;
    if (n) {
        log_fatal("%s: the chart is not wired as the engine needs: %ld problem%s", o->check_chart, n,
                  n == 1 ? "" : "s");
        return EXIT_RELEASED;
    }
    out_line("%s: the chart renders the engine's index, agreeing with the tree %s, and neither "
             "the ledger nor another migration hook", o->check_chart, o->dir);
    return EXIT_OK;
}

int index_cmd(const struct index_opts *o)
{
    char err[ERRLINE_MAX];
    struct buf why = BUF_INIT;
    if (o->image && index_image_check(o->image, o->require_digest, &why) != 0) {
        log_usage("index", "--image %s", buf_str(&why));
        buf_release(&why);
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
    want.pol = o->pol;
    if (o->check_chart)
        return check_chart(o, &want);
    if (o->check) {
        struct index got;
        if (index_load_file(o->check, &got, &why) != 0) {
            log_fatal("%s", buf_str(&why));
            buf_release(&why);
            index_free(&want);
            return EXIT_PACKAGING;
        }
        /* Every field is compared, whatever flags were given: the image
         * with the one expected (none expected: an index naming one
         * differs), the retry keys of a ConfigMap with the flags' or the
         * defaults. */
        want.configmap = got.configmap;
        free(want.image);
        want.image = NULL;
        if (o->check_image && !(want.image = strdup(o->check_image))) {
            log_fatal("out of memory");
            index_free(&got);
            index_free(&want);
            return EXIT_FAILED;
        }
        size_t n = index_compare(&got, &want, o->dir, say_line, (void *)o->check);
        if (o->require_digest &&
            (!got.image || index_image_check(got.image, 1, &why) != 0)) {
            out_line("%s: the index does not name its image by digest (--require-digest): %s",
                     o->check, got.image ? buf_str(&why) : "it names no image");
            n++;
        }
        buf_release(&why);
        if (n) {
            log_fatal("%s does not agree with the tree %s: %zu difference%s (regenerate it with "
                      "'cozy-migrate index --dir %s%s%s > FILE')", o->check, o->dir, n,
                      n == 1 ? "" : "s", o->dir, o->check_image ? " --image " : "",
                      o->check_image ? o->check_image : "");
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
            (!o->image || cJSON_AddStringToObject(data, INDEX_KEY_IMAGE, o->image)) &&
            policy_data(data, &o->pol) == 0)
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
    mem_free(text);
    index_free(&want);
    return rc;
}

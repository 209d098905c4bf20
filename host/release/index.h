/* index.h: the `index` command: the migrations index (formats/indexdoc.h)
 * of the packaged tree, generated as the file the chart includes or as its
 * ConfigMap manifest, or --check FILE: does the chart's copy (or a rendered
 * or live ConfigMap) agree with the tree? --check-chart FILE: is a
 * platform chart's whole rendering wired as the engine needs? */
#ifndef COZY_INDEX_H
#define COZY_INDEX_H
#include "formats/indexdoc.h"

struct index_opts {
    const char *dir;            /* the tree (migrations/ with order.d, legacy-sh/) */
    const char *image;          /* --image, or NULL */
    const char *check_image;    /* --check: the image expected (--image, else the one this
                                 * runs in, MIGRATIONS_IMAGE), or NULL: none */
    struct index_policy pol;    /* the retry policy: -o configmap writes it, --check of a
                                 * ConfigMap expects it */
    int require_digest;
    const char *check;          /* --check FILE, or NULL: generate */
    const char *check_chart;    /* --check-chart FILE: a chart's rendering (chartcheck.h) */
    const char *ledger;         /* the ledger's name, which the chart must not render */
    int configmap;              /* -o configmap: the ConfigMap manifest (YAML) */
    const char *ns;             /* its namespace */
};

/* The `index` command. Exit 0; 2 a bad --image; 3 a tree or FILE that does
 * not load (or not whole: one document, one object); 9 FILE disagrees with
 * the tree, the image expected or the retry policy (each difference
 * named). */
int index_cmd(const struct index_opts *o);
#endif

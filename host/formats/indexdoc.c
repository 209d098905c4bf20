/* indexdoc.c: the migrations index's format (indexdoc.h).
 *
 * Owns the index's format and its one parser (the file, a ConfigMap
 * holding it, a file holding either), the way it is made from the runner's
 * loaded tree, the way it becomes a tree again for the planner (dispatch),
 * and the image reference rule a release index keeps (a digest with
 * --require-digest). Must never take an index it cannot read fully for a
 * smaller one: an unknown key, a wrong type, a bad or repeated slug is
 * refused, naming the file. Prints nothing. */
#include "formats/indexdoc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/defaults.h"
#include "base/mem.h"
#include "base/util.h"
#include "formats/manifest.h"
#include "formats/yamldoc.h"

static void free_strv(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void index_free(struct index *ix)
{
    free(ix->image);
    free_strv(ix->pre, ix->npre);
    for (size_t i = 0; i < ix->nbg; i++) {
        free(ix->bg[i].slug);
        free_strv(ix->bg[i].requires, ix->bg[i].nrequires);
    }
    free(ix->bg);
    free_strv(ix->revoked, ix->nrevoked);
    memset(ix, 0, sizeof *ix);
}

static int push_str(char ***v, size_t *n, const char *s)
{
    char **nv = realloc(*v, (*n + 1) * sizeof *nv);
    if (!nv)
        return -1;
    *v = nv;
    if (!(nv[*n] = strdup(s)))
        return -1;
    (*n)++;
    return 0;
}

/* ---- from a tree -------------------------------------------------------- */

int index_from_tree(const struct tree *t, const char *image, struct index *ix)
{
    memset(ix, 0, sizeof *ix);
    if (image && !(ix->image = strdup(image)))
        goto oom;
    for (size_t i = 0; i < t->man.n; i++)
        for (size_t j = 0; j < t->man.b[i].n; j++) {
            const struct batch_entry *e = &t->man.b[i].e[j];
            const struct migration *m = tree_find(t, e->slug);
            if (e->retired || !m || tree_revoked(t, e->slug))
                continue;
            if (strcmp(m->tier, "background") != 0) {
                if (push_str(&ix->pre, &ix->npre, m->slug) != 0)
                    goto oom;
                continue;
            }
            struct index_bg *nb = realloc(ix->bg, (ix->nbg + 1) * sizeof *nb);
            if (!nb)
                goto oom;
            ix->bg = nb;
            struct index_bg *b = &nb[ix->nbg++];
            memset(b, 0, sizeof *b);
            b->slug = strdup(m->slug);
            b->timeout_s = m->h.timeout > 0 ? m->h.timeout : DEFAULT_TIMEOUT_S;
            b->on_error = m->h.on_error;
            if (!b->slug)
                goto oom;
            for (size_t r = 0; r < m->h.nrequires; r++)
                if (push_str(&b->requires, &b->nrequires, m->h.requires[r]) != 0)
                    goto oom;
        }
    for (size_t i = 0; i < t->revoked.n; i++)
        if (push_str(&ix->revoked, &ix->nrevoked, t->revoked.slug[i]) != 0)
            goto oom;
    return 0;
oom:
    index_free(ix);
    return -1;
}

/* ---- the file ----------------------------------------------------------- */

struct buf {
    char *p;
    size_t n, cap;
    int oom;
};

static void bput(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bput(struct buf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (need < 0) {
        b->oom = 1;
        return;
    }
    if (b->n + (size_t)need + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 1024;
        if (cap < b->n + (size_t)need + 1)
            cap = b->n + (size_t)need + 1;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)need;
}

/* A JSON string (slugs need no escaping; an image
 * reference might, in principle). */
static void bstr(struct buf *b, const char *s)
{
    cJSON *j = cJSON_CreateString(s);
    char *t = j ? cJSON_PrintUnformatted(j) : NULL;
    if (!t)
        b->oom = 1;
    else
        bput(b, "%s", t);
    cJSON_free(t);
    cJSON_Delete(j);
}

static void bslugs(struct buf *b, const char *key, char *const *v, size_t n, int last)
{
    bput(b, "  \"%s\": [", key);
    for (size_t i = 0; i < n; i++) {
        bput(b, "%s\n    ", i ? "," : "");
        bstr(b, v[i]);
    }
    bput(b, "%s]%s\n", n ? "\n  " : "", last ? "" : ",");
}

char *index_format(const struct index *ix)
{
    struct buf b = {0};
    bput(&b, "{\n  \"version\": %d,\n  \"image\": ", INDEX_VERSION);
    if (ix->image)
        bstr(&b, ix->image);
    else
        bput(&b, "null");
    bput(&b, ",\n");
    bslugs(&b, "pre-apply", ix->pre, ix->npre, 0);
    bput(&b, "  \"background\": [");
    for (size_t i = 0; i < ix->nbg; i++) {
        const struct index_bg *g = &ix->bg[i];
        bput(&b, "%s\n    {\"slug\": ", i ? "," : "");
        bstr(&b, g->slug);
        bput(&b, ", \"timeout_s\": %.0f, \"on_error\": \"%s\", \"requires\": [", g->timeout_s,
             on_error_name(g->on_error));
        for (size_t r = 0; r < g->nrequires; r++) {
            bput(&b, "%s", r ? ", " : "");
            bstr(&b, g->requires[r]);
        }
        bput(&b, "]}");
    }
    bput(&b, "%s],\n", ix->nbg ? "\n  " : "");
    bslugs(&b, "revoked", ix->revoked, ix->nrevoked, 1);
    bput(&b, "}\n");
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* ---- parsing ------------------------------------------------------------ */

static int fail(char *err, size_t errlen, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, const char *name, const char *fmt, ...)
{
    char what[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(err, errlen, "%s: %s", name, what);
    return -1;
}

/* Every key of o is one of allowed, each once. */
static int keys_known(const char *name, const char *where, const cJSON *o,
                      const char *const *allowed, char *err, size_t errlen)
{
    for (const cJSON *k = o->child; k; k = k->next) {
        int ok = 0;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = strcmp(k->string, *a) == 0;
        if (!ok)
            return fail(err, errlen, name, "%s: unknown key '%s'", where, k->string);
        for (const cJSON *k2 = k->next; k2; k2 = k2->next)
            if (strcmp(k->string, k2->string) == 0)
                return fail(err, errlen, name, "%s: key '%s' given twice", where, k->string);
    }
    return 0;
}

/* A list of slugs, each valid and not in seen (a set across the index, so
 * a slug sits in one place). */
static int slug_array(const char *name, const char *key, const cJSON *a, char ***v, size_t *n,
                      char ***seen, size_t *nseen, char *err, size_t errlen)
{
    if (!cJSON_IsArray(a))
        return fail(err, errlen, name, "'%s' is not a list of slugs", key);
    for (const cJSON *e = a->child; e; e = e->next) {
        if (!cJSON_IsString(e) || !slug_valid(e->valuestring))
            return fail(err, errlen, name, "'%s': %s%s%s is not a slug", key,
                        cJSON_IsString(e) ? "'" : "an entry", cJSON_IsString(e) ? e->valuestring : "",
                        cJSON_IsString(e) ? "'" : "");
        for (size_t i = 0; seen && i < *nseen; i++)
            if (strcmp((*seen)[i], e->valuestring) == 0)
                return fail(err, errlen, name, "slug '%s' is listed twice", e->valuestring);
        if (push_str(v, n, e->valuestring) != 0 || (seen && push_str(seen, nseen, e->valuestring) != 0))
            return fail(err, errlen, name, "out of memory");
    }
    return 0;
}

static int parse_bg(const char *name, const cJSON *o, struct index_bg *g, char ***seen,
                    size_t *nseen, char *err, size_t errlen)
{
    static const char *const keys[] = {"slug", "timeout_s", "on_error", "requires", NULL};
    if (!cJSON_IsObject(o))
        return fail(err, errlen, name, "'background': an entry is not an object");
    const cJSON *slug = cJSON_GetObjectItemCaseSensitive(o, "slug");
    char where[120];
    snprintf(where, sizeof where, "background slug '%.60s'",
             cJSON_IsString(slug) ? slug->valuestring : "?");
    if (keys_known(name, where, o, keys, err, errlen) != 0)
        return -1;
    if (!cJSON_IsString(slug) || !slug_valid(slug->valuestring))
        return fail(err, errlen, name, "'background': an entry without a valid 'slug'");
    for (size_t i = 0; i < *nseen; i++)
        if (strcmp((*seen)[i], slug->valuestring) == 0)
            return fail(err, errlen, name, "slug '%s' is listed twice", slug->valuestring);
    if (push_str(seen, nseen, slug->valuestring) != 0 || !(g->slug = strdup(slug->valuestring)))
        return fail(err, errlen, name, "out of memory");
    const cJSON *timeout = cJSON_GetObjectItemCaseSensitive(o, "timeout_s");
    const cJSON *oe = cJSON_GetObjectItemCaseSensitive(o, "on_error");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(o, "requires");
    if (!cJSON_IsNumber(timeout) || !(timeout->valuedouble > 0) ||
        timeout->valuedouble > 7 * 24 * 3600.0)
        return fail(err, errlen, name, "%s: 'timeout_s' is not a number of seconds up to a week",
                    where);
    if (!cJSON_IsString(oe) ||
        (strcmp(oe->valuestring, "abort") != 0 && strcmp(oe->valuestring, "warn") != 0))
        return fail(err, errlen, name, "%s: 'on_error' is not abort or warn", where);
    g->timeout_s = timeout->valuedouble;
    g->on_error = strcmp(oe->valuestring, "abort") == 0 ? ON_ERROR_ABORT : ON_ERROR_WARN;
    if (req) {
        char key[140];
        snprintf(key, sizeof key, "%s: requires", where);
        if (slug_array(name, key, req, &g->requires, &g->nrequires, NULL, NULL, err, errlen) != 0)
            return -1;
    }
    return 0;
}

int index_parse(const char *name, const char *text, size_t len, struct index *ix, char *err,
                size_t errlen)
{
    static const char *const keys[] = {"version", "image", "pre-apply", "background", "revoked",
                                       NULL};
    memset(ix, 0, sizeof *ix);
    cJSON *o = cJSON_ParseWithLength(text, len);
    int rc = -1;
    char **seen = NULL;
    size_t nseen = 0;
    if (!o || !cJSON_IsObject(o)) {
        fail(err, errlen, name, "not a migrations index (a JSON object from 'cozy-migrate index')");
        goto out;
    }
    if (keys_known(name, "the index", o, keys, err, errlen) != 0)
        goto out;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "version");
    if (!cJSON_IsNumber(v) || v->valuedouble != INDEX_VERSION) {
        fail(err, errlen, name, "'version' is not %d (an index this cozy-migrate can read)",
             INDEX_VERSION);
        goto out;
    }
    const cJSON *img = cJSON_GetObjectItemCaseSensitive(o, "image");
    if (img && !cJSON_IsNull(img)) {
        char why[300];
        if (!cJSON_IsString(img) || index_image_check(img->valuestring, 0, why, sizeof why) != 0) {
            fail(err, errlen, name, "'image': %s", cJSON_IsString(img) ? why : "not a string");
            goto out;
        }
        if (!(ix->image = strdup(img->valuestring))) {
            fail(err, errlen, name, "out of memory");
            goto out;
        }
    }
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(o, "pre-apply");
    const cJSON *bg = cJSON_GetObjectItemCaseSensitive(o, "background");
    const cJSON *rev = cJSON_GetObjectItemCaseSensitive(o, "revoked");
    if (!pre || !bg || !rev) {
        fail(err, errlen, name, "'%s' is missing", !pre ? "pre-apply" : !bg ? "background" : "revoked");
        goto out;
    }
    if (slug_array(name, "pre-apply", pre, &ix->pre, &ix->npre, &seen, &nseen, err, errlen) != 0)
        goto out;
    if (!cJSON_IsArray(bg)) {
        fail(err, errlen, name, "'background' is not a list");
        goto out;
    }
    for (const cJSON *e = bg->child; e; e = e->next) {
        struct index_bg *nb = realloc(ix->bg, (ix->nbg + 1) * sizeof *nb);
        if (!nb) {
            fail(err, errlen, name, "out of memory");
            goto out;
        }
        ix->bg = nb;
        memset(&nb[ix->nbg], 0, sizeof *nb);
        ix->nbg++;
        if (parse_bg(name, e, &nb[ix->nbg - 1], &seen, &nseen, err, errlen) != 0)
            goto out;
    }
    /* A revoked slug may be shipped still (it never runs), but never in a
     * tier list: the generator leaves it out of them. */
    if (slug_array(name, "revoked", rev, &ix->revoked, &ix->nrevoked, &seen, &nseen, err,
                   errlen) != 0)
        goto out;
    rc = 0;
out:
    free_strv(seen, nseen);
    cJSON_Delete(o);
    if (rc != 0)
        index_free(ix);
    return rc;
}

int index_from_configmap(const char *name, const cJSON *cm, struct index *ix, char *err,
                         size_t errlen)
{
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(cm, "data");
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(data, INDEX_KEY);
    if (!cJSON_IsString(text))
        return fail(err, errlen, name, "the ConfigMap has no key %s (the chart renders it from "
                    "files/cozy-migrate-index.json)", INDEX_KEY);
    char where[300];
    snprintf(where, sizeof where, "%s, key %s", name, INDEX_KEY);
    if (index_parse(where, text->valuestring, strlen(text->valuestring), ix, err, errlen) != 0)
        return -1;
    const cJSON *img = cJSON_GetObjectItemCaseSensitive(data, INDEX_KEY_IMAGE);
    if (img) {
        char why[300];
        if (!cJSON_IsString(img) || index_image_check(img->valuestring, 0, why, sizeof why) != 0) {
            index_free(ix);
            return fail(err, errlen, name, "key %s: %s", INDEX_KEY_IMAGE,
                        cJSON_IsString(img) ? why : "not a string");
        }
        free(ix->image);
        if (!(ix->image = strdup(img->valuestring))) {
            index_free(ix);
            return fail(err, errlen, name, "out of memory");
        }
    }
    return 0;
}

/* ---- back into a tree --------------------------------------------------- */

/* The batch named b in t->man, appended when new (the index lists slugs in
 * manifest order, so a batch's slugs come together). */
static struct batch *batch_of(struct tree *t, const char *b)
{
    if (t->man.n && strcmp(t->man.b[t->man.n - 1].name, b) == 0)
        return &t->man.b[t->man.n - 1];
    struct batch *nb = realloc(t->man.b, (t->man.n + 1) * sizeof *nb);
    if (!nb)
        return NULL;
    t->man.b = nb;
    struct batch *x = &nb[t->man.n];
    memset(x, 0, sizeof *x);
    if (!(x->name = strdup(b)))
        return NULL;
    t->man.n++;
    return x;
}

static int add_entry(struct tree *t, const char *batch, const char *slug, const char *tier,
                     const struct index_bg *g)
{
    struct batch *b = batch_of(t, batch);
    if (!b)
        return -1;
    struct batch_entry *ne = realloc(b->e, (b->n + 1) * sizeof *ne);
    if (!ne)
        return -1;
    b->e = ne;
    memset(&ne[b->n], 0, sizeof *ne);
    if (!(ne[b->n].slug = strdup(slug)))
        return -1;
    b->n++;
    struct migration *nm = realloc(t->m, (t->n + 1) * sizeof *nm);
    if (!nm)
        return -1;
    t->m = nm;
    struct migration *m = &nm[t->n];
    memset(m, 0, sizeof *m);
    t->n++;
    if (!(m->slug = strdup(slug)))
        return -1;
    m->tier = tier;
    m->batch = t->man.n - 1;
    m->order = t->n - 1;
    m->h.on_error = g ? g->on_error : ON_ERROR_ABORT;
    m->h.timeout = g ? g->timeout_s : 0;
    if (g && g->nrequires) {
        if (!(m->h.requires = calloc(g->nrequires, sizeof *m->h.requires)))
            return -1;
        for (size_t r = 0; r < g->nrequires; r++, m->h.nrequires++)
            if (!(m->h.requires[r] = strdup(g->requires[r])))
                return -1;
    }
    return 0;
}

int index_tree(const struct index *ix, struct tree *t)
{
    memset(t, 0, sizeof *t);
    if (!(t->root = strdup("(the index)")))
        goto oom;
    /* Pre-apply slugs first, in a batch of their own: a background plan
     * skips them, and background requires never name them (tree.c). */
    for (size_t i = 0; i < ix->npre; i++)
        if (add_entry(t, "00000-pre-apply", ix->pre[i], "pre-apply", NULL) != 0)
            goto oom;
    for (size_t i = 0; i < ix->nbg; i++)
        if (add_entry(t, "00001-background", ix->bg[i].slug, "background", &ix->bg[i]) != 0)
            goto oom;
    for (size_t i = 0; i < ix->nrevoked; i++)
        if (push_str(&t->revoked.slug, &t->revoked.n, ix->revoked[i]) != 0)
            goto oom;
    if (tree_reindex(t) != 0)
        goto oom;
    return 0;
oom:
    tree_free(t);
    return -1;
}

/* ---- the image reference ------------------------------------------------ */

static int is_hex64(const char *s)
{
    if (strlen(s) != 64)
        return 0;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
            return 0;
    return 1;
}

int index_image_check(const char *ref, int require_digest, char *err, size_t errlen)
{
    size_t n = strlen(ref);
    if (!n || n > IMAGE_MAX) {
        snprintf(err, errlen, "'%.80s' is not an image reference (1 to %d bytes)", ref, IMAGE_MAX);
        return -1;
    }
    for (const unsigned char *p = (const unsigned char *)ref; *p; p++)
        if (*p <= 0x20 || *p >= 0x7f) {
            snprintf(err, errlen, "'%.80s' is not an image reference (a space or control "
                     "character)", ref);
            return -1;
        }
    char name[IMAGE_MAX + 1];
    snprintf(name, sizeof name, "%s", ref);
    char *at = strchr(name, '@');
    int digest = 0;
    if (at) {
        if (strncmp(at, "@sha256:", 8) != 0 || !is_hex64(at + 8)) {
            snprintf(err, errlen, "'%.80s': a digest is @sha256: and 64 lower-case hex digits", ref);
            return -1;
        }
        *at = '\0';
        digest = 1;
    }
    const char *last = strrchr(name, '/');
    last = last ? last + 1 : name;
    const char *colon = strchr(last, ':');
    const char *tag = colon ? colon + 1 : NULL;
    if (!*name || !*last || (colon && !*tag)) {
        snprintf(err, errlen, "'%.80s' is not an image reference", ref);
        return -1;
    }
    if (tag && strcmp(tag, "latest") == 0) {
        snprintf(err, errlen, "'%.80s': the tag latest names no fixed image; give a version tag "
                 "or a digest", ref);
        return -1;
    }
    if (!tag && !digest) {
        snprintf(err, errlen, "'%.80s': give a tag or a digest (the ledger records which image "
                 "ran)", ref);
        return -1;
    }
    if (require_digest && !digest) {
        snprintf(err, errlen, "'%.80s' names the image by tag alone, and --require-digest asks "
                 "for a digest (repo@sha256:...): a release index pins the image that ran", ref);
        return -1;
    }
    return 0;
}

int index_load_file(const char *file, struct index *ix, char *err, size_t errlen)
{
    size_t len = 0;
    char *text = read_file(file, &len);
    if (!text)
        return fail(err, errlen, file, "cannot be read");
    cJSON *o = cJSON_ParseWithLength(text, len);
    int rc;
    if (o && cJSON_IsObject(o) && !cJSON_GetObjectItemCaseSensitive(o, "kind")) {
        rc = index_parse(file, text, len, ix, err, errlen);
    } else {
        struct yaml_doc doc;
        memset(&doc, 0, sizeof doc);
        const cJSON *cm = o;
        if (!o && yaml_load(file, text, len, &doc, err, errlen) == 0)
            cm = doc.root;
        const cJSON *kind = cm ? cJSON_GetObjectItemCaseSensitive(cm, "kind") : NULL;
        if (!cm)
            rc = -1; /* err says why the YAML did not load */
        else if (!cJSON_IsString(kind) || strcmp(kind->valuestring, "ConfigMap") != 0)
            rc = fail(err, errlen, file, "neither a migrations index nor a ConfigMap holding one");
        else
            rc = index_from_configmap(file, cm, ix, err, errlen);
        yaml_doc_free(&doc);
    }
    cJSON_Delete(o);
    free(text);
    return rc;
}

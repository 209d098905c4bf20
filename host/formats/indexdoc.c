/* indexdoc.c: the migrations index's format (indexdoc.h).
 *
 * Owns the index's format and its one parser (the file, a ConfigMap
 * holding it, a file holding either), its comparison with the index a tree
 * makes, the way it is made from the runner's loaded tree, the way it
 * becomes a tree again for the planner (dispatch), and the image reference
 * rule a release index keeps (a digest with --require-digest). Must never
 * take an index it cannot read fully for a smaller one: a NUL byte,
 * anything after the one object or document, an unknown key, a wrong type,
 * a bad or repeated slug is refused, naming the file (and the byte offset
 * where the text goes wrong). Prints nothing.
 * Prefixes: index_ (the index, as indexdoc.h names it). */
#include "formats/indexdoc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/defaults.h"
#include "base/mem.h"
#include "base/util.h"
#include "formats/ledgerdoc.h"
#include "formats/manifest.h"
#include "formats/yamldoc.h"

static void free_strv(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void free_slugs(struct index_slug *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].slug);
        free_strv(v[i].requires, v[i].nrequires);
    }
    free(v);
}

void index_free(struct index *ix)
{
    free(ix->image);
    free_slugs(ix->pre, ix->npre);
    free_slugs(ix->bg, ix->nbg);
    free_strv(ix->revoked, ix->nrevoked);
    memset(ix, 0, sizeof *ix);
}

void index_policy_default(struct index_policy *p)
{
    p->max_attempts = DEFAULT_MAX_ATTEMPTS;
    p->backoff = DEFAULT_RETRY_BACKOFF_S;
    p->backoff_max = DEFAULT_RETRY_BACKOFF_MAX_S;
}

static int push_str(char ***v, size_t *n, const char *s)
{
    char **nv = mem_grow(*v, *n + 1, sizeof *nv);
    if (!nv)
        return -1;
    *v = nv;
    if (!(nv[*n] = strdup(s)))
        return -1;
    (*n)++;
    return 0;
}

/* ---- from a tree -------------------------------------------------------- */

/* A new zeroed entry at the end of *v. */
static struct index_slug *push_slug(struct index_slug **v, size_t *n)
{
    struct index_slug *nv = mem_grow(*v, *n + 1, sizeof *nv);
    if (!nv)
        return NULL;
    *v = nv;
    memset(&nv[*n], 0, sizeof *nv);
    return &nv[(*n)++];
}

int index_from_tree(const struct tree *t, const char *image, struct index *ix)
{
    memset(ix, 0, sizeof *ix);
    index_policy_default(&ix->pol);
    if (image && !(ix->image = strdup(image)))
        goto oom;
    for (size_t i = 0; i < t->man.n; i++)
        for (size_t j = 0; j < t->man.b[i].n; j++) {
            const struct batch_entry *e = &t->man.b[i].e[j];
            const struct migration *m = tree_find(t, e->slug);
            if (e->retired || !m || tree_revoked(t, e->slug))
                continue;
            struct index_slug *b = strcmp(m->tier, "background") == 0
                                       ? push_slug(&ix->bg, &ix->nbg)
                                       : push_slug(&ix->pre, &ix->npre);
            if (!b || !(b->slug = strdup(m->slug)))
                goto oom;
            b->timeout_s = m->h.timeout > 0 ? m->h.timeout : DEFAULT_TIMEOUT_S;
            b->on_error = m->h.on_error;
            for (size_t l = 0; l < t->legacy.n; l++)
                if (strcmp(t->legacy.e[l].slug, m->slug) == 0)
                    b->legacy = t->legacy.e[l].number;
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

/* A JSON string (slugs need no escaping; an image
 * reference might, in principle). */
static void bstr(struct buf *b, const char *s)
{
    cJSON *j = cJSON_CreateString(s);
    char *t = j ? cJSON_PrintUnformatted(j) : NULL;
    if (!t)
        b->failed = BUF_NOMEM;
    else
        buf_adds(b, t);
    cJSON_free(t);
    cJSON_Delete(j);
}

/* A number of seconds as the shortest text that reads back as the same
 * double: a header may say timeout=1500ms, and an index that said 2 would
 * never compare equal with its own tree (every hook would exit 9). */
static void seconds_text(double s, char *buf, size_t len)
{
    if (s == (double)(long long)s && s < 1e15) {
        snprintf(buf, len, "%.0f", s); /* whole seconds: no "6e+01" */
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, s);
        if (strtod(buf, NULL) == s)
            return;
    }
}

static void bentries(struct buf *b, const char *key, const struct index_slug *v, size_t n)
{
    buf_addf(b, "  \"%s\": [", key);
    for (size_t i = 0; i < n; i++) {
        const struct index_slug *g = &v[i];
        buf_addf(b, "%s\n    {\"slug\": ", i ? "," : "");
        bstr(b, g->slug);
        char secs[32];
        seconds_text(g->timeout_s, secs, sizeof secs);
        buf_addf(b, ", \"timeout_s\": %s, \"on_error\": \"%s\", \"requires\": [", secs,
             header_on_error_name(g->on_error));
        for (size_t r = 0; r < g->nrequires; r++) {
            buf_addf(b, "%s", r ? ", " : "");
            bstr(b, g->requires[r]);
        }
        buf_addf(b, "]");
        if (g->legacy)
            buf_addf(b, ", \"legacy\": %ld", g->legacy);
        buf_addf(b, "}");
    }
    buf_addf(b, "%s],\n", n ? "\n  " : "");
}

char *index_format(const struct index *ix)
{
    struct buf b = BUF_INIT;
    buf_addf(&b, "{\n  \"version\": %d,\n  \"image\": ", INDEX_VERSION);
    if (ix->image)
        bstr(&b, ix->image);
    else
        buf_addf(&b, "null");
    buf_addf(&b, ",\n");
    bentries(&b, "pre-apply", ix->pre, ix->npre);
    bentries(&b, "background", ix->bg, ix->nbg);
    buf_addf(&b, "  \"revoked\": [");
    for (size_t i = 0; i < ix->nrevoked; i++) {
        buf_addf(&b, "%s\n    ", i ? "," : "");
        bstr(&b, ix->revoked[i]);
    }
    buf_addf(&b, "%s]\n}\n", ix->nrevoked ? "\n  " : "");
    return buf_detach(&b, NULL);
}

/* ---- parsing ------------------------------------------------------------ */

static int fail(struct buf *err, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct buf *err, const char *name, const char *fmt, ...)
{
    buf_setf(err, "%s: ", name);
    va_list ap;
    va_start(ap, fmt);
    buf_vaddf(err, fmt, ap);
    va_end(ap);
    return -1;
}

/* s as it may sit in a one-line message (a key or a value from the cluster
 * is input: a newline in it would forge a line). */
static const char *shown(const char *s, char out[160])
{
    text_escape(s, strlen(s), out, 160, 0);
    return out;
}

/* Every key of o is one of allowed, each once. */
static int keys_known(const char *name, const char *where, const cJSON *o,
                      const char *const *allowed, struct buf *err)
{
    char k1[160];
    for (const cJSON *k = o->child; k; k = k->next) {
        int ok = 0;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = strcmp(k->string, *a) == 0;
        if (!ok)
            return fail(err, name, "%s: unknown key '%s'", where, shown(k->string, k1));
        for (const cJSON *k2 = k->next; k2; k2 = k2->next)
            if (strcmp(k->string, k2->string) == 0)
                return fail(err, name, "%s: key '%s' given twice", where, k->string);
    }
    return 0;
}

/* A slug not yet in seen (a set across the index, so a slug sits in one
 * place), added to it. */
static int fresh_slug(const char *name, const char *slug, char ***seen, size_t *nseen,
                      struct buf *err)
{
    for (size_t i = 0; i < *nseen; i++)
        if (strcmp((*seen)[i], slug) == 0)
            return fail(err, name, "slug '%s' is listed twice", slug);
    if (push_str(seen, nseen, slug) != 0)
        return fail(err, name, "out of memory");
    return 0;
}

/* A list of slugs, each valid (and, with seen, not seen before). */
static int slug_array(const char *name, const char *key, const cJSON *a, char ***v, size_t *n,
                      char ***seen, size_t *nseen, struct buf *err)
{
    char shown_v[160];
    if (!cJSON_IsArray(a))
        return fail(err, name, "'%s' is not a list of slugs", key);
    for (const cJSON *e = a->child; e; e = e->next) {
        if (!cJSON_IsString(e) || !slug_valid(e->valuestring))
            return fail(err, name, "'%s': %s%s%s is not a slug", key,
                        cJSON_IsString(e) ? "'" : "an entry",
                        cJSON_IsString(e) ? shown(e->valuestring, shown_v) : "",
                        cJSON_IsString(e) ? "'" : "");
        if (seen && fresh_slug(name, e->valuestring, seen, nseen, err) != 0)
            return -1;
        if (push_str(v, n, e->valuestring) != 0)
            return fail(err, name, "out of memory");
    }
    return 0;
}

static int parse_entry(const char *name, const char *tier, const cJSON *o, struct index_slug *g,
                       char ***seen, size_t *nseen, struct buf *err)
{
    static const char *const keys[] = {"slug", "timeout_s", "on_error", "requires", "legacy", NULL};
    if (!cJSON_IsObject(o))
        return fail(err, name, "'%s': an entry is not an object {\"slug\": ...}", tier);
    const cJSON *slug = cJSON_GetObjectItemCaseSensitive(o, "slug");
    char where[160];
    if (!cJSON_IsString(slug) || !slug_valid(slug->valuestring))
        return fail(err, name, "'%s': an entry without a valid 'slug'", tier);
    snprintf(where, sizeof where, "%s slug '%s'", tier, slug->valuestring);
    if (keys_known(name, where, o, keys, err) != 0 ||
        fresh_slug(name, slug->valuestring, seen, nseen, err) != 0)
        return -1;
    if (!(g->slug = strdup(slug->valuestring)))
        return fail(err, name, "out of memory");
    const cJSON *timeout = cJSON_GetObjectItemCaseSensitive(o, "timeout_s");
    const cJSON *oe = cJSON_GetObjectItemCaseSensitive(o, "on_error");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(o, "requires");
    if (!cJSON_IsNumber(timeout) || !(timeout->valuedouble > 0) ||
        timeout->valuedouble > 7 * 24 * 3600.0)
        return fail(err, name, "%s: 'timeout_s' is not a number of seconds up to a week",
                    where);
    if (!cJSON_IsString(oe) ||
        (strcmp(oe->valuestring, "abort") != 0 && strcmp(oe->valuestring, "warn") != 0))
        return fail(err, name, "%s: 'on_error' is not abort or warn", where);
    g->timeout_s = timeout->valuedouble;
    g->on_error = strcmp(oe->valuestring, "abort") == 0 ? ON_ERROR_ABORT : ON_ERROR_WARN;
    const cJSON *legacy = cJSON_GetObjectItemCaseSensitive(o, "legacy");
    if (legacy && (!cJSON_IsNumber(legacy) || legacy->valuedouble < 1 ||
                   legacy->valuedouble > LEGACY_NUMBER_MAX ||
                   legacy->valuedouble != (double)(long)legacy->valuedouble))
        return fail(err, name, "%s: 'legacy' is not a legacy-map number (1 to %d)", where,
                    LEGACY_NUMBER_MAX);
    g->legacy = legacy ? (long)legacy->valuedouble : 0;
    if (!req)
        return fail(err, name, "%s: 'requires' is missing", where);
    char key[200];
    snprintf(key, sizeof key, "%s: requires", where);
    return slug_array(name, key, req, &g->requires, &g->nrequires, NULL, NULL, err);
}

static int parse_tier(const char *name, const char *tier, const cJSON *a, struct index_slug **v,
                      size_t *n, char ***seen, size_t *nseen, struct buf *err)
{
    if (!cJSON_IsArray(a))
        return fail(err, name, "'%s' is not a list", tier);
    for (const cJSON *e = a->child; e; e = e->next) {
        struct index_slug *g = push_slug(v, n);
        if (!g)
            return fail(err, name, "out of memory");
        if (parse_entry(name, tier, e, g, seen, nseen, err) != 0)
            return -1;
    }
    return 0;
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* The one JSON object text[0..len) holds, and nothing after it but white
 * space; NULL with err naming the byte offset where the text goes wrong. */
static cJSON *one_object(const char *name, const char *text, size_t len, struct buf *err)
{
    const char *nul = memchr(text, '\0', len);
    if (nul) {
        fail(err, name, "a NUL byte at byte offset %zu: an index is one JSON object "
             "and nothing after it", (size_t)(nul - text));
        return NULL;
    }
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!o) {
        size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        fail(err, name, "not a migrations index (a JSON object from 'cozy-migrate "
             "index'): the JSON goes wrong at byte offset %zu", at);
        return NULL;
    }
    size_t at = (size_t)(end - text);
    while (at < len && is_space(text[at]))
        at++;
    if (at < len) {
        fail(err, name, "%s at byte offset %zu, after the index's object: an index is "
             "one JSON object and nothing after it", text[at] == '{' ? "a second object" :
             "trailing bytes", at);
        cJSON_Delete(o);
        return NULL;
    }
    if (!cJSON_IsObject(o)) {
        fail(err, name, "not a migrations index (a JSON object from 'cozy-migrate "
             "index')");
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

int index_parse(const char *name, const char *text, size_t len, struct index *ix, struct buf *err)
{
    static const char *const keys[] = {"version", "image", "pre-apply", "background", "revoked",
                                       NULL};
    memset(ix, 0, sizeof *ix);
    index_policy_default(&ix->pol);
    cJSON *o = one_object(name, text, len, err);
    int rc = -1;
    char **seen = NULL;
    size_t nseen = 0;
    if (!o)
        goto out;
    if (keys_known(name, "the index", o, keys, err) != 0)
        goto out;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "version");
    if (!cJSON_IsNumber(v) || v->valuedouble != INDEX_VERSION) {
        fail(err, name, "'version' is not %d (an index this cozy-migrate can read; "
             "regenerate it with 'cozy-migrate index')", INDEX_VERSION);
        goto out;
    }
    const cJSON *img = cJSON_GetObjectItemCaseSensitive(o, "image");
    if (!img) {
        fail(err, name, "'image' is missing (null when the chart's values name it)");
        goto out;
    }
    if (!cJSON_IsNull(img)) {
        if (!cJSON_IsString(img) || index_image_check(img->valuestring, 0, err) != 0) {
            char *why = cJSON_IsString(img) ? buf_detach(err, NULL) : NULL;
            fail(err, name, "'image': %s", why ? why : "not a string");
            mem_free(why);
            goto out;
        }
        if (!(ix->image = strdup(img->valuestring))) {
            fail(err, name, "out of memory");
            goto out;
        }
    }
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(o, "pre-apply");
    const cJSON *bg = cJSON_GetObjectItemCaseSensitive(o, "background");
    const cJSON *rev = cJSON_GetObjectItemCaseSensitive(o, "revoked");
    if (!pre || !bg || !rev) {
        fail(err, name, "'%s' is missing", !pre ? "pre-apply" : !bg ? "background" : "revoked");
        goto out;
    }
    if (parse_tier(name, "pre-apply", pre, &ix->pre, &ix->npre, &seen, &nseen, err) != 0 ||
        parse_tier(name, "background", bg, &ix->bg, &ix->nbg, &seen, &nseen, err) != 0)
        goto out;
    /* A revoked slug may be shipped still (it never runs), but never in a
     * tier list: the generator leaves it out of them. */
    if (slug_array(name, "revoked", rev, &ix->revoked, &ix->nrevoked, &seen, &nseen, err) != 0)
        goto out;
    rc = 0;
out:
    free_strv(seen, nseen);
    cJSON_Delete(o);
    if (rc != 0)
        index_free(ix);
    return rc;
}

/* ---- the ConfigMap ------------------------------------------------------ */

struct nul_seen {
    char key[64];
    int any, in_index;
};

static void nul_value(void *ud, const char *key, size_t klen)
{
    struct nul_seen *n = ud;
    if (klen == strlen(INDEX_KEY) && memcmp(key, INDEX_KEY, klen) == 0)
        n->in_index = 1;
    if (!n->any)
        snprintf(n->key, sizeof n->key, "%.*s", (int)(klen < 60 ? klen : 60), key);
    n->any = 1;
}

/* The policy keys of data into ix->pol (the defaults stay for those
 * absent). 0, or -1 with err. */
static int policy_keys(const char *name, const cJSON *data, struct index *ix, struct buf *err)
{
    char v1[160];
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(data, INDEX_KEY_ATTEMPTS);
    if (v && parse_decimal(v->valuestring, 1000, &ix->pol.max_attempts) != 0)
        return fail(err, name, "key %s is \"%s\", not a number from 1 to 1000",
                    INDEX_KEY_ATTEMPTS, shown(v->valuestring, v1));
    if (v && ix->pol.max_attempts < 1)
        return fail(err, name, "key %s is \"%s\", not a number from 1 to 1000",
                    INDEX_KEY_ATTEMPTS, shown(v->valuestring, v1));
    struct { const char *key; double *at; } durs[] = {
        {INDEX_KEY_BACKOFF, &ix->pol.backoff}, {INDEX_KEY_BACKOFF_MAX, &ix->pol.backoff_max}};
    for (size_t i = 0; i < 2; i++) {
        v = cJSON_GetObjectItemCaseSensitive(data, durs[i].key);
        if (v && (parse_duration(v->valuestring, durs[i].at) != 0 || *durs[i].at <= 0))
            return fail(err, name, "key %s is \"%s\", not a duration like 10m",
                        durs[i].key, shown(v->valuestring, v1));
    }
    return 0;
}

/* Whether a and b name one image: equal, or the same @sha256 digest (a
 * mirror of it). */
static int index_same_image(const char *a, const char *b)
{
    if (!a || !b)
        return 0;
    if (strcmp(a, b) == 0)
        return 1;
    const char *da = strstr(a, "@sha256:"), *db = strstr(b, "@sha256:");
    return da && db && strcmp(da, db) == 0;
}

int index_from_configmap(const char *name, const cJSON *cm, const char *raw, size_t rawlen,
                         struct index *ix, struct buf *err)
{
    static const char *const keys[] = {INDEX_KEY, INDEX_KEY_IMAGE, INDEX_KEY_ATTEMPTS,
                                       INDEX_KEY_BACKOFF, INDEX_KEY_BACKOFF_MAX, NULL};
    memset(ix, 0, sizeof *ix);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(cm, "data");
    const cJSON *bin = cJSON_GetObjectItemCaseSensitive(cm, "binaryData");
    if (bin && !cJSON_IsNull(bin) && (!cJSON_IsObject(bin) || bin->child))
        return fail(err, name, "the ConfigMap has binaryData: an index is text (data "
                    "keys %s, %s and the retry policy alone)", INDEX_KEY, INDEX_KEY_IMAGE);
    if (!cJSON_IsObject(data))
        return fail(err, name, "the ConfigMap has no data");
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(data, INDEX_KEY);
    if (!text)
        return fail(err, name, "the ConfigMap has no key %s (the chart renders it from "
                    "files/cozy-migrate-index.json)", INDEX_KEY);
    if (keys_known(name, "the ConfigMap's data", data, keys, err) != 0)
        return -1;
    for (const cJSON *k = data->child; k; k = k->next)
        if (!cJSON_IsString(k))
            return fail(err, name, "key %s is not a string", k->string);
    struct nul_seen nul = {{0}, 0, 0};
    if (raw)
        configmap_nul_values(raw, rawlen, nul_value, &nul);
    if (nul.in_index)
        /* cJSON's string ends at the first NUL: that is where it was */
        return fail(err, name, "key %s: a NUL byte at byte offset %zu: an index is one "
                    "JSON object and nothing after it", INDEX_KEY, strlen(text->valuestring));
    if (nul.any)
        return fail(err, name, "key %s holds a NUL byte", nul.key);
    char where[300];
    snprintf(where, sizeof where, "%s, key %s", name, INDEX_KEY);
    if (index_parse(where, text->valuestring, strlen(text->valuestring), ix, err) != 0)
        return -1;
    ix->configmap = 1;
    const cJSON *img = cJSON_GetObjectItemCaseSensitive(data, INDEX_KEY_IMAGE);
    if (img && index_image_check(img->valuestring, 0, err) != 0) {
        char *why = buf_detach(err, NULL);
        index_free(ix);
        fail(err, name, "key %s: %s", INDEX_KEY_IMAGE, why ? why : "");
        mem_free(why);
        return -1;
    }
    if (img && ix->image && !index_same_image(ix->image, img->valuestring)) {
        fail(err, name, "key %s names the image '%s', and its %s '%s': an index names "
             "one image", INDEX_KEY_IMAGE, img->valuestring, INDEX_KEY, ix->image);
        index_free(ix);
        return -1;
    }
    if (img) {
        free(ix->image);
        if (!(ix->image = strdup(img->valuestring))) {
            index_free(ix);
            return fail(err, name, "out of memory");
        }
    }
    if (policy_keys(name, data, ix, err) != 0) {
        index_free(ix);
        return -1;
    }
    return 0;
}

int index_load_file(const char *file, struct index *ix, struct buf *err)
{
    memset(ix, 0, sizeof *ix);
    size_t len = 0;
    char *text = util_read_file(file, &len);
    if (!text)
        return fail(err, file, "cannot be read");
    int rc = -1;
    const char *nul = memchr(text, '\0', len);
    size_t at = 0;
    while (at < len && is_space(text[at]))
        at++;
    if (nul) {
        fail(err, file, "a NUL byte at byte offset %zu: an index is one document and "
             "nothing after it", (size_t)(nul - text));
    } else if (at < len && text[at] == '{') {
        /* JSON: the index file, or a ConfigMap as `kubectl get -o json` gives it */
        cJSON *o = one_object(file, text, len, err);
        if (o && !cJSON_GetObjectItemCaseSensitive(o, "kind"))
            rc = index_parse(file, text, len, ix, err);
        else if (o && !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "kind")))
            fail(err, file, "neither a migrations index nor a ConfigMap holding one");
        else if (o && strcmp(cJSON_GetObjectItemCaseSensitive(o, "kind")->valuestring,
                             "ConfigMap") != 0)
            fail(err, file, "neither a migrations index nor a ConfigMap holding one");
        else if (o)
            rc = index_from_configmap(file, o, text, len, ix, err);
        cJSON_Delete(o);
    } else {
        struct yaml_doc doc;
        memset(&doc, 0, sizeof doc);
        if (yaml_load_single(file, text, len, &doc, err) == 0) {
            const cJSON *kind = cJSON_GetObjectItemCaseSensitive(doc.root, "kind");
            if (!cJSON_IsString(kind) || strcmp(kind->valuestring, "ConfigMap") != 0)
                fail(err, file, "neither a migrations index nor a ConfigMap holding one");
            else
                rc = index_from_configmap(file, doc.root, NULL, 0, ix, err);
        }
        yaml_doc_free(&doc);
    }
    free(text);
    return rc;
}

/* ---- comparing ---------------------------------------------------------- */

struct diff {
    void (*say)(void *ud, const char *line);
    void *ud;
    const char *tree;
    size_t n;
};

static void differ(struct diff *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void differ(struct diff *d, const char *fmt, ...)
{
    char line[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    d->say(d->ud, line);
    d->n++;
}

static long pos_of(char *const *v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], s) == 0)
            return (long)i;
    return -1;
}

/* One list compared: each slug missing, extra, or out of order (among the
 * slugs both hold, a different position). */
static void compare_list(struct diff *d, const char *what, char *const *got, size_t ngot,
                         char *const *want, size_t nwant)
{
    for (size_t i = 0; i < nwant; i++)
        if (pos_of(got, ngot, want[i]) < 0)
            differ(d, "%s slug '%s' is shipped by the tree (%s) but absent from the index", what,
                   want[i], d->tree);
    for (size_t i = 0; i < ngot; i++)
        if (pos_of(want, nwant, got[i]) < 0)
            differ(d, "%s slug '%s' is in the index but the tree (%s) does not ship it%s", what,
                   got[i], d->tree, strcmp(what, "revoked") == 0 ? " as revoked" : " in that tier");
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

static void compare_tier(struct diff *d, const char *tier, const struct index_slug *got,
                         size_t ngot, const struct index_slug *want, size_t nwant)
{
    char **gs = calloc(ngot + 1, sizeof *gs), **ws = calloc(nwant + 1, sizeof *ws);
    if (!gs || !ws) {
        differ(d, "out of memory");
        free(gs);
        free(ws);
        return;
    }
    for (size_t i = 0; i < ngot; i++)
        gs[i] = got[i].slug;
    for (size_t i = 0; i < nwant; i++)
        ws[i] = want[i].slug;
    compare_list(d, tier, gs, ngot, ws, nwant);
    for (size_t i = 0; i < nwant; i++) {
        const struct index_slug *w = &want[i], *g = NULL;
        long at = pos_of(gs, ngot, w->slug);
        if (at < 0)
            continue;
        g = &got[at];
        if (g->timeout_s != w->timeout_s) {
            char gt[32], wt[32];
            seconds_text(g->timeout_s, gt, sizeof gt);
            seconds_text(w->timeout_s, wt, sizeof wt);
            differ(d, "%s slug '%s': timeout %ss in the index, %ss in the tree", tier, w->slug,
                   gt, wt);
        }
        if (g->on_error != w->on_error)
            differ(d, "%s slug '%s': on-error=%s in the index, %s in the tree", tier, w->slug,
                   header_on_error_name(g->on_error), header_on_error_name(w->on_error));
        int same = g->nrequires == w->nrequires;
        for (size_t r = 0; same && r < w->nrequires; r++)
            same = strcmp(g->requires[r], w->requires[r]) == 0;
        if (!same)
            differ(d, "%s slug '%s': its requires differ from the tree's header", tier, w->slug);
        if (g->legacy != w->legacy)
            differ(d, "%s slug '%s': legacy number %ld in the index, %ld in the tree's legacy-map",
                   tier, w->slug, g->legacy, w->legacy);
    }
    free(gs);
    free(ws);
}

size_t index_compare(const struct index *got, const struct index *want, const char *tree,
                     void (*say)(void *ud, const char *line), void *ud)
{
    struct diff d = {say, ud, tree, 0};
    compare_tier(&d, "pre-apply", got->pre, got->npre, want->pre, want->npre);
    compare_tier(&d, "background", got->bg, got->nbg, want->bg, want->nbg);
    compare_list(&d, "revoked", got->revoked, got->nrevoked, want->revoked, want->nrevoked);
    if (want->image && !got->image)
        differ(&d, "the index names no image, not the '%s' this check runs for", want->image);
    else if (want->image && !index_same_image(got->image, want->image))
        differ(&d, "the index names the image '%s', not the '%s' this check runs for",
               got->image, want->image);
    else if (!want->image && got->image)
        differ(&d, "the index names the image '%s', and no image was given to compare it with "
               "(--image REF, or the MIGRATIONS_IMAGE of the image this runs in; make install: "
               "INDEX_IMAGE=REF)", got->image);
    if (got->configmap && want->configmap) {
        char a[32], b[32];
        if (got->pol.max_attempts != want->pol.max_attempts)
            differ(&d, "key %s is %ld in the index, %ld expected", INDEX_KEY_ATTEMPTS,
                   got->pol.max_attempts, want->pol.max_attempts);
        struct { const char *key; double g, w; } durs[] = {
            {INDEX_KEY_BACKOFF, got->pol.backoff, want->pol.backoff},
            {INDEX_KEY_BACKOFF_MAX, got->pol.backoff_max, want->pol.backoff_max}};
        for (size_t i = 0; i < 2; i++)
            if (durs[i].g != durs[i].w) {
                format_duration(durs[i].g, a, sizeof a);
                format_duration(durs[i].w, b, sizeof b);
                differ(&d, "key %s is %s in the index, %s expected", durs[i].key, a, b);
            }
    }
    return d.n;
}

/* ---- back into a tree --------------------------------------------------- */

/* The batch named b in t->man, appended when new (the index lists slugs in
 * manifest order, so a batch's slugs come together). */
static struct batch *batch_of(struct tree *t, const char *b)
{
    if (t->man.n && strcmp(t->man.b[t->man.n - 1].name, b) == 0)
        return &t->man.b[t->man.n - 1];
    struct batch *nb = mem_grow(t->man.b, t->man.n + 1, sizeof *nb);
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
                     const struct index_slug *g)
{
    struct batch *b = batch_of(t, batch);
    if (!b)
        return -1;
    struct batch_entry *ne = mem_grow(b->e, b->n + 1, sizeof *ne);
    if (!ne)
        return -1;
    b->e = ne;
    memset(&ne[b->n], 0, sizeof *ne);
    if (!(ne[b->n].slug = strdup(slug)))
        return -1;
    b->n++;
    struct migration *nm = mem_grow(t->m, t->n + 1, sizeof *nm);
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
        if (add_entry(t, "00000-pre-apply", ix->pre[i].slug, "pre-apply", &ix->pre[i]) != 0)
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

int index_image_check(const char *ref, int require_digest, struct buf *err)
{
    size_t n = strlen(ref);
    if (!n || n > IMAGE_MAX) {
        buf_setf(err, "'%.80s' is not an image reference (1 to %d bytes)", ref, IMAGE_MAX);
        return -1;
    }
    for (const unsigned char *p = (const unsigned char *)ref; *p; p++)
        if (*p <= 0x20 || *p >= 0x7f) {
            buf_setf(err, "'%s' is not an image reference (a space or control "
                     "character)", ref);
            return -1;
        }
    char name[IMAGE_MAX + 1];
    snprintf(name, sizeof name, "%s", ref);
    char *at = strchr(name, '@');
    int digest = 0;
    if (at) {
        if (strncmp(at, "@sha256:", 8) != 0 || !is_hex64(at + 8)) {
            buf_setf(err, "'%s': a digest is @sha256: and 64 lower-case hex digits", ref);
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
        buf_setf(err, "'%s' is not an image reference", ref);
        return -1;
    }
    if (tag && strcmp(tag, "latest") == 0) {
        buf_setf(err, "'%s': the tag latest names no fixed image; give a version tag "
                 "or a digest", ref);
        return -1;
    }
    if (!tag && !digest) {
        buf_setf(err, "'%s': give a tag or a digest (the ledger records which image "
                 "ran)", ref);
        return -1;
    }
    if (require_digest && !digest) {
        buf_setf(err, "'%s' names the image by tag alone, and --require-digest asks "
                 "for a digest (repo@sha256:...): a release index pins the image that ran", ref);
        return -1;
    }
    return 0;
}

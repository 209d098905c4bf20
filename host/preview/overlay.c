/* overlay.c: the preview's copy-on-write view (see overlay.h).
 *
 * Owns the store (a JSON document {"entries":[{key, path, object |
 * deleted}]} in the order first written), label and field selectors with
 * the apiserver's semantics, JSON merge patch (RFC 7386) and JSON patch
 * (RFC 6902) on a held object. Must never guess: a selector or a patch it
 * cannot evaluate is an error for the caller to report. cJSON's own
 * cJSON_Utils (patches) is not in Debian's libcjson, hence the patch code
 * here. */
#include "preview/overlay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "client/apipath.h"

struct overlay {
    cJSON *doc;             /* {"entries": [...]} */
    cJSON *entries;
    int changed;
};

static struct overlay *overlay_new(cJSON *doc)
{
    struct overlay *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    o->doc = doc ? doc : cJSON_CreateObject();
    o->entries = cJSON_GetObjectItemCaseSensitive(o->doc, "entries");
    if (!o->entries)
        o->entries = cJSON_AddArrayToObject(o->doc, "entries");
    if (!o->doc || !cJSON_IsArray(o->entries)) {
        cJSON_Delete(o->doc);
        free(o);
        return NULL;
    }
    return o;
}

struct overlay *overlay_load(const char *path, char *err, size_t errlen)
{
    size_t len;
    char *text = util_read_file(path, &len);
    cJSON *doc = NULL;
    if (text && len) {
        doc = cJSON_ParseWithLength(text, len);
        if (!doc) {
            snprintf(err, errlen, "%s: the preview overlay is not JSON", path);
            free(text);
            return NULL;
        }
    }
    free(text);
    struct overlay *o = overlay_new(doc);
    if (!o)
        snprintf(err, errlen, "%s: not a preview overlay (or out of memory)", path);
    return o;
}

struct overlay *overlay_empty(void) { return overlay_new(NULL); }

int overlay_save(const struct overlay *o, const char *path, char *err, size_t errlen)
{
    char *text = cJSON_PrintUnformatted(o->doc);
    if (!text) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    int rc = f && fwrite(text, 1, strlen(text), f) == strlen(text) ? 0 : -1;
    if (f && fclose(f) != 0)
        rc = -1;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -1;
    if (rc != 0)
        snprintf(err, errlen, "%s: cannot write the preview overlay", path);
    cJSON_free(text);
    return rc;
}

void overlay_free(struct overlay *o)
{
    if (!o)
        return;
    cJSON_Delete(o->doc);
    free(o);
}

int overlay_changed(const struct overlay *o) { return o && o->changed; }

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const char *meta(const cJSON *obj, const char *k)
{
    return jstr(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), k);
}

/* The key and canonical object path of what path names (its name and
 * namespace from obj when path is a collection). -1 when it names none. */
static int locate(const char *path, const cJSON *obj, char *key, size_t klen, char *opath,
                  size_t plen)
{
    struct apipath p;
    if (apipath_parse(path, &p) != 0)
        return -1;
    const char *name = *p.name ? p.name : meta(obj, "name");
    const char *ns = *p.ns ? p.ns : meta(obj, "namespace");
    if (!name || !*name)
        return -1;
    apipath_key(&p, ns, name, key, klen);
    snprintf(opath, plen, "%s%s%s/%s/%s", p.prefix, ns && *ns ? "/namespaces/" : "",
             ns && *ns ? ns : "", p.resource, name);
    return 0;
}

static cJSON *find(const struct overlay *o, const char *key)
{
    cJSON *e;
    cJSON_ArrayForEach(e, o->entries) {
        const char *k = jstr(e, "key");
        if (k && strcmp(k, key) == 0)
            return e;
    }
    return NULL;
}

enum overlay_state overlay_get(const struct overlay *o, const char *path, const cJSON **obj)
{
    char key[1400], opath[1400];
    *obj = NULL;
    if (!o || locate(path, NULL, key, sizeof key, opath, sizeof opath) != 0)
        return OV_UNKNOWN;
    const cJSON *e = find(o, key);
    if (!e)
        return OV_UNKNOWN;
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "deleted")))
        return OV_DELETED;
    *obj = cJSON_GetObjectItemCaseSensitive(e, "object");
    return OV_PRESENT;
}

static int set_entry(struct overlay *o, const char *path, const cJSON *obj, int deleted)
{
    char key[1400], opath[1400];
    if (locate(path, obj, key, sizeof key, opath, sizeof opath) != 0)
        return -1;
    cJSON *e = find(o, key);
    if (!e) {
        e = cJSON_CreateObject();
        if (!e || !cJSON_AddItemToArray(o->entries, e)) {
            cJSON_Delete(e);
            return -1;
        }
        if (!cJSON_AddStringToObject(e, "key", key) || !cJSON_AddStringToObject(e, "path", opath))
            return -1;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(e, "object");
    cJSON_DeleteItemFromObjectCaseSensitive(e, "deleted");
    cJSON *copy = obj && !deleted ? cJSON_Duplicate(obj, 1) : NULL;
    if (deleted ? !cJSON_AddTrueToObject(e, "deleted")
                : (!copy || !cJSON_AddItemToObject(e, "object", copy))) {
        cJSON_Delete(copy);
        return -1;
    }
    o->changed = 1;
    return 0;
}

int overlay_put(struct overlay *o, const char *path, const cJSON *obj)
{
    return set_entry(o, path, obj, 0);
}

int overlay_delete(struct overlay *o, const char *path) { return set_entry(o, path, NULL, 1); }

/* ---- selectors ------------------------------------------------------------ */

static void trim(char **s, char **e)
{
    while (*s < *e && (**s == ' ' || **s == '\t'))
        (*s)++;
    while (*e > *s && ((*e)[-1] == ' ' || (*e)[-1] == '\t'))
        (*e)--;
}

/* Is v one of the comma-separated values in list[0..n)? */
static int in_set(const char *v, const char *list, size_t n)
{
    const char *p = list, *end = list + n;
    while (p <= end) {
        const char *c = memchr(p, ',', (size_t)(end - p));
        if (!c)
            c = end;
        char *s = (char *)p, *e = (char *)c;
        trim(&s, &e);
        if (v && (size_t)(e - s) == strlen(v) && strncmp(s, v, (size_t)(e - s)) == 0)
            return 1;
        p = c + 1;
    }
    return 0;
}

/* One requirement of a label selector, s..e. 1 match, 0 not, -1 error. */
static int label_req(const cJSON *labels, char *s, char *e, char *err, size_t errlen)
{
    trim(&s, &e);
    if (s == e)
        return 1;
    char req[512];
    snprintf(req, sizeof req, "%.*s", (int)(e - s), s);
    int neg = req[0] == '!';
    char *op = NULL;
    const char *oname = NULL;
    static const char *const ops[] = {" notin ", " in ", "!=", "==", "="};
    for (int i = 0; i < 5 && !op; i++)
        if ((op = strstr(req, ops[i])))
            oname = ops[i];
    if (!op) {
        /* exists / !exists */
        const char *key = req + neg;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(labels, key);
        if (strpbrk(key, " ()")) {
            snprintf(err, errlen, "label selector requirement '%s' cannot be evaluated", req);
            return -1;
        }
        return neg ? v == NULL : v != NULL;
    }
    char key[256];
    snprintf(key, sizeof key, "%.*s", (int)(op - req), req);
    char *ks = key, *ke = key + strlen(key);
    trim(&ks, &ke);
    *ke = '\0';
    const char *val = op + strlen(oname);
    const cJSON *lv = cJSON_GetObjectItemCaseSensitive(labels, ks);
    const char *have = cJSON_IsString(lv) ? lv->valuestring : NULL;
    if (oname[0] == ' ') {
        while (*val == ' ')
            val++;
        size_t vl = strlen(val);
        if (vl < 2 || val[0] != '(' || val[vl - 1] != ')') {
            snprintf(err, errlen, "label selector requirement '%s' cannot be evaluated", req);
            return -1;
        }
        int member = have && in_set(have, val + 1, vl - 2);
        return strcmp(oname, " in ") == 0 ? member : !member;
    }
    char v[256];
    snprintf(v, sizeof v, "%s", val);
    char *vs = v, *ve = v + strlen(v);
    trim(&vs, &ve);
    *ve = '\0';
    int eq = have && strcmp(have, vs) == 0;
    /* != matches objects without the label too, as the apiserver does. */
    return strcmp(oname, "!=") == 0 ? !eq : eq;
}

static int label_match(const cJSON *obj, const char *sel, char *err, size_t errlen)
{
    if (!sel || !*sel)
        return 1;
    const cJSON *labels = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"),
                                                           "labels");
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", sel);
    /* Split on commas outside parentheses. */
    char *start = buf;
    int depth = 0;
    for (char *p = buf;; p++) {
        if (*p == '(')
            depth++;
        else if (*p == ')')
            depth--;
        if ((*p == ',' && depth == 0) || *p == '\0') {
            int r = label_req(labels, start, p, err, errlen);
            if (r <= 0)
                return r;
            if (*p == '\0')
                break;
            start = p + 1;
        }
    }
    return 1;
}

static int field_match(const cJSON *obj, const char *sel, char *err, size_t errlen)
{
    if (!sel || !*sel)
        return 1;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", sel);
    for (char *save = NULL, *r = strtok_r(buf, ",", &save); r; r = strtok_r(NULL, ",", &save)) {
        char *s = r, *e = r + strlen(r);
        trim(&s, &e);
        *e = '\0';
        char *op = strstr(s, "!=");
        int ne = op != NULL;
        if (!op)
            op = strstr(s, "==");
        if (!op)
            op = strchr(s, '=');
        if (!op) {
            snprintf(err, errlen, "field selector '%s' cannot be evaluated", s);
            return -1;
        }
        char field[128];
        snprintf(field, sizeof field, "%.*s", (int)(op - s), s);
        const char *val = op + (op[0] == '=' && op[1] != '=' ? 1 : 2);
        const char *have;
        if (strcmp(field, "metadata.name") == 0)
            have = meta(obj, "name");
        else if (strcmp(field, "metadata.namespace") == 0)
            have = meta(obj, "namespace");
        else {
            snprintf(err, errlen, "the preview cannot evaluate the field selector on '%s' (only "
                     "metadata.name and metadata.namespace)", field);
            return -1;
        }
        int eq = have && strcmp(have, val) == 0;
        if (ne ? eq : !eq)
            return 0;
    }
    return 1;
}

/* Whether obj matches a label / field selector: 1, 0, or -1 with err when
 * the selector cannot be evaluated. */
static int overlay_selector_match(const cJSON *obj, const char *label_selector,
                                  const char *field_selector, char *err, size_t errlen)
{
    int r = label_match(obj, label_selector, err, errlen);
    if (r <= 0)
        return r;
    return field_match(obj, field_selector, err, errlen);
}

int overlay_merge_list(const struct overlay *o, const char *collection_path,
                       const char *label_selector, const char *field_selector, cJSON *page,
                       int last_page, char *err, size_t errlen)
{
    struct apipath c;
    cJSON *items = cJSON_GetObjectItemCaseSensitive(page, "items");
    if (!o || !cJSON_IsArray(items) || apipath_parse(collection_path, &c) != 0 || *c.name)
        return 0;
    /* What the overlay holds replaces what the server said. */
    cJSON *it = items->child;
    while (it) {
        cJSON *next = it->next;
        char key[1400];
        const char *ns = meta(it, "namespace");
        apipath_key(&c, ns ? ns : c.ns, meta(it, "name"), key, sizeof key);
        if (find(o, key))
            cJSON_Delete(cJSON_DetachItemViaPointer(items, it));
        it = next;
    }
    if (!last_page)
        return 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, o->entries) {
        const cJSON *obj = cJSON_GetObjectItemCaseSensitive(e, "object");
        struct apipath p;
        const char *path = jstr(e, "path");
        if (!obj || !path || apipath_parse(path, &p) != 0 || strcmp(p.prefix, c.prefix) != 0 ||
            strcmp(p.resource, c.resource) != 0 || (*c.ns && strcmp(p.ns, c.ns) != 0))
            continue;
        int m = overlay_selector_match(obj, label_selector, field_selector, err, errlen);
        if (m < 0)
            return -1;
        cJSON *copy = m ? cJSON_Duplicate(obj, 1) : NULL;
        if (m && (!copy || !cJSON_AddItemToArray(items, copy))) {
            cJSON_Delete(copy);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    return 0;
}

/* ---- patches -------------------------------------------------------------- */

static cJSON *merge_patch(cJSON *target, const cJSON *patch)
{
    if (!cJSON_IsObject(patch)) {
        cJSON_Delete(target);
        return cJSON_Duplicate(patch, 1);
    }
    if (!cJSON_IsObject(target)) {
        cJSON_Delete(target);
        target = cJSON_CreateObject();
    }
    const cJSON *p;
    cJSON_ArrayForEach(p, patch) {
        cJSON *cur = cJSON_DetachItemFromObjectCaseSensitive(target, p->string);
        if (cJSON_IsNull(p)) {
            cJSON_Delete(cur);
            continue;
        }
        cJSON *merged = merge_patch(cur, p);
        if (!merged || !cJSON_AddItemToObject(target, p->string, merged)) {
            cJSON_Delete(merged);
            cJSON_Delete(target);
            return NULL;
        }
    }
    return target;
}

/* A JSON pointer's parent and last token. *key is unescaped (~1 -> /, ~0 -> ~). */
static cJSON *pointer_parent(cJSON *root, const char *ptr, char *key, size_t klen)
{
    if (*ptr != '/')
        return NULL;
    cJSON *cur = root;
    const char *p = ptr + 1;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        char tok[512];
        size_t o = 0;
        for (size_t i = 0; i < n && o + 1 < sizeof tok; i++) {
            if (p[i] == '~' && i + 1 < n && (p[i + 1] == '0' || p[i + 1] == '1')) {
                tok[o++] = p[i + 1] == '0' ? '~' : '/';
                i++;
            } else {
                tok[o++] = p[i];
            }
        }
        tok[o] = '\0';
        if (!slash) {
            snprintf(key, klen, "%s", tok);
            return cur;
        }
        if (cJSON_IsArray(cur)) {
            char *end;
            long idx = strtol(tok, &end, 10);
            cur = *end || idx < 0 ? NULL : cJSON_GetArrayItem(cur, (int)idx);
        } else {
            cur = cJSON_GetObjectItemCaseSensitive(cur, tok);
        }
        if (!cur)
            return NULL;
        p = slash + 1;
    }
}

static int array_index(const cJSON *arr, const char *key, int allow_end, int *idx)
{
    if (allow_end && strcmp(key, "-") == 0) {
        *idx = cJSON_GetArraySize(arr);
        return 0;
    }
    char *end;
    long i = strtol(key, &end, 10);
    if (!*key || *end || i < 0 || i > cJSON_GetArraySize(arr) - (allow_end ? 0 : 1))
        return -1;
    *idx = (int)i;
    return 0;
}

/* The value at ptr, taken out of the document when detach is set; NULL when
 * there is none. The empty pointer is the whole document (never detached). */
static cJSON *pointer_take(cJSON *root, const char *ptr, int detach)
{
    if (!*ptr)
        return detach ? NULL : root;
    char key[512];
    cJSON *parent = pointer_parent(root, ptr, key, sizeof key);
    if (!parent)
        return NULL;
    if (cJSON_IsArray(parent)) {
        int i;
        if (array_index(parent, key, 0, &i) != 0)
            return NULL;
        return detach ? cJSON_DetachItemFromArray(parent, i) : cJSON_GetArrayItem(parent, i);
    }
    return detach ? cJSON_DetachItemFromObjectCaseSensitive(parent, key)
                  : cJSON_GetObjectItemCaseSensitive(parent, key);
}

static cJSON *pointer_get(cJSON *root, const char *ptr) { return pointer_take(root, ptr, 0); }
static cJSON *pointer_detach(cJSON *root, const char *ptr) { return pointer_take(root, ptr, 1); }

static int pointer_add(cJSON *root, const char *ptr, cJSON *v)
{
    char key[512];
    cJSON *parent = pointer_parent(root, ptr, key, sizeof key);
    if (cJSON_IsArray(parent)) {
        int i;
        if (array_index(parent, key, 1, &i) != 0)
            return -1;
        return cJSON_InsertItemInArray(parent, i, v) ? 0 : -1;
    }
    if (!cJSON_IsObject(parent))
        return -1;
    cJSON_DeleteItemFromObjectCaseSensitive(parent, key);
    return cJSON_AddItemToObject(parent, key, v) ? 0 : -1;
}

static int json_patch(cJSON *doc, const cJSON *ops, char *err, size_t errlen)
{
    if (!cJSON_IsArray(ops)) {
        snprintf(err, errlen, "a JSON patch is an array of operations");
        return -1;
    }
    const cJSON *op;
    cJSON_ArrayForEach(op, ops) {
        const char *name = jstr(op, "op"), *path = jstr(op, "path"), *from = jstr(op, "from");
        const cJSON *value = cJSON_GetObjectItemCaseSensitive(op, "value");
        if (!name || !path) {
            snprintf(err, errlen, "a JSON patch operation needs op and path");
            return -1;
        }
        int rc = -1;
        if (strcmp(name, "test") == 0) {
            cJSON *cur = pointer_get(doc, path);
            rc = cur && value && cJSON_Compare(cur, value, 1) ? 0 : -1;
            if (rc) {
                snprintf(err, errlen, "JSON patch test failed at %s", path);
                return -1;
            }
            continue;
        }
        if (strcmp(name, "remove") == 0) {
            cJSON *gone = pointer_detach(doc, path);
            rc = gone ? 0 : -1;
            cJSON_Delete(gone);
        } else if (strcmp(name, "add") == 0 || strcmp(name, "replace") == 0) {
            if (strcmp(name, "replace") == 0) {
                cJSON *gone = pointer_detach(doc, path);
                if (!gone) {
                    snprintf(err, errlen, "JSON patch replace: nothing at %s", path);
                    return -1;
                }
                cJSON_Delete(gone);
            }
            cJSON *v = value ? cJSON_Duplicate(value, 1) : NULL;
            rc = v ? pointer_add(doc, path, v) : -1;
            if (rc)
                cJSON_Delete(v);
        } else if ((strcmp(name, "move") == 0 || strcmp(name, "copy") == 0) && from) {
            cJSON *v = strcmp(name, "move") == 0 ? pointer_detach(doc, from)
                                                 : cJSON_Duplicate(pointer_get(doc, from), 1);
            rc = v ? pointer_add(doc, path, v) : -1;
            if (rc)
                cJSON_Delete(v);
        }
        if (rc) {
            snprintf(err, errlen, "JSON patch %s at %s does not apply", name, path);
            return -1;
        }
    }
    return 0;
}

int overlay_apply_patch(const cJSON *obj, const char *content_type, const cJSON *patch,
                        cJSON **out, char *err, size_t errlen)
{
    *out = NULL;
    if (content_type && strcmp(content_type, "application/merge-patch+json") == 0) {
        *out = merge_patch(cJSON_Duplicate(obj, 1), patch);
        if (!*out)
            snprintf(err, errlen, "out of memory");
        return *out ? 0 : -1;
    }
    if (content_type && strcmp(content_type, "application/json-patch+json") == 0) {
        cJSON *doc = cJSON_Duplicate(obj, 1);
        if (!doc || json_patch(doc, patch, err, errlen) != 0) {
            cJSON_Delete(doc);
            return -1;
        }
        *out = doc;
        return 0;
    }
    snprintf(err, errlen, "the preview cannot apply a %s patch to an object an earlier write of "
             "this preview changed (merge and JSON patches only)",
             content_type ? content_type : "(untyped)");
    return -1;
}

cJSON *overlay_objects(const struct overlay *o)
{
    cJSON *arr = cJSON_CreateArray();
    const cJSON *e;
    cJSON_ArrayForEach(e, o->entries) {
        cJSON *x = cJSON_CreateObject();
        const cJSON *obj = cJSON_GetObjectItemCaseSensitive(e, "object");
        if (!x || !cJSON_AddItemToArray(arr, x) ||
            !cJSON_AddStringToObject(x, "path", jstr(e, "path") ? jstr(e, "path") : "") ||
            (obj ? !cJSON_AddItemToObject(x, "object", cJSON_Duplicate(obj, 1))
                 : !cJSON_AddTrueToObject(x, "deleted"))) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

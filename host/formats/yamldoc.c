/* yamldoc.c: the project's one YAML reader and writer.
 * Owns turning YAML text into cJSON (core-schema scalars, anchors expanded
 * under a budget, duplicate and non-scalar keys refused, a line per node) and
 * the core schema both directions share (the writer is yamlemit.c, the
 * `yaml` Lua module over both lua/luayaml.c). Knows no Lua.
 * Must never interpret what the document means (that is the caller's job),
 * never touch the filesystem except in yaml_load_file, and never let input
 * size, nesting or alias expansion exhaust memory or the C stack.
 * Prefixes: yaml_ (the host's YAML documents; libyaml's own names go
 * on to parser, event, emitter or document). */
#include "formats/yamldoc.h"
#include "formats/yaml_int.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "base/buf.h"
#include "base/mem.h"
#include "base/util.h"

/* An alias re-emits its whole anchored subtree, so a few lines of "billion
 * laughs" can ask for an exponential tree; cap what any document may produce. */
#define YAML_MAX_NODES  1000000u
#define YAML_MAX_BYTES  (64u * 1024u * 1024u)

#define TAG_PREFIX "tag:yaml.org,2002:"

/* Callers print messages on one line; names and keys come from input. */
static void one_line(struct buf *err)
{
    for (size_t i = 0; i < err->len; i++)
        if ((unsigned char)err->p[i] < 0x20 || err->p[i] == 0x7f)
            err->p[i] = ' ';
}

void __attribute__((format(printf, 2, 3)))
yaml_seterr(struct buf *err, const char *fmt, ...)
{
    va_list ap;
    if (!err)
        return;
    buf_reset(err);
    va_start(ap, fmt);
    buf_vaddf(err, fmt, ap);
    va_end(ap);
    one_line(err);
}

/* ---------- core schema ---------- */


static int all_in(const char *s, size_t n, const char *set)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!strchr(set, s[i]) || s[i] == '\0')
            return 0;
    return 1;
}

static int is_null_text(const char *s, size_t n)
{
    return n == 0 || (n == 1 && s[0] == '~') ||
           (n == 4 && (!memcmp(s, "null", 4) || !memcmp(s, "Null", 4) || !memcmp(s, "NULL", 4)));
}

static int bool_text(const char *s, size_t n, int *val)
{
    if (n == 4 && (!memcmp(s, "true", 4) || !memcmp(s, "True", 4) || !memcmp(s, "TRUE", 4))) {
        *val = 1;
        return 1;
    }
    if (n == 5 && (!memcmp(s, "false", 5) || !memcmp(s, "False", 5) || !memcmp(s, "FALSE", 5))) {
        *val = 0;
        return 1;
    }
    return 0;
}

static double radix_value(const char *s, size_t n, int base)
{
    double v = 0;
    for (size_t i = 0; i < n; i++) {
        int d = (s[i] >= '0' && s[i] <= '9') ? s[i] - '0'
              : (s[i] >= 'a' && s[i] <= 'f') ? s[i] - 'a' + 10
              : s[i] - 'A' + 10;
        v = v * base + d;
    }
    return v;
}

/* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
static int is_float_text(const char *s, size_t n)
{
    size_t i = 0, digits = 0;
    if (i < n && (s[i] == '-' || s[i] == '+'))
        i++;
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++, digits++;
    if (i < n && s[i] == '.') {
        size_t frac = 0;
        i++;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++, frac++;
        if (digits == 0 && frac == 0)
            return 0;
    } else if (digits == 0) {
        return 0;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        size_t exp = 0;
        i++;
        if (i < n && (s[i] == '-' || s[i] == '+'))
            i++;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++, exp++;
        if (exp == 0)
            return 0;
    }
    return i == n;
}

/* Resolves a plain scalar the way YAML 1.2's core schema does. `num` gets the
 * value of SK_INT/SK_FLOAT, `b` of SK_BOOL. `s` is NUL-terminated at n. */
enum scalar_kind yaml_resolve_plain(const char *s, size_t n, double *num, int *b)
{
    if (is_null_text(s, n))
        return SK_NULL;
    if (bool_text(s, n, b))
        return SK_BOOL;
    if (n > 2 && s[0] == '0' && s[1] == 'x' && all_in(s + 2, n - 2, "0123456789abcdefABCDEF")) {
        *num = radix_value(s + 2, n - 2, 16);
        return SK_INT;
    }
    if (n > 2 && s[0] == '0' && s[1] == 'o' && all_in(s + 2, n - 2, "01234567")) {
        *num = radix_value(s + 2, n - 2, 8);
        return SK_INT;
    }
    {
        size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
        if (all_in(s + i, n - i, "0123456789")) {
            *num = strtod(s, NULL);
            return SK_INT;
        }
    }
    if (is_float_text(s, n)) {
        *num = strtod(s, NULL);
        return SK_FLOAT;
    }
    {
        const char *t = s;
        size_t m = n;
        int neg = 0;
        if (m > 0 && (t[0] == '-' || t[0] == '+')) {
            neg = t[0] == '-';
            t++, m--;
        }
        if (m == 4 && (!memcmp(t, ".inf", 4) || !memcmp(t, ".Inf", 4) || !memcmp(t, ".INF", 4))) {
            *num = neg ? -HUGE_VAL : HUGE_VAL;
            return SK_FLOAT;
        }
    }
    if (n == 4 && (!memcmp(s, ".nan", 4) || !memcmp(s, ".NaN", 4) || !memcmp(s, ".NAN", 4))) {
        *num = NAN;
        return SK_FLOAT;
    }
    return SK_STR;
}

/* ---------- loader ---------- */

struct anchor {
    char *name;
    const cJSON *value;     /* in the tree, or owned when `owned` */
    int owned;
    char *raw;              /* scalar text, so an alias can serve as a key */
    size_t nodes, bytes;    /* what one more copy costs */
    int height;             /* collection levels it adds when copied */
    struct anchor *next;
};

struct keyent { const char *key; size_t idx; int line, col; };

struct frame {
    cJSON *node;
    int is_map;
    char *key;              /* a mapping's pending key */
    int key_line, key_col;
    char *anchor;
    size_t nodes0, bytes0;  /* counters when the collection opened */
    int height;             /* tallest child so far, in collection levels */
    struct keyent *keys;
    size_t nkeys;
};

struct loader {
    const char *name;
    const char *text;
    size_t len;
    struct yaml_doc *doc;
    struct frame *stack;
    size_t depth;
    struct anchor **buckets;
    size_t nbuckets, nanchors;
    size_t nodes, bytes;
    struct buf *err;
    int single;             /* yaml_load_single: nothing may follow the first document */
    int after;              /* past the first document's end */
};

static int __attribute__((format(printf, 3, 4)))
lfail(struct loader *ld, const yaml_mark_t *m, const char *fmt, ...)
{
    if (!ld->err)
        return -1;
    yaml_seterr(ld->err, "%s:%d:%d: ", ld->name, (int)m->line + 1, (int)m->column + 1);
    va_list ap;
    va_start(ap, fmt);
    buf_vaddf(ld->err, fmt, ap);
    va_end(ap);
    one_line(ld->err);
    return -1;
}

static int oom(struct loader *ld)
{
    yaml_seterr(ld->err, "%s: out of memory", ld->name);
    return -1;
}

static int add_mark(struct loader *ld, const cJSON *node, int line)
{
    struct yaml_doc *d = ld->doc;
    struct yaml_mark *m = mem_grow(d->marks, d->nmarks + 1, sizeof *m);
    if (!m)
        return oom(ld);
    d->marks = m;
    d->marks[d->nmarks].node = node;
    d->marks[d->nmarks].line = line;
    d->nmarks++;
    return 0;
}

static int mark_tree(struct loader *ld, const cJSON *node, int line)
{
    if (add_mark(ld, node, line) < 0)
        return -1;
    for (const cJSON *c = node->child; c; c = c->next)
        if (mark_tree(ld, c, line) < 0)
            return -1;
    return 0;
}

static size_t hash_name(const char *s)
{
    size_t h = 1469598103934665603u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

static struct anchor *find_anchor(struct loader *ld, const char *name)
{
    if (!ld->nbuckets)
        return NULL;
    for (struct anchor *a = ld->buckets[hash_name(name) % ld->nbuckets]; a; a = a->next)
        if (!strcmp(a->name, name))
            return a;
    return NULL;
}

static void free_anchor_value(struct anchor *a)
{
    if (a->owned)
        cJSON_Delete((cJSON *)a->value);
    free(a->raw);
    a->value = NULL;
    a->raw = NULL;
}

/* Takes ownership of `raw` and, when `owned`, of `value`. */
static int set_anchor(struct loader *ld, const char *name, const cJSON *value, int owned,
                      char *raw, size_t nodes, size_t bytes, int height)
{
    struct anchor *a = find_anchor(ld, name);
    if (!a) {
        if (ld->nanchors >= ld->nbuckets) {
            size_t nb = ld->nbuckets ? ld->nbuckets * 2 : 64;
            struct anchor **b = calloc(nb, sizeof *b);
            if (!b)
                goto nomem;
            for (size_t i = 0; i < ld->nbuckets; i++) {
                struct anchor *x = ld->buckets[i], *nx;
                for (; x; x = nx) {
                    nx = x->next;
                    size_t h = hash_name(x->name) % nb;
                    x->next = b[h];
                    b[h] = x;
                }
            }
            free(ld->buckets);
            ld->buckets = b;
            ld->nbuckets = nb;
        }
        a = calloc(1, sizeof *a);
        if (!a)
            goto nomem;
        a->name = strdup(name);
        if (!a->name) {
            free(a);
            goto nomem;
        }
        size_t h = hash_name(name) % ld->nbuckets;
        a->next = ld->buckets[h];
        ld->buckets[h] = a;
        ld->nanchors++;
    } else {
        /* YAML lets a later node reuse an anchor name; later aliases see it. */
        free_anchor_value(a);
    }
    a->value = value;
    a->owned = owned;
    a->raw = raw;
    a->nodes = nodes;
    a->bytes = bytes;
    a->height = height;
    return 0;
nomem:
    if (owned)
        cJSON_Delete((cJSON *)value);
    free(raw);
    return oom(ld);
}

static void free_anchors(struct loader *ld)
{
    for (size_t i = 0; i < ld->nbuckets; i++) {
        struct anchor *a = ld->buckets[i], *nx;
        for (; a; a = nx) {
            nx = a->next;
            free_anchor_value(a);
            free(a->name);
            free(a);
        }
    }
    free(ld->buckets);
    ld->buckets = NULL;
    ld->nbuckets = ld->nanchors = 0;
}

static void free_frame(struct frame *f)
{
    cJSON_Delete(f->node);
    free(f->key);
    free(f->anchor);
    free(f->keys);
    memset(f, 0, sizeof *f);
}

static int charge(struct loader *ld, const yaml_mark_t *m, size_t nodes, size_t bytes)
{
    if (nodes > YAML_MAX_NODES - ld->nodes || bytes > YAML_MAX_BYTES - ld->bytes)
        return lfail(ld, m, "document expands to more than %u nodes or %u bytes (alias bomb?)",
                     YAML_MAX_NODES, YAML_MAX_BYTES);
    ld->nodes += nodes;
    ld->bytes += bytes;
    return 0;
}

/* Hands a finished value of `height` collection levels to its parent.
 * Takes ownership of `v`. */
static int attach(struct loader *ld, cJSON *v, int height)
{
    if (ld->depth == 0) {
        cJSON_Delete(ld->doc->root);
        ld->doc->root = v;
        return 0;
    }
    struct frame *f = &ld->stack[ld->depth - 1];
    if (height > f->height)
        f->height = height;
    /* A copied alias keeps the key it had where the anchor was defined. */
    if (v->string && !(v->type & cJSON_StringIsConst))
        free(v->string);
    v->string = NULL;
    if (!f->is_map) {
        cJSON_AddItemToArray(f->node, v);
        return 0;
    }
    struct keyent *k = mem_grow(f->keys, f->nkeys + 1, sizeof *k);
    if (!k) {
        cJSON_Delete(v);
        return oom(ld);
    }
    f->keys = k;
    /* The parent owns the key string from here on; no copy needed. */
    v->string = f->key;
    f->key = NULL;
    v->type &= ~cJSON_StringIsConst;
    f->keys[f->nkeys].key = v->string;
    f->keys[f->nkeys].idx = f->nkeys;
    f->keys[f->nkeys].line = f->key_line;
    f->keys[f->nkeys].col = f->key_col;
    f->nkeys++;
    /* cJSON_AddItemToObject would copy the key again; linking the item with
     * the array API is the same list operation without the copy. */
    cJSON_AddItemToArray(f->node, v);
    return 0;
}

/* True when the top of the stack is a mapping waiting for a key. */
static int want_key(struct loader *ld)
{
    if (ld->depth == 0)
        return 0;
    struct frame *f = &ld->stack[ld->depth - 1];
    return f->is_map && !f->key;
}

static int set_key(struct loader *ld, char *key, const yaml_mark_t *m)
{
    struct frame *f = &ld->stack[ld->depth - 1];
    f->key = key;
    f->key_line = (int)m->line + 1;
    f->key_col = (int)m->column + 1;
    return 0;
}

static int cmp_keyent(const void *a, const void *b)
{
    const struct keyent *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c)
        return c;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int check_duplicates(struct loader *ld, struct frame *f)
{
    if (f->nkeys < 2)
        return 0;
    qsort(f->keys, f->nkeys, sizeof *f->keys, cmp_keyent);
    const struct keyent *dup = NULL;
    for (size_t i = 1; i < f->nkeys; i++)
        if (!strcmp(f->keys[i - 1].key, f->keys[i].key) && (!dup || f->keys[i].idx < dup->idx))
            dup = &f->keys[i];
    if (!dup)
        return 0;
    yaml_mark_t m = { 0, (size_t)dup->line - 1, (size_t)dup->col - 1 };
    return lfail(ld, &m, "duplicate mapping key \"%.64s\"", dup->key);
}

static int push_frame(struct loader *ld, const yaml_event_t *ev, int is_map)
{
    const yaml_mark_t *m = &ev->start_mark;
    if (want_key(ld))
        return lfail(ld, m, "a %s cannot be a mapping key", is_map ? "mapping" : "sequence");
    if (ld->depth >= YAML_MAX_DEPTH)
        return lfail(ld, m, "nesting deeper than %d levels", YAML_MAX_DEPTH);
    if (charge(ld, m, 1, 0) < 0)
        return -1;
    struct frame *s = mem_grow(ld->stack, ld->depth + 1, sizeof *s);
    if (!s)
        return oom(ld);
    ld->stack = s;
    struct frame *f = &ld->stack[ld->depth];
    memset(f, 0, sizeof *f);
    f->node = is_map ? cJSON_CreateObject() : cJSON_CreateArray();
    if (!f->node)
        return oom(ld);
    f->is_map = is_map;
    f->nodes0 = ld->nodes - 1;
    f->bytes0 = ld->bytes;
    const char *anchor = is_map ? (const char *)ev->data.mapping_start.anchor
                                : (const char *)ev->data.sequence_start.anchor;
    if (anchor && !(f->anchor = strdup(anchor))) {
        cJSON_Delete(f->node);
        f->node = NULL;
        return oom(ld);
    }
    ld->depth++;
    if (add_mark(ld, f->node, (int)m->line + 1) < 0)
        return -1;
    return 0;
}

static int pop_frame(struct loader *ld)
{
    struct frame *f = &ld->stack[ld->depth - 1];
    if (f->is_map && check_duplicates(ld, f) < 0)
        return -1;
    cJSON *node = f->node;
    char *anchor = f->anchor;
    size_t nodes = ld->nodes - f->nodes0, bytes = ld->bytes - f->bytes0;
    int height = f->height + 1;
    f->node = NULL;
    f->anchor = NULL;
    free(f->keys);
    free(f->key);
    memset(f, 0, sizeof *f);
    ld->depth--;
    if (attach(ld, node, height) < 0) {
        free(anchor);
        return -1;
    }
    if (anchor) {
        int rc = set_anchor(ld, anchor, node, 0, NULL, nodes, bytes, height);
        free(anchor);
        return rc;
    }
    return 0;
}

static cJSON *make_scalar(struct loader *ld, const yaml_event_t *ev)
{
    const char *s = (const char *)ev->data.scalar.value;
    size_t n = ev->data.scalar.length;
    const char *tag = (const char *)ev->data.scalar.tag;
    const yaml_mark_t *m = &ev->start_mark;
    int plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    double num = 0;
    int b = 0;
    enum scalar_kind k;

    if (!tag) {
        k = plain ? yaml_resolve_plain(s, n, &num, &b) : SK_STR;
    } else if (!strcmp(tag, "!") || !strcmp(tag, TAG_PREFIX "str") ||
               !strcmp(tag, TAG_PREFIX "binary") || !strcmp(tag, TAG_PREFIX "timestamp")) {
        k = SK_STR;
    } else if (!strcmp(tag, TAG_PREFIX "null") || !strcmp(tag, TAG_PREFIX "bool") ||
               !strcmp(tag, TAG_PREFIX "int") || !strcmp(tag, TAG_PREFIX "float")) {
        /* An explicit type tag asks for that type: refuse text that is not one. */
        const char *want = tag + strlen(TAG_PREFIX);
        k = yaml_resolve_plain(s, n, &num, &b);
        int ok = (!strcmp(want, "null") && k == SK_NULL) ||
                 (!strcmp(want, "bool") && k == SK_BOOL) ||
                 (!strcmp(want, "int") && k == SK_INT) ||
                 (!strcmp(want, "float") && (k == SK_FLOAT || k == SK_INT));
        if (!ok) {
            lfail(ld, m, "\"%.64s\" is not a valid !!%s", s, want);
            return NULL;
        }
        if (!strcmp(want, "null"))
            k = SK_NULL;
    } else {
        /* Application tags (!Ref, !!set ...) carry no meaning for us. */
        k = plain ? yaml_resolve_plain(s, n, &num, &b) : SK_STR;
    }

    cJSON *v;
    switch (k) {
    case SK_NULL: v = cJSON_CreateNull(); break;
    case SK_BOOL: v = cJSON_CreateBool(b); break;
    case SK_INT:
    case SK_FLOAT:
        if (isfinite(num)) {
            v = cJSON_CreateNumber(num);
        } else if ((v = cJSON_CreateNumber(0)) != NULL) {
            /* cJSON_CreateNumber casts to int, which is undefined for inf/nan. */
            v->valuedouble = num;
        }
        break;
    default:
        if (memchr(s, '\0', n)) {
            lfail(ld, m, "strings containing a NUL character are not supported");
            return NULL;
        }
        v = cJSON_CreateString(s);
        break;
    }
    if (!v)
        oom(ld);
    return v;
}

static int on_scalar(struct loader *ld, const yaml_event_t *ev)
{
    const yaml_mark_t *m = &ev->start_mark;
    const char *anchor = (const char *)ev->data.scalar.anchor;
    size_t n = ev->data.scalar.length;

    if (charge(ld, m, 1, n) < 0)
        return -1;
    if (want_key(ld)) {
        if (memchr(ev->data.scalar.value, '\0', n))
            return lfail(ld, m, "mapping keys containing a NUL character are not supported");
        char *key = strdup((const char *)ev->data.scalar.value);
        if (!key)
            return oom(ld);
        if (anchor) {
            cJSON *v = make_scalar(ld, ev);
            char *raw = v ? strdup(key) : NULL;
            if (!v || !raw) {
                cJSON_Delete(v);
                free(key);
                return v ? oom(ld) : -1;
            }
            if (set_anchor(ld, anchor, v, 1, raw, 1, n, 0) < 0) {
                free(key);
                return -1;
            }
        }
        return set_key(ld, key, m);
    }
    cJSON *v = make_scalar(ld, ev);
    if (!v)
        return -1;
    if (add_mark(ld, v, (int)m->line + 1) < 0) {
        cJSON_Delete(v);
        return -1;
    }
    if (attach(ld, v, 0) < 0)
        return -1;
    if (anchor) {
        char *raw = strdup((const char *)ev->data.scalar.value);
        if (!raw)
            return oom(ld);
        return set_anchor(ld, anchor, v, 0, raw, 1, n, 0);
    }
    return 0;
}

static int on_alias(struct loader *ld, const yaml_event_t *ev)
{
    const yaml_mark_t *m = &ev->start_mark;
    const char *name = (const char *)ev->data.alias.anchor;
    struct anchor *a = find_anchor(ld, name);
    if (!a)
        return lfail(ld, m, "alias *%.64s refers to no anchor defined before it", name);
    if (want_key(ld)) {
        if (!a->raw)
            return lfail(ld, m, "alias *%.64s is a collection and cannot be a mapping key", name);
        char *key = strdup(a->raw);
        if (!key)
            return oom(ld);
        if (charge(ld, m, 1, strlen(key)) < 0) {
            free(key);
            return -1;
        }
        return set_key(ld, key, m);
    }
    if (ld->depth + (size_t)a->height > YAML_MAX_DEPTH)
        return lfail(ld, m, "nesting deeper than %d levels", YAML_MAX_DEPTH);
    if (charge(ld, m, a->nodes, a->bytes) < 0)
        return -1;
    cJSON *v = cJSON_Duplicate(a->value, 1);
    if (!v)
        return oom(ld);
    /* Copies point at the alias: that is where the caller meets the value. */
    if (mark_tree(ld, v, (int)m->line + 1) < 0) {
        cJSON_Delete(v);
        return -1;
    }
    return attach(ld, v, a->height);
}

static size_t offset_line(const char *text, size_t len, size_t off, size_t *col)
{
    size_t line = 1, start = 0;
    if (off > len)
        off = len;
    for (size_t i = 0; i < off; i++)
        if (text[i] == '\n')
            line++, start = i + 1;
    *col = off - start + 1;
    return line;
}

static int parser_fail(struct loader *ld, const yaml_parser_t *p)
{
    if (p->error == YAML_MEMORY_ERROR || !p->problem)
        return oom(ld);
    if (ld->after) {
        size_t at = p->error == YAML_READER_ERROR ? p->problem_offset : p->problem_mark.index;
        size_t col, line = offset_line(ld->text, ld->len, at, &col);
        yaml_seterr(ld->err, "%s:%zu:%zu: %s at byte offset %zu, after the first "
                    "document (one document, and nothing after it)", ld->name, line, col,
                    p->problem, at);
        return -1;
    }
    if (p->error == YAML_READER_ERROR) {
        size_t col, line = offset_line(ld->text, ld->len, p->problem_offset, &col);
        yaml_seterr(ld->err, "%s:%zu:%zu: %s", ld->name, line, col, p->problem);
        return -1;
    }
    if (p->context)
        yaml_seterr(ld->err, "%s:%d:%d: %s (%s at line %d)", ld->name,
               (int)p->problem_mark.line + 1, (int)p->problem_mark.column + 1, p->problem,
               p->context, (int)p->context_mark.line + 1);
    else
        yaml_seterr(ld->err, "%s:%d:%d: %s", ld->name, (int)p->problem_mark.line + 1,
               (int)p->problem_mark.column + 1, p->problem);
    return -1;
}

static int cmp_mark(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const struct yaml_mark *)a)->node;
    uintptr_t y = (uintptr_t)((const struct yaml_mark *)b)->node;
    return x < y ? -1 : x > y;
}

void yaml_doc_free(struct yaml_doc *doc)
{
    if (!doc)
        return;
    cJSON_Delete(doc->root);
    free(doc->marks);
    doc->root = NULL;
    doc->marks = NULL;
    doc->nmarks = 0;
}

static int load(const char *name, const char *text, size_t len, struct yaml_doc *doc,
                struct buf *err, int single)
{
    struct loader ld;
    yaml_parser_t p;
    yaml_event_t ev;
    int rc = -1, done = 0;

    memset(doc, 0, sizeof *doc);
    memset(&ld, 0, sizeof ld);
    ld.name = name ? name : "<yaml>";
    ld.text = text ? text : "";
    ld.len = text ? len : 0;
    ld.doc = doc;
    ld.err = err;
    ld.single = single;
    if (err)
        buf_reset(err);

    if (!yaml_parser_initialize(&p))
        return oom(&ld);
    yaml_parser_set_input_string(&p, (const unsigned char *)ld.text, ld.len);

    while (!done) {
        if (!yaml_parser_parse(&p, &ev)) {
            parser_fail(&ld, &p);
            goto out;
        }
        int r = 0;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = 1;
            break;
        case YAML_DOCUMENT_END_EVENT:
            /* Only the first document counts; the rest is not read at all,
             * unless the caller takes one document exactly. */
            if (ld.single)
                ld.after = 1;
            else
                done = 1;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (ld.after) {
                size_t col, line = offset_line(ld.text, ld.len, ev.start_mark.index, &col);
                yaml_seterr(ld.err, "%s:%zu:%zu: a second document begins at byte "
                            "offset %zu (one document, and nothing after it)", ld.name, line,
                            col, (size_t)ev.start_mark.index);
                r = -1;
            }
            break;
        case YAML_SCALAR_EVENT:
            r = on_scalar(&ld, &ev);
            break;
        case YAML_ALIAS_EVENT:
            r = on_alias(&ld, &ev);
            break;
        case YAML_SEQUENCE_START_EVENT:
            r = push_frame(&ld, &ev, 0);
            break;
        case YAML_MAPPING_START_EVENT:
            r = push_frame(&ld, &ev, 1);
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            r = pop_frame(&ld);
            break;
        default:
            break;
        }
        yaml_event_delete(&ev);
        if (r < 0)
            goto out;
    }
    if (!doc->root) {
        doc->root = cJSON_CreateNull();
        if (!doc->root || add_mark(&ld, doc->root, 1) < 0) {
            oom(&ld);
            goto out;
        }
    }
    if (doc->nmarks > 1)
        qsort(doc->marks, doc->nmarks, sizeof *doc->marks, cmp_mark);
    rc = 0;
out:
    while (ld.depth > 0)
        free_frame(&ld.stack[--ld.depth]);
    free(ld.stack);
    free_anchors(&ld);
    yaml_parser_delete(&p);
    if (rc < 0)
        yaml_doc_free(doc);
    return rc;
}

int yaml_load(const char *name, const char *text, size_t len, struct yaml_doc *doc,
              struct buf *err)
{
    return load(name, text, len, doc, err, 0);
}

int yaml_load_single(const char *name, const char *text, size_t len, struct yaml_doc *doc,
                     struct buf *err)
{
    return load(name, text, len, doc, err, 1);
}

int yaml_load_file(const char *path, struct yaml_doc *doc, struct buf *err)
{
    size_t len;
    memset(doc, 0, sizeof *doc);
    char *buf = util_read_file(path, &len);
    if (!buf) {
        yaml_seterr(err, "%s: %s", path, errno == ENOMEM ? "out of memory or too large"
                                                                  : strerror(errno));
        return -1;
    }
    int rc = yaml_load(path, buf, len, doc, err);
    free(buf);
    return rc;
}

int yaml_line(const struct yaml_doc *doc, const cJSON *node)
{
    if (!doc || !node || !doc->marks)
        return 0;
    size_t lo = 0, hi = doc->nmarks;
    uintptr_t want = (uintptr_t)node;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uintptr_t have = (uintptr_t)doc->marks[mid].node;
        if (have == want)
            return doc->marks[mid].line;
        if (have < want)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

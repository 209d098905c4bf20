/* yaml11.c: what YAML 1.1 as the apiserver reads it and the 1.2 core
 * schema of yamldoc.c read differently (see yaml11.h).
 *
 * Owns the list of such nodes, from go-yaml v2's resolver (what
 * sigs.k8s.io/yaml, the apiserver's YAML decoder, runs): the merge key
 * `<<`, which v2 expands and 1.2 keeps as a key; explicit tags (`!!binary`
 * decodes base64 in v2, a string here; `!!set`, `!!omap` and local tags
 * have no JSON meaning both agree on); plain y/yes/on/n/no/off in any case
 * v2 takes (booleans there, strings here); numbers v2 reads through Go's
 * ParseInt (a leading 0 is octal, `0b`, signed or upper-case prefixes,
 * underscores); and plain keys that v2 resolves and then prints as other
 * text (`~`, `True`, `0x10`, `1.0`). Must never say "same" of a node it did
 * not look at: the walk covers every event of every document. */
#include "formats/yaml11.h"

#include <stdio.h>
#include <string.h>
#include <yaml.h>

#include "formats/yaml_int.h"

#define TAG_PREFIX "tag:yaml.org,2002:"

static int one_of(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return 1;
    return 0;
}

/* Why a plain scalar reads differently, or NULL. */
static const char *plain_differs(const char *s, size_t n)
{
    static const char *const bools[] = {"y", "Y", "yes", "Yes", "YES", "on", "On", "ON",
                                        "n", "N", "no", "No", "NO", "off", "Off", "OFF", NULL};
    if (strcmp(s, "<<") == 0)
        return "a merge key (<<), which the apiserver's YAML 1.1 expands: write the keys out";
    if (one_of(s, bools))
        return "a YAML 1.1 boolean to the apiserver and a string here: quote it, or write "
               "true/false";
    size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
    if (i < n && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.')) {
        if (memchr(s, '_', n))
            return "a number with '_' to the apiserver's YAML 1.1 and a string here: quote it "
                   "or drop the '_'";
        if (s[i] == '0' && i + 1 < n) {
            char c = s[i + 1];
            if (c >= '0' && c <= '9' && strspn(s + i, "0123456789") == n - i)
                return "an octal number to the apiserver's YAML 1.1 (a leading 0) and a decimal "
                       "one here: quote it or write 0o...";
            if (c == 'b' || c == 'B' || c == 'X' || c == 'O' || (i && (c == 'x' || c == 'o')))
                return "a number to the apiserver's YAML 1.1 and a string here (a signed, "
                       "upper-case or binary prefix): quote it or write it in decimal";
        }
    }
    return NULL;
}

/* Why a plain key turns into other text at the apiserver, or NULL: v2
 * resolves a plain key and sigs.k8s.io/yaml prints what it resolved to;
 * the text survives only where that printing gives it back. */
static const char *key_differs(const char *s, size_t n)
{
    double num;
    int b;
    enum scalar_kind k = yaml_resolve_plain(s, n, &num, &b);
    if (k == SK_STR)
        return NULL;
    if (k == SK_BOOL && (strcmp(s, "true") == 0 || strcmp(s, "false") == 0))
        return NULL;
    if (k == SK_NULL && strcmp(s, "null") == 0)
        return NULL;
    if (k == SK_INT) {
        size_t i = s[0] == '-' ? 1 : 0;
        if (s[i] >= '1' && s[i] <= '9' && strspn(s + i, "0123456789") == n - i && n - i < 16)
            return NULL;
        if (strcmp(s, "0") == 0)
            return NULL;
    }
    return "a key the apiserver's YAML 1.1 resolves and prints as other text: quote it";
}

/* Why a tag reads differently, or NULL. */
static const char *tag_differs(const char *tag, int scalar)
{
    if (!tag)
        return NULL;
    if (strcmp(tag, scalar ? TAG_PREFIX "str" : TAG_PREFIX "map") == 0 ||
        (!scalar && strcmp(tag, TAG_PREFIX "seq") == 0))
        return NULL;
    return "an explicit tag, which the apiserver's YAML 1.1 reads its own way (!!binary "
           "decodes base64): write the plain value";
}

struct frame {
    int map;
    size_t items;
};

int yaml11_check(const char *text, size_t len, struct buf *err)
{
    yaml_parser_t p;
    yaml_event_t ev;
    struct frame st[YAML_MAX_DEPTH + 1];
    int depth = 0, rc = -1;
    if (!yaml_parser_initialize(&p)) {
        buf_setf(err, "out of memory");
        return -1;
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    for (;;) {
        if (!yaml_parser_parse(&p, &ev)) {
            yaml_seterr(err, "line %d: %s", (int)p.problem_mark.line + 1,
                        p.problem ? p.problem : "the text does not parse as YAML");
            break;
        }
        const char *why = NULL, *shown = NULL;
        int is_key = depth > 0 && st[depth - 1].map && st[depth - 1].items % 2 == 0;
        switch (ev.type) {
        case YAML_SCALAR_EVENT: {
            const char *s = (const char *)ev.data.scalar.value;
            size_t n = ev.data.scalar.length;
            why = tag_differs((const char *)ev.data.scalar.tag, 1);
            if (!why && ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
                !ev.data.scalar.tag && !memchr(s, '\0', n)) {
                why = plain_differs(s, n);
                if (!why && is_key)
                    why = key_differs(s, n);
            }
            shown = s;
            break;
        }
        case YAML_MAPPING_START_EVENT:
        case YAML_SEQUENCE_START_EVENT:
            why = tag_differs(ev.type == YAML_MAPPING_START_EVENT
                                  ? (const char *)ev.data.mapping_start.tag
                                  : (const char *)ev.data.sequence_start.tag, 0);
            if (!why && is_key)
                why = "a collection as a key, which JSON cannot hold";
            break;
        case YAML_ALIAS_EVENT:
            /* the key the alias stands for was read as a value */
            if (is_key)
                why = "an alias as a key: write the key out";
            break;
        default:
            break;
        }
        if (why) {
            yaml_seterr(err, "line %d: %s%.40s%s is %s", (int)ev.start_mark.line + 1,
                        shown ? "'" : "", shown ? shown : "", shown ? "'" : "", why);
            yaml_event_delete(&ev);
            break;
        }
        int done = ev.type == YAML_STREAM_END_EVENT;
        if (ev.type == YAML_MAPPING_START_EVENT || ev.type == YAML_SEQUENCE_START_EVENT) {
            if (depth == YAML_MAX_DEPTH) {
                yaml_seterr(err, "line %d: nested deeper than %d levels",
                            (int)ev.start_mark.line + 1, YAML_MAX_DEPTH);
                yaml_event_delete(&ev);
                break;
            }
            st[depth++] = (struct frame){ev.type == YAML_MAPPING_START_EVENT, 0};
        } else if (ev.type == YAML_MAPPING_END_EVENT || ev.type == YAML_SEQUENCE_END_EVENT) {
            if (depth > 0)
                depth--;
        }
        /* a finished node (scalar, alias, collection) is one item of its parent */
        if ((ev.type == YAML_SCALAR_EVENT || ev.type == YAML_ALIAS_EVENT ||
             ev.type == YAML_MAPPING_END_EVENT || ev.type == YAML_SEQUENCE_END_EVENT) && depth > 0)
            st[depth - 1].items++;
        yaml_event_delete(&ev);
        if (done) {
            rc = 0;
            break;
        }
    }
    yaml_parser_delete(&p);
    return rc;
}

// sources: host/formats/yamldoc.c host/formats/yamlemit.c host/base/buf.c host/base/mem.c host/base/util.c
/* yaml_fuzz.c: libFuzzer target for host/formats/yamldoc.c. Owns checking that any
 * input either loads or fails with a one-line message (one document exactly
 * too, yaml_load_single, which reads what yaml_load reads), that every
 * produced node has a line, and that what yaml_emit writes reads back as the
 * same value. Must never touch the filesystem or keep state between inputs. */
#include "base/mem.h"
#include "formats/yamldoc.h"

#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "withbuf.h"

/* cJSON_Compare treats NaN as unequal to itself and compares with an
 * epsilon; the round trip must be exact, NaN included. */
static int same(const cJSON *a, const cJSON *b)
{
    if ((a->type & 0xff) != (b->type & 0xff))
        return 0;
    switch (a->type & 0xff) {
    case cJSON_Number:
        if (isnan(a->valuedouble))
            return isnan(b->valuedouble);
        return a->valuedouble == b->valuedouble;
    case cJSON_String:
        return !strcmp(a->valuestring, b->valuestring);
    case cJSON_Array:
    case cJSON_Object: {
        const cJSON *x = a->child, *y = b->child;
        for (; x && y; x = x->next, y = y->next) {
            if ((a->type & 0xff) == cJSON_Object && strcmp(x->string, y->string))
                return 0;
            if (!same(x, y))
                return 0;
        }
        return !x && !y;
    }
    default:
        return 1;
    }
}

static void all_marked(const struct yaml_doc *d, const cJSON *n)
{
    if (yaml_line(d, n) <= 0)
        abort();
    for (const cJSON *c = n->child; c; c = c->next)
        all_marked(d, c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct yaml_doc doc, again;
    char err[512];

    /* One document exactly: what yaml_load_single takes, yaml_load reads
     * the same; what it refuses, it says in one line. */
    if (WITH_BUF(yaml_load_single("fuzz", (const char *)data, size, &doc, &eb_)) < 0) {
        if (!err[0] || strchr(err, '\n') || strncmp(err, "fuzz", 4))
            abort();
    } else {
        if (WITH_BUF(yaml_load("fuzz", (const char *)data, size, &again, &eb_)) < 0 ||
            !same(doc.root, again.root))
            abort();
        yaml_doc_free(&again);
        yaml_doc_free(&doc);
    }
    if (WITH_BUF(yaml_load("fuzz", (const char *)data, size, &doc, &eb_)) < 0) {
        if (!err[0] || strchr(err, '\n') || strncmp(err, "fuzz", 4))
            abort();
        return 0;
    }
    all_marked(&doc, doc.root);
    char *text = WITH_BUF(yaml_emit_err(doc.root, &eb_));
    if (!text)
        abort();    /* anything the loader produced must be writable */
    if (WITH_BUF(yaml_load("emitted", text, strlen(text), &again, &eb_)) < 0)
        abort();
    if (!same(doc.root, again.root))
        abort();
    yaml_doc_free(&again);
    mem_free(text);
    yaml_doc_free(&doc);
    return 0;
}

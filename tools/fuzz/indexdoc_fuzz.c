// sources: host/formats/indexdoc.c host/formats/ledgerdoc.c host/formats/manifest.c host/formats/record.c host/formats/journaldoc.c host/formats/header.c host/formats/tree.c host/formats/yamldoc.c host/formats/yamlemit.c host/base/mem.c host/base/util.c host/base/paths.c host/base/buf.c
/* indexdoc_fuzz.c: libFuzzer target for host/formats/indexdoc.c, the
 * migrations index the hook and the dispatcher trust (issue 27: read whole,
 * compared whole). Owns checking that any input, as an index file's text or
 * as a ConfigMap holding one (JSON, with its raw text), is either accepted
 * or refused with a message naming the file; that an accepted index
 * formats and re-parses to one that index_compare finds no difference in;
 * that its tree (index_tree) builds; and that nothing leaks. The first byte
 * picks the reader. Must never touch the filesystem or keep state. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "formats/indexdoc.h"
#include "formats/tree.h"
#include "withbuf.h"

/* A refusal names the file first. It may quote the input's own bytes, a
 * newline included: base/log.c escapes control bytes in every line it
 * prints, so the one-line rule holds where the message is shown. */
static void names_file(const char *err, const char *name)
{
    if (!err[0] || strncmp(err, name, strlen(name)) != 0)
        abort();
}

static void count(void *ud, const char *line)
{
    if (!line[0] || strchr(line, '\n'))
        abort();
    (*(size_t *)ud)++;
}

/* An accepted index says the same thing after a format and a re-parse. */
static void round_trip(const struct index *ix)
{
    char *text = index_format(ix);
    if (!text)
        return; /* out of memory */
    struct index again;
    char err[1024] = "";
    if (WITH_BUF(index_parse("again", text, strlen(text), &again, &eb_)) != 0) {
        fprintf(stderr, "re-parse refused: %s\n---\n%s\n", err, text);
        abort();
    }
    /* The file form holds no retry keys: compare as files. */
    struct index a = *ix;
    a.configmap = 0;
    again.configmap = 0;
    size_t n = 0;
    index_compare(&again, &a, "fuzz", count, &n);
    if (n) {
        fprintf(stderr, "%zu differences after a round trip\n---\n%s\n", n, text);
        abort();
    }
    struct tree t;
    if (index_tree(&again, &t) == 0)
        tree_free(&t);
    index_free(&again);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    char err[1024] = "";
    struct index ix;
    if (data[0] % 2 == 0) {
        if (WITH_BUF(index_parse("index.json", text, len, &ix, &eb_)) == 0) {
            round_trip(&ix);
            index_free(&ix);
        } else {
            names_file(err, "index.json");
        }
        return 0;
    }
    cJSON *cm = cJSON_ParseWithLength(text, len);
    if (!cm)
        return 0;
    if (WITH_BUF(index_from_configmap("cm.json", cm, text, len, &ix, &eb_)) == 0) {
        round_trip(&ix);
        index_free(&ix);
    } else {
        names_file(err, "cm.json");
    }
    cJSON_Delete(cm);
    return 0;
}

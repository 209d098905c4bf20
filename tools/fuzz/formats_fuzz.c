// sources: host/formats/header.c host/formats/manifest.c host/formats/record.c host/formats/journaldoc.c host/base/util.c host/base/mem.c host/base/buf.c
/* formats_fuzz.c: libFuzzer target for the runner's line formats: script
 * headers, order.d batches, `revoked`, `legacy-map`, the legacy set's digest
 * list and ledger records. Owns
 * checking that any input is either accepted or refused with one non-empty
 * line naming the file, that an accepted record formats and re-parses to the
 * same state, that journal_fit (the one way a journal is shortened) of any
 * text either refuses it or returns a journal within its cap that keeps the
 * true counts, and that nothing leaks. The first byte picks the parser. Must
 * never touch the filesystem or keep state between inputs. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "formats/header.h"
#include "formats/journaldoc.h"
#include "formats/manifest.h"
#include "formats/record.h"
#include "withbuf.h"

static void one_line(const char *err, const char *name)
{
    if (!err[0] || strchr(err, '\n') || strncmp(err, name, strlen(name)) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned sel = data[0] % 7;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    char err[1024] = "";
    switch (sel) {
    case 0:
    case 1: {
        struct header h;
        if (header_parse("x.lua", text, len, sel == 0, &h, err, sizeof err) == 0) {
            if (h.on_error == ON_ERROR_UNSET)
                abort();
            for (size_t i = 0; i < h.nrequires; i++)
                if (!slug_valid(h.requires[i]))
                    abort();
            header_free(&h);
        } else {
            one_line(err, "x.lua");
        }
        break;
    }
    case 2: {
        struct batch b;
        if (WITH_BUF(manifest_parse_batch("00001-v1", "order.d/00001-v1", text, len, &b, &eb_)) == 0) {
            for (size_t i = 0; i < b.n; i++) {
                if (!slug_valid(b.e[i].slug))
                    abort();
                free(b.e[i].slug);
            }
            free(b.e);
            free(b.name);
            free(b.path);
        } else {
            one_line(err, "order.d/00001-v1");
        }
        break;
    }
    case 3: {
        struct slug_list l;
        if (WITH_BUF(revoked_parse("revoked", text, len, &l, &eb_)) == 0)
            slug_list_free(&l);
        else
            one_line(err, "revoked");
        break;
    }
    case 4: {
        struct legacy_map m;
        if (WITH_BUF(legacy_map_parse("legacy-map", text, len, &m, &eb_)) == 0) {
            for (size_t i = 1; i < m.n; i++)
                if (m.e[i].number <= m.e[i - 1].number)
                    abort();
            legacy_map_free(&m);
        } else {
            one_line(err, "legacy-map");
        }
        break;
    }
    case 5: {
        struct digest_list d;
        if (WITH_BUF(digest_list_parse("legacy-sha256sums", text, len, &d, &eb_)) == 0) {
            for (size_t i = 0; i < d.n; i++)
                if (strlen(d.e[i].sha256) != 64 || !d.e[i].path[0] || d.e[i].path[0] == '/' ||
                    strcmp(d.e[i].path, "..") == 0 || strncmp(d.e[i].path, "../", 3) == 0 ||
                    strstr(d.e[i].path, "/../") || strstr(d.e[i].path, "//") ||
                    digest_list_find(&d, d.e[i].path) != &d.e[i])
                    abort();
            digest_list_free(&d);
        } else {
            one_line(err, "legacy-sha256sums");
        }
        break;
    }
    default: {
        char *s = malloc(len + 1);
        if (!s)
            return 0;
        memcpy(s, text, len);
        s[len] = '\0';
        struct record *r = malloc(sizeof *r), *r2 = malloc(sizeof *r2);
        if (r && r2 && record_parse(s, len, r) == 0) {
            char *out = record_format(r);
            if (!out || record_parse(out, strlen(out), r2) != 0 || r2->state != r->state ||
                r2->attempts != r->attempts)
                abort();
            free(out);
            record_free(r2);
        } else if (r && (r->state != REC_UNKNOWN || r->output || r->journal)) {
            abort(); /* a refused record owns nothing (record.h) */
        }
        if (r)
            record_free(r);
        free(r);
        free(r2);
        /* the same text as a write journal, cut to a size of the input's choosing */
        size_t cap = 2 + (size_t)(data[0] / 6) * 16;
        cJSON *a = cJSON_Parse(s);
        cJSON *b = journal_fit(a, cap);
        if (b) {
            char *fit = cJSON_PrintUnformatted(b);
            const cJSON *wa = cJSON_GetObjectItemCaseSensitive(a, "writes");
            const cJSON *wb = cJSON_GetObjectItemCaseSensitive(b, "writes");
            if (!fit || strlen(fit) + 1 > cap || !cJSON_IsObject(b) ||
                !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(b, "entries")) ||
                (cJSON_IsNumber(wa) && !(cJSON_IsNumber(wb) && wb->valuedouble == wa->valuedouble)))
                abort();
            cJSON_Delete(b);
            cJSON_free(fit);
        }
        cJSON_Delete(a);
        free(s);
        break;
    }
    }
    return 0;
}

// sources: host/proc/verdict.c host/base/util.c host/base/mem.c
/* verdict_fuzz.c: libFuzzer target for verdict.c's verdict_read, the
 * supervisor's one reading of what a migration's child says about how it
 * ended. Owns checking that any bytes on the status fd are either refused
 * (and leave an empty verdict) or give a verdict whose reason is in range
 * and whose every string ends inside its field; and that a verdict written
 * with verdict_init and verdict_set from the input's text reads back as
 * written (cut to its field). Must never keep state between inputs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proc/verdict.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct child_verdict v;
    if (verdict_read(data, size, &v) == 0) {
        if (v.magic != VERDICT_MAGIC || v.reason < 0 || v.reason >= VERDICT_REASONS ||
            strlen(v.stage) >= sizeof v.stage || strlen(v.message) >= sizeof v.message ||
            strlen(v.unpredictable) >= sizeof v.unpredictable)
            abort();
    } else if (v.magic != 0 || v.message[0] || v.stage[0]) {
        abort();
    }
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    struct child_verdict w, back;
    verdict_init(&w, size ? (enum verdict_reason)(data[0] % VERDICT_REASONS) : VERDICT_OK);
    verdict_set(w.message, sizeof w.message, text);
    verdict_set(w.stage, sizeof w.stage, text);
    if (verdict_read(&w, sizeof w, &back) != 0 || back.reason != w.reason ||
        strncmp(back.message, text, sizeof back.message - 1) != 0 ||
        strlen(back.stage) > sizeof back.stage - 1)
        abort();
    free(text);
    return 0;
}

/* withbuf.h: for the fuzz targets whose parsers say why in a struct buf
 * (base/buf.h): WITH_BUF(call), where call passes &eb_ as its error, runs
 * it and copies the text into the caller's char err[] (the checks read it
 * there), releasing the buffer; its value is the call's. */
#ifndef FUZZ_WITHBUF_H
#define FUZZ_WITHBUF_H
#include <stdio.h>

#include "base/buf.h"

#define WITH_BUF(call)                                                      \
    ({                                                                      \
        struct buf eb_ = BUF_INIT;                                          \
        __typeof__(call) rc_ = (call);                                      \
        snprintf(err, sizeof err, "%s", buf_str(&eb_));                     \
        buf_release(&eb_);                                                  \
        rc_;                                                                \
    })
#endif

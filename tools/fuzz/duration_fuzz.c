// sources: host/util.c
/* duration_fuzz.c: libFuzzer target for parse_duration (host/util.c), the
 * parser of --timeout, --lock-timeout, --grace, --lease-duration and the
 * header's timeout=. Owns checking that any input is refused or gives a
 * finite value in (0, 7 days]; that the same text always gives the same
 * answer; and, for a text in the documented grammar (README: "90s", "5m",
 * "1h30m", "500ms", "1.5s", a bare number of seconds), that it is accepted
 * exactly when its value is in range, with the value an independent reading
 * of the text gives. The first byte picks raw text or a duration built from
 * the input's bytes in that grammar. Must never keep state between inputs. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define MAX_S (7 * 24 * 3600.0)

/* The documented grammar, read independently: ( NUMBER UNIT )+ or one bare
 * NUMBER; NUMBER is digits with an optional fraction; UNIT h, m, s or ms.
 * Returns 1 with *v when s is in it, 0 otherwise. */
static int reference(const char *s, double *v)
{
    double total = 0;
    int parts = 0;
    const char *p = s;
    while (*p) {
        if (*p < '0' || *p > '9')
            return 0;
        double n = 0, scale = 1;
        while (*p >= '0' && *p <= '9')
            n = n * 10 + (*p++ - '0');
        if (*p == '.') {
            p++;
            if (*p < '0' || *p > '9')
                return 0;
            while (*p >= '0' && *p <= '9') {
                scale /= 10;
                n += (*p++ - '0') * scale;
            }
        }
        double mult;
        if (!*p) {
            if (parts)
                return 0;
            mult = 1;
        } else if (p[0] == 'm' && p[1] == 's') {
            mult = 0.001;
            p += 2;
        } else if (*p == 'h' || *p == 'm' || *p == 's') {
            mult = *p == 'h' ? 3600 : *p == 'm' ? 60 : 1;
            p++;
        } else {
            return 0;
        }
        total += n * mult;
        parts++;
    }
    *v = total;
    return parts > 0;
}

/* A text in the grammar from the input's bytes: up to 4 parts. */
static void build(const uint8_t *d, size_t n, char *out, size_t cap)
{
    static const char *units[] = {"h", "m", "s", "ms", ""};
    size_t at = 0;
    out[0] = 0;
    for (size_t i = 0; i + 2 < n && i < 12; i += 3) {
        const char *u = units[d[i] % 5];
        unsigned whole = (unsigned)d[i + 1] * (d[i + 2] & 0x80 ? 257u : 1u);
        int frac = d[i + 2] & 0x40 ? (d[i + 2] & 0x3f) : -1;
        int w = frac >= 0 ? snprintf(out + at, cap - at, "%u.%d%s", whole, frac, u)
                          : snprintf(out + at, cap - at, "%u%s", whole, u);
        if (w < 0 || (size_t)w >= cap - at)
            return;
        at += (size_t)w;
        if (!*u)
            return;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char text[256];
    if (data[0] & 1) {
        size_t n = size - 1 < sizeof text - 1 ? size - 1 : sizeof text - 1;
        memcpy(text, data + 1, n);
        text[n] = 0;
    } else {
        build(data + 1, size - 1, text, sizeof text);
    }
    double v = -1, again = -2;
    int rc = parse_duration(text, &v);
    if (rc != 0 && rc != -1)
        abort();
    if (rc == 0 && !(isfinite(v) && v > 0 && v <= MAX_S))
        abort();
    if (parse_duration(text, &again) != rc || (rc == 0 && again != v))
        abort();
    double want;
    if (reference(text, &want)) {
        int in_range = want > 0 && want <= MAX_S;
        /* at the edge of the range, strtod and the reading above may round
         * apart: leave a margin */
        int edge = fabs(want - MAX_S) < 1e-6 || want < 1e-9;
        if (!edge && in_range != (rc == 0)) {
            fprintf(stderr, "parse_duration(\"%s\") = %d, the grammar says %g s\n", text, rc, want);
            abort();
        }
        if (rc == 0 && fabs(v - want) > 1e-9 * want + 1e-12) {
            fprintf(stderr, "parse_duration(\"%s\") = %.17g, the grammar says %.17g\n", text, v, want);
            abort();
        }
    }
    return 0;
}

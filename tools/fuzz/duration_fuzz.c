// sources: host/base/util.c host/base/mem.c
/* duration_fuzz.c: libFuzzer target for util.c's parse_duration, the one
 * parser of durations (header timeout=, --timeout and the other flags), and
 * parse_decimal (legacy-map numbers, the ledger's version). Owns checking the
 * grammar against an independent reference: a duration is one or more
 * <digits><unit> parts, units h, m, s, ms, each at most once and largest
 * first, positive and at most a week; a decimal is digits without sign,
 * space or leading zero, within its bound. Any input the two disagree on, or
 * a value outside the bounds, aborts. Must never keep state between inputs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

/* The reference: a plain scan, no shared code with util.c. Returns the
 * duration in milliseconds, or -1. */
static long long reference_ms(const char *s)
{
    static const char *const unit[] = {"h", "m", "s", "ms"};
    static const long long mult[] = {3600000LL, 60000LL, 1000LL, 1LL};
    long long total = 0;
    int last = -1;
    if (!*s)
        return -1;
    while (*s) {
        long long v = 0;
        int digits = 0;
        while (*s >= '0' && *s <= '9') {
            if (++digits > 9)
                return -1;
            v = v * 10 + (*s++ - '0');
        }
        if (!digits)
            return -1;
        int u;
        if (s[0] == 'm' && s[1] == 's')
            u = 3;
        else if (*s == 'h')
            u = 0;
        else if (*s == 'm')
            u = 1;
        else if (*s == 's')
            u = 2;
        else
            return -1;
        if (u <= last)
            return -1;
        s += strlen(unit[u]);
        last = u;
        total += v * mult[u];
        if (total > 7LL * 24 * 3600 * 1000)
            return -1;
    }
    return total > 0 ? total : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 64)
        return 0;
    char *s = malloc(size);
    if (!s)
        return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';
    if (data[0] & 1) {
        double d = -1;
        int rc = parse_duration(s, &d);
        long long want = reference_ms(s);
        if ((rc == 0) != (want >= 0))
            abort();
        if (rc == 0 && (d <= 0 || d > 7 * 24 * 3600.0 || (long long)(d * 1000.0 + 0.5) != want))
            abort();
    } else {
        long max = (long)(data[0] >> 1) * 1000 + 1;
        long v = -1;
        if (parse_decimal(s, max, &v) == 0) {
            if (v < 0 || v > max || !*s || (s[0] == '0' && s[1]))
                abort();
            for (const char *p = s; *p; p++)
                if (*p < '0' || *p > '9')
                    abort();
            if (strtol(s, NULL, 10) != v)
                abort();
        } else {
            /* Refused: not all digits, a leading zero, or above max. */
            int digits = *s != '\0';
            for (const char *p = s; *p; p++)
                digits &= *p >= '0' && *p <= '9';
            if (digits && !(s[0] == '0' && s[1]) && strlen(s) < 18 && strtol(s, NULL, 10) <= max)
                abort();
        }
    }
    free(s);
    return 0;
}

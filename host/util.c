/* util.c: the monotonic clock, whole-file reads and timestamps shared by the
 * host. Holds no state and makes no decisions. */
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0)
            break;
        if (cap - n - 1 == 0) {
            char *nb = cap > (size_t)1 << 30 ? NULL : realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                errno = ENOMEM;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    int err = ferror(f) ? errno : 0;
    fclose(f);
    if (!buf)
        return NULL;
    if (err) {
        free(buf);
        errno = err;
        return NULL;
    }
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

void now_rfc3339(char buf[32])
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int parse_duration(const char *s, double *out)
{
    if (!s || !*s)
        return -1;
    double total = 0;
    const char *p = s;
    while (*p) {
        char *end;
        if (*p < '0' || *p > '9')
            return -1;
        double v = strtod(p, &end);
        if (end == p)
            return -1;
        p = end;
        double mult;
        if (*p == '\0') {
            if (total != 0)
                return -1;
            mult = 1; /* a bare number is seconds */
        } else if (p[0] == 'm' && p[1] == 's') {
            mult = 0.001;
            p += 2;
        } else if (*p == 'h') {
            mult = 3600;
            p++;
        } else if (*p == 'm') {
            mult = 60;
            p++;
        } else if (*p == 's') {
            mult = 1;
            p++;
        } else {
            return -1;
        }
        total += v * mult;
    }
    if (total <= 0 || total > 7 * 24 * 3600)
        return -1;
    *out = total;
    return 0;
}

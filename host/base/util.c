/* util.c: the monotonic clock, whole-file reads, timestamps, UTF-8-safe
 * truncation, escaping and repair, and the one parser of durations and of plain decimals, shared
 * by the host. Must never hold state, make a decision for its callers, or
 * accept a duration or a number in any spelling but the one grammar.
 * Prefixes: now_ utf8_ parse_ format_ text_ (the clock, UTF-8 cuts,
 * the one grammar of durations and decimals, escaping: each a small module
 * of its own; the rest util_). */
#include "base/util.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/mem.h"

double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double util_process_age(void)
{
    FILE *f = fopen("/proc/self/stat", "re");
    if (!f)
        return -1;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* the command name (field 2) may hold anything: fields count from the
     * last ')'; starttime is field 22 */
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    p++;
    for (int field = 2; field < 21 && p; field++)
        p = strchr(p + 1, ' ');
    char *end;
    unsigned long long ticks = p ? strtoull(p + 1, &end, 10) : 0;
    long hz = sysconf(_SC_CLK_TCK);
    struct timespec ts;
    if (!p || end == p + 1 || hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &ts) != 0)
        return -1;
    double age = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 - (double)ticks / (double)hz;
    return age >= 0 ? age : -1;
}

int util_write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

char *util_read_file(const char *path, size_t *len)
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

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void util_free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

static int list(const char *dir, int hidden, char ***names, size_t *n);

int util_list_dir(const char *dir, char ***names, size_t *n) { return list(dir, 0, names, n); }
int util_list_dir_all(const char *dir, char ***names, size_t *n) { return list(dir, 1, names, n); }

static int list(const char *dir, int hidden, char ***names, size_t *n)
{
    *names = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    char **v = NULL;
    size_t cnt = 0;
    struct dirent *de;
    int err = 0;
    errno = 0;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' && (!hidden || !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")))
            continue;
        char **nv = mem_grow(v, cnt + 1, sizeof *nv);
        if (!nv || !(nv[cnt] = strdup(de->d_name))) {
            if (nv)
                v = nv;
            err = ENOMEM;
            break;
        }
        v = nv;
        cnt++;
        errno = 0;
    }
    if (!err && errno)
        err = errno;
    closedir(d);
    if (err) {
        util_free_names(v, cnt);
        errno = err;
        return -1;
    }
    if (cnt)
        qsort(v, cnt, sizeof *v, cmp_name);
    *names = v;
    *n = cnt;
    return 0;
}

void now_rfc3339(char buf[32])
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int parse_decimal(const char *s, long max, long *out)
{
    if (!s || !*s || (s[0] == '0' && s[1]))
        return -1;
    long v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        int d = *p - '0';
        if (d > max || v > (max - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* The units of a duration, largest first: each part must use a smaller unit
 * than the one before it. */
static const struct {
    const char *name;
    long long ms;
} duration_units[] = {{"h", 3600000LL}, {"m", 60000LL}, {"s", 1000LL}, {"ms", 1LL}};

#define DURATION_MAX_MS (7LL * 24 * 3600 * 1000)   /* a week: nothing waits longer */
#define DURATION_PART_DIGITS 9                      /* no part needs more; no overflow */

int parse_duration(const char *s, double *out)
{
    if (!s || !*s)
        return -1;
    long long total = 0;
    size_t next_unit = 0;      /* the largest unit still allowed */
    const char *p = s;
    while (*p) {
        long long v = 0;
        int digits = 0;
        while (*p >= '0' && *p <= '9') {
            if (++digits > DURATION_PART_DIGITS)
                return -1;
            v = v * 10 + (*p++ - '0');
        }
        if (!digits)
            return -1;
        /* "ms" before "m": the longest unit name that matches. */
        size_t u = sizeof duration_units / sizeof duration_units[0], best = u, blen = 0;
        for (size_t i = 0; i < u; i++) {
            size_t l = strlen(duration_units[i].name);
            if (strncmp(p, duration_units[i].name, l) == 0 && l > blen) {
                best = i;
                blen = l;
            }
        }
        if (best == u || best < next_unit)
            return -1;
        p += blen;
        next_unit = best + 1;
        total += v * duration_units[best].ms;
        if (total > DURATION_MAX_MS)
            return -1;
    }
    if (total <= 0)
        return -1;
    *out = (double)total / 1000.0;
    return 0;
}

void utf8_clip(char *s)
{
    size_t n = strlen(s);
    if (!n)
        return;
    /* Find where the last sequence starts and whether it is complete. */
    size_t i = n;
    int cont = 0;
    while (i > 0 && ((unsigned char)s[i - 1] & 0xC0) == 0x80 && cont < 3) {
        i--;
        cont++;
    }
    if (i == 0)
        return;
    unsigned char lead = (unsigned char)s[i - 1];
    int need = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
    if (lead >= 0x80 && cont < need)
        s[i - 1] = '\0';
}

const char *utf8_start(const char *s)
{
    int skipped = 0;
    while (((unsigned char)*s & 0xC0) == 0x80 && skipped < 3) {
        s++;
        skipped++;
    }
    return s;
}

/* The length of the valid UTF-8 sequence at s (n bytes there) and its code
 * point, or 0 when it is not one (a stray continuation, an overlong form, a
 * surrogate, past U+10FFFF, cut short). */
static size_t utf8_seq(const unsigned char *s, size_t n, unsigned *cp)
{
    unsigned c = s[0];
    size_t len;
    unsigned min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        min = 0x80;
        c &= 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        min = 0x800;
        c &= 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        min = 0x10000;
        c &= 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return 0;
    *cp = c;
    return len;
}

size_t text_escape(const char *s, size_t n, char *out, size_t cap, int keep_newline)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0;
    if (!cap)
        return 0;
    for (size_t i = 0; i < n;) {
        unsigned cp;
        size_t len = utf8_seq(p + i, n - i, &cp);
        char esc[8];
        const char *put;
        size_t plen;
        if (len == 0) {
            snprintf(esc, sizeof esc, "\\x%02x", p[i]);
            put = esc;
            plen = 4;
            len = 1;
        } else if ((cp < 0x20 && cp != '\t' && !(keep_newline && cp == '\n')) || cp == 0x7f) {
            snprintf(esc, sizeof esc, "\\x%02x", cp);
            put = esc;
            plen = 4;
        } else if (cp >= 0x80 && cp <= 0x9f) {
            snprintf(esc, sizeof esc, "\\u%04x", cp);
            put = esc;
            plen = 6;
        } else {
            put = (const char *)p + i;
            plen = len;
        }
        if (o + plen + 1 > cap)
            break;
        memcpy(out + o, put, plen);
        o += plen;
        i += len;
    }
    out[o] = '\0';
    return o;
}

char *utf8_repair(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t bad = 0;
    for (size_t i = 0; i < n;) {
        unsigned cp;
        size_t len = utf8_seq(p + i, n - i, &cp);
        bad += len == 0;
        i += len ? len : 1;
    }
    char *out = malloc(n + 2 * bad + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned cp;
        size_t len = utf8_seq(p + i, n - i, &cp);
        if (len == 0) {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        } else {
            memcpy(out + o, p + i, len);
            o += len;
            i += len;
        }
    }
    out[o] = '\0';
    return out;
}

int util_ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

void format_duration(double s, char *buf, size_t len)
{
    if (!(s > 0)) {
        snprintf(buf, len, "0s");
        return;
    }
    long long ms = llround(s * 1000.0);
    if (ms < 1000) {
        snprintf(buf, len, "%lldms", ms);
    } else if (ms % 1000) {
        snprintf(buf, len, "%lld.%03llds", ms / 1000, ms % 1000);
        char *p = buf + strlen(buf) - 2; /* before the 's' */
        while (*p == '0')
            *p-- = 0;
        strcat(buf, "s");
    } else {
        long long sec = ms / 1000, h = sec / 3600, m = sec % 3600 / 60, r = sec % 60;
        size_t n = 0;
        buf[0] = 0;
        if (h)
            n += (size_t)snprintf(buf + n, len - n, "%lldh", h);
        if (m && n < len)
            n += (size_t)snprintf(buf + n, len - n, "%lldm", m);
        if (r && n < len)
            snprintf(buf + n, len - n, "%llds", r);
    }
}

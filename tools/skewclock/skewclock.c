/* skewclock.c: an LD_PRELOAD library that shifts the wall clock of the
 * process it is loaded into (and of its forked children) by SKEWCLOCK_S
 * seconds (a signed integer; 0 or unset: no shift), for the reliability
 * trials of a runner whose clock is wrong (spec/reliability/skew_spec.lua).
 *
 * Owns clock_gettime for CLOCK_REALTIME (and its _COARSE variant), time()
 * and gettimeofday(); every other clock, CLOCK_MONOTONIC above all, is left
 * as the kernel gives it. Built by the Makefile as build/skewclock.so; never
 * part of the engine. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static long skew(void)
{
    static long s;
    static int read;
    if (!read) {
        const char *v = getenv("SKEWCLOCK_S");
        s = v ? strtol(v, NULL, 10) : 0;
        read = 1;
    }
    return s;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    static int (*real)(clockid_t, struct timespec *);
    if (!real)
        real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int rc = real(id, ts);
    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
        ts->tv_sec += skew();
    return rc;
}

time_t time(time_t *t)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (t)
        *t = ts.tv_sec;
    return ts.tv_sec;
}

int gettimeofday(struct timeval *tv, void *tz)
{
    static int (*real)(struct timeval *, void *);
    if (!real)
        real = (int (*)(struct timeval *, void *))dlsym(RTLD_NEXT, "gettimeofday");
    int rc = real(tv, tz);
    if (rc == 0)
        tv->tv_sec += skew();
    return rc;
}

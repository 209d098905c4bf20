/* termlog.c: the container's termination message (termlog.h).
 *
 * Owns its content (the fatal line first, then the exact count of the
 * failed migrations left out, then the newest that fit, newest last), its
 * bound (TERMLOG_MAX, leaving out the oldest failures first and cutting the
 * fatal line last), its escaping (one line per item: control bytes
 * of a script's message never make lines of their own) and the rule of
 * when the file is written (it exists and is writable). Must never create
 * a file, and never let a failure to write change what the command does. */
#include "base/termlog.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"

/* Failed migrations kept: more than can ever fit (the shortest line,
 * "failed: a (pre-apply): X: ", takes 26 bytes with its newline), so the
 * ones shown are always the newest that fit; those left out are counted. */
#define TERMLOG_FAILURES 160
#define TERMLOG_LINE 1400

/* The fatal line may be long (every bad key of a ledger, with its repair):
 * it keeps most of the bound, and room for the count of failures not
 * shown. */
static char fatal_line[TERMLOG_MAX - 96];
static char *failures[TERMLOG_FAILURES]; /* a ring, malloc'd lines */
static size_t nfailures;     /* how many were ever noted */

static const char *path(void)
{
    const char *p = getenv("COZY_TERMINATION_LOG");
    return p && *p ? p : TERMLOG_DEFAULT_PATH;
}

/* s as one line: escaped, cut to fit cap on a whole character. */
static void one_line(const char *s, char *out, size_t cap)
{
    text_escape(s, strlen(s), out, cap, 0);
}

/* Appends line and a newline to buf (at *at, cap bytes) when both fit. */
static int put(char *buf, size_t *at, size_t cap, const char *line)
{
    size_t n = strlen(line);
    if (*at + n + 1 > cap)
        return -1;
    memcpy(buf + *at, line, n);
    buf[*at + n] = '\n';
    *at += n + 1;
    return 0;
}

/* The i-th newest failure line (0: the newest), or NULL when it was not
 * kept (older than the ring, or its memory ran out). */
static const char *newest(size_t i)
{
    if (i >= nfailures || i >= TERMLOG_FAILURES)
        return NULL;
    return failures[(nfailures - 1 - i) % TERMLOG_FAILURES];
}

static void not_shown(size_t n, int any_shown, char *buf, size_t len)
{
    snprintf(buf, len, "(%zu %sfailed migration%s not shown)", n, any_shown ? "earlier " : "",
             n == 1 ? "" : "s");
}

static void flush(void)
{
    const char *p = path();
    if (access(p, W_OK) != 0)
        return;
    char buf[TERMLOG_MAX];
    size_t at = 0;
    /* The fatal line always has its place, then the newest failures that
     * fit beside it and the count of the rest (a line whose own length is
     * part of the fit). */
    size_t fatal = *fatal_line ? strlen(fatal_line) + 1 : 0;
    if (fatal > sizeof buf)
        fatal = sizeof buf;
    size_t used = fatal, shown = 0;
    char more[96];
    for (;;) {
        const char *line = newest(shown);
        if (!line)
            break;
        size_t need = used + strlen(line) + 1;
        size_t rest = nfailures - shown - 1;
        if (rest) {
            not_shown(rest, 1, more, sizeof more);
            need += strlen(more) + 1;
        }
        if (need > sizeof buf)
            break;
        used += strlen(line) + 1;
        shown++;
    }
    if (*fatal_line && put(buf, &at, sizeof buf, fatal_line) != 0) {
        /* Alone it does not fit (it cannot, sized as it is, but the file
         * must stay within the bound whatever changes). */
        size_t n = strnlen(fatal_line, sizeof fatal_line);
        at = n < sizeof buf - 1 ? n : sizeof buf - 1;
        memcpy(buf, fatal_line, at);
    }
    if (nfailures > shown) {
        not_shown(nfailures - shown, shown > 0, more, sizeof more);
        put(buf, &at, sizeof buf, more);
    }
    for (size_t i = shown; i-- > 0;)
        put(buf, &at, sizeof buf, newest(i));
    int fd = open(p, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return;
    (void)util_write_all(fd, buf, at);
    close(fd);
}

void termlog_fatal(const char *line)
{
    char esc[sizeof fatal_line - 16];
    one_line(line, esc, sizeof esc);
    snprintf(fatal_line, sizeof fatal_line, "cozy-migrate: %s", esc);
    flush();
}

void termlog_failure(const char *slug, const char *tier, const char *reason, const char *message)
{
    char m[1100];
    one_line(message ? message : "", m, sizeof m);
    char s[64], t[16], r[64];
    one_line(slug ? slug : "", s, sizeof s);
    one_line(tier ? tier : "-", t, sizeof t);
    one_line(reason && *reason ? reason : "Failed", r, sizeof r);
    char line[TERMLOG_LINE];
    snprintf(line, sizeof line, "failed: %s (%s): %s: %s", s, t, r, m);
    char **slot = &failures[nfailures % TERMLOG_FAILURES];
    free(*slot);
    *slot = strdup(line); /* NULL when out of memory: then counted, not shown */
    nfailures++;
    flush();
}

void termlog_done(const char *line)
{
    if (*fatal_line || nfailures)
        return;
    const char *p = path();
    if (access(p, W_OK) != 0)
        return;
    char esc[TERMLOG_MAX - 16], buf[TERMLOG_MAX];
    one_line(line, esc, sizeof esc);
    int n = snprintf(buf, sizeof buf, "cozy-migrate: %s\n", esc);
    int fd = open(p, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);
    if (fd < 0 || n < 0)
        return;
    (void)util_write_all(fd, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    close(fd);
}

/* termlog.c: the container's termination message (termlog.h).
 *
 * Owns its content (the fatal line first, then the failed migrations,
 * newest last), its bound (TERMLOG_MAX, cutting the oldest failures first
 * and the fatal line last), its escaping (one line per item: control bytes
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

/* Failed migrations kept: more would not fit beside a fatal line anyway. */
#define TERMLOG_FAILURES 16
#define TERMLOG_LINE 1400

/* The fatal line may be long (every bad key of a ledger, with its repair):
 * it keeps most of the bound. */
static char fatal_line[TERMLOG_MAX - 96];
static char failures[TERMLOG_FAILURES][TERMLOG_LINE];
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

static void flush(void)
{
    const char *p = path();
    if (access(p, W_OK) != 0)
        return;
    char buf[TERMLOG_MAX];
    size_t at = 0;
    size_t kept = nfailures < TERMLOG_FAILURES ? nfailures : TERMLOG_FAILURES;
    /* The fatal line always has its place: the failures, oldest first, are
     * dropped until the rest fits. */
    size_t need = *fatal_line ? strlen(fatal_line) + 1 : 0;
    size_t first = 0;
    for (;;) {
        size_t total = need;
        for (size_t i = first; i < kept; i++)
            total += strlen(failures[(nfailures - kept + i) % TERMLOG_FAILURES]) + 1;
        if (total <= sizeof buf || first == kept)
            break;
        first++;
    }
    if (*fatal_line && put(buf, &at, sizeof buf, fatal_line) != 0) {
        /* Alone it does not fit (it cannot, with TERMLOG_LINE below the
         * bound, but the file must stay within it whatever changes). */
        size_t n = strnlen(fatal_line, sizeof fatal_line);
        at = n < sizeof buf - 1 ? n : sizeof buf - 1;
        memcpy(buf, fatal_line, at);
    }
    if (first > 0) {
        char more[96];
        snprintf(more, sizeof more, "(%zu earlier failed migration%s not shown)", first,
                 first == 1 ? "" : "s");
        if (at + strlen(more) + 1 + 1 <= sizeof buf)
            put(buf, &at, sizeof buf, more);
    }
    for (size_t i = first; i < kept; i++)
        if (put(buf, &at, sizeof buf, failures[(nfailures - kept + i) % TERMLOG_FAILURES]) != 0)
            break;
    int fd = open(p, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return;
    (void)write_all(fd, buf, at);
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
    char *slot = failures[nfailures % TERMLOG_FAILURES];
    snprintf(slot, TERMLOG_LINE, "failed: %.60s (%.12s): %.60s: %s", slug, tier ? tier : "-",
             reason && *reason ? reason : "Failed", m);
    nfailures++;
    flush();
}

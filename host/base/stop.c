/* stop.c: the stop signals (stop.h has the recipe).
 *
 * Owns the handlers for SIGTERM, SIGINT and SIGHUP, the note of which one
 * came first, and a self-pipe that makes a poll wake at once. Must stay
 * async-signal-safe in the handler (a flag and one write), and must never
 * decide what stopping means: the runner, the child supervisor and the
 * commands do, at their boundaries. A child process must not keep these
 * handlers (child.c resets them), or a TERM meant for the migration would
 * only set a flag in it. */
#include "base/stop.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t got;
static int defer;
static int wake[2] = {-1, -1};

static void on_stop(int sig)
{
    int saved = errno;
    if (!got)
        got = sig;
    if (wake[1] >= 0)
        (void)!write(wake[1], "", 1);
    errno = saved;
}

int stop_install(void)
{
    if (wake[0] < 0 && pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        wake[0] = wake[1] = -1;
        return -1;
    }
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    int rc = 0;
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        /* INT and HUP ignored from the start stay ignored: a shell's
         * background job, nohup. TERM is always the kubelet's. */
        struct sigaction old;
        if (sigs[i] != SIGTERM && sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_stop;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(sigs[i], &sa, NULL) != 0)
            rc = -1;
    }
    return rc;
}

int stop_signal(void) { return got; }
int stop_fd(void) { return wake[0]; }

void stop_drain(void)
{
    char buf[64];
    while (wake[0] >= 0 && read(wake[0], buf, sizeof buf) > 0) {
    }
}

const char *stop_name(int sig)
{
    return sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : sig == SIGHUP ? "SIGHUP"
                                                                                : "a signal";
}

int stop_exit_code(void) { return 128 + got; }
int stop_cuts_waits(void) { return got && !defer; }
void stop_defer(int on) { defer = on; }

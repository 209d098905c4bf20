/* stop.h: the signals that stop a command holding the runner lock or a
 * migration's child (run, skip, exec, lua, preview): SIGTERM (the kubelet,
 * when the hook's pod is deleted or its deadline passes), SIGINT, SIGHUP.
 *
 * A handler is what makes them arrive at all when the runner is PID 1 of
 * its container: the kernel drops a signal whose disposition is the default
 * for a namespace's init, so without one the run would go on through the
 * grace period and be SIGKILLed in the middle of a migration.
 *
 * The recipe a command follows:
 *   stop_install()   once, before it takes the lock or starts a child
 *   stop_signal()    at each boundary (before a step, after a child ends,
 *                    while waiting for the lock): 0 = go on
 *   stop_fd()        in a poll set, to wake the moment one arrives
 *                    (child.c: the migration's group gets TERM, grace, KILL)
 *   then: record nothing for the migration that was running, release the
 *   lock, print one line naming the signal and the migration, and exit
 *   stop_exit_code() (128 + the signal), PID 1 or not.
 * SIGINT and SIGHUP that were ignored when the process started (a shell's
 * background job, nohup) stay ignored. The first signal decides; later ones
 * change nothing. rest.c cuts its
 * retry waits short once one arrived, except inside stop_defer(1) (the
 * lock's release, which must still go out). */
#ifndef COZY_STOP_H
#define COZY_STOP_H

/* Installs the handlers (SA_RESTART) and the wake-up pipe. 0, or -1 when
 * the pipe or a handler cannot be set up (the caller says so and goes on:
 * the signal then ends the process as before). */
int stop_install(void);
/* The signal that asked us to stop, or 0. */
int stop_signal(void);
/* Readable once a stop signal arrived (or after a spurious wake: decide on
 * stop_signal(), then stop_drain()); -1 before stop_install. */
int stop_fd(void);
void stop_drain(void);
/* "SIGTERM", "SIGINT", "SIGHUP", or "a signal". */
const char *stop_name(int sig);
/* 128 + stop_signal(). */
int stop_exit_code(void);
/* 1 while waits and retries should be cut short: a signal came and no
 * stop_defer(1) is in force. */
int stop_cuts_waits(void);
void stop_defer(int on);
#endif

/* helper.h: a helper process of the runner's own, beside its migrations:
 * the Lease watcher (run/lockwatch.c). The one other kind of process
 * host/proc/ forks (a migration is child.h's): the runner's own code, not a
 * script's, so it stays in the runner's process group and keeps what the
 * runner holds, but it never outlives the runner (PR_SET_PDEATHSIG), ends
 * as a stop signal asks (TERM, INT and HUP at their defaults), ignores
 * SIGPIPE, and never returns into the caller's code (it _exits).
 *
 * Recipe: pid = proc_helper_start(name, fn, ud) forks (stdout and stderr
 * flushed first) and runs fn(ud) in the helper; proc_helper_stop(pid)
 * kills it (SIGKILL) and reaps it. */
#ifndef COZY_HELPER_H
#define COZY_HELPER_H
#include <sys/types.h>

/* The helper's pid, or -1 when fork failed (errno). name: its process
 * name (at most 15 bytes are kept). */
pid_t proc_helper_start(const char *name, void (*fn)(void *ud), void *ud);
void proc_helper_stop(pid_t pid);
#endif

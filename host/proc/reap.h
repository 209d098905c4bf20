/* reap.h: nothing a migration starts outlives it. A process that is a
 * child subreaper (PR_SET_CHILD_SUBREAPER) inherits every orphan among its
 * descendants, also those that left the process group and the session
 * (setsid, a double fork): so when all its children are dead (zombies or
 * gone), no descendant lives. The shell's supervisor and the runner are
 * both subreapers; the supervisor kills its descendants when bash ends,
 * and the runner kills what a supervisor it had to SIGKILL left behind. */
#ifndef COZY_REAP_H
#define COZY_REAP_H
#include <sys/types.h>

/* Makes the calling process a child subreaper. 0, or -1 (errno). */
int reap_subreaper(void);
/* SIGKILLs every living child of the calling process (and so, as the
 * orphans reach it, every descendant) until none lives, except children in
 * process group spare (0: spare none). Reaps nothing, except with
 * reap_them, then only the children it killed (never the spared).
 * Async-signal-safe (raw reads of /proc). Returns how many it killed, or
 * -1 when /proc cannot be read (the caller falls back on its group kill). */
int reap_kill_descendants(pid_t spare, int reap_them);
/* Removes dir and everything beneath it (never following a symlink), as
 * far as REAP_DIR_DEPTH levels: a migration's private directory when the
 * runner is gone and cannot. Async-signal-safe; best effort. */
void reap_remove_dir(const char *dir);
#endif

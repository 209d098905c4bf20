/* termlog.h: the container's termination message. Kubernetes shows the
 * file /dev/termination-log of a container that ended (`kubectl describe
 * pod`, `kubectl get pod -o yaml`, and Helm's error for a failed hook
 * through the Job's pod), so the reason of a failure is where an operator
 * looks even after the Job's cleanup removed the pod's log.
 *
 * Recipe: log.c hands every fatal line to termlog_fatal; the runner hands
 * each failed migration to termlog_failure. Each call rewrites the file
 * whole, so what is there when the process ends (or is killed) is the
 * latest account: the fatal line first, then "(N earlier failed migrations
 * not shown)" when some do not fit, then the newest failed migrations that
 * do, newest last, at most TERMLOG_MAX bytes (Kubernetes keeps no more). The file is
 * written only when it exists and is writable (the kubelet makes it in a
 * container; nothing is created elsewhere). Env COZY_TERMINATION_LOG names
 * another path (specs). Best effort: a failure to write is silent, since
 * the same lines went to the log. */
#ifndef COZY_TERMLOG_H
#define COZY_TERMLOG_H

/* Kubernetes truncates a termination message at 4096 bytes. */
#define TERMLOG_MAX 4096
#define TERMLOG_DEFAULT_PATH "/dev/termination-log"

/* The line that ends the command ("cozy-migrate: " is prepended). */
void termlog_fatal(const char *line);
/* A migration that failed: "failed: SLUG (TIER): REASON: MESSAGE". */
void termlog_failure(const char *slug, const char *tier, const char *reason, const char *message);
/* A command that ended with nothing fatal and nothing failed: its one-line
 * account ("cozy-migrate: " is prepended; the run's timings, so the pod
 * of a hook that succeeded says where its seconds went). Written only
 * when no fatal line or failed migration is held. */
void termlog_done(const char *line);
#endif

/* leasewatch.h: what keeps a migration's process group from outliving the
 * runner's lock: a thread in the group's leader (the Lua child, or a shell
 * migration's supervisor) that SIGKILLs the group once CLOCK_MONOTONIC
 * passes a shared word the runner keeps pushing forward (run/lock.h,
 * lock_watch), even while the runner itself is stopped; the runner's
 * Lease watcher (run/lockwatch.h) moves the same word into the past the
 * moment it sees the lock lost: one mechanism stops a migration, whoever
 * notices. */
#ifndef COZY_LEASEWATCH_H
#define COZY_LEASEWATCH_H
#include <stdatomic.h>

/* Starts the watch on until (monotonic microseconds, 0 = not yet set); a
 * NULL until is no watch. 0, or -1 when the thread cannot start (the
 * caller warns: the runner's own checks then stop the migration, later). */
int lease_watch_start(const _Atomic(long long) *until);
#endif

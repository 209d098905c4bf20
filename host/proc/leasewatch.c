/* leasewatch.c: the lease watch (see leasewatch.h): a thread of the
 * migration's group leader that kills the whole group once the runner's
 * hold on the lock can no longer be vouched for (the runner renews the
 * shared word; a stopped or wedged runner does not), and at once when the
 * runner's Lease watcher (run/lockwatch.h) sets the word in the past.
 * Polling is cheap and needs nothing from the parent. */
#include "proc/leasewatch.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "base/util.h"
#include "proc/reap.h"

/* The runner's Lease watcher sets the word in the past on a loss: the
 * group is killed within this of the event reaching the runner. */
#define WATCH_EVERY_NS (10 * 1000 * 1000)

static void *watch_until(void *arg)
{
    const _Atomic(long long) *until = arg;
    for (;;) {
        long long u = atomic_load(until);
        if (u && (long long)(now_mono() * 1e6) >= u) {
            /* a shell's supervisor is the subreaper of what left the
             * group (setsid): those die first, while it still is */
            (void)reap_kill_descendants(0, 0);
            kill(0, SIGKILL);
        }
        struct timespec ts = {0, WATCH_EVERY_NS};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

int lease_watch_start(const _Atomic(long long) *until)
{
    if (!until)
        return 0;
    pthread_t t;
    pthread_attr_t a;
    if (pthread_attr_init(&a) != 0)
        return -1;
    int rc = pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED) == 0 &&
                     pthread_create(&t, &a, watch_until, (void *)until) == 0
                 ? 0
                 : -1;
    pthread_attr_destroy(&a);
    return rc;
}

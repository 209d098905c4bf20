/* helper.c: forks and stops a helper process of the runner's own
 * (helper.h): tied to the runner by PR_SET_PDEATHSIG, named, the stop
 * signals at their defaults. Must never let the helper outlive the runner
 * (a runner that died between the fork and the prctl is noticed: the
 * helper's parent is then no longer the runner) nor return into the
 * caller's code. */
#include "proc/helper.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

pid_t proc_helper_start(const char *name, void (*fn)(void *ud), void *ud)
{
    pid_t runner = getpid();
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    /* never outlive the runner, and end as a stop signal asks */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != runner)
        _exit(0);
    prctl(PR_SET_NAME, name);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGPIPE, SIG_IGN);
    fn(ud);
    _exit(0);
}

void proc_helper_stop(pid_t pid)
{
    if (pid <= 0)
        return;
    (void)kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

/* pause: the test cluster's do-nothing process, in two roles (tools/testenv
 * cluster). As the pods' sandbox image it holds each pod's namespaces, as
 * Kubernetes' own pause does; as PID 1 of the namespaces the cluster runs
 * in it holds them open, and its exit makes the kernel kill everything left
 * in its PID namespace, so `cluster down` leaves no process behind. In both
 * roles it reaps every child reparented to it (a shim, a container's
 * orphan), so none stays a zombie, and TERM, INT or HUP end it (exit 0).
 * Built static, so the image needs nothing but this file. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

static volatile sig_atomic_t stopping;

static void on_stop(int sig) {
	(void)sig;
	stopping = 1;
}

static void on_child(int sig) {
	int saved = errno;
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0) {
	}
	errno = saved;
}

static int handle(int sig, void (*fn)(int)) {
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = fn;
	sa.sa_flags = sig == SIGCHLD ? SA_NOCLDSTOP | SA_RESTART : 0;
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, NULL) != 0) {
		fprintf(stderr, "pause: sigaction(%d): %s\n", sig, strerror(errno));
		return -1;
	}
	return 0;
}

int main(void) {
	sigset_t block, wait_mask;
	/* Block the signals first and wait with them unblocked in sigsuspend,
	 * so a TERM arriving between the check and the wait is never lost. */
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &block, &wait_mask) != 0) {
		fprintf(stderr, "pause: sigprocmask: %s\n", strerror(errno));
		return 1;
	}
	sigdelset(&wait_mask, SIGTERM);
	sigdelset(&wait_mask, SIGINT);
	sigdelset(&wait_mask, SIGHUP);
	sigdelset(&wait_mask, SIGCHLD);
	if (handle(SIGTERM, on_stop) || handle(SIGINT, on_stop) || handle(SIGHUP, on_stop) ||
	    handle(SIGCHLD, on_child))
		return 1;
	on_child(SIGCHLD); /* children that ended before the handler was set */
	while (!stopping)
		sigsuspend(&wait_mask);
	return 0;
}

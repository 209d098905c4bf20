/* spawn.c: the child's side of child_run (child_int.h), from the fork to
 * bash or the Lua state.
 *
 * Owns what a migration's process is given and nothing more: its own
 * process group; the parent's death noticed (PDEATHSIG: a Lua child is
 * killed outright, a shell's supervisor takes its whole group down and
 * removes the private kubeconfig the runner can no longer remove); stdin
 * /dev/null, stdout and stderr on the output pipe, the status pipe on fd 3
 * and, for a shell behind the gateway, the gateway's socket and the
 * Landlock ruleset above it, every other fd closed (the parent's TLS
 * connections above all); signals at their defaults. A shell's group leader
 * does not exec: it is bash's supervisor, serving the gateway
 * (gateway/gateway.h), reaping every descendant as their subreaper, and
 * passing bash's end on unchanged. Must never: allocate or call anything
 * that takes a lock between fork and exec in the shell's bash child (only
 * async-signal-safe calls), return into the caller's code, or let bash
 * keep anything of the gateway's. */
#include "proc/child_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"
#include "gateway/gateway.h"
#include "proc/confine.h"
#include "proc/leasewatch.h"
#include "proc/reap.h"
#include "proc/verdict.h"

/* Async-signal-safe: the shell child between fork and exec must not call
 * snprintf or strerror (another thread of the parent may hold their locks). */
static size_t append(char *buf, size_t at, size_t cap, const char *s)
{
    while (*s && at + 1 < cap)
        buf[at++] = *s++;
    buf[at] = 0;
    return at;
}

/* The verdict of a child that could not start: the stage and the errno
 * (the parent turns it into text). Async-signal-safe. */
static void report_spawn_error(int fd, const char *stage, int err)
{
    struct child_verdict v;
    verdict_init(&v, VERDICT_SPAWN_ERROR);
    verdict_set(v.stage, sizeof v.stage, stage);
    v.err = err;
    (void)verdict_write(fd, &v);
}

static void close_from(int lowfd)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)lowfd, ~0U, 0) == 0)
        return;
#endif
    /* Old kernels: close them one by one. */
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > (1L << 20))
        max = 1L << 20;
    for (long fd = lowfd; fd < max; fd++)
        close((int)fd);
}

/* What the runner would have removed after the child (its private
 * kubeconfig): set in the shell child before the handler below. */
static const char *orphan_file;
static const char *orphan_dir;

/* The runner died: kill every descendant (those that left the group
 * first: this process is their subreaper, and they must not outlive it),
 * remove what the runner can no longer remove (the private directory,
 * the kubeconfig in it), then kill the group, this process too. */
static void on_parent_death(int sig)
{
    (void)sig;
    (void)reap_kill_descendants(0, 0);
    if (orphan_dir)
        reap_remove_dir(orphan_dir);
    if (orphan_file) {
        char dir[4200];
        size_t n = append(dir, 0, sizeof dir, orphan_file), slash = 0;
        for (size_t i = 0; i < n; i++)
            if (dir[i] == '/')
                slash = i;
        (void)unlink(orphan_file);
        if (slash) {
            dir[slash] = 0;
            (void)rmdir(dir);
        }
    }
    kill(0, SIGKILL);
    _exit(137);
}

/* The group leader of a shell migration does not exec: it forks bash and
 * waits, so that when the runner dies (PDEATHSIG) it can kill bash's own
 * children too, which PDEATHSIG alone would orphan. It passes bash's end on
 * unchanged: the same exit code, or the same signal. */
/* The gateway's lines (a dry run's report, an apiserver warning) are the
 * migration's own output. */
static void gateway_say(const char *text)
{
    for (const char *p = text; *p;) {
        size_t n = strcspn(p, "\n");
        out_line("%.*s", (int)n, p);
        p += n + (p[n] == '\n');
    }
}

/* The gateway for this shell, before bash starts: it fails the migration
 * with one line when it cannot start, never letting the script run on
 * anything else. NULL when the shell has none. */
static struct gateway *start_gateway(const struct child_launch *l)
{
    const struct child_gateway *cg = l->spec->gateway;
    if (!cg)
        return NULL;
    /* The runner's credentials live in this process from here on: bash,
     * running as the same user, may not read its memory or environment. */
    (void)prctl(PR_SET_DUMPABLE, 0);
    signal(SIGPIPE, SIG_IGN);
    log_set_prefix(log_json() ? l->slug : NULL);
    struct kube_options dflt;
    const struct kube_options *ko = l->spec->kube;
    if (!ko) {
        kube_default_options(&dflt);
        ko = &dflt;
    }
    struct gateway_opts o = {
        .listen_fd = GATEWAY_FD,
        .cred = cg->cred,
        .ko = ko,
        .deadline = l->deadline,
        .stamp_allowed = cg->stamp_allowed,
        .overlay_path = l->spec->overlay_path,
        .shared = l->gw,
        .say = gateway_say,
    };
    char err[1200];
    struct gateway *g = gateway_start(&o, err, sizeof err);
    if (!g) {
        struct child_verdict v;
        verdict_init(&v, VERDICT_GATEWAY_ERROR);
        verdict_set(v.message, sizeof v.message, err);
        (void)verdict_write(STATUS_FD, &v);
        _exit(127);
    }
    return g;
}

static _Noreturn void supervise_shell(const struct child_launch *l)
{
    struct gateway *gw = start_gateway(l);
    pid_t pid = fork();
    if (pid < 0) {
        report_spawn_error(STATUS_FD, "fork", errno);
        _exit(127);
    }
    if (pid == 0) {
        char arg0[] = "bash";
        char *argv[] = {arg0, (char *)l->path, NULL};
        signal(SIGUSR1, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        /* bash and all it starts are held to the migration's own files and
         * its gateway (confine.h); the domain outlives exec */
        if (l->confined) {
            struct confine cf = {.ruleset_fd = l->confine_fd >= 0 ? CONFINE_FD : -1};
            int e = confine_apply(&cf);
            if (e != 0) {
                report_spawn_error(STATUS_FD, "landlock", (int)-e);
                _exit(127);
            }
        }
        /* nothing of the gateway's (its sockets, the runner's connection)
         * goes with bash; the status fd is close-on-exec */
        close_from(STATUS_FD + 1);
        execve("/bin/bash", argv, l->envp);
        report_spawn_error(STATUS_FD, "execve", errno);
        _exit(127);
    }
    /* EOF on the status fd now means bash exec'd: only it may hold it. */
    close(STATUS_FD);
    if (lease_watch_start(l->spec->lease_until_us) != 0)
        log_warn("cannot start the lease watch: the runner's checks alone guard this migration");
    /* The parent's TERM on timeout is for bash and its children; this
     * process must outlive bash to report how it ended. */
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            _exit(127);
    }
    /* Nothing bash started outlives it, wherever it went (setsid, a double
     * fork): as their subreaper this process sees them all, and kills them
     * before it reports, so before the runner records. */
    if (reap_kill_descendants(0, 1) < 0)
        log_warn("cannot read /proc: only the runner's kill of the group stops what the script left");
    char gerr[600];
    if (gateway_finish(gw, gerr, sizeof gerr) != 0)
        log_error("%s", gerr);
    fflush(stdout);
    if (WIFEXITED(status))
        _exit(WEXITSTATUS(status));
    int sig = WTERMSIG(status);
    struct rlimit none = {0, 0};
    (void)setrlimit(RLIMIT_CORE, &none);
    signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    (void)sigprocmask(SIG_UNBLOCK, &set, NULL);
    kill(getpid(), sig);
    _exit(128 + sig);
}

_Noreturn void child_spawned(const struct child_launch *l)
{
    /* Its own group: the parent's kill(-pid) then reaches every descendant
     * that does not deliberately leave (setsid). The parent does the same
     * setpgid, whichever runs first wins the race. */
    if (setpgid(0, 0) != 0) {
        report_spawn_error(l->st_w, "setpgid", errno);
        _exit(127);
    }
    /* A runner that dies must not leave its migration running unsupervised
     * while another runner takes the lease. A Lua child has no descendants,
     * so SIGKILL to it is enough; a shell child stays as the group's
     * supervisor, and its handler takes the whole group down. */
    if (l->spec->is_shell) {
        orphan_file = l->spec->remove_on_orphan;
        orphan_dir = l->spec->private_dir;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_parent_death;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGUSR1, &sa, NULL) != 0)
            _exit(127);
    }
    if (prctl(PR_SET_PDEATHSIG, l->spec->is_shell ? SIGUSR1 : SIGKILL) != 0 ||
        getppid() != l->parent)
        _exit(127);
    /* A crash is reported as Crashed; a core file of a migration's memory
     * (tokens, objects) is never written. */
    struct rlimit nocore = {0, 0};
    (void)setrlimit(RLIMIT_CORE, &nocore);

    /* Ignored dispositions survive fork and exec: the parent ignores SIGPIPE,
     * a script must see the default. Handlers survive fork too, and a Lua
     * child never execs: the runner's stop handlers (stop.h) would turn the
     * TERM meant for the migration into a flag. */
    for (int s = 1; s < NSIG; s++) {
        struct sigaction old;
        if (s == SIGKILL || s == SIGSTOP || sigaction(s, NULL, &old) != 0)
            continue;
        if (old.sa_handler != SIG_DFL && old.sa_handler != on_parent_death) {
            struct sigaction dfl;
            memset(&dfl, 0, sizeof dfl);
            dfl.sa_handler = SIG_DFL;
            sigemptyset(&dfl.sa_mask);
            (void)sigaction(s, &dfl, NULL);
        }
    }
    sigset_t none;
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);

    /* Lift the three fds above the targets first, so whatever numbers the
     * parent's pipes got (even 0-3 when its stdio was closed) cannot be
     * clobbered by the dup2s below. */
    int pass = l->out_w < 0; /* passthrough: the caller's own stdout and stderr */
    int out = pass ? -1 : fcntl(l->out_w, F_DUPFD_CLOEXEC, 10);
    int st = fcntl(l->st_w, F_DUPFD_CLOEXEC, 10);
    int nul = fcntl(l->devnull, F_DUPFD_CLOEXEC, 10);
    int gw = l->gw_fd >= 0 ? fcntl(l->gw_fd, F_DUPFD_CLOEXEC, 10) : -1;
    /* the ruleset goes only with a gateway (the one port it may reach) */
    int cf = gw >= 0 && l->confine_fd >= 0 ? fcntl(l->confine_fd, F_DUPFD_CLOEXEC, 10) : -1;
    if ((!pass && out < 0) || st < 0 || nul < 0 || (l->gw_fd >= 0 && gw < 0) ||
        (gw >= 0 && l->confine_fd >= 0 && cf < 0)) {
        report_spawn_error(l->st_w, "fcntl", errno);
        _exit(127);
    }
    if (dup2(nul, 0) < 0 || (!pass && (dup2(out, 1) < 0 || dup2(out, 2) < 0)) ||
        dup2(st, STATUS_FD) < 0 || fcntl(STATUS_FD, F_SETFD, FD_CLOEXEC) < 0 ||
        (gw >= 0 && (dup2(gw, GATEWAY_FD) < 0 || fcntl(GATEWAY_FD, F_SETFD, FD_CLOEXEC) < 0)) ||
        (cf >= 0 && (dup2(cf, CONFINE_FD) < 0 || fcntl(CONFINE_FD, F_SETFD, FD_CLOEXEC) < 0))) {
        report_spawn_error(st, "dup2", errno);
        _exit(127);
    }
    /* Everything else goes, above all the parent's TLS connections. The
     * status fd stays close-on-exec: for bash, EOF on it means exec worked. */
    close_from(cf >= 0 ? CONFINE_FD + 1 : gw >= 0 ? GATEWAY_FD + 1 : STATUS_FD + 1);

    if (l->spec->is_shell) {
        /* every orphan among bash's descendants comes to this process,
         * also one that left the group, so none outlives the migration */
        if (reap_subreaper() != 0) {
            report_spawn_error(STATUS_FD, "subreaper", errno);
            _exit(127);
        }
        if (l->spec->workdir && chdir(l->spec->workdir) != 0) {
            report_spawn_error(STATUS_FD, "chdir", errno);
            _exit(127);
        }
        supervise_shell(l);
    }
    struct lua_child lc = {
        .path = l->path,
        .slug = l->slug,
        .passthrough = l->spec->passthrough,
        .mem = l->mem,
        .deadline = l->deadline,
        .kube = l->spec->kube,
        .overlay_path = l->spec->overlay_path,
        .journal = l->journal,
        .lease_until_us = l->spec->lease_until_us,
    };
    lua_child_main(&lc);
}

/* child.c: run ONE migration in a child process and supervise it, the way
 * git's run-command.c runs its helpers.
 *
 * Owns: the fork; the child's own process group (so one kill(-pgid) reaches
 * every grandchild a legacy script starts); exactly which fds the child keeps
 * (stdin /dev/null, stdout+stderr on one pipe, a status pipe on fd 3, nothing
 * else: the parent's TLS socket and lease connection are never shared); the
 * write journal's log in memory shared with the child (so it outlives the
 * child however it ends); in the parent, the deadline (TERM, grace, KILL to
 * the group; the same when a stop signal reaches the runner, stop.h), the
 * tick that renews the lease while waiting, and turning how the child ended
 * and its status record (proc/luachild.h) into an outcome; and, when the
 * runner dies under a shell child, removing the file it asked to be removed.
 * What runs in a Lua child is proc/luachild.c's; streaming its output and
 * keeping the tail is childout.c's.
 *
 * Must never: write the ledger or decide whether a migration runs (the
 * caller does, from the result); leave any process of the group alive when
 * child_run returns; wait forever on a pipe a stray grandchild holds open;
 * let the child return into the caller's code (it always ends in _exit, so
 * no atexit handler or stdio buffer of the parent runs twice). */
#include "proc/child.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "base/defaults.h"
#include "base/paths.h"
#include "proc/leasewatch.h"
#include "base/log.h"
#include "base/stop.h"
#include "base/util.h"
#include "formats/journaldoc.h"
#include "gateway/gateway.h"
#include "client/kubeconfig.h"
#include "proc/confine.h"
#include "proc/luachild.h"
#include "proc/childout.h"
#include "proc/reap.h"
#include "proc/verdict.h"

#define STATUS_MAX 4096       /* the verdict (verdict.h, under PIPE_BUF): the write
                                 * journal does not go through the pipe, see journal_map */
#define STATUS_FD LUA_CHILD_STATUS_FD
/* A shell's supervisor finds the gateway's listening socket here, and the
 * Landlock ruleset its bash restricts itself to (confine.h) above it. */
#define GATEWAY_FD (STATUS_FD + 1)
#define CONFINE_FD (STATUS_FD + 2)
/* After the main child is reaped and its group killed, how long we keep
 * reading for output still in flight. Only a process that left the group
 * (setsid) can hold the pipe open longer, and we must not wait for it. */
#define DRAIN_S 0.5
/* The Lua child enforces the deadline itself (a clean Timeout error, output
 * flushed); the parent's TERM comes this much later, as the backstop for a
 * script stuck inside C. The outcome is Timeout either way. */
#define LUA_BACKSTOP_S 1.0
/* Without a pidfd, poll cannot wake on the child's exit while a grandchild
 * holds the pipe, so it wakes this often to check. */
#define POLL_CAP_MS 50

extern char **environ;

/* ---- helpers both sides use ---------------------------------------------- */

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

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGUSR1: return "SIGUSR1";
    case SIGSEGV: return "SIGSEGV";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGSYS: return "SIGSYS";
    }
    return "signal";
}

/* ---- the child side ------------------------------------------------------ */

/* Everything the child needs, prepared by the parent before fork so the
 * shell child allocates nothing before exec. */
struct launch {
    const struct child_spec *spec;
    const char *path;            /* absolute when a workdir would change its meaning */
    char **envp;                 /* shell only */
    const char *slug;
    pid_t parent;
    int out_w, st_w, devnull;
    double deadline;             /* the script's deadline (monotonic), 0 = none */
    size_t mem;
    struct journal_log *journal; /* Lua: the write journal's log, shared with the parent */
    struct gateway_shared *gw;   /* shell behind the gateway: what it tells the parent */
    int gw_fd;                   /* its listening socket, -1 when none */
    int confine_fd;              /* the Landlock ruleset bash is held to, -1 when none */
    int confined;                /* bash restricts itself before exec (no_new_privs at least) */
};

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
static struct gateway *start_gateway(const struct launch *l)
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

static _Noreturn void supervise_shell(const struct launch *l)
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

static _Noreturn void run_child(const struct launch *l)
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

/* ---- the parent side: output ----------------------------------------------- */

/* ---- the parent side: supervision ------------------------------------------ */

static void set_msg(struct child_result *res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_msg(struct child_result *res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->message, sizeof res->message, fmt, ap);
    va_end(ap);
    utf8_clip(res->message);
}

static void spawn_failed(struct child_result *res, const char *what, int err)
{
    res->outcome = CHILD_SPAWN_ERROR;
    res->reason = "SpawnError";
    set_msg(res, "%s: %s", what, strerror(err));
}

/* 1 when the child has exited (left as a zombie, so its pid, which is also
 * the group id, cannot be reused before we kill the group), 0 when it still
 * runs, -1 when it cannot be waited for. */
static int child_exited(pid_t pid)
{
    for (;;) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0)
            return si.si_pid != 0;
        if (errno != EINTR)
            return -1;
    }
}

static int is_crash_signal(int sig)
{
    return sig == SIGSEGV || sig == SIGABRT || sig == SIGBUS || sig == SIGILL || sig == SIGFPE;
}

/* From the exit status, the verdict (verdict.h: Lua; shell only on spawn
 * or gateway failure) in the reclen bytes read from the status fd and
 * whether the parent hit the deadline, the outcome. Returns -1 when the
 * child never started. */
static int classify(const struct child_spec *spec, const char *path, struct child_result *res,
                    int waited, int wstatus, int timed_out, const char *rec, size_t reclen)
{
    if (waited && WIFEXITED(wstatus))
        res->exit_code = WEXITSTATUS(wstatus);
    else if (waited && WIFSIGNALED(wstatus))
        res->signal = WTERMSIG(wstatus);

    struct child_verdict v;
    int have = verdict_read(rec, reclen, &v) == 0;
    if (have && *v.unpredictable)
        text_escape(v.unpredictable, strlen(v.unpredictable), res->unpredictable,
                    sizeof res->unpredictable, 0);
    const char *msg = v.message;
    int failed_rec = have && v.reason != VERDICT_OK;

    if (timed_out || (failed_rec && v.reason == VERDICT_TIMEOUT)) {
        char d[64];
        format_duration(spec->timeout_s, d, sizeof d);
        res->outcome = CHILD_TIMEOUT;
        res->reason = "Timeout";
        if (spec->timeout_why)
            set_msg(res, "timed out after %s (%s)", d, spec->timeout_why);
        else
            set_msg(res, "timed out after %s", d);
        return 0;
    }
    if (failed_rec && v.reason == VERDICT_SPAWN_ERROR) {
        const char *what = "";
        if (strcmp(v.stage, "chdir") == 0 && spec->workdir)
            what = spec->workdir;
        else if (strcmp(v.stage, "execve") == 0)
            what = "/bin/bash";
        res->outcome = CHILD_SPAWN_ERROR;
        res->reason = "SpawnError";
        set_msg(res, "%s%s%s: %s", v.stage, *what ? " " : "", what,
                v.err ? strerror(v.err) : "failed");
        return -1;
    }
    if (failed_rec && v.reason == VERDICT_GATEWAY_ERROR) {
        /* the shell never ran: its way to the cluster could not be made */
        res->outcome = CHILD_FAILED;
        res->reason = "GatewayError";
        text_escape(msg, strlen(msg), res->message, sizeof res->message, 0);
        return 0;
    }
    if (failed_rec) {
        if (v.reason == VERDICT_MEMORY_LIMIT) {
            res->outcome = CHILD_NOMEM;
            res->reason = "MemoryLimit";
        } else {
            /* ScriptError and LoadError alike: the script is at fault. */
            res->outcome = CHILD_FAILED;
            res->reason = "ScriptError";
        }
        /* What the script raised is data: it reaches a terminal (the FAILED
         * line, status), an Event and JSON lines, so no control byte or
         * broken UTF-8 of its own goes with it. */
        text_escape(msg, strlen(msg), res->message, sizeof res->message, 0);
        return 0;
    }
    if (!waited) {
        res->outcome = CHILD_FAILED;
        res->reason = "ExitCode";
        set_msg(res, "could not wait for the child of %s (is SIGCHLD ignored?)", path);
        return 0;
    }
    if (res->signal) {
        if (is_crash_signal(res->signal)) {
            res->outcome = CHILD_CRASHED;
            res->reason = "Crashed";
            set_msg(res, "crashed with signal %d (%s)", res->signal, signal_name(res->signal));
        } else {
            res->outcome = CHILD_KILLED;
            res->reason = "Killed";
            set_msg(res, "killed by signal %d (%s)", res->signal, signal_name(res->signal));
        }
        return 0;
    }
    if (res->exit_code != 0) {
        res->outcome = CHILD_FAILED;
        res->reason = "ExitCode";
        set_msg(res, "exit code %d", res->exit_code);
        return 0;
    }
    if (!spec->is_shell && !have) {
        /* The sandbox has no way to exit early; no verdict is a bug. */
        res->outcome = CHILD_FAILED;
        res->reason = "ScriptError";
        set_msg(res, "the Lua child exited without reporting a status");
        return 0;
    }
    res->outcome = CHILD_OK;
    res->reason = NULL;
    res->message[0] = 0;
    return 0;
}

/* base plus spec entries; a spec entry replaces the inherited one of the
 * same name. Only the pointer array is allocated. */
static char **build_env(char **base, char *const *extra)
{
    size_t n = 0, m = 0;
    for (char **e = base; e && *e; e++)
        n++;
    for (char *const *e = extra; e && *e; e++)
        m++;
    char **env = calloc(n + m + 1, sizeof *env);
    if (!env)
        return NULL;
    size_t at = 0;
    for (char **e = base; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        size_t klen = eq ? (size_t)(eq - *e) : strlen(*e);
        int overridden = 0;
        for (char *const *x = extra; x && *x && !overridden; x++)
            if (strncmp(*x, *e, klen) == 0 && (*x)[klen] == '=')
                overridden = 1;
        if (!overridden)
            env[at++] = *e;
    }
    for (char *const *x = extra; x && *x; x++) {
        /* Later duplicates in extra win, too. */
        const char *eq = strchr(*x, '=');
        size_t klen = eq ? (size_t)(eq - *x) : strlen(*x);
        int later = 0;
        for (char *const *y = x + 1; *y && !later; y++)
            if (strncmp(*y, *x, klen) == 0 && (*y)[klen] == '=')
                later = 1;
        if (!later)
            env[at++] = *x;
    }
    env[at] = NULL;
    return env;
}

static void close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/* Reads what is there; on EOF or a hard error, closes the fd. */
static void read_some(int *fd, struct child_output *r, char *st, size_t *stlen)
{
    char buf[16384];
    ssize_t n = read(*fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        close_fd(fd);
        return;
    }
    if (r) {
        child_output_feed(r, buf, (size_t)n);
    } else {
        size_t room = STATUS_MAX - 1 - *stlen;
        size_t take = (size_t)n < room ? (size_t)n : room;
        memcpy(st + *stlen, buf, take);
        *stlen += take;
        st[*stlen] = 0;
    }
}

/* What child_run prepares before the fork and releases after it. */
struct prep {
    struct child_output *rd;
    const char *path;           /* spec->path, or abs_path made from it */
    char *abs_path;
    char **envp;
    int out[2], stp[2], devnull, pidfd;
    struct journal_log *jlog;   /* shared with a Lua child; NULL for a shell one */
    struct gateway_shared *gw;  /* shared with a shell's supervisor running the gateway */
    char **extra;               /* spec->env and the private directory's entries after */
    char *own;                  /* those entries' text */
    struct confine cf;          /* a confined shell's ruleset (confine.h) */
    int confined;
};

static void prep_free(struct prep *p)
{
    if (p->jlog)
        munmap(p->jlog, sizeof *p->jlog);
    p->jlog = NULL;
    if (p->gw)
        munmap(p->gw, sizeof *p->gw);
    p->gw = NULL;
    close_fd(&p->out[0]);
    close_fd(&p->out[1]);
    close_fd(&p->stp[0]);
    close_fd(&p->stp[1]);
    close_fd(&p->devnull);
    close_fd(&p->pidfd);
    free(p->rd);
    free(p->abs_path);
    free(p->envp);
    free(p->extra);
    free(p->own);
    confine_release(&p->cf);
}

/* ---- the parent side: a shell's own directory and its confinement -------- */

#define SA_DIR_DEFAULT "/var/run/secrets/kubernetes.io/serviceaccount"
#define ALLOW_UNCONFINED_ENV "COZY_ALLOW_UNCONFINED"

/* HOME, TMPDIR and KUBECACHEDIR inside the migration's private directory
 * (made here, 0700), after spec->env so they win: nothing of the runner's
 * home (its ~/.kube/config) nor a cache another migration wrote. */
static int private_env(const struct child_spec *spec, struct prep *p)
{
    static const char *const sub[][2] = {{"HOME", "home"}, {"TMPDIR", "tmp"}, {"KUBECACHEDIR", "cache"}};
    size_t n = 0, len = strlen(spec->private_dir);
    for (char *const *e = spec->env; e && *e; e++)
        n++;
    if (!(p->extra = calloc(n + 4, sizeof *p->extra)) || !(p->own = malloc(3 * (len + 32))))
        return -1;
    memcpy(p->extra, spec->env, n * sizeof *p->extra);
    char *at = p->own;
    for (size_t i = 0; i < 3; i++) {
        int w = sprintf(at, "%s=%s/%s", sub[i][0], spec->private_dir, sub[i][1]);
        if (mkdir(at + strlen(sub[i][0]) + 1, 0700) != 0 && errno != EEXIST)
            return -1;
        p->extra[n++] = at;
        at += w + 1;
    }
    return 0;
}

/* The service-account directory and the directory every migration's
 * private one sits in (these two first), the runner's credential files
 * (its kubeconfig, client certificate and key, token file): what no root a
 * confined shell reads may hold. Pointers into kc and srcs (the kubeconfig
 * files, split). */
static void secrets_of(const struct kube_config *kc, char *srcs, const char **out, size_t cap)
{
    size_t n = 0;
    const char *sa = getenv("COZY_SERVICEACCOUNT_DIR");
    out[n++] = sa && *sa ? sa : SA_DIR_DEFAULT;
    out[n++] = paths_tmpdir();
    if (kc) {
        const char *files[] = {kc->cert_file, kc->key_file, kc->token_file};
        for (size_t i = 0; i < 3; i++)
            if (files[i])
                out[n++] = files[i];
        for (char *tok = srcs ? strtok(srcs, ":") : NULL; tok && n + 1 < cap; tok = strtok(NULL, ":"))
            if (tok[0] == '/')
                out[n++] = tok;
    }
    out[n] = NULL;
}

/* 1 when every protection in missing is named in the operator's opt-out
 * (a comma-separated list, or "all"). */
static int opted_out(const char *missing)
{
    const char *allow = getenv(ALLOW_UNCONFINED_ENV);
    if (!allow || !*allow)
        return 0;
    if (strcmp(allow, "all") == 0)
        return 1;
    for (const char *m = missing; *m;) {
        size_t n = strcspn(m, ",");
        int named = 0;
        for (const char *a = allow; *a && !named;) {
            size_t k = strcspn(a, ",");
            named = k == n && strncmp(a, m, n) == 0;
            a += k + (a[k] == ',');
        }
        if (!named)
            return 0;
        m += n + (m[n] == ',');
    }
    return 1;
}

/* The ruleset bash is held to, and the policy where the kernel lacks a
 * protection (docs/internals.md, "Confinement"): in-cluster the shell is
 * refused unless the operator named each missing protection in
 * COZY_ALLOW_UNCONFINED; elsewhere the run says so once and goes on.
 * 0, or -1 with res saying why it does not run. */
static int prepare_confine(const struct child_spec *spec, struct prep *p, struct child_result *res)
{
    struct kube_options dflt;
    const struct kube_options *ko = spec->kube;
    if (!ko) {
        kube_default_options(&dflt);
        ko = &dflt;
    }
    struct kube_config kc;
    char err[1024];
    int have = kubeconfig_resolve(&ko->cfg, &kc, err, sizeof err) == 0;
    char *srcs = have && kc.source && !kc.in_cluster ? strdup(kc.source) : NULL;
    const char *secrets[16];
    secrets_of(have ? &kc : NULL, srcs, secrets, sizeof secrets / sizeof *secrets);
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    int port = getsockname(spec->gateway->listen_fd, (struct sockaddr *)&sa, &sl) == 0 &&
                       sa.sin_family == AF_INET ? ntohs(sa.sin_port) : 0;
    const char *path_env = NULL;
    for (char **e = p->envp; e && *e; e++)
        if (strncmp(*e, "PATH=", 5) == 0)
            path_env = *e + 5;
    struct confine_spec cs = {
        .private_dir = spec->private_dir,
        .workdir = spec->workdir,
        .script = p->path,
        .path_env = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin",
        .shared_rw = getenv("COZY_SHELL_RW"),
        .gateway_port = port,
        .secrets = secrets,
        .rw_secrets = (const char *const[]){secrets[0], secrets[1], NULL},
    };
    int in_cluster = have && kc.in_cluster;
    int rc = confine_prepare(&cs, &p->cf, err, sizeof err);
    free(srcs);
    if (have)
        kubeconfig_free(&kc);
    if (rc != 0) {
        res->outcome = CHILD_SPAWN_ERROR;
        res->reason = "Unconfined";
        set_msg(res, "cannot confine the shell: %s", err);
        return -1;
    }
    p->confined = 1;
    res->confine_abi = p->cf.abi;
    snprintf(res->unconfined, sizeof res->unconfined, "%s", p->cf.missing);
    static int said_note, said_missing;
    if (p->cf.note[0] && !said_note++)
        log_warn("confinement: left out of what shell migrations may read: %s", p->cf.note);
    if (!p->cf.missing[0])
        return 0;
    if (in_cluster && !opted_out(p->cf.missing)) {
        res->outcome = CHILD_SPAWN_ERROR;
        res->reason = "Unconfined";
        set_msg(res, "refused: this kernel lacks %s (Landlock ABI %d) to confine a shell migration "
                "in-cluster; %s=%s runs it anyway", p->cf.missing, p->cf.abi, ALLOW_UNCONFINED_ENV,
                p->cf.missing);
        return -1;
    }
    if (!said_missing++)
        log_warn("confinement: this kernel lacks %s (Landlock ABI %d): shell migrations run less "
                 "confined%s", p->cf.missing, p->cf.abi, in_cluster ? " (the operator allowed it)" : "");
    return 0;
}

/* The path, environment, pipes and shared journal of the child into p.
 * Returns 0, or -1 with res saying what could not be made (the caller frees
 * p either way). */
static int prepare(const struct child_spec *spec, const char *slug, struct child_result *res,
                   struct prep *p)
{
    if (!(p->rd = child_output_new(slug, spec->quiet))) {
        spawn_failed(res, "allocating the reader", ENOMEM);
        return -1;
    }
    p->path = spec->path;
    if (spec->is_shell && spec->workdir && p->path[0] != '/') {
        /* The child chdirs before bash opens PATH: resolve it here. */
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd)) {
            spawn_failed(res, "getcwd", errno);
            return -1;
        }
        size_t len = strlen(cwd) + strlen(p->path) + 2;
        if (!(p->abs_path = malloc(len))) {
            spawn_failed(res, "allocating the path", ENOMEM);
            return -1;
        }
        snprintf(p->abs_path, len, "%s/%s", cwd, p->path);
        p->path = p->abs_path;
    }
    int confine = spec->is_shell && spec->gateway && spec->private_dir;
    if (confine && private_env(spec, p) != 0) {
        spawn_failed(res, "making the migration's private directory", errno ? errno : ENOMEM);
        return -1;
    }
    if (spec->is_shell &&
        !(p->envp = build_env(spec->env_only ? NULL : environ, p->extra ? p->extra : spec->env))) {
        spawn_failed(res, "allocating the environment", ENOMEM);
        return -1;
    }
    if (confine && prepare_confine(spec, p, res) != 0)
        return -1;
    if ((!spec->passthrough && pipe2(p->out, O_CLOEXEC) != 0) || pipe2(p->stp, O_CLOEXEC) != 0) {
        spawn_failed(res, "pipe", errno);
        return -1;
    }
    if ((p->devnull = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0) {
        spawn_failed(res, "/dev/null", errno);
        return -1;
    }
    if (!spec->is_shell) {
        /* The write journal lives here, shared with the child: whatever
         * ends it (its deadline's kill, memory), the parent still reads
         * every write it finished. */
        void *m = mmap(NULL, sizeof *p->jlog, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                       -1, 0);
        if (m == MAP_FAILED) {
            spawn_failed(res, "mapping the write journal", errno);
            return -1;
        }
        p->jlog = m;
    }
    if (spec->is_shell && spec->gateway) {
        void *m = mmap(NULL, sizeof *p->gw, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                       -1, 0);
        if (m == MAP_FAILED) {
            spawn_failed(res, "mapping the gateway's report", errno);
            return -1;
        }
        p->gw = m;
    }
    return 0;
}

/* How the supervision of one child went. */
struct watch {
    pid_t pid;
    double start, grace, kill_at_deadline;
    int reaped, waited, wstatus, timed_out, term_sent, kill_sent, aborted, stopped;
    double term_at, reaped_at;
    char st[STATUS_MAX];
    size_t stlen;
};

static void send_term(struct watch *w, double now)
{
    (void)kill(-w->pid, SIGTERM);
    w->term_sent = 1;
    w->term_at = now;
}

/* Once around the supervisor's clock: a stop signal, the deadline, the grace
 * after TERM, the tick, and reaping the child. Returns the time after it. */
static double watch_step(const struct child_spec *spec, struct prep *p, struct watch *w,
                         double *next_tick, double every, struct child_result *res)
{
    double now = now_mono();
    if (!w->reaped && !w->stopped && stop_signal()) {
        /* The runner was told to stop: the migration goes the way a
         * timeout takes it (TERM to the group, grace, KILL). */
        w->stopped = stop_signal();
        if (!w->term_sent)
            send_term(w, now);
    }
    if (!w->reaped) {
        if (w->kill_at_deadline && !w->term_sent && now >= w->kill_at_deadline) {
            send_term(w, now);
            w->timed_out = 1;
        }
        if (w->term_sent && !w->kill_sent && now >= w->term_at + w->grace) {
            (void)kill(-w->pid, SIGKILL);
            w->kill_sent = 1;
        }
    }
    if (*next_tick && now >= *next_tick) {
        if (spec->tick(spec->ud) != 0 && !w->reaped && !w->aborted) {
            (void)kill(-w->pid, SIGKILL);
            w->aborted = w->kill_sent = 1;
        }
        now = now_mono();
        *next_tick = now + every;
    }
    if (!w->reaped) {
        int ex = child_exited(w->pid);
        if (ex != 0) {
            /* Leftovers like `sleep 1000 &` die with the group, also on
             * success. The zombie still pins the group id, so this cannot
             * hit an unrelated group. */
            (void)kill(-w->pid, SIGKILL);
            if (ex > 0) {
                pid_t got;
                while ((got = waitpid(w->pid, &w->wstatus, 0)) < 0 && errno == EINTR)
                    ;
                w->waited = got == w->pid;
            }
            w->reaped = 1;
            w->reaped_at = now = now_mono();
            res->duration_ms = (long)((w->reaped_at - w->start) * 1000.0);
            close_fd(&p->pidfd);
        }
    }
    return now;
}

/* How long poll may sleep: until the next thing watch_step has to do. */
static int watch_wait_ms(const struct prep *p, const struct watch *w, double next_tick, double now)
{
    double wake = INFINITY;
    if (!w->reaped && w->kill_at_deadline && !w->term_sent)
        wake = fmin(wake, w->kill_at_deadline);
    if (!w->reaped && w->term_sent && !w->kill_sent)
        wake = fmin(wake, w->term_at + w->grace);
    if (next_tick)
        wake = fmin(wake, next_tick);
    if (w->reaped)
        wake = fmin(wake, w->reaped_at + DRAIN_S);
    int ms = -1;
    if (wake != INFINITY) {
        double d = (wake - now) * 1000.0;
        ms = d <= 0 ? 0 : d >= INT_MAX - 1 ? INT_MAX - 1 : (int)d + 1;
    }
    if (!w->reaped && p->pidfd < 0 && (ms < 0 || ms > POLL_CAP_MS))
        ms = POLL_CAP_MS;
    return ms;
}

/* The supervisor: streams the output and the status pipe, keeps the clock
 * (watch_step) until the child is reaped and its pipes are drained, or a
 * process outside its group is found holding them. */
static void supervise(const struct child_spec *spec, const char *slug, struct prep *p,
                      struct watch *w, struct child_result *res)
{
    double every = spec->tick && spec->tick_every > 0 ? spec->tick_every : 0;
    double next_tick = every ? w->start + every : 0;
    for (;;) {
        double now = watch_step(spec, p, w, &next_tick, every, res);
        if (w->reaped && p->out[0] < 0 && p->stp[0] < 0)
            break;
        if (w->reaped && now >= w->reaped_at + DRAIN_S) {
            if (p->out[0] >= 0)
                log_warn("%s: a process outside its group still holds the output open; "
                         "stopped reading", slug);
            break;
        }
        int ms = watch_wait_ms(p, w, next_tick, now);
        struct pollfd pf[4];
        int n = 0, i_out = -1, i_st = -1, i_stop = -1;
        if (p->out[0] >= 0) {
            pf[n] = (struct pollfd){.fd = p->out[0], .events = POLLIN};
            i_out = n++;
        }
        if (p->stp[0] >= 0) {
            pf[n] = (struct pollfd){.fd = p->stp[0], .events = POLLIN};
            i_st = n++;
        }
        if (!w->reaped && p->pidfd >= 0)
            pf[n++] = (struct pollfd){.fd = p->pidfd, .events = POLLIN};
        if (!w->reaped && !w->stopped && stop_fd() >= 0) {
            pf[n] = (struct pollfd){.fd = stop_fd(), .events = POLLIN};
            i_stop = n++;
        }
        int r = poll(pf, (nfds_t)n, ms);
        if (r < 0) {
            if (errno != EINTR) {
                /* ENOMEM and the like: do not spin, try again shortly. */
                struct timespec ts = {0, 10 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
            continue;
        }
        if (i_out >= 0 && pf[i_out].revents)
            read_some(&p->out[0], p->rd, NULL, NULL);
        if (i_st >= 0 && pf[i_st].revents)
            read_some(&p->stp[0], NULL, w->st, &w->stlen);
        if (i_stop >= 0 && pf[i_stop].revents)
            stop_drain();
    }
}

/* The child's write journal (its own, or its gateway's), read as data into
 * res->journal. */
static void take_journal(struct prep *p, const char *slug, struct child_result *res)
{
    if (p->gw) {
        /* read as data another process wrote: bounded, NUL-terminated */
        struct gateway_shared *g = p->gw;
        res->gateway = 1;
        res->gw_requests = g->requests;
        res->gw_refused = g->refused;
        res->gw_peak_rss_kb = g->peak_rss_kb;
        g->refusal[sizeof g->refusal - 1] = '\0';
        g->refusal_reason[sizeof g->refusal_reason - 1] = '\0';
        g->unpredictable[sizeof g->unpredictable - 1] = '\0';
        text_escape(g->refusal, strlen(g->refusal), res->gw_refusal, sizeof res->gw_refusal, 0);
        snprintf(res->gw_refusal_reason, sizeof res->gw_refusal_reason, "%s", g->refusal_reason);
        if (g->unpredictable[0] && !res->unpredictable[0])
            text_escape(g->unpredictable, strlen(g->unpredictable), res->unpredictable,
                        sizeof res->unpredictable, 0);
        res->stamped = g->stamped != 0;
        res->stamp = g->stamp;
    }
    const struct journal_log *log = p->jlog ? p->jlog : p->gw ? &p->gw->journal : NULL;
    if (!log || !log->active)
        return;
    if (!(res->journal = malloc(sizeof *res->journal))) {
        log_error("%s: out of memory reading its write journal", slug);
        return;
    }
    journal_log_read(res->journal, log);
}

int child_run(const struct child_spec *spec, struct child_result *res)
{
    memset(res, 0, sizeof *res);
    const char *slug = spec->slug ? spec->slug : spec->path;
    if (spec->is_shell)
        (void)reap_subreaper();

    /* A child that dies while we stream must give EPIPE, not kill us. */
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    (void)sigaction(SIGPIPE, &ign, NULL);

    struct prep p = {.out = {-1, -1}, .stp = {-1, -1}, .devnull = -1, .pidfd = -1,
                     .cf = {.ruleset_fd = -1}};
    if (prepare(spec, slug, res, &p) != 0) {
        prep_free(&p);
        return -1;
    }
    struct watch w = {.start = now_mono(), .grace = spec->grace_s > 0 ? spec->grace_s : DEFAULT_GRACE_S};
    struct launch l = {
        .spec = spec,
        .path = p.path,
        .envp = p.envp,
        .slug = slug,
        .parent = getpid(),
        .out_w = p.out[1],
        .st_w = p.stp[1],
        .devnull = p.devnull,
        .deadline = spec->timeout_s > 0 ? w.start + spec->timeout_s : 0,
        .mem = spec->lua_mem_limit ? spec->lua_mem_limit : (size_t)DEFAULT_MEMORY_MB << 20,
        .journal = p.jlog,
        .gw = p.gw,
        .gw_fd = spec->is_shell && spec->gateway ? spec->gateway->listen_fd : -1,
        .confine_fd = p.cf.ruleset_fd,
        .confined = p.confined,
    };
    w.kill_at_deadline = l.deadline ? l.deadline + (spec->is_shell ? 0 : LUA_BACKSTOP_S) : 0;
    /* Unflushed stdio output would otherwise be written twice, once by the
     * Lua child when it flushes. */
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        spawn_failed(res, "fork", errno);
        prep_free(&p);
        return -1;
    }
    if (pid == 0)
        run_child(&l);
    confine_release(&p.cf);
    w.pid = pid;

    /* EACCES once the child has exec'd (it did setpgid first) is fine. */
    (void)setpgid(pid, pid);
    close_fd(&p.out[1]);
    close_fd(&p.stp[1]);
    close_fd(&p.devnull);
#ifdef SYS_pidfd_open
    p.pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (p.pidfd >= 0)
        (void)fcntl(p.pidfd, F_SETFD, FD_CLOEXEC);
#endif
    supervise(spec, slug, &p, &w, res);
    /* What a supervisor killed outright (the deadline's KILL, a lost lock)
     * could not kill came here, this process being their subreaper too:
     * killed before the caller records. The runner's own helpers (its
     * Lease watcher) stay in its group and are spared. */
    if (spec->is_shell)
        (void)reap_kill_descendants(getpgrp(), 1);

    child_output_finish(p.rd);
    close_fd(&p.out[0]);
    close_fd(&p.stp[0]);
    res->tail = child_output_tail(p.rd);
    int rc = classify(spec, p.path, res, w.waited, w.wstatus, w.timed_out, w.st, w.stlen);
    take_journal(&p, slug, res);
    if (w.aborted) {
        res->outcome = CHILD_ABORTED;
        res->reason = "Aborted";
        set_msg(res, "stopped: the runner lost its lock");
    } else if (w.stopped) {
        res->outcome = CHILD_STOPPED;
        res->reason = "Stopped";
        res->stopped_by = w.stopped;
        set_msg(res, "stopped: the runner got %s", stop_name(w.stopped));
    }
    prep_free(&p);
    return rc;
}

void child_result_free(struct child_result *res)
{
    if (!res)
        return;
    free(res->tail);
    res->tail = NULL;
    free(res->journal);
    res->journal = NULL;
}

const char *child_outcome_name(enum child_outcome o)
{
    switch (o) {
    case CHILD_OK: return "ok";
    case CHILD_FAILED: return "failed";
    case CHILD_TIMEOUT: return "timeout";
    case CHILD_KILLED: return "killed";
    case CHILD_CRASHED: return "crashed";
    case CHILD_NOMEM: return "nomem";
    case CHILD_SPAWN_ERROR: return "spawn_error";
    case CHILD_ABORTED: return "aborted";
    case CHILD_STOPPED: return "stopped";
    }
    return "unknown";
}

/* ---- the result as data ---------------------------------------------------- */

cJSON *child_result_json(const struct child_result *res, long ticks)
{
    cJSON *j = cJSON_CreateObject();
    int ok = j && cJSON_AddStringToObject(j, "outcome", child_outcome_name(res->outcome)) &&
             (res->reason ? cJSON_AddStringToObject(j, "reason", res->reason) != NULL
                          : cJSON_AddNullToObject(j, "reason") != NULL) &&
             cJSON_AddStringToObject(j, "message", res->message) &&
             cJSON_AddNumberToObject(j, "exit_code", res->exit_code) &&
             cJSON_AddNumberToObject(j, "signal", res->signal) &&
             cJSON_AddNumberToObject(j, "duration_ms", (double)res->duration_ms) &&
             cJSON_AddStringToObject(j, "tail", res->tail ? res->tail : "") &&
             cJSON_AddNumberToObject(j, "ticks", (double)ticks);
    cJSON *gw = ok && res->gateway ? cJSON_AddObjectToObject(j, "gateway") : NULL;
    if (gw)
        ok = cJSON_AddNumberToObject(gw, "requests", (double)res->gw_requests) &&
             cJSON_AddNumberToObject(gw, "refused", (double)res->gw_refused) &&
             cJSON_AddStringToObject(gw, "refusal", res->gw_refusal) &&
             cJSON_AddStringToObject(gw, "refusal_reason", res->gw_refusal_reason) &&
             (res->stamped ? cJSON_AddNumberToObject(gw, "stamp", (double)res->stamp) != NULL
                           : cJSON_AddNullToObject(gw, "stamp") != NULL) &&
             cJSON_AddNumberToObject(gw, "peak_rss_kb", (double)res->gw_peak_rss_kb);
    else if (res->gateway)
        ok = 0;
    cJSON *journal = ok && res->journal ? journal_log_json(res->journal) : NULL;
    if (journal && !cJSON_AddItemToObject(j, "journal", journal)) {
        cJSON_Delete(journal);
        ok = 0;
    }
    if (!ok) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

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
 * and its status record (proc/luachild.h) into an outcome. The child's
 * side from the fork (its fds, signals, group, a shell's supervisor and,
 * when the runner dies under it, removing the file it asked to be removed)
 * is spawn.c's; a confined shell's private directory and ruleset
 * shellroom.c's; what runs in a Lua child proc/luachild.c's; streaming its
 * output and keeping the tail childout.c's.
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
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/defaults.h"
#include "base/log.h"
#include "base/stop.h"
#include "base/util.h"
#include "formats/journaldoc.h"
#include "gateway/gateway.h"
#include "proc/child_int.h"
#include "proc/childout.h"
#include "proc/confine.h"
#include "proc/luachild.h"
#include "proc/reap.h"
#include "proc/verdict.h"

#define STATUS_MAX 4096       /* the verdict (verdict.h, under PIPE_BUF): the write
                                 * journal does not go through the pipe, see journal_map */
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

/* A confined shell's ruleset (shellroom.c), or res saying why it does not
 * run. 0 or -1. */
static int prepare_confine(const struct child_spec *spec, struct prep *p, struct child_result *res)
{
    char why[1200];
    int rc = child_room_confine(spec, p->path, p->envp, &p->cf, why, sizeof why);
    if (rc != -1) {
        p->confined = 1;
        res->confine_abi = p->cf.abi;
        snprintf(res->unconfined, sizeof res->unconfined, "%s", p->cf.missing);
    }
    if (rc != 0) {
        res->outcome = CHILD_SPAWN_ERROR;
        res->reason = "Unconfined";
        set_msg(res, "%s", why);
        return -1;
    }
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
    if (confine && child_room_env(spec, &p->extra, &p->own) != 0) {
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
    struct child_launch l = {
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
        child_spawned(&l);
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

/* "ok", "failed", "timeout", "killed", "crashed", "nomem", "spawn_error",
 * "aborted", "stopped". */
static const char *child_outcome_name(enum child_outcome o)
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

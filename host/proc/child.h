/* child.h: run ONE migration in a child process and supervise it (the model
 * is git's run-command.c). Owns the fork, the child's process group, the
 * fds the child inherits, streaming and keeping the tail of its output, the
 * deadline (TERM, grace, KILL to the whole group) and turning how the child
 * ended into an outcome. Never decides whether a migration should run and
 * never writes the ledger: the caller does that with the result. */
#ifndef COZY_CHILD_H
#define COZY_CHILD_H
#include <stdatomic.h>
#include <stddef.h>
#include <cjson/cJSON.h>

#include "client/options.h"

struct gateway_cred;
struct journal_log;

/* A shell migration's way to the cluster: the runner's loopback gateway
 * (gateway/gateway.h), run by the shell's supervisor for the life of the
 * migration. */
struct child_gateway {
    int listen_fd;               /* gateway_listen's socket; the caller closes its copy
                                  * after child_run */
    const struct gateway_cred *cred; /* its token, TLS key and certificate (gateway/gateway.h) */
    long stamp_allowed;          /* legacy: the one `version` the script may stamp; 0: none */
};

struct child_spec {
    const char *slug;            /* prefix of every streamed output line */
    const char *path;            /* the script */
    int is_shell;                /* 1: bash PATH; 0: Lua in the sandbox */
    const char *workdir;         /* shell: working directory (legacy-sh/); NULL = inherit */
    char *const *env;            /* shell: extra NAME=VALUE entries, NULL-terminated, may be NULL */
    int env_only;                /* shell: env is the whole environment (nothing inherited) */
    double timeout_s;            /* wall clock; TERM to the process group at the deadline; 0 = none */
    const char *timeout_why;     /* where timeout_s comes from, for the timeout's message
                                  * ("timeout=1s, FILE:2"); NULL = unsaid */
    double grace_s;              /* TERM -> KILL delay (0 -> DEFAULT_GRACE_S) */
    size_t lua_mem_limit;        /* bytes, Lua only (0 -> DEFAULT_MEMORY_MB) */
    const struct kube_options *kube; /* the kube module's options, or the gateway's (NULL ->
                                  * defaults) */
    const char *overlay_path;    /* preview: the overlay file the child (or the gateway) reads and
                                  * writes back (overlay.h); NULL otherwise */
    int (*tick)(void *ud);       /* called in the parent about every tick_every seconds while
                                  * waiting (lease renewal); non-zero: stop the migration now
                                  * (its group is killed, the outcome is Aborted) */
    double tick_every;
    const _Atomic(long long) *lease_until_us; /* shared word (lock_watch): the migration's group
                                  * kills itself once CLOCK_MONOTONIC passes it, even when
                                  * this process is stopped; NULL = no watch */
    void *ud;
    int quiet;                   /* do not stream output (tests / plan) */
    int passthrough;             /* the child writes to our stdout/stderr as they are
                                  * (no prefix, no tail): `cozy-migrate lua` */
    const struct child_gateway *gateway; /* shell: its kubectl reaches the cluster through the
                                  * gateway (kube and overlay_path apply to it); NULL: none */
    const char *remove_on_orphan; /* shell: a file removed, with its directory, when the
                                  * runner dies while the child runs (its private
                                  * kubeconfig); NULL = none */
    const char *private_dir;     /* shell behind a gateway: the migration's own directory
                                  * (0700, its private kubeconfig's): its HOME, TMPDIR and
                                  * KUBECACHEDIR are made in it, the only place bash may
                                  * write, and bash is confined (confine.h); the caller
                                  * removes it (kubeconfig_private_remove). NULL: none */
};

enum child_outcome {
    CHILD_OK,
    CHILD_FAILED,
    CHILD_TIMEOUT,
    CHILD_KILLED,
    CHILD_CRASHED,
    CHILD_NOMEM,
    CHILD_SPAWN_ERROR,
    CHILD_ABORTED,               /* the caller's tick asked to stop it (a lost lock) */
    CHILD_STOPPED,               /* a stop signal came to this process (stop.h): its group
                                  * got TERM, grace, KILL */
};

struct child_result {
    enum child_outcome outcome;
    const char *reason;          /* "ScriptError" (Lua error), "ExitCode" (shell non-zero), "Timeout",
                                    "Killed" (SIGKILL/SIGTERM from outside), "Crashed" (SIGSEGV/SIGABRT/
                                    SIGBUS/SIGILL/SIGFPE), "MemoryLimit", "SpawnError", "Aborted",
                                    "Stopped";
                                    NULL when OK */
    char message[1024];          /* one line: the Lua error message (control bytes and
                                    invalid UTF-8 escaped, text_escape), or "exit code 3",
                                    or "killed by signal 9", or "timed out after 5m" */
    int exit_code, signal;       /* how the child process ended (0 when not applicable) */
    int stopped_by;              /* CHILD_STOPPED: the stop signal this process got */
    long duration_ms;
    struct journal_log *journal; /* the write journal as data (journaldoc.h), its counts and
                                    entries checked; freed by child_result_free. NULL when
                                    a Lua script never opened the kube module, or a shell had
                                    no gateway. Read from memory shared with the child, so it
                                    is there however the child ended (a Timeout kill, out of
                                    memory) */
    char unpredictable[512];     /* preview: the first write the preview could not predict
                                    ("" when none): the outcome is then no prediction */
    int gateway;                 /* a shell that ran behind the gateway: what follows is its */
    long gw_requests, gw_refused; /* requests it answered, and refused at the door */
    char gw_refusal[640];        /* the first refusal: "METHOD PATH: why" ("" when none) */
    char gw_refusal_reason[64];  /* its reason: LedgerProtected, DryRunRefused, ... */
    int stamped;                 /* a legacy stamp was absorbed: `version` = stamp */
    long stamp;
    long gw_peak_rss_kb;         /* the supervisor's (the gateway's process) peak memory */
    int confine_abi;             /* a confined shell: the kernel's Landlock ABI (0: none) */
    char unconfined[64];         /* the protections the kernel lacked ("" when none) */
    char *tail;                  /* last OUTPUT_TAIL_LINES lines of combined stdout+stderr, at most
                                    OUTPUT_TAIL_MAX bytes, each line '\n'-terminated; malloc'd,
                                    free with child_result_free */
};

/* Runs the migration and waits for it (and its whole process group) to end.
 * 0 when it could run, whatever the outcome; -1 on spawn failure (res is
 * filled with CHILD_SPAWN_ERROR). Ignores SIGPIPE in the calling process. */
int child_run(const struct child_spec *spec, struct child_result *res);
void child_result_free(struct child_result *res);

/* The result as `cozy-migrate exec` prints it: outcome, reason, message,
 * exit_code, signal, duration_ms, tail, ticks, journal. NULL when out of
 * memory. */
cJSON *child_result_json(const struct child_result *res, long ticks);
#endif

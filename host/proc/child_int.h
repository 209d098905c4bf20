/* child_int.h: what child.c (the parent's side of child_run) and spawn.c
 * (the child's side, from fork to bash or the Lua state) share: the fds
 * the child finds its status pipe, its gateway's socket and its Landlock
 * ruleset on, and all the parent prepares for it before the fork. Nothing
 * outside proc/ includes it. */
#ifndef COZY_CHILD_INT_H
#define COZY_CHILD_INT_H
#include <stddef.h>
#include <sys/types.h>

#include "proc/child.h"
#include "proc/luachild.h"

#define STATUS_FD LUA_CHILD_STATUS_FD
/* A shell's supervisor finds the gateway's listening socket here, and the
 * Landlock ruleset its bash restricts itself to (confine.h) above it. */
#define GATEWAY_FD (STATUS_FD + 1)
#define CONFINE_FD (STATUS_FD + 2)

struct gateway_shared;

/* Everything the child needs, prepared by the parent before fork so the
 * shell child allocates nothing before exec. */
struct child_launch {
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

/* The child's side, right after the fork: its own process group, tied to
 * the parent (PDEATHSIG), exactly the fds above and nothing else of the
 * parent's, the signals at their defaults; then a shell's supervisor
 * (the gateway, bash, every descendant reaped) or the Lua state
 * (luachild.h). Never returns: it ends in exec or _exit. */
_Noreturn void child_spawned(const struct child_launch *l);

/* ---- shellroom.c: a confined shell's own directory and ruleset ---- */

struct confine;
/* The entries of spec->env, then HOME, TMPDIR and KUBECACHEDIR inside
 * spec->private_dir (made here, 0700), after them so they win: nothing of
 * the runner's home (its ~/.kube/config) nor a cache another migration
 * wrote. *extra (the pointers) and *own (their text) are the caller's to
 * free, also after a failure. 0, or -1 (errno). */
int child_room_env(const struct child_spec *spec, char ***extra, char **own);
/* The ruleset bash is held to (script, its environment envp's PATH, the
 * gateway's port, the runner's credentials kept out) into cf, and the
 * policy where the kernel lacks a protection. 0; -1 when no ruleset could
 * be made, -2 when the policy refuses the shell (cf then says what the
 * kernel lacks), each with why (one line). */
int child_room_confine(const struct child_spec *spec, const char *script, char *const *envp,
                       struct confine *cf, char *why, size_t len);
#endif

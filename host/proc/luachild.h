/* luachild.h: the main of a Lua migration's child process, and the status
 * record it leaves for its supervisor (proc/child.c).
 *
 * The record, on LUA_CHILD_STATUS_FD, one line each, tab-separated:
 *   "ok\t\t" or "error\tREASON\tMESSAGE" (REASON as sandbox_status_name),
 *   then, when a preview met a write it cannot predict, "unpredictable\tWHY".
 * Neither field holds a tab or a newline. The write journal does not go
 * through it: it is in memory the supervisor shares (journal_log). */
#ifndef COZY_LUACHILD_H
#define COZY_LUACHILD_H
#include <stdatomic.h>
#include <stddef.h>

#include "client/options.h"

#define LUA_CHILD_STATUS_FD 3

struct journal_log;

struct lua_child {
    const char *path;                 /* the script */
    const char *slug;                 /* named in JSON log lines */
    int passthrough;                  /* the output is the script's own (`cozy-migrate lua`) */
    size_t mem;                       /* the memory cap, bytes */
    double deadline;                  /* monotonic; 0 = none */
    const struct kube_options *kube;  /* NULL: the defaults */
    const char *overlay_path;         /* preview: the overlay file; NULL otherwise */
    struct journal_log *journal;      /* the write journal's log, shared with the supervisor */
    const _Atomic(long long) *lease_until_us; /* the lease watch's word (leasewatch.h); NULL: none */
};

/* Runs the script in the sandbox and writes the status record; never
 * returns (exit 0 when it succeeded, 1 otherwise). */
_Noreturn void lua_child_main(const struct lua_child *l);
#endif

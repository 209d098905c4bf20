/* luachild.h: the main of a Lua migration's child process, which leaves
 * its supervisor (proc/child.c) one verdict (proc/verdict.h) on
 * LUA_CHILD_STATUS_FD. The write journal does not go through it: it is in
 * memory the supervisor shares (journal_log). */
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

/* Runs the script in the sandbox and writes its verdict; never
 * returns (exit 0 when it succeeded, 1 otherwise). */
_Noreturn void lua_child_main(const struct lua_child *l);
#endif

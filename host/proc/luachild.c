/* luachild.c: the Lua child's main (see luachild.h). Owns what runs in the
 * child process of a Lua migration once its supervisor (proc/child.c) has
 * set up its group, fds and signals: its host context, the lease watch,
 * the sandbox and the script, the preview's overlay written back, and the
 * one status record on LUA_CHILD_STATUS_FD, written before the state
 * closes so a finalizer misbehaving during close cannot lose the verdict.
 * Always ends in _exit, never returns into the supervisor's code. */
#include "proc/luachild.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "proc/leasewatch.h"
#include "base/log.h"
#include "base/util.h"
#include "lua/hostctx.h"
#include "lua/luakube.h"
#include "lua/sandbox.h"

/* Makes p one field of the status record. */
static void one_line(char *p)
{
    /* a CR stays, for the parent to show escaped: it is no separator */
    for (; *p; p++)
        if (*p == '\n' || *p == '\t')
            *p = ' ';
}

static void write_status(enum sandbox_status st, char *err, const char *unpredictable)
{
    char rec[1200];
    if (st == SANDBOX_OK) {
        snprintf(rec, sizeof rec, "ok\t\t\n");
    } else {
        /* One line, three tab-separated fields: no tab or newline inside. */
        one_line(err);
        snprintf(rec, sizeof rec, "error\t%s\t%.1100s\n", sandbox_status_name(st), err);
    }
    (void)util_write_all(LUA_CHILD_STATUS_FD, rec, strlen(rec));
    if (unpredictable) {
        char why[512];
        snprintf(why, sizeof why, "%s", unpredictable);
        one_line(why);
        snprintf(rec, sizeof rec, "unpredictable\t%.1000s\n", why);
        (void)util_write_all(LUA_CHILD_STATUS_FD, rec, strlen(rec));
    }
}

/* A preview's overlay goes back to the file the next migration reads. */
static void save_overlay(struct sandbox *sb)
{
    char err[512];
    if (sb && luakube_preview_save(sandbox_state(sb), err, sizeof err) != 0)
        log_error("%s", err);
}

/* An error no pcall caught (the sandbox exits right after). */
static void lua_child_panic(const char *msg)
{
    char m[600];
    snprintf(m, sizeof m, "%s", msg);
    fflush(stdout);
    fflush(stderr);
    write_status(SANDBOX_ERROR, m, NULL);
}

_Noreturn void lua_child_main(const struct lua_child *l)
{
    /* The parent prefixes each streamed line with the slug already; a JSON
     * line needs it inside. Passed through (`lua`), the output is the
     * script's own. */
    log_set_prefix(!l->passthrough && log_json() ? l->slug : NULL);
    char err[1024] = "";
    /* What the state learns about its run: handed over here, never through
     * a global or the environment. */
    struct host_ctx hc;
    memset(&hc, 0, sizeof hc);
    if (l->kube)
        hc.kube = *l->kube;
    else
        kube_default_options(&hc.kube);
    hc.deadline = l->deadline;
    hc.overlay_path = l->overlay_path;
    hc.journal_log = l->journal;
    struct sandbox_opts so = {.mem_limit = l->mem, .ctx = &hc, .on_panic = lua_child_panic};
    if (lease_watch_start(l->lease_until_us) != 0)
        log_warn("cannot start the lease watch: the runner's checks alone guard this migration");
    struct sandbox *sb = sandbox_new(&so);
    enum sandbox_status st;
    if (!sb) {
        st = SANDBOX_NOMEM;
        snprintf(err, sizeof err, "cannot create the Lua state within the memory cap");
    } else {
        st = sandbox_run_file(sb, l->path, err, sizeof err);
        /* writes a deadline or an error left in flight: awaited a moment,
         * journaled, or counted unanswered (before the journal is read) */
        luakube_settle(sandbox_state(sb));
    }
    /* Output before the status, so the parent has it all by the time it
     * reads the verdict (it drains the pipe until EOF anyway). */
    fflush(stdout);
    fflush(stderr);
    save_overlay(sb);
    write_status(st, err, sb ? luakube_unpredictable(sandbox_state(sb)) : NULL);
    /* Written before lua_close, so a finalizer misbehaving during close
     * cannot lose the verdict. */
    sandbox_free(sb);
    fflush(stdout);
    fflush(stderr);
    _exit(st == SANDBOX_OK ? 0 : 1);
}

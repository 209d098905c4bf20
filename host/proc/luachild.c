/* luachild.c: the Lua child's main (see luachild.h). Owns what runs in the
 * child process of a Lua migration once its supervisor (proc/child.c) has
 * set up its group, fds and signals: its host context, the lease watch,
 * the sandbox and the script, the preview's overlay written back, and the
 * one verdict on LUA_CHILD_STATUS_FD (proc/verdict.h), written before the state
 * closes so a finalizer misbehaving during close cannot lose the verdict.
 * Always ends in _exit, never returns into the supervisor's code. */
#include "proc/luachild.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "proc/leasewatch.h"
#include "proc/verdict.h"
#include "base/log.h"
#include "base/util.h"
#include "lua/hostctx.h"
#include "lua/luakube.h"
#include "lua/sandbox.h"

/* A verdict's message is one line (the FAILED line, an Event and the
 * record show it so): a newline or tab becomes a space; a CR stays, for
 * the parent to show escaped. */
static void one_line(char *p)
{
    for (; *p; p++)
        if (*p == '\n' || *p == '\t')
            *p = ' ';
}

static enum verdict_reason reason_of(enum sandbox_status st)
{
    switch (st) {
    case SANDBOX_OK: return VERDICT_OK;
    case SANDBOX_ERROR: return VERDICT_SCRIPT_ERROR;
    case SANDBOX_TIMEOUT: return VERDICT_TIMEOUT;
    case SANDBOX_NOMEM: return VERDICT_MEMORY_LIMIT;
    case SANDBOX_LOADERR: return VERDICT_LOAD_ERROR;
    }
    return VERDICT_SCRIPT_ERROR;
}

static void write_status(enum sandbox_status st, char *err, const char *unpredictable)
{
    struct child_verdict v;
    verdict_init(&v, reason_of(st));
    if (st != SANDBOX_OK) {
        one_line(err);
        verdict_set(v.message, sizeof v.message, err);
    }
    if (unpredictable) {
        verdict_set(v.unpredictable, sizeof v.unpredictable, unpredictable);
        one_line(v.unpredictable);
    }
    (void)verdict_write(LUA_CHILD_STATUS_FD, &v);
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

/* tool.c: runs an external tool by argv and captures its stdout and stderr.
 *
 * Owns fork/exec of git, shellcheck and luacheck for the release commands
 * (order, lint, new): argv only, never a shell string, stdin from /dev/null,
 * both pipes drained together so a chatty tool cannot deadlock us. Must
 * never be used to run a migration (child.c supervises those, with timeouts
 * and process groups; host/proc/ is the runner's processes, none of this
 * file's) and never leaves a child unreaped. */
#include "release/tool.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/mem.h"

void tool_result_free(struct tool_result *res)
{
    mem_free(res->out);
    mem_free(res->err);
    memset(res, 0, sizeof *res);
}

void tool_first_line(const char *s, char *buf, size_t n)
{
    if (!n)
        return;
    size_t l = s ? strcspn(s, "\n") : 0;
    if (l >= n)
        l = n - 1;
    if (l)
        memcpy(buf, s, l);
    buf[l] = '\0';
}

int tool_run(const char *const *argv, const char *cwd, struct tool_result *res)
{
    memset(res, 0, sizeof *res);
    res->status = -1;
    int out[2] = {-1, -1}, err[2] = {-1, -1}, st[2] = {-1, -1};
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 || pipe2(st, O_CLOEXEC) != 0) {
        for (int i = 0; i < 2; i++) {
            if (out[i] >= 0)
                close(out[i]);
            if (err[i] >= 0)
                close(err[i]);
            if (st[i] >= 0)
                close(st[i]);
        }
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(out[0]), close(out[1]), close(err[0]), close(err[1]), close(st[0]), close(st[1]);
        return -1;
    }
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0 ||
            (cwd && chdir(cwd) != 0)) {
            int e = errno;
            if (write(st[1], &e, sizeof e) < 0)
                _exit(127);
            _exit(127);
        }
        execvp(argv[0], (char *const *)argv);
        int e = errno;
        if (write(st[1], &e, sizeof e) < 0)
            _exit(127);
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    close(st[1]);
    struct buf so = BUF_INIT, se = BUF_INIT;
    int rc = 0;
    struct pollfd fds[2] = {{.fd = out[0], .events = POLLIN}, {.fd = err[0], .events = POLLIN}};
    int open_fds = 2;
    while (open_fds > 0) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            rc = -1;
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char buf[8192];
            ssize_t n = read(fds[i].fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_fds--;
            } else if (buf_add(i == 0 ? &so : &se, buf, (size_t)n) != 0) {
                rc = -1;
            }
        }
    }
    for (int i = 0; i < 2; i++)
        if (fds[i].fd >= 0)
            close(fds[i].fd);
    int exec_errno = 0;
    ssize_t sn;
    do
        sn = read(st[0], &exec_errno, sizeof exec_errno);
    while (sn < 0 && errno == EINTR);
    close(st[0]);
    int wst;
    while (waitpid(pid, &wst, 0) < 0) {
        if (errno != EINTR) {
            rc = -1;
            break;
        }
    }
    if (sn == (ssize_t)sizeof exec_errno) {
        res->not_found = exec_errno == ENOENT;
        rc = -1;
    } else if (rc == 0) {
        res->status = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
    }
    if (rc == 0) {
        res->out = buf_detach(&so, &res->out_len);
        res->err = buf_detach(&se, &res->err_len);
        if (!res->out || !res->err)
            rc = -1;
    }
    if (rc != 0) {
        buf_release(&so);
        buf_release(&se);
        mem_free(res->out);
        mem_free(res->err);
        res->out = res->err = NULL;
        res->out_len = res->err_len = 0;
    }
    return rc;
}

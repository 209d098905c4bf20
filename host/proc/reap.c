/* reap.c: killing every descendant of a subreaper (reap.h). Owns finding
 * the calling process's children from /proc (each /proc/PID/stat: its
 * parent, group and state), killing the living ones until none is left, and
 * reaping the ones it killed when asked; removing a dead migration's private
 * directory when the runner cannot. Must never: allocate or call stdio
 * (it runs in a signal handler and between fork and exit), wait for a
 * child it did not kill (the caller waits for its own), or loop forever on
 * a process the kernel will not let die (it gives up after REAP_MAX_S). */
#include "proc/reap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REAP_PAUSE_NS (1000 * 1000)   /* between two scans while children die */
#define REAP_MAX_ROUNDS 5000          /* about 5 s and more: then it gives up */
#define REAP_DIR_DEPTH 16             /* what a script nests deeper stays (in /tmp) */

int reap_subreaper(void)
{
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 ? 0 : -1;
}

struct proc_stat {
    pid_t ppid, pgrp;
    char state;
};

static long parse_num(const char **p)
{
    long v = 0;
    int neg = 0;
    while (**p == ' ')
        (*p)++;
    if (**p == '-') {
        neg = 1;
        (*p)++;
    }
    while (**p >= '0' && **p <= '9')
        v = v * 10 + (*(*p)++ - '0');
    return neg ? -v : v;
}

/* /proc/PID/stat: "PID (COMM) S PPID PGRP ..."; COMM may hold anything,
 * so the fields are read after its last ')'. 0, or -1. */
static int read_stat(int procfd, const char *name, struct proc_stat *st)
{
    char path[64];
    size_t n = 0;
    for (const char *s = name; *s && n < 40; s++)
        path[n++] = *s;
    const char *tail = "/stat";
    for (const char *s = tail; *s; s++)
        path[n++] = *s;
    path[n] = 0;
    int fd = openat(procfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[1024];
    ssize_t got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got <= 0)
        return -1;
    buf[got] = 0;
    const char *close_paren = NULL;
    for (ssize_t i = 0; i < got; i++)
        if (buf[i] == ')')
            close_paren = buf + i;
    if (!close_paren || close_paren[1] != ' ' || !close_paren[2])
        return -1;
    const char *p = close_paren + 2;
    st->state = *p++;
    st->ppid = (pid_t)parse_num(&p);
    st->pgrp = (pid_t)parse_num(&p);
    return 0;
}

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* One pass over /proc: SIGKILL to each living child (not in spare), and
 * with reap_them a reap of each zombie child not in spare. Returns the
 * living children seen, or -1. */
static int one_pass(pid_t self, pid_t spare, int reap_them, int *killed)
{
    int procfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (procfd < 0)
        return -1;
    char buf[8192];
    int alive = 0;
    for (;;) {
        long n = syscall(SYS_getdents64, procfd, buf, sizeof buf);
        if (n < 0) {
            close(procfd);
            return -1;
        }
        if (n == 0)
            break;
        for (long off = 0; off < n;) {
            struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + off);
            off += d->d_reclen;
            if (d->d_name[0] < '1' || d->d_name[0] > '9')
                continue;
            struct proc_stat st;
            if (read_stat(procfd, d->d_name, &st) != 0 || st.ppid != self ||
                (spare && st.pgrp == spare))
                continue;
            const char *p = d->d_name;
            pid_t pid = (pid_t)parse_num(&p);
            if (st.state == 'Z' || st.state == 'X') {
                if (reap_them)
                    (void)waitpid(pid, NULL, WNOHANG);
                continue;
            }
            alive++;
            if (kill(pid, SIGKILL) == 0)
                (*killed)++;
        }
    }
    close(procfd);
    return alive;
}

int reap_kill_descendants(pid_t spare, int reap_them)
{
    pid_t self = getpid();
    int killed = 0;
    for (int round = 0; round < REAP_MAX_ROUNDS; round++) {
        int alive = one_pass(self, spare, reap_them, &killed);
        if (alive < 0)
            return -1;
        if (alive == 0)
            return killed;
        struct timespec ts = {0, REAP_PAUSE_NS};
        nanosleep(&ts, NULL);
    }
    return killed;
}

/* Empties the directory open as dfd (depth levels left), then closes it. */
static void empty_dir(int dfd, int depth)
{
    char buf[4096];
    long n;
    (void)fchmod(dfd, 0700);
    while ((n = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < n;) {
            struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + off);
            off += d->d_reclen;
            const char *nm = d->d_name;
            if (nm[0] == '.' && (nm[1] == 0 || (nm[1] == '.' && nm[2] == 0)))
                continue;
            if (unlinkat(dfd, nm, 0) == 0 || depth <= 0)
                continue;
            int sub = openat(dfd, nm, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0)
                empty_dir(sub, depth - 1);
            (void)unlinkat(dfd, nm, AT_REMOVEDIR);
        }
    }
    close(dfd);
}

void reap_remove_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    empty_dir(fd, REAP_DIR_DEPTH);
    (void)rmdir(dir);
}

/* confine.c: the Landlock recipe of confine.h. Owns asking the kernel its
 * ABI, the allow-list of a shell migration (which roots, which rights),
 * leaving out a root that holds one of the runner's credentials, and the
 * two calls the child makes before exec. Must never: allow a right the
 * kernel's ABI does not handle (the ruleset would be refused), call
 * anything async-signal-unsafe in confine_apply, or widen what a root
 * grants to reach a credential. Decides no policy: what to do where a
 * protection is missing is the caller's (child.c). */
#include "proc/confine.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/landlock.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The build's <linux/landlock.h> may predate the later ABIs: the values
 * are the kernel's, fixed forever. */
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif
#define CF_FS_REFER (1ULL << 13)             /* ABI 2 */
#define CF_FS_TRUNCATE (1ULL << 14)          /* ABI 3 */
#define CF_FS_IOCTL_DEV (1ULL << 15)         /* ABI 5 */
#define CF_NET_BIND_TCP (1ULL << 0)          /* ABI 4 */
#define CF_NET_CONNECT_TCP (1ULL << 1)       /* ABI 4 */
#define CF_SCOPE_ABSTRACT_UNIX (1ULL << 0)   /* ABI 6 */
#define CF_SCOPE_SIGNAL (1ULL << 1)          /* ABI 6 */
#define CF_RULE_PATH_BENEATH 1
#define CF_RULE_NET_PORT 2

struct cf_ruleset_attr {
    uint64_t handled_access_fs, handled_access_net, scoped;
};
struct cf_path_beneath {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));
struct cf_net_port {
    uint64_t allowed_access, port;
};

#define FS_ABI1 ((1ULL << 13) - 1)           /* execute .. make_sym */
#define R_FILE (LANDLOCK_ACCESS_FS_READ_FILE)
#define R_DIR (LANDLOCK_ACCESS_FS_READ_DIR)
#define X_FILE (LANDLOCK_ACCESS_FS_EXECUTE)
#define W_FILE (LANDLOCK_ACCESS_FS_WRITE_FILE)
/* The rights that make sense on a file (not a directory) */
#define FILE_RIGHTS (X_FILE | W_FILE | R_FILE | CF_FS_TRUNCATE | CF_FS_IOCTL_DEV)

/* The kernel's Landlock ABI (0: none). */
static int confine_abi(void)
{
    long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return v < 0 ? 0 : (int)v;
}

static uint64_t fs_handled(int abi)
{
    uint64_t h = FS_ABI1;
    if (abi >= 2)
        h |= CF_FS_REFER;
    if (abi >= 3)
        h |= CF_FS_TRUNCATE;
    if (abi >= 5)
        h |= CF_FS_IOCTL_DEV;
    return h;
}

static void add_missing(struct confine *c, const char *what)
{
    size_t n = strlen(c->missing);
    snprintf(c->missing + n, sizeof c->missing - n, "%s%s", n ? "," : "", what);
}

/* 1 when path is root itself or lies beneath it (both resolved). */
static int beneath(const char *path, const char *root)
{
    size_t n = strlen(root);
    if (n == 1 && root[0] == '/')
        return 1;
    return strncmp(path, root, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* 1 when the resolved root holds one of the secrets (noted in c). */
static int holds_secret(struct confine *c, const char *root, const char *const *secrets)
{
    for (const char *const *s = secrets; s && *s; s++) {
        char real[PATH_MAX];
        const char *p = realpath(*s, real) ? real : *s;
        if (p[0] == '/' && beneath(p, root)) {
            size_t n = strlen(c->note);
            snprintf(c->note + n, sizeof c->note - n, "%s%s (it holds %s)", n ? "; " : "", root, p);
            return 1;
        }
    }
    return 0;
}

/* Allows `rights` beneath path. Paths that do not exist are skipped;
 * -1 only when the kernel refuses the rule. */
static int allow(struct confine *c, const char *path, uint64_t rights, const char *const *secrets,
                 int check)
{
    char real[PATH_MAX];
    if (!path || !*path || !realpath(path, real))
        return 0;
    if (check && holds_secret(c, real, secrets))
        return 0;
    int fd = open(real, O_PATH | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return 0;
    }
    if (!S_ISDIR(st.st_mode))
        rights &= FILE_RIGHTS;
    struct cf_path_beneath pb = {.allowed_access = rights & fs_handled(c->abi), .parent_fd = fd};
    int rc = 0;
    if (pb.allowed_access &&
        syscall(SYS_landlock_add_rule, c->ruleset_fd, CF_RULE_PATH_BENEATH, &pb, 0) != 0)
        rc = -1;
    close(fd);
    return rc;
}

static const char *const system_roots[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
                                           "/libx32", "/etc", "/opt", NULL};

static const char *const devices[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
                                      "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts", NULL};

static int allow_all(struct confine *c, const struct confine_spec *s)
{
    uint64_t rx = R_FILE | R_DIR | X_FILE;
    for (const char *const *r = system_roots; *r; r++)
        if (allow(c, *r, rx, s->secrets, 1) != 0)
            return -1;
    if (s->path_env) {
        char dir[PATH_MAX];
        for (const char *p = s->path_env; *p;) {
            size_t n = strcspn(p, ":");
            if (n && n < sizeof dir) {
                memcpy(dir, p, n);
                dir[n] = '\0';
                if (dir[0] == '/' && allow(c, dir, rx, s->secrets, 1) != 0)
                    return -1;
            }
            p += n + (p[n] == ':');
        }
    }
    if (allow(c, s->workdir, R_FILE | R_DIR, s->secrets, 1) != 0 ||
        allow(c, s->script, R_FILE, s->secrets, 1) != 0)
        return -1;
    /* the device files a shell uses (not /dev/shm, where others' files
     * are) and /proc: others' entries there are closed by the domain's
     * ptrace rule */
    uint64_t dev = R_FILE | W_FILE | CF_FS_TRUNCATE | CF_FS_IOCTL_DEV;
    for (const char *const *d = devices; *d; d++)
        if (allow(c, *d, dev, NULL, 0) != 0)
            return -1;
    if (allow(c, "/proc", R_FILE | R_DIR | W_FILE, NULL, 0) != 0 ||
        allow(c, "/sys", R_FILE | R_DIR, NULL, 0) != 0)
        return -1;
    if (s->shared_rw) {
        char dir[PATH_MAX];
        for (const char *p = s->shared_rw; *p;) {
            size_t n = strcspn(p, ":");
            if (n && n < sizeof dir) {
                memcpy(dir, p, n);
                dir[n] = '\0';
                if (dir[0] == '/' && allow(c, dir, fs_handled(c->abi), s->rw_secrets, 1) != 0)
                    return -1;
            }
            p += n + (p[n] == ':');
        }
    }
    return allow(c, s->private_dir, fs_handled(c->abi), NULL, 0);
}

int confine_prepare(const struct confine_spec *s, struct confine *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    c->ruleset_fd = -1;
    c->abi = confine_abi();
    /* a test (or a careful operator) may pretend the kernel has less */
    const char *cap = getenv("COZY_CONFINE_ABI");
    if (cap && *cap >= '0' && *cap <= '9' && atoi(cap) < c->abi)
        c->abi = atoi(cap);
    if (c->abi < 1) {
        add_missing(c, "landlock");
        return 0;
    }
    if (c->abi < 4)
        add_missing(c, "tcp-connect");
    if (c->abi < 6)
        add_missing(c, "scope");
    struct cf_ruleset_attr ra = {.handled_access_fs = fs_handled(c->abi)};
    size_t size = sizeof ra.handled_access_fs;
    if (c->abi >= 4) {
        ra.handled_access_net = CF_NET_CONNECT_TCP;
        size = 2 * sizeof(uint64_t);
    }
    if (c->abi >= 6) {
        ra.scoped = CF_SCOPE_ABSTRACT_UNIX | CF_SCOPE_SIGNAL;
        size = sizeof ra;
    }
    c->ruleset_fd = (int)syscall(SYS_landlock_create_ruleset, &ra, size, 0);
    if (c->ruleset_fd < 0) {
        snprintf(err, errlen, "creating the Landlock ruleset (ABI %d): %s", c->abi, strerror(errno));
        c->ruleset_fd = -1;
        return -1;
    }
    (void)fcntl(c->ruleset_fd, F_SETFD, FD_CLOEXEC);
    int rc = allow_all(c, s);
    if (rc == 0 && c->abi >= 4 && s->gateway_port > 0) {
        struct cf_net_port np = {.allowed_access = CF_NET_CONNECT_TCP, .port = (uint64_t)s->gateway_port};
        rc = (int)syscall(SYS_landlock_add_rule, c->ruleset_fd, CF_RULE_NET_PORT, &np, 0);
    }
    if (rc != 0) {
        snprintf(err, errlen, "adding a Landlock rule (ABI %d): %s", c->abi, strerror(errno));
        confine_release(c);
        return -1;
    }
    return 0;
}

int confine_apply(const struct confine *c)
{
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -errno;
    if (c->ruleset_fd >= 0 && syscall(SYS_landlock_restrict_self, c->ruleset_fd, 0) != 0)
        return -errno;
    return 0;
}

void confine_release(struct confine *c)
{
    if (c->ruleset_fd >= 0)
        close(c->ruleset_fd);
    c->ruleset_fd = -1;
}

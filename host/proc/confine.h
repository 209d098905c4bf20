/* confine.h: what a shell migration may touch once it runs, and the recipe
 * that makes the kernel hold it to that (Landlock, raw syscalls).
 *
 * The recipe, in the order it runs:
 *  1. Before the fork, in the runner: confine_prepare asks the kernel its
 *     Landlock ABI (LANDLOCK_CREATE_RULESET_VERSION) and builds a ruleset
 *     handling every file-system right that ABI knows, TCP connect (ABI >= 4)
 *     and the signal and abstract-socket scopes (ABI >= 6). It is an
 *     allow-list: read and execute beneath the system's directories (/usr,
 *     /bin, /sbin, /lib*, /etc, /opt) and each directory of the shell's PATH;
 *     read beneath the working directory (legacy-sh/) and the script; read
 *     and write of files beneath /dev and /proc (other processes' /proc
 *     entries stay closed: Landlock forbids a confined process to ptrace, or
 *     read the environ and mem of, any process outside its domain); every
 *     right beneath the migration's own private directory (its HOME, TMPDIR,
 *     kubectl cache and kubeconfig); TCP connect to the gateway's port only.
 *     Everything else is denied by omission: /tmp and so every other
 *     migration's private directory, /var (the service-account token under
 *     /var/run/secrets), /run, /root, /home, the runner's kubeconfig and
 *     client certificate wherever they live. Landlock cannot deny a path
 *     beneath an allowed one: an allowed root that holds one of the runner's
 *     credential files (or the service-account directory) is left out, and
 *     said so in one line.
 *  2. In the child, between fork and exec (async-signal-safe):
 *     confine_apply sets no_new_privs and restricts itself to the ruleset;
 *     bash and everything it starts inherit the domain and can never leave.
 *  3. The runner closes its copy (confine_release).
 * Where the kernel lacks a protection, missing names it ("landlock",
 * "tcp-connect", "scope"; COZY_CONFINE_ABI=N makes it act as ABI N, to
 * test that); the caller applies the policy
 * (docs/internals.md, "Confinement"). */
#ifndef COZY_CONFINE_H
#define COZY_CONFINE_H
#include <stddef.h>

struct confine_spec {
    const char *private_dir;      /* the migration's own directory: every right */
    const char *workdir;          /* read (NULL: none) */
    const char *script;           /* read */
    const char *path_env;         /* the shell's PATH: each directory read + execute */
    const char *shared_rw;        /* the operator's COZY_SHELL_RW: directories also read and
                                   * written (colon-separated; NULL: none) */
    int gateway_port;             /* the one TCP port it may connect to; 0: none */
    const char *const *secrets;   /* the runner's credential files and directories, NULL-
                                   * terminated: no allowed root may hold one */
    const char *const *rw_secrets; /* what a COZY_SHELL_RW directory may not hold (the
                                   * service-account directory, the private directories'
                                   * parent); the rest there is the operator's choice */
};

struct confine {
    int ruleset_fd;               /* -1: nothing to apply */
    int abi;                      /* the kernel's Landlock ABI, 0 when it has none */
    char missing[64];             /* comma-separated protections the kernel lacks, "" when none */
    char note[1024];              /* roots left out because they hold a credential, "" when none */
};

/* Builds c from s. 0, or -1 with err (a path that cannot be opened is not
 * an error: it is left out; a ruleset the kernel refuses is). */
int confine_prepare(const struct confine_spec *s, struct confine *c, char *err, size_t errlen);
/* In the child before exec: no_new_privs, then the ruleset (if any). 0, or
 * -errno. Async-signal-safe. */
int confine_apply(const struct confine *c);
void confine_release(struct confine *c);
#endif

/* kubeconfig_private.c: a shell child's private kubeconfig (see
 * kubeconfig_private.h). Owns writing it with the YAML writer (the
 * gateway's loopback server and certificate, the migration's token, the
 * runner's namespace), mode 0600 in a fresh 0700 directory under TMPDIR,
 * and removing both. Must never leave the token in memory it frees
 * (cleansed first) nor write through a symlink; a stop
 * signal (stop.h) ends the child before the file goes, so the script never
 * runs on without it. */
#include "gateway/kubeconfig_private.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "base/mem.h"
#include "base/paths.h"
#include "formats/yamldoc.h"

/* err as a message on one line (TMPDIR and yaml_emit's text may hold any
 * byte); returns -1. */
static int __attribute__((format(printf, 3, 4))) fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    for (char *p = err; errlen && *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    return -1;
}

static int b64_field(cJSON *o, const char *key, const char *data, size_t len)
{
    size_t cap = 4 * ((len + 2) / 3) + 1;
    unsigned char *out = malloc(cap);
    if (!out)
        return -1;
    EVP_EncodeBlock(out, (const unsigned char *)data, (int)len);
    int ok = cJSON_AddStringToObject(o, key, (const char *)out) != NULL;
    OPENSSL_cleanse(out, cap);
    free(out);
    return ok ? 0 : -1;
}

static int opt_str(cJSON *o, const char *key, const char *v)
{
    return !v || cJSON_AddStringToObject(o, key, v) ? 0 : -1;
}

/* {"name": name, body_key: body} appended to the list `key` of root. */
static cJSON *named_entry(cJSON *root, const char *key, const char *name, const char *body_key)
{
    cJSON *list = cJSON_AddArrayToObject(root, key);
    cJSON *e = cJSON_CreateObject();
    if (!list || !e || !cJSON_AddItemToArray(list, e)) {
        cJSON_Delete(e);
        return NULL;
    }
    if (!cJSON_AddStringToObject(e, "name", name))
        return NULL;
    return cJSON_AddObjectToObject(e, body_key);
}

/* The gateway's kubeconfig: the loopback server, the migration's token,
 * the runner's namespace; nothing of the runner's own credentials. */
static cJSON *gateway_doc(int port, const char *token, const char *ca_pem, const char *ns)
{
    char server[64];
    snprintf(server, sizeof server, "https://127.0.0.1:%d", port);
    cJSON *root = cJSON_CreateObject();
    if (!root || !cJSON_AddStringToObject(root, "apiVersion", "v1") ||
        !cJSON_AddStringToObject(root, "kind", "Config") ||
        !cJSON_AddStringToObject(root, "current-context", "cozy-migrate-gateway"))
        goto fail;
    cJSON *cluster = named_entry(root, "clusters", "cozy-migrate-gateway", "cluster");
    cJSON *user = cluster ? named_entry(root, "users", "cozy-migrate-gateway", "user") : NULL;
    cJSON *context = user ? named_entry(root, "contexts", "cozy-migrate-gateway", "context") : NULL;
    if (!context || !cJSON_AddStringToObject(cluster, "server", server) ||
        b64_field(cluster, "certificate-authority-data", ca_pem, strlen(ca_pem)) < 0 ||
        !cJSON_AddStringToObject(user, "token", token) ||
        !cJSON_AddStringToObject(context, "cluster", "cozy-migrate-gateway") ||
        !cJSON_AddStringToObject(context, "user", "cozy-migrate-gateway") ||
        opt_str(context, "namespace", ns) < 0)
        goto fail;
    return root;
fail:
    cJSON_Delete(root);
    return NULL;
}

static int write_doc(cJSON *doc, struct kube_private *kp, char *err, size_t errlen);

int kubeconfig_private_gateway(int port, const char *token, const char *ca_pem, const char *ns,
                               struct kube_private *kp, char *err, size_t errlen)
{
    memset(kp, 0, sizeof *kp);
    return write_doc(gateway_doc(port, token, ca_pem, ns), kp, err, errlen);
}

/* Writes doc (taken over) as kp's file. */
static int write_doc(cJSON *doc, struct kube_private *kp, char *err, size_t errlen)
{
    struct buf yerr = BUF_INIT;
    char *text = doc ? yaml_emit_err(doc, &yerr) : NULL;
    cJSON_Delete(doc);
    if (!text) {
        fail(err, errlen, "writing the child's kubeconfig: %s",
             yerr.len ? buf_str(&yerr) : "out of memory");
        buf_release(&yerr);
        return -1;
    }
    buf_release(&yerr);
    const char *tmp = paths_tmpdir();
    snprintf(kp->dir, sizeof kp->dir, "%s/cozy-migrate-XXXXXX", tmp);
    int rc = -1, fd = -1;
    if (!mkdtemp(kp->dir)) { /* mode 0700 */
        fail(err, errlen, "creating a private directory for the child's kubeconfig in %s: %s",
             tmp, strerror(errno));
        kp->dir[0] = '\0';
        goto out;
    }
    snprintf(kp->path, sizeof kp->path, "%s/kubeconfig", kp->dir);
    size_t len = strlen(text);
    fd = open(kp->path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, text, len) != (ssize_t)len || fsync(fd) != 0) {
        fail(err, errlen, "writing %s: %s", kp->path, strerror(errno));
        goto out;
    }
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    OPENSSL_cleanse(text, strlen(text));
    mem_free(text);
    if (rc != 0)
        kubeconfig_private_remove(kp);
    return rc;
}

/* nftw, first pass: every directory made traversable and writable again
 * (a script may have chmod'ed one shut); second pass: everything removed,
 * depth first. Symlinks are never followed. */
static int open_up(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)ftw;
    if (flag == FTW_D || flag == FTW_DNR)
        (void)chmod(path, (st->st_mode & 07777) | S_IRWXU);
    return 0;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    (void)(flag == FTW_DP ? rmdir(path) : unlink(path));
    return 0;
}

void kubeconfig_private_remove(struct kube_private *kp)
{
    if (kp->path[0])
        unlink(kp->path);
    /* the migration's HOME, TMPDIR and kubectl cache live in it too
     * (proc/child.h, private_dir): they go with it */
    if (kp->dir[0]) {
        (void)nftw(kp->dir, open_up, 16, FTW_PHYS);
        (void)nftw(kp->dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    }
    memset(kp, 0, sizeof *kp);
}

/* fsutil.c: directory creation, whole-file writes through rename, and tree
 * copies for the release commands.
 *
 * Owns only mechanics: no file here decides what to write. Must never
 * follow a symlink out of a copied tree (symlinks are refused) and never
 * leave a half-written file under its final name.
 * Prefixes: fs_ (the file system's mechanics). */
#include "base/fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"

int fs_mkdirs(const char *path, mode_t mode)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, mode) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, mode) != 0 && errno != EEXIST)
        return -1;
    struct stat st;
    if (stat(buf, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

int fs_write(const char *path, const char *data, size_t len, mode_t mode)
{
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return -1;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            close(fd);
            unlink(tmp);
            errno = e;
            return -1;
        }
        off += (size_t)w;
    }
    /* open() applied the umask; the mode asked for is the mode wanted. */
    if (fchmod(fd, mode) != 0 || close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    return 0;
}

int fs_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

int fs_copy_tree(const char *src, const char *dst, struct buf *err)
{
    struct stat st;
    if (stat(src, &st) != 0) {
        buf_setf(err, "%s: %s", src, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        buf_setf(err, "%s: not a directory", src);
        return -1;
    }
    if (fs_mkdirs(dst, 0755) != 0 || chmod(dst, st.st_mode & 07777) != 0) {
        buf_setf(err, "%s: %s", dst, strerror(errno));
        return -1;
    }
    DIR *d = opendir(src);
    if (!d) {
        buf_setf(err, "%s: %s", src, strerror(errno));
        return -1;
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char s[4096], t[4096];
        snprintf(s, sizeof s, "%s/%s", src, de->d_name);
        snprintf(t, sizeof t, "%s/%s", dst, de->d_name);
        struct stat es;
        if (lstat(s, &es) != 0) {
            buf_setf(err, "%s: %s", s, strerror(errno));
            rc = -1;
        } else if (S_ISDIR(es.st_mode)) {
            rc = fs_copy_tree(s, t, err);
        } else if (S_ISREG(es.st_mode)) {
            size_t len;
            char *buf = util_read_file(s, &len);
            if (!buf || fs_write(t, buf, len, es.st_mode & 07777) != 0) {
                buf_setf(err, "%s: %s", buf ? t : s, strerror(errno));
                rc = -1;
            }
            free(buf);
        } else {
            buf_setf(err, "%s: not a regular file or directory (symlinks are not copied)",
                     s);
            rc = -1;
        }
    }
    closedir(d);
    return rc;
}

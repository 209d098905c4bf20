/* fsutil.h: the few filesystem writes the release commands make (order.d/,
 * scaffolds, imported legacy scripts): create directories, write a file
 * whole through a rename, copy a file or a directory tree. */
#ifndef COZY_FSUTIL_H
#define COZY_FSUTIL_H
#include <stddef.h>
#include <sys/types.h>

#include "base/buf.h"

/* mkdir -p; 0 or -1 with errno. */
int fs_mkdirs(const char *path, mode_t mode);
/* Writes data to path through path.tmp and rename(2); 0 or -1 with errno. */
int fs_write(const char *path, const char *data, size_t len, mode_t mode);
/* 1 when path exists (any type), 0 when not. */
int fs_exists(const char *path);
/* Copies the regular files and directories below src into dst (created),
 * keeping permission bits. 0, or -1 with "path: why" in err. */
int fs_copy_tree(const char *src, const char *dst, struct buf *err);
#endif

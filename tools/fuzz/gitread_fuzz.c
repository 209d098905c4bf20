// sources: host/release/gitread.c host/release/tool.c host/base/buf.c host/base/mem.c
/* gitread_fuzz.c: libFuzzer target for the release commands' parsers: the
 * release tag grammar (and that its order is a total order consistent with
 * itself) and `git ls-tree -r -z` output. Owns checking that any input is
 * accepted or refused with one non-empty line, and that nothing leaks. The
 * first byte picks the parser. Must never run git or touch the filesystem. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "release/gitread.h"
#include "withbuf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    if (data[0] % 2 == 0) {
        /* Two tags split at the first NUL. */
        char *a = strndup(text, len);
        if (!a)
            return 0;
        size_t al = strlen(a);
        char *b = al < len ? strndup(text + al + 1, len - al - 1) : strdup("v1.0.0");
        struct release_version va, vb;
        int pa = b ? release_version_parse(a, &va) : -1;
        int pb = b ? release_version_parse(b, &vb) : -1;
        if (pa == 0 && (va.rc < 0 || va.major < 0 || a[0] != 'v'))
            abort();
        if (pa == 0 && pb == 0) {
            int ab = release_version_cmp(&va, &vb), ba = release_version_cmp(&vb, &va);
            if ((ab > 0) != (ba < 0) || (ab == 0) != (ba == 0) || release_version_cmp(&va, &va))
                abort();
            if (ab == 0 && strcmp(a, b) != 0)
                abort(); /* one spelling per version */
        }
        free(a);
        free(b);
        return 0;
    }
    struct git_entry *e;
    size_t n;
    char err[512] = "";
    if (WITH_BUF(git_tree_parse(text, len, &e, &n, &eb_)) == 0) {
        for (size_t i = 0; i < n; i++)
            if (!e[i].path || (strlen(e[i].oid) != 40 && strlen(e[i].oid) != 64))
                abort();
        git_entries_free(e, n);
    } else if (!err[0] || strchr(err, '\n')) {
        abort();
    }
    return 0;
}

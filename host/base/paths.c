/* paths.c: where the engine's own files are (see paths.h). Owns the
 * search order for the stdlib and the default tree, and the temporary
 * directory; must never guess a path another file then builds again. */
#include "base/paths.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The first of <exe>UPS[i] that exists, resolved, in dir; 0, or -1. */
static int beside_exe(const char *const *ups, char *dir, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            for (int i = 0; ups[i]; i++) {
                char cand[PATH_MAX + 32];
                snprintf(cand, sizeof cand, "%s%s", exe, ups[i]);
                char *real = realpath(cand, NULL);
                if (real) {
                    snprintf(dir, len, "%s", real);
                    free(real);
                    return 0;
                }
            }
        }
    }
    return -1;
}

const char *paths_stdlib(void)
{
    static char dir[PATH_MAX];
    const char *env = getenv("COZY_STDLIB");
    if (env && *env) {
        snprintf(dir, sizeof dir, "%s", env);
        return dir;
    }
    /* build/cozy-migrate and build/asan/cozy-migrate in a checkout */
    static const char *const ups[] = {"/../stdlib", "/../../stdlib", NULL};
    if (beside_exe(ups, dir, sizeof dir) != 0)
        snprintf(dir, sizeof dir, "/usr/share/cozy-migrate/stdlib");
    return dir;
}

const char *paths_harness(void)
{
    static char dir[PATH_MAX];
    const char *env = getenv("COZY_HARNESS");
    if (env && *env) {
        snprintf(dir, sizeof dir, "%s", env);
        return dir;
    }
    /* Where the harness's own module is, not merely a spec/ directory: a
     * checkout's build/ and an install's share/cozy-migrate/bin alike. */
    static const char *const ups[] = {"/../spec/support/migration.lua",
                                      "/../../spec/support/migration.lua", NULL};
    if (beside_exe(ups, dir, sizeof dir) == 0) {
        dir[strlen(dir) - strlen("/support/migration.lua")] = '\0';
        return dir;
    }
    snprintf(dir, sizeof dir, "/usr/share/cozy-migrate/spec");
    return dir;
}

const char *paths_tree(void)
{
    const char *env = getenv("COZY_MIGRATIONS_DIR");
    if (env && *env)
        return env;
    /* Only a tree an install laid out beside the binary (make install
     * MIGRATIONS_TREE=..., the image's share/cozy-migrate/bin): never the
     * checkout above build/, whose sample migrations are no platform's. */
    static char dir[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
    if (n <= 0)
        return NULL;
    dir[n] = '\0';
    char *slash = strrchr(dir, '/');
    if (!slash || slash - dir < 4 || strncmp(slash - 4, "/bin", 4) != 0)
        return NULL;
    slash[-4] = '\0';
    char mig[PATH_MAX + 16];
    snprintf(mig, sizeof mig, "%s/migrations", dir);
    return access(mig, F_OK) == 0 ? dir : NULL;
}

const char *paths_tmpdir(void)
{
    const char *tmp = getenv("TMPDIR");
    return tmp && *tmp ? tmp : "/tmp";
}

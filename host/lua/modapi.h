/* modapi.h: what each module a migration can require offers (kube, helm,
 * fleet, flux, log, json, yaml), read from the modules themselves as the
 * sandbox loads them, and its one rendering for editors: the LuaLS
 * `---@meta` stubs. `lint`'s api rule gets the same list (handed down by the
 * CLI), so the sandbox, the linter and the stubs cannot disagree.
 *
 * Recipe: modapi_load (a sandbox of its own; no cluster is contacted);
 * modapi_stub for each module; modapi_free. */
#ifndef COZY_MODAPI_H
#define COZY_MODAPI_H
#include <stddef.h>

/* The modules a migration requires by name, in the order stubs and lint
 * list them; ended by NULL. */
extern const char *const modapi_modules[];

struct modapi_field {
    char *name;
    int type;               /* a Lua type (LUA_TFUNCTION, LUA_TSTRING, ...) */
    char *value;            /* a string's, number's or boolean's value as a Lua literal;
                             * NULL for anything else */
    char **params;          /* a Lua function's parameter names */
    size_t nparams;
    int vararg;             /* takes `...` (every C function does: its names are unknown) */
    char *doc;              /* a Lua function's comment block in its source ("-- " lines
                             * right above it), "" when it has none */
};

struct modapi_module {
    const char *name;       /* one of modapi_modules */
    struct modapi_field *f; /* sorted by name */
    size_t n;
};

struct modapi {
    struct modapi_module *m;
    size_t n;
};

/* Loads every module of modapi_modules in a fresh sandbox over stdlib_dir
 * (NULL: paths_stdlib()) and lists its fields. 0, or -1 with err. */
int modapi_load(const char *stdlib_dir, struct modapi *a, char *err, size_t errlen);
void modapi_free(struct modapi *a);
/* The LuaLS meta file of one module (`---@meta NAME`, one declaration per
 * field, a function's doc block and parameters): the caller's, freed with
 * mem_free; NULL when out of memory. */
char *modapi_stub(const struct modapi_module *m);
#endif

/* yamldoc.h: the project's one YAML reader and writer (libyaml underneath;
 * named so it never shadows libyaml's own <yaml.h>).
 * Turns the first document of a YAML text into a cJSON tree, remembering the
 * source line of every node so callers (kubeconfig, the `yaml` Lua module)
 * can report "file:line: what is wrong". Never interprets the content. */
#ifndef COZY_YAMLDOC_H
#define COZY_YAMLDOC_H
#include <cjson/cJSON.h>
#include <stddef.h>

#include "base/buf.h"

struct yaml_mark { const cJSON *node; int line; };
struct yaml_doc {
    cJSON *root;                /* owned; NULL before a successful load */
    struct yaml_mark *marks;    /* line of each node, for messages */
    size_t nmarks;
};

/* Parses `text`. Returns 0 and fills doc, or -1 with "NAME:LINE:COL: problem"
 * in err. An empty document gives a cJSON null root. `name` is only used in
 * messages. Scalars follow the YAML 1.2 core schema (quoted ones are strings). */
int yaml_load(const char *name, const char *text, size_t len,
              struct yaml_doc *doc, struct buf *err);
/* yaml_load of a text that must be one document exactly: a second document,
 * or anything but comments after the first, fails naming its byte offset
 * (what `kubectl apply -f` of a two-document file leaves live is the last
 * one: a reader that took the first would read another object). */
int yaml_load_single(const char *name, const char *text, size_t len,
                     struct yaml_doc *doc, struct buf *err);
/* Reads and parses a file; a read error is reported as "PATH: strerror". */
int yaml_load_file(const char *path, struct yaml_doc *doc, struct buf *err);
/* 1-based line where `node` starts, or 0 if it is not from this doc. */
int yaml_line(const struct yaml_doc *doc, const cJSON *node);
void yaml_doc_free(struct yaml_doc *doc);

/* Emits `v` as a YAML document (block style, strings quoted where a plain
 * scalar would change type). Returns a string counted against the memory
 * budget (release it with mem_free), or NULL on failure. */
char *yaml_emit(const cJSON *v);
/* yaml_emit that says why it failed (e.g. a string that is not UTF-8). */
char *yaml_emit_err(const cJSON *v, struct buf *err);
#endif

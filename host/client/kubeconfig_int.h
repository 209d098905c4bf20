/* kubeconfig_int.h: what kubeconfig.c (selecting and merging the files,
 * the contexts, in-cluster) and kubeconfig_fields.c (one cluster, one user)
 * share. Nothing outside client/ includes it. */
#ifndef COZY_KUBECONFIG_INT_H
#define COZY_KUBECONFIG_INT_H
#include <cjson/cJSON.h>
#include <stddef.h>

#include "formats/yamldoc.h"
#include "client/kubeconfig.h"

struct kc_file {
    char *path;             /* as the user named it, for messages */
    char *dir;              /* absolute directory, for relative paths in it */
    struct yaml_doc doc;
    int inline_only;        /* credentials inline only: a path field is refused, never read */
};

struct field_ctx {
    const struct kc_file *f;
    const cJSON *entry;     /* the list entry, where messages point without a body */
    const cJSON *body;      /* the cluster/user/context mapping, or NULL */
    const char *what;       /* "cluster \"kind\"", for messages */
    char *err;
    size_t errlen;
};

/* err = one line (control bytes made spaces); returns -1. */
int __attribute__((format(printf, 3, 4))) kc_fail(char *err, size_t errlen, const char *fmt, ...);
int kc_nomem(char *err, size_t errlen);
/* obj[key], NULL when absent (a YAML null counts as absent). */
const cJSON *kc_get(const cJSON *obj, const char *key);
/* The line of node in its file, for messages. */
int kc_line_of(const struct kc_file *f, const cJSON *node);
/* p made absolute against dir (malloc'd), as client-go resolves a path a
 * kubeconfig names; NULL when out of memory. */
char *kc_abs_path(const char *dir, const char *p);
/* 0 when path can be opened for reading, else an errno. */
int kc_readable(const char *path);

/* kubeconfig_fields.c: a string field of c->body (NULL when absent), 0 or
 * -1 (not a string); a copy of src into *dst; base64 into a malloc'd
 * buffer (0, or -1 when it is not base64). */
int kc_field_str(const struct field_ctx *c, const char *key, const char **out);
int kc_dup_into(char **dst, const char *src, char *err, size_t errlen);
int kc_b64_decode(const char *in, char **out, size_t *outlen);
/* kubeconfig_fields.c: the context's cluster and its user into out. 0, or
 * -1 with the one-line message in c->err. */
int kc_read_cluster(const struct field_ctx *c, struct kube_config *out);
int kc_read_user(const struct field_ctx *c, const char *name, struct kube_config *out);
#endif

/* kubeconfig.c: finds the cluster and the credentials, the way client-go's
 * clientcmd does (--kubeconfig, the KUBECONFIG merge, ~/.kube/config,
 * --context) or from the in-cluster service account.
 * Owns file selection, merging, path resolution and decoding of inline key
 * material into struct kube_config. Must never open a connection, never run a
 * credential plugin, never guess when the config is ambiguous or unsupported
 * (an unsupported auth method is an error, not a silent anonymous request),
 * and never put secrets or key material into a message or a description.
 * The one kubeconfig the engine writes, a shell child's private file, is
 * kubeconfig_private.c's.
 * Prefixes: kc_ (kubeconfig_int.h's short prefix). */
#include "client/kubeconfig.h"
#include "client/kubeconfig_int.h"
#include "formats/yamldoc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "base/mem.h"

#define SA_DIR_DEFAULT "/var/run/secrets/kubernetes.io/serviceaccount"


struct kc_set {
    struct kc_file *f;
    size_t n;
};

int __attribute__((format(printf, 3, 4)))
kc_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    if (!err || errlen == 0)
        return -1;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    /* Names come from the files (and the environment, for the private
     * kubeconfig); a message must stay on one line. */
    for (char *p = err; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    return -1;
}

int kc_nomem(char *err, size_t errlen)
{
    return kc_fail(err, errlen, "out of memory");
}

/* ---------- paths ---------- */

/* Lexical clean like Go's filepath.Clean on an absolute path: client-go joins
 * and cleans without touching the filesystem, so symlinks stay as named. */
static void clean_abs(char *p)
{
    char *out = p, *in = p;
    while (*in) {
        while (*in == '/')
            in++;
        if (!*in)
            break;
        char *seg = in;
        while (*in && *in != '/')
            in++;
        size_t n = (size_t)(in - seg);
        if (n == 1 && seg[0] == '.')
            continue;
        if (n == 2 && seg[0] == '.' && seg[1] == '.') {
            while (out > p && *--out != '/')
                ;
            continue;
        }
        *out++ = '/';
        memmove(out, seg, n);
        out += n;
    }
    if (out == p)
        *out++ = '/';
    *out = '\0';
}

static char *join_path(const char *dir, const char *rel)
{
    size_t a = strlen(dir), b = strlen(rel);
    char *p = malloc(a + b + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, rel, b + 1);
    clean_abs(p);
    return p;
}

/* Absolute, cleaned form of `p` relative to `dir` (NULL dir: the cwd). */
char *kc_abs_path(const char *dir, const char *p)
{
    if (p[0] == '/') {
        char *r = strdup(p);
        if (r)
            clean_abs(r);
        return r;
    }
    if (dir)
        return join_path(dir, p);
    char *cwd = getcwd(NULL, 0);
    if (!cwd)
        return NULL;
    char *r = join_path(cwd, p);
    free(cwd);
    return r;
}

static char *abs_dir_of(const char *file)
{
    char *p = kc_abs_path(NULL, file);
    if (!p)
        return NULL;
    char *slash = strrchr(p, '/');
    if (slash == p)
        p[1] = '\0';
    else if (slash)
        *slash = '\0';
    return p;
}

/* 0 when `path` is a readable file, else an errno. Never opens it: a path
 * from a kubeconfig may name a FIFO or a device, where open() blocks or acts. */
int kc_readable(const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return errno;
    if (S_ISDIR(st.st_mode))
        return EISDIR;
    if (faccessat(AT_FDCWD, path, R_OK, AT_EACCESS) < 0)
        return errno;
    return 0;
}

/* ---------- loading ---------- */

static void set_free(struct kc_set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->f[i].path);
        free(s->f[i].dir);
        yaml_doc_free(&s->f[i].doc);
    }
    free(s->f);
    s->f = NULL;
    s->n = 0;
}

static struct kc_file *set_add(struct kc_set *s, const char *path)
{
    struct kc_file *nf = mem_grow(s->f, s->n + 1, sizeof *nf);
    if (!nf)
        return NULL;
    s->f = nf;
    struct kc_file *f = &s->f[s->n];
    memset(f, 0, sizeof *f);
    f->path = strdup(path);
    f->dir = abs_dir_of(path);
    if (!f->path || !f->dir) {
        free(f->path);
        free(f->dir);
        return NULL;
    }
    s->n++;
    return f;
}

int kc_line_of(const struct kc_file *f, const cJSON *node)
{
    int l = yaml_line(&f->doc, node);
    return l > 0 ? l : 1;
}

const cJSON *kc_get(const cJSON *obj, const char *key)
{
    return cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
}

static const struct {
    const char *list, *body, *what;
} kinds[] = {
    { "clusters", "cluster", "cluster" },
    { "users", "user", "user" },
    { "contexts", "context", "context" },
};

/* Shape checks for every file, selected entries or not: client-go decodes
 * whole files, so a file it would reject must be rejected here too. */
static int check_file(const struct kc_file *f, char *err, size_t errlen)
{
    const cJSON *root = f->doc.root;
    if (cJSON_IsNull(root))
        return 0;
    if (!cJSON_IsObject(root))
        return kc_fail(err, errlen, "%s:%d: a kubeconfig must be a mapping", f->path, kc_line_of(f, root));
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        const cJSON *list = kc_get(root, kinds[k].list);
        if (!list || cJSON_IsNull(list))
            continue;
        if (!cJSON_IsArray(list))
            return kc_fail(err, errlen, "%s:%d: %s is not a list", f->path, kc_line_of(f, list),
                        kinds[k].list);
        int i = 0;
        for (const cJSON *e = list->child; e; e = e->next, i++) {
            if (!cJSON_IsObject(e))
                return kc_fail(err, errlen, "%s:%d: %s[%d] is not a mapping", f->path, kc_line_of(f, e),
                            kinds[k].list, i);
            const cJSON *name = kc_get(e, "name");
            if (!cJSON_IsString(name) || !name->valuestring[0])
                return kc_fail(err, errlen, "%s:%d: %s[%d] has no name", f->path,
                            kc_line_of(f, name ? name : e), kinds[k].list, i);
            const cJSON *body = kc_get(e, kinds[k].body);
            if (body && !cJSON_IsNull(body) && !cJSON_IsObject(body))
                return kc_fail(err, errlen, "%s:%d: %s \"%.100s\": %s is not a mapping", f->path,
                            kc_line_of(f, body), kinds[k].what, name->valuestring, kinds[k].body);
            /* client-go refuses a name given twice in one list: which one
             * would be used is no choice to make silently. */
            for (const cJSON *p = list->child; p != e; p = p->next) {
                const cJSON *pn = kc_get(p, "name");
                if (cJSON_IsString(pn) && strcmp(pn->valuestring, name->valuestring) == 0)
                    return kc_fail(err, errlen, "%s:%d: %s \"%.100s\" is defined twice (also at "
                                "line %d): give each %s its own name", f->path, kc_line_of(f, e),
                                kinds[k].what, name->valuestring, kc_line_of(f, p), kinds[k].what);
            }
        }
    }
    const cJSON *cc = kc_get(root, "current-context");
    if (cc && !cJSON_IsNull(cc) && !cJSON_IsString(cc))
        return kc_fail(err, errlen, "%s:%d: current-context is not a string", f->path, kc_line_of(f, cc));
    return 0;
}

/* yamldoc.h says why in a buffer, this file's callers still in a char[]:
 * rc, with why's text in err when rc < 0, and why released. */
static int yaml_said(int rc, struct buf *why, char *err, size_t errlen)
{
    if (rc < 0)
        snprintf(err, errlen, "%s", buf_str(why));
    buf_release(why);
    return rc;
}

/* Returns 1 when loaded, 0 when skipped because it does not exist. */
static int load_file(struct kc_set *s, const char *path, int must_exist, char *err, size_t errlen)
{
    struct stat st;
    if (!must_exist && stat(path, &st) < 0 && errno == ENOENT)
        return 0;
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->f[i].path, path))
            return 0;   /* client-go de-duplicates the KUBECONFIG list */
    struct kc_file *f = set_add(s, path);
    if (!f)
        return kc_nomem(err, errlen);
    struct buf why = BUF_INIT;
    if (yaml_said(yaml_load_file(path, &f->doc, &why), &why, err, errlen) < 0)
        return -1;
    if (check_file(f, err, errlen) < 0)
        return -1;
    return 1;
}

static int load_buffer(struct kc_set *s, const char *name, const char *text, size_t len,
                       int inline_only, char *err, size_t errlen)
{
    struct kc_file *f = set_add(s, name);
    if (!f)
        return kc_nomem(err, errlen);
    f->inline_only = inline_only;
    struct buf why = BUF_INIT;
    if (yaml_said(yaml_load(name, text, len, &f->doc, &why), &why, err, errlen) < 0)
        return -1;
    return check_file(f, err, errlen);
}

/* "a, b" for messages. */
static char *file_list(const struct kc_set *s, const char *sep)
{
    size_t len = 1;
    for (size_t i = 0; i < s->n; i++)
        len += strlen(s->f[i].path) + strlen(sep);
    char *out = malloc(len);
    if (!out)
        return NULL;
    out[0] = '\0';
    for (size_t i = 0; i < s->n; i++) {
        if (i)
            strcat(out, sep);
        strcat(out, s->f[i].path);
    }
    return out;
}

/* First file wins across files; inside one file the last entry wins, as in
 * client-go (which turns each file's list into a map before merging). */
static const cJSON *find_named(const struct kc_set *s, const char *list, const char *body,
                               const char *name, const struct kc_file **from,
                               const cJSON **entry)
{
    for (size_t i = 0; i < s->n; i++) {
        const cJSON *found = NULL;
        const cJSON *l = kc_get(s->f[i].doc.root, list);
        for (const cJSON *e = l ? l->child : NULL; e; e = e->next) {
            const cJSON *n = kc_get(e, "name");
            if (cJSON_IsString(n) && !strcmp(n->valuestring, name))
                found = e;
        }
        if (found) {
            *from = &s->f[i];
            *entry = found;
            return kc_get(found, body);   /* may be NULL: an entry with no body */
        }
    }
    *from = NULL;
    *entry = NULL;
    return NULL;
}

static int resolve_set(const struct kc_set *s, const char *want_ctx, struct kube_config *out,
                       char *err, size_t errlen)
{
    const char *ctxname = want_ctx && *want_ctx ? want_ctx : NULL;
    char *files = file_list(s, ", ");
    char what[160];

    if (!files)
        return kc_nomem(err, errlen);
    for (size_t i = 0; !ctxname && i < s->n; i++) {
        const cJSON *cc = kc_get(s->f[i].doc.root, "current-context");
        if (cJSON_IsString(cc) && cc->valuestring[0])
            ctxname = cc->valuestring;
    }
    if (!ctxname) {
        kc_fail(err, errlen, "no context: current-context is not set in %s and --context was not given",
             files);
        goto out;
    }

    const struct kc_file *cf;
    const cJSON *ctxentry;
    const cJSON *ctx = find_named(s, "contexts", "context", ctxname, &cf, &ctxentry);
    if (!cf) {
        kc_fail(err, errlen, "context \"%.100s\" not found in %s", ctxname, files);
        goto out;
    }
    snprintf(what, sizeof what, "context \"%.100s\"", ctxname);
    struct field_ctx c = { cf, ctxentry, ctx, what, err, errlen };
    const char *cluster, *user, *ns;
    if (kc_field_str(&c, "cluster", &cluster) < 0 || kc_field_str(&c, "user", &user) < 0 ||
        kc_field_str(&c, "namespace", &ns) < 0)
        goto out;
    if (!cluster || !user) {
        kc_fail(err, errlen, "context \"%.100s\" in %s has no %s", ctxname, cf->path,
             !cluster ? "cluster" : "user");
        goto out;
    }
    if (kc_dup_into(&out->context, ctxname, err, errlen) < 0 ||
        kc_dup_into(&out->cluster, cluster, err, errlen) < 0 ||
        kc_dup_into(&out->user, user, err, errlen) < 0 ||
        kc_dup_into(&out->namespace, ns, err, errlen) < 0)
        goto out;

    const struct kc_file *clf, *uf;
    const cJSON *clentry, *uentry;
    const cJSON *clbody = find_named(s, "clusters", "cluster", cluster, &clf, &clentry);
    if (!clf) {
        kc_fail(err, errlen, "cluster \"%.100s\" of context \"%.100s\" not found in %s", cluster,
             ctxname, files);
        goto out;
    }
    const cJSON *ubody = find_named(s, "users", "user", user, &uf, &uentry);
    if (!uf) {
        kc_fail(err, errlen, "user \"%.100s\" of context \"%.100s\" not found in %s", user, ctxname,
             files);
        goto out;
    }

    snprintf(what, sizeof what, "cluster \"%.100s\"", cluster);
    struct field_ctx cc = { clf, clentry, clbody, what, err, errlen };
    if (kc_read_cluster(&cc, out) < 0)
        goto out;
    snprintf(what, sizeof what, "user \"%.100s\"", user);
    struct field_ctx uc = { uf, uentry, ubody, what, err, errlen };
    if (kc_read_user(&uc, user, out) < 0)
        goto out;

    free(files);
    if (!(out->source = file_list(s, ":")))
        return kc_nomem(err, errlen);
    return 0;
out:
    free(files);
    return -1;
}

/* ---------- in-cluster ---------- */

static int in_cluster(const struct kube_config_opts *o, const char *host, const char *port,
                      struct kube_config *out, char *err, size_t errlen)
{
    const char *envdir = getenv("COZY_SERVICEACCOUNT_DIR");
    char *dir = NULL;
    int rc = -1, e;

    if (o->context && *o->context)
        return kc_fail(err, errlen, "--context \"%.100s\" needs a kubeconfig, but none was found "
                    "and in-cluster credentials have no contexts", o->context);
    if (strspn(port, "0123456789") != strlen(port) || strlen(port) > 5)
        return kc_fail(err, errlen, "in-cluster: KUBERNETES_SERVICE_PORT \"%.20s\" is not a port",
                    port);
    if (!(dir = kc_abs_path(NULL, envdir && *envdir ? envdir : SA_DIR_DEFAULT)))
        return kc_nomem(err, errlen);

    size_t slen = strlen(host) + strlen(port) + 16;
    if (!(out->server = malloc(slen)))
        goto oom;
    /* An IPv6 literal needs brackets to keep its colons apart from the port. */
    snprintf(out->server, slen, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host, port);

    if (!(out->token_file = join_path(dir, "token")))
        goto oom;
    if ((e = kc_readable(out->token_file))) {
        kc_fail(err, errlen, "in-cluster: service account token %s: %s", out->token_file, strerror(e));
        goto out;
    }
    /* client-go carries on with the system roots when ca.crt is missing. */
    if (!(out->ca_file = join_path(dir, "ca.crt")))
        goto oom;
    if (kc_readable(out->ca_file)) {
        free(out->ca_file);
        out->ca_file = NULL;
    }

    char *nsfile = join_path(dir, "namespace");
    if (!nsfile)
        goto oom;
    FILE *fp = fopen(nsfile, "r");
    if (!fp && errno != ENOENT) {
        kc_fail(err, errlen, "in-cluster: %s: %s", nsfile, strerror(errno));
        free(nsfile);
        goto out;
    }
    free(nsfile);
    if (fp) {
        char buf[256];
        size_t n = fread(buf, 1, sizeof buf - 1, fp);
        fclose(fp);
        buf[n] = '\0';
        char *a = buf, *b = buf + n;
        while (*a && strchr(" \t\r\n", *a))
            a++;
        while (b > a && strchr(" \t\r\n", b[-1]))
            *--b = '\0';
        if (*a && !(out->namespace = strdup(a)))
            goto oom;
    }
    if (!(out->source = strdup("in-cluster")))
        goto oom;
    out->in_cluster = 1;
    rc = 0;
    goto out;
oom:
    kc_nomem(err, errlen);
out:
    free(dir);
    return rc;
}

/* ---------- entry points ---------- */

static const char no_config[] = "no kubeconfig: set --kubeconfig or KUBECONFIG, or run in a cluster";

static int resolve(const struct kube_config_opts *o, struct kube_config *out, char *err,
                   size_t errlen)
{
    struct kc_set s = { 0 };
    const char *env = getenv("KUBECONFIG");
    const char *why = "";
    int rc = -1;

    if (o->kubeconfig && *o->kubeconfig) {
        if (load_file(&s, o->kubeconfig, 1, err, errlen) < 0)
            goto out;
        rc = resolve_set(&s, o->context, out, err, errlen);
        goto out;
    }
    if (env && *env) {
        char *list = strdup(env), *save = NULL;
        if (!list) {
            kc_nomem(err, errlen);
            goto out;
        }
        /* strtok_r skips empty entries, as client-go does. */
        for (char *p = strtok_r(list, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
            if (load_file(&s, p, 0, err, errlen) < 0) {
                free(list);
                goto out;
            }
        }
        free(list);
        if (s.n) {
            rc = resolve_set(&s, o->context, out, err, errlen);
            goto out;
        }
        /* Set but naming no existing file: like client-go, an empty config,
         * which may still fall back to in-cluster, never to ~/.kube/config. */
        why = " (no file named in KUBECONFIG exists)";
    }
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (host && *host && port && *port) {
        if (!o->local) {
            rc = in_cluster(o, host, port, out, err, errlen);
            goto out;
        }
        if (!*why)
            why = " (--local never uses in-cluster credentials)";
    }
    if (!(env && *env)) {
        const char *home = getenv("HOME");
        if (home && *home) {
            char *path = join_path(home, ".kube/config");
            if (!path) {
                kc_nomem(err, errlen);
                goto out;
            }
            int r = load_file(&s, path, 0, err, errlen);
            free(path);
            if (r < 0)
                goto out;
            if (r > 0) {
                rc = resolve_set(&s, o->context, out, err, errlen);
                goto out;
            }
        }
    }
    kc_fail(err, errlen, "%s%s", no_config, why);
out:
    set_free(&s);
    return rc;
}

int kubeconfig_resolve(const struct kube_config_opts *o, struct kube_config *out, char *err,
                       size_t errlen)
{
    static const struct kube_config_opts none = { 0 };
    memset(out, 0, sizeof *out);
    if (err && errlen)
        err[0] = '\0';
    int rc = resolve(o ? o : &none, out, err, errlen);
    if (rc < 0)
        kubeconfig_free(out);
    return rc;
}

static int resolve_buffer(const char *name, const char *text, size_t len, const char *context,
                          int inline_only, struct kube_config *out, char *err, size_t errlen)
{
    struct kc_set s = { 0 };
    memset(out, 0, sizeof *out);
    if (err && errlen)
        err[0] = '\0';
    int rc = load_buffer(&s, name, text, len, inline_only, err, errlen);
    if (rc == 0)
        rc = resolve_set(&s, context, out, err, errlen);
    set_free(&s);
    if (rc < 0)
        kubeconfig_free(out);
    return rc;
}

int kubeconfig_resolve_buffer(const char *name, const char *text, size_t len, const char *context,
                              struct kube_config *out, char *err, size_t errlen)
{
    return resolve_buffer(name, text, len, context, 0, out, err, errlen);
}

int kubeconfig_resolve_inline(const char *name, const char *text, size_t len,
                              struct kube_config *out, char *err, size_t errlen)
{
    return resolve_buffer(name, text, len, NULL, 1, out, err, errlen);
}

static void free_secret(char *p, size_t n)
{
    if (!p)
        return;
    OPENSSL_cleanse(p, n);
    free(p);
}

void kubeconfig_free(struct kube_config *c)
{
    if (!c)
        return;
    free(c->server);
    free_secret(c->ca_pem, c->ca_len);
    free(c->ca_file);
    free_secret(c->cert_pem, c->cert_len);
    free(c->cert_file);
    free_secret(c->key_pem, c->key_len);
    free(c->key_file);
    free_secret(c->token, c->token ? strlen(c->token) : 0);
    free(c->token_file);
    free(c->tls_server_name);
    free(c->proxy_url);
    free(c->namespace);
    free(c->context);
    free(c->cluster);
    free(c->user);
    free(c->source);
    memset(c, 0, sizeof *c);
}

static int add_str(cJSON *o, const char *k, const char *v)
{
    cJSON *item = v ? cJSON_CreateString(v) : cJSON_CreateNull();
    if (!item)
        return -1;
    if (!cJSON_AddItemToObject(o, k, item)) {
        cJSON_Delete(item);
        return -1;
    }
    return 0;
}

cJSON *kubeconfig_describe(const struct kube_config *c)
{
    cJSON *o = cJSON_CreateObject();
    if (!o || !c)
        goto fail;
    /* client-go's transport lets the token file override the inline token. */
    const char *auth = c->token_file ? "token-file"
                     : c->token ? "token"
                     : (c->cert_pem || c->cert_file) ? "client-certificate"
                     : "none";
    const char *ca = c->ca_pem ? "data" : c->ca_file ? "file" : "system";
    if (add_str(o, "source", c->source) < 0 || add_str(o, "server", c->server) < 0 ||
        add_str(o, "context", c->context) < 0 || add_str(o, "cluster", c->cluster) < 0 ||
        add_str(o, "user", c->user) < 0 || add_str(o, "namespace", c->namespace) < 0 ||
        add_str(o, "auth", auth) < 0 || add_str(o, "ca", ca) < 0)
        goto fail;
    cJSON *ins = cJSON_CreateBool(c->insecure);
    if (!ins || !cJSON_AddItemToObject(o, "insecure", ins)) {
        cJSON_Delete(ins);
        goto fail;
    }
    /* A proxy URL may carry a password: its user part is not shown. */
    char proxy[512] = "";
    if (c->proxy_url) {
        const char *at = strchr(c->proxy_url, '@'), *sep = strstr(c->proxy_url, "://");
        if (at && sep && at > sep)
            snprintf(proxy, sizeof proxy, "%.*s://***@%s", (int)(sep - c->proxy_url), c->proxy_url,
                     at + 1);
        else
            snprintf(proxy, sizeof proxy, "%s", c->proxy_url);
    }
    if (add_str(o, "tls_server_name", c->tls_server_name) < 0 ||
        add_str(o, "proxy_url", c->proxy_url ? proxy : NULL) < 0 ||
        add_str(o, "ca_file", c->ca_file) < 0 || add_str(o, "cert_file", c->cert_file) < 0 ||
        add_str(o, "key_file", c->key_file) < 0 || add_str(o, "token_file", c->token_file) < 0)
        goto fail;
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

/* ---------- who it acts as ---------- */

/* A token file's text (at most 64 KiB), NUL-terminated; NULL when unreadable. */
static char *read_small(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return NULL;
    char *buf = malloc(65536 + 1);
    ssize_t n = buf ? read(fd, buf, 65536) : -1;
    close(fd);
    if (n < 0) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    while (n > 0 && strchr(" \t\r\n", buf[n - 1]))
        buf[--n] = '\0';
    return buf;
}

/* The `sub` claim of a JWT (a service account token), or "" when it is none. */
static void jwt_subject(const char *tok, char *out, size_t len)
{
    out[0] = '\0';
    const char *a = strchr(tok, '.'), *b = a ? strchr(a + 1, '.') : NULL;
    if (!a || !b || b - a - 1 <= 0 || b - a - 1 > 8192)
        return;
    size_t n = (size_t)(b - a - 1);
    char *s = malloc(n + 4);
    if (!s)
        return;
    for (size_t i = 0; i < n; i++)
        s[i] = a[1 + i] == '-' ? '+' : a[1 + i] == '_' ? '/' : a[1 + i];
    while (n % 4)
        s[n++] = '=';
    s[n] = '\0';
    char *dec = NULL;
    size_t dlen = 0;
    if (kc_b64_decode(s, &dec, &dlen) == 0) {
        cJSON *j = cJSON_ParseWithLength(dec, dlen);
        const cJSON *sub = cJSON_GetObjectItemCaseSensitive(j, "sub");
        if (cJSON_IsString(sub))
            snprintf(out, len, "%s", sub->valuestring);
        cJSON_Delete(j);
        free(dec);
    }
    free(s);
}

void kubeconfig_identity(const struct kube_config *c, char *buf, size_t len)
{
    if (!c->in_cluster) {
        snprintf(buf, len, "%s (context %s)", c->user ? c->user : "?",
                 c->context ? c->context : "?");
        return;
    }
    char sub[256] = "";
    const char *tok = c->token;
    char *file = NULL;
    if (!tok && c->token_file && (file = read_small(c->token_file)))
        tok = file;
    if (tok)
        jwt_subject(tok, sub, sizeof sub);
    if (file) {
        OPENSSL_cleanse(file, strlen(file));
        free(file);
    }
    if (*sub)
        snprintf(buf, len, "%s", sub);
    else
        snprintf(buf, len, "the in-cluster service account%s%s", c->namespace ? " of namespace " : "",
                 c->namespace ? c->namespace : "");
}

/* kubeconfig.h: where the engine finds its cluster and how it proves who it
 * is. Owns resolving a kubeconfig the way client-go does (--kubeconfig,
 * KUBECONFIG merge, ~/.kube/config, --context) and the in-cluster service
 * account. Reads files; never opens a connection. */
#ifndef COZY_KUBECONFIG_H
#define COZY_KUBECONFIG_H
#include <cjson/cJSON.h>
#include <stddef.h>

struct kube_config {
    char *server;                       /* https://host:port, no trailing / */
    char *ca_pem;  size_t ca_len;       /* certificate-authority-data, decoded */
    char *ca_file;                      /* absolute path */
    char *cert_pem; size_t cert_len;    /* client-certificate-data, decoded */
    char *cert_file;
    char *key_pem; size_t key_len;      /* client-key-data, decoded */
    char *key_file;
    char *token;                        /* users[].user.token */
    char *token_file;                   /* tokenFile, or the service account's token */
    int insecure;                       /* insecure-skip-tls-verify */
    char *tls_server_name;
    char *proxy_url;                    /* proxy-url: every request goes through it (as
                                         * client-go: the environment's proxies then do not) */
    char *namespace;                    /* context namespace / in-cluster ns; NULL = unset */
    char *context, *cluster, *user;     /* names, for messages; NULL in-cluster */
    char *source;                       /* file(s) it came from, or "in-cluster" */
    int in_cluster;
};

struct kube_config_opts {
    const char *kubeconfig;     /* --kubeconfig: exactly this one file */
    const char *context;        /* --context */
    int local;                  /* --local: never fall back to in-cluster */
};

/* Resolution order: --kubeconfig; else KUBECONFIG (colon-separated, missing
 * files skipped, first file to set a value wins, relative paths resolved
 * against the file that defines them); else in-cluster when
 * KUBERNETES_SERVICE_HOST is set and !local; else ~/.kube/config.
 * In-cluster reads COZY_SERVICEACCOUNT_DIR (default
 * /var/run/secrets/kubernetes.io/serviceaccount): token, ca.crt, namespace.
 * Returns 0, or -1 with a one-line message in err naming the file and line,
 * the context or the user (an exec / auth-provider user is "not supported").
 * Refused as kubectl refuses them: a name given twice in one list,
 * insecure-skip-tls-verify beside a CA. Refused before any connection: a
 * server that is not an http(s) URL with a host, a proxy-url that is not
 * http, https or socks5, CA data or a client certificate that holds no PEM
 * certificate, a key that is no PEM key or not the certificate's. */
int kubeconfig_resolve(const struct kube_config_opts *o, struct kube_config *out,
                       char *err, size_t errlen);
void kubeconfig_free(struct kube_config *c);

/* What `cozy-migrate config` prints: source, server, context, cluster, user,
 * namespace, auth ("token", "token-file", "client-certificate", "none"),
 * ca ("data", "file", "system"), insecure, tls_server_name, proxy_url. No
 * secrets. */
cJSON *kubeconfig_describe(const struct kube_config *c);

/* Also in the description: ca_file, cert_file, key_file, token_file (the
 * absolute paths in use, or null); paths are not secrets and show which file
 * a relative path resolved to. */

/* For fuzzing (and tests): resolves `text` as the only kubeconfig file, named
 * `name` in messages; relative paths resolve against the directory of `name`.
 * `context` may be NULL (current-context). Same results as kubeconfig_resolve. */
int kubeconfig_resolve_buffer(const char *name, const char *text, size_t len,
                              const char *context, struct kube_config *out,
                              char *err, size_t errlen);

/* A kubeconfig held in a Secret (secret: the object as the apiserver
 * returns it; its data[key], base64) resolved in memory at its
 * current-context: what names the Secret in messages (e.g. "Secret NS/NAME").
 * Refused besides what kubeconfig_resolve refuses: a missing key, data that
 * is not base64, and any file path (CA, certificate, key, token file): a
 * Secret's kubeconfig carries its credentials inline, and the runner's
 * files are never read for it. 0, or -1 with one line in err (no secret
 * material). kubeconfig_secret.c. */
int kubeconfig_from_secret(const cJSON *secret, const char *what, const char *key,
                           struct kube_config *out, char *err, size_t errlen);

/* kubeconfig_resolve_buffer at the current context, for a kubeconfig that
 * is no file of this machine (a Secret's): every credential must be
 * inline; a path field (certificate-authority, client-certificate,
 * client-key, tokenFile) is refused with its line, and no file is ever
 * read for it. */
int kubeconfig_resolve_inline(const char *name, const char *text, size_t len,
                              struct kube_config *out, char *err, size_t errlen);

/* Who the config acts as, for records: "USER (context CONTEXT)", or
 * in-cluster the service account ("system:serviceaccount:NS:NAME" from its
 * token, or "the in-cluster service account of namespace NS"). */
void kubeconfig_identity(const struct kube_config *c, char *buf, size_t len);
#endif

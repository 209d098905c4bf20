/* kubeconfig_fields.c: one cluster and one user of a kubeconfig, read into
 * struct kube_config the way client-go reads them: strings and booleans
 * typed, inline data base64-decoded, files resolved against the kubeconfig
 * that names them and checked readable, the server and proxy URLs checked,
 * CA and client certificates holding PEM certificates, a key that is the
 * certificate's; an exec or auth-provider user is "not supported". Every
 * message names the file and the line. File selection, merging and the
 * contexts are kubeconfig.c's.
 * Prefixes: kc_ (kubeconfig_int.h's short prefix). */
#include "client/kubeconfig_int.h"

#include <errno.h>
#include <fcntl.h>
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

int kc_field_str(const struct field_ctx *c, const char *key, const char **out)
{
    const cJSON *v = kc_get(c->body, key);
    *out = NULL;
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsString(v))
        return kc_fail(c->err, c->errlen, "%s:%d: %s: %s must be a string", c->f->path,
                    kc_line_of(c->f, v), c->what, key);
    if (v->valuestring[0])
        *out = v->valuestring;
    return 0;
}

static int field_bool(const struct field_ctx *c, const char *key, int *out)
{
    const cJSON *v = kc_get(c->body, key);
    *out = 0;
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsBool(v))
        return kc_fail(c->err, c->errlen, "%s:%d: %s: %s must be true or false", c->f->path,
                    kc_line_of(c->f, v), c->what, key);
    *out = cJSON_IsTrue(v);
    return 0;
}

static int line_of_key(const struct field_ctx *c, const char *key)
{
    const cJSON *v = kc_get(c->body, key);
    return kc_line_of(c->f, v ? v : c->body ? c->body : c->entry);
}

/* Standard base64 with padding, whitespace ignored (YAML folds long plain
 * scalars with spaces). EVP_DecodeBlock alone accepts '=' mid-text and
 * counts padding as data, so the shape is checked and the length fixed here. */
int kc_b64_decode(const char *in, char **out, size_t *outlen)
{
    size_t n = 0, len = strlen(in), pad = 0;
    unsigned char *clean = malloc(len + 1);
    if (!clean)
        return -2;
    for (size_t i = 0; i < len; i++)
        if (!strchr(" \t\r\n", in[i]))
            clean[n++] = (unsigned char)in[i];
    clean[n] = '\0';
    int ok = n > 0 && n % 4 == 0 && n <= 0x7fffffff;
    for (size_t i = 0; ok && i < n; i++) {
        unsigned char ch = clean[i];
        if (ch == '=') {
            if (i < n - 2 || (i == n - 2 && clean[n - 1] != '='))
                ok = 0;
            else
                pad++;
        } else if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                     (ch >= '0' && ch <= '9') || ch == '+' || ch == '/')) {
            ok = 0;
        }
    }
    if (!ok) {
        free(clean);
        return -1;
    }
    unsigned char *buf = malloc(n / 4 * 3 + 1);
    if (!buf) {
        free(clean);
        return -2;
    }
    int got = EVP_DecodeBlock(buf, clean, (int)n);
    free(clean);
    if (got < 0 || (size_t)got < pad) {
        free(buf);
        return -1;
    }
    *outlen = (size_t)got - pad;
    buf[*outlen] = '\0';
    *out = (char *)buf;
    return 0;
}

static int field_data(const struct field_ctx *c, const char *key, char **out, size_t *outlen)
{
    const char *s;
    *out = NULL;
    *outlen = 0;
    if (kc_field_str(c, key, &s) < 0)
        return -1;
    if (!s)
        return 0;
    int rc = kc_b64_decode(s, out, outlen);
    if (rc == -2)
        return kc_nomem(c->err, c->errlen);
    if (rc < 0)
        return kc_fail(c->err, c->errlen, "%s:%d: %s: %s is not valid base64", c->f->path,
                    line_of_key(c, key), c->what, key);
    return 0;
}

/* A path field, made absolute against the defining file's directory and
 * checked now, so a typo fails here rather than at the first request. */
static int field_file(const struct field_ctx *c, const char *key, char **out)
{
    const char *s;
    *out = NULL;
    if (kc_field_str(c, key, &s) < 0)
        return -1;
    if (!s)
        return 0;
    if (c->f->inline_only)
        return kc_fail(c->err, c->errlen, "%s:%d: %s: %s names a file; this kubeconfig must carry "
                       "its credentials inline (certificate-authority-data, client-certificate-data, "
                       "client-key-data, token), and no file is read for it", c->f->path,
                       line_of_key(c, key), c->what, key);
    char *p = kc_abs_path(c->f->dir, s);
    if (!p)
        return kc_nomem(c->err, c->errlen);
    int e = kc_readable(p);
    if (e) {
        kc_fail(c->err, c->errlen, "%s:%d: %s: %s %s: %s", c->f->path, line_of_key(c, key), c->what,
             key, p, strerror(e));
        free(p);
        return -1;
    }
    *out = p;
    return 0;
}

int kc_dup_into(char **dst, const char *src, char *err, size_t errlen)
{
    *dst = NULL;
    if (!src)
        return 0;
    if (!(*dst = strdup(src)))
        return kc_nomem(err, errlen);
    return 0;
}

/* A URL with one of the schemes (space-separated) and a host, parsed by
 * libcurl's own URL parser. NULL when it is one, else why not. */
static const char *url_problem(const char *url, const char *schemes, char *why, size_t len)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL;
    const char *res = NULL;
    if (!u) {
        snprintf(why, len, "out of memory");
        return why;
    }
    CURLUcode uc = curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME);
    if (uc != CURLUE_OK) {
        snprintf(why, len, "%s", curl_url_strerror(uc));
        res = why;
    } else if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
               curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !*host) {
        snprintf(why, len, "it names no host");
        res = why;
    } else {
        char list[64];
        snprintf(list, sizeof list, " %s ", schemes);
        char want[40];
        snprintf(want, sizeof want, " %s ", scheme);
        if (!strstr(list, want)) {
            snprintf(why, len, "the scheme is %s, not %s", scheme, schemes);
            res = why;
        }
    }
    curl_free(scheme);
    curl_free(host);
    curl_url_cleanup(u);
    return res;
}

/* PEM text (len bytes) or, with file set, the file it names: how many
 * certificates (want_key 0) or whether a private key (want_key 1) it holds.
 * -1 when it cannot be read or parsed as PEM at all. */
static int pem_count(const char *data, size_t len, const char *file, int want_key, X509 **first,
                     EVP_PKEY **key)
{
    size_t flen = 0;
    char *text = NULL;
    if (file) {
        int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 22) ||
            !(text = malloc((size_t)st.st_size + 1)) ||
            read(fd, text, (size_t)st.st_size) != (ssize_t)st.st_size) {
            if (fd >= 0)
                close(fd);
            free(text);
            return -1;
        }
        close(fd);
        flen = (size_t)st.st_size;
        data = text;
        len = flen;
    }
    BIO *bio = BIO_new_mem_buf(data, (int)len);
    int n = -1;
    if (bio && want_key) {
        EVP_PKEY *k = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
        n = k ? 1 : 0;
        if (k && key)
            *key = k;
        else
            EVP_PKEY_free(k);
    } else if (bio) {
        n = 0;
        for (X509 *x; (x = PEM_read_bio_X509(bio, NULL, NULL, NULL)); n++) {
            if (n == 0 && first)
                *first = x;
            else
                X509_free(x);
        }
    }
    BIO_free(bio);
    if (text) {
        OPENSSL_cleanse(text, flen);
        free(text);
    }
    return n;
}

int kc_read_cluster(const struct field_ctx *c, struct kube_config *out)
{
    const char *server, *tls_name;
    if (kc_field_str(c, "server", &server) < 0 || kc_field_str(c, "tls-server-name", &tls_name) < 0 ||
        field_bool(c, "insecure-skip-tls-verify", &out->insecure) < 0)
        return -1;
    if (!server)
        return kc_fail(c->err, c->errlen, "%s:%d: %s has no server", c->f->path,
                    line_of_key(c, "server"), c->what);
    if (kc_dup_into(&out->server, server, c->err, c->errlen) < 0 ||
        kc_dup_into(&out->tls_server_name, tls_name, c->err, c->errlen) < 0)
        return -1;
    size_t n = strlen(out->server);
    while (n > 0 && out->server[n - 1] == '/')
        out->server[--n] = '\0';
    if (!n)
        return kc_fail(c->err, c->errlen, "%s:%d: %s has no server", c->f->path,
                    line_of_key(c, "server"), c->what);
    char why[200];
    if (url_problem(out->server, "https http", why, sizeof why))
        return kc_fail(c->err, c->errlen, "%s:%d: %s: server \"%.200s\" is not a URL like "
                    "https://host:6443 (%s)", c->f->path, line_of_key(c, "server"), c->what,
                    out->server, why);
    const char *proxy;
    if (kc_field_str(c, "proxy-url", &proxy) < 0)
        return -1;
    if (proxy && url_problem(proxy, "http https socks5", why, sizeof why))
        return kc_fail(c->err, c->errlen, "%s:%d: %s: proxy-url \"%.200s\" is not a proxy URL "
                    "like http://proxy:3128 (%s)", c->f->path, line_of_key(c, "proxy-url"),
                    c->what, proxy, why);
    if (kc_dup_into(&out->proxy_url, proxy, c->err, c->errlen) < 0)
        return -1;
    if (field_data(c, "certificate-authority-data", &out->ca_pem, &out->ca_len) < 0)
        return -1;
    /* client-go: the inline data overrides the file; keep only what is used. */
    if (!out->ca_pem && field_file(c, "certificate-authority", &out->ca_file) < 0)
        return -1;
    const char *ca_key = out->ca_pem ? "certificate-authority-data" : "certificate-authority";
    if ((out->ca_pem || out->ca_file) && out->insecure)
        return kc_fail(c->err, c->errlen, "%s:%d: %s: insecure-skip-tls-verify beside %s: a CA "
                    "that is never checked; kubectl refuses the pair too, so keep one",
                    c->f->path, line_of_key(c, "insecure-skip-tls-verify"), c->what, ca_key);
    if ((out->ca_pem || out->ca_file) &&
        pem_count(out->ca_pem, out->ca_len, out->ca_pem ? NULL : out->ca_file, 0, NULL, NULL) < 1)
        return kc_fail(c->err, c->errlen, "%s:%d: %s: %s%s%s holds no PEM certificate", c->f->path,
                    line_of_key(c, ca_key), c->what, ca_key, out->ca_pem ? "" : " ",
                    out->ca_pem ? "" : out->ca_file);
    return 0;
}

int kc_read_user(const struct field_ctx *c, const char *name, struct kube_config *out)
{
    static const struct { const char *key, *what; } unsupported[] = {
        { "exec", "exec credential plugins are" },
        { "auth-provider", "auth-provider plugins are" },
        { "username", "basic auth (username/password) is" },
        { "password", "basic auth (username/password) is" },
        /* Dropping impersonation would act with the caller's own rights. */
        { "as", "impersonation (as) is" },
        { "as-uid", "impersonation (as-uid) is" },
        { "as-groups", "impersonation (as-groups) is" },
        { "as-user-extra", "impersonation (as-user-extra) is" },
    };
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++) {
        const cJSON *v = kc_get(c->body, unsupported[i].key);
        if (v && !cJSON_IsNull(v))
            return kc_fail(c->err, c->errlen, "user \"%.100s\" in %s: %s not supported", name,
                        c->f->path, unsupported[i].what);
    }
    const char *token;
    if (kc_field_str(c, "token", &token) < 0 || kc_dup_into(&out->token, token, c->err, c->errlen) < 0)
        return -1;
    if (field_file(c, "tokenFile", &out->token_file) < 0)
        return -1;
    if (field_data(c, "client-certificate-data", &out->cert_pem, &out->cert_len) < 0)
        return -1;
    if (!out->cert_pem && field_file(c, "client-certificate", &out->cert_file) < 0)
        return -1;
    if (field_data(c, "client-key-data", &out->key_pem, &out->key_len) < 0)
        return -1;
    if (!out->key_pem && field_file(c, "client-key", &out->key_file) < 0)
        return -1;
    int has_cert = out->cert_pem || out->cert_file, has_key = out->key_pem || out->key_file;
    if (has_cert != has_key)
        return kc_fail(c->err, c->errlen, "%s:%d: %s has a client %s but no client %s", c->f->path,
                    kc_line_of(c->f, c->body ? c->body : c->entry), c->what, has_cert ? "certificate" : "key",
                    has_cert ? "key" : "certificate");
    if (!has_cert)
        return 0;
    /* Read now, so a certificate or key that TLS would refuse is named
     * here, with its field, not in OpenSSL's words at the first request. */
    const char *ck = out->cert_pem ? "client-certificate-data" : "client-certificate";
    const char *kk = out->key_pem ? "client-key-data" : "client-key";
    X509 *cert = NULL;
    EVP_PKEY *key = NULL;
    int rc = 0;
    if (pem_count(out->cert_pem, out->cert_len, out->cert_pem ? NULL : out->cert_file, 0, &cert,
                  NULL) < 1)
        rc = kc_fail(c->err, c->errlen, "%s:%d: %s: %s holds no PEM certificate", c->f->path,
                  line_of_key(c, ck), c->what, ck);
    else if (pem_count(out->key_pem, out->key_len, out->key_pem ? NULL : out->key_file, 1, NULL,
                       &key) < 1)
        rc = kc_fail(c->err, c->errlen, "%s:%d: %s: %s holds no PEM private key (unencrypted)",
                  c->f->path, line_of_key(c, kk), c->what, kk);
    else if (X509_check_private_key(cert, key) != 1)
        rc = kc_fail(c->err, c->errlen, "%s:%d: %s: %s is not the key of %s", c->f->path,
                  line_of_key(c, kk), c->what, kk, ck);
    X509_free(cert);
    EVP_PKEY_free(key);
    return rc;
}

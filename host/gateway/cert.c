/* cert.c: the credentials of one gateway (see gateway.h): its bearer
 * token, and the TLS key and self-signed certificate it serves on
 * 127.0.0.1 (kubectl, as client-go, sends a bearer token only over TLS).
 * Owns making them fresh for each migration (an EC P-256 key, a
 * certificate for the IP 127.0.0.1 valid for a day, which the private
 * kubeconfig carries as its certificate authority) and wiping them. Must
 * never leave the key or the token in memory it frees. */
#include "gateway/gateway.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

/* The PEM text of what write wrote into a memory BIO, malloc'd. */
static char *bio_text(BIO *b)
{
    char *data = NULL;
    long n = BIO_get_mem_data(b, &data);
    char *out = n > 0 ? malloc((size_t)n + 1) : NULL;
    if (out) {
        memcpy(out, data, (size_t)n);
        out[n] = '\0';
    }
    return out;
}

static int add_ext(X509 *x, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    int ok = e && X509_add_ext(x, e, -1) == 1;
    X509_EXTENSION_free(e);
    return ok;
}

int gateway_cred_new(struct gateway_cred *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    unsigned char raw[GATEWAY_TOKEN_LEN / 2];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
        snprintf(err, errlen, "the runner's gateway has no randomness for its token");
        return -1;
    }
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof raw; i++) {
        c->token[2 * i] = hex[raw[i] >> 4];
        c->token[2 * i + 1] = hex[raw[i] & 15];
    }
    OPENSSL_cleanse(raw, sizeof raw);
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    BIO *kb = BIO_new(BIO_s_mem()), *cb = BIO_new(BIO_s_mem());
    X509_NAME *name = x ? X509_get_subject_name(x) : NULL;
    int ok = key && x && kb && cb && name && X509_set_version(x, 2) &&
             ASN1_INTEGER_set(X509_get_serialNumber(x), (long)time(NULL)) &&
             X509_gmtime_adj(X509_getm_notBefore(x), -300) &&
             X509_gmtime_adj(X509_getm_notAfter(x), 24 * 3600) &&
             X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                        (const unsigned char *)"cozy-migrate gateway", -1, -1,
                                        0) &&
             X509_set_issuer_name(x, name) && X509_set_pubkey(x, key) &&
             add_ext(x, NID_basic_constraints, "critical,CA:TRUE") &&
             add_ext(x, NID_key_usage, "critical,digitalSignature,keyCertSign") &&
             add_ext(x, NID_subject_alt_name, "IP:127.0.0.1") &&
             X509_sign(x, key, EVP_sha256()) > 0 &&
             PEM_write_bio_PrivateKey(kb, key, NULL, NULL, 0, NULL, NULL) &&
             PEM_write_bio_X509(cb, x) && (c->key_pem = bio_text(kb)) && (c->cert_pem = bio_text(cb));
    /* the key's text in the BIO is wiped with it */
    char *kdata = NULL;
    long kn = kb ? BIO_get_mem_data(kb, &kdata) : 0;
    if (kn > 0)
        OPENSSL_cleanse(kdata, (size_t)kn);
    BIO_free(kb);
    BIO_free(cb);
    X509_free(x);
    EVP_PKEY_free(key);
    if (!ok) {
        gateway_cred_free(c);
        snprintf(err, errlen, "the runner's gateway cannot make its TLS certificate");
        return -1;
    }
    return 0;
}

void gateway_cred_free(struct gateway_cred *c)
{
    if (c->key_pem) {
        OPENSSL_cleanse(c->key_pem, strlen(c->key_pem));
        free(c->key_pem);
    }
    free(c->cert_pem);
    OPENSSL_cleanse(c->token, sizeof c->token);
    memset(c, 0, sizeof *c);
}

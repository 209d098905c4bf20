// sources: host/door/guard.c host/door/k8sproto.c host/formats/yamldoc.c host/formats/yaml11.c host/base/mem.c host/base/util.c host/base/buf.c
/* guard_fuzz.c: libFuzzer target for the ledger guard (host/door/guard.c), which
 * decides on every request a migration sends. Owns checking that any
 * method, path, body and content type gets a verdict, with one non-empty
 * line of why unless allowed; that the same request always gets the same
 * verdict; and, independently of guard.c, that no mutating request it
 * allows names the ledger ConfigMap, the runner Lease, their namespace
 * (the object or its status/finalize) or one of the runner's Events
 * (segments percent-decoded and compared without regard to case), no
 * allowed JSON create in the ledger's collection carries the ledger's name,
 * and in a dry run no allowed write asks for a token. Input: byte 0 picks
 * the method (its high bit: a dry run), byte 1 the content type, then the
 * path up to the first newline, then the body. Must never keep state. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "door/guard.h"

static const char *methods[] = {"GET", "POST", "PUT", "PATCH", "DELETE", "get", "OPTIONS"};
static const char *ctypes[] = {"application/json", "application/yaml", "application/merge-patch+json",
                               "application/apply-patch+yaml", "application/json-patch+json",
                               "text/plain", NULL, "application/vnd.kubernetes.protobuf"};

#define NS "cozy-system"
#define LEDGER "cozystack-version"
#define LEASE "cozystack-version-lock"

/* Splits a path into percent-decoded, lower-cased segments. */
static int segments(const char *path, char seg[16][256])
{
    int n = 0;
    const char *p = path;
    while (*p == '/')
        p++;
    while (*p && n < 16) {
        size_t len = 0;
        while (*p && *p != '/') {
            int c = (unsigned char)*p++;
            if (c == '%' && p[0] && p[1]) {
                char hex[3] = {p[0], p[1], 0};
                char *end;
                long v = strtol(hex, &end, 16);
                if (!*end) {
                    c = (int)v;
                    p += 2;
                }
            }
            if (len < 255)
                seg[n][len++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        }
        seg[n][len] = 0;
        n++;
        while (*p == '/')
            p++;
    }
    return n;
}

/* Whether a mutating request on path reaches what the guard protects. */
static int protected_path(const char *method, const char *path)
{
    char s[16][256];
    int n = segments(path, s);
    if (n >= 2 && !strcmp(s[0], "api")) {
        if (n == 4 && !strcmp(s[2], "namespaces") && !strcmp(s[3], NS))
            return 1;
        if (n == 5 && !strcmp(s[2], "namespaces") && !strcmp(s[3], NS) &&
            (!strcmp(s[4], "status") || !strcmp(s[4], "finalize")))
            return 1;
        if (n >= 6 && !strcmp(s[2], "namespaces") && !strcmp(s[3], NS) && !strcmp(s[4], "events") &&
            !strncmp(s[5], LEDGER ".", strlen(LEDGER) + 1))
            return 1;
        if (n >= 6 && !strcmp(s[2], "namespaces") && !strcmp(s[3], NS) && !strcmp(s[4], "configmaps") &&
            !strcmp(s[5], LEDGER))
            return 1;
    }
    if (n >= 7 && !strcmp(s[0], "apis") && !strcmp(s[1], "coordination.k8s.io") &&
        !strcmp(s[3], "namespaces") && !strcmp(s[4], NS) && !strcmp(s[5], "leases") &&
        !strcmp(s[6], LEASE))
        return 1;
    return 0;
}

/* A POST to the ledger's own collection whose JSON body names the ledger. */
static int creates_ledger(const char *path, const char *body, size_t len)
{
    char s[16][256];
    int n = segments(path, s);
    if (!(n == 5 && !strcmp(s[0], "api") && !strcmp(s[2], "namespaces") && !strcmp(s[3], NS) &&
          !strcmp(s[4], "configmaps")))
        return 0;
    cJSON *j = cJSON_ParseWithLength(body, len);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "metadata"), "name");
    int hit = cJSON_IsString(name) && !strcasecmp(name->valuestring, LEDGER);
    cJSON_Delete(j);
    return hit;
}

/* A write to a serviceaccount's token subresource. */
static int asks_token(const char *path)
{
    char s[16][256];
    int n = segments(path, s);
    return n == 7 && !strcmp(s[0], "api") && !strcmp(s[2], "namespaces") &&
           !strcmp(s[4], "serviceaccounts") && !strcmp(s[6], "token");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    const char *method = methods[(data[0] & 0x7f) % (sizeof methods / sizeof *methods)];
    int dry = (data[0] & 0x80) != 0;
    const char *ctype = ctypes[data[1] % (sizeof ctypes / sizeof *ctypes)];
    const char *rest = (const char *)data + 2;
    size_t len = size - 2;
    const char *nl = memchr(rest, '\n', len);
    size_t plen = nl ? (size_t)(nl - rest) : len;
    char *path = strndup(rest, plen);
    const char *body = nl ? nl + 1 : NULL;
    size_t blen = nl ? len - plen - 1 : 0;
    if (!path)
        return 0;
    struct guard_target t = {NS, LEDGER, LEASE, "cozy-migrate", dry};
    char why[512], why2[512];
    enum guard_verdict v = guard_check(&t, method, path, body, blen, ctype, why, sizeof why);
    if (v != GUARD_ALLOW && v != GUARD_PROTECTED && v != GUARD_BAD_PATH && v != GUARD_BAD_BODY &&
        v != GUARD_DRY_RUN && v != GUARD_UNREADABLE)
        abort();
    if (v == GUARD_DRY_RUN && !dry)
        abort();
    if (v != GUARD_ALLOW && (!why[0] || strchr(why, '\n')))
        abort();
    if (guard_check(&t, method, path, body, blen, ctype, why2, sizeof why2) != v)
        abort();
    if (!guard_verdict_name(v))
        abort();
    if (v == GUARD_ALLOW && strcmp(method, "GET") != 0) {
        if (protected_path(method, path)) {
            fprintf(stderr, "guard allowed %s %s\n", method, path);
            abort();
        }
        if (!strcasecmp(method, "POST") && body && ctype && strstr(ctype, "json") &&
            creates_ledger(path, body, blen)) {
            fprintf(stderr, "guard allowed a create of the ledger: %s %s\n", method, path);
            abort();
        }
        if (dry && asks_token(path)) {
            fprintf(stderr, "guard allowed a dry-run TokenRequest: %s %s\n", method, path);
            abort();
        }
    }
    free(path);
    return 0;
}

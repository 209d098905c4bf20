/* curlloop.c: the raw-API floor the kube module's benchmark compares against.
 *
 * A minimal libcurl client with the same transport choices as host/http.c
 * (one easy handle kept alive, HTTP/2 over TLS where offered, compressed
 * responses accepted, the kubeconfig's CA and client certificate), doing no
 * JSON work at all. Owns nothing of the project: it must never be linked
 * into cozy-migrate or used by a test as a source of truth.
 *
 *   curlloop get  URL N CA CERT KEY     N sequential GETs of URL; prints
 *                                       "<seconds> <bytes>"
 *   curlloop list URL LIMIT CA CERT KEY pages URL with limit/continue,
 *                                       keeping one page in memory; prints
 *                                       "<seconds> <items>"
 *   curlloop send FILE - CA CERT KEY      sends the requests of FILE, one a line
 *                                       "METHOD<TAB>URL[<TAB>BODY]" (PATCH
 *                                       bodies are JSON merge patches, POST
 *                                       and PUT JSON), in order, each answer
 *                                       read whole and discarded; stops at the
 *                                       first non-2xx; prints "<seconds>
 *                                       <requests> <response bytes>"
 *
 * Environment: CURLLOOP_ACCEPT (default application/json), CURLLOOP_ENCODING
 * (Accept-Encoding; default "" = every encoding libcurl has, as host/http.c;
 * "identity" = none), CURLLOOP_TIMES=FILE (send: each request's seconds, one a
 * line), CURLLOOP_PATCH_TYPE (send: the PATCH Content-Type, default
 * application/merge-patch+json).
 *
 * Built by tools/bench/run with gcc against libcurl. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct buf {
    char *p;
    size_t len, cap;
    size_t total;
    int keep;
};

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    struct buf *b = ud;
    size_t add = size * n;
    b->total += add;
    if (!b->keep)
        return add;
    if (b->len + add + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 16384;
        while (nc < b->len + add + 1)
            nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np)
            return 0;
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, p, add);
    b->len += add;
    b->p[b->len] = '\0';
    return add;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static CURL *handle(const char *ca, const char *cert, const char *key, struct buf *b,
                    struct curl_slist **hdrs)
{
    CURL *h = curl_easy_init();
    if (!h)
        return NULL;
    const char *accept = getenv("CURLLOOP_ACCEPT");
    const char *enc = getenv("CURLLOOP_ENCODING");
    char line[512];
    snprintf(line, sizeof line, "Accept: %s", accept && *accept ? accept : "application/json");
    *hdrs = curl_slist_append(NULL, line);
    *hdrs = curl_slist_append(*hdrs, "Expect:");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, enc ? enc : "");
    curl_easy_setopt(h, CURLOPT_CAINFO, ca);
    curl_easy_setopt(h, CURLOPT_SSLCERT, cert);
    curl_easy_setopt(h, CURLOPT_SSLKEY, key);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
    return h;
}

static int perform(CURL *h, const char *url)
{
    curl_easy_setopt(h, CURLOPT_URL, url);
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (rc != CURLE_OK || status < 200 || status > 299) {
        fprintf(stderr, "curlloop: %s: %s (HTTP %ld)\n", url, curl_easy_strerror(rc), status);
        return -1;
    }
    return 0;
}

static size_t count(const char *s, const char *needle)
{
    size_t n = 0, l = strlen(needle);
    for (const char *p = s; (p = strstr(p, needle)); p += l)
        n++;
    return n;
}

/* "METHOD\tURL[\tBODY]" lines of path, sent in order on handle h. */
static int do_file(CURL *h, struct curl_slist *base, const char *path, struct buf *b)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        return -1;
    }
    const char *tpath = getenv("CURLLOOP_TIMES");
    FILE *times = tpath && *tpath ? fopen(tpath, "w") : NULL;
    char *line = NULL;
    size_t cap = 0, n = 0;
    ssize_t len;
    int rc = 0;
    /* the Content-Type goes after the base headers, on a list of its own */
    struct curl_slist *merge = NULL, *json = NULL;
    for (struct curl_slist *p = base; p; p = p->next) {
        merge = curl_slist_append(merge, p->data);
        json = curl_slist_append(json, p->data);
    }
    const char *ptype = getenv("CURLLOOP_PATCH_TYPE");
    char ct[200];
    snprintf(ct, sizeof ct, "Content-Type: %s", ptype && *ptype ? ptype : "application/merge-patch+json");
    merge = curl_slist_append(merge, ct);
    json = curl_slist_append(json, "Content-Type: application/json");
    double t0 = now();
    while (rc == 0 && (len = getline(&line, &cap, f)) > 0) {
        if (line[len - 1] == '\n')
            line[--len] = '\0';
        char *method = line, *url = strchr(line, '\t'), *body = NULL;
        if (!url)
            continue;
        *url++ = '\0';
        if ((body = strchr(url, '\t')))
            *body++ = '\0';
        if (body) {
            curl_easy_setopt(h, CURLOPT_HTTPHEADER, strcmp(method, "PATCH") == 0 ? merge : json);
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, strcmp(method, "POST") == 0 ? NULL : method);
        } else {
            curl_easy_setopt(h, CURLOPT_HTTPHEADER, base);
            curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, strcmp(method, "GET") == 0 ? NULL : method);
        }
        double r0 = now();
        rc = perform(h, url);
        if (times)
            fprintf(times, "%.6f\n", now() - r0);
        n++;
    }
    if (rc == 0)
        printf("%.6f %zu %zu\n", now() - t0, n, b->total);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, base);
    curl_slist_free_all(merge);
    curl_slist_free_all(json);
    free(line);
    fclose(f);
    if (times)
        fclose(times);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 7 || (strcmp(argv[1], "get") != 0 && strcmp(argv[1], "list") != 0 &&
                      strcmp(argv[1], "send") != 0)) {
        fprintf(stderr, "usage: curlloop get URL N CA CERT KEY | curlloop list URL LIMIT CA CERT KEY"
                        " | curlloop send FILE - CA CERT KEY\n");
        return 2;
    }
    long n = strcmp(argv[1], "send") == 0 ? 1 : strtol(argv[3], NULL, 10);
    if (n < 1) {
        fprintf(stderr, "curlloop: N/LIMIT must be positive\n");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct buf b = {0};
    struct curl_slist *hdrs = NULL;
    CURL *h = handle(argv[4], argv[5], argv[6], &b, &hdrs);
    if (!h)
        return 1;
    int rc = 0;
    double t0 = now();
    if (strcmp(argv[1], "send") == 0) {
        rc = do_file(h, hdrs, argv[2], &b);
    } else if (strcmp(argv[1], "get") == 0) {
        for (long i = 0; i < n && rc == 0; i++)
            rc = perform(h, argv[2]);
        if (rc == 0)
            printf("%.6f %zu\n", now() - t0, b.total);
    } else {
        b.keep = 1;
        size_t items = 0;
        char *cont = NULL;
        for (;;) {
            char url[8192];
            char *esc = cont ? curl_easy_escape(h, cont, 0) : NULL;
            snprintf(url, sizeof url, "%s%slimit=%ld%s%s", argv[2], strchr(argv[2], '?') ? "&" : "?", n,
                     esc ? "&continue=" : "", esc ? esc : "");
            curl_free(esc);
            free(cont);
            cont = NULL;
            b.len = 0;
            if ((rc = perform(h, url)) != 0)
                break;
            /* every item of a list has exactly one uid; the list itself none */
            items += count(b.p ? b.p : "", "\"uid\":\"");
            const char *c = b.p ? strstr(b.p, "\"continue\":\"") : NULL;
            if (!c)
                break;
            c += strlen("\"continue\":\"");
            const char *e = strchr(c, '"');
            if (!e || e == c)
                break;
            cont = strndup(c, (size_t)(e - c));
        }
        if (rc == 0)
            printf("%.6f %zu\n", now() - t0, items);
    }
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);
    free(b.p);
    curl_global_cleanup();
    return rc == 0 ? 0 : 1;
}

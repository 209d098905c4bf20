/* curlloop.c: the raw-API floor the kube module's benchmark compares against.
 *
 * A minimal libcurl client with the same transport choices as host/client/http.c
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
 * CURLLOOP_CONCURRENCY=N (send, default 1) keeps up to N requests in flight
 * through libcurl's multi interface: HTTP/2 streams multiplexed on one
 * connection where the server offers HTTP/2 (as the apiserver does over
 * TLS), otherwise up to N keep-alive connections. The lines are started in
 * order and may complete in any order; the first non-2xx stops new starts.
 *
 * Environment: CURLLOOP_ACCEPT (default application/json), CURLLOOP_ENCODING
 * (Accept-Encoding; default "" = every encoding libcurl has, as host/client/http.c;
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
    const char *hv = getenv("CURLLOOP_HTTP");
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION,
                     hv && strcmp(hv, "1.1") == 0 ? (long)CURL_HTTP_VERSION_1_1 : (long)CURL_HTTP_VERSION_2TLS);
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

/* One request of a concurrent send: its own easy handle, reused for the next
 * line once the previous answer is read. */
struct slot {
    CURL *h;
    struct buf b;
    char *line;
    double t0;
};

/* do_file's concurrent form (CURLLOOP_CONCURRENCY > 1): the same lines, up to
 * conc at once on one multi handle. Answers are counted, never parsed. */
static int do_file_multi(const char *ca, const char *cert, const char *key, struct curl_slist *base,
                         const char *path, long conc)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        return -1;
    }
    const char *tpath = getenv("CURLLOOP_TIMES");
    FILE *times = tpath && *tpath ? fopen(tpath, "w") : NULL;
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

    CURLM *m = curl_multi_init();
    struct slot *slots = calloc((size_t)conc, sizeof *slots);
    if (!m || !slots) {
        fprintf(stderr, "curlloop: out of memory\n");
        fclose(f);
        return -1;
    }
    curl_multi_setopt(m, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, conc);
    size_t total = 0, n = 0;
    int rc = 0, eof = 0, active = 0;
    double t0 = now();
    for (;;) {
        /* start lines while a slot is free */
        for (long i = 0; i < conc && !eof && rc == 0; i++) {
            struct slot *s = &slots[i];
            if (s->line)
                continue;
            char *line = NULL;
            size_t cap = 0;
            ssize_t len = getline(&line, &cap, f);
            if (len <= 0) {
                free(line);
                eof = 1;
                break;
            }
            if (line[len - 1] == '\n')
                line[--len] = '\0';
            char *method = line, *url = strchr(line, '\t'), *body = NULL;
            if (!url) {
                free(line);
                continue;
            }
            *url++ = '\0';
            if ((body = strchr(url, '\t')))
                *body++ = '\0';
            if (!s->h) {
                struct curl_slist *unused = NULL;
                s->h = handle(ca, cert, key, &s->b, &unused);
                curl_slist_free_all(unused);
                if (!s->h) {
                    free(line);
                    rc = -1;
                    break;
                }
                curl_easy_setopt(s->h, CURLOPT_PIPEWAIT, 1L);
                curl_easy_setopt(s->h, CURLOPT_PRIVATE, s);
            }
            if (body) {
                curl_easy_setopt(s->h, CURLOPT_HTTPHEADER, strcmp(method, "PATCH") == 0 ? merge : json);
                curl_easy_setopt(s->h, CURLOPT_POSTFIELDS, body);
                curl_easy_setopt(s->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
                curl_easy_setopt(s->h, CURLOPT_CUSTOMREQUEST, strcmp(method, "POST") == 0 ? NULL : method);
            } else {
                curl_easy_setopt(s->h, CURLOPT_HTTPHEADER, base);
                curl_easy_setopt(s->h, CURLOPT_HTTPGET, 1L);
                curl_easy_setopt(s->h, CURLOPT_CUSTOMREQUEST, strcmp(method, "GET") == 0 ? NULL : method);
            }
            curl_easy_setopt(s->h, CURLOPT_URL, url);
            s->line = line;
            s->t0 = now();
            if (curl_multi_add_handle(m, s->h) != CURLM_OK) {
                rc = -1;
                break;
            }
            active++;
        }
        if (active == 0)
            break;
        /* Completions are read right after perform, which finds them:
         * waiting in poll first would sleep out its timeout whenever the
         * transfers that just ended were the last ones with a socket. */
        int running = 0;
        if (curl_multi_perform(m, &running) != CURLM_OK) {
            rc = -1;
            break;
        }
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            struct slot *s = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
            long status = 0;
            curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &status);
            if (msg->data.result != CURLE_OK || status < 200 || status > 299) {
                fprintf(stderr, "curlloop: %s: %s (HTTP %ld)\n", s->line, curl_easy_strerror(msg->data.result),
                        status);
                rc = -1;
            }
            if (times)
                fprintf(times, "%.6f\n", now() - s->t0);
            curl_multi_remove_handle(m, s->h);
            free(s->line);
            s->line = NULL;
            active--;
            n++;
        }
        if (running && curl_multi_poll(m, NULL, 0, 1000, NULL) != CURLM_OK) {
            rc = -1;
            break;
        }
    }
    for (long i = 0; i < conc; i++) {
        total += slots[i].b.total;
        if (slots[i].line) {
            curl_multi_remove_handle(m, slots[i].h);
            free(slots[i].line);
        }
        if (slots[i].h)
            curl_easy_cleanup(slots[i].h);
        free(slots[i].b.p);
    }
    if (rc == 0)
        printf("%.6f %zu %zu\n", now() - t0, n, total);
    free(slots);
    curl_multi_cleanup(m);
    curl_slist_free_all(merge);
    curl_slist_free_all(json);
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
    const char *cs = getenv("CURLLOOP_CONCURRENCY");
    long conc = cs && *cs ? strtol(cs, NULL, 10) : 1;
    if (conc < 1) {
        fprintf(stderr, "curlloop: CURLLOOP_CONCURRENCY must be positive\n");
        return 2;
    }
    if (strcmp(argv[1], "send") == 0 && conc > 1) {
        rc = do_file_multi(argv[4], argv[5], argv[6], hdrs, argv[2], conc);
    } else if (strcmp(argv[1], "send") == 0) {
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

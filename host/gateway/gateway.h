/* gateway.h: the runner's loopback gateway, the one way a shell migration
 * reaches the cluster. For the life of one shell migration an HTTP server
 * listens on 127.0.0.1 (a port of its own) and accepts only requests that
 * carry the migration's random bearer token; the shell's private
 * kubeconfig points kubectl at it and at nothing else. Every request it
 * takes passes the same door as a Lua migration's (door.h: the ledger
 * guard, dry run in the query and a DELETE's body, nothing after the
 * deadline, the retry policy, the write journal, the dry run's report);
 * the legacy stamp of `version` is answered by rule (stamp.h) and left for
 * the runner to carry out; a preview's reads and writes go through its
 * overlay (overlay.h). Watches and other streamed answers (a followed
 * log) pass through as they arrive; discovery, OpenAPI and version reads
 * pass. What it cannot relay (exec, attach, port-forward: connection
 * upgrades) is refused with a Status saying so.
 *
 * The server is libmicrohttpd's (Debian's libmicrohttpd12), a thread per
 * connection. Everything the runner reads afterwards is in gateway_shared,
 * plain data in memory the runner shares with the process running the
 * gateway (the shell's supervisor, proc/child.c), so it is there however
 * that process ended.
 *
 * Recipe (proc/child.c): before the fork, gateway_listen (the port for the
 * kubeconfig, kubeconfig_private.h) and gateway_cred_new; in the supervisor,
 * gateway_start with the listening socket, then the shell; after the shell,
 * gateway_finish (the preview's overlay written back). Never fall back to
 * anything: a gateway that cannot start fails the migration. */
#ifndef COZY_GATEWAY_H
#define COZY_GATEWAY_H
#include <stddef.h>

#include "formats/journaldoc.h"
#include "client/options.h"

#define GATEWAY_TOKEN_LEN 64        /* hex characters of the bearer token */

/* What the gateway tells the runner, in shared memory. */
struct gateway_shared {
    struct journal_log journal;     /* the write journal, as a Lua child's */
    long requests;                  /* requests answered (every kind) */
    long refused;                   /* requests the door refused */
    char refusal[640];              /* the first refusal: "REASON: METHOD PATH: why" */
    char refusal_reason[64];        /* its reason (LedgerProtected, DryRunRefused, ...) */
    int stamped;                    /* a legacy stamp was absorbed ... */
    long stamp;                     /* ... setting version to this */
    char unpredictable[512];        /* preview: the first request it could not predict */
    long peak_rss_kb;               /* the gateway process's peak memory (VmHWM) */
};

struct gateway_opts {
    int listen_fd;                  /* from gateway_listen, listening */
    const struct gateway_cred *cred; /* its token, TLS key and certificate */
    const struct kube_options *ko;  /* the runner's cluster, identity, names and dry run */
    double deadline;                /* monotonic; 0 = none: nothing is sent after it */
    long stamp_allowed;             /* the one `version` a legacy script may stamp; 0: none */
    const char *overlay_path;       /* preview: the overlay file; NULL otherwise */
    struct gateway_shared *shared;
    void (*say)(const char *text);  /* the migration's own output: a dry run's report,
                                     * an apiserver warning, a retry */
};

struct gateway;

/* A listening TCP socket on 127.0.0.1, an ephemeral port (close-on-exec).
 * 0 with *fd and *port, or -1 with err. */
int gateway_listen(int *fd, int *port, char *err, size_t errlen);
/* One gateway's credentials (cert.c): its bearer token, and the TLS
 * key and self-signed certificate for 127.0.0.1 it serves with (client-go
 * sends a bearer token over TLS only); the private kubeconfig carries the
 * token and the certificate, the key stays in the runner's memory. */
struct gateway_cred {
    char token[GATEWAY_TOKEN_LEN + 1];
    char *cert_pem, *key_pem;
};
/* Fresh ones. 0, or -1 with err (no randomness, OpenSSL refused). */
int gateway_cred_new(struct gateway_cred *c, char *err, size_t errlen);
/* Wipes and frees them (a zeroed c is a no-op). */
void gateway_cred_free(struct gateway_cred *c);
/* Starts serving on o->listen_fd (it takes the socket over). NULL with err
 * when it cannot: no connection to the cluster's config, no server. */
struct gateway *gateway_start(const struct gateway_opts *o, char *err, size_t errlen);
/* After the shell: no request is taken any more, the preview's overlay is
 * written back, the peak memory noted. The process exits right after (a
 * connection still open is cut with it). 0, or -1 with err (the overlay
 * could not be written). */
int gateway_finish(struct gateway *g, char *err, size_t errlen);
#endif

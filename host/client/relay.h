/* relay.h: one streamed answer a relay hands on as it arrives (the
 * shell's gateway, gateway/gateway.h: a watch, a followed log). The
 * upstream transfer runs on a libcurl handle and a connection of its own
 * (so a watch that lasts minutes holds no other request up), its body
 * handed on as it arrives. Owns that transfer: started with the client's
 * TLS and credentials (http.h), waited on until its headers are in, read
 * in pieces by the relay's own thread, ended when the answer ends, the
 * client goes, the deadline passes or the relay closes. Every call that
 * touches the shared client (start, close) must be made under the relay's
 * lock (the gateway's); relay_read must not. */
#ifndef COZY_RELAY_H
#define COZY_RELAY_H
#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>

#include "client/rest.h"

struct relay;

/* Starts GET path (its query included, already through the door) with
 * left seconds to live (HUGE_VAL: none). NULL with err on a failure to
 * start. */
struct relay *relay_start(struct rest_client *rest, const char *path,
                                    const char *accept, double left, char *err, size_t errlen);
/* Waits until the answer's headers are in: 0 with its status and content
 * type, or -1 with err when the transfer failed before an answer. */
int relay_headers(struct relay *s, const atomic_int *closing, long *status,
                       const char **ctype, char *err, size_t errlen);
/* Up to max bytes of the body into buf, waiting for them: > 0 bytes, 0 at
 * the end of the answer, -1 when it broke or the gateway closes. */
ssize_t relay_read(struct relay *s, char *buf, size_t max, const atomic_int *closing);
void relay_close(struct relay *s);
#endif

/* apipath.h: what an apiserver request path names: the API prefix (group
 * and version), the namespace, the resource, the object's name and its
 * subresource. The one parser of that shape for the journal and the
 * preview overlay (the ledger guard has its own, stricter, parser: it
 * refuses what it cannot judge rather than reading it). */
#ifndef COZY_APIPATH_H
#define COZY_APIPATH_H
#include <stddef.h>

struct apipath {
    char prefix[600];       /* /api/v1 or /apis/<group>/<version> */
    char group[256];        /* "" for the core group */
    char ns[256];           /* "" when not namespaced (or across namespaces) */
    char resource[256];
    char name[256];         /* "" for a collection */
    char sub[256];          /* subresource, "" for none */
};

/* Parses path (query ignored; segments percent-decoded). 0, or -1 when it
 * names no resource. */
int apipath_parse(const char *path, struct apipath *p);
/* "prefix|ns|resource|name": the key one object has in every cache. */
void apipath_key(const struct apipath *p, const char *ns, const char *name, char *buf, size_t len);

struct buf;
/* Appends "?key=value" to the path in b ("&key=value" once it has a query),
 * both percent-encoded (every byte but RFC 3986's unreserved A-Z a-z 0-9
 * - . _ ~), so no text of a script's can end the parameter or the path.
 * The one place a request's query is written. 0, or -1 (b->failed). */
int apipath_add_query(struct buf *b, const char *key, const char *value);
/* The value of key in path's query, percent-decoded and '+' read as a
 * space (malloc'd), or NULL when it has none (or out of memory). */
char *apipath_query_value(const char *path, const char *key);
#endif

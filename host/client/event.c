/* event.c: one Event about an object (event.h).
 *
 * Owns the Event's wire shape (involvedObject, source and reporting
 * component, first and last timestamps, count 1), the text it carries (one
 * line, valid UTF-8, cut to 1 KiB), fixed names for an Event said once,
 * and the rule that posting one is best effort. Must never fail a command;
 * prints nothing (a failed post is the caller's to say). */
#include "client/event.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/defaults.h"
#include "base/util.h"

char *event_build(const struct event_about *about, const char *name, const char *type,
                  const char *reason, const char *message, char *path, size_t pathlen)
{
    char msg[1024], ts[32], gen[200], host[128] = "cozy-migrate";
    snprintf(msg, sizeof msg, "%s", message);
    utf8_clip(msg);
    now_rfc3339(ts);
    gethostname(host, sizeof host - 1);
    snprintf(gen, sizeof gen, "%.180s.", about->name);
    cJSON *e = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(e, "metadata");
    cJSON *inv = cJSON_AddObjectToObject(e, "involvedObject");
    cJSON *src = cJSON_AddObjectToObject(e, "source");
    if (!meta || !inv || !src || !cJSON_AddStringToObject(e, "apiVersion", "v1") ||
        !cJSON_AddStringToObject(e, "kind", "Event") ||
        !cJSON_AddStringToObject(meta, name ? "name" : "generateName", name ? name : gen) ||
        !cJSON_AddStringToObject(meta, "namespace", about->ns) ||
        !cJSON_AddStringToObject(inv, "apiVersion", about->api_version) ||
        !cJSON_AddStringToObject(inv, "kind", about->kind) ||
        !cJSON_AddStringToObject(inv, "name", about->name) ||
        !cJSON_AddStringToObject(inv, "namespace", about->ns) ||
        (about->uid && *about->uid && !cJSON_AddStringToObject(inv, "uid", about->uid)) ||
        !cJSON_AddStringToObject(e, "reason", reason) ||
        !cJSON_AddStringToObject(e, "message", msg) || !cJSON_AddStringToObject(e, "type", type) ||
        !cJSON_AddStringToObject(src, "component", EVENT_COMPONENT) ||
        !cJSON_AddStringToObject(e, "firstTimestamp", ts) ||
        !cJSON_AddStringToObject(e, "lastTimestamp", ts) || !cJSON_AddNumberToObject(e, "count", 1) ||
        !cJSON_AddStringToObject(e, "reportingComponent", EVENT_COMPONENT) ||
        !cJSON_AddStringToObject(e, "reportingInstance", host)) {
        cJSON_Delete(e);
        return NULL;
    }
    char *body = cJSON_PrintUnformatted(e);
    cJSON_Delete(e);
    snprintf(path, pathlen, "/api/v1/namespaces/%s/events", about->ns);
    return body;
}

int event_answered(const struct event_about *about, const char *name, int rc,
                   const struct rest_result *r, char *err, size_t errlen)
{
    if (rc == 0)
        return 0;
    if (name && r->err.code == 409)
        return 1;
    char m[REST_ERRSTR_MAX];
    rest_error_string(&r->err, m, sizeof m);
    snprintf(err, errlen, "could not record an Event on %s %s/%s: %s", about->kind, about->ns,
             about->name, m);
    return -1;
}

int event_post(struct rest_client *c, const struct event_about *about, const char *name,
               const char *type, const char *reason, const char *message, char *err,
               size_t errlen)
{
    char path[512];
    char *body = event_build(about, name, type, reason, message, path, sizeof path);
    if (!body) {
        snprintf(err, errlen, "could not record an Event on %s %s/%s: out of memory",
                 about->kind, about->ns, about->name);
        return -1;
    }
    struct rest_result r;
    int rc = rest_do(c, "POST", path, NULL, "application/json", body, strlen(body), 0, 30, &r);
    rc = event_answered(about, name, rc, &r, err, errlen);
    rest_result_free(&r);
    cJSON_free(body);
    return rc;
}

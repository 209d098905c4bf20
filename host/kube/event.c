/* event.c: one Event about an object (event.h).
 *
 * Owns the Event's wire shape (involvedObject, source and reporting
 * component, first and last timestamps, count 1), the text it carries (one
 * line, valid UTF-8, cut to 1 KiB), fixed names for an Event said once,
 * and the rule that posting one is best effort. Must never fail a command;
 * prints nothing (a failed post is the caller's to say). */
#include "kube/event.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/defaults.h"
#include "base/util.h"

int event_post(struct rest_client *c, const struct event_about *about, const char *name,
               const char *type, const char *reason, const char *message, char *err,
               size_t errlen)
{
    char msg[1024], ts[32], gen[200], path[512], host[128] = "cozy-migrate";
    snprintf(msg, sizeof msg, "%s", message);
    utf8_clip(msg);
    now_rfc3339(ts);
    gethostname(host, sizeof host - 1);
    snprintf(gen, sizeof gen, "%.180s.", about->name);
    cJSON *e = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(e, "metadata");
    cJSON *inv = cJSON_AddObjectToObject(e, "involvedObject");
    cJSON *src = cJSON_AddObjectToObject(e, "source");
    snprintf(err, errlen, "could not record an Event on %s %s/%s: out of memory", about->kind,
             about->ns, about->name);
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
        return -1;
    }
    char *body = cJSON_PrintUnformatted(e);
    cJSON_Delete(e);
    if (!body)
        return -1;
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/events", about->ns);
    struct rest_result r;
    int rc = 0;
    if (rest_do(c, "POST", path, NULL, "application/json", body, strlen(body), 0, 30, &r) != 0) {
        if (name && r.err.code == 409) {
            rc = 1;
        } else {
            char m[REST_ERRSTR_MAX];
            rest_error_string(&r.err, m, sizeof m);
            snprintf(err, errlen, "could not record an Event on %s %s/%s: %s", about->kind,
                     about->ns, about->name, m);
            rc = -1;
        }
    }
    rest_result_free(&r);
    free(body);
    return rc;
}

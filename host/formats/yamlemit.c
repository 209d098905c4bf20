/* yamlemit.c: the YAML writer (see yamldoc.h): cJSON into a block-style
 * YAML document with libyaml's emitter, a string quoted wherever a plain
 * scalar would read back as another type (the core schema of yamldoc.c
 * decides), depth bounded, text counted against the memory budget. Must
 * never write what does not read back as the same value. */
#include "formats/yamldoc.h"
#include "formats/yaml_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "base/buf.h"
#include "base/mem.h"

/* libyaml's output callback: 1 written, 0 refused (the buffer says why). */
static int write_out(void *data, unsigned char *buffer, size_t size)
{
    return buf_add(data, buffer, size) == 0;
}

static void format_number(double d, char *buf, size_t n)
{
    if (isnan(d)) {
        snprintf(buf, n, ".nan");
    } else if (isinf(d)) {
        snprintf(buf, n, d < 0 ? "-.inf" : ".inf");
    } else if (d == 0 && signbit(d)) {
        snprintf(buf, n, "-0.0");
    } else if (d == floor(d) && fabs(d) < 9007199254740992.0) {
        snprintf(buf, n, "%.0f", d);
    } else {
        /* Shortest text that reads back as the same double. */
        snprintf(buf, n, "%.15g", d);
        if (strtod(buf, NULL) != d)
            snprintf(buf, n, "%.17g", d);
        /* "1e+300" is a float, but %g may print an integral "12345": mark it. */
        if (!strpbrk(buf, ".eEn"))
            strncat(buf, ".0", n - strlen(buf) - 1);
    }
}

static int emit_scalar(yaml_emitter_t *e, const char *s, int is_string, struct buf *err)
{
    yaml_event_t ev;
    int plain_ok = 1;
    if (is_string) {
        double num;
        int b;
        plain_ok = yaml_resolve_plain(s, strlen(s), &num, &b) == SK_STR;
    }
    yaml_scalar_style_t style = YAML_ANY_SCALAR_STYLE;
    /* Multi-line strings (certificates, scripts) read best as literal blocks;
     * the emitter falls back to quoting when a block cannot hold the text. */
    if (is_string && strchr(s, '\n'))
        style = YAML_LITERAL_SCALAR_STYLE;
    if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s),
                                      plain_ok, is_string, style)) {
        /* It fails only on malformed UTF-8 (or memory). */
        yaml_seterr(err, "a string is not valid UTF-8");
        return 0;
    }
    return yaml_emitter_emit(e, &ev);
}

static int emit_value(yaml_emitter_t *e, const cJSON *v, int depth, struct buf *err)
{
    yaml_event_t ev;
    char num[64];

    if (depth > YAML_MAX_DEPTH) {
        yaml_seterr(err, "value nested deeper than %d levels", YAML_MAX_DEPTH);
        return 0;
    }
    switch (v->type & 0xff) {
    case cJSON_NULL:
        return emit_scalar(e, "null", 0, err);
    case cJSON_True:
        return emit_scalar(e, "true", 0, err);
    case cJSON_False:
        return emit_scalar(e, "false", 0, err);
    case cJSON_Number:
        format_number(v->valuedouble, num, sizeof num);
        return emit_scalar(e, num, 0, err);
    case cJSON_String:
        if (!v->valuestring) {
            yaml_seterr(err, "string without a value");
            return 0;
        }
        return emit_scalar(e, v->valuestring, 1, err);
    case cJSON_Array:
        if (!yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE) ||
            !yaml_emitter_emit(e, &ev))
            return 0;
        for (const cJSON *c = v->child; c; c = c->next)
            if (!emit_value(e, c, depth + 1, err))
                return 0;
        if (!yaml_sequence_end_event_initialize(&ev))
            return 0;
        return yaml_emitter_emit(e, &ev);
    case cJSON_Object:
        if (!yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE) ||
            !yaml_emitter_emit(e, &ev))
            return 0;
        for (const cJSON *c = v->child; c; c = c->next) {
            if (!c->string) {
                yaml_seterr(err, "object member without a key");
                return 0;
            }
            if (!emit_scalar(e, c->string, 1, err) || !emit_value(e, c, depth + 1, err))
                return 0;
        }
        if (!yaml_mapping_end_event_initialize(&ev))
            return 0;
        return yaml_emitter_emit(e, &ev);
    case cJSON_Raw: {
        /* The Lua bridge (lua/luajson.c) hands Lua integers over as raw
         * JSON text to keep all 64 bits; a number stays plain, any other
         * raw JSON is re-read. */
        double d;
        int b;
        if (!v->valuestring) {
            yaml_seterr(err, "raw value without text");
            return 0;
        }
        enum scalar_kind k = yaml_resolve_plain(v->valuestring, strlen(v->valuestring), &d, &b);
        if (k == SK_INT || k == SK_FLOAT)
            return emit_scalar(e, v->valuestring, 0, err);
        cJSON *parsed = cJSON_Parse(v->valuestring);
        if (!parsed) {
            yaml_seterr(err, "raw value is not JSON: %.40s", v->valuestring);
            return 0;
        }
        int ok = emit_value(e, parsed, depth + 1, err);
        cJSON_Delete(parsed);
        return ok;
    }
    default:
        yaml_seterr(err, "cannot encode a cJSON value of type %d", v->type & 0xff);
        return 0;
    }
}

char *yaml_emit_err(const cJSON *v, struct buf *err)
{
    yaml_emitter_t e;
    yaml_event_t ev;
    struct buf o = BUF_INIT;
    int ok;

    if (err)
        buf_reset(err);
    if (!v) {
        yaml_seterr(err, "nothing to encode");
        return NULL;
    }
    if (!yaml_emitter_initialize(&e)) {
        yaml_seterr(err, "out of memory");
        return NULL;
    }
    yaml_emitter_set_output(&e, write_out, &o);
    yaml_emitter_set_unicode(&e, 1);
    yaml_emitter_set_indent(&e, 2);
    yaml_emitter_set_width(&e, -1);
    yaml_emitter_set_break(&e, YAML_LN_BREAK);
    ok = yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) && yaml_emitter_emit(&e, &ev) &&
         yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) && yaml_emitter_emit(&e, &ev) &&
         emit_value(&e, v, 0, err) &&
         yaml_document_end_event_initialize(&ev, 1) && yaml_emitter_emit(&e, &ev) &&
         yaml_stream_end_event_initialize(&ev) && yaml_emitter_emit(&e, &ev) &&
         yaml_emitter_flush(&e);
    ok = ok && !o.failed;
    if (!ok) {
        if (err && !err->len)
            yaml_seterr(err, "%s", o.failed ? "out of memory"
                                 : e.problem ? e.problem : "cannot encode (invalid UTF-8?)");
        buf_release(&o);
    }
    yaml_emitter_delete(&e);
    return ok ? buf_detach(&o, NULL) : NULL;
}

char *yaml_emit(const cJSON *v)
{
    return yaml_emit_err(v, NULL);
}

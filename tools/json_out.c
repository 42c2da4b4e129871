/* SPDX-License-Identifier: MIT */
/* The JSON writer behind every --json output. */
#include <inttypes.h>

#include "json_out.h"

void json_init(struct json_out *j, FILE *f)
{
    j->f = f;
    j->depth = 0;
    j->first[0] = true;
    j->after_key = false;
}

/* A separator before a value: none after a key, a comma between siblings. */
static void before_value(struct json_out *j)
{
    if (j->after_key) {
        j->after_key = false;
        return;
    }
    if (!j->first[j->depth])
        fputc(',', j->f);
    j->first[j->depth] = false;
}

static void open_level(struct json_out *j, char c)
{
    before_value(j);
    fputc(c, j->f);
    if (j->depth + 1 < JSON_MAX_DEPTH)
        j->depth++;
    j->first[j->depth] = true;
}

static void close_level(struct json_out *j, char c)
{
    fputc(c, j->f);
    if (j->depth > 0)
        j->depth--;
}

void json_begin_object(struct json_out *j)
{
    open_level(j, '{');
}

void json_end_object(struct json_out *j)
{
    close_level(j, '}');
}

void json_begin_array(struct json_out *j)
{
    open_level(j, '[');
}

void json_end_array(struct json_out *j)
{
    close_level(j, ']');
}

/* RFC 8259: quote, backslash and control characters must be escaped; the rest passes as is. */
static void write_escaped(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        case '\b':
            fputs("\\b", f);
            break;
        case '\f':
            fputs("\\f", f);
            break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

void json_key(struct json_out *j, const char *key)
{
    before_value(j);
    write_escaped(j->f, key);
    fputc(':', j->f);
    j->after_key = true;
}

void json_string(struct json_out *j, const char *s)
{
    if (s == NULL) {
        json_null(j);
        return;
    }
    before_value(j);
    write_escaped(j->f, s);
}

void json_int(struct json_out *j, int64_t v)
{
    before_value(j);
    fprintf(j->f, "%" PRId64, v);
}

void json_uint(struct json_out *j, uint64_t v)
{
    before_value(j);
    fprintf(j->f, "%" PRIu64, v);
}

void json_bool(struct json_out *j, bool v)
{
    before_value(j);
    fputs(v ? "true" : "false", j->f);
}

void json_null(struct json_out *j)
{
    before_value(j);
    fputs("null", j->f);
}

void json_finish(struct json_out *j)
{
    fputc('\n', j->f);
    fflush(j->f);
}

void json_kv_string(struct json_out *j, const char *key, const char *s)
{
    json_key(j, key);
    json_string(j, s);
}

void json_kv_int(struct json_out *j, const char *key, int64_t v)
{
    json_key(j, key);
    json_int(j, v);
}

void json_kv_uint(struct json_out *j, const char *key, uint64_t v)
{
    json_key(j, key);
    json_uint(j, v);
}

void json_kv_bool(struct json_out *j, const char *key, bool v)
{
    json_key(j, key);
    json_bool(j, v);
}

/* SPDX-License-Identifier: MIT */
/* A small streaming JSON writer: one document, commas and escaping handled. */
#ifndef NPV_JSON_OUT_H
#define NPV_JSON_OUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 16

struct json_out {
    FILE *f;
    int depth;
    bool first[JSON_MAX_DEPTH]; /* no value written yet at this level */
    bool after_key;
};

void json_init(struct json_out *j, FILE *f);
void json_begin_object(struct json_out *j);
void json_end_object(struct json_out *j);
void json_begin_array(struct json_out *j);
void json_end_array(struct json_out *j);
void json_key(struct json_out *j, const char *key);
/* NULL writes null. */
void json_string(struct json_out *j, const char *s);
void json_int(struct json_out *j, int64_t v);
void json_uint(struct json_out *j, uint64_t v);
void json_bool(struct json_out *j, bool v);
void json_null(struct json_out *j);
/* Ends the document with a newline. */
void json_finish(struct json_out *j);

/* Shorthands for "key": value. */
void json_kv_string(struct json_out *j, const char *key, const char *s);
void json_kv_int(struct json_out *j, const char *key, int64_t v);
void json_kv_uint(struct json_out *j, const char *key, uint64_t v);
void json_kv_bool(struct json_out *j, const char *key, bool v);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * A verifying reader of FlatBuffers and FlexBuffers, our own, for the Edge TPU's
 * compiled models (devices/edgetpu/package.c). Every read is bounds-checked
 * against the buffer; the first violation is recorded in the reader (sticky),
 * after which every read returns a default, so a caller checks fb->err once per
 * stage. Layout rules from the FlatBuffers binary format (flatbuffers
 * docs "internals": uoffset forward, soffset to the vtable, vtable of u16) and
 * FlexBuffers (flatbuffers' flexbuffers.h: root width and type at the end,
 * offsets backward, maps as a keys vector and a values vector with type bytes).
 */
#ifndef NPV_EDGETPU_FLATBUF_H
#define NPV_EDGETPU_FLATBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fb {
    const uint8_t *b;
    size_t n;
    int err;         /* 0 or the first negative errno */
    const char *why; /* what broke, for the caller's message */
    size_t *budget;  /* vector elements left to read (shared by nested readers) */
};

struct fb_table {
    size_t pos;      /* the table's start (its soffset to the vtable) */
    size_t vt;       /* its vtable */
    uint16_t vt_len; /* bytes of the vtable */
    uint16_t len;    /* bytes of the table's inline part */
};

struct fb_vec {
    size_t pos; /* the first element */
    uint32_t len;
};

void fb_init(struct fb *fb, const uint8_t *b, size_t n, size_t *budget);
/* Fail the reader with err (first failure wins); returns err. */
int fb_fail(struct fb *fb, int err, const char *why);
/* The root table; ident (4 bytes) is checked when not NULL. */
bool fb_root(struct fb *fb, const char *ident, struct fb_table *t);
bool fb_has(struct fb *fb, const struct fb_table *t, unsigned id);
uint8_t fb_u8(struct fb *fb, const struct fb_table *t, unsigned id, uint8_t def);
int16_t fb_i16(struct fb *fb, const struct fb_table *t, unsigned id, int16_t def);
int32_t fb_i32(struct fb *fb, const struct fb_table *t, unsigned id, int32_t def);
uint32_t fb_u32(struct fb *fb, const struct fb_table *t, unsigned id, uint32_t def);
uint64_t fb_u64(struct fb *fb, const struct fb_table *t, unsigned id, uint64_t def);
float fb_f32(struct fb *fb, const struct fb_table *t, unsigned id, float def);
/* A sub-table; false when absent (or on error). */
bool fb_table(struct fb *fb, const struct fb_table *t, unsigned id, struct fb_table *out);
/* A vector of elem-byte elements; absent gives len 0. Counts against the budget (elem > 1). */
bool fb_vector(struct fb *fb, const struct fb_table *t, unsigned id, size_t elem, struct fb_vec *v);
/* A string: NUL-terminated in the buffer, no NUL inside; absent gives NULL. */
const char *fb_string(struct fb *fb, const struct fb_table *t, unsigned id, uint32_t *len);
/* Element i of a vector of tables / strings. */
bool fb_vec_table(struct fb *fb, const struct fb_vec *v, uint32_t i, struct fb_table *out);
const char *fb_vec_string(struct fb *fb, const struct fb_vec *v, uint32_t i, uint32_t *len);
/* Element i of a vector of bytes / 32-bit values (the caller checked the index). */
uint32_t fb_vec_u32(struct fb *fb, const struct fb_vec *v, uint32_t i);
/* The bytes of a [ubyte] vector (or a string's bytes as a vector). */
const uint8_t *fb_vec_bytes(struct fb *fb, const struct fb_vec *v);
/* A vector of strings or of [ubyte]: element i as a byte vector (its length and bytes). */
bool fb_vec_bytevec(struct fb *fb, const struct fb_vec *v, uint32_t i, struct fb_vec *out);

/* FlexBuffers: a value is where it lies, its parent's width and its packed type. */
struct fx {
    size_t pos;
    uint8_t parent_width;
    uint8_t type;  /* FlexBuffers type (packed >> 2) */
    uint8_t width; /* 1 << (packed & 3) */
};

enum {
    FX_NULL = 0,
    FX_INT = 1,
    FX_UINT = 2,
    FX_KEY = 4,
    FX_STRING = 5,
    FX_INDIRECT_INT = 6,
    FX_INDIRECT_UINT = 7,
    FX_MAP = 9,
    FX_VECTOR = 10,
    FX_VECTOR_INT = 11,
    FX_VECTOR_UINT = 12,
    FX_VECTOR_KEY = 14,
    FX_BLOB = 25,
};

bool fx_root(struct fb *fb, struct fx *out);
/* Look key up in a map; false when the map has no such key. */
bool fx_map_find(struct fb *fb, const struct fx *map, const char *key, struct fx *out);
/* A string or blob's bytes. */
bool fx_bytes(struct fb *fb, const struct fx *v, size_t *pos, size_t *len);
/* The element count of a vector (typed or not). */
bool fx_vec_len(struct fb *fb, const struct fx *v, uint64_t *len);
/* An integer (inline or indirect, signed or unsigned). */
bool fx_int(struct fb *fb, const struct fx *v, int64_t *out);

#endif

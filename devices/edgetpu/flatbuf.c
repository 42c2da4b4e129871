/* SPDX-License-Identifier: MIT */
/*
 * Verifying FlatBuffers / FlexBuffers reader (flatbuf.h). Our own code from the
 * public format descriptions: FlatBuffers "internals" (a buffer starts with the
 * uoffset of the root table; a table starts with an soffset, table minus it is
 * its vtable: u16 vtable bytes, u16 table bytes, then one u16 field offset per
 * field id, 0 = absent; references are u32 offsets forward from where they are
 * stored; a vector or string is a u32 count then the elements, a string with a
 * NUL after them) and flatbuffers' flexbuffers.h (the root's byte width is the
 * last byte, its packed type the one before and its value before that;
 * offsets point backward; a sized value has its size one width before it; a
 * map has, before its values, the keys vector's offset, its width and the
 * count; an untyped vector's type bytes follow its values).
 *
 * Everything is little-endian on disk; we read byte by byte, so host order and
 * alignment never matter. Failures: -EBADMSG for a structure that does not fit
 * the buffer, -E2BIG when vectors that alias each other would make us read more
 * elements than the buffer holds bytes (model choice: a real file never aliases).
 */
#include <errno.h>
#include <string.h>

#include "flatbuf.h"

void fb_init(struct fb *fb, const uint8_t *b, size_t n, size_t *budget)
{
    fb->b = b;
    fb->n = n;
    fb->err = 0;
    fb->why = NULL;
    fb->budget = budget;
}

int fb_fail(struct fb *fb, int err, const char *why)
{
    if (fb->err == 0) {
        fb->err = err;
        fb->why = why;
    }
    return fb->err;
}

/* Little-endian unsigned of w (1..8) bytes at pos; 0 and a failure when outside. */
static uint64_t rd(struct fb *fb, size_t pos, size_t w)
{
    if (fb->err != 0)
        return 0;
    if (pos > fb->n || w > fb->n - pos) {
        fb_fail(fb, -EBADMSG, "a value lies outside the buffer");
        return 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < w; i++)
        v |= (uint64_t)fb->b[pos + i] << (8 * i);
    return v;
}

static bool take_budget(struct fb *fb, uint64_t count)
{
    if (fb->budget == NULL)
        return true;
    if (count > *fb->budget) {
        fb_fail(fb, -E2BIG, "vectors alias: more elements than the file has bytes");
        return false;
    }
    *fb->budget -= (size_t)count;
    return true;
}

static bool table_at(struct fb *fb, size_t pos, struct fb_table *t)
{
    if (fb->err != 0)
        return false;
    if (pos > fb->n || fb->n - pos < 4)
        return fb_fail(fb, -EBADMSG, "a table lies outside the buffer") == 0;
    int64_t so = (int32_t)(uint32_t)rd(fb, pos, 4);
    int64_t vt = (int64_t)pos - so;
    if (vt < 0 || (uint64_t)vt > fb->n - 4)
        return fb_fail(fb, -EBADMSG, "a vtable lies outside the buffer") == 0;
    uint16_t vt_len = (uint16_t)rd(fb, (size_t)vt, 2);
    uint16_t len = (uint16_t)rd(fb, (size_t)vt + 2, 2);
    if (vt_len < 4 || vt_len % 2 != 0 || vt_len > fb->n - (size_t)vt)
        return fb_fail(fb, -EBADMSG, "a vtable's size is wrong") == 0;
    if (len < 4 || len > fb->n - pos)
        return fb_fail(fb, -EBADMSG, "a table's size is wrong") == 0;
    t->pos = pos;
    t->vt = (size_t)vt;
    t->vt_len = vt_len;
    t->len = len;
    return true;
}

bool fb_root(struct fb *fb, const char *ident, struct fb_table *t)
{
    if (fb->n < 8)
        return fb_fail(fb, -EBADMSG, "shorter than a flatbuffer header") == 0;
    if (ident != NULL && memcmp(fb->b + 4, ident, 4) != 0)
        return fb_fail(fb, -EBADMSG, "the file identifier is not the expected one") == 0;
    return table_at(fb, (size_t)rd(fb, 0, 4), t);
}

/* Where field id lies (size bytes), or 0 when absent or on a failure. */
static size_t field(struct fb *fb, const struct fb_table *t, unsigned id, size_t size)
{
    if (fb->err != 0)
        return 0;
    size_t slot = 4 + 2 * (size_t)id;
    if (slot + 2 > t->vt_len)
        return 0;
    size_t fo = (size_t)rd(fb, t->vt + slot, 2);
    if (fo == 0)
        return 0;
    if (fo < 4 || fo + size > t->len) {
        fb_fail(fb, -EBADMSG, "a field lies outside its table");
        return 0;
    }
    return t->pos + fo;
}

bool fb_has(struct fb *fb, const struct fb_table *t, unsigned id)
{
    return field(fb, t, id, 1) != 0;
}

uint8_t fb_u8(struct fb *fb, const struct fb_table *t, unsigned id, uint8_t def)
{
    size_t p = field(fb, t, id, 1);
    return p != 0 ? (uint8_t)rd(fb, p, 1) : def;
}

int16_t fb_i16(struct fb *fb, const struct fb_table *t, unsigned id, int16_t def)
{
    size_t p = field(fb, t, id, 2);
    return p != 0 ? (int16_t)(uint16_t)rd(fb, p, 2) : def;
}

int32_t fb_i32(struct fb *fb, const struct fb_table *t, unsigned id, int32_t def)
{
    size_t p = field(fb, t, id, 4);
    return p != 0 ? (int32_t)(uint32_t)rd(fb, p, 4) : def;
}

uint32_t fb_u32(struct fb *fb, const struct fb_table *t, unsigned id, uint32_t def)
{
    size_t p = field(fb, t, id, 4);
    return p != 0 ? (uint32_t)rd(fb, p, 4) : def;
}

uint64_t fb_u64(struct fb *fb, const struct fb_table *t, unsigned id, uint64_t def)
{
    size_t p = field(fb, t, id, 8);
    return p != 0 ? rd(fb, p, 8) : def;
}

float fb_f32(struct fb *fb, const struct fb_table *t, unsigned id, float def)
{
    size_t p = field(fb, t, id, 4);
    if (p == 0)
        return def;
    uint32_t u = (uint32_t)rd(fb, p, 4);
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* Follow the uoffset stored at p; 0 on a failure (never a valid target). */
static size_t follow(struct fb *fb, size_t p)
{
    uint64_t off = rd(fb, p, 4);
    if (fb->err != 0)
        return 0;
    if (off == 0 || off > fb->n - p) {
        fb_fail(fb, -EBADMSG, "a reference points outside the buffer");
        return 0;
    }
    return p + (size_t)off;
}

bool fb_table(struct fb *fb, const struct fb_table *t, unsigned id, struct fb_table *out)
{
    size_t p = field(fb, t, id, 4);
    if (p == 0)
        return false;
    size_t target = follow(fb, p);
    return target != 0 && table_at(fb, target, out);
}

static bool vector_at(struct fb *fb, size_t target, size_t elem, struct fb_vec *v)
{
    uint64_t len = rd(fb, target, 4);
    if (fb->err != 0)
        return false;
    size_t room = fb->n - target - 4;
    if (elem != 0 && len > room / elem)
        return fb_fail(fb, -EBADMSG, "a vector runs past the buffer") == 0;
    /* Byte vectors are never walked element by element: only the others count. */
    if (elem > 1 && !take_budget(fb, len))
        return false;
    v->pos = target + 4;
    v->len = (uint32_t)len;
    return true;
}

bool fb_vector(struct fb *fb, const struct fb_table *t, unsigned id, size_t elem, struct fb_vec *v)
{
    v->pos = 0;
    v->len = 0;
    size_t p = field(fb, t, id, 4);
    if (p == 0)
        return false;
    size_t target = follow(fb, p);
    return target != 0 && vector_at(fb, target, elem, v);
}

static const char *string_at(struct fb *fb, size_t target, uint32_t *len)
{
    struct fb_vec v;
    if (!vector_at(fb, target, 1, &v))
        return NULL;
    if (v.len >= fb->n - v.pos || fb->b[v.pos + v.len] != 0) {
        fb_fail(fb, -EBADMSG, "a string is not NUL-terminated");
        return NULL;
    }
    if (memchr(fb->b + v.pos, 0, v.len) != NULL) {
        fb_fail(fb, -EBADMSG, "a string holds a NUL");
        return NULL;
    }
    if (len != NULL)
        *len = v.len;
    return (const char *)fb->b + v.pos;
}

const char *fb_string(struct fb *fb, const struct fb_table *t, unsigned id, uint32_t *len)
{
    if (len != NULL)
        *len = 0;
    size_t p = field(fb, t, id, 4);
    if (p == 0)
        return NULL;
    size_t target = follow(fb, p);
    return target != 0 ? string_at(fb, target, len) : NULL;
}

static size_t element_target(struct fb *fb, const struct fb_vec *v, uint32_t i)
{
    if (fb->err != 0)
        return 0;
    if (i >= v->len) {
        fb_fail(fb, -EBADMSG, "a vector index out of range");
        return 0;
    }
    return follow(fb, v->pos + 4 * (size_t)i);
}

bool fb_vec_table(struct fb *fb, const struct fb_vec *v, uint32_t i, struct fb_table *out)
{
    size_t target = element_target(fb, v, i);
    return target != 0 && table_at(fb, target, out);
}

const char *fb_vec_string(struct fb *fb, const struct fb_vec *v, uint32_t i, uint32_t *len)
{
    size_t target = element_target(fb, v, i);
    return target != 0 ? string_at(fb, target, len) : NULL;
}

bool fb_vec_bytevec(struct fb *fb, const struct fb_vec *v, uint32_t i, struct fb_vec *out)
{
    size_t target = element_target(fb, v, i);
    return target != 0 && vector_at(fb, target, 1, out);
}

uint32_t fb_vec_u32(struct fb *fb, const struct fb_vec *v, uint32_t i)
{
    if (i >= v->len) {
        fb_fail(fb, -EBADMSG, "a vector index out of range");
        return 0;
    }
    return (uint32_t)rd(fb, v->pos + 4 * (size_t)i, 4);
}

const uint8_t *fb_vec_bytes(struct fb *fb, const struct fb_vec *v)
{
    return v->len != 0 ? fb->b + v->pos : NULL;
}

/* ---- FlexBuffers ---- */

static bool width_ok(uint64_t w)
{
    return w == 1 || w == 2 || w == 4 || w == 8;
}

bool fx_root(struct fb *fb, struct fx *out)
{
    if (fb->n < 3)
        return fb_fail(fb, -EBADMSG, "custom options shorter than a flexbuffer") == 0;
    uint8_t w = fb->b[fb->n - 1];
    uint8_t packed = fb->b[fb->n - 2];
    if (!width_ok(w) || fb->n < 2 + (size_t)w)
        return fb_fail(fb, -EBADMSG, "a flexbuffer root of a wrong width") == 0;
    out->pos = fb->n - 2 - w;
    out->parent_width = w;
    out->type = (uint8_t)(packed >> 2);
    out->width = (uint8_t)(1u << (packed & 3));
    return true;
}

/* The position an offset-typed value points to (backward from where it is; 0 is valid). */
static bool fx_indirect(struct fb *fb, size_t pos, size_t w, size_t *out)
{
    uint64_t off = rd(fb, pos, w);
    if (fb->err != 0)
        return false;
    if (off == 0 || off > pos)
        return fb_fail(fb, -EBADMSG, "a flexbuffer offset points outside the buffer") == 0;
    *out = pos - (size_t)off;
    return true;
}

/* A sized value at p of width w: its count, with count * per + extra bytes after p in the buffer.
 */
static bool fx_sized(struct fb *fb, size_t p, size_t w, size_t per, size_t extra, uint64_t *count)
{
    if (fb->err != 0)
        return false;
    if (p < w || p > fb->n)
        return fb_fail(fb, -EBADMSG, "a flexbuffer size lies outside the buffer") == 0;
    uint64_t c = rd(fb, p - w, w);
    size_t room = fb->n - p;
    if (c > room / (per + extra))
        return fb_fail(fb, -EBADMSG, "a flexbuffer vector runs past the buffer") == 0;
    *count = c;
    return true;
}

bool fx_map_find(struct fb *fb, const struct fx *map, const char *key, struct fx *out)
{
    if (fb->err != 0)
        return false;
    if (map->type != FX_MAP)
        return fb_fail(fb, -EBADMSG, "the custom options are not a flexbuffer map") == 0;
    size_t w = map->width;
    size_t m, keys;
    uint64_t count;
    if (!fx_indirect(fb, map->pos, map->parent_width, &m) || !fx_sized(fb, m, w, w, 1, &count))
        return false;
    if (m < 3 * w)
        return fb_fail(fb, -EBADMSG, "a flexbuffer map's keys lie outside the buffer") == 0;
    if (!fx_indirect(fb, m - 3 * w, w, &keys))
        return false;
    uint64_t kw = rd(fb, m - 2 * w, w);
    if (fb->err != 0)
        return false;
    if (!width_ok(kw))
        return fb_fail(fb, -EBADMSG, "a flexbuffer map's keys of a wrong width") == 0;
    uint64_t kcount;
    if (!fx_sized(fb, keys, (size_t)kw, (size_t)kw, 0, &kcount))
        return false;
    if (kcount != count)
        return fb_fail(fb, -EBADMSG, "a flexbuffer map's keys and values differ in count") == 0;
    if (!take_budget(fb, count))
        return false;
    for (uint64_t i = 0; i < count; i++) {
        size_t k;
        if (!fx_indirect(fb, keys + (size_t)i * (size_t)kw, (size_t)kw, &k))
            return false;
        const uint8_t *nul = memchr(fb->b + k, 0, fb->n - k);
        if (nul == NULL)
            return fb_fail(fb, -EBADMSG, "a flexbuffer key is not NUL-terminated") == 0;
        if (strcmp((const char *)fb->b + k, key) != 0)
            continue;
        uint8_t packed = fb->b[m + (size_t)count * w + (size_t)i];
        out->pos = m + (size_t)i * w;
        out->parent_width = (uint8_t)w;
        out->type = (uint8_t)(packed >> 2);
        out->width = (uint8_t)(1u << (packed & 3));
        return true;
    }
    return false;
}

bool fx_bytes(struct fb *fb, const struct fx *v, size_t *pos, size_t *len)
{
    if (fb->err != 0)
        return false;
    if (v->type != FX_STRING && v->type != FX_BLOB)
        return fb_fail(fb, -EBADMSG, "a flexbuffer value is not a string or blob") == 0;
    size_t p;
    uint64_t c;
    if (!fx_indirect(fb, v->pos, v->parent_width, &p) || !fx_sized(fb, p, v->width, 1, 0, &c))
        return false;
    if (v->type == FX_STRING && (c >= fb->n - p || fb->b[p + c] != 0))
        return fb_fail(fb, -EBADMSG, "a flexbuffer string is not NUL-terminated") == 0;
    *pos = p;
    *len = (size_t)c;
    return true;
}

bool fx_vec_len(struct fb *fb, const struct fx *v, uint64_t *len)
{
    if (fb->err != 0)
        return false;
    size_t extra;
    if (v->type == FX_VECTOR || v->type == FX_MAP)
        extra = 1; /* type bytes after the values */
    else if (v->type >= FX_VECTOR_INT && v->type <= FX_VECTOR_KEY)
        extra = 0;
    else
        return fb_fail(fb, -EBADMSG, "a flexbuffer value is not a vector") == 0;
    size_t p;
    return fx_indirect(fb, v->pos, v->parent_width, &p) &&
           fx_sized(fb, p, v->width, v->width, extra, len);
}

bool fx_int(struct fb *fb, const struct fx *v, int64_t *out)
{
    if (fb->err != 0)
        return false;
    size_t p = v->pos, w = v->parent_width;
    bool sign = v->type == FX_INT || v->type == FX_INDIRECT_INT;
    if (v->type == FX_INDIRECT_INT || v->type == FX_INDIRECT_UINT) {
        if (!fx_indirect(fb, v->pos, v->parent_width, &p))
            return false;
        w = v->width;
    } else if (v->type != FX_INT && v->type != FX_UINT) {
        return fb_fail(fb, -EBADMSG, "a flexbuffer value is not an integer") == 0;
    }
    uint64_t u = rd(fb, p, w);
    if (fb->err != 0)
        return false;
    if (sign && w < 8 && (u >> (8 * w - 1)) != 0)
        u |= ~0ull << (8 * w);
    *out = (int64_t)u;
    return true;
}

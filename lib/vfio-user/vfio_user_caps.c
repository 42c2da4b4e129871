/* SPDX-License-Identifier: MIT */
/*
 * The JSON capabilities object of vfio-user VERSION: a small recursive-descent
 * reader with a depth bound (a peer's nesting must not exhaust our stack) that
 * extracts the few keys the protocol defines, and a writer for our own.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "vfio_user_msg.h"

void npv_vu_caps_default(struct npv_vu_caps *c)
{
    c->max_msg_fds = NPV_VU_DEFAULT_MAX_MSG_FDS;
    c->max_data_xfer_size = NPV_VU_DEFAULT_MAX_DATA_XFER_SIZE;
    c->max_dma_maps = NPV_VU_DEFAULT_MAX_DMA_MAPS;
    c->pgsizes = NPV_VU_DEFAULT_PGSIZES;
    c->write_multiple = false;
    c->twin_socket = false;
    c->twin_fd_index = 0;
    c->present = 0;
}

struct jp {
    const char *s;
    size_t len;
    size_t pos;
};

static void ws(struct jp *p)
{
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        p->pos++;
    }
}

static int peek(struct jp *p)
{
    ws(p);
    return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1;
}

static int expect(struct jp *p, char c)
{
    if (peek(p) != (unsigned char)c)
        return -EINVAL;
    p->pos++;
    return 0;
}

/*
 * A string; its raw bytes (escapes not decoded) go to key when key != NULL.
 * Keys we look for have no escapes, so a key with escapes simply matches none.
 */
static int parse_string(struct jp *p, char *key, size_t keylen)
{
    if (expect(p, '"') < 0)
        return -EINVAL;
    size_t n = 0;
    bool overflow = false;
    while (p->pos < p->len) {
        char c = p->s[p->pos++];
        if (c == '"') {
            if (key != NULL) {
                if (overflow)
                    key[0] = '\0'; /* too long for any key we know */
                else
                    key[n] = '\0';
            }
            return 0;
        }
        if ((unsigned char)c < 0x20 || c == '\0')
            return -EINVAL;
        if (c == '\\') {
            if (p->pos >= p->len)
                return -EINVAL;
            char e = p->s[p->pos++];
            if (e == 'u') {
                for (int i = 0; i < 4; i++) {
                    if (p->pos >= p->len)
                        return -EINVAL;
                    char h = p->s[p->pos++];
                    if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') ||
                          (h >= 'A' && h <= 'F')))
                        return -EINVAL;
                }
            } else if (strchr("\"\\/bfnrt", e) == NULL || e == '\0') {
                return -EINVAL;
            }
            overflow = true; /* escaped keys match nothing */
            continue;
        }
        if (key != NULL && !overflow) {
            if (n + 1 < keylen)
                key[n++] = c;
            else
                overflow = true;
        }
    }
    return -EINVAL;
}

/* A JSON number. *is_uint and *val are set for a plain non-negative integer that fits. */
static int parse_number(struct jp *p, bool *is_uint, uint64_t *val)
{
    ws(p);
    size_t start = p->pos;
    bool neg = false, frac = false, ovf = false;
    uint64_t v = 0;
    if (p->pos < p->len && p->s[p->pos] == '-') {
        neg = true;
        p->pos++;
    }
    size_t digits = 0;
    while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
        unsigned d = (unsigned)(p->s[p->pos] - '0');
        if (v > (UINT64_MAX - d) / 10)
            ovf = true;
        else
            v = v * 10 + d;
        p->pos++;
        digits++;
    }
    if (digits == 0)
        return -EINVAL;
    if (p->pos < p->len && p->s[p->pos] == '.') {
        frac = true;
        p->pos++;
        size_t fd = 0;
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
            p->pos++;
            fd++;
        }
        if (fd == 0)
            return -EINVAL;
    }
    if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        frac = true;
        p->pos++;
        if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
            p->pos++;
        size_t ed = 0;
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
            p->pos++;
            ed++;
        }
        if (ed == 0)
            return -EINVAL;
    }
    (void)start;
    *is_uint = !neg && !frac && !ovf;
    *val = v;
    return 0;
}

static int parse_literal(struct jp *p, const char *lit)
{
    ws(p);
    size_t n = strlen(lit);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, lit, n) != 0)
        return -EINVAL;
    p->pos += n;
    return 0;
}

static int skip_value(struct jp *p, int depth);

static int skip_object(struct jp *p, int depth)
{
    if (depth > NPV_VU_JSON_MAX_DEPTH)
        return -EINVAL;
    if (expect(p, '{') < 0)
        return -EINVAL;
    if (peek(p) == '}') {
        p->pos++;
        return 0;
    }
    for (;;) {
        if (parse_string(p, NULL, 0) < 0 || expect(p, ':') < 0 || skip_value(p, depth) < 0)
            return -EINVAL;
        int c = peek(p);
        p->pos++;
        if (c == '}')
            return 0;
        if (c != ',')
            return -EINVAL;
    }
}

static int skip_array(struct jp *p, int depth)
{
    if (depth > NPV_VU_JSON_MAX_DEPTH)
        return -EINVAL;
    if (expect(p, '[') < 0)
        return -EINVAL;
    if (peek(p) == ']') {
        p->pos++;
        return 0;
    }
    for (;;) {
        if (skip_value(p, depth) < 0)
            return -EINVAL;
        int c = peek(p);
        p->pos++;
        if (c == ']')
            return 0;
        if (c != ',')
            return -EINVAL;
    }
}

static int skip_value(struct jp *p, int depth)
{
    bool u;
    uint64_t v;
    switch (peek(p)) {
    case '{':
        return skip_object(p, depth + 1);
    case '[':
        return skip_array(p, depth + 1);
    case '"':
        return parse_string(p, NULL, 0);
    case 't':
        return parse_literal(p, "true");
    case 'f':
        return parse_literal(p, "false");
    case 'n':
        return parse_literal(p, "null");
    default:
        return parse_number(p, &u, &v);
    }
}

static int parse_bool(struct jp *p, bool *out)
{
    int c = peek(p);
    if (c == 't') {
        *out = true;
        return parse_literal(p, "true");
    }
    if (c == 'f') {
        *out = false;
        return parse_literal(p, "false");
    }
    return -EINVAL;
}

static int parse_uint(struct jp *p, uint64_t max, uint64_t *out)
{
    bool is_uint;
    uint64_t v;
    int c = peek(p);
    if (c != '-' && (c < '0' || c > '9'))
        return -EINVAL;
    if (parse_number(p, &is_uint, &v) < 0 || !is_uint || v > max)
        return -EINVAL;
    *out = v;
    return 0;
}

/* Iterate an object's members; for each key call fn, which consumes the value. */
typedef int (*member_fn)(struct jp *p, const char *key, void *arg, int depth);

static int parse_object(struct jp *p, int depth, member_fn fn, void *arg)
{
    char key[32];
    if (depth > NPV_VU_JSON_MAX_DEPTH)
        return -EINVAL;
    if (expect(p, '{') < 0)
        return -EINVAL;
    if (peek(p) == '}') {
        p->pos++;
        return 0;
    }
    for (;;) {
        if (parse_string(p, key, sizeof(key)) < 0 || expect(p, ':') < 0)
            return -EINVAL;
        if (fn(p, key, arg, depth) < 0)
            return -EINVAL;
        int c = peek(p);
        p->pos++;
        if (c == '}')
            return 0;
        if (c != ',')
            return -EINVAL;
    }
}

static int twin_member(struct jp *p, const char *key, void *arg, int depth)
{
    struct npv_vu_caps *c = arg;
    if (strcmp(key, "supported") == 0)
        return parse_bool(p, &c->twin_socket);
    if (strcmp(key, "fd_index") == 0) {
        uint64_t v;
        if (parse_uint(p, NPV_VU_MAX_MSG_FDS - 1, &v) < 0)
            return -EINVAL;
        c->twin_fd_index = (uint32_t)v;
        c->present |= NPV_VU_CAP_TWIN_FD_INDEX;
        return 0;
    }
    return skip_value(p, depth);
}

static int caps_member(struct jp *p, const char *key, void *arg, int depth)
{
    struct npv_vu_caps *c = arg;
    uint64_t v;
    if (strcmp(key, "max_msg_fds") == 0) {
        if (parse_uint(p, UINT32_MAX, &v) < 0)
            return -EINVAL;
        c->max_msg_fds = (uint32_t)v;
        c->present |= NPV_VU_CAP_MAX_MSG_FDS;
        return 0;
    }
    if (strcmp(key, "max_data_xfer_size") == 0) {
        if (parse_uint(p, UINT32_MAX, &v) < 0)
            return -EINVAL;
        c->max_data_xfer_size = (uint32_t)v;
        c->present |= NPV_VU_CAP_MAX_DATA_XFER_SIZE;
        return 0;
    }
    if (strcmp(key, "max_dma_maps") == 0) {
        if (parse_uint(p, UINT32_MAX, &v) < 0)
            return -EINVAL;
        c->max_dma_maps = (uint32_t)v;
        c->present |= NPV_VU_CAP_MAX_DMA_MAPS;
        return 0;
    }
    if (strcmp(key, "pgsizes") == 0) {
        c->present |= NPV_VU_CAP_PGSIZES;
        return parse_uint(p, UINT64_MAX, &c->pgsizes);
    }
    if (strcmp(key, "write_multiple") == 0) {
        c->present |= NPV_VU_CAP_WRITE_MULTIPLE;
        return parse_bool(p, &c->write_multiple);
    }
    if (strcmp(key, "twin_socket") == 0) {
        if (peek(p) != '{')
            return -EINVAL;
        c->present |= NPV_VU_CAP_TWIN_SOCKET;
        return parse_object(p, depth + 1, twin_member, c);
    }
    return skip_value(p, depth);
}

static int top_member(struct jp *p, const char *key, void *arg, int depth)
{
    if (strcmp(key, "capabilities") == 0) {
        if (peek(p) != '{')
            return -EINVAL;
        return parse_object(p, depth + 1, caps_member, arg);
    }
    return skip_value(p, depth);
}

int npv_vu_caps_parse(const char *data, size_t len, struct npv_vu_caps *out)
{
    struct npv_vu_caps c;
    npv_vu_caps_default(&c);
    /* The data is NUL-terminated on the wire; anything after the NUL is ignored. */
    const char *nul = len > 0 ? memchr(data, '\0', len) : NULL;
    if (nul != NULL)
        len = (size_t)(nul - data);
    struct jp p = {.s = data, .len = len, .pos = 0};
    if (peek(&p) < 0) {
        *out = c;
        return 0;
    }
    if (parse_object(&p, 1, top_member, &c) < 0)
        return -EINVAL;
    if (peek(&p) >= 0)
        return -EINVAL;
    *out = c;
    return 0;
}

/* Append to buf at *off; a result that does not fit is remembered as *off > len. */
static void put(char *buf, size_t len, size_t *off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t len, size_t *off, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(*off < len ? buf + *off : NULL, *off < len ? len - *off : 0, fmt, ap);
    va_end(ap);
    *off += n < 0 ? len + 1 : (size_t)n;
}

int npv_vu_caps_format(const struct npv_vu_caps *c, char *buf, size_t len)
{
    size_t off = 0;
    const char *sep = "";
    put(buf, len, &off, "{\"capabilities\":{");
    if (c->present & NPV_VU_CAP_MAX_MSG_FDS) {
        put(buf, len, &off, "%s\"max_msg_fds\":%" PRIu32, sep, c->max_msg_fds);
        sep = ",";
    }
    if (c->present & NPV_VU_CAP_MAX_DATA_XFER_SIZE) {
        put(buf, len, &off, "%s\"max_data_xfer_size\":%" PRIu32, sep, c->max_data_xfer_size);
        sep = ",";
    }
    if (c->present & NPV_VU_CAP_MAX_DMA_MAPS) {
        put(buf, len, &off, "%s\"max_dma_maps\":%" PRIu32, sep, c->max_dma_maps);
        sep = ",";
    }
    if (c->present & NPV_VU_CAP_PGSIZES) {
        put(buf, len, &off, "%s\"pgsizes\":%" PRIu64, sep, c->pgsizes);
        sep = ",";
    }
    if (c->present & NPV_VU_CAP_WRITE_MULTIPLE) {
        put(buf, len, &off, "%s\"write_multiple\":%s", sep, c->write_multiple ? "true" : "false");
        sep = ",";
    }
    if (c->present & NPV_VU_CAP_TWIN_SOCKET) {
        put(buf, len, &off, "%s\"twin_socket\":{\"supported\":%s", sep,
            c->twin_socket ? "true" : "false");
        if (c->present & NPV_VU_CAP_TWIN_FD_INDEX)
            put(buf, len, &off, ",\"fd_index\":%" PRIu32, c->twin_fd_index);
        put(buf, len, &off, "}");
    }
    put(buf, len, &off, "}}");
    if (off + 1 > len)
        return -ENOSPC;
    return (int)off + 1;
}

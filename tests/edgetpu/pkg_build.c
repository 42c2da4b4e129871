/* SPDX-License-Identifier: MIT */
/* Small compiled-model files for the loader's tests (pkg_build.h). */
#include <stdlib.h>
#include <string.h>

#include "pkg_build.h"

#define CAP        (1u << 20)
#define MAX_FIELDS 24

/* Positions are absolute in buf (which never moves); data is buf[head, CAP). */
struct fbb {
    uint8_t *buf;
    size_t head;
    size_t tstart;
    unsigned nf;
    struct {
        unsigned id;
        size_t pos;
    } f[MAX_FIELDS];
};

static void fbb_init(struct fbb *b)
{
    b->buf = calloc(CAP, 1);
    b->head = CAP;
    b->nf = 0;
}

static void put_le(uint8_t *p, uint64_t v, size_t w)
{
    for (size_t i = 0; i < w; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static size_t push(struct fbb *b, const void *p, size_t n)
{
    b->head -= n;
    memcpy(b->buf + b->head, p, n);
    return b->head;
}

static size_t push_le(struct fbb *b, uint64_t v, size_t w)
{
    b->head -= w;
    put_le(b->buf + b->head, v, w);
    return b->head;
}

static size_t bytes_vec(struct fbb *b, const void *p, size_t n)
{
    push(b, p, n);
    return push_le(b, n, 4);
}

static size_t string(struct fbb *b, const char *s)
{
    push_le(b, 0, 1);
    push(b, s, strlen(s));
    return push_le(b, strlen(s), 4);
}

/* A vector of references to the objects at pos[0..n). */
static size_t ref_vec(struct fbb *b, const size_t *pos, size_t n)
{
    for (size_t i = n; i-- > 0;) {
        b->head -= 4;
        put_le(b->buf + b->head, pos[i] - b->head, 4);
    }
    return push_le(b, n, 4);
}

static void start(struct fbb *b)
{
    b->tstart = b->head;
    b->nf = 0;
}

static void scalar(struct fbb *b, unsigned id, uint64_t v, size_t w)
{
    b->f[b->nf].id = id;
    b->f[b->nf++].pos = push_le(b, v, w);
}

static void ref(struct fbb *b, unsigned id, size_t target)
{
    b->head -= 4;
    put_le(b->buf + b->head, target - b->head, 4);
    b->f[b->nf].id = id;
    b->f[b->nf++].pos = b->head;
}

static size_t end(struct fbb *b)
{
    size_t table = push_le(b, 0, 4);
    unsigned max = 0;
    for (unsigned i = 0; i < b->nf; i++)
        if (b->f[i].id + 1 > max)
            max = b->f[i].id + 1;
    uint16_t vt[2 + MAX_FIELDS] = {0};
    vt[0] = (uint16_t)(4 + 2 * max);
    vt[1] = (uint16_t)(b->tstart - table);
    for (unsigned i = 0; i < b->nf; i++)
        vt[2 + b->f[i].id] = (uint16_t)(b->f[i].pos - table);
    for (unsigned i = 2 + max; i-- > 0;)
        push_le(b, vt[i], 2);
    put_le(b->buf + table, table - b->head, 4);
    return table;
}

/* Finish with root table root and identifier ident (may be NULL); *size, returns the bytes. */
static uint8_t *finish(struct fbb *b, size_t root, const char *ident, size_t *size)
{
    if (ident != NULL)
        push(b, ident, 4);
    b->head -= 4;
    put_le(b->buf + b->head, root - b->head, 4);
    *size = CAP - b->head;
    uint8_t *out = malloc(*size);
    memcpy(out, b->buf + b->head, *size);
    free(b->buf);
    return out;
}

static size_t layer(struct fbb *b, const char *name, bool output)
{
    size_t n = string(b, name);
    /* NumericsConstants {zero_point 0, dequantization_factor 1} */
    size_t num;
    {
        start(b);
        scalar(b, 0, 128, 4);
        scalar(b, 1, 0x3c000000u, 4); /* 1/128 */
        num = end(b);
    }
    start(b);
    ref(b, 0, n);
    scalar(b, 1, 16, 4);
    scalar(b, 2, 1, 4);
    scalar(b, 3, 1, 4);
    scalar(b, 4, 16, 4);
    ref(b, 5, num);
    scalar(b, 6, 0, 2);
    (void)output;
    return end(b);
}

static size_t field(struct fbb *b, int16_t desc, int32_t batch, const char *name, int16_t pos,
                    int32_t bit)
{
    size_t n = name != NULL ? string(b, name) : 0;
    start(b);
    scalar(b, 0, (uint16_t)desc, 2);
    scalar(b, 1, (uint32_t)batch, 4);
    if (name != NULL)
        ref(b, 2, n);
    scalar(b, 3, (uint16_t)pos, 2);
    size_t meta = end(b);
    start(b);
    ref(b, 0, meta);
    scalar(b, 1, (uint32_t)bit, 4);
    return end(b);
}

static uint8_t *executable(const struct pkg_spec *s, int16_t type, uint64_t token, size_t *size)
{
    struct fbb b;
    fbb_init(&b);
    size_t fo[4];
    fo[3] = field(&b, 0, 0, "out", 1, s->field_bit[3]);
    fo[2] = field(&b, 0, 0, "out", 0, s->field_bit[2]);
    fo[1] = field(&b, 1, s->field_batch, s->field_layer, 1, s->field_bit[1]);
    fo[0] = field(&b, s->field_desc, s->field_batch, s->field_layer, 0, s->field_bit[0]);
    size_t fields = ref_vec(&b, fo, 4);
    uint8_t bits[64];
    for (unsigned i = 0; i < sizeof(bits); i++)
        bits[i] = (uint8_t)(0xa5 ^ i);
    size_t bitstream = bytes_vec(&b, bits, sizeof(bits));
    start(&b);
    ref(&b, 0, bitstream);
    ref(&b, 1, fields);
    size_t chunk = end(&b);
    size_t chunks = ref_vec(&b, &chunk, 1);
    size_t ins[2] = {layer(&b, "in", false), 0};
    unsigned nins = 1;
    if (s->dup_layer) {
        ins[1] = layer(&b, "in", false);
        nins = 2;
    }
    size_t inputs = ref_vec(&b, ins, nins);
    size_t out = layer(&b, "out", true);
    size_t outputs = ref_vec(&b, &out, 1);
    uint8_t params[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    size_t pv = bytes_vec(&b, params, sizeof(params));
    size_t name = string(&b, "model");
    size_t chip = string(&b, "beagle");
    start(&b);
    ref(&b, 1, name);
    scalar(&b, 3, (uint32_t)s->batch, 4);
    scalar(&b, 4, 0, 4);
    ref(&b, 5, chunks);
    ref(&b, 6, pv);
    ref(&b, 8, inputs);
    ref(&b, 9, outputs);
    ref(&b, 10, chip);
    scalar(&b, 13, (uint16_t)type, 2);
    if (token != 0)
        scalar(&b, 14, token, 8);
    if (s->dram_params)
        scalar(&b, 15, 1, 1);
    return finish(&b, end(&b), "DWN1", size);
}

static uint8_t *package(const struct pkg_spec *s, size_t *size)
{
    uint8_t *exe[2];
    size_t esz[2];
    unsigned n = 1;
    if (s->type == -1) {
        exe[0] = executable(s, 1, s->token, &esz[0]);
        exe[1] = executable(s, 2, s->token, &esz[1]);
        n = 2;
    } else {
        exe[0] = executable(s, s->type, 0, &esz[0]);
    }
    struct fbb m;
    fbb_init(&m);
    size_t ev[2];
    for (unsigned i = n; i-- > 0;)
        ev[i] = bytes_vec(&m, exe[i], esz[i]); /* [string] without the NUL: bytes */
    size_t vec = ref_vec(&m, ev, n);
    start(&m);
    ref(&m, 0, vec);
    size_t mlen;
    uint8_t *multi = finish(&m, end(&m), NULL, &mlen);
    for (unsigned i = 0; i < n; i++)
        free(exe[i]);

    struct fbb p;
    fbb_init(&p);
    size_t mc = 0;
    if (s->multi_chip) {
        size_t inner = bytes_vec(&p, multi, mlen);
        start(&p);
        ref(&p, 0, inner);
        size_t sp = end(&p);
        mc = ref_vec(&p, &sp, 1);
    }
    size_t mv = bytes_vec(&p, multi, mlen);
    free(multi);
    start(&p);
    scalar(&p, 0, 13, 4);
    ref(&p, 1, mv);
    if (s->virtual_chip != 0)
        scalar(&p, 5, (uint32_t)s->virtual_chip, 4);
    if (mc != 0)
        ref(&p, 6, mc);
    return finish(&p, end(&p), "DWN1", size);
}

/* FlexBuffers map {"1": 1, "4": package, ["6": [chips...]]}, all 32-bit, laid out forward. */
static uint8_t *custom_options(const struct pkg_spec *s, size_t *size)
{
    size_t plen;
    uint8_t *pkg = package(s, &plen);
    uint8_t *o = calloc(plen + 256, 1);
    size_t at = 0;
    size_t k1 = at;
    memcpy(o + at, "1", 2);
    at += 2;
    size_t k4 = at;
    memcpy(o + at, "4", 2);
    at += 2;
    size_t k6 = at;
    memcpy(o + at, "6", 2);
    at += 2;
    put_le(o + at, plen, 4); /* the string's size */
    at += 4;
    size_t str = at;
    memcpy(o + at, pkg, plen);
    at += plen;
    o[at++] = 0;
    free(pkg);
    size_t vec6 = 0;
    if (s->nr_chips != 0) {
        put_le(o + at, s->nr_chips, 4);
        at += 4;
        vec6 = at;
        for (unsigned i = 0; i < s->nr_chips; i++, at += 4)
            put_le(o + at, i, 4);
        for (unsigned i = 0; i < s->nr_chips; i++)
            o[at++] = (1 << 2) | 2; /* INT, 32-bit */
    }
    unsigned count = s->nr_chips != 0 ? 3 : 2;
    size_t keys_pos[3] = {k1, k4, k6};
    put_le(o + at, count, 4);
    at += 4;
    size_t keys = at;
    for (unsigned i = 0; i < count; i++, at += 4)
        put_le(o + at, at - keys_pos[i], 4);
    put_le(o + at, at - keys, 4); /* keys vector offset */
    at += 4;
    put_le(o + at, 4, 4); /* keys width */
    at += 4;
    put_le(o + at, count, 4);
    at += 4;
    size_t map = at;
    put_le(o + at, 1, 4); /* "1": 1 */
    at += 4;
    put_le(o + at, at - str, 4); /* "4": the package */
    at += 4;
    if (count == 3) {
        put_le(o + at, at - vec6, 4);
        at += 4;
    }
    o[at++] = (1 << 2) | 2; /* INT */
    o[at++] = (5 << 2) | 2; /* STRING, size 32-bit */
    if (count == 3)
        o[at++] = (10 << 2) | 2; /* VECTOR */
    put_le(o + at, at - map, 4); /* the root: the map */
    at += 4;
    o[at++] = (9 << 2) | 2; /* MAP, 32-bit */
    o[at++] = 4;            /* root width */
    *size = at;
    return o;
}

void pkg_spec_default(struct pkg_spec *s)
{
    memset(s, 0, sizeof(*s));
    s->type = 0;
    s->batch = 1;
    s->nr_ops = 1;
    s->field_bit[0] = 3;
    s->field_bit[1] = 40;
    s->field_bit[2] = 77;
    s->field_bit[3] = 200;
    s->field_layer = "in";
    s->field_desc = 1;
    s->token = 0x1234;
}

size_t pkg_build(const struct pkg_spec *s, uint8_t **out)
{
    size_t olen;
    uint8_t *opts = custom_options(s, &olen);
    struct fbb b;
    fbb_init(&b);
    size_t ov = bytes_vec(&b, opts, olen);
    free(opts);
    size_t ops[4];
    for (unsigned i = 0; i < s->nr_ops && i < 4; i++) {
        start(&b);
        scalar(&b, 0, 0, 4);
        ref(&b, 5, ov);
        ops[i] = end(&b);
    }
    size_t opv = ref_vec(&b, ops, s->nr_ops);
    start(&b);
    ref(&b, 3, opv);
    size_t sg = end(&b);
    size_t sgv = ref_vec(&b, &sg, 1);
    size_t cc = string(&b, "edgetpu-custom-op");
    start(&b);
    ref(&b, 1, cc);
    scalar(&b, 3, 32, 4); /* BuiltinOperator CUSTOM */
    size_t code = end(&b);
    size_t codes = ref_vec(&b, &code, 1);
    start(&b);
    scalar(&b, 0, 3, 4);
    ref(&b, 1, codes);
    ref(&b, 2, sgv);
    size_t size;
    *out = finish(&b, end(&b), "TFL3", &size);
    return size;
}

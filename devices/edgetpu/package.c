/* SPDX-License-Identifier: MIT */
/*
 * Edge TPU compiled models: load, accessors, link, dequantize
 * (npuvfio/edgetpu_model.h). No device I/O.
 *
 * Sources (public, read for facts):
 *  - TensorFlow Lite schema (tensorflow/lite/schema/schema.fbs): Model
 *    {version 0, operator_codes 1, subgraphs 2}, OperatorCode {custom_code 1},
 *    SubGraph {operators 3}, Operator {opcode_index 0, custom_options 5,
 *    large_custom_options_size 10}; file identifier "TFL3".
 *  - libedgetpu tflite/custom_op_data.cc DeserializeCustomOpData: the custom
 *    options are a FlexBuffers map, "4" the serialized executable (package),
 *    "6" the chip of each executable, "7" the executables after the first.
 *  - libedgetpu executable/executable.fbs: Package, MultiExecutable,
 *    Executable, InstructionBitstream, FieldOffset, Meta, Layer (field ids
 *    are the declaration order, a union taking two).
 *  - libedgetpu driver/executable_util.cc: LinkBatchedAddress (input/output by
 *    layer name and batch), LinkScratchAddress (batch 0 only),
 *    LinkParameterAddress, CopyUint32 (32 bits LSB first from a bit offset).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <npuvfio/failpoint.h>

#include "flatbuf.h"
#include "package_internal.h"

/* Model choice: a compiled model larger than this is refused (the largest real ones are MBs). */
#define PKG_MAX_FILE (1ull << 30)

/* The custom operator's name (libedgetpu tflite/custom_op.h kCustomOp). */
static const char EDGETPU_OP[] = "edgetpu-custom-op";

/* TFLite schema: BuiltinOperator CUSTOM. */
#define TFL_BUILTIN_CUSTOM 32

/* Field ids, executable.fbs declaration order. */
enum { PKG_MULTI_EXE = 1, PKG_VIRTUAL_CHIP = 5, PKG_MULTI_CHIP = 6 };
enum { MEX_EXECUTABLES = 0 };
enum {
    EXE_NAME = 1,
    EXE_BATCH = 3,
    EXE_SCRATCH = 4,
    EXE_BITSTREAMS = 5,
    EXE_PARAMETERS = 6,
    EXE_INPUTS = 8,
    EXE_OUTPUTS = 9,
    EXE_CHIP = 10,
    EXE_TYPE = 13,
    EXE_TOKEN = 14,
    EXE_DRAM_PARAMS = 15,
};
enum { IB_BITSTREAM = 0, IB_FIELDS = 1 };
enum { FO_META = 0, FO_BIT = 1 };
enum { META_DESC = 0, META_BATCH = 1, META_NAME = 2, META_POSITION = 3 };
enum {
    LAYER_NAME = 0,
    LAYER_SIZE = 1,
    LAYER_Y = 2,
    LAYER_X = 3,
    LAYER_Z = 4,
    LAYER_NUMERICS = 5,
    LAYER_DTYPE = 6,
    LAYER_EXEC_COUNT = 9,
    LAYER_SHAPE = 11,
};
enum { NUM_ZERO_POINT = 0, NUM_SCALE = 1 };
enum { SHAPE_DIMENSION = 0 };

struct load {
    struct npv_ctx *ctx;
    char *why;
    size_t why_len;
    size_t budget; /* vector elements left (flatbuf.h) */
    struct npv_edgetpu_model *m;
};

static int say(struct load *ld, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int say(struct load *ld, int err, const char *fmt, ...)
{
    if (ld->why != NULL && ld->why_len != 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ld->why, ld->why_len, fmt, ap);
        va_end(ap);
    }
    return err;
}

/* A reader's failure, with where it happened. */
static int fb_said(struct load *ld, struct fb *fb, const char *where)
{
    return say(ld, fb->err, "%s: %s", where, fb->why != NULL ? fb->why : "malformed");
}

static void *pkg_calloc(struct load *ld, size_t n, size_t size)
{
    if (npv_failpoint_check(ld->ctx, NPV_FAIL_ALLOC) < 0)
        return NULL;
    if (n == 0)
        n = 1;
    return calloc(n, size);
}

void edgetpu_pkg_put32(uint8_t *buf, uint32_t bit, uint32_t v)
{
    for (uint32_t i = 0; i < 32; i++) {
        uint32_t at = bit + i;
        uint8_t mask = (uint8_t)(1u << (at % 8));
        if ((v >> i) & 1u)
            buf[at / 8] |= mask;
        else
            buf[at / 8] &= (uint8_t)~mask;
    }
}

uint32_t edgetpu_pkg_get32(const uint8_t *buf, uint32_t bit)
{
    uint32_t v = 0;
    for (uint32_t i = 0; i < 32; i++) {
        uint32_t at = bit + i;
        v |= (uint32_t)((buf[at / 8] >> (at % 8)) & 1u) << i;
    }
    return v;
}

/* ---- TFLite: the one edgetpu-custom-op's custom options ---- */

/* An [int] vector of tensor indices: each < limit (or -1, an absent optional tensor). */
static void index_vector(struct fb *fb, const struct fb_table *t, unsigned id, uint32_t limit)
{
    struct fb_vec v;
    fb_vector(fb, t, id, 4, &v);
    for (uint32_t i = 0; fb->err == 0 && i < v.len; i++) {
        int32_t x = (int32_t)fb_vec_u32(fb, &v, i);
        if (x < -1 || (x >= 0 && (uint32_t)x >= limit))
            fb_fail(fb, -EBADMSG, "a tensor index out of range");
    }
}

/*
 * The rest of the TFLite model, verified as the TFLite schema lays it out, so
 * that no part of the file is taken unread: description 3, buffers 4 (Buffer
 * {data 0, offset 1, size 2}), metadata_buffer 5, metadata 6 (Metadata {name 0,
 * buffer 1}), signature_defs 7 (SignatureDef {inputs 0, outputs 1 of TensorMap
 * {name 0, tensor_index 1}, signature_key 2, subgraph_index 4}); per subgraph
 * tensors 0 (Tensor {shape 0, buffer 2, name 3, quantization 4
 * (QuantizationParameters {min 0, max 1, scale 2, zero_point 3}), sparsity 6,
 * shape_signature 7}), inputs 1, outputs 2, name 4; per operator inputs 1,
 * outputs 2, builtin_options 4, intermediates 8.
 */
static void verify_tflite(struct fb *fb, const struct fb_table *model,
                          const struct fb_vec *subgraphs)
{
    struct fb_vec buffers, meta, sigs, v;
    fb_string(fb, model, 3, NULL);
    fb_vector(fb, model, 4, 4, &buffers);
    for (uint32_t i = 0; fb->err == 0 && i < buffers.len; i++) {
        struct fb_table b;
        if (fb_vec_table(fb, &buffers, i, &b)) {
            fb_vector(fb, &b, 0, 1, &v);
            uint64_t off = fb_u64(fb, &b, 1, 0), size = fb_u64(fb, &b, 2, 0);
            if (off != 0 && (off > fb->n || size > fb->n - off))
                fb_fail(fb, -EBADMSG, "a buffer lies outside the file");
        }
    }
    fb_vector(fb, model, 5, 4, &v);
    for (uint32_t i = 0; fb->err == 0 && i < v.len; i++)
        if (fb_vec_u32(fb, &v, i) >= buffers.len)
            fb_fail(fb, -EBADMSG, "a metadata buffer index out of range");
    fb_vector(fb, model, 6, 4, &meta);
    for (uint32_t i = 0; fb->err == 0 && i < meta.len; i++) {
        struct fb_table t;
        if (fb_vec_table(fb, &meta, i, &t)) {
            fb_string(fb, &t, 0, NULL);
            if (fb_u32(fb, &t, 1, 0) >= buffers.len)
                fb_fail(fb, -EBADMSG, "a metadata buffer index out of range");
        }
    }
    fb_vector(fb, model, 7, 4, &sigs);
    for (uint32_t i = 0; fb->err == 0 && i < sigs.len; i++) {
        struct fb_table t, tm;
        if (!fb_vec_table(fb, &sigs, i, &t))
            break;
        for (unsigned id = 0; id < 2; id++) {
            fb_vector(fb, &t, id, 4, &v);
            for (uint32_t k = 0; fb->err == 0 && k < v.len; k++)
                if (fb_vec_table(fb, &v, k, &tm))
                    fb_string(fb, &tm, 0, NULL);
        }
        fb_string(fb, &t, 2, NULL);
        if (fb_u32(fb, &t, 4, 0) >= subgraphs->len)
            fb_fail(fb, -EBADMSG, "a signature names a subgraph out of range");
    }
    for (uint32_t s = 0; fb->err == 0 && s < subgraphs->len; s++) {
        struct fb_table sg, t, q;
        struct fb_vec tensors, ops;
        if (!fb_vec_table(fb, subgraphs, s, &sg))
            break;
        fb_vector(fb, &sg, 0, 4, &tensors);
        for (uint32_t i = 0; fb->err == 0 && i < tensors.len; i++) {
            if (!fb_vec_table(fb, &tensors, i, &t))
                break;
            fb_vector(fb, &t, 0, 4, &v);
            if (fb_u32(fb, &t, 2, 0) >= buffers.len && buffers.len != 0)
                fb_fail(fb, -EBADMSG, "a tensor's buffer index out of range");
            fb_string(fb, &t, 3, NULL);
            if (fb_table(fb, &t, 4, &q)) {
                fb_vector(fb, &q, 0, 4, &v);
                fb_vector(fb, &q, 1, 4, &v);
                fb_vector(fb, &q, 2, 4, &v);
                fb_vector(fb, &q, 3, 8, &v);
            }
            fb_vector(fb, &t, 7, 4, &v);
        }
        index_vector(fb, &sg, 1, tensors.len);
        index_vector(fb, &sg, 2, tensors.len);
        fb_string(fb, &sg, 4, NULL);
        fb_vector(fb, &sg, 3, 4, &ops);
        for (uint32_t o = 0; fb->err == 0 && o < ops.len; o++) {
            if (!fb_vec_table(fb, &ops, o, &t))
                break;
            index_vector(fb, &t, 1, tensors.len);
            index_vector(fb, &t, 2, tensors.len);
            index_vector(fb, &t, 8, tensors.len);
            if (fb_u8(fb, &t, 3, 0) != 0)
                fb_table(fb, &t, 4, &q);
        }
    }
}

static int find_custom_op(struct load *ld, struct fb *fb, struct fb_vec *opts)
{
    struct fb_table model;
    struct fb_vec codes, subgraphs;
    unsigned found = 0;
    if (!fb_root(fb, "TFL3", &model))
        return fb_said(ld, fb, "TFLite model");
    fb_vector(fb, &model, 1, 4, &codes);
    fb_vector(fb, &model, 2, 4, &subgraphs);
    for (uint32_t i = 0; fb->err == 0 && i < codes.len; i++) {
        struct fb_table code;
        if (fb_vec_table(fb, &codes, i, &code))
            fb_string(fb, &code, 1, NULL);
    }
    verify_tflite(fb, &model, &subgraphs);
    for (uint32_t s = 0; fb->err == 0 && s < subgraphs.len; s++) {
        struct fb_table sg;
        struct fb_vec ops;
        if (!fb_vec_table(fb, &subgraphs, s, &sg))
            break;
        fb_vector(fb, &sg, 3, 4, &ops);
        for (uint32_t o = 0; fb->err == 0 && o < ops.len; o++) {
            struct fb_table op, code;
            if (!fb_vec_table(fb, &ops, o, &op))
                break;
            uint32_t idx = fb_u32(fb, &op, 0, 0);
            if (fb->err == 0 && idx >= codes.len)
                return say(ld, -EBADMSG,
                           "TFLite model: operator %u of subgraph %u names "
                           "operator code %u of %u",
                           o, s, idx, codes.len);
            if (!fb_vec_table(fb, &codes, idx, &code))
                break;
            const char *custom = fb_string(fb, &code, 1, NULL);
            if (custom == NULL || strcmp(custom, EDGETPU_OP) != 0)
                continue;
            if (++found > 1)
                return say(ld, -ENOTSUP,
                           "TFLite model: more than one %s operator (a model "
                           "partly on the CPU between them): not supported",
                           EDGETPU_OP);
            if (!fb_vector(fb, &op, 5, 1, opts) && fb->err == 0) {
                if (fb_u64(fb, &op, 10, 0) != 0)
                    return say(ld, -ENOTSUP,
                               "TFLite model: the %s options lie outside the "
                               "flatbuffer (a model over 2 GB): not supported",
                               EDGETPU_OP);
                return say(ld, -EBADMSG, "TFLite model: the %s has no custom options", EDGETPU_OP);
            }
        }
    }
    if (fb->err != 0)
        return fb_said(ld, fb, "TFLite model");
    if (found == 0)
        return say(ld, -ENOENT, "TFLite model: no %s operator (not compiled for the Edge TPU)",
                   EDGETPU_OP);
    return 0;
}

/* The custom options (FlexBuffers map): the package bytes under "4". */
static int package_bytes(struct load *ld, const uint8_t *b, size_t n, size_t *pos, size_t *len)
{
    struct fb fb;
    struct fx root, v;
    fb_init(&fb, b, n, &ld->budget);
    if (!fx_root(&fb, &root))
        return fb_said(ld, &fb, "custom options");
    if (!fx_map_find(&fb, &root, "4", &v)) {
        if (fb.err != 0)
            return fb_said(ld, &fb, "custom options");
        return say(ld, -EBADMSG, "custom options: no executable (key \"4\")");
    }
    if (!fx_bytes(&fb, &v, pos, len))
        return fb_said(ld, &fb, "custom options: executable");
    uint64_t count;
    if (fx_map_find(&fb, &root, "6", &v) && fx_vec_len(&fb, &v, &count) && count > 1)
        return say(ld, -ENOTSUP,
                   "custom options: executables for %llu chips: only one "
                   "chip's is supported",
                   (unsigned long long)count);
    if (fx_map_find(&fb, &root, "7", &v) && fx_vec_len(&fb, &v, &count) && count > 0)
        return say(ld, -ENOTSUP,
                   "custom options: %llu further executables for other chips: "
                   "not supported",
                   (unsigned long long)count);
    if (fb.err != 0)
        return fb_said(ld, &fb, "custom options");
    return 0;
}

/* ---- Executable ---- */

static int read_layer(struct load *ld, struct fb *fb, const struct fb_table *t,
                      struct npv_edgetpu_layer *l, const char *what, uint32_t i)
{
    struct fb_table num, shape;
    l->name = fb_string(fb, t, LAYER_NAME, NULL);
    int32_t size = fb_i32(fb, t, LAYER_SIZE, 0);
    int32_t y = fb_i32(fb, t, LAYER_Y, 0), x = fb_i32(fb, t, LAYER_X, 0);
    int32_t z = fb_i32(fb, t, LAYER_Z, 0);
    if (fb_table(fb, t, LAYER_NUMERICS, &num)) {
        l->zero_point = fb_i32(fb, &num, NUM_ZERO_POINT, 0);
        l->scale = fb_f32(fb, &num, NUM_SCALE, 0.0f);
    }
    int16_t dtype = fb_i16(fb, t, LAYER_DTYPE, 0);
    int32_t count = fb_i32(fb, t, LAYER_EXEC_COUNT, 1);
    if (fb_table(fb, t, LAYER_SHAPE, &shape)) {
        struct fb_vec dims;
        fb_vector(fb, &shape, SHAPE_DIMENSION, 8, &dims);
        if (dims.len > NPV_EDGETPU_MAX_DIMS)
            return say(ld, -ENOTSUP, "%s layer %u: %u dimensions (at most %d)", what, i, dims.len,
                       NPV_EDGETPU_MAX_DIMS);
        /* Range is a struct of two ints: read the vector as 2 * len words. */
        struct fb_vec words = {dims.pos, 2 * dims.len};
        for (uint32_t d = 0; fb->err == 0 && d < dims.len; d++) {
            int32_t start = (int32_t)fb_vec_u32(fb, &words, 2 * d);
            int32_t end = (int32_t)fb_vec_u32(fb, &words, 2 * d + 1);
            if (end < start || (int64_t)end - start + 1 > INT32_MAX)
                return say(ld, -EBADMSG, "%s layer %u: dimension %u is [%d, %d]", what, i, d, start,
                           end);
            l->dims[d] = (uint32_t)(end - start + 1);
        }
        l->nr_dims = dims.len;
    }
    if (fb->err != 0)
        return fb_said(ld, fb, what);
    if (l->name == NULL)
        return say(ld, -EBADMSG, "%s layer %u has no name", what, i);
    if (size <= 0 || y <= 0 || x <= 0 || z <= 0 || count <= 0)
        return say(ld, -EBADMSG, "%s layer %u (%s): size %d, dims %dx%dx%d, %d executions", what, i,
                   l->name, size, y, x, z, count);
    if (!(dtype >= 0 && dtype <= 5) && dtype != 8 && dtype != 9)
        return say(ld, -ENOTSUP, "%s layer %u (%s): unknown data type %d", what, i, l->name, dtype);
    l->size_bytes = (uint32_t)size;
    l->y_dim = (uint32_t)y;
    l->x_dim = (uint32_t)x;
    l->z_dim = (uint32_t)z;
    l->data_type = (uint32_t)dtype;
    l->execution_count = (uint32_t)count;
    return 0;
}

static int read_layers(struct load *ld, struct fb *fb, const struct fb_table *exe, unsigned id,
                       const char *what, struct npv_edgetpu_layer **out, uint32_t *nr)
{
    struct fb_vec v;
    fb_vector(fb, exe, id, 4, &v);
    if (fb->err != 0)
        return fb_said(ld, fb, what);
    struct npv_edgetpu_layer *ls = pkg_calloc(ld, v.len, sizeof(*ls));
    if (ls == NULL)
        return say(ld, -ENOMEM, "%s layers: out of memory", what);
    *out = ls;
    for (uint32_t i = 0; i < v.len; i++) {
        struct fb_table t;
        if (!fb_vec_table(fb, &v, i, &t))
            return fb_said(ld, fb, what);
        int r = read_layer(ld, fb, &t, &ls[i], what, i);
        if (r < 0)
            return r;
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(ls[j].name, ls[i].name) == 0)
                return say(ld, -EBADMSG, "%s layers %u and %u share the name %s", what, j, i,
                           ls[i].name);
    }
    *nr = v.len;
    return 0;
}

static int find_layer(const struct npv_edgetpu_layer *ls, uint32_t nr, const char *name)
{
    for (uint32_t i = 0; i < nr; i++)
        if (strcmp(ls[i].name, name) == 0)
            return (int)i;
    return -1;
}

static const char *const base_names[] = {"output activation", "input activation", "parameter",
                                         "scratch"};

static int read_field(struct load *ld, struct fb *fb, const struct fb_table *t,
                      struct npv_edgetpu_model_exe *e, size_t chunk_size, uint8_t *used,
                      struct npv_edgetpu_model_field *f, uint32_t c, uint32_t i)
{
    struct fb_table meta;
    if (!fb_table(fb, t, FO_META, &meta)) {
        if (fb->err != 0)
            return fb_said(ld, fb, "field offset");
        return say(ld, -EBADMSG, "chunk %u field %u has no meta", c, i);
    }
    int32_t bit = fb_i32(fb, t, FO_BIT, 0);
    int16_t desc = fb_i16(fb, &meta, META_DESC, 0);
    int32_t batch = fb_i32(fb, &meta, META_BATCH, 0);
    const char *name = fb_string(fb, &meta, META_NAME, NULL);
    int16_t pos = fb_i16(fb, &meta, META_POSITION, 0);
    if (fb->err != 0)
        return fb_said(ld, fb, "field offset");
    if (desc < 0 || desc > NPV_EDGETPU_BASE_SCRATCH)
        return say(ld, -EBADMSG, "chunk %u field %u: unknown base address kind %d", c, i, desc);
    if (pos != NPV_EDGETPU_LOWER_32BIT && pos != NPV_EDGETPU_UPPER_32BIT)
        return say(ld, -EBADMSG, "chunk %u field %u: unknown position %d", c, i, pos);
    if (bit < 0 || (uint64_t)bit + 32 > (uint64_t)chunk_size * 8)
        return say(ld, -EBADMSG, "chunk %u field %u: bits [%d, +32) outside the chunk's %zu bytes",
                   c, i, bit, chunk_size);
    for (uint32_t b = (uint32_t)bit; b < (uint32_t)bit + 32; b++) {
        if (used[b / 8] & (1u << (b % 8)))
            return say(ld, -EBADMSG, "chunk %u field %u overlaps another at bit %u", c, i, b);
        used[b / 8] |= (uint8_t)(1u << (b % 8));
    }
    f->offset_bit = (uint32_t)bit;
    f->base = (uint8_t)desc;
    f->half = (uint8_t)pos;
    if (desc == NPV_EDGETPU_BASE_INPUT || desc == NPV_EDGETPU_BASE_OUTPUT) {
        bool in = desc == NPV_EDGETPU_BASE_INPUT;
        int l = name == NULL ? -1
                             : find_layer(in ? e->inputs : e->outputs,
                                          in ? e->info.nr_inputs : e->info.nr_outputs, name);
        if (l < 0)
            return say(ld, -EBADMSG, "chunk %u field %u: %s of a layer %s the executable lacks", c,
                       i, base_names[desc], name != NULL ? name : "(unnamed)");
        if (batch < 0 || (uint32_t)batch >= e->info.batch_size)
            return say(ld, -EBADMSG, "chunk %u field %u: batch %d of %u", c, i, batch,
                       e->info.batch_size);
        f->layer = (uint16_t)l;
        f->batch = (uint32_t)batch;
    } else if (batch != 0) {
        /* libedgetpu LinkScratchAddress: CHECK_EQ(batch, 0); parameters carry no batch. */
        return say(ld, -EBADMSG, "chunk %u field %u: %s with batch %d", c, i, base_names[desc],
                   batch);
    }
    return 0;
}

static int read_chunks(struct load *ld, struct fb *fb, const struct fb_table *exe,
                       struct npv_edgetpu_model_exe *e)
{
    struct fb_vec v;
    fb_vector(fb, exe, EXE_BITSTREAMS, 4, &v);
    if (fb->err != 0)
        return fb_said(ld, fb, "instruction bitstreams");
    if (v.len == 0)
        return say(ld, -EBADMSG, "executable without instruction bitstreams");
    e->chunks = pkg_calloc(ld, v.len, sizeof(*e->chunks));
    if (e->chunks == NULL)
        return say(ld, -ENOMEM, "chunks: out of memory");
    /* First pass: the chunks and how many fields in all. */
    struct fb_vec *fvs = pkg_calloc(ld, v.len, sizeof(*fvs));
    if (fvs == NULL)
        return say(ld, -ENOMEM, "chunks: out of memory");
    size_t total = 0, biggest = 0;
    int r = 0;
    for (uint32_t c = 0; c < v.len; c++) {
        struct fb_table t;
        struct fb_vec bits;
        if (!fb_vec_table(fb, &v, c, &t))
            break;
        fb_vector(fb, &t, IB_BITSTREAM, 1, &bits);
        fb_vector(fb, &t, IB_FIELDS, 4, &fvs[c]);
        if (fb->err != 0)
            break;
        if (bits.len == 0) {
            r = say(ld, -EBADMSG, "chunk %u has no bitstream", c);
            goto out;
        }
        e->chunks[c].bitstream = fb_vec_bytes(fb, &bits);
        e->chunks[c].size = bits.len;
        total += fvs[c].len;
        if (bits.len > biggest)
            biggest = bits.len;
    }
    if (fb->err != 0) {
        r = fb_said(ld, fb, "instruction bitstreams");
        goto out;
    }
    e->info.nr_chunks = v.len;
    e->fields = pkg_calloc(ld, total, sizeof(*e->fields));
    uint8_t *used = pkg_calloc(ld, biggest, 1); /* one bit per bit of a chunk */
    if (e->fields == NULL || used == NULL) {
        free(used);
        r = say(ld, -ENOMEM, "fields: out of memory");
        goto out;
    }
    struct npv_edgetpu_model_field *f = e->fields;
    for (uint32_t c = 0; r == 0 && c < v.len; c++) {
        memset(used, 0, e->chunks[c].size);
        e->chunks[c].fields = f;
        e->chunks[c].nr_fields = fvs[c].len;
        for (uint32_t i = 0; r == 0 && i < fvs[c].len; i++) {
            struct fb_table t;
            if (!fb_vec_table(fb, &fvs[c], i, &t))
                r = fb_said(ld, fb, "field offsets");
            else
                r = read_field(ld, fb, &t, e, e->chunks[c].size, used, f++, c, i);
        }
    }
    free(used);
out:
    free(fvs);
    return r;
}

static int read_executable(struct load *ld, const uint8_t *b, size_t n,
                           struct npv_edgetpu_model_exe *e, uint32_t idx)
{
    struct fb fb;
    struct fb_table t;
    struct fb_vec params;
    fb_init(&fb, b, n, &ld->budget);
    if (!fb_root(&fb, NULL, &t))
        return fb_said(ld, &fb, "executable");
    const char *name = fb_string(&fb, &t, EXE_NAME, NULL);
    const char *chip = fb_string(&fb, &t, EXE_CHIP, NULL);
    int32_t batch = fb_i32(&fb, &t, EXE_BATCH, 0);
    int32_t scratch = fb_i32(&fb, &t, EXE_SCRATCH, 0);
    fb_vector(&fb, &t, EXE_PARAMETERS, 1, &params);
    int16_t type = fb_i16(&fb, &t, EXE_TYPE, NPV_EDGETPU_EXE_STAND_ALONE);
    uint64_t token = fb_u64(&fb, &t, EXE_TOKEN, 0);
    uint8_t dram = fb_u8(&fb, &t, EXE_DRAM_PARAMS, 0);
    if (fb.err != 0)
        return fb_said(ld, &fb, "executable");
    if (dram != 0)
        return say(ld, -ENOTSUP,
                   "executable %u keeps its parameters in TPU DRAM "
                   "(use_tpu_dram_for_parameters): not supported (PCIe Edge TPU "
                   "has no DRAM)",
                   idx);
    if (type < NPV_EDGETPU_EXE_STAND_ALONE || type > NPV_EDGETPU_EXE_EXECUTION_ONLY)
        return say(ld, -ENOTSUP, "executable %u: unknown type %d", idx, type);
    /* Model choice: batch 0 (absent) is refused, like a negative one: a layer needs a batch. */
    if (batch <= 0 || batch > 65536)
        return say(ld, -EBADMSG, "executable %u: batch size %d", idx, batch);
    if (scratch < 0)
        return say(ld, -EBADMSG, "executable %u: scratch size %d", idx, scratch);
    e->info.type = (uint32_t)type;
    e->info.name = name != NULL ? name : "";
    e->info.chip = chip != NULL ? chip : "";
    e->info.batch_size = (uint32_t)batch;
    e->info.scratch_size = (uint64_t)scratch;
    e->info.parameters = fb_vec_bytes(&fb, &params);
    e->info.parameters_size = params.len;
    e->info.caching_token = token;
    int r = read_layers(ld, &fb, &t, EXE_INPUTS, "input", &e->inputs, &e->info.nr_inputs);
    if (r == 0)
        r = read_layers(ld, &fb, &t, EXE_OUTPUTS, "output", &e->outputs, &e->info.nr_outputs);
    if (r == 0)
        r = read_chunks(ld, &fb, &t, e);
    return r;
}

/* ---- Package ---- */

static int read_package(struct load *ld, const uint8_t *b, size_t n)
{
    struct npv_edgetpu_model *m = ld->m;
    struct fb fb, mfb;
    struct fb_table pkg, mex;
    struct fb_vec multi, chips, exes;
    fb_init(&fb, b, n, &ld->budget);
    if (!fb_root(&fb, "DWN1", &pkg))
        return fb_said(ld, &fb, "DarwiNN package");
    int32_t vchip = fb_i32(&fb, &pkg, PKG_VIRTUAL_CHIP, 0);
    fb_vector(&fb, &pkg, PKG_MULTI_CHIP, 4, &chips);
    fb_vector(&fb, &pkg, PKG_MULTI_EXE, 1, &multi);
    if (fb.err != 0)
        return fb_said(ld, &fb, "DarwiNN package");
    if (vchip != 0 || chips.len != 0)
        return say(ld, -ENOTSUP,
                   "DarwiNN package for several chips (virtual chip %d, %u chip "
                   "packages): only single-chip packages are supported",
                   vchip, chips.len);
    if (multi.len == 0)
        return say(ld, -ENOENT, "DarwiNN package without executables");
    fb_init(&mfb, fb_vec_bytes(&fb, &multi), multi.len, &ld->budget);
    if (!fb_root(&mfb, NULL, &mex))
        return fb_said(ld, &mfb, "multi-executable");
    fb_vector(&mfb, &mex, MEX_EXECUTABLES, 4, &exes);
    if (mfb.err != 0)
        return fb_said(ld, &mfb, "multi-executable");
    if (exes.len == 0)
        return say(ld, -ENOENT, "DarwiNN package without executables");
    if (exes.len > PKG_MAX_EXES)
        return say(ld, -ENOTSUP, "%u executables in the package (at most one of each type)",
                   exes.len);
    struct npv_edgetpu_model_exe *by_type[PKG_MAX_EXES] = {NULL, NULL, NULL};
    for (uint32_t i = 0; i < exes.len; i++) {
        struct fb_vec bytes;
        if (!fb_vec_bytevec(&mfb, &exes, i, &bytes))
            return fb_said(ld, &mfb, "multi-executable");
        struct npv_edgetpu_model_exe *e = &m->exes[m->nr_exes++];
        int r = read_executable(ld, fb_vec_bytes(&mfb, &bytes), bytes.len, e, i);
        if (r < 0)
            return r;
        if (by_type[e->info.type] != NULL)
            return say(ld, -ENOTSUP, "two executables of type %u in the package", e->info.type);
        by_type[e->info.type] = e;
    }
    /*
     * libedgetpu driver/package_registry.cc ExtractExecutables and
     * Get{Main,PC}ExecutableFromExecutableMap: one executable is the main one
     * whatever its type; two are PARAMETER_CACHING + EXECUTION_ONLY (main the
     * latter); three are all types and the STAND_ALONE one runs, no caching.
     */
    struct npv_edgetpu_model_exe *cache = by_type[NPV_EDGETPU_EXE_PARAMETER_CACHING];
    struct npv_edgetpu_model_exe *exec = by_type[NPV_EDGETPU_EXE_EXECUTION_ONLY];
    if (m->nr_exes == 1) {
        m->main = &m->exes[0];
    } else if (m->nr_exes == 2) {
        if (cache == NULL || exec == NULL)
            return say(ld, -ENOTSUP,
                       "two executables that are not parameter-caching and "
                       "execution-only");
        /* Model choice: a caching executable needs a token to tell caches apart. */
        if (cache->info.caching_token == 0)
            return say(ld, -EBADMSG, "parameter-caching executable without a token");
        m->main = exec;
        m->caching = cache;
    } else {
        m->main = by_type[NPV_EDGETPU_EXE_STAND_ALONE];
    }
    return 0;
}

static void model_free(struct npv_edgetpu_model *m)
{
    for (unsigned i = 0; i < PKG_MAX_EXES; i++) {
        free(m->exes[i].chunks);
        free(m->exes[i].fields);
        free(m->exes[i].inputs);
        free(m->exes[i].outputs);
    }
    free(m->file);
    free(m);
}

static int load_copy(struct load *ld, const void *data, size_t size, struct npv_edgetpu_model **out)
{
    if (size > PKG_MAX_FILE)
        return say(ld, -EFBIG, "%zu bytes: larger than a compiled model may be", size);
    struct npv_edgetpu_model *m = pkg_calloc(ld, 1, sizeof(*m));
    if (m == NULL)
        return say(ld, -ENOMEM, "out of memory");
    m->file = pkg_calloc(ld, size, 1);
    if (m->file == NULL) {
        free(m);
        return say(ld, -ENOMEM, "out of memory");
    }
    if (size != 0)
        memcpy(m->file, data, size);
    m->size = size;
    ld->m = m;
    ld->budget = size;

    struct fb fb;
    struct fb_vec opts;
    size_t pos = 0, len = 0;
    fb_init(&fb, m->file, size, &ld->budget);
    int r = find_custom_op(ld, &fb, &opts);
    if (r == 0)
        r = package_bytes(ld, fb_vec_bytes(&fb, &opts), opts.len, &pos, &len);
    if (r == 0)
        r = read_package(ld, fb_vec_bytes(&fb, &opts) + pos, len);
    if (r < 0) {
        model_free(m);
        return r;
    }
    *out = m;
    return 0;
}

int npv_edgetpu_model_load_mem(struct npv_ctx *ctx, const void *data, size_t size,
                               struct npv_edgetpu_model **out, char *why, size_t why_len)
{
    struct load ld = {.ctx = ctx, .why = why, .why_len = why_len};
    if (why != NULL && why_len != 0)
        why[0] = '\0';
    if ((data == NULL && size != 0) || out == NULL)
        return say(&ld, -EINVAL, "NULL argument");
    return load_copy(&ld, data, size, out);
}

int npv_edgetpu_model_load(struct npv_ctx *ctx, const char *path, struct npv_edgetpu_model **out,
                           char *why, size_t why_len)
{
    struct load ld = {.ctx = ctx, .why = why, .why_len = why_len};
    if (why != NULL && why_len != 0)
        why[0] = '\0';
    if (path == NULL || out == NULL)
        return say(&ld, -EINVAL, "NULL argument");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return say(&ld, -errno, "%s: %s", path, strerror(errno));
    struct stat st;
    int r;
    if (fstat(fd, &st) < 0) {
        r = say(&ld, -errno, "%s: %s", path, strerror(errno));
        goto out_close;
    }
    if (!S_ISREG(st.st_mode)) {
        r = say(&ld, -EINVAL, "%s: not a regular file", path);
        goto out_close;
    }
    if ((uint64_t)st.st_size > PKG_MAX_FILE) {
        r = say(&ld, -EFBIG, "%s: larger than a compiled model may be", path);
        goto out_close;
    }
    size_t size = (size_t)st.st_size;
    uint8_t *buf = pkg_calloc(&ld, size, 1);
    if (buf == NULL) {
        r = say(&ld, -ENOMEM, "out of memory");
        goto out_close;
    }
    size_t got = 0;
    while (got < size) {
        ssize_t k = read(fd, buf + got, size - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            r = k < 0 ? say(&ld, -errno, "%s: %s", path, strerror(errno))
                      : say(&ld, -EIO, "%s: shorter than its size", path);
            free(buf);
            goto out_close;
        }
        got += (size_t)k;
    }
    r = load_copy(&ld, buf, size, out);
    free(buf);
out_close:
    close(fd);
    return r;
}

void npv_edgetpu_model_unload(struct npv_edgetpu_model *m)
{
    if (m != NULL)
        model_free(m);
}

const struct npv_edgetpu_model_exe *npv_edgetpu_model_main(const struct npv_edgetpu_model *m)
{
    return m != NULL ? m->main : NULL;
}

const struct npv_edgetpu_model_exe *npv_edgetpu_model_caching(const struct npv_edgetpu_model *m)
{
    return m != NULL ? m->caching : NULL;
}

uint64_t npv_edgetpu_model_caching_token(const struct npv_edgetpu_model *m)
{
    return m != NULL && m->caching != NULL ? m->caching->info.caching_token : 0;
}

bool npv_edgetpu_model_same_cache(const struct npv_edgetpu_model *a,
                                  const struct npv_edgetpu_model *b)
{
    uint64_t ta = npv_edgetpu_model_caching_token(a);
    return ta != 0 && ta == npv_edgetpu_model_caching_token(b);
}

void npv_edgetpu_model_exe_info(const struct npv_edgetpu_model_exe *exe,
                                struct npv_edgetpu_exe_info *info)
{
    if (exe == NULL || info == NULL)
        return;
    *info = exe->info;
}

int npv_edgetpu_model_chunk(const struct npv_edgetpu_model_exe *exe, uint32_t i,
                            struct npv_edgetpu_chunk *chunk)
{
    if (exe == NULL || chunk == NULL)
        return -EINVAL;
    if (i >= exe->info.nr_chunks)
        return -ERANGE;
    *chunk = exe->chunks[i];
    return 0;
}

int npv_edgetpu_model_input(const struct npv_edgetpu_model_exe *exe, uint32_t i,
                            struct npv_edgetpu_layer *layer)
{
    if (exe == NULL || layer == NULL)
        return -EINVAL;
    if (i >= exe->info.nr_inputs)
        return -ERANGE;
    *layer = exe->inputs[i];
    return 0;
}

int npv_edgetpu_model_output(const struct npv_edgetpu_model_exe *exe, uint32_t i,
                             struct npv_edgetpu_layer *layer)
{
    if (exe == NULL || layer == NULL)
        return -EINVAL;
    if (i >= exe->info.nr_outputs)
        return -ERANGE;
    *layer = exe->outputs[i];
    return 0;
}

int npv_edgetpu_model_link(const struct npv_edgetpu_model_exe *exe, uint32_t i,
                           const struct npv_edgetpu_link *addrs, void *dst, size_t dst_len)
{
    if (exe == NULL || addrs == NULL || dst == NULL)
        return -EINVAL;
    if (i >= exe->info.nr_chunks)
        return -ERANGE;
    const struct npv_edgetpu_chunk *c = &exe->chunks[i];
    if (dst_len < c->size)
        return -ENOSPC;
    for (uint32_t k = 0; k < c->nr_fields; k++) {
        uint8_t base = c->fields[k].base;
        if ((base == NPV_EDGETPU_BASE_INPUT && addrs->inputs == NULL) ||
            (base == NPV_EDGETPU_BASE_OUTPUT && addrs->outputs == NULL))
            return -EINVAL;
    }
    memcpy(dst, c->bitstream, c->size);
    uint32_t batch = exe->info.batch_size;
    for (uint32_t k = 0; k < c->nr_fields; k++) {
        const struct npv_edgetpu_model_field *f = &c->fields[k];
        uint64_t a;
        switch (f->base) {
        case NPV_EDGETPU_BASE_INPUT:
            a = addrs->inputs[(size_t)f->layer * batch + f->batch];
            break;
        case NPV_EDGETPU_BASE_OUTPUT:
            a = addrs->outputs[(size_t)f->layer * batch + f->batch];
            break;
        case NPV_EDGETPU_BASE_PARAMETER:
            /* libedgetpu InstructionBuffers::LinkInstructionBuffers: only a valid (non-empty)
             * buffer. */
            if (exe->info.parameters_size == 0)
                continue;
            a = addrs->parameters;
            break;
        default:
            if (exe->info.scratch_size == 0)
                continue;
            a = addrs->scratch;
            break;
        }
        uint32_t v = f->half == NPV_EDGETPU_UPPER_32BIT ? (uint32_t)(a >> 32) : (uint32_t)a;
        edgetpu_pkg_put32(dst, f->offset_bit, v);
    }
    return 0;
}

/* IEEE 754 binary16 to float (exact: every half is a float), by its bits. */
static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, mant = h & 0x3ffu;
    float v;
    if (e == 0) {
        v = (float)mant / 16777216.0f; /* subnormal: mant * 2^-24 */
        return sign != 0 ? -v : v;
    }
    uint32_t bits = sign | (e == 31 ? 0xffu << 23 : (e - 15 + 127) << 23) | mant << 13;
    memcpy(&v, &bits, sizeof(v));
    return v;
}

int npv_edgetpu_dequantize(const struct npv_edgetpu_layer *layer, const void *src, size_t src_len,
                           float *dst, size_t n)
{
    if (layer == NULL || (n != 0 && (src == NULL || dst == NULL)) || n > INT_MAX)
        return -EINVAL;
    size_t w;
    switch (layer->data_type) {
    case NPV_EDGETPU_FIXED_POINT8:
    case NPV_EDGETPU_SIGNED_FIXED_POINT8:
        w = 1;
        break;
    case NPV_EDGETPU_FIXED_POINT16:
    case NPV_EDGETPU_SIGNED_FIXED_POINT16:
    case NPV_EDGETPU_BFLOAT:
    case NPV_EDGETPU_HALF:
        w = 2;
        break;
    case NPV_EDGETPU_SIGNED_FIXED_POINT32:
    case NPV_EDGETPU_SINGLE:
        w = 4;
        break;
    default:
        return -ENOTSUP;
    }
    if (src_len / w < n)
        return -EINVAL;
    const uint8_t *s = src;
    /* executable.fbs DataType: unsigned (q - zero_point) * scale; signed q * scale. */
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = s + i * w;
        uint32_t u = 0;
        for (size_t k = 0; k < w; k++)
            u |= (uint32_t)p[k] << (8 * k);
        float v;
        switch (layer->data_type) {
        case NPV_EDGETPU_FIXED_POINT8:
        case NPV_EDGETPU_FIXED_POINT16:
            v = (float)((int64_t)u - layer->zero_point) * layer->scale;
            break;
        case NPV_EDGETPU_SIGNED_FIXED_POINT8:
            v = (float)(int8_t)(uint8_t)u * layer->scale;
            break;
        case NPV_EDGETPU_SIGNED_FIXED_POINT16:
            v = (float)(int16_t)(uint16_t)u * layer->scale;
            break;
        case NPV_EDGETPU_SIGNED_FIXED_POINT32:
            v = (float)(int32_t)u * layer->scale;
            break;
        case NPV_EDGETPU_BFLOAT:
            u <<= 16;
            memcpy(&v, &u, sizeof(v));
            break;
        case NPV_EDGETPU_HALF:
            v = half_to_float((uint16_t)u);
            break;
        default:
            memcpy(&v, &u, sizeof(v));
            break;
        }
        dst[i] = v;
    }
    return (int)n;
}

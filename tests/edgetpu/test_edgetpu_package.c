/* SPDX-License-Identifier: MIT */
/*
 * Edge TPU compiled models (issue 21), load and link, on the real compiler
 * output in tests/edgetpu/data (google-coral/test_data, Apache-2.0):
 *  - all five models load (from a file and from memory) with the layers the
 *    compiler wrote; every executable links; the linked chunk differs from the
 *    bitstream only inside linked fields, and each field holds its half of
 *    the address given for its buffer (read back here bit by bit, LSB first,
 *    independently of the library);
 *  - the co-compiled pair shares one caching token, other models do not;
 *  - truncated and bit-flipped files: errors, never a crash (ASan run);
 *  - every allocation failing in turn (failpoints): -ENOMEM, nothing leaked;
 *  - the model-side checker (devices/edgetpu/package_check.c): a linked chunk
 *    passes, a changed bit outside the fields fails and is named, the
 *    addresses come back, the data-path pattern is what its definition says.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/ctx.h>
#include <npuvfio/edgetpu_model.h>
#include <npuvfio/failpoint.h>

#include "npv_test.h"
#include "package_check.h"
#include "pkg_build.h"

/* The walks below take 260 s under ASan and 220 s under TSan on a loaded
 * 2-core machine at full size; the fuzz harness (fuzz_edgetpu_model) covers
 * the same ground there (npv_test.h says which builds are sanitized). */
#define WALK_DIVISOR (NPV_TEST_SANITIZED ? 4u : 1u)

#define NR_MODELS 5
static const char *const MODELS[NR_MODELS] = {
    "split_concat_edgetpu.tflite",
    "keras_lstm_mnist_ptq_edgetpu.tflite",
    "mobilenet_v1_0.25_128_quant_edgetpu.tflite",
    "mobilenet_v1_0.25_128_quant_cocompiled_with_mobilenet_v1_0.5_160_quant_edgetpu.tflite",
    "mobilenet_v1_0.5_160_quant_cocompiled_with_mobilenet_v1_0.25_128_quant_edgetpu.tflite",
};

static char *model_path(unsigned i)
{
    static char path[4096];
    snprintf(path, sizeof(path), "%s/%s", NPV_EDGETPU_DATA, MODELS[i]);
    return path;
}

static uint8_t *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return b;
}

static struct npv_edgetpu_model *load(unsigned i)
{
    struct npv_edgetpu_model *m = NULL;
    char why[256];
    int r = npv_edgetpu_model_load(NULL, model_path(i), &m, why, sizeof(why));
    ck_assert_msg(r == 0, "%s: %d %s", MODELS[i], r, why);
    return m;
}

static uint32_t test_get32(const uint8_t *b, uint64_t bit)
{
    uint32_t v = 0;
    for (unsigned k = 0; k < 32; k++)
        v |= (uint32_t)((b[(bit + k) / 8] >> ((bit + k) % 8)) & 1) << k;
    return v;
}

/* What the compiler wrote (libedgetpu's view of the same files, by their names and shapes). */
struct expect {
    unsigned nr_in, nr_out;
    uint32_t in0_size, in0_y, in0_x, in0_z;
    uint32_t out0_z;
};
static const struct expect EXPECT[NR_MODELS] = {
    {3, 5, 192, 8, 8, 3, 1},          {3, 3, 784, 1, 28, 28, 10},
    {1, 1, 49152, 128, 128, 3, 1001}, {1, 1, 49152, 128, 128, 3, 1001},
    {1, 1, 76800, 160, 160, 3, 1001},
};

START_TEST(all_five_load)
{
    for (unsigned i = 0; i < NR_MODELS; i++) {
        struct npv_edgetpu_model *m = load(i);
        const struct npv_edgetpu_model_exe *exe = npv_edgetpu_model_main(m);
        ck_assert_ptr_nonnull(exe);
        struct npv_edgetpu_exe_info info;
        npv_edgetpu_model_exe_info(exe, &info);
        ck_assert_uint_eq(info.nr_inputs, EXPECT[i].nr_in);
        ck_assert_uint_eq(info.nr_outputs, EXPECT[i].nr_out);
        ck_assert_uint_ge(info.nr_chunks, 1);
        ck_assert_uint_eq(info.batch_size, 1);
        ck_assert_str_eq(info.chip, "beagle");
        /* The compiler's output: a caching executable and an execution-only one. */
        ck_assert_uint_eq(info.type, NPV_EDGETPU_EXE_EXECUTION_ONLY);
        const struct npv_edgetpu_model_exe *pc = npv_edgetpu_model_caching(m);
        ck_assert_ptr_nonnull(pc);
        struct npv_edgetpu_exe_info pinfo;
        npv_edgetpu_model_exe_info(pc, &pinfo);
        ck_assert_uint_eq(pinfo.type, NPV_EDGETPU_EXE_PARAMETER_CACHING);
        ck_assert_uint_gt(pinfo.parameters_size, 0);
        ck_assert_uint_ne(npv_edgetpu_model_caching_token(m), 0);
        ck_assert_uint_eq(pinfo.caching_token, npv_edgetpu_model_caching_token(m));

        struct npv_edgetpu_layer l;
        ck_assert_int_eq(npv_edgetpu_model_input(exe, 0, &l), 0);
        ck_assert_uint_eq(l.size_bytes, EXPECT[i].in0_size);
        ck_assert_uint_eq(l.y_dim, EXPECT[i].in0_y);
        ck_assert_uint_eq(l.x_dim, EXPECT[i].in0_x);
        ck_assert_uint_eq(l.z_dim, EXPECT[i].in0_z);
        ck_assert_uint_eq(l.execution_count, 1);
        ck_assert_int_eq(npv_edgetpu_model_output(exe, 0, &l), 0);
        ck_assert_uint_eq(l.z_dim, EXPECT[i].out0_z);
        ck_assert_float_gt(l.scale, 0.0f);
        ck_assert_int_eq(npv_edgetpu_model_input(exe, info.nr_inputs, &l), -ERANGE);
        ck_assert_int_eq(npv_edgetpu_model_output(exe, info.nr_outputs, &l), -ERANGE);
        struct npv_edgetpu_chunk c;
        ck_assert_int_eq(npv_edgetpu_model_chunk(exe, info.nr_chunks, &c), -ERANGE);

        /* From memory: the same model. */
        size_t size;
        uint8_t *b = read_all(model_path(i), &size);
        struct npv_edgetpu_model *m2 = NULL;
        ck_assert_int_eq(npv_edgetpu_model_load_mem(NULL, b, size, &m2, NULL, 0), 0);
        free(b); /* copied */
        ck_assert_uint_eq(npv_edgetpu_model_caching_token(m2), npv_edgetpu_model_caching_token(m));
        struct npv_edgetpu_chunk c1, c2;
        ck_assert_int_eq(npv_edgetpu_model_chunk(exe, 0, &c1), 0);
        ck_assert_int_eq(npv_edgetpu_model_chunk(npv_edgetpu_model_main(m2), 0, &c2), 0);
        ck_assert_uint_eq(c1.size, c2.size);
        ck_assert_int_eq(memcmp(c1.bitstream, c2.bitstream, c1.size), 0);
        npv_edgetpu_model_unload(m2);
        npv_edgetpu_model_unload(m);
    }
}
END_TEST

/* The LSTM's layers: uint8 image, int8 and int16 state (executable.fbs data types). */
START_TEST(lstm_layer_types)
{
    struct npv_edgetpu_model *m = load(1);
    const struct npv_edgetpu_model_exe *exe = npv_edgetpu_model_main(m);
    struct npv_edgetpu_layer l;
    ck_assert_int_eq(npv_edgetpu_model_input(exe, 0, &l), 0);
    ck_assert_str_eq(l.name, "serving_default_x:0");
    ck_assert_uint_eq(l.data_type, NPV_EDGETPU_FIXED_POINT8);
    ck_assert_int_eq(npv_edgetpu_model_input(exe, 1, &l), 0);
    ck_assert_uint_eq(l.data_type, NPV_EDGETPU_SIGNED_FIXED_POINT8);
    ck_assert_int_eq(npv_edgetpu_model_input(exe, 2, &l), 0);
    ck_assert_uint_eq(l.data_type, NPV_EDGETPU_SIGNED_FIXED_POINT16);
    npv_edgetpu_model_unload(m);
}
END_TEST

START_TEST(dequantize)
{
    struct npv_edgetpu_model *m = load(2);
    struct npv_edgetpu_layer l;
    ck_assert_int_eq(npv_edgetpu_model_output(npv_edgetpu_model_main(m), 0, &l), 0);
    /* MobileNet's softmax: zero point 0, scale 1/256. */
    ck_assert_int_eq(l.zero_point, 0);
    ck_assert_float_eq(l.scale, 1.0f / 256.0f);
    uint8_t q[3] = {0, 128, 255};
    float f[3];
    ck_assert_int_eq(npv_edgetpu_dequantize(&l, q, sizeof(q), f, 3), 3);
    ck_assert_float_eq(f[0], 0.0f);
    ck_assert_float_eq(f[1], 0.5f);
    ck_assert_float_eq(f[2], 255.0f / 256.0f);
    ck_assert_int_eq(npv_edgetpu_dequantize(&l, q, 2, f, 3), -EINVAL);
    npv_edgetpu_model_unload(m);

    struct npv_edgetpu_layer s = {
        .data_type = NPV_EDGETPU_SIGNED_FIXED_POINT16, .scale = 0.5f, .zero_point = 99};
    uint8_t q16[2] = {0xfe, 0xff}; /* -2 */
    ck_assert_int_eq(npv_edgetpu_dequantize(&s, q16, 2, f, 1), 1);
    ck_assert_float_eq(f[0], -1.0f); /* signed: no zero point */
    s.data_type = NPV_EDGETPU_FIXED_POINT8;
    s.zero_point = 128;
    uint8_t q8 = 120;
    ck_assert_int_eq(npv_edgetpu_dequantize(&s, &q8, 1, f, 1), 1);
    ck_assert_float_eq(f[0], -4.0f);
    s.data_type = NPV_EDGETPU_HALF;
    uint8_t h[2] = {0x00, 0x3e}; /* 1.5 */
    ck_assert_int_eq(npv_edgetpu_dequantize(&s, h, 2, f, 1), 1);
    ck_assert_float_eq(f[0], 1.5f);
    s.data_type = NPV_EDGETPU_BFLOAT;
    uint8_t bf[2] = {0xc0, 0x3f}; /* 1.5 */
    ck_assert_int_eq(npv_edgetpu_dequantize(&s, bf, 2, f, 1), 1);
    ck_assert_float_eq(f[0], 1.5f);
    s.data_type = 7;
    ck_assert_int_eq(npv_edgetpu_dequantize(&s, bf, 2, f, 1), -ENOTSUP);
}
END_TEST

/* Distinct addresses per buffer, both halves distinctive. */
static uint64_t addr_of(unsigned base, unsigned layer, unsigned batch)
{
    return 0x0000008100000000ull * (base + 1) + 0x01000000ull * (layer + 1) +
           0x1000ull * (batch + 1) + 0x40;
}

static bool linked_base(const struct npv_edgetpu_exe_info *info, uint8_t base)
{
    if (base == NPV_EDGETPU_BASE_PARAMETER)
        return info->parameters_size != 0;
    if (base == NPV_EDGETPU_BASE_SCRATCH)
        return info->scratch_size != 0;
    return true;
}

/* Link every chunk of exe; check the patched chunk bit by bit; feed it to the model-side checker.
 */
static void link_and_check(const struct npv_edgetpu_model_exe *exe, unsigned *nr_fields_linked)
{
    struct npv_edgetpu_exe_info info;
    npv_edgetpu_model_exe_info(exe, &info);
    size_t nin = (size_t)info.nr_inputs * info.batch_size;
    size_t nout = (size_t)info.nr_outputs * info.batch_size;
    uint64_t *in = calloc(nin + 1, sizeof(*in)), *out = calloc(nout + 1, sizeof(*out));
    for (unsigned l = 0; l < info.nr_inputs; l++)
        for (unsigned b = 0; b < info.batch_size; b++)
            in[l * info.batch_size + b] = addr_of(NPV_EDGETPU_BASE_INPUT, l, b);
    for (unsigned l = 0; l < info.nr_outputs; l++)
        for (unsigned b = 0; b < info.batch_size; b++)
            out[l * info.batch_size + b] = addr_of(NPV_EDGETPU_BASE_OUTPUT, l, b);
    struct npv_edgetpu_link link = {.inputs = in,
                                    .outputs = out,
                                    .parameters = addr_of(NPV_EDGETPU_BASE_PARAMETER, 0, 0),
                                    .scratch = addr_of(NPV_EDGETPU_BASE_SCRATCH, 0, 0)};
    for (uint32_t ci = 0; ci < info.nr_chunks; ci++) {
        struct npv_edgetpu_chunk c;
        ck_assert_int_eq(npv_edgetpu_model_chunk(exe, ci, &c), 0);
        uint8_t *dst = malloc(c.size);
        ck_assert_int_eq(npv_edgetpu_model_link(exe, ci, &link, dst, c.size - 1), -ENOSPC);
        ck_assert_int_eq(npv_edgetpu_model_link(exe, ci, &link, dst, c.size), 0);
        /* Bits that may differ: those of the linked fields. */
        uint8_t *mask = calloc(c.size, 1);
        for (uint32_t k = 0; k < c.nr_fields; k++) {
            const struct npv_edgetpu_model_field *f = &c.fields[k];
            if (!linked_base(&info, f->base)) {
                /* libedgetpu links no empty buffer: the field stays as compiled. */
                ck_assert_uint_eq(test_get32(dst, f->offset_bit),
                                  test_get32(c.bitstream, f->offset_bit));
                continue;
            }
            uint64_t a =
                f->base == NPV_EDGETPU_BASE_INPUT       ? in[f->layer * info.batch_size + f->batch]
                : f->base == NPV_EDGETPU_BASE_OUTPUT    ? out[f->layer * info.batch_size + f->batch]
                : f->base == NPV_EDGETPU_BASE_PARAMETER ? link.parameters
                                                        : link.scratch;
            uint32_t want = f->half == NPV_EDGETPU_UPPER_32BIT ? (uint32_t)(a >> 32) : (uint32_t)a;
            ck_assert_msg(test_get32(dst, f->offset_bit) == want,
                          "chunk %u field %u (bit %u): 0x%08x, not 0x%08x", ci, k, f->offset_bit,
                          test_get32(dst, f->offset_bit), want);
            for (unsigned b = 0; b < 32; b++)
                mask[(f->offset_bit + b) / 8] |= (uint8_t)(1u << ((f->offset_bit + b) % 8));
            (*nr_fields_linked)++;
        }
        for (size_t b = 0; b < c.size; b++)
            ck_assert_msg(((dst[b] ^ c.bitstream[b]) & ~mask[b]) == 0,
                          "chunk %u byte %zu changed outside the fields", ci, b);

        /* The model's checker: passes, gives the addresses back. */
        uint64_t bad = 0;
        ck_assert_int_eq(edgetpu_pkg_check_chunk(exe, ci, dst, c.size, &bad), 0);
        ck_assert_int_eq(edgetpu_pkg_check_chunk(exe, ci, dst, c.size - 1, &bad), -EMSGSIZE);
        uint64_t *gin = calloc(nin + 1, sizeof(*gin)), *gout = calloc(nout + 1, sizeof(*gout));
        bool *sin = calloc(nin + 1, 1), *sout = calloc(nout + 1, 1);
        struct edgetpu_pkg_addrs ga = {
            .inputs = gin, .outputs = gout, .input_seen = sin, .output_seen = sout};
        ck_assert_int_eq(edgetpu_pkg_chunk_addrs(exe, ci, dst, c.size, &ga), 0);
        for (size_t k = 0; k < nin; k++)
            if (sin[k])
                ck_assert_uint_eq(gin[k], in[k]);
        for (size_t k = 0; k < nout; k++)
            if (sout[k])
                ck_assert_uint_eq(gout[k], out[k]);
        if (ga.parameters_seen)
            ck_assert_uint_eq(ga.parameters, link.parameters);
        if (ga.scratch_seen)
            ck_assert_uint_eq(ga.scratch, link.scratch);
        /* A changed bit outside every field is found and named; one inside a field is not. */
        size_t flip = 0;
        while (mask[flip] != 0)
            flip++;
        dst[flip] ^= 0x10;
        ck_assert_int_eq(edgetpu_pkg_check_chunk(exe, ci, dst, c.size, &bad), -EPROTO);
        ck_assert_uint_eq(bad, (uint64_t)flip * 8 + 4);
        dst[flip] ^= 0x10;
        for (uint32_t k = 0; k < c.nr_fields; k++) {
            const struct npv_edgetpu_model_field *f = &c.fields[k];
            size_t byte = (f->offset_bit + 8) / 8;
            dst[byte] ^= 0x01;
            int want = linked_base(&info, f->base) ? 0 : -EPROTO;
            ck_assert_int_eq(edgetpu_pkg_check_chunk(exe, ci, dst, c.size, &bad), want);
            dst[byte] ^= 0x01;
        }
        free(gin);
        free(gout);
        free(sin);
        free(sout);
        free(mask);
        free(dst);
    }
    /* Addresses the link needs and was not given. */
    if (info.nr_inputs != 0) {
        struct npv_edgetpu_link none = link;
        none.inputs = NULL;
        struct npv_edgetpu_chunk c;
        ck_assert_int_eq(npv_edgetpu_model_chunk(exe, 0, &c), 0);
        uint8_t *dst = malloc(c.size);
        bool has_in = false;
        for (uint32_t k = 0; k < c.nr_fields; k++)
            has_in |= c.fields[k].base == NPV_EDGETPU_BASE_INPUT;
        ck_assert_int_eq(npv_edgetpu_model_link(exe, 0, &none, dst, c.size), has_in ? -EINVAL : 0);
        free(dst);
    }
    free(in);
    free(out);
}

START_TEST(every_executable_links)
{
    for (unsigned i = 0; i < NR_MODELS; i++) {
        struct npv_edgetpu_model *m = load(i);
        unsigned main_fields = 0, pc_fields = 0;
        link_and_check(npv_edgetpu_model_main(m), &main_fields);
        link_and_check(npv_edgetpu_model_caching(m), &pc_fields);
        /* Every input and output is linked at least once (both halves). */
        struct npv_edgetpu_exe_info info;
        npv_edgetpu_model_exe_info(npv_edgetpu_model_main(m), &info);
        ck_assert_uint_ge(main_fields, 2 * (info.nr_inputs + info.nr_outputs));
        /* The caching executable links its parameters. */
        ck_assert_uint_eq(pc_fields, 2);
        npv_edgetpu_model_unload(m);
    }
}
END_TEST

START_TEST(cocompiled_pair_shares_a_token)
{
    struct npv_edgetpu_model *m[NR_MODELS];
    for (unsigned i = 0; i < NR_MODELS; i++)
        m[i] = load(i);
    ck_assert(npv_edgetpu_model_same_cache(m[3], m[4]));
    ck_assert_uint_eq(npv_edgetpu_model_caching_token(m[3]), npv_edgetpu_model_caching_token(m[4]));
    for (unsigned a = 0; a < NR_MODELS; a++) {
        ck_assert(npv_edgetpu_model_same_cache(m[a], m[a]));
        for (unsigned b = 0; b < NR_MODELS; b++)
            if (a != b && !((a == 3 && b == 4) || (a == 4 && b == 3)))
                ck_assert_msg(!npv_edgetpu_model_same_cache(m[a], m[b]), "%u and %u", a, b);
    }
    ck_assert(!npv_edgetpu_model_same_cache(m[0], NULL));
    for (unsigned i = 0; i < NR_MODELS; i++)
        npv_edgetpu_model_unload(m[i]);
}
END_TEST

START_TEST(pattern_is_its_definition)
{
    struct npv_edgetpu_model *m = load(0);
    const struct npv_edgetpu_model_exe *exe = npv_edgetpu_model_main(m);
    uint8_t in[3][192];
    const uint8_t *ins[3] = {in[0], in[1], in[2]};
    for (unsigned i = 0; i < 3; i++)
        for (unsigned k = 0; k < sizeof(in[i]); k++)
            in[i][k] = (uint8_t)(k * 7 + i);
    uint8_t out[256], again[256];
    ck_assert_int_eq(edgetpu_pkg_pattern(exe, 0, ins, out, sizeof(out)), 0);
    /* By the definition: FNV-1a over the inputs (192, 64, 128 bytes) and the name with its NUL. */
    uint64_t h = 0xcbf29ce484222325ull;
    const uint32_t sizes[3] = {192, 64, 128};
    for (unsigned i = 0; i < 3; i++)
        for (unsigned k = 0; k < sizes[i]; k++)
            h = (h ^ in[i][k]) * 0x100000001b3ull;
    const char *name = "concat/split0";
    for (size_t k = 0; k <= strlen(name); k++)
        h = (h ^ (uint8_t)name[k]) * 0x100000001b3ull;
    uint64_t x = h + 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    for (unsigned k = 0; k < 8; k++)
        ck_assert_uint_eq(out[k], (uint8_t)(x >> (8 * k)));
    /* Another output layer, another input byte: another pattern. */
    ck_assert_int_eq(edgetpu_pkg_pattern(exe, 1, ins, again, sizeof(again)), 0);
    ck_assert_int_ne(memcmp(out, again, sizeof(out)), 0);
    in[2][127] ^= 1; /* the last byte of the last input counts */
    ck_assert_int_eq(edgetpu_pkg_pattern(exe, 0, ins, again, sizeof(again)), 0);
    ck_assert_int_ne(memcmp(out, again, sizeof(out)), 0);
    ck_assert_int_eq(edgetpu_pkg_pattern(exe, 5, ins, again, sizeof(again)), -ERANGE);
    npv_edgetpu_model_unload(m);
}
END_TEST

/* A loaded model must link every chunk: what a flipped file that still loads must give. */
static void exercise(struct npv_edgetpu_model *m)
{
    const struct npv_edgetpu_model_exe *exes[2] = {npv_edgetpu_model_main(m),
                                                   npv_edgetpu_model_caching(m)};
    for (unsigned e = 0; e < 2; e++) {
        if (exes[e] == NULL)
            continue;
        struct npv_edgetpu_exe_info info;
        npv_edgetpu_model_exe_info(exes[e], &info);
        size_t n = ((size_t)info.nr_inputs + info.nr_outputs) * info.batch_size + 1;
        uint64_t *a = calloc(n, sizeof(*a));
        struct npv_edgetpu_link link = {.inputs = a, .outputs = a};
        for (uint32_t c = 0; c < info.nr_chunks; c++) {
            struct npv_edgetpu_chunk ch;
            ck_assert_int_eq(npv_edgetpu_model_chunk(exes[e], c, &ch), 0);
            uint8_t *dst = malloc(ch.size);
            ck_assert_int_eq(npv_edgetpu_model_link(exes[e], c, &link, dst, ch.size), 0);
            free(dst);
        }
        for (uint32_t l = 0; l < info.nr_inputs; l++) {
            struct npv_edgetpu_layer ly;
            ck_assert_int_eq(npv_edgetpu_model_input(exes[e], l, &ly), 0);
            ck_assert_uint_eq(strlen(ly.name) < 1u << 20, 1);
        }
        free(a);
    }
}

/*
 * Every length below 512, 1500 (600 in the MobileNets) spread over the file, the last 512: errors
 * while the cut is inside the flatbuffer. A file with TFLite metadata carries its associated files
 * (the MobileNets' labels) as a zip after the flatbuffer (up to 3 bytes of alignment before it):
 * cut inside that, the model loads, as nothing of it is read.
 */
START_TEST(truncated_files_fail)
{
    size_t size;
    uint8_t *b = read_all(model_path((unsigned)_i), &size);
    const uint8_t *zip = memmem(b, size, "PK\x03\x04", 4);
    size_t fb_end = zip != NULL ? (size_t)(zip - b) - 3 : size;
    unsigned tried = 0;
    /* Spread points: 1500 in the small files, 600 in the MobileNets; a
     * quarter under ASan, where each load of a MobileNet copy costs ~0.1 s
     * (every byte near both ends is still cut). */
    unsigned points = (size < 500000 ? 1500 : 600) / WALK_DIVISOR;
    size_t step = size / points + 1;
    for (size_t len = 0; len < size; len = len < 512          ? len + 1
                                           : len < size - 512 ? len + step
                                                              : len + 1) {
        uint8_t *copy = malloc(len + 1);
        memcpy(copy, b, len);
        struct npv_edgetpu_model *m = NULL;
        char why[256];
        int r = npv_edgetpu_model_load_mem(NULL, copy, len, &m, why, sizeof(why));
        if (len < fb_end) {
            ck_assert_msg(r < 0, "%s cut at %zu bytes loaded", MODELS[_i], len);
            ck_assert_msg(why[0] != '\0', "no reason at %zu", len);
        } else {
            ck_assert_msg(r == 0, "%s cut in its metadata zip at %zu: %d %s", MODELS[_i], len, r,
                          why);
            exercise(m);
            npv_edgetpu_model_unload(m);
        }
        free(copy);
        tried++;
    }
    ck_assert_uint_gt(tried, points);
    free(b);
}
END_TEST

/* Single bit flips all over the file (seeded): an error, or a model that links consistently. */
START_TEST(bit_flipped_files_never_crash)
{
    size_t size;
    uint8_t *b = read_all(model_path((unsigned)_i), &size);
    uint64_t seed = 0x5eed0000u + (uint64_t)_i;
    unsigned errors = 0, loaded = 0;
    unsigned flips = (size < 500000 ? 3000 : 600) / WALK_DIVISOR; /* the MobileNets: ASan's time */
    for (unsigned t = 0; t < flips; t++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        /* Half the flips in the first 4 KiB and the last 64 KiB, where the structure lies. */
        size_t pos = (size_t)(seed >> 33) % size;
        if (t % 2 == 0)
            pos = (t % 4 == 0) ? pos % (size < 4096 ? size : 4096)
                               : size - 1 - pos % (size < 65536 ? size : 65536);
        b[pos] ^= (uint8_t)(1u << ((seed >> 20) & 7));
        struct npv_edgetpu_model *m = NULL;
        int r = npv_edgetpu_model_load_mem(NULL, b, size, &m, NULL, 0);
        if (r == 0) {
            exercise(m);
            npv_edgetpu_model_unload(m);
            loaded++;
        } else {
            errors++;
        }
        b[pos] ^= (uint8_t)(1u << ((seed >> 20) & 7));
    }
    fprintf(stderr, "%s: %u flips, %u refused, %u still load (data bytes)\n", MODELS[_i], flips,
            errors, loaded);
    ck_assert_uint_gt(errors, 0);
    free(b);
}
END_TEST

/* Structure bytes: the identifiers and the root offsets. */
START_TEST(structure_flips_fail)
{
    size_t size;
    uint8_t *b = read_all(model_path(0), &size);
    const size_t at[] = {0, 1, 2, 3, 4, 5, 6, 7};
    for (size_t k = 0; k < sizeof(at) / sizeof(at[0]); k++) {
        b[at[k]] ^= 0x80;
        struct npv_edgetpu_model *m = NULL;
        char why[256];
        ck_assert_int_lt(npv_edgetpu_model_load_mem(NULL, b, size, &m, why, sizeof(why)), 0);
        b[at[k]] ^= 0x80;
    }
    /* The package's "DWN1". */
    uint8_t *dwn = memmem(b, size, "DWN1", 4);
    ck_assert_ptr_nonnull(dwn);
    dwn[0] = 'X';
    struct npv_edgetpu_model *m = NULL;
    char why[256];
    ck_assert_int_eq(npv_edgetpu_model_load_mem(NULL, b, size, &m, why, sizeof(why)), -EBADMSG);
    ck_assert_msg(strstr(why, "DarwiNN package") != NULL, "%s", why);
    free(b);
}
END_TEST

START_TEST(refusals_named)
{
    struct npv_edgetpu_model *m = NULL;
    char why[256];
    /* A TFLite file without the operator: the CPU twin's shape, built by taking none. */
    ck_assert_int_eq(npv_edgetpu_model_load(NULL, "/nonexistent/x.tflite", &m, why, sizeof(why)),
                     -ENOENT);
    ck_assert_ptr_nonnull(strstr(why, "/nonexistent/x.tflite"));
    ck_assert_int_eq(npv_edgetpu_model_load(NULL, NPV_EDGETPU_DATA, &m, why, sizeof(why)), -EINVAL);
    ck_assert_int_eq(npv_edgetpu_model_load_mem(NULL, NULL, 1, &m, why, sizeof(why)), -EINVAL);
    ck_assert_int_eq(npv_edgetpu_model_load_mem(NULL, "", 0, NULL, why, sizeof(why)), -EINVAL);
    npv_edgetpu_model_unload(NULL);
}
END_TEST

/* Every allocation of a load failing in turn: -ENOMEM, named, nothing leaked (ASan's leak check).
 */
START_TEST(allocation_failure_walk)
{
    struct npv_ctx *ctx = NULL;
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    if (npv_failpoint_arm(ctx, NPV_FAIL_ALLOC, 1) == -ENOTSUP) {
        npv_ctx_free(ctx);
        return; /* failpoints not built in (release) */
    }
    for (unsigned i = 0; i < NR_MODELS; i++) {
        uint64_t nth;
        for (nth = 1; nth < 1000; nth++) {
            ck_assert_int_eq(npv_failpoint_arm(ctx, NPV_FAIL_ALLOC, nth), 0);
            struct npv_edgetpu_model *m = NULL;
            char why[256];
            int r = npv_edgetpu_model_load(ctx, model_path(i), &m, why, sizeof(why));
            if (r == 0) {
                ck_assert_uint_lt(npv_failpoint_calls(ctx, NPV_FAIL_ALLOC), nth);
                exercise(m);
                npv_edgetpu_model_unload(m);
                break;
            }
            ck_assert_msg(r == -ENOMEM, "%s, allocation %llu: %d %s", MODELS[i],
                          (unsigned long long)nth, r, why);
            ck_assert_ptr_nonnull(strstr(why, "out of memory"));
            ck_assert_ptr_null(m);
        }
        ck_assert_uint_gt(nth, 5); /* a real walk: the file, the model, chunks, fields, layers */
        ck_assert_uint_lt(nth, 1000);
    }
    npv_failpoint_disarm(ctx);
    npv_ctx_free(ctx);
}
END_TEST

/* A built file: load it, expect err and a reason containing what. */
static void expect_built(const struct pkg_spec *s, int err, const char *what)
{
    uint8_t *b;
    size_t size = pkg_build(s, &b);
    struct npv_edgetpu_model *m = NULL;
    char why[256];
    int r = npv_edgetpu_model_load_mem(NULL, b, size, &m, why, sizeof(why));
    ck_assert_msg(r == err, "expected %d (%s), got %d: %s", err, what, r, why);
    if (r == 0) {
        exercise(m);
        npv_edgetpu_model_unload(m);
    } else {
        ck_assert_msg(strstr(why, what) != NULL, "'%s' does not say '%s'", why, what);
    }
    free(b);
}

START_TEST(built_file_loads)
{
    struct pkg_spec s;
    pkg_spec_default(&s);
    uint8_t *b;
    size_t size = pkg_build(&s, &b);
    struct npv_edgetpu_model *m = NULL;
    char why[256];
    ck_assert_msg(npv_edgetpu_model_load_mem(NULL, b, size, &m, why, sizeof(why)) == 0, "%s", why);
    ck_assert_ptr_null(npv_edgetpu_model_caching(m));
    ck_assert_uint_eq(npv_edgetpu_model_caching_token(m), 0);
    ck_assert(!npv_edgetpu_model_same_cache(m, m));
    struct npv_edgetpu_exe_info info;
    npv_edgetpu_model_exe_info(npv_edgetpu_model_main(m), &info);
    ck_assert_uint_eq(info.type, NPV_EDGETPU_EXE_STAND_ALONE);
    ck_assert_uint_eq(info.parameters_size, 8);
    unsigned n = 0;
    link_and_check(npv_edgetpu_model_main(m), &n);
    ck_assert_uint_eq(n, 4);
    npv_edgetpu_model_unload(m);
    free(b);
    /* The caching pair; the field at the chunk's last bits; batch 2 with batch element 1. */
    s.type = -1;
    expect_built(&s, 0, "");
    pkg_spec_default(&s);
    s.field_bit[3] = 480;
    expect_built(&s, 0, "");
    s.batch = 2;
    s.field_batch = 1;
    expect_built(&s, 0, "");
    pkg_spec_default(&s);
    s.nr_chips = 1;
    expect_built(&s, 0, "");
}
END_TEST

START_TEST(built_refusals)
{
    struct pkg_spec s;
    pkg_spec_default(&s);
    s.dram_params = true;
    expect_built(&s, -ENOTSUP, "TPU DRAM");
    pkg_spec_default(&s);
    s.virtual_chip = -1;
    expect_built(&s, -ENOTSUP, "several chips");
    pkg_spec_default(&s);
    s.multi_chip = true;
    expect_built(&s, -ENOTSUP, "several chips");
    pkg_spec_default(&s);
    s.nr_ops = 2;
    expect_built(&s, -ENOTSUP, "more than one edgetpu-custom-op");
    pkg_spec_default(&s);
    s.nr_ops = 0;
    expect_built(&s, -ENOENT, "no edgetpu-custom-op");
    pkg_spec_default(&s);
    s.nr_chips = 2;
    expect_built(&s, -ENOTSUP, "2 chips");
    pkg_spec_default(&s);
    s.type = 3;
    expect_built(&s, -ENOTSUP, "unknown type 3");
}
END_TEST

START_TEST(built_inconsistent)
{
    struct pkg_spec s;
    pkg_spec_default(&s);
    s.field_bit[1] = 20; /* bits 20..51 over the first field's 3..34 */
    expect_built(&s, -EBADMSG, "overlaps");
    pkg_spec_default(&s);
    s.field_bit[3] = 481; /* one bit past the 64-byte chunk */
    expect_built(&s, -EBADMSG, "outside the chunk");
    pkg_spec_default(&s);
    s.field_bit[0] = -1;
    expect_built(&s, -EBADMSG, "outside the chunk");
    pkg_spec_default(&s);
    s.field_layer = "nope";
    expect_built(&s, -EBADMSG, "layer nope the executable lacks");
    pkg_spec_default(&s);
    s.field_batch = 1; /* of batch size 1 */
    expect_built(&s, -EBADMSG, "batch 1 of 1");
    pkg_spec_default(&s);
    s.field_desc = 7;
    expect_built(&s, -EBADMSG, "unknown base address kind 7");
    pkg_spec_default(&s);
    s.field_desc = NPV_EDGETPU_BASE_SCRATCH;
    s.batch = 2;
    s.field_batch = 1;
    expect_built(&s, -EBADMSG, "scratch with batch 1");
    pkg_spec_default(&s);
    s.batch = 0;
    expect_built(&s, -EBADMSG, "batch size 0");
    pkg_spec_default(&s);
    s.dup_layer = true;
    expect_built(&s, -EBADMSG, "share the name in");
    pkg_spec_default(&s);
    s.type = -1;
    s.token = 0;
    expect_built(&s, -EBADMSG, "without a token");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("edgetpu_package");
    TCase *tc = tcase_create("load");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, all_five_load);
    tcase_add_test(tc, lstm_layer_types);
    tcase_add_test(tc, dequantize);
    tcase_add_test(tc, every_executable_links);
    tcase_add_test(tc, cocompiled_pair_shares_a_token);
    tcase_add_test(tc, refusals_named);
    tcase_add_test(tc, allocation_failure_walk);
    suite_add_tcase(s, tc);
    TCase *bad = tcase_create("malformed");
    tcase_set_timeout(bad, 600);
    tcase_add_loop_test(bad, truncated_files_fail, 0, NR_MODELS);
    tcase_add_loop_test(bad, bit_flipped_files_never_crash, 0, NR_MODELS);
    tcase_add_test(bad, structure_flips_fail);
    suite_add_tcase(s, bad);
    TCase *built = tcase_create("built");
    tcase_add_test(built, built_file_loads);
    tcase_add_test(built, built_refusals);
    tcase_add_test(built, built_inconsistent);
    suite_add_tcase(s, built);
    TCase *chk = tcase_create("model_check");
    tcase_add_test(chk, pattern_is_its_definition);
    suite_add_tcase(s, chk);
    return s;
}

int main(void)
{
    return npv_test_run(suite());
}

/* SPDX-License-Identifier: MIT */
/*
 * Edge TPU compiled models (devices/edgetpu/package.c, flatbuf.c): the input is
 * a whole `*_edgetpu.tflite` file (seeds: real compiler output, symlinks into
 * tests/edgetpu/data). Loading must fail cleanly or give a model whose every
 * accessor stays inside what it returned; then every chunk of every
 * executable is linked with distinct addresses.
 * Aborts when a loaded model has no main executable, a caching executable
 * without a token, a field outside its chunk or naming a layer or batch the
 * executable lacks, a layer without a name or size, or when a linked chunk
 * differs from the bitstream outside the fields or a field does not hold its
 * address's half (read back here, bit by bit, LSB first).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/edgetpu_model.h>

#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t get32(const uint8_t *b, uint64_t bit)
{
    uint32_t v = 0;
    for (unsigned k = 0; k < 32; k++)
        v |= (uint32_t)((b[(bit + k) / 8] >> ((bit + k) % 8)) & 1) << k;
    return v;
}

static uint64_t addr(unsigned base, unsigned layer, unsigned batch)
{
    return 0x0000008100000000ull * (base + 1) + 0x01000000ull * (layer + 1) + 0x1000ull * batch;
}

static void layers(const struct npv_edgetpu_model_exe *exe, uint32_t n, bool out)
{
    for (uint32_t i = 0; i < n; i++) {
        struct npv_edgetpu_layer l;
        int r = out ? npv_edgetpu_model_output(exe, i, &l) : npv_edgetpu_model_input(exe, i, &l);
        require(r == 0, "a layer below the count is missing", i);
        require(l.name != NULL && l.size_bytes > 0 && l.execution_count > 0,
                "a layer without a name, size or execution", i);
        require(strlen(l.name) < 1u << 30, "a layer name", i);
        require(l.nr_dims <= NPV_EDGETPU_MAX_DIMS, "too many dimensions", l.nr_dims);
        float f[4];
        uint8_t q[16] = {0};
        r = npv_edgetpu_dequantize(&l, q, sizeof(q), f, 4);
        require(r == 4, "dequantize of a known type", (uint64_t)r);
    }
}

static void one_exe(const struct npv_edgetpu_model_exe *exe)
{
    struct npv_edgetpu_exe_info info;
    npv_edgetpu_model_exe_info(exe, &info);
    require(info.batch_size >= 1 && info.nr_chunks >= 1, "batch or chunks", info.batch_size);
    require(info.type <= NPV_EDGETPU_EXE_EXECUTION_ONLY, "executable type", info.type);
    require(info.name != NULL && info.chip != NULL, "names", 0);
    layers(exe, info.nr_inputs, false);
    layers(exe, info.nr_outputs, true);
    size_t nin = (size_t)info.nr_inputs * info.batch_size;
    size_t nout = (size_t)info.nr_outputs * info.batch_size;
    uint64_t *in = calloc(nin + 1, sizeof(*in)), *out = calloc(nout + 1, sizeof(*out));
    require(in != NULL && out != NULL, "out of memory", 0);
    for (size_t k = 0; k < nin; k++)
        in[k] = addr(1, (unsigned)(k / info.batch_size), (unsigned)(k % info.batch_size));
    for (size_t k = 0; k < nout; k++)
        out[k] = addr(0, (unsigned)(k / info.batch_size), (unsigned)(k % info.batch_size));
    struct npv_edgetpu_link link = {
        .inputs = in, .outputs = out, .parameters = addr(2, 0, 0), .scratch = addr(3, 0, 0)};
    for (uint32_t c = 0; c < info.nr_chunks; c++) {
        struct npv_edgetpu_chunk ch;
        require(npv_edgetpu_model_chunk(exe, c, &ch) == 0, "a chunk below the count", c);
        require(ch.size > 0 && ch.bitstream != NULL, "an empty chunk", c);
        uint8_t *dst = malloc(ch.size), *mask = calloc(ch.size, 1);
        require(dst != NULL && mask != NULL, "out of memory", 0);
        require(npv_edgetpu_model_link(exe, c, &link, dst, ch.size) == 0, "link", c);
        for (uint32_t k = 0; k < ch.nr_fields; k++) {
            const struct npv_edgetpu_model_field *f = &ch.fields[k];
            require((uint64_t)f->offset_bit + 32 <= (uint64_t)ch.size * 8, "a field outside", k);
            require(f->base <= NPV_EDGETPU_BASE_SCRATCH && f->half <= 1, "a field's kind", k);
            require(f->batch < info.batch_size, "a field's batch", f->batch);
            uint64_t a;
            bool linked = true;
            if (f->base == NPV_EDGETPU_BASE_INPUT) {
                require(f->layer < info.nr_inputs, "an input field's layer", f->layer);
                a = in[(size_t)f->layer * info.batch_size + f->batch];
            } else if (f->base == NPV_EDGETPU_BASE_OUTPUT) {
                require(f->layer < info.nr_outputs, "an output field's layer", f->layer);
                a = out[(size_t)f->layer * info.batch_size + f->batch];
            } else {
                require(f->batch == 0, "parameters or scratch with a batch", f->batch);
                bool param = f->base == NPV_EDGETPU_BASE_PARAMETER;
                linked = param ? info.parameters_size != 0 : info.scratch_size != 0;
                a = param ? link.parameters : link.scratch;
            }
            uint32_t want = f->half ? (uint32_t)(a >> 32) : (uint32_t)a;
            if (!linked)
                want = get32(ch.bitstream, f->offset_bit);
            require(get32(dst, f->offset_bit) == want, "a field does not hold its address", k);
            for (unsigned b = 0; b < 32; b++) {
                uint32_t at = f->offset_bit + b;
                require(!(mask[at / 8] & (1u << (at % 8))), "fields overlap", k);
                mask[at / 8] |= (uint8_t)(1u << (at % 8));
            }
        }
        for (size_t b = 0; b < ch.size; b++)
            require(((dst[b] ^ ch.bitstream[b]) & ~mask[b]) == 0, "a bit changed outside fields",
                    b);
        free(mask);
        free(dst);
    }
    free(in);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct npv_edgetpu_model *m = NULL;
    char why[256];
    int r = npv_edgetpu_model_load_mem(NULL, data, size, &m, why, sizeof(why));
    if (r < 0) {
        require(m == NULL && why[0] != '\0', "a failure without a reason", (uint64_t)-r);
        require(r == -EBADMSG || r == -E2BIG || r == -ENOENT || r == -ENOTSUP || r == -EFBIG,
                "an undocumented error", (uint64_t)-r);
        return 0;
    }
    const struct npv_edgetpu_model_exe *main_exe = npv_edgetpu_model_main(m);
    require(main_exe != NULL, "a model without a main executable", 0);
    one_exe(main_exe);
    const struct npv_edgetpu_model_exe *pc = npv_edgetpu_model_caching(m);
    if (pc != NULL) {
        require(npv_edgetpu_model_caching_token(m) != 0, "caching without a token", 0);
        one_exe(pc);
    }
    require(npv_edgetpu_model_same_cache(m, m) == (pc != NULL), "same cache with itself", 0);
    npv_edgetpu_model_unload(m);
    return 0;
}

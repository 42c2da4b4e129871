/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sample.h"

static uint32_t xorshift(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

static void pack_inputs(struct rknpu_sample_mm *s)
{
    const struct npv_rknpu_matmul *mm = &s->mm;
    uint8_t *a = npv_rknpu_mem_vaddr(s->a), *b = npv_rknpu_mem_vaddr(s->b);
    for (uint32_t i = 0; i < mm->m; i++)
        for (uint32_t k = 0; k < mm->k; k++) {
            uint64_t at = npv_rknpu_matmul_a_index(mm->dtype, mm->m, mm->k, i, k);
            if (mm->dtype == NPV_RKNPU_INT8)
                ((int8_t *)a)[at] = s->a8[(size_t)i * mm->k + k];
            else
                ((uint16_t *)a)[at] = s->a16[(size_t)i * mm->k + k];
        }
    for (uint32_t k = 0; k < mm->k; k++)
        for (uint32_t j = 0; j < mm->n; j++) {
            uint64_t at = npv_rknpu_matmul_b_index(mm->dtype, mm->k, mm->n, k, j);
            if (mm->dtype == NPV_RKNPU_INT8)
                ((int8_t *)b)[at] = s->b8[(size_t)k * mm->n + j];
            else
                ((uint16_t *)b)[at] = s->b16[(size_t)k * mm->n + j];
        }
    if (s->bias != NULL) {
        void *bias = npv_rknpu_mem_vaddr(s->bias);
        if (mm->dtype == NPV_RKNPU_INT8)
            memcpy(bias, s->bias32, (size_t)mm->n * 4u);
        else
            memcpy(bias, s->biasf, (size_t)mm->n * 4u);
    }
    /* What the NPU reads, out of the CPU's caches (a non-coherent host: rknpu.h). */
    (void)npv_rknpu_mem_sync_for_device(s->a, 0, npv_rknpu_mem_size(s->a));
    (void)npv_rknpu_mem_sync_for_device(s->b, 0, npv_rknpu_mem_size(s->b));
    if (s->bias != NULL)
        (void)npv_rknpu_mem_sync_for_device(s->bias, 0, npv_rknpu_mem_size(s->bias));
}

static int draw_inputs(struct rknpu_sample_mm *s, uint32_t seed)
{
    const struct npv_rknpu_matmul *mm = &s->mm;
    size_t na = (size_t)mm->m * mm->k, nb = (size_t)mm->k * mm->n;
    uint32_t x = seed != 0 ? seed : 0x9e3779b9u;
    if (mm->dtype == NPV_RKNPU_INT8) {
        s->a8 = malloc(na);
        s->b8 = malloc(nb);
        s->bias32 = calloc(mm->n, 4);
        if (s->a8 == NULL || s->b8 == NULL || s->bias32 == NULL)
            return -ENOMEM;
        for (size_t i = 0; i < na; i++)
            s->a8[i] = (int8_t)xorshift(&x);
        for (size_t i = 0; i < nb; i++)
            s->b8[i] = (int8_t)xorshift(&x);
        for (uint32_t j = 0; j < mm->n && mm->bias != 0; j++)
            s->bias32[j] = (int32_t)(xorshift(&x) % 200001u) - 100000;
    } else {
        s->a16 = malloc(na * 2);
        s->b16 = malloc(nb * 2);
        s->biasf = calloc(mm->n, 4);
        if (s->a16 == NULL || s->b16 == NULL || s->biasf == NULL)
            return -ENOMEM;
        /* Values in [-2, 2) on a 1/256 grid: exact in fp16. */
        for (size_t i = 0; i < na; i++)
            s->a16[i] = rknpu_f32_to_f16((float)((int)(xorshift(&x) % 1024u) - 512) / 256.0f);
        for (size_t i = 0; i < nb; i++)
            s->b16[i] = rknpu_f32_to_f16((float)((int)(xorshift(&x) % 1024u) - 512) / 256.0f);
        for (uint32_t j = 0; j < mm->n && mm->bias != 0; j++)
            s->biasf[j] = (float)((int)(xorshift(&x) % 4096u) - 2048) / 64.0f;
    }
    return 0;
}

static int sample_new(struct npv_rknpu *npu, const struct rknpu_sample_shape *shape,
                      uint32_t domain_id, unsigned mem_flags, struct npv_dma *const *wrap,
                      uint32_t seed, struct rknpu_sample_mm **out)
{
    struct rknpu_sample_mm *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    s->mm = (struct npv_rknpu_matmul){
        .dtype = shape->dtype, .m = shape->m, .k = shape->k, .n = shape->n, .relu = shape->relu};
    struct npv_rknpu_matmul_sizes sz;
    int r = npv_rknpu_matmul_sizes(&s->mm, &sz);
    if (r < 0)
        goto err;
    if (wrap != NULL) {
        const uint64_t need[4] = {sz.a, sz.b, sz.c, shape->bias ? sz.bias : 0};
        struct npv_rknpu_mem **mems[4] = {&s->a, &s->b, &s->c, &s->bias};
        for (unsigned i = 0; r == 0 && i < 4; i++) {
            if (need[i] == 0)
                continue;
            if (wrap[i] == NULL || npv_dma_size(wrap[i]) < need[i])
                r = -EINVAL;
            else
                r = npv_rknpu_mem_wrap(npu, wrap[i], domain_id, mems[i]);
        }
    } else {
        r = npv_rknpu_mem_create(npu, sz.a, domain_id, mem_flags, &s->a);
        if (r == 0)
            r = npv_rknpu_mem_create(npu, sz.b, domain_id, mem_flags, &s->b);
        if (r == 0)
            r = npv_rknpu_mem_create(npu, sz.c, domain_id, mem_flags, &s->c);
        if (r == 0 && shape->bias)
            r = npv_rknpu_mem_create(npu, sz.bias, domain_id, mem_flags, &s->bias);
    }
    if (r < 0)
        goto err;
    s->mm.a = npv_rknpu_mem_iova(s->a);
    s->mm.b = npv_rknpu_mem_iova(s->b);
    s->mm.c = npv_rknpu_mem_iova(s->c);
    s->mm.bias = s->bias != NULL ? npv_rknpu_mem_iova(s->bias) : 0;
    r = draw_inputs(s, seed);
    if (r < 0)
        goto err;
    pack_inputs(s);
    r = npv_rknpu_matmul_task(&s->mm, s->regcmd, NPV_RKNPU_MATMUL_MAX_WORDS, &s->task);
    if (r < 0)
        goto err;
    rknpu_sample_mm_poison(s);
    *out = s;
    return 0;
err:
    rknpu_sample_mm_free(s);
    return r;
}

int rknpu_sample_mm_new(struct npv_rknpu *npu, const struct rknpu_sample_shape *shape,
                        uint32_t domain_id, unsigned mem_flags, uint32_t seed,
                        struct rknpu_sample_mm **out)
{
    return sample_new(npu, shape, domain_id, mem_flags, NULL, seed, out);
}

int rknpu_sample_mm_new_wrapped(struct npv_rknpu *npu, const struct rknpu_sample_shape *shape,
                                uint32_t domain_id, struct npv_dma *const dma[4], uint32_t seed,
                                struct rknpu_sample_mm **out)
{
    if (dma == NULL)
        return -EINVAL;
    return sample_new(npu, shape, domain_id, 0, dma, seed, out);
}

void rknpu_sample_mm_free(struct rknpu_sample_mm *s)
{
    if (s == NULL)
        return;
    npv_rknpu_mem_destroy(s->a);
    npv_rknpu_mem_destroy(s->b);
    npv_rknpu_mem_destroy(s->c);
    npv_rknpu_mem_destroy(s->bias);
    free(s->a8);
    free(s->b8);
    free(s->a16);
    free(s->b16);
    free(s->bias32);
    free(s->biasf);
    free(s);
}

void rknpu_sample_mm_poison(struct rknpu_sample_mm *s)
{
    /* 0x7fbadbad: an int32 no int8 product sum of these shapes reaches, a NaN in fp32. */
    uint32_t *c = npv_rknpu_mem_vaddr(s->c);
    size_t n = (size_t)s->mm.m * s->mm.n;
    for (size_t i = 0; i < n; i++)
        c[i] = 0x7fbadbadu;
    /*
     * Cleaned too: on a non-coherent arm64 host the invalidate before the
     * check is a clean+invalidate (EL0 has no plain invalidate), which would
     * write these dirty lines back over the NPU's result.
     */
    (void)npv_rknpu_mem_sync_for_device(s->c, 0, (uint64_t)n * 4u);
}

uint64_t rknpu_sample_mm_check(const struct rknpu_sample_mm *s)
{
    const struct npv_rknpu_matmul *mm = &s->mm;
    /* The NPU's writes, past any line the CPU still caches (rknpu.h, non-coherent hosts). */
    (void)npv_rknpu_mem_sync_for_cpu(s->c, 0, (uint64_t)mm->m * mm->n * 4u);
    const void *c = npv_rknpu_mem_vaddr(s->c);
    uint64_t bad = 0;
    for (uint32_t i = 0; i < mm->m; i++)
        for (uint32_t j = 0; j < mm->n; j++) {
            uint64_t at = npv_rknpu_matmul_c_index(mm->m, mm->n, i, j);
            if (mm->dtype == NPV_RKNPU_INT8) {
                int64_t acc = s->bias32[j];
                for (uint32_t k = 0; k < mm->k; k++)
                    acc += (int32_t)s->a8[(size_t)i * mm->k + k] * s->b8[(size_t)k * mm->n + j];
                if (mm->relu && acc < 0)
                    acc = 0;
                bad += ((const int32_t *)c)[at] != (int32_t)acc;
            } else {
                float acc = 0, mag = 0;
                for (uint32_t k = 0; k < mm->k; k++) {
                    float p = rknpu_f16_to_f32(s->a16[(size_t)i * mm->k + k]) *
                              rknpu_f16_to_f32(s->b16[(size_t)k * mm->n + j]);
                    acc += p;
                    mag += fabsf(p);
                }
                acc += s->biasf[j];
                mag += fabsf(s->biasf[j]);
                if (mm->relu && acc < 0)
                    acc = 0;
                float got = ((const float *)c)[at];
                double tol = RKNPU_SAMPLE_FP16_TOLERANCE * mag + RKNPU_SAMPLE_FP16_TOLERANCE_ABS;
                bad += !(fabs((double)got - (double)acc) <= tol);
            }
        }
    return bad;
}

/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sample.h"
#include "sample_run.h"

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t edgetpu_fnv1a(uint64_t h, const void *p, size_t len)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < len; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

struct run_buffers {
    struct npv_dma *in, *out;
    uint64_t in_va, out_va;
};

static int map_buffers(struct npv_edgetpu *tpu, struct npv_dev *dev, struct run_buffers *b)
{
    struct npv_ctx *ctx = npv_dev_ctx(dev);
    struct npv_domain *dom = npv_dev_domain(dev);
    int r = npv_dma_alloc(ctx, 4096, NULL, &b->in);
    if (r == 0)
        r = npv_dma_alloc(ctx, 4096, NULL, &b->out);
    if (r == 0)
        r = npv_dma_map(b->in, dom, NPV_DMA_READ, NULL);
    if (r == 0)
        r = npv_dma_map(b->out, dom, NPV_DMA_WRITE, NULL);
    if (r == 0)
        r = npv_edgetpu_map(tpu, b->in, 0, EDGETPU_SAMPLE_INPUT_BYTES, &b->in_va);
    if (r == 0)
        r = npv_edgetpu_map(tpu, b->out, 0, EDGETPU_SAMPLE_OUTPUT_BYTES, &b->out_va);
    return r;
}

static void free_buffers(struct npv_edgetpu *tpu, struct npv_dev *dev, struct run_buffers *b)
{
    if (b->in_va != 0)
        (void)npv_edgetpu_unmap(tpu, b->in_va, EDGETPU_SAMPLE_INPUT_BYTES);
    if (b->out_va != 0)
        (void)npv_edgetpu_unmap(tpu, b->out_va, EDGETPU_SAMPLE_OUTPUT_BYTES);
    if (b->in != NULL)
        (void)npv_dma_unmap(b->in, npv_dev_domain(dev));
    if (b->out != NULL)
        (void)npv_dma_unmap(b->out, npv_dev_domain(dev));
    npv_dma_free(b->in);
    npv_dma_free(b->out);
}

static int run_all(struct npv_edgetpu *tpu, const struct edgetpu_sample *s,
                   struct npv_edgetpu_executable *exe, struct run_buffers *b, uint32_t n,
                   uint64_t *lat, struct edgetpu_sample_report *rep)
{
    int8_t *x = npv_dma_vaddr(b->in), *y = npv_dma_vaddr(b->out);
    int8_t want[EDGETPU_SAMPLE_OUTPUT_BYTES];
    uint64_t t0 = mono_ns();
    for (uint32_t i = 0; i < n; i++) {
        edgetpu_sample_input(i, x);
        memset(y, 0xcc, EDGETPU_SAMPLE_OUTPUT_BYTES);
        uint64_t a = mono_ns();
        int r = npv_edgetpu_run(tpu, exe, &b->in_va, &b->out_va);
        lat[i] = mono_ns() - a;
        if (r < 0)
            return r;
        rep->requests++;
        edgetpu_sample_reference(s, x, want);
        if (memcmp(y, want, sizeof(want)) != 0)
            rep->mismatches++;
        rep->checksum = edgetpu_fnv1a(rep->checksum, y, EDGETPU_SAMPLE_OUTPUT_BYTES);
    }
    uint64_t span = mono_ns() - t0;
    rep->rate = span > 0 ? (double)n * 1e9 / (double)span : 0.0;
    return 0;
}

int edgetpu_sample_run(struct npv_dev *dev, enum npv_edgetpu_completion mode, uint32_t n,
                       struct edgetpu_sample_report *rep)
{
    memset(rep, 0, sizeof(*rep));
    rep->checksum = EDGETPU_FNV_OFFSET;
    if (n == 0)
        return -EINVAL;
    struct edgetpu_sample *s = malloc(sizeof(*s));
    uint64_t *lat = calloc(n, sizeof(*lat));
    struct npv_edgetpu *tpu = NULL;
    struct npv_edgetpu_executable *exe = NULL;
    struct run_buffers b = {0};
    int r = -ENOMEM;
    if (s == NULL || lat == NULL)
        goto out;
    edgetpu_sample_init(s, 7);
    struct npv_edgetpu_config cfg = {.completion = mode};
    r = npv_edgetpu_open(dev, &cfg, &tpu);
    if (r == 0)
        r = npv_edgetpu_load(tpu, &s->desc, &exe);
    if (r == 0)
        r = map_buffers(tpu, dev, &b);
    if (r == 0)
        r = run_all(tpu, s, exe, &b, n, lat, rep);
    if (rep->requests > 0) {
        qsort(lat, rep->requests, sizeof(*lat), cmp_u64);
        rep->p50_ns = lat[(rep->requests - 1) / 2];
        rep->p99_ns = lat[(uint64_t)(rep->requests - 1) * 99 / 100];
        rep->max_ns = lat[rep->requests - 1];
    }
out:
    if (tpu != NULL)
        free_buffers(tpu, dev, &b);
    npv_edgetpu_unload(exe);
    npv_edgetpu_close(tpu);
    free(lat);
    free(s);
    return r;
}

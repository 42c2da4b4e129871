/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <npuvfio/bar.h>

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

struct run_buffers {
    struct npv_dma *in, *out;
    uint64_t in_va, out_va;
};

static int map_buffers(struct npv_edgetpu *tpu, struct run_buffers *b)
{
    struct npv_dev *dev = npv_edgetpu_dev(tpu);
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

/* The chip's page table is cleared of them before the memory leaves the domain. */
static void free_buffers(struct npv_edgetpu *tpu, struct run_buffers *b)
{
    struct npv_domain *dom = npv_dev_domain(npv_edgetpu_dev(tpu));
    if (b->in_va != 0)
        (void)npv_edgetpu_unmap(tpu, b->in_va, EDGETPU_SAMPLE_INPUT_BYTES);
    if (b->out_va != 0)
        (void)npv_edgetpu_unmap(tpu, b->out_va, EDGETPU_SAMPLE_OUTPUT_BYTES);
    if (b->in != NULL)
        (void)npv_dma_unmap(b->in, dom);
    if (b->out != NULL)
        (void)npv_dma_unmap(b->out, dom);
    npv_dma_free(b->in);
    npv_dma_free(b->out);
}

static int run_all(struct npv_edgetpu *tpu, const struct edgetpu_sample *s,
                   struct npv_edgetpu_executable *exe, struct run_buffers *b,
                   const struct npv_sample_opts *opts, uint32_t n, uint64_t *lat,
                   struct npv_sample_result *res, uint64_t *sum)
{
    int8_t *x = npv_dma_vaddr(b->in), *y = npv_dma_vaddr(b->out);
    int8_t want[EDGETPU_SAMPLE_OUTPUT_BYTES];
    uint64_t start = npv_sample_now();
    for (uint32_t i = 0; i < n; i++) {
        edgetpu_sample_input(i, x);
        /* A stale output must not pass for a fresh one. */
        memset(y, 0xcc, EDGETPU_SAMPLE_OUTPUT_BYTES);
        /* The caller's buffers are the caller's to sync (edgetpu.h): no-ops when coherent. */
        npv_dma_sync_for_device(b->in, 0, EDGETPU_SAMPLE_INPUT_BYTES);
        npv_dma_sync_for_device(b->out, 0, EDGETPU_SAMPLE_OUTPUT_BYTES);
        uint64_t a = npv_sample_due(opts, start, i);
        int r = npv_edgetpu_run(tpu, exe, &b->in_va, &b->out_va);
        lat[i] = mono_ns() - a;
        res->span_ns = mono_ns() - start;
        npv_dma_sync_for_cpu(b->out, 0, EDGETPU_SAMPLE_OUTPUT_BYTES);
        res->elapsed_ns += lat[i];
        if (r < 0)
            return r;
        res->iterations++;
        res->jobs++;
        res->bytes += EDGETPU_SAMPLE_OUTPUT_BYTES;
        edgetpu_sample_reference(s, x, want);
        for (size_t k = 0; k < sizeof(want); k++)
            res->mismatches += y[k] != want[k];
        *sum = edgetpu_fnv1a(*sum, y, EDGETPU_SAMPLE_OUTPUT_BYTES);
    }
    return 0;
}

/*
 * The sample is in our instruction format, which only the model executes: a
 * real chip would take it for a DarwiNN bitstream. The model says who it is
 * in BAR0, which the chip's drivers never use.
 */
int edgetpu_is_model(struct npv_edgetpu *tpu)
{
    struct npv_bar *bar0;
    uint64_t id = 0;
    int r = npv_bar_map(npv_edgetpu_dev(tpu), 0, &bar0);
    /* No readable BAR0 is a chip; a transport or memory error is that error, not "a chip". */
    if (r == -EINVAL)
        return 0;
    if (r < 0)
        return r;
    r = npv_bar_read(bar0, EDGETPU_MODEL_ID, 8, &id);
    npv_bar_unmap(bar0);
    if (r < 0)
        return r;
    return id == EDGETPU_MODEL_ID_VALUE;
}

static int require_model(struct npv_edgetpu *tpu)
{
    int r = edgetpu_is_model(tpu);
    return r < 0 ? r : r == 1 ? 0 : -ENOTSUP;
}

int edgetpu_sample_run(struct npv_edgetpu *tpu, const struct npv_sample_opts *opts,
                       struct npv_sample_result *res, uint64_t *checksum)
{
    uint32_t n =
        opts != NULL && opts->iterations ? opts->iterations : EDGETPU_SAMPLE_DEFAULT_ITERATIONS;
    uint64_t sum = EDGETPU_FNV_OFFSET;
    memset(res, 0, sizeof(*res));
    int r = require_model(tpu);
    if (r < 0)
        return r;
    struct edgetpu_sample *s = malloc(sizeof(*s));
    uint64_t *lat = calloc(n, sizeof(*lat));
    struct npv_edgetpu_executable *exe = NULL;
    struct run_buffers b = {0};
    r = -ENOMEM;
    if (s == NULL || lat == NULL)
        goto out;
    edgetpu_sample_init(s, 7);
    r = npv_edgetpu_load(tpu, &s->desc, &exe);
    if (r == 0)
        r = map_buffers(tpu, &b);
    if (r == 0)
        r = run_all(tpu, s, exe, &b, opts, n, lat, res, &sum);
    npv_sample_percentiles(lat, res);
    snprintf(res->what, sizeof(res->what),
             "int8 FC %u->%u ReLU->%u over %u rows; outputs FNV-1a %016llx", EDGETPU_SAMPLE_IN,
             EDGETPU_SAMPLE_HIDDEN, EDGETPU_SAMPLE_OUT, EDGETPU_SAMPLE_ROWS,
             (unsigned long long)sum);
    if (checksum != NULL)
        *checksum = sum;
out:
    free_buffers(tpu, &b);
    npv_edgetpu_unload(exe);
    free(lat);
    free(s);
    return r;
}

/* SPDX-License-Identifier: MIT */
/*
 * The test device's sample workload. One iteration: a batch of CHUNKS jobs
 * over a destination buffer cleared beforehand, even chunks COPY from a
 * source that changes every iteration, odd chunks FILL with a byte that
 * changes every iteration; then the destination is compared with the same
 * work done by the CPU. A job the device skipped, ran twice with stale data
 * or ran into the wrong place shows as mismatching bytes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <npuvfio/ctx.h>
#include <npuvfio/domain.h>

#include "sample.h"

#define CHUNKS             16u
#define CHUNK              4096u
#define BUF                (CHUNKS * CHUNK)
#define DEFAULT_ITERATIONS 1000u
#define BATCH_TIMEOUT_NS   (5ull * 1000000000ull) /* far beyond a healthy batch */

struct sample {
    struct npv_testdev *td;
    struct npv_ctx *ctx;
    struct npv_dma *src, *dst;
    npv_iova_t src_iova, dst_iova;
    uint8_t *ref; /* the CPU's result */
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint8_t fill_byte(uint64_t it, unsigned chunk)
{
    return (uint8_t)(it * 31u + chunk * 7u + 1u);
}

/* The source for this iteration, the cleared destination, and what the device must make of them. */
static void prepare(struct sample *s, uint64_t it)
{
    uint8_t *src = npv_dma_vaddr(s->src);
    for (unsigned i = 0; i < BUF; i++)
        src[i] = (uint8_t)((i * 13u) ^ (unsigned)(it * 101u));
    memset(npv_dma_vaddr(s->dst), 0, BUF);
    for (unsigned c = 0; c < CHUNKS; c++) {
        if (c % 2 == 0)
            memcpy(s->ref + c * CHUNK, src + c * CHUNK, CHUNK);
        else
            memset(s->ref + c * CHUNK, fill_byte(it, c), CHUNK);
    }
    npv_dma_sync_for_device(s->src, 0, BUF);
    npv_dma_sync_for_device(s->dst, 0, BUF);
}

static int submit_batch(struct sample *s, uint64_t it)
{
    struct npv_ring *ring = npv_testdev_ring(s->td);
    for (unsigned c = 0; c < CHUNKS; c++) {
        npv_iova_t dst = s->dst_iova + c * CHUNK;
        struct npv_testdev_desc d = c % 2 == 0
                                        ? npv_testdev_copy(dst, s->src_iova + c * CHUNK, CHUNK, 0)
                                        : npv_testdev_fill(dst, fill_byte(it, c), CHUNK, 0);
        int r = npv_ring_push(ring, &d, it * CHUNKS + c);
        if (r < 0)
            return r;
    }
    npv_ring_submit(ring);
    return 0;
}

/* Reset the device and drop the jobs the reset cancelled: none of them is news any more. */
static void reset_and_forget(struct sample *s)
{
    struct npv_cpl c[CHUNKS];
    npv_testdev_reset(s->td);
    while (npv_ring_poll(npv_testdev_ring(s->td), c, CHUNKS) > 0)
        ;
}

/*
 * Completions one at a time, checked as they come: the engine stops at a job
 * it failed, so the rest of the batch would only come back at their deadline.
 * On a failure the reset cancels them at once.
 */
static int reap_batch(struct sample *s, uint64_t it)
{
    uint64_t start = mono_ns();
    for (unsigned i = 0; i < CHUNKS; i++) {
        struct npv_cpl c;
        uint64_t spent = mono_ns() - start;
        int got = spent < BATCH_TIMEOUT_NS
                      ? npv_testdev_wait(s->td, NPV_RING_WAIT_POLL, 1, BATCH_TIMEOUT_NS - spent, &c)
                      : 0;
        if (got < 0)
            return got;
        if (got == 0) {
            npv_ctx_log(s->ctx, NPV_LOG_ERROR,
                        "testdev sample: %u of %u jobs completed within %llu ms; resetting", i,
                        CHUNKS, BATCH_TIMEOUT_NS / 1000000ull);
            reset_and_forget(s);
            return -ETIMEDOUT;
        }
        if (c.status != 0 || c.cookie != it * CHUNKS + i) {
            npv_ctx_log(s->ctx, NPV_LOG_ERROR,
                        "testdev sample: job %llu ended with %s (device error %u, cookie %llu)",
                        (unsigned long long)(it * CHUNKS + i), npv_strerror(c.status), c.dev_error,
                        (unsigned long long)c.cookie);
            reset_and_forget(s);
            return c.status != 0 ? c.status : -EIO;
        }
    }
    return 0;
}

static uint64_t count_mismatches(struct sample *s)
{
    npv_dma_sync_for_cpu(s->dst, 0, BUF);
    const uint8_t *dst = npv_dma_vaddr(s->dst);
    uint64_t bad = 0;
    for (unsigned i = 0; i < BUF; i++)
        bad += dst[i] != s->ref[i];
    return bad;
}

static int run(struct sample *s, const struct npv_sample_opts *opts, uint64_t iterations,
               struct npv_sample_result *res)
{
    uint64_t *lat = calloc(iterations, sizeof(*lat));
    if (lat == NULL)
        return -ENOMEM;
    int r = 0;
    uint64_t start = npv_sample_now();
    for (uint64_t it = 0; it < iterations && r == 0; it++) {
        prepare(s, it);
        uint64_t t0 = npv_sample_due(opts, start, it);
        r = submit_batch(s, it);
        if (r == 0)
            r = reap_batch(s, it);
        lat[it] = mono_ns() - t0;
        if (r < 0)
            break;
        res->elapsed_ns += lat[it];
        res->iterations++;
        res->jobs += CHUNKS;
        res->bytes += BUF;
        res->mismatches += count_mismatches(s);
    }
    res->span_ns = npv_sample_now() - start;
    npv_sample_percentiles(lat, res);
    free(lat);
    return r;
}

int npv_testdev_sample_run(struct npv_testdev *td, const struct npv_sample_opts *opts,
                           struct npv_sample_result *res)
{
    struct sample s = {.td = td, .ctx = npv_dev_ctx(npv_testdev_dev(td))};
    struct npv_domain *dom = npv_dev_domain(npv_testdev_dev(td));
    uint64_t iterations =
        opts != NULL && opts->iterations != 0 ? opts->iterations : DEFAULT_ITERATIONS;
    memset(res, 0, sizeof(*res));
    snprintf(res->what, sizeof(res->what),
             "%u jobs of %u KiB (COPY and FILL alternating), checked byte by byte", CHUNKS,
             CHUNK / 1024);
    if (npv_ring_entries(npv_testdev_ring(td)) < CHUNKS)
        return -EINVAL;
    s.ref = malloc(BUF);
    if (s.ref == NULL)
        return -ENOMEM;
    int r = npv_dma_alloc(s.ctx, BUF, NULL, &s.src);
    if (r < 0)
        goto out_ref;
    r = npv_dma_alloc(s.ctx, BUF, NULL, &s.dst);
    if (r < 0)
        goto out_src;
    r = npv_dma_map(s.src, dom, NPV_DMA_READ, &s.src_iova);
    if (r == 0)
        r = npv_dma_map(s.dst, dom, NPV_DMA_RW, &s.dst_iova);
    if (r == 0)
        r = run(&s, opts, iterations, res);
    npv_dma_free(s.dst);
out_src:
    npv_dma_free(s.src);
out_ref:
    free(s.ref);
    return r;
}

/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sample.h"
#include "sample_run.h"

static const struct rknpu_sample_shape SHAPES[] = {
    {.dtype = NPV_RKNPU_INT8, .m = 64, .k = 64, .n = 64},
    {.dtype = NPV_RKNPU_FP16, .m = 64, .k = 64, .n = 32, .bias = true, .relu = true},
};
#define NR_SHAPES (sizeof(SHAPES) / sizeof(SHAPES[0]))

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One iteration: every shape on every core, all in flight at once. */
static int run_once(struct npv_rknpu *npu, struct rknpu_sample_mm **mms, unsigned nr,
                    struct npv_sample_result *res)
{
    for (unsigned i = 0; i < nr; i++)
        rknpu_sample_mm_poison(mms[i]);
    for (unsigned i = 0; i < nr; i++) {
        struct npv_rknpu_job job = {
            .tasks = &mms[i]->task,
            .nr_tasks = 1,
            .core_mask = 1u << (i % npv_rknpu_num_cores(npu)),
            .cookie = i,
        };
        int r = npv_rknpu_submit(npu, &job);
        if (r < 0)
            return r;
    }
    struct npv_cpl cpl[NR_SHAPES * NPV_RKNPU_NUM_CORES];
    unsigned got = 0;
    while (got < nr) {
        int r = npv_rknpu_wait(npu, nr - got, 10000000000ull, cpl + got, nr - got);
        if (r < 0)
            return r;
        if (r == 0)
            return -ETIMEDOUT;
        got += (unsigned)r;
    }
    int status = 0;
    for (unsigned i = 0; i < nr; i++)
        if (cpl[i].status != 0 && status == 0)
            status = cpl[i].status;
    res->jobs += nr;
    return status;
}

int rknpu_sample_run(struct npv_rknpu *npu, const struct npv_sample_opts *opts,
                     struct npv_sample_result *res)
{
    uint32_t n =
        opts != NULL && opts->iterations ? opts->iterations : RKNPU_SAMPLE_DEFAULT_ITERATIONS;
    unsigned cores = npv_rknpu_num_cores(npu), nr = (unsigned)NR_SHAPES * cores;
    struct rknpu_sample_mm *mms[NR_SHAPES * NPV_RKNPU_NUM_CORES] = {0};
    memset(res, 0, sizeof(*res));
    uint64_t *lat = calloc(n, sizeof(*lat));
    int r = lat == NULL ? -ENOMEM : 0;
    for (unsigned i = 0; i < nr && r == 0; i++)
        r = rknpu_sample_mm_new(npu, &SHAPES[i / cores], 0, 0, 1000u + i, &mms[i]);
    uint64_t start = npv_sample_now();
    for (uint32_t it = 0; it < n && r == 0; it++) {
        uint64_t t0 = npv_sample_due(opts, start, it);
        r = run_once(npu, mms, nr, res);
        lat[it] = now_ns() - t0;
        res->elapsed_ns += lat[it];
        if (r < 0)
            break;
        res->iterations++;
        for (unsigned i = 0; i < nr; i++) {
            res->mismatches += rknpu_sample_mm_check(mms[i]);
            res->bytes += (uint64_t)mms[i]->mm.m * mms[i]->mm.n * 4u;
        }
    }
    res->span_ns = npv_sample_now() - start;
    npv_sample_percentiles(lat, res);
    snprintf(res->what, sizeof(res->what),
             "int8 %ux%ux%u and fp16 %ux%ux%u+bias+ReLU on each of %u cores", SHAPES[0].m,
             SHAPES[0].k, SHAPES[0].n, SHAPES[1].m, SHAPES[1].k, SHAPES[1].n, cores);
    for (unsigned i = 0; i < nr; i++)
        rknpu_sample_mm_free(mms[i]);
    free(lat);
    return r;
}

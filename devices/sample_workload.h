/* SPDX-License-Identifier: MIT */
/*
 * What a device's sample workload takes and reports: jobs run through the
 * device's driver, every result compared with a CPU reference. Used by
 * `npuvfio run` and by the devices' tests.
 */
#ifndef NPV_DEVICES_SAMPLE_WORKLOAD_H
#define NPV_DEVICES_SAMPLE_WORKLOAD_H

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

struct npv_sample_opts {
    unsigned iterations; /* 0: the workload's default */
    /* Edge TPU only: a compiled model (`*_edgetpu.tflite`) to run instead of the sample, and
     * a file of its input bytes (NULL: generated). */
    const char *model_path;
    const char *input_path;
    /*
     * Open loop (npv_sample_due): iteration i is due interval_ns x i after
     * the first, starts no earlier, and its latency runs from when it was
     * due. 0: closed loop, each iteration as soon as the last one ended.
     * Every registered sample honours it except the Edge TPU compiled-model run.
     */
    uint64_t interval_ns;
};

struct npv_sample_result {
    uint64_t iterations; /* run and checked */
    uint64_t jobs;       /* completed by the device */
    uint64_t bytes;      /* the device wrote */
    uint64_t elapsed_ns; /* submitting and waiting only (the CPU check is not counted) */
    uint64_t p50_ns;     /* one iteration's round trip */
    uint64_t p99_ns;
    uint64_t p999_ns;
    uint64_t span_ns;    /* from the first iteration's start to the last one's end */
    uint64_t mismatches; /* bytes that differ from the CPU reference */
    char what[128];      /* one iteration, in words */
    /* What every result was compared with; empty: "the CPU reference". */
    char reference[96];
    char detail[256]; /* the device's own figures (PMU counters, ...); empty if none */
};

static inline uint64_t npv_sample_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * When iteration i of a run that started at start begins, and the time its
 * latency runs from. Closed loop: now. Open loop: its due time, start +
 * i x interval_ns, waited for when still ahead; an iteration that comes due
 * while the last one still runs starts late and its latency holds the wait
 * (no coordinated omission). The wait sleeps until shortly before and spins
 * the rest, as a timer's slack is larger than a fast device's round trip.
 */
static inline uint64_t npv_sample_due(const struct npv_sample_opts *o, uint64_t start, uint64_t i)
{
    uint64_t now = npv_sample_now();
    if (o == NULL || o->interval_ns == 0)
        return now;
    uint64_t due = start + i * o->interval_ns;
    if (due > now + 200000u) {
        uint64_t wake = due - 100000u;
        struct timespec ts = {.tv_sec = (time_t)(wake / 1000000000ull),
                              .tv_nsec = (long)(wake % 1000000000ull)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
            ;
    }
    while (npv_sample_now() < due)
        ;
    return due;
}

static inline int npv_sample_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sort the latencies of res->iterations iterations and set the percentiles from them. */
static inline void npv_sample_percentiles(uint64_t *lat, struct npv_sample_result *res)
{
    uint64_t n = res->iterations;
    if (n == 0)
        return;
    qsort(lat, n, sizeof(*lat), npv_sample_cmp_u64);
    res->p50_ns = lat[(n - 1) / 2];
    res->p99_ns = lat[(n - 1) * 99 / 100];
    res->p999_ns = lat[(n - 1) * 999 / 1000];
}

#endif

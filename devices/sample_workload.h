/* SPDX-License-Identifier: MIT */
/*
 * What a device's sample workload takes and reports: jobs run through the
 * device's driver, every result compared with a CPU reference. Used by
 * `npuvfio run` and by the devices' tests.
 */
#ifndef NPV_DEVICES_SAMPLE_WORKLOAD_H
#define NPV_DEVICES_SAMPLE_WORKLOAD_H

#include <stdint.h>

struct npv_sample_opts {
    unsigned iterations; /* 0: the workload's default */
    /* Edge TPU only: a compiled model (`*_edgetpu.tflite`) to run instead of the sample, and
     * a file of its input bytes (NULL: generated). */
    const char *model_path;
    const char *input_path;
};

struct npv_sample_result {
    uint64_t iterations; /* run and checked */
    uint64_t jobs;       /* completed by the device */
    uint64_t bytes;      /* the device wrote */
    uint64_t elapsed_ns; /* submitting and waiting only (the CPU check is not counted) */
    uint64_t p50_ns;     /* one iteration's round trip */
    uint64_t p99_ns;
    uint64_t mismatches; /* bytes that differ from the CPU reference */
    char what[128];      /* one iteration, in words */
    /* What every result was compared with; empty: "the CPU reference". */
    char reference[96];
    char detail[256]; /* the device's own figures (PMU counters, ...); empty if none */
};

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Run the sample network on an opened device and check it: what
 * `npuvfio run --device edgetpu` is to print (checksum, latency percentiles,
 * rate). Needs the device attached to a domain below 4 GiB.
 */
#ifndef NPV_EDGETPU_SAMPLE_RUN_H
#define NPV_EDGETPU_SAMPLE_RUN_H

#include <stdint.h>
#include <npuvfio/dev.h>
#include <npuvfio/edgetpu.h>

struct edgetpu_sample_report {
    uint32_t requests;
    uint32_t mismatches;             /* requests whose output differed from the CPU reference */
    uint64_t checksum;               /* FNV-1a 64 over every output, in request order */
    uint64_t p50_ns, p99_ns, max_ns; /* per request, submit to completion */
    double rate;                     /* requests per second over the whole run */
};

/* FNV-1a 64 of len bytes, continuing from h (start with EDGETPU_FNV_OFFSET). */
#define EDGETPU_FNV_OFFSET 0xcbf29ce484222325ull
uint64_t edgetpu_fnv1a(uint64_t h, const void *p, size_t len);

/*
 * Open the driver on dev in completion mode, run n requests (inputs
 * edgetpu_sample_input(0..n-1)), one at a time, and fill *rep. 0, or the first
 * failing call's negative errno (rep then counts what ran).
 */
int edgetpu_sample_run(struct npv_dev *dev, enum npv_edgetpu_completion mode, uint32_t n,
                       struct edgetpu_sample_report *rep);

#endif

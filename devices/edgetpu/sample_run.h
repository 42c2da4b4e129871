/* SPDX-License-Identifier: MIT */
/*
 * The Edge TPU sample workload for `npuvfio run --device edgetpu` and the
 * tests: the sample network request after request through the driver, every
 * output compared with the CPU reference, a checksum of all outputs.
 */
#ifndef NPV_EDGETPU_SAMPLE_RUN_H
#define NPV_EDGETPU_SAMPLE_RUN_H

#include <stddef.h>
#include <stdint.h>
#include <npuvfio/edgetpu.h>

#include "sample_workload.h"

#define EDGETPU_SAMPLE_DEFAULT_ITERATIONS 1000u

/* FNV-1a 64 of len bytes, continuing from h (start with EDGETPU_FNV_OFFSET). */
#define EDGETPU_FNV_OFFSET 0xcbf29ce484222325ull
uint64_t edgetpu_fnv1a(uint64_t h, const void *p, size_t len);

/*
 * Load the sample on an open driver, run opts->iterations requests (inputs
 * edgetpu_sample_input(0..n-1)) one at a time, check each, and fill *res;
 * *checksum (may be NULL) gets the FNV-1a of every output in request order
 * (also written in res->what). 0 (res may still count mismatches), or the
 * first failing call's negative errno; -ENOTSUP on anything but the model
 * (the sample is in our instruction format, which a real chip does not run).
 */
/* 1 when tpu runs on our model (it names itself in BAR0), 0 on a chip, or a transport error. */
int edgetpu_is_model(struct npv_edgetpu *tpu);

int edgetpu_sample_run(struct npv_edgetpu *tpu, const struct npv_sample_opts *opts,
                       struct npv_sample_result *res, uint64_t *checksum);

#endif

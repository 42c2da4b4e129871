/* SPDX-License-Identifier: MIT */
/*
 * The RKNPU sample workload for `npuvfio run --device rknpu` and the tests:
 * per iteration an int8 matmul and an fp16 matmul (bias, ReLU) on each
 * core, submitted together, every result checked against the CPU.
 */
#ifndef NPV_RKNPU_SAMPLE_RUN_H
#define NPV_RKNPU_SAMPLE_RUN_H

#include <npuvfio/rknpu.h>

#include "sample_workload.h"

#define RKNPU_SAMPLE_DEFAULT_ITERATIONS 200u

/*
 * Run opts->iterations iterations on an open driver (buffers in domain 0)
 * and fill *res; res->mismatches counts result elements that differ from
 * the reference. 0, or the first failing call's (or job's) negative errno.
 */
int rknpu_sample_run(struct npv_rknpu *npu, const struct npv_sample_opts *opts,
                     struct npv_sample_result *res);

#endif

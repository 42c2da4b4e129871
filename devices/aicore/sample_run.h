/* SPDX-License-Identifier: MIT */
/*
 * The AICore sample workload for `npuvfio run --device aicore` and the tests:
 * the sample graph run after run through both pipeline slots (the next run
 * prepared while one executes), PMU on, every output checked bit-exact
 * against the CPU reference.
 */
#ifndef NPV_AICORE_SAMPLE_RUN_H
#define NPV_AICORE_SAMPLE_RUN_H

#include <npuvfio/aicore.h>

#include "sample_workload.h"

#define AICORE_SAMPLE_DEFAULT_ITERATIONS 200u

/*
 * 0 (res may still count mismatches), or the first failing call's negative
 * errno. res->detail gets the PMU counters summed over every core and run.
 */
int aicore_sample_run(struct npv_aicore *ac, const struct npv_sample_opts *opts,
                      struct npv_sample_result *res);

#endif

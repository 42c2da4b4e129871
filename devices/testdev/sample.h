/* SPDX-License-Identifier: MIT */
/* The test device's sample workload: COPY and FILL batches, checked against a CPU reference. */
#ifndef NPV_TESTDEV_SAMPLE_H
#define NPV_TESTDEV_SAMPLE_H

#include <npuvfio/testdev.h>

#include "sample_workload.h"

/*
 * Run the workload on an opened device: buffers mapped in the device's
 * domain, each iteration one batch of COPY and FILL jobs, waited for and
 * compared byte by byte with the same work done by the CPU. Returns 0 (the
 * result may still report mismatches), or a negative errno: a job failed
 * (-EIO, the device's error word logged), the device did not answer in time
 * (-ETIMEDOUT), or what the driver returned.
 */
int npv_testdev_sample_run(struct npv_testdev *td, const struct npv_sample_opts *opts,
                           struct npv_sample_result *res);

#endif

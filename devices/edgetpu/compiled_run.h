/* SPDX-License-Identifier: MIT */
/*
 * `npuvfio run --device edgetpu --model FILE.tflite`: a compiled model bound
 * and invoked through the driver. On the model (which checks every run
 * against the same package) every output is compared with the data-path
 * pattern: that proves where inputs were read and outputs written, never the
 * network's answer. On a chip the outputs are the network's: the report
 * names the first output layer's top-5 with dequantised scores.
 */
#ifndef NPV_EDGETPU_COMPILED_RUN_H
#define NPV_EDGETPU_COMPILED_RUN_H

#include <npuvfio/edgetpu.h>

#include "sample_workload.h"

#define EDGETPU_COMPILED_DEFAULT_ITERATIONS 10u

/*
 * Load opts->model_path, bind it, run opts->iterations inferences (inputs
 * from opts->input_path, the same every run, or generated per run) and fill
 * *res. 0, or the first failing call's negative errno (why, when not NULL,
 * names a load failure).
 */
int edgetpu_compiled_run(struct npv_edgetpu *tpu, const struct npv_sample_opts *opts,
                         struct npv_sample_result *res);

#endif

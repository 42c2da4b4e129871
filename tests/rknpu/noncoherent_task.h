/* SPDX-License-Identifier: MIT */
/*
 * For the rknpu_noncoherent suite: what one task's register-command list
 * makes the NPU read and write, decoded as the model decodes it
 * (model_core.c apply_words, model_matmul.c rknpu_matmul_decode and the
 * operand sizes), in plain types so that the suite can include the driver's
 * internal header beside it (the driver and the model both name a struct
 * rknpu_core).
 */
#ifndef NPV_TEST_RKNPU_NONCOHERENT_TASK_H
#define NPV_TEST_RKNPU_NONCOHERENT_TASK_H

#include <stdint.h>

#define NC_MAX_RANGES 24u

struct nc_range {
    uint32_t iova;
    uint64_t len;
};

struct nc_task {
    struct nc_range reads[NC_MAX_RANGES];  /* A's span, B, the bias */
    struct nc_range writes[NC_MAX_RANGES]; /* C, surface by surface */
    unsigned nr_reads, nr_writes;
    uint32_t next_base, next_amount; /* the trailer's chain: 0 for the last task */
};

/*
 * Decode count words of one task. 0, or -EINVAL when the list is not a task
 * the model executes (no op-enable word, a configuration it refuses, more
 * ranges than NC_MAX_RANGES).
 */
int nc_task_decode(const uint64_t *words, uint32_t count, struct nc_task *out);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The RKNPU sample workload: a matmul in the NPU's native layouts (A, B and
 * the optional bias in buffers of one domain, C written by the NPU), its
 * inputs drawn from a seed, and its CPU reference. int8 results must match
 * bit for bit; fp16 results must be within RKNPU_SAMPLE_FP16_TOLERANCE of the
 * reference (see rknpu_sample_check). Used by the tests and by `npuvfio run
 * --device rknpu`.
 */
#ifndef NPV_RKNPU_SAMPLE_H
#define NPV_RKNPU_SAMPLE_H

#include <stdbool.h>
#include <stdint.h>
#include <npuvfio/rknpu.h>

#include "fp16.h"

/*
 * fp16: |npu - cpu| <= TOL * sum_k |a_k * b_k| + TOL_ABS per element. The
 * products are exact in fp32 (11-bit significands); only the order of the
 * fp32 additions may differ from the CPU's, each rounding by at most 2^-24
 * of the running sum, so 2^-12 of the absolute sum covers K up to 4096.
 */
#define RKNPU_SAMPLE_FP16_TOLERANCE     (1.0 / 4096.0)
#define RKNPU_SAMPLE_FP16_TOLERANCE_ABS 1e-6

struct rknpu_sample_mm {
    struct npv_rknpu_matmul mm;
    struct npv_rknpu_mem *a, *b, *c, *bias;
    /* Host copies in plain row-major order, for the reference. */
    int8_t *a8, *b8;     /* int8: [M][K], [K][N] */
    uint16_t *a16, *b16; /* fp16 bits: [M][K], [K][N] */
    int32_t *bias32;     /* int8: [N] */
    float *biasf;        /* fp16: [N] */
    uint64_t regcmd[NPV_RKNPU_MATMUL_MAX_WORDS];
    struct npv_rknpu_task task; /* the task that runs it (regcmd above) */
};

struct rknpu_sample_shape {
    enum npv_rknpu_dtype dtype;
    uint32_t m, k, n;
    bool bias, relu;
};

/*
 * Buffers of the shape in domain_id (mem flags as npv_rknpu_mem_create),
 * inputs drawn from seed, packed and synced for the device, C poisoned,
 * register commands built. 0 or a negative errno (nothing left allocated).
 * As a user on a non-coherent host must (rknpu.h): every buffer the CPU
 * wrote is synced for the device, C is synced for the CPU before it is read.
 */
int rknpu_sample_mm_new(struct npv_rknpu *npu, const struct rknpu_sample_shape *shape,
                        uint32_t domain_id, unsigned mem_flags, uint32_t seed,
                        struct rknpu_sample_mm **out);
/*
 * The same in caller memory: A, B, C and (with shape->bias) the bias in
 * dma[0..3], each wrapped (npv_rknpu_mem_wrap) into domain_id; each at least
 * its npv_rknpu_matmul_sizes bytes, else -EINVAL. rknpu_sample_mm_free
 * unwraps them and leaves the npv_dma to the caller.
 */
int rknpu_sample_mm_new_wrapped(struct npv_rknpu *npu, const struct rknpu_sample_shape *shape,
                                uint32_t domain_id, struct npv_dma *const dma[4], uint32_t seed,
                                struct rknpu_sample_mm **out);
void rknpu_sample_mm_free(struct rknpu_sample_mm *s);
/*
 * Fill C with a pattern no correct result has (so a job that did nothing is
 * caught), synced for the device. Before the job is submitted.
 */
void rknpu_sample_mm_poison(struct rknpu_sample_mm *s);
/*
 * Elements of C that differ from the CPU reference (beyond the fp16
 * tolerance); C is synced for the CPU first. After the job completed.
 */
uint64_t rknpu_sample_mm_check(const struct rknpu_sample_mm *s);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The Edge TPU sample workload: a 2-layer int8 network (fully connected
 * 64 -> 48 with ReLU, then 48 -> 16) over 4 rows, as an executable in our
 * instruction format, with its CPU reference. Used by the tests and by
 * `npuvfio run --device edgetpu`.
 */
#ifndef NPV_EDGETPU_SAMPLE_H
#define NPV_EDGETPU_SAMPLE_H

#include <stdint.h>
#include <npuvfio/edgetpu.h>

#include "regs.h"

#define EDGETPU_SAMPLE_ROWS         4u
#define EDGETPU_SAMPLE_IN           64u
#define EDGETPU_SAMPLE_HIDDEN       48u
#define EDGETPU_SAMPLE_OUT          16u
#define EDGETPU_SAMPLE_INPUT_BYTES  (EDGETPU_SAMPLE_ROWS * EDGETPU_SAMPLE_IN)
#define EDGETPU_SAMPLE_OUTPUT_BYTES (EDGETPU_SAMPLE_ROWS * EDGETPU_SAMPLE_OUT)

/* Parameter blob layout: w1 [48][64] int8, b1 [48] int32, w2 [16][48] int8, b2 [16] int32. */
#define EDGETPU_SAMPLE_W1_OFF       0u
#define EDGETPU_SAMPLE_B1_OFF       (EDGETPU_SAMPLE_W1_OFF + EDGETPU_SAMPLE_HIDDEN * EDGETPU_SAMPLE_IN)
#define EDGETPU_SAMPLE_W2_OFF       (EDGETPU_SAMPLE_B1_OFF + 4u * EDGETPU_SAMPLE_HIDDEN)
#define EDGETPU_SAMPLE_B2_OFF       (EDGETPU_SAMPLE_W2_OFF + EDGETPU_SAMPLE_OUT * EDGETPU_SAMPLE_HIDDEN)
#define EDGETPU_SAMPLE_PARAMS_BYTES (EDGETPU_SAMPLE_B2_OFF + 4u * EDGETPU_SAMPLE_OUT)

struct edgetpu_sample {
    struct npv_edgetpu_insn
        insn[3]; /* FC1 (input -> scratch), FC2 (scratch -> output), SC_HOST 0 */
    struct npv_edgetpu_field fields[16];
    uint8_t params[EDGETPU_SAMPLE_PARAMS_BYTES];
    struct npv_edgetpu_executable_desc desc; /* points into this struct */
};

/* Build the network with weights drawn from seed. */
void edgetpu_sample_init(struct edgetpu_sample *s, uint32_t seed);
/* A deterministic input for request number n. */
void edgetpu_sample_input(uint32_t n, int8_t x[EDGETPU_SAMPLE_INPUT_BYTES]);
/* The CPU reference: what the chip must write for input x, bit for bit. */
void edgetpu_sample_reference(const struct edgetpu_sample *s,
                              const int8_t x[EDGETPU_SAMPLE_INPUT_BYTES],
                              int8_t y[EDGETPU_SAMPLE_OUTPUT_BYTES]);

#endif

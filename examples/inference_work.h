/* SPDX-License-Identifier: MIT */
/*
 * The work one request of examples/inference_server.c does, as server and
 * load generator (examples/inference_load.c) both know it: tensor shapes,
 * the fixed weights, the CPU reference a reply is checked against, and a
 * deterministic input per request number.
 *
 * Edge TPU: the sample network of examples/edgetpu_sample.c, an int8 fully
 * connected layer IN -> OUT with bias and ReLU over ROWS pixels, in
 * npuvfio's instruction format (npuvfio/edgetpu_insn.h states its
 * arithmetic). Input int8 [ROWS][IN], output int8 [ROWS][OUT].
 *
 * RKNPU: an int8 matmul C[M][N] = A[M][K] x B[K][N] with a fixed B. Input A
 * int8 row-major [M][K], output C int32 little-endian row-major [M][N] (the
 * server packs A into the NPU's native layout and unpacks C from it).
 */
#ifndef NPV_EXAMPLES_INFERENCE_WORK_H
#define NPV_EXAMPLES_INFERENCE_WORK_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "inference_proto.h"

enum infer_device {
    INFER_EDGETPU = 0,
    INFER_RKNPU = 1,
};

/* ---- Edge TPU: the sample network ---- */
#define INFER_ETPU_ROWS       4u
#define INFER_ETPU_IN         32u
#define INFER_ETPU_OUT        8u
#define INFER_ETPU_INPUT      (INFER_ETPU_ROWS * INFER_ETPU_IN)
#define INFER_ETPU_OUTPUT     (INFER_ETPU_ROWS * INFER_ETPU_OUT)
#define INFER_ETPU_MULTIPLIER 655 /* ~1/100 in Q16: accumulators land in int8 range */
#define INFER_ETPU_SHIFT      16u

/* The parameters the chip reads (copied into DMA memory at load). */
struct infer_etpu_params {
    int8_t weights[INFER_ETPU_OUT][INFER_ETPU_IN];
    int32_t bias[INFER_ETPU_OUT];
};

static inline void infer_etpu_params(struct infer_etpu_params *p)
{
    for (uint32_t o = 0; o < INFER_ETPU_OUT; o++) {
        p->bias[o] = (int32_t)(o * 37u) - 150;
        for (uint32_t i = 0; i < INFER_ETPU_IN; i++)
            p->weights[o][i] = (int8_t)((int)((o * 7u + i * 13u) % 61u) - 30);
    }
}

static inline void infer_etpu_reference(const struct infer_etpu_params *p, const int8_t *x,
                                        int8_t *y)
{
    for (uint32_t r = 0; r < INFER_ETPU_ROWS; r++)
        for (uint32_t o = 0; o < INFER_ETPU_OUT; o++) {
            int32_t acc = p->bias[o];
            for (uint32_t i = 0; i < INFER_ETPU_IN; i++)
                acc += x[r * INFER_ETPU_IN + i] * p->weights[o][i];
            int64_t v = ((int64_t)acc * INFER_ETPU_MULTIPLIER + (1 << (INFER_ETPU_SHIFT - 1))) >>
                        INFER_ETPU_SHIFT;
            v = v < 0 ? 0 : v > 127 ? 127 : v; /* ReLU at zero point 0, then int8 */
            y[r * INFER_ETPU_OUT + o] = (int8_t)v;
        }
}

/* ---- RKNPU: an int8 matmul of a fixed shape ---- */
#define INFER_RK_M      16u
#define INFER_RK_K      64u
#define INFER_RK_N      32u
#define INFER_RK_INPUT  (INFER_RK_M * INFER_RK_K)
#define INFER_RK_OUTPUT (INFER_RK_M * INFER_RK_N * 4u)

static inline int8_t infer_rk_b(uint32_t k, uint32_t j)
{
    return (int8_t)((int)((k * 11u + j * 5u + 3u) % 255u) - 127);
}

static inline void infer_rk_reference(const int8_t *a, uint8_t *c)
{
    for (uint32_t i = 0; i < INFER_RK_M; i++)
        for (uint32_t j = 0; j < INFER_RK_N; j++) {
            int32_t acc = 0;
            for (uint32_t k = 0; k < INFER_RK_K; k++)
                acc += (int32_t)a[i * INFER_RK_K + k] * infer_rk_b(k, j);
            infer_put_le32(c + 4u * (i * INFER_RK_N + j), (uint32_t)acc);
        }
}

/* ---- per device ---- */

static inline uint32_t infer_input_bytes(enum infer_device d)
{
    return d == INFER_EDGETPU ? INFER_ETPU_INPUT : INFER_RK_INPUT;
}

static inline uint32_t infer_output_bytes(enum infer_device d)
{
    return d == INFER_EDGETPU ? INFER_ETPU_OUTPUT : INFER_RK_OUTPUT;
}

/* Input number n: bytes from a 64-bit mix of n, every value of int8 reached. */
static inline void infer_input(enum infer_device d, uint64_t n, uint8_t *buf)
{
    uint64_t s = n * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull;
    for (uint32_t i = 0; i < infer_input_bytes(d); i++) {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        buf[i] = (uint8_t)((s * 0x2545f4914f6cdd1dull) >> 56);
    }
}

/* The output the device must produce for input in (infer_output_bytes(d) bytes). */
static inline void infer_reference(enum infer_device d, const uint8_t *in, uint8_t *out)
{
    if (d == INFER_EDGETPU) {
        struct infer_etpu_params p;
        infer_etpu_params(&p);
        infer_etpu_reference(&p, (const int8_t *)in, (int8_t *)out);
    } else {
        infer_rk_reference((const int8_t *)in, out);
    }
}

static inline int infer_device_parse(const char *s, enum infer_device *d)
{
    if (strcmp(s, "edgetpu") == 0)
        *d = INFER_EDGETPU;
    else if (strcmp(s, "rknpu") == 0)
        *d = INFER_RKNPU;
    else
        return -1;
    return 0;
}

#endif

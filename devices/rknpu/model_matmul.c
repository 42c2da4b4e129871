/* SPDX-License-Identifier: MIT */
/*
 * The matmul the CNA, CORE and DPU registers describe as a 1x1 direct
 * convolution (regs.h has the configuration, layouts and arithmetic). Every
 * field the hardware would use is checked against the others: a driver that
 * gets one size, precision or bypass bit wrong gets a config error, not a
 * result computed from a guess.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fp16.h"
#include "model_internal.h"

#define R(off) regs[(off) / 4u]

static uint32_t esize(uint32_t prec)
{
    return prec == RKNPU_PREC_INT8 ? 1u : 2u;
}

static int decode_cna(const uint32_t *regs, struct rknpu_matmul *mm)
{
    uint32_t con1 = R(RKNPU_CNA_CONV_CON1);
    uint32_t in = (con1 >> RKNPU_CONV_CON1_IN_PREC_SHIFT) & RKNPU_PREC_MASK;
    uint32_t proc = (con1 >> RKNPU_CONV_CON1_PROC_PREC_SHIFT) & RKNPU_PREC_MASK;
    if ((con1 & RKNPU_CONV_MODE_MASK) != RKNPU_CONV_MODE_DIRECT || in != proc ||
        (in != RKNPU_PREC_INT8 && in != RKNPU_PREC_FP16))
        return -EINVAL;
    mm->prec = in;

    uint32_t size0 = R(RKNPU_CNA_DATA_SIZE0);
    uint32_t width = (size0 >> RKNPU_DATA_SIZE0_WIDTH_SHIFT) & RKNPU_DATA_SIZE0_FIELD_MASK;
    mm->m = size0 & RKNPU_DATA_SIZE0_FIELD_MASK;
    if (width != 1 || mm->m == 0 || mm->m > RKNPU_MM_MAX_M)
        return -EINVAL;

    uint32_t size1 = R(RKNPU_CNA_DATA_SIZE1);
    mm->k = size1 & RKNPU_DATA_SIZE1_CHANNEL_MASK;
    uint32_t real = (size1 >> RKNPU_DATA_SIZE1_REAL_SHIFT) & RKNPU_DATA_SIZE1_REAL_MASK;
    if (mm->k == 0 || mm->k % RKNPU_MM_K_ALIGN || mm->k > RKNPU_MM_MAX_K || real != mm->k - 1)
        return -EINVAL;

    uint32_t ws2 = R(RKNPU_CNA_WEIGHT_SIZE2);
    uint32_t kw = (ws2 >> RKNPU_WEIGHT_SIZE2_W_SHIFT) & RKNPU_WEIGHT_SIZE2_WH_MASK;
    uint32_t kh = (ws2 >> RKNPU_WEIGHT_SIZE2_H_SHIFT) & RKNPU_WEIGHT_SIZE2_WH_MASK;
    mm->n = ws2 & RKNPU_WEIGHT_SIZE2_KERNELS_MASK;
    uint32_t n_align = mm->prec == RKNPU_PREC_INT8 ? RKNPU_MM_N_ALIGN_INT8 : RKNPU_MM_N_ALIGN_FP16;
    if (kw != 1 || kh != 1 || mm->n == 0 || mm->n % n_align || mm->n > RKNPU_MM_MAX_N)
        return -EINVAL;

    uint32_t es = esize(mm->prec);
    if ((R(RKNPU_CNA_WEIGHT_SIZE1) & RKNPU_WEIGHT_SIZE1_MASK) != mm->k * es ||
        R(RKNPU_CNA_WEIGHT_SIZE0) != mm->k * mm->n * es)
        return -EINVAL;
    mm->a = R(RKNPU_CNA_FEATURE_DATA_ADDR);
    mm->b = R(RKNPU_CNA_DCOMP_ADDR0);
    return 0;
}

static int decode_core(const uint32_t *regs, const struct rknpu_matmul *mm)
{
    uint32_t prec = (R(RKNPU_CORE_MISC_CFG) >> RKNPU_CORE_MISC_PREC_SHIFT) & RKNPU_PREC_MASK;
    if (prec != mm->prec || R(RKNPU_CORE_DATAOUT_SIZE_0) != (mm->m - 1) << 16 ||
        (R(RKNPU_CORE_DATAOUT_SIZE_1) & 0xffffu) != mm->n - 1)
        return -EINVAL;
    return 0;
}

static int decode_bs(const uint32_t *regs, uint32_t enable, struct rknpu_matmul *mm)
{
    uint32_t bs = R(RKNPU_DPU_BS_CFG);
    mm->has_bias = false;
    mm->relu = false;
    mm->bias = 0;
    if (bs & RKNPU_DPU_BS_BYPASS)
        return 0;
    if (!(bs & RKNPU_DPU_BS_MUL_BYPASS))
        return -EINVAL; /* scaling is not modelled */
    if (!(bs & RKNPU_DPU_BS_ALU_BYPASS)) {
        uint32_t algo = (bs >> RKNPU_DPU_BS_ALU_ALGO_SHIFT) & RKNPU_DPU_BS_ALU_ALGO_MASK;
        /* The per-channel operand is fetched by DPU_RDMA: without it enabled nothing arrives. */
        if (!(bs & RKNPU_DPU_BS_ALU_SRC_MEM) || algo != RKNPU_DPU_ALU_ALGO_ADD ||
            !(enable & RKNPU_ENABLE_DPU_RDMA))
            return -EINVAL;
        mm->has_bias = true;
        mm->bias = R(RKNPU_DPU_RDMA_BS_BASE_ADDR);
    }
    mm->relu = !(bs & RKNPU_DPU_BS_RELU_BYPASS);
    return 0;
}

static int decode_dpu(const uint32_t *regs, uint32_t enable, struct rknpu_matmul *mm)
{
    uint32_t mode = (R(RKNPU_DPU_FEATURE_MODE_CFG) >> RKNPU_DPU_FMC_OUTPUT_MODE_SHIFT) &
                    RKNPU_DPU_FMC_OUTPUT_MODE_MASK;
    uint32_t fmt = R(RKNPU_DPU_DATA_FORMAT);
    uint32_t out = (fmt >> RKNPU_DPU_OUT_PREC_SHIFT) & RKNPU_PREC_MASK;
    uint32_t in = (fmt >> RKNPU_DPU_IN_PREC_SHIFT) & RKNPU_PREC_MASK;
    uint32_t proc = fmt & RKNPU_PREC_MASK;
    uint32_t want_out = mm->prec == RKNPU_PREC_INT8 ? RKNPU_PREC_INT32 : RKNPU_PREC_FP32;
    if (mode != RKNPU_DPU_OUTPUT_MODE_MEMORY || in != mm->prec || proc != mm->prec ||
        out != want_out)
        return -EINVAL;
    uint32_t ch = R(RKNPU_DPU_DATA_CUBE_CHANNEL);
    if ((R(RKNPU_DPU_DATA_CUBE_WIDTH) & RKNPU_DPU_DATA_CUBE_FIELD_MASK) != 0 ||
        (R(RKNPU_DPU_DATA_CUBE_HEIGHT) & RKNPU_DPU_DATA_CUBE_FIELD_MASK) != mm->m - 1 ||
        (ch & RKNPU_DPU_DATA_CUBE_FIELD_MASK) != mm->n - 1 ||
        ((ch >> 16) & RKNPU_DPU_DATA_CUBE_FIELD_MASK) != mm->n - 1)
        return -EINVAL;
    if (!(R(RKNPU_DPU_BN_CFG) & RKNPU_DPU_BN_BYPASS) ||
        !(R(RKNPU_DPU_EW_CFG) & RKNPU_DPU_EW_BYPASS))
        return -EINVAL;
    mm->c = R(RKNPU_DPU_DST_BASE_ADDR);
    return decode_bs(regs, enable, mm);
}

int rknpu_matmul_decode(const uint32_t *regs, uint32_t enable, struct rknpu_matmul *mm)
{
    memset(mm, 0, sizeof(*mm));
    /* CNA feeds CORE feeds DPU: a task without all three produces nothing; PPU is not modelled. */
    if ((enable & RKNPU_MM_ENABLE) != RKNPU_MM_ENABLE ||
        (enable & (RKNPU_ENABLE_PPU | RKNPU_ENABLE_PPU_RDMA)) || (enable & ~RKNPU_ENABLE_ALL))
        return -EINVAL;
    int r = decode_cna(regs, mm);
    if (r == 0)
        r = decode_core(regs, mm);
    if (r == 0)
        r = decode_dpu(regs, enable, mm);
    return r;
}

uint64_t rknpu_matmul_a_bytes(const struct rknpu_matmul *mm)
{
    return (uint64_t)mm->m * mm->k * esize(mm->prec);
}

uint64_t rknpu_matmul_b_bytes(const struct rknpu_matmul *mm)
{
    return (uint64_t)mm->k * mm->n * esize(mm->prec);
}

uint64_t rknpu_matmul_bias_bytes(const struct rknpu_matmul *mm)
{
    return mm->has_bias ? (uint64_t)mm->n * 4u : 0;
}

uint64_t rknpu_matmul_c_bytes(const struct rknpu_matmul *mm)
{
    return (uint64_t)mm->m * ((mm->n + 3u) / 4u) * 4u * 4u;
}

/*
 * The operands are first gathered out of their tiled layouts into rows of A
 * and columns of B (k contiguous), so the dot products walk memory linearly.
 */
static void compute_int8(const struct rknpu_matmul *mm, const int8_t *a, const int8_t *b,
                         const int32_t *bias, int32_t *c, int8_t *ar, int8_t *bc)
{
    uint32_t M = mm->m, K = mm->k, N = mm->n;
    for (uint32_t m = 0; m < M; m++)
        for (uint32_t k = 0; k < K; k++)
            ar[(size_t)m * K + k] = a[rknpu_a_index_int8(m, k, M)];
    for (uint32_t n = 0; n < N; n++)
        for (uint32_t k = 0; k < K; k++)
            bc[(size_t)n * K + k] = b[rknpu_b_index_int8(k, n, K)];
    for (uint32_t n = 0; n < N; n++) {
        const int8_t *col = bc + (size_t)n * K;
        for (uint32_t m = 0; m < M; m++) {
            const int8_t *row = ar + (size_t)m * K;
            /* int32 products of int8 never overflow; their sum wraps as the MAC array's does. */
            uint32_t acc = bias ? (uint32_t)bias[n] : 0u;
            for (uint32_t k = 0; k < K; k++)
                acc += (uint32_t)((int32_t)row[k] * (int32_t)col[k]);
            int32_t v = (int32_t)acc;
            if (mm->relu && v < 0)
                v = 0;
            c[rknpu_c_index(m, n, M)] = v;
        }
    }
}

static void compute_fp16(const struct rknpu_matmul *mm, const uint16_t *a, const uint16_t *b,
                         const float *bias, float *c, float *ar, float *bc)
{
    uint32_t M = mm->m, K = mm->k, N = mm->n;
    for (uint32_t m = 0; m < M; m++)
        for (uint32_t k = 0; k < K; k++)
            ar[(size_t)m * K + k] = rknpu_f16_to_f32(a[rknpu_a_index_fp16(m, k, M)]);
    for (uint32_t n = 0; n < N; n++)
        for (uint32_t k = 0; k < K; k++)
            bc[(size_t)n * K + k] = rknpu_f16_to_f32(b[rknpu_b_index_fp16(k, n, K)]);
    for (uint32_t n = 0; n < N; n++) {
        const float *col = bc + (size_t)n * K;
        for (uint32_t m = 0; m < M; m++) {
            const float *row = ar + (size_t)m * K;
            float acc = 0.0f;
            for (uint32_t k = 0; k < K; k++)
                acc += row[k] * col[k];
            if (bias)
                acc += bias[n];
            if (mm->relu && acc < 0.0f)
                acc = 0.0f;
            c[rknpu_c_index(m, n, M)] = acc;
        }
    }
}

int rknpu_matmul_compute(const struct rknpu_matmul *mm, const void *a, const void *b,
                         const void *bias, void *c)
{
    size_t es = mm->prec == RKNPU_PREC_INT8 ? sizeof(int8_t) : sizeof(float);
    void *ar = malloc((size_t)mm->m * mm->k * es);
    void *bc = malloc((size_t)mm->n * mm->k * es);
    int r = 0;
    if (ar == NULL || bc == NULL)
        r = -ENOMEM;
    else if (mm->prec == RKNPU_PREC_INT8)
        compute_int8(mm, a, b, bias, c, ar, bc);
    else
        compute_fp16(mm, a, b, bias, c, ar, bc);
    free(ar);
    free(bc);
    return r;
}

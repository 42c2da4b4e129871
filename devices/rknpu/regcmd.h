/* SPDX-License-Identifier: MIT */
/*
 * The register-command list of one matmul task, as the model executes it
 * (regs.h, "matmul as a 1x1 direct convolution"), for the driver and the
 * tests: header-only so the driver library and the test harness can both
 * use it without sharing an object.
 */
#ifndef NPV_RKNPU_REGCMD_H
#define NPV_RKNPU_REGCMD_H

#include <stdbool.h>
#include <stdint.h>

#include "regs.h"

struct rknpu_matmul_desc {
    uint32_t prec; /* RKNPU_PREC_INT8 or RKNPU_PREC_FP16 */
    uint32_t m, k, n;
    uint32_t a, b, c; /* IOVAs of A, B, C in their native layouts */
    uint32_t bias;    /* IOVA of the per-channel bias, 0 for none */
    bool relu;
};

/* Words one task takes at most, trailer included (even: the PC fetches pairs). */
#define RKNPU_MATMUL_REGCMD_MAX 40u

static inline uint32_t rknpu_matmul_enable(const struct rknpu_matmul_desc *d)
{
    return d->bias ? RKNPU_MM_ENABLE_BIAS : RKNPU_MM_ENABLE;
}

/*
 * Write the task's list to words[RKNPU_MATMUL_REGCMD_MAX]; the trailer names
 * the next task (next_iova 0 and next_amount 0 for the last). Returns the word
 * count, always even: a zero (no-op) word pads an odd list, so the PC's pair
 * fetch never reads past it. Its REGISTER_AMOUNTS is rknpu_regcmd_amount(count).
 */
static inline uint32_t rknpu_matmul_regcmd(const struct rknpu_matmul_desc *d, uint64_t *words,
                                           uint32_t next_iova, uint32_t next_amount)
{
    uint32_t es = d->prec == RKNPU_PREC_INT8 ? 1u : 2u;
    uint32_t out = d->prec == RKNPU_PREC_INT8 ? RKNPU_PREC_INT32 : RKNPU_PREC_FP32;
    uint32_t bs = RKNPU_DPU_BS_BYPASS;
    if (d->bias || d->relu) {
        bs = RKNPU_DPU_BS_MUL_BYPASS | (d->relu ? 0u : RKNPU_DPU_BS_RELU_BYPASS);
        bs |= d->bias ? RKNPU_DPU_BS_ALU_SRC_MEM |
                            (RKNPU_DPU_ALU_ALGO_ADD << RKNPU_DPU_BS_ALU_ALGO_SHIFT)
                      : RKNPU_DPU_BS_ALU_BYPASS;
    }
    uint32_t n = 0;
#define RKNPU_W(blk, reg, val) words[n++] = rknpu_regcmd_write(blk, reg, val)
    RKNPU_W(RKNPU_TGT_CNA, RKNPU_CNA_CONV_CON1,
            d->prec << RKNPU_CONV_CON1_PROC_PREC_SHIFT | d->prec << RKNPU_CONV_CON1_IN_PREC_SHIFT |
                RKNPU_CONV_MODE_DIRECT);
    RKNPU_W(RKNPU_TGT_CNA, RKNPU_CNA_CONV_CON3, 1u << 3 | 1u); /* strides 1 */
    RKNPU_W(RKNPU_TGT_CNA, RKNPU_CNA_DATA_SIZE0, 1u << RKNPU_DATA_SIZE0_WIDTH_SHIFT | d->m);
    RKNPU_W(RKNPU_TGT_CNA, RKNPU_CNA_DATA_SIZE1, (d->k - 1u) << RKNPU_DATA_SIZE1_REAL_SHIFT | d->k);
    RKNPU_W(RKNPU_TGT_CNA, RKNPU_CNA_DATA_SIZE2, 1u);
    RKNPU_W(RKNPU_TGT_CNA, RKNPU_CNA_DATA_SIZE3, d->m);
    RKNPU_W(RKNPU_TGT_CNA, RKNPU_CNA_WEIGHT_SIZE0, d->k * d->n * es);
    RKNPU_W(RKNPU_TGT_CNA, RKNPU_CNA_WEIGHT_SIZE1, d->k * es);
    RKNPU_W(RKNPU_TGT_CNA, RKNPU_CNA_WEIGHT_SIZE2,
            1u << RKNPU_WEIGHT_SIZE2_W_SHIFT | 1u << RKNPU_WEIGHT_SIZE2_H_SHIFT | d->n);
    RKNPU_W(RKNPU_TGT_CNA, RKNPU_CNA_FEATURE_DATA_ADDR, d->a);
    RKNPU_W(RKNPU_TGT_CNA, RKNPU_CNA_DCOMP_ADDR0, d->b);
    RKNPU_W(RKNPU_TGT_CORE, RKNPU_CORE_MISC_CFG, d->prec << RKNPU_CORE_MISC_PREC_SHIFT | 1u);
    RKNPU_W(RKNPU_TGT_CORE, RKNPU_CORE_DATAOUT_SIZE_0, (d->m - 1u) << 16);
    RKNPU_W(RKNPU_TGT_CORE, RKNPU_CORE_DATAOUT_SIZE_1, d->n - 1u);
    RKNPU_W(RKNPU_TGT_DPU, RKNPU_DPU_FEATURE_MODE_CFG,
            RKNPU_DPU_OUTPUT_MODE_MEMORY << RKNPU_DPU_FMC_OUTPUT_MODE_SHIFT);
    RKNPU_W(RKNPU_TGT_DPU, RKNPU_DPU_DATA_FORMAT,
            out << RKNPU_DPU_OUT_PREC_SHIFT | d->prec << RKNPU_DPU_IN_PREC_SHIFT | d->prec);
    RKNPU_W(RKNPU_TGT_DPU, RKNPU_DPU_DST_BASE_ADDR, d->c);
    RKNPU_W(RKNPU_TGT_DPU, RKNPU_DPU_DST_SURF_STRIDE, d->m << 4);
    RKNPU_W(RKNPU_TGT_DPU, RKNPU_DPU_DATA_CUBE_WIDTH, 0u);
    RKNPU_W(RKNPU_TGT_DPU, RKNPU_DPU_DATA_CUBE_HEIGHT, d->m - 1u);
    RKNPU_W(RKNPU_TGT_DPU, RKNPU_DPU_DATA_CUBE_CHANNEL, (d->n - 1u) << 16 | (d->n - 1u));
    RKNPU_W(RKNPU_TGT_DPU, RKNPU_DPU_BS_CFG, bs);
    RKNPU_W(RKNPU_TGT_DPU, RKNPU_DPU_BN_CFG, RKNPU_DPU_BN_BYPASS);
    RKNPU_W(RKNPU_TGT_DPU, RKNPU_DPU_EW_CFG, RKNPU_DPU_EW_BYPASS);
    if (d->bias) {
        RKNPU_W(RKNPU_TGT_DPU_RDMA, RKNPU_DPU_RDMA_BRDMA_CFG, 1u << 1);
        RKNPU_W(RKNPU_TGT_DPU_RDMA, RKNPU_DPU_RDMA_BS_BASE_ADDR, d->bias);
    }
    if ((n + RKNPU_TRAILER_WORDS) % 2u)
        words[n++] = 0;
    RKNPU_W(RKNPU_TGT_PC, RKNPU_PC_BASE_ADDRESS, next_iova);
    RKNPU_W(RKNPU_TGT_PC, RKNPU_PC_REGISTER_AMOUNTS, next_amount);
#undef RKNPU_W
    words[n++] = rknpu_regcmd(RKNPU_TGT_BARRIER | RKNPU_TGT_WRITE, 0, 0);
    words[n++] = rknpu_regcmd(RKNPU_TGT_OP_EN | RKNPU_TGT_WRITE, rknpu_matmul_enable(d),
                              RKNPU_PC_OPERATION_ENABLE);
    return n;
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The one emitter of a matmul task's register-command list, shared by the
 * driver (npv_rknpu_matmul_task, driver_matmul.c) and the test harness: the
 * register set, order and values of the silicon-validated matmul example
 * mtx512/rk3588-npu src/npu_matmul.c (gen_matmul_task, gen_matmul_int8,
 * gen_matmul_fp16: ran on an RK3588 through the vendor driver), cross-read
 * with Mesa src/gallium/drivers/rocket/rkt_regcmd.c (fill_first_regcmd).
 * Header-only so that the driver library and the harness use the same code
 * without sharing an object. Each value names its source; what stays
 * unverified without silicon is listed in devices/rknpu/README.md.
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

/* mtx512 gen_matmul_task: ops[0..103] are the body, ops[104..107] the trailer. */
#define RKNPU_MATMUL_BODY_WORDS 104u
/* Mesa fill_first_regcmd: DPU_RDMA BRDMA_CFG and BS_BASE_ADDR when the bias comes from memory. */
#define RKNPU_MATMUL_BIAS_WORDS 2u
/* Words one task takes at most, trailer included (a multiple of the 64-byte list alignment). */
#define RKNPU_MATMUL_REGCMD_MAX 112u

/* One convolution-buffer bank and the bank count (mtx512 npu_hw.h NPU_CBUF_BANK_SIZE/BANKS). */
#define RKNPU_CBUF_BANK_SIZE 32768u
#define RKNPU_CBUF_BANKS     12u

static inline uint32_t rknpu_matmul_enable(const struct rknpu_matmul_desc *d)
{
    /* mtx512 tests: enable_mask 0xd (CNA|CORE|DPU); Mesa adds DPU_RDMA (0x1d) for the bias. */
    return d->bias ? RKNPU_MM_ENABLE_BIAS : RKNPU_MM_ENABLE;
}

/* DPU BS_CFG: mtx512 gen_matmul_*: every stage bypassed (0x53) without bias or ReLU. */
static inline uint32_t rknpu_matmul_bs_cfg(const struct rknpu_matmul_desc *d)
{
    if (!d->bias && !d->relu)
        return RKNPU_DPU_BS_RELU_BYPASS | RKNPU_DPU_BS_MUL_BYPASS | RKNPU_DPU_BS_ALU_BYPASS |
               RKNPU_DPU_BS_BYPASS;
    /* Mesa fill_first_regcmd: ALU_ALGO(2) | ALU_SRC(1) | RELU_BYPASS | MUL_BYPASS for the bias. */
    uint32_t bs = RKNPU_DPU_BS_MUL_BYPASS | (d->relu ? 0u : RKNPU_DPU_BS_RELU_BYPASS);
    bs |= d->bias
              ? RKNPU_DPU_BS_ALU_SRC_MEM | (RKNPU_DPU_ALU_ALGO_ADD << RKNPU_DPU_BS_ALU_ALGO_SHIFT)
              : RKNPU_DPU_BS_ALU_BYPASS;
    return bs;
}

/*
 * The task's body (no trailer) to words[RKNPU_MATMUL_BODY_WORDS +
 * RKNPU_MATMUL_BIAS_WORDS]; returns the word count. The shape must already be
 * valid (M a multiple of 4 and at least 4, K a multiple of 32, the feature map
 * within 11 banks).
 */
static inline uint32_t rknpu_matmul_body(const struct rknpu_matmul_desc *d, uint64_t *words)
{
    const bool i8 = d->prec == RKNPU_PREC_INT8;
    const uint32_t es = i8 ? 1u : 2u;
    const uint32_t out = i8 ? RKNPU_PREC_INT32 : RKNPU_PREC_FP32;
    /* mtx512 gen_matmul_*: data banks hold the feature map, the rest of the 12 the weights. */
    const uint32_t fd_bytes = d->m * d->k * es;
    const uint32_t data_banks = (fd_bytes + RKNPU_CBUF_BANK_SIZE - 1u) / RKNPU_CBUF_BANK_SIZE;
    /* mtx512 gen_matmul_int8: ceil(K / 64); gen_matmul_fp16: ceil(K / 32): K * esize / 64. */
    const uint32_t entries = (d->k * es + 63u) / 64u;
    /* mtx512 gen_matmul_*: size_e_0..2 = 7 (int8) or 3 (fp16), od_bypass 1. */
    const uint32_t size_e = i8 ? 7u : 3u;
    /* mtx512 gen_matmul_int8: surf_add = dst_surf_stride * 8; gen_matmul_fp16: * 4. */
    const uint32_t surf_add = d->m * (i8 ? 8u : 4u);
    uint32_t n = 0;
#define W(blk, reg, val) words[n++] = rknpu_regcmd_write(blk, reg, val)
    /* ops[0]: DPU S_POINTER = POINTER_PP_MODE | EXECUTER_PP_EN | POINTER_PP_EN (mtx512, Mesa). */
    W(RKNPU_TGT_DPU, RKNPU_DPU_S_POINTER, RKNPU_S_POINTER_PP_DEFAULT);
    /* ---- CNA: mtx512 gen_matmul_task ops[1..48] ---- */
    W(RKNPU_TGT_CNA, RKNPU_CNA_CONV_CON1,
      d->prec << RKNPU_CONV_CON1_PROC_PREC_SHIFT | d->prec << RKNPU_CONV_CON1_IN_PREC_SHIFT |
          RKNPU_CONV_MODE_DIRECT);
    /* kernel_groups 0, feature_grains M + 1 (mtx512). */
    W(RKNPU_TGT_CNA, RKNPU_CNA_CONV_CON2, ((d->m + 1u) & 0x3ffu) << 4);
    W(RKNPU_TGT_CNA, RKNPU_CNA_CONV_CON3, 1u << 3 | 1u); /* y and x strides 1 */
    W(RKNPU_TGT_CNA, RKNPU_CNA_DATA_SIZE0, 1u << RKNPU_DATA_SIZE0_WIDTH_SHIFT | d->m);
    W(RKNPU_TGT_CNA, RKNPU_CNA_DATA_SIZE1, (d->k - 1u) << RKNPU_DATA_SIZE1_REAL_SHIFT | d->k);
    W(RKNPU_TGT_CNA, RKNPU_CNA_DATA_SIZE2, 1u);   /* dataout_width */
    W(RKNPU_TGT_CNA, RKNPU_CNA_DATA_SIZE3, d->m); /* dataout_atomics = width * height */
    W(RKNPU_TGT_CNA, RKNPU_CNA_WEIGHT_SIZE0, d->k * es * d->n);
    W(RKNPU_TGT_CNA, RKNPU_CNA_WEIGHT_SIZE1, d->k * es);
    W(RKNPU_TGT_CNA, RKNPU_CNA_WEIGHT_SIZE2,
      1u << RKNPU_WEIGHT_SIZE2_W_SHIFT | 1u << RKNPU_WEIGHT_SIZE2_H_SHIFT | d->n);
    W(RKNPU_TGT_CNA, RKNPU_CNA_CBUF_CON0,
      (RKNPU_CBUF_BANKS - data_banks) << RKNPU_CBUF_CON0_WEIGHT_BANK_SHIFT | data_banks);
    W(RKNPU_TGT_CNA, RKNPU_CNA_CBUF_CON1, entries);
    /* data_sign 1, cvt_type 1, cvt_bypass 1 (mtx512; Mesa's non-ARGB branch): 0xb. */
    W(RKNPU_TGT_CNA, RKNPU_CNA_CVT_CON0, RKNPU_CVT_CON0_MATMUL);
    /* cvt_scale0..3 = 1 in [31:16] (mtx512; Mesa CVT_SCALEn(1)). */
    W(RKNPU_TGT_CNA, RKNPU_CNA_CVT_CON1, 1u << 16);
    W(RKNPU_TGT_CNA, RKNPU_CNA_CVT_CON2, 1u << 16);
    W(RKNPU_TGT_CNA, RKNPU_CNA_CVT_CON3, 1u << 16);
    W(RKNPU_TGT_CNA, RKNPU_CNA_CVT_CON4, 1u << 16);
    W(RKNPU_TGT_CNA, RKNPU_CNA_FC_CON0, 0);
    W(RKNPU_TGT_CNA, RKNPU_CNA_FC_CON1, 0);
    W(RKNPU_TGT_CNA, RKNPU_CNA_PAD_CON0, 0);
    W(RKNPU_TGT_CNA, RKNPU_CNA_FEATURE_DATA_ADDR, d->a);
    W(RKNPU_TGT_CNA, RKNPU_CNA_FC_CON2, 0);
    W(RKNPU_TGT_CNA, RKNPU_CNA_DMA_CON0, 0xfu << 16 | 0xfu); /* weight, data burst 15 */
    /*
     * mtx512 gen_matmul_*: line_stride = width * 4, surf_stride = line_stride *
     * (height / 4 - 1); Mesa rkt_task.c fill_task the same (calc_line_stride(w) / 4).
     * For width 1: 4 and M - 4 (regs.h, "CNA feature-map strides").
     */
    W(RKNPU_TGT_CNA, RKNPU_CNA_DMA_CON1, 4u);
    W(RKNPU_TGT_CNA, RKNPU_CNA_DMA_CON2, d->m - 4u);
    W(RKNPU_TGT_CNA, RKNPU_CNA_FC_DATA_SIZE0, 1u << 16 | d->m); /* dma width 1, height M */
    W(RKNPU_TGT_CNA, RKNPU_CNA_FC_DATA_SIZE1, d->k);            /* dma channel K */
    W(RKNPU_TGT_CNA, RKNPU_CNA_DCOMP_CTRL, 0);
    W(RKNPU_TGT_CNA, RKNPU_CNA_DCOMP_REGNUM, 0);
    W(RKNPU_TGT_CNA, RKNPU_CNA_DCOMP_ADDR0, d->b);
    for (uint16_t i = 0; i < 16u; i++) /* DCOMP_AMOUNT0..15: no weight decompression */
        W(RKNPU_TGT_CNA, (uint16_t)(RKNPU_CNA_DCOMP_AMOUNT0 + 4u * i), 0);
    W(RKNPU_TGT_CNA, RKNPU_CNA_CVT_CON5, 0);
    W(RKNPU_TGT_CNA, RKNPU_CNA_PAD_CON1, 0);
    /* ---- CORE: mtx512 ops[49..53] ---- */
    W(RKNPU_TGT_CORE, RKNPU_CORE_MISC_CFG, d->prec << RKNPU_CORE_MISC_PREC_SHIFT | 1u); /* QD_EN */
    W(RKNPU_TGT_CORE, RKNPU_CORE_DATAOUT_SIZE_0, (d->m - 1u) << 16); /* height - 1, width - 1 */
    W(RKNPU_TGT_CORE, RKNPU_CORE_DATAOUT_SIZE_1, d->n - 1u);
    W(RKNPU_TGT_CORE, RKNPU_CORE_CLIP_TRUNCATE, 0);
    /* Undocumented; mtx512 CORE_3030 and Mesa emit_raw(CORE | 1, 0x3030, 0) both write 0. */
    W(RKNPU_TGT_CORE, RKNPU_CORE_3030, 0);
    /* ---- DPU: mtx512 ops[54..103] ---- */
    /* burst_len 15, conv_mode 0, output_mode 2, flying_mode 0. */
    W(RKNPU_TGT_DPU, RKNPU_DPU_FEATURE_MODE_CFG,
      0xfu << 5 | RKNPU_DPU_OUTPUT_MODE_MEMORY << RKNPU_DPU_FMC_OUTPUT_MODE_SHIFT);
    W(RKNPU_TGT_DPU, RKNPU_DPU_DATA_FORMAT,
      out << RKNPU_DPU_OUT_PREC_SHIFT | d->prec << RKNPU_DPU_IN_PREC_SHIFT | d->prec);
    W(RKNPU_TGT_DPU, RKNPU_DPU_OFFSET_PEND, 0);
    W(RKNPU_TGT_DPU, RKNPU_DPU_DST_BASE_ADDR, d->c);
    /* dst_surf_stride = dataout height * width = M, in [31:4]. */
    W(RKNPU_TGT_DPU, RKNPU_DPU_DST_SURF_STRIDE, d->m << 4);
    W(RKNPU_TGT_DPU, RKNPU_DPU_DATA_CUBE_WIDTH, 0);
    W(RKNPU_TGT_DPU, RKNPU_DPU_DATA_CUBE_HEIGHT, d->m - 1u);
    W(RKNPU_TGT_DPU, RKNPU_DPU_DATA_CUBE_NOTCH_ADDR, 0);
    W(RKNPU_TGT_DPU, RKNPU_DPU_DATA_CUBE_CHANNEL, (d->n - 1u) << 16 | (d->n - 1u));
    W(RKNPU_TGT_DPU, RKNPU_DPU_BS_CFG, rknpu_matmul_bs_cfg(d));
    W(RKNPU_TGT_DPU, RKNPU_DPU_BS_ALU_CFG, 0);
    W(RKNPU_TGT_DPU, RKNPU_DPU_BS_MUL_CFG, 0);
    W(RKNPU_TGT_DPU, RKNPU_DPU_BS_RELUX_CMP_VALUE, 0);
    W(RKNPU_TGT_DPU, RKNPU_DPU_BS_OW_CFG, rknpu_bs_ow_cfg(size_e));
    W(RKNPU_TGT_DPU, RKNPU_DPU_BS_OW_OP, 0);
    W(RKNPU_TGT_DPU, RKNPU_DPU_WDMA_SIZE_0, d->n - 1u);
    W(RKNPU_TGT_DPU, RKNPU_DPU_WDMA_SIZE_1, (d->m - 1u) << 16);
    /* bn relu, mul, alu and the stage bypassed (mtx512; Mesa the same): 0x53. */
    W(RKNPU_TGT_DPU, RKNPU_DPU_BN_CFG,
      RKNPU_DPU_BS_RELU_BYPASS | RKNPU_DPU_BS_MUL_BYPASS | RKNPU_DPU_BS_ALU_BYPASS |
          RKNPU_DPU_BN_BYPASS);
    W(RKNPU_TGT_DPU, RKNPU_DPU_BN_ALU_CFG, 0);
    W(RKNPU_TGT_DPU, RKNPU_DPU_BN_MUL_CFG, 0);
    W(RKNPU_TGT_DPU, RKNPU_DPU_BN_RELUX_CMP_VALUE, 0);
    W(RKNPU_TGT_DPU, RKNPU_DPU_EW_CFG, RKNPU_DPU_EW_CFG_ALL_BYPASS);
    W(RKNPU_TGT_DPU, RKNPU_DPU_EW_CVT_OFFSET_VALUE, 0);
    W(RKNPU_TGT_DPU, RKNPU_DPU_EW_CVT_SCALE_VALUE, 1u);
    W(RKNPU_TGT_DPU, RKNPU_DPU_EW_RELUX_CMP_VALUE, 0);
    W(RKNPU_TGT_DPU, RKNPU_DPU_OUT_CVT_OFFSET, 0);
    W(RKNPU_TGT_DPU, RKNPU_DPU_OUT_CVT_SCALE, 1u); /* scale 1, fp32tofp16_en 0 */
    W(RKNPU_TGT_DPU, RKNPU_DPU_OUT_CVT_SHIFT, 0);
    for (uint16_t i = 0; i < 8u; i++) /* EW_OP_VALUE_0..7 */
        W(RKNPU_TGT_DPU, (uint16_t)(RKNPU_DPU_EW_OP_VALUE_0 + 4u * i), 0);
    W(RKNPU_TGT_DPU, RKNPU_DPU_SURFACE_ADD, surf_add << 4);
    /* Undocumented; mtx512 DPU_40C4 and Mesa emit_raw(DPU | 1, 0x40c4, 0) both write 0. */
    W(RKNPU_TGT_DPU, RKNPU_DPU_40C4, 0);
    for (uint16_t i = 0; i < 12u; i++) /* LUT_ACCESS_CFG .. LUT_LO_SLOPE_SHIFT: no LUT */
        W(RKNPU_TGT_DPU, (uint16_t)(RKNPU_DPU_LUT_ACCESS_CFG + 4u * i), 0);
    if (d->bias) {
        /* Mesa fill_first_regcmd: BRDMA_DATA_USE(1), the bias at BS_BASE_ADDR. */
        W(RKNPU_TGT_DPU_RDMA, RKNPU_DPU_RDMA_BRDMA_CFG, 1u << 1);
        W(RKNPU_TGT_DPU_RDMA, RKNPU_DPU_RDMA_BS_BASE_ADDR, d->bias);
    }
#undef W
    return n;
}

/*
 * The trailer of the last task of a chain (mtx512 gen_matmul_task ops[104..107],
 * Mesa fill_first_regcmd for one task): a no-op word, PC REGISTER_AMOUNTS = 0,
 * the barrier ("64'h0041_xxxx must be set before op_en", TRM via Mesa), and the
 * op-enable word carrying the block-enable mask.
 */
static inline void rknpu_trailer_end(uint64_t *t, uint32_t enable_mask)
{
    t[0] = 0;
    t[1] = rknpu_regcmd_write(RKNPU_TGT_PC, RKNPU_PC_REGISTER_AMOUNTS, 0);
    t[2] = rknpu_regcmd((uint16_t)(RKNPU_TGT_BARRIER | RKNPU_TGT_WRITE), 0, 0);
    t[3] = rknpu_regcmd((uint16_t)(RKNPU_TGT_OP_EN | RKNPU_TGT_WRITE), enable_mask,
                        RKNPU_PC_OPERATION_ENABLE);
}

/* Make a trailer name the next task (Mesa compile_operation patches words n-4 and n-3). */
static inline void rknpu_trailer_link(uint64_t *t, uint32_t next_iova, uint32_t next_amount)
{
    t[0] = rknpu_regcmd_write(RKNPU_TGT_PC, RKNPU_PC_BASE_ADDRESS, next_iova);
    t[1] = rknpu_regcmd_write(RKNPU_TGT_PC, RKNPU_PC_REGISTER_AMOUNTS, next_amount);
}

/*
 * Body and trailer to words[RKNPU_MATMUL_REGCMD_MAX]; the trailer names the
 * next task (next_iova 0: the last). Returns the word count, even. Its
 * REGISTER_AMOUNTS is rknpu_regcmd_amount(count).
 */
static inline uint32_t rknpu_matmul_regcmd(const struct rknpu_matmul_desc *d, uint64_t *words,
                                           uint32_t next_iova, uint32_t next_amount)
{
    uint32_t n = rknpu_matmul_body(d, words);
    if ((n + RKNPU_TRAILER_WORDS) % 2u)
        words[n++] = 0;
    rknpu_trailer_end(&words[n], rknpu_matmul_enable(d));
    if (next_iova != 0)
        rknpu_trailer_link(&words[n], next_iova, next_amount);
    return n + RKNPU_TRAILER_WORDS;
}

#endif

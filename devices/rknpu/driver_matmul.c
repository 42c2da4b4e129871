/* SPDX-License-Identifier: MIT */
/*
 * Register commands of a matmul as a 1x1 direct convolution (the way
 * RKNN-MM and mtx512's reverse engineering drive the CNA, CORE and DPU;
 * ../shared/hw/rknpu.md section 8), the native layouts, and the trailer
 * that ends and chains every task's list.
 */
#include <errno.h>

#include "driver_internal.h"

/* One core's convolution buffer: 12 banks of 32 KiB (Mesa, mtx512). */
#define CBUF_BANKS     12u
#define CBUF_BANK_SIZE 32768u
/* Single-task limits the convolution buffer sets (mtx512; RKNN-MM splits larger ones). */
#define MM_MAX_M 544u
#define MM_MAX_K 4096u
#define MM_MAX_N 4096u

void rknpu_regcmd_trailer(uint64_t *trailer, uint32_t enable_mask)
{
    trailer[0] = 0;
    trailer[1] = 0;
    trailer[2] = rknpu_regcmd_write(RKNPU_TGT_BARRIER, 0, 0);
    trailer[3] = rknpu_regcmd_write(RKNPU_TGT_OP_EN, RKNPU_PC_OPERATION_ENABLE, enable_mask);
}

void rknpu_regcmd_chain(uint64_t *trailer, npv_iova_t next, uint32_t next_amount)
{
    trailer[0] = rknpu_regcmd_write(RKNPU_TGT_PC, RKNPU_PC_BASE_ADDRESS, (uint32_t)next);
    trailer[1] = rknpu_regcmd_write(RKNPU_TGT_PC, RKNPU_PC_REGISTER_AMOUNTS, next_amount);
}

static uint32_t esize(enum npv_rknpu_dtype dt)
{
    return dt == NPV_RKNPU_INT8 ? 1u : 2u;
}

static bool shape_ok(const struct npv_rknpu_matmul *mm)
{
    if (mm->dtype != NPV_RKNPU_INT8 && mm->dtype != NPV_RKNPU_FP16)
        return false;
    uint32_t n_align = mm->dtype == NPV_RKNPU_INT8 ? RKNPU_MM_N_ALIGN_INT8 : RKNPU_MM_N_ALIGN_FP16;
    if (mm->m == 0 || mm->m % 4 != 0 || mm->m > MM_MAX_M)
        return false;
    if (mm->k == 0 || mm->k % RKNPU_MM_K_ALIGN != 0 || mm->k > MM_MAX_K)
        return false;
    if (mm->n == 0 || mm->n % n_align != 0 || mm->n > MM_MAX_N)
        return false;
    /* The feature map and one kernel must fit the convolution buffer, leaving a weight bank. */
    uint64_t fd_bytes = (uint64_t)mm->m * mm->k * esize(mm->dtype);
    if ((fd_bytes + CBUF_BANK_SIZE - 1) / CBUF_BANK_SIZE > CBUF_BANKS - 1)
        return false;
    return (uint64_t)mm->k * esize(mm->dtype) <= CBUF_BANK_SIZE;
}

int npv_rknpu_matmul_sizes(const struct npv_rknpu_matmul *mm, struct npv_rknpu_matmul_sizes *out)
{
    if (mm == NULL || out == NULL || !shape_ok(mm))
        return -EINVAL;
    uint64_t e = esize(mm->dtype);
    out->a = (uint64_t)mm->m * mm->k * e;
    out->b = (uint64_t)mm->k * mm->n * e;
    out->c = (uint64_t)mm->m * mm->n * 4u;
    out->bias = (uint64_t)mm->n * 4u;
    return 0;
}

static bool addr_ok(npv_iova_t iova)
{
    return iova != 0 && iova <= UINT32_MAX && (iova & 0xf) == 0;
}

struct emit {
    uint64_t *w;
    uint32_t n, max;
};

static void put(struct emit *e, uint16_t block, uint16_t reg, uint32_t value)
{
    if (e->n < e->max)
        e->w[e->n] = rknpu_regcmd_write(block, reg, value);
    e->n++;
}

static void emit_cna(struct emit *e, const struct npv_rknpu_matmul *mm, uint32_t prec)
{
    uint32_t es = esize(mm->dtype);
    uint32_t fd_bytes = mm->m * mm->k * es;
    uint32_t data_banks = (fd_bytes + CBUF_BANK_SIZE - 1) / CBUF_BANK_SIZE;
    uint32_t weight_banks = CBUF_BANKS - data_banks;
    put(e, RKNPU_TGT_CNA, RKNPU_CNA_CONV_CON1,
        prec << RKNPU_CONV_CON1_PROC_PREC_SHIFT | prec << RKNPU_CONV_CON1_IN_PREC_SHIFT |
            RKNPU_CONV_MODE_DIRECT);
    put(e, RKNPU_TGT_CNA, RKNPU_CNA_CONV_CON2, ((mm->m + 1u) & 0x3ffu) << 4);
    put(e, RKNPU_TGT_CNA, RKNPU_CNA_CONV_CON3, 1u << 3 | 1u); /* strides 1 */
    put(e, RKNPU_TGT_CNA, RKNPU_CNA_DATA_SIZE0, 1u << RKNPU_DATA_SIZE0_WIDTH_SHIFT | mm->m);
    put(e, RKNPU_TGT_CNA, RKNPU_CNA_DATA_SIZE1,
        (mm->k - 1u) << RKNPU_DATA_SIZE1_REAL_SHIFT | mm->k);
    put(e, RKNPU_TGT_CNA, RKNPU_CNA_DATA_SIZE2, 1u);
    put(e, RKNPU_TGT_CNA, RKNPU_CNA_DATA_SIZE3, mm->m);
    put(e, RKNPU_TGT_CNA, RKNPU_CNA_WEIGHT_SIZE0, mm->n * mm->k * es);
    put(e, RKNPU_TGT_CNA, RKNPU_CNA_WEIGHT_SIZE1, mm->k * es);
    put(e, RKNPU_TGT_CNA, RKNPU_CNA_WEIGHT_SIZE2,
        1u << RKNPU_WEIGHT_SIZE2_W_SHIFT | 1u << RKNPU_WEIGHT_SIZE2_H_SHIFT | mm->n);
    put(e, RKNPU_TGT_CNA, RKNPU_CNA_CBUF_CON0, weight_banks << 4 | data_banks);
    put(e, RKNPU_TGT_CNA, RKNPU_CNA_CBUF_CON1, (mm->k * es + 31u) / 32u);
    put(e, RKNPU_TGT_CNA, RKNPU_CNA_CVT_CON0, 1u); /* input convert bypassed */
    put(e, RKNPU_TGT_CNA, RKNPU_CNA_FC_CON0, 0);
    put(e, RKNPU_TGT_CNA, RKNPU_CNA_PAD_CON0, 0);
    put(e, RKNPU_TGT_CNA, RKNPU_CNA_FEATURE_DATA_ADDR, (uint32_t)mm->a);
    put(e, RKNPU_TGT_CNA, RKNPU_CNA_DMA_CON0, 0xfu << 16 | 0xfu); /* burst lengths */
    /* Line and surface strides of the [K/c2][M][c2] feature map, in 16-byte units. */
    put(e, RKNPU_TGT_CNA, RKNPU_CNA_DMA_CON1, 1u);
    put(e, RKNPU_TGT_CNA, RKNPU_CNA_DMA_CON2, mm->m);
    put(e, RKNPU_TGT_CNA, RKNPU_CNA_FC_DATA_SIZE0, 1u << 16 | mm->m);
    put(e, RKNPU_TGT_CNA, RKNPU_CNA_FC_DATA_SIZE1, mm->k);
    put(e, RKNPU_TGT_CNA, RKNPU_CNA_DCOMP_CTRL, 0);
    put(e, RKNPU_TGT_CNA, RKNPU_CNA_DCOMP_ADDR0, (uint32_t)mm->b);
}

static void emit_core(struct emit *e, const struct npv_rknpu_matmul *mm, uint32_t prec)
{
    put(e, RKNPU_TGT_CORE, RKNPU_CORE_MISC_CFG, prec << RKNPU_CORE_MISC_PREC_SHIFT | 1u);
    put(e, RKNPU_TGT_CORE, RKNPU_CORE_DATAOUT_SIZE_0, (mm->m - 1u) << 16);
    put(e, RKNPU_TGT_CORE, RKNPU_CORE_DATAOUT_SIZE_1, mm->n - 1u);
    put(e, RKNPU_TGT_CORE, RKNPU_CORE_CLIP_TRUNCATE, 0);
}

static void emit_dpu(struct emit *e, const struct npv_rknpu_matmul *mm, uint32_t prec)
{
    uint32_t out = mm->dtype == NPV_RKNPU_INT8 ? RKNPU_PREC_INT32 : RKNPU_PREC_FP32;
    put(e, RKNPU_TGT_DPU, RKNPU_DPU_S_POINTER, RKNPU_S_POINTER_PP_DEFAULT);
    put(e, RKNPU_TGT_DPU, RKNPU_DPU_FEATURE_MODE_CFG,
        0xfu << 5 | RKNPU_DPU_OUTPUT_MODE_MEMORY << RKNPU_DPU_FMC_OUTPUT_MODE_SHIFT);
    put(e, RKNPU_TGT_DPU, RKNPU_DPU_DATA_FORMAT,
        out << RKNPU_DPU_OUT_PREC_SHIFT | prec << RKNPU_DPU_IN_PREC_SHIFT | prec);
    put(e, RKNPU_TGT_DPU, RKNPU_DPU_DST_BASE_ADDR, (uint32_t)mm->c);
    put(e, RKNPU_TGT_DPU, RKNPU_DPU_DST_SURF_STRIDE, mm->m << 4);
    put(e, RKNPU_TGT_DPU, RKNPU_DPU_DATA_CUBE_WIDTH, 0);
    put(e, RKNPU_TGT_DPU, RKNPU_DPU_DATA_CUBE_HEIGHT, mm->m - 1u);
    put(e, RKNPU_TGT_DPU, RKNPU_DPU_DATA_CUBE_CHANNEL, (mm->n - 1u) << 16 | (mm->n - 1u));
    uint32_t bs = RKNPU_DPU_BS_MUL_BYPASS;
    if (mm->bias == 0 && !mm->relu) {
        bs |= RKNPU_DPU_BS_BYPASS | RKNPU_DPU_BS_ALU_BYPASS | RKNPU_DPU_BS_RELU_BYPASS;
    } else {
        if (mm->bias != 0)
            bs |= RKNPU_DPU_BS_ALU_SRC_MEM | RKNPU_DPU_ALU_ALGO_ADD << RKNPU_DPU_BS_ALU_ALGO_SHIFT;
        else
            bs |= RKNPU_DPU_BS_ALU_BYPASS;
        if (!mm->relu)
            bs |= RKNPU_DPU_BS_RELU_BYPASS;
    }
    put(e, RKNPU_TGT_DPU, RKNPU_DPU_BS_CFG, bs);
    put(e, RKNPU_TGT_DPU, RKNPU_DPU_BS_ALU_CFG, 0);
    put(e, RKNPU_TGT_DPU, RKNPU_DPU_BS_MUL_CFG, 0);
    put(e, RKNPU_TGT_DPU, RKNPU_DPU_BS_RELUX_CMP_VALUE, 0);
    put(e, RKNPU_TGT_DPU, RKNPU_DPU_WDMA_SIZE_0, mm->n - 1u);
    put(e, RKNPU_TGT_DPU, RKNPU_DPU_WDMA_SIZE_1, (mm->m - 1u) << 16);
    put(e, RKNPU_TGT_DPU, RKNPU_DPU_BN_CFG,
        RKNPU_DPU_BN_BYPASS | 0x52u); /* every BN stage bypassed */
    put(e, RKNPU_TGT_DPU, RKNPU_DPU_EW_CFG,
        RKNPU_DPU_EW_BYPASS | 0x382u); /* every EW stage bypassed */
    put(e, RKNPU_TGT_DPU, RKNPU_DPU_OUT_CVT_OFFSET, 0);
    put(e, RKNPU_TGT_DPU, RKNPU_DPU_OUT_CVT_SCALE, 1u);
    put(e, RKNPU_TGT_DPU, RKNPU_DPU_OUT_CVT_SHIFT, 0);
    put(e, RKNPU_TGT_DPU, RKNPU_DPU_SURFACE_ADD, (mm->m * 4u) << 4);
    if (mm->bias != 0) {
        put(e, RKNPU_TGT_DPU_RDMA, RKNPU_DPU_RDMA_BRDMA_CFG, 1u << 1);
        put(e, RKNPU_TGT_DPU_RDMA, RKNPU_DPU_RDMA_BS_BASE_ADDR, (uint32_t)mm->bias);
    }
}

int npv_rknpu_matmul_task(const struct npv_rknpu_matmul *mm, uint64_t *regcmd, uint32_t max,
                          struct npv_rknpu_task *task)
{
    if (mm == NULL || (regcmd == NULL && max != 0) || !shape_ok(mm) || !addr_ok(mm->a) ||
        !addr_ok(mm->b) || !addr_ok(mm->c) || (mm->bias != 0 && !addr_ok(mm->bias)))
        return -EINVAL;
    uint32_t prec = mm->dtype == NPV_RKNPU_INT8 ? RKNPU_PREC_INT8 : RKNPU_PREC_FP16;
    struct emit e = {.w = regcmd, .n = 0, .max = max};
    emit_cna(&e, mm, prec);
    emit_core(&e, mm, prec);
    emit_dpu(&e, mm, prec);
    if (e.n > max)
        return -ENOSPC;
    if (task != NULL)
        *task = (struct npv_rknpu_task){
            .regcmd = regcmd,
            .regcmd_count = e.n,
            .enable_mask = mm->bias != 0 ? RKNPU_MM_ENABLE_BIAS : RKNPU_MM_ENABLE,
        };
    return (int)e.n;
}

uint64_t npv_rknpu_matmul_a_index(enum npv_rknpu_dtype dt, uint32_t m, uint32_t k, uint32_t row,
                                  uint32_t col)
{
    (void)k;
    return dt == NPV_RKNPU_INT8 ? rknpu_a_index_int8(row, col, m) : rknpu_a_index_fp16(row, col, m);
}

uint64_t npv_rknpu_matmul_b_index(enum npv_rknpu_dtype dt, uint32_t k, uint32_t n, uint32_t row,
                                  uint32_t col)
{
    (void)n;
    return dt == NPV_RKNPU_INT8 ? rknpu_b_index_int8(row, col, k) : rknpu_b_index_fp16(row, col, k);
}

uint64_t npv_rknpu_matmul_c_index(uint32_t m, uint32_t n, uint32_t row, uint32_t col)
{
    (void)n;
    return rknpu_c_index(row, col, m);
}

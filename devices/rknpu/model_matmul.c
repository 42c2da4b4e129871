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

/*
 * The registers a task's own list must write: every one the silicon-run
 * example writes (mtx512 gen_matmul_task ops[0..103]; Mesa's
 * rkt_fill_regcmd also writes them all per task "to be sure"). [model choice]
 * What the hardware does with a register a list leaves at an earlier task's
 * value is unknown, so the model refuses the task (a config error): a driver
 * that drops one (CORE 0x3030, DPU 0x40c4, BS_OW_CFG ...) cannot pass.
 * Ranges, inclusive, in steps of 4.
 */
static const struct {
    uint16_t first, last;
} REQUIRED[] = {
    {RKNPU_DPU_S_POINTER, RKNPU_DPU_S_POINTER},
    {RKNPU_CNA_CONV_CON1, RKNPU_CNA_CONV_CON3},
    {RKNPU_CNA_DATA_SIZE0, RKNPU_CNA_WEIGHT_SIZE2},
    {RKNPU_CNA_CBUF_CON0, RKNPU_CNA_CBUF_CON1},
    {RKNPU_CNA_CVT_CON0, RKNPU_CNA_PAD_CON0},
    {RKNPU_CNA_FEATURE_DATA_ADDR, RKNPU_CNA_FC_DATA_SIZE1},
    {RKNPU_CNA_DCOMP_CTRL, RKNPU_CNA_DCOMP_REGNUM},
    {RKNPU_CNA_DCOMP_ADDR0, RKNPU_CNA_DCOMP_ADDR0},
    {RKNPU_CNA_DCOMP_AMOUNT0, RKNPU_CNA_PAD_CON1},
    {RKNPU_CORE_MISC_CFG, RKNPU_CORE_CLIP_TRUNCATE},
    {RKNPU_CORE_3030, RKNPU_CORE_3030},
    {RKNPU_DPU_FEATURE_MODE_CFG, RKNPU_DPU_OFFSET_PEND},
    {RKNPU_DPU_DST_BASE_ADDR, RKNPU_DPU_DST_SURF_STRIDE},
    {RKNPU_DPU_DATA_CUBE_WIDTH, RKNPU_DPU_OUT_CVT_SHIFT},
    {RKNPU_DPU_EW_OP_VALUE_0, RKNPU_DPU_EW_OP_VALUE_0 + 28u},
    {RKNPU_DPU_SURFACE_ADD, RKNPU_DPU_40C4},
    {RKNPU_DPU_LUT_ACCESS_CFG, RKNPU_DPU_LUT_ACCESS_CFG + 44u},
};

static bool written(const uint32_t *wr, uint32_t off)
{
    return (wr[off / 128u] >> ((off / 4u) % 32u)) & 1u;
}

static int check_written(const uint32_t *wr, bool bias)
{
    for (size_t i = 0; i < sizeof(REQUIRED) / sizeof(REQUIRED[0]); i++)
        for (uint32_t off = REQUIRED[i].first; off <= REQUIRED[i].last; off += 4u)
            if (!written(wr, off))
                return -EINVAL;
    /* Mesa fill_first_regcmd: the bias needs DPU_RDMA's BRDMA_CFG and BS_BASE_ADDR. */
    if (bias &&
        (!written(wr, RKNPU_DPU_RDMA_BRDMA_CFG) || !written(wr, RKNPU_DPU_RDMA_BS_BASE_ADDR)))
        return -EINVAL;
    return 0;
}

/*
 * CNA: the feature map A (height M, width 1, K channels), the kernels B,
 * the convolution buffer's split and the feature DMA's strides.
 */
static int decode_cna(const uint32_t *regs, struct rknpu_matmul *mm)
{
    uint32_t con1 = R(RKNPU_CNA_CONV_CON1);
    uint32_t in = (con1 >> RKNPU_CONV_CON1_IN_PREC_SHIFT) & RKNPU_PREC_MASK;
    uint32_t proc = (con1 >> RKNPU_CONV_CON1_PROC_PREC_SHIFT) & RKNPU_PREC_MASK;
    if ((con1 & RKNPU_CONV_MODE_MASK) != RKNPU_CONV_MODE_DIRECT || in != proc ||
        (in != RKNPU_PREC_INT8 && in != RKNPU_PREC_FP16))
        return -EINVAL;
    mm->prec = in;
    /* CONV_CON3: strides other than 1 are not modelled (mtx512 writes 1 and 1). */
    if ((R(RKNPU_CNA_CONV_CON3) & 0x3fu) != (1u << 3 | 1u))
        return -EINVAL;

    uint32_t size0 = R(RKNPU_CNA_DATA_SIZE0);
    uint32_t width = (size0 >> RKNPU_DATA_SIZE0_WIDTH_SHIFT) & RKNPU_DATA_SIZE0_FIELD_MASK;
    mm->m = size0 & RKNPU_DATA_SIZE0_FIELD_MASK;
    if (width != 1 || mm->m == 0 || mm->m > RKNPU_MM_MAX_M)
        return -EINVAL;
    /* DATA_SIZE2 DATAOUT_WIDTH 1; DATA_SIZE3 DATAOUT_ATOMICS = width * height (mtx512). */
    if ((R(RKNPU_CNA_DATA_SIZE2) & RKNPU_DATA_SIZE0_FIELD_MASK) != 1u ||
        (R(RKNPU_CNA_DATA_SIZE3) & 0x3ffffu) != mm->m)
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

    /*
     * CBUF_CON0: the data banks must hold the whole feature map and the
     * weight banks one kernel, 12 banks of 32 KiB in all (mtx512
     * gen_matmul_*); CBUF_CON1 DATA_ENTRIES: one line of width * K * esize
     * bytes in 64-byte entries (mtx512: ceil(K / 64) int8, ceil(K / 32)
     * fp16). A line the buffer holds in other entries is read wrong.
     */
    uint32_t con0 = R(RKNPU_CNA_CBUF_CON0);
    uint32_t dbanks = con0 & RKNPU_CBUF_CON0_BANK_MASK;
    uint32_t wbanks = (con0 >> RKNPU_CBUF_CON0_WEIGHT_BANK_SHIFT) & RKNPU_CBUF_CON0_BANK_MASK;
    if (dbanks + wbanks > RKNPU_MODEL_CBUF_BANKS ||
        (uint64_t)dbanks * RKNPU_MODEL_CBUF_BANK_SIZE < (uint64_t)mm->m * mm->k * es ||
        (uint64_t)wbanks * RKNPU_MODEL_CBUF_BANK_SIZE < (uint64_t)mm->k * es)
        return -EINVAL;
    if ((R(RKNPU_CNA_CBUF_CON1) & RKNPU_CBUF_CON1_ENTRIES_MASK) != (mm->k * es + 63u) / 64u)
        return -EINVAL;

    /*
     * CVT_CON0: the input converter must be bypassed (not modelled) with
     * CVT_TYPE set as every source writes it; DATA_SIGN says whether int8
     * data are signed: clear, the CNA reads them as unsigned (a wrong
     * product for negative data). [model choice] fp16 without DATA_SIGN is
     * refused.
     */
    uint32_t cvt = R(RKNPU_CNA_CVT_CON0);
    if (!(cvt & RKNPU_CVT_CON0_CVT_BYPASS) || !(cvt & RKNPU_CVT_CON0_CVT_TYPE) ||
        (mm->prec == RKNPU_PREC_FP16 && !(cvt & RKNPU_CVT_CON0_DATA_SIGN)))
        return -EINVAL;
    mm->a_unsigned = !(cvt & RKNPU_CVT_CON0_DATA_SIGN);

    /* No padding, no full-connected skip, no weight decompression (mtx512 writes 0). */
    if (R(RKNPU_CNA_PAD_CON0) != 0 || (R(RKNPU_CNA_FC_CON0) & 1u) || R(RKNPU_CNA_DCOMP_CTRL) != 0)
        return -EINVAL;
    /* FC_DATA_SIZE0/1: the feature DMA's width, height and channels are the map's. */
    if (R(RKNPU_CNA_FC_DATA_SIZE0) != (1u << 16 | mm->m) ||
        (R(RKNPU_CNA_FC_DATA_SIZE1) & 0xffffu) != mm->k)
        return -EINVAL;
    /*
     * DMA_CON1 / DMA_CON2 (regs.h "CNA feature-map strides"): the feature
     * DMA steps LINE_STRIDE x 16 bytes from one group of four lines to the
     * next and (LINE_STRIDE + SURF_STRIDE) x 16 bytes from one surface of c2
     * channels to the next: A is read from these addresses, whatever they are.
     */
    uint64_t line = R(RKNPU_CNA_DMA_CON1) & RKNPU_DMA_STRIDE_MASK;
    uint64_t surf = R(RKNPU_CNA_DMA_CON2) & RKNPU_DMA_STRIDE_MASK;
    mm->a_group = line * 16u;
    mm->a_surface = (line + surf) * 16u;
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
    /* CLIP_TRUNCATE shifts the accumulator (Mesa truncate_bits): not modelled, must be 0. */
    if (R(RKNPU_CORE_CLIP_TRUNCATE) != 0)
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
        /* BRDMA_CFG DATA_USE 1: the bias operand is read (Mesa fill_first_regcmd). */
        if (((R(RKNPU_DPU_RDMA_BRDMA_CFG) >> 1) & 0xfu) != 1u)
            return -EINVAL;
        mm->has_bias = true;
        mm->bias = R(RKNPU_DPU_RDMA_BS_BASE_ADDR);
    }
    mm->relu = !(bs & RKNPU_DPU_BS_RELU_BYPASS);
    return 0;
}

static int decode_dpu(const uint32_t *regs, uint32_t enable, struct rknpu_matmul *mm)
{
    uint32_t fmc = R(RKNPU_DPU_FEATURE_MODE_CFG);
    uint32_t mode = (fmc >> RKNPU_DPU_FMC_OUTPUT_MODE_SHIFT) & RKNPU_DPU_FMC_OUTPUT_MODE_MASK;
    uint32_t fmt = R(RKNPU_DPU_DATA_FORMAT);
    uint32_t out = (fmt >> RKNPU_DPU_OUT_PREC_SHIFT) & RKNPU_PREC_MASK;
    uint32_t in = (fmt >> RKNPU_DPU_IN_PREC_SHIFT) & RKNPU_PREC_MASK;
    uint32_t proc = fmt & RKNPU_PREC_MASK;
    uint32_t want_out = mm->prec == RKNPU_PREC_INT8 ? RKNPU_PREC_INT32 : RKNPU_PREC_FP32;
    /* Output to memory, conv mode 0, not flying (mtx512: burst 15 << 5 | 2 << 1). */
    if (mode != RKNPU_DPU_OUTPUT_MODE_MEMORY || (fmc & 0x19u) != 0 || in != mm->prec ||
        proc != mm->prec || out != want_out)
        return -EINVAL;
    uint32_t ch = R(RKNPU_DPU_DATA_CUBE_CHANNEL);
    if ((R(RKNPU_DPU_DATA_CUBE_WIDTH) & RKNPU_DPU_DATA_CUBE_FIELD_MASK) != 0 ||
        (R(RKNPU_DPU_DATA_CUBE_HEIGHT) & RKNPU_DPU_DATA_CUBE_FIELD_MASK) != mm->m - 1 ||
        (ch & RKNPU_DPU_DATA_CUBE_FIELD_MASK) != mm->n - 1 ||
        ((ch >> 16) & RKNPU_DPU_DATA_CUBE_FIELD_MASK) != mm->n - 1)
        return -EINVAL;
    /* The write DMA's cube (WDMA_SIZE_0/1) is the DPU's (mtx512 width/height/channel_wdma). */
    if ((R(RKNPU_DPU_WDMA_SIZE_0) & RKNPU_DPU_DATA_CUBE_FIELD_MASK) != mm->n - 1 ||
        R(RKNPU_DPU_WDMA_SIZE_1) != (mm->m - 1) << 16)
        return -EINVAL;
    if (!(R(RKNPU_DPU_BN_CFG) & RKNPU_DPU_BN_BYPASS) ||
        !(R(RKNPU_DPU_EW_CFG) & RKNPU_DPU_EW_BYPASS))
        return -EINVAL;
    /*
     * BS_OW_CFG: SIZE_E_0..2 = 7 for int8 and 3 for fp16, OD_BYPASS set --
     * the only values the silicon-run example writes (mtx512 gen_matmul_int8
     * / _fp16); [model choice] anything else is refused (meaning unknown).
     */
    if (R(RKNPU_DPU_BS_OW_CFG) != rknpu_bs_ow_cfg(mm->prec == RKNPU_PREC_INT8 ? 7u : 3u))
        return -EINVAL;
    /* The output converter (OUT_CVT) is not modelled: identity only (mtx512: 0, 1, 0). */
    if (R(RKNPU_DPU_OUT_CVT_OFFSET) != 0 || R(RKNPU_DPU_OUT_CVT_SCALE) != 1u ||
        R(RKNPU_DPU_OUT_CVT_SHIFT) != 0)
        return -EINVAL;
    /*
     * SURFACE_ADD: M x 8 for int8 and M x 4 for fp16 in [31:4] (mtx512
     * gen_matmul_int8 / _fp16 surf_add). Why the two differ is not public;
     * [model choice] a value the example does not write is refused.
     */
    if (R(RKNPU_DPU_SURFACE_ADD) != (mm->m * (mm->prec == RKNPU_PREC_INT8 ? 8u : 4u)) << 4)
        return -EINVAL;
    /*
     * DST_SURF_STRIDE [31:4]: C's surfaces of four channels lie that many
     * 16-byte units apart (mtx512: dataout height x width = M): C is written
     * at these addresses, whatever they are.
     */
    mm->c_surface = (uint64_t)(R(RKNPU_DPU_DST_SURF_STRIDE) >> 4) * 16u;
    mm->c = R(RKNPU_DPU_DST_BASE_ADDR);
    return decode_bs(regs, enable, mm);
}

int rknpu_matmul_decode(const uint32_t *regs, const uint32_t *wr, uint32_t enable,
                        struct rknpu_matmul *mm)
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
    if (r == 0)
        r = check_written(wr, mm->has_bias);
    return r;
}

/* Channels per 16-byte feature atom: 16 int8, 8 fp16 (regs.h native layouts). */
static uint32_t a_c2(const struct rknpu_matmul *mm)
{
    return mm->prec == RKNPU_PREC_INT8 ? 16u : 8u;
}

/* Byte offset of A[m][k] as the CNA's DMA reads it (decode_cna). */
static uint64_t a_offset(const struct rknpu_matmul *mm, uint32_t m, uint32_t k)
{
    uint32_t c2 = a_c2(mm);
    return (uint64_t)(k / c2) * mm->a_surface + (uint64_t)(m / 4u) * mm->a_group + (m % 4u) * 16u +
           (uint64_t)(k % c2) * esize(mm->prec);
}

uint64_t rknpu_matmul_a_bytes(const struct rknpu_matmul *mm)
{
    /* The span the strides reach: the last element's byte, plus one. */
    return a_offset(mm, mm->m - 1, mm->k - 1) + esize(mm->prec);
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
 * The operands are first gathered out of their layouts (A at the addresses
 * the CNA's strides give, B tiled) into rows of A and columns of B (k
 * contiguous), so the dot products walk memory linearly.
 */
static void compute_int8(const struct rknpu_matmul *mm, const uint8_t *a, const int8_t *b,
                         const int32_t *bias, uint8_t *c, int16_t *ar, int8_t *bc)
{
    uint32_t M = mm->m, K = mm->k, N = mm->n;
    for (uint32_t m = 0; m < M; m++)
        for (uint32_t k = 0; k < K; k++) {
            uint8_t v = a[a_offset(mm, m, k)];
            /* CVT_CON0 DATA_SIGN clear: the byte is read as unsigned (decode_cna). */
            ar[(size_t)m * K + k] = mm->a_unsigned ? (int16_t)v : (int16_t)(int8_t)v;
        }
    for (uint32_t n = 0; n < N; n++)
        for (uint32_t k = 0; k < K; k++)
            bc[(size_t)n * K + k] = b[rknpu_b_index_int8(k, n, K)];
    for (uint32_t n = 0; n < N; n++) {
        const int8_t *col = bc + (size_t)n * K;
        for (uint32_t m = 0; m < M; m++) {
            const int16_t *row = ar + (size_t)m * K;
            /* int32 products of 8-bit values never overflow; their sum wraps as the MAC array's. */
            uint32_t acc = bias ? (uint32_t)bias[n] : 0u;
            for (uint32_t k = 0; k < K; k++)
                acc += (uint32_t)((int32_t)row[k] * (int32_t)col[k]);
            int32_t v = (int32_t)acc;
            if (mm->relu && v < 0)
                v = 0;
            memcpy(c + rknpu_c_index(m, n, M) * 4u, &v, 4);
        }
    }
}

static void compute_fp16(const struct rknpu_matmul *mm, const uint8_t *a, const uint16_t *b,
                         const float *bias, uint8_t *c, float *ar, float *bc)
{
    uint32_t M = mm->m, K = mm->k, N = mm->n;
    for (uint32_t m = 0; m < M; m++)
        for (uint32_t k = 0; k < K; k++) {
            uint16_t h;
            memcpy(&h, a + a_offset(mm, m, k), 2);
            ar[(size_t)m * K + k] = rknpu_f16_to_f32(h);
        }
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
            memcpy(c + rknpu_c_index(m, n, M) * 4u, &acc, 4);
        }
    }
}

int rknpu_matmul_compute(const struct rknpu_matmul *mm, const void *a, const void *b,
                         const void *bias, void *c)
{
    size_t es = mm->prec == RKNPU_PREC_INT8 ? sizeof(int16_t) : sizeof(float);
    size_t bs = mm->prec == RKNPU_PREC_INT8 ? sizeof(int8_t) : sizeof(float);
    void *ar = malloc((size_t)mm->m * mm->k * es);
    void *bc = malloc((size_t)mm->n * mm->k * bs);
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

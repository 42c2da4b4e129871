/* SPDX-License-Identifier: MIT */
/*
 * The model computes from the command list's registers: one case per
 * register family (CNA sizes, CBUF split and DATA_ENTRIES, CVT_CON0, the
 * feature DMA's strides, addresses; CORE; DPU formats, strides,
 * SURFACE_ADD, BS_OW_CFG, the output converter; DPU_RDMA's bias) corrupts or
 * drops one word of a correct list, and the run must end in a config error,
 * a DMA error or a wrong result -- never the right result, never silence.
 * The uncorrupted list (the silicon-run example's, regcmd.h) computes right.
 * Model only: on a real NPU (NPUVFIO_TEST_RKNPU) the suite is SKIPPED.
 */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "npv_test.h"
#include "rknpu_harness.h"

enum op { KEEP, SET, DROP };
enum outcome { RIGHT, WRONG, CONFIG, DMA, ANY_FAILURE };

static const char *const OUTCOME[] = {"right result", "wrong result", "config error", "DMA error",
                                      "any failure"};

/* M 8, K 64, N 32 int8 (with a bias where .bias is set). */
#define M 8u
#define K 64u
#define N 32u

static const struct reg_case {
    const char *what;
    uint16_t reg;
    enum op op;
    uint32_t value; /* SET: the new value */
    bool bias;
    enum outcome want;
} CASES[] = {
    {"the example's list as it is", RKNPU_CNA_CONV_CON1, KEEP, 0, false, RIGHT},
    {"the example's list with a bias", RKNPU_CNA_CONV_CON1, KEEP, 0, true, RIGHT},
    /* CNA sizes */
    {"CNA CONV_CON1 fp16 on int8 data", RKNPU_CNA_CONV_CON1, SET, 2u << 7 | 2u << 4, false, CONFIG},
    {"CNA CONV_CON3 stride 2", RKNPU_CNA_CONV_CON3, SET, 1u << 3 | 2u, false, CONFIG},
    {"CNA DATA_SIZE0 height M - 4", RKNPU_CNA_DATA_SIZE0, SET, 1u << 16 | (M - 4), false, CONFIG},
    {"CNA DATA_SIZE1 channel K / 2", RKNPU_CNA_DATA_SIZE1, SET, (K / 2 - 1) << 16 | K / 2, false,
     CONFIG},
    {"CNA DATA_SIZE2 dataout width 2", RKNPU_CNA_DATA_SIZE2, SET, 2, false, CONFIG},
    {"CNA DATA_SIZE3 atomics M + 4", RKNPU_CNA_DATA_SIZE3, SET, M + 4, false, CONFIG},
    {"CNA WEIGHT_SIZE0 one kernel short", RKNPU_CNA_WEIGHT_SIZE0, SET, K *(N - 1), false, CONFIG},
    {"CNA WEIGHT_SIZE1 twice", RKNPU_CNA_WEIGHT_SIZE1, SET, 2 * K, false, CONFIG},
    {"CNA WEIGHT_SIZE2 3x3 kernels", RKNPU_CNA_WEIGHT_SIZE2, SET, 3u << 24 | 3u << 16 | N, false,
     CONFIG},
    /* CBUF */
    {"CNA CBUF_CON0 no data bank", RKNPU_CNA_CBUF_CON0, SET, 12u << 4, false, CONFIG},
    {"CNA CBUF_CON0 13 banks", RKNPU_CNA_CBUF_CON0, SET, 12u << 4 | 1u, false, CONFIG},
    {"CNA CBUF_CON1 DATA_ENTRIES doubled (the old (K+31)/32)", RKNPU_CNA_CBUF_CON1, SET,
     (K + 31) / 32, false, CONFIG},
    {"CNA CBUF_CON1 dropped", RKNPU_CNA_CBUF_CON1, DROP, 0, false, CONFIG},
    /* CVT_CON0 */
    {"CNA CVT_CON0 0x1 (the old value: no CVT_TYPE, no DATA_SIGN)", RKNPU_CNA_CVT_CON0, SET, 0x1,
     false, CONFIG},
    {"CNA CVT_CON0 converter on", RKNPU_CNA_CVT_CON0, SET, 0xa, false, CONFIG},
    {"CNA CVT_CON0 DATA_SIGN clear: int8 read unsigned", RKNPU_CNA_CVT_CON0, SET, 0x3, false,
     WRONG},
    /* the feature DMA's strides */
    {"CNA DMA_CON1 line stride 1 (the old value)", RKNPU_CNA_DMA_CON1, SET, 1, false, ANY_FAILURE},
    {"CNA DMA_CON2 surface stride M (the old value)", RKNPU_CNA_DMA_CON2, SET, M, false,
     ANY_FAILURE},
    {"CNA DMA_CON2 dropped", RKNPU_CNA_DMA_CON2, DROP, 0, false, CONFIG},
    {"CNA FC_DATA_SIZE0 DMA height M - 4", RKNPU_CNA_FC_DATA_SIZE0, SET, 1u << 16 | (M - 4), false,
     CONFIG},
    {"CNA FC_DATA_SIZE1 DMA channel K / 2", RKNPU_CNA_FC_DATA_SIZE1, SET, K / 2, false, CONFIG},
    {"CNA PAD_CON0 padding", RKNPU_CNA_PAD_CON0, SET, 0x11, false, CONFIG},
    {"CNA DCOMP_CTRL decompression", RKNPU_CNA_DCOMP_CTRL, SET, 1, false, CONFIG},
    {"CNA DCOMP_AMOUNT0 dropped", RKNPU_CNA_DCOMP_AMOUNT0, DROP, 0, false, CONFIG},
    /* addresses */
    {"CNA FEATURE_DATA_ADDR 16 bytes on", RKNPU_CNA_FEATURE_DATA_ADDR, SET, 16, false, ANY_FAILURE},
    {"CNA DCOMP_ADDR0 32 bytes on", RKNPU_CNA_DCOMP_ADDR0, SET, 32, false, ANY_FAILURE},
    {"DPU DST_BASE_ADDR 16 bytes on", RKNPU_DPU_DST_BASE_ADDR, SET, 16, false, ANY_FAILURE},
    /* CORE */
    {"CORE MISC_CFG fp16", RKNPU_CORE_MISC_CFG, SET, 2u << 8 | 1u, false, CONFIG},
    {"CORE DATAOUT_SIZE_0 height M", RKNPU_CORE_DATAOUT_SIZE_0, SET, M << 16, false, CONFIG},
    {"CORE DATAOUT_SIZE_1 channel N - 2", RKNPU_CORE_DATAOUT_SIZE_1, SET, N - 2, false, CONFIG},
    {"CORE CLIP_TRUNCATE 1", RKNPU_CORE_CLIP_TRUNCATE, SET, 1, false, CONFIG},
    {"CORE 0x3030 dropped (never written before)", RKNPU_CORE_3030, DROP, 0, false, CONFIG},
    /* DPU */
    {"DPU S_POINTER dropped", RKNPU_DPU_S_POINTER, DROP, 0, false, CONFIG},
    {"DPU FEATURE_MODE_CFG flying", RKNPU_DPU_FEATURE_MODE_CFG, SET, 0xfu << 5 | 2u << 1 | 1u,
     false, CONFIG},
    {"DPU DATA_FORMAT int8 out", RKNPU_DPU_DATA_FORMAT, SET, 0, false, CONFIG},
    {"DPU DST_SURF_STRIDE M + 1", RKNPU_DPU_DST_SURF_STRIDE, SET, (M + 1) << 4, false, ANY_FAILURE},
    {"DPU DATA_CUBE_HEIGHT M", RKNPU_DPU_DATA_CUBE_HEIGHT, SET, M, false, CONFIG},
    {"DPU DATA_CUBE_CHANNEL N - 2", RKNPU_DPU_DATA_CUBE_CHANNEL, SET, (N - 2) << 16 | (N - 2),
     false, CONFIG},
    {"DPU BS_CFG ReLU on", RKNPU_DPU_BS_CFG, SET, 0x12, false, WRONG},
    {"DPU BS_OW_CFG dropped (never written before)", RKNPU_DPU_BS_OW_CFG, DROP, 0, false, CONFIG},
    {"DPU BS_OW_CFG fp16's size_e on int8", RKNPU_DPU_BS_OW_CFG, SET, 0x36e, false, CONFIG},
    {"DPU WDMA_SIZE_0 channel N - 2", RKNPU_DPU_WDMA_SIZE_0, SET, N - 2, false, CONFIG},
    {"DPU WDMA_SIZE_1 height M", RKNPU_DPU_WDMA_SIZE_1, SET, M << 16, false, CONFIG},
    {"DPU BN_CFG not bypassed", RKNPU_DPU_BN_CFG, SET, 0x52, false, CONFIG},
    {"DPU EW_CFG not bypassed", RKNPU_DPU_EW_CFG, SET, 0x382, false, CONFIG},
    {"DPU OUT_CVT_SCALE 2", RKNPU_DPU_OUT_CVT_SCALE, SET, 2, false, CONFIG},
    {"DPU OUT_CVT_SHIFT 1", RKNPU_DPU_OUT_CVT_SHIFT, SET, 1, false, CONFIG},
    {"DPU SURFACE_ADD M x 4 on int8 (the old value)", RKNPU_DPU_SURFACE_ADD, SET, (M * 4) << 4,
     false, CONFIG},
    {"DPU 0x40c4 dropped (never written before)", RKNPU_DPU_40C4, DROP, 0, false, CONFIG},
    {"DPU LUT_ACCESS_CFG dropped", RKNPU_DPU_LUT_ACCESS_CFG, DROP, 0, false, CONFIG},
    /* DPU_RDMA: the bias */
    {"DPU_RDMA BRDMA_CFG no data use", RKNPU_DPU_RDMA_BRDMA_CFG, SET, 0, true, CONFIG},
    {"DPU_RDMA BS_BASE_ADDR dropped", RKNPU_DPU_RDMA_BS_BASE_ADDR, DROP, 0, true, CONFIG},
    {"DPU_RDMA BS_BASE_ADDR 16 bytes on", RKNPU_DPU_RDMA_BS_BASE_ADDR, SET, 16, true, ANY_FAILURE},
};

static struct rknpu_t t;

static void setup(void)
{
    rknpu_open(&t);
}

static void teardown(void)
{
    rknpu_close(&t);
}

static uint32_t port_core(uint32_t reg)
{
    return rknpu_port_rd(&t, RKNPU_TP_CORE(0) + reg);
}

/* Corrupt the list's write of c->reg as the case says. SET on an address adds to it. */
static void corrupt(struct rknpu_mm *mm, const struct reg_case *c)
{
    uint64_t *w = mm->prog.va;
    for (uint32_t i = 0; i + RKNPU_TRAILER_WORDS < mm->prog_words; i++) {
        if (w[i] == 0 || rknpu_regcmd_reg(w[i]) != c->reg)
            continue;
        uint32_t v = c->value;
        if (c->reg == RKNPU_CNA_FEATURE_DATA_ADDR || c->reg == RKNPU_CNA_DCOMP_ADDR0 ||
            c->reg == RKNPU_DPU_DST_BASE_ADDR || c->reg == RKNPU_DPU_RDMA_BS_BASE_ADDR)
            v += rknpu_regcmd_value(w[i]);
        if (c->op == SET)
            w[i] = rknpu_regcmd_write((uint16_t)(rknpu_regcmd_target(w[i]) & ~RKNPU_TGT_WRITE),
                                      c->reg, v);
        else if (c->op == DROP)
            w[i] = 0; /* a no-op word in its place */
        return;
    }
    ck_abort_msg("%s: the list writes no register 0x%04x", c->what, c->reg);
}

/* How the run on core 0 ended. */
static enum outcome run_and_see(struct rknpu_mm *mm)
{
    uint32_t config_before = port_core(RKNPU_TP_CONFIG_ERRORS);
    rknpu_run(&t, 0, &mm->prog, mm->prog_words, 1, RKNPU_INT_DPU_DONE | RKNPU_INT_DMA_ERROR);
    int64_t deadline = rknpu_now_ns() + (int64_t)RKNPU_GENEROUS_NS;
    for (;;) {
        uint32_t st = rknpu_wait(&t, 0, 20 * RKNPU_MS);
        if (st & RKNPU_INT_DMA_ERROR) {
            rknpu_finish(&t, 0);
            return DMA;
        }
        if (st & RKNPU_INT_DPU_DONE) {
            rknpu_finish(&t, 0);
            return rknpu_mm_check(mm) ? RIGHT : WRONG;
        }
        if (port_core(RKNPU_TP_CONFIG_ERRORS) != config_before) {
            ck_assert_uint_eq(port_core(RKNPU_TP_STATE), RKNPU_CORE_STALLED);
            ck_assert_uint_eq(rknpu_soft_reset(&t, 0), 0);
            return CONFIG;
        }
        ck_assert_msg(rknpu_now_ns() < deadline, "the run neither ended nor failed");
    }
}

START_TEST(one_corrupted_register_never_passes_silently)
{
    const struct reg_case *c = &CASES[_i];
    struct rknpu_mm mm;
    rknpu_mm_init(&t, &mm, RKNPU_PREC_INT8, M, K, N, c->bias, false, 100u + (uint32_t)_i);
    rknpu_mm_program(&t, &mm, 1);
    corrupt(&mm, c);
    enum outcome got = run_and_see(&mm);
    if (c->want == ANY_FAILURE)
        ck_assert_msg(got != RIGHT, "%s: computed the right result", c->what);
    else
        ck_assert_msg(got == c->want, "%s: %s, want %s", c->what, OUTCOME[got], OUTCOME[c->want]);
    rknpu_mm_free(&mm);
}
END_TEST

START_TEST(fp16_reads_its_own_strides_and_surface_add)
{
    /* fp16: SURFACE_ADD is M x 4 (mtx512 gen_matmul_fp16); int8's M x 8 is refused. */
    for (int bad = 0; bad < 2; bad++) {
        struct rknpu_mm mm;
        rknpu_mm_init(&t, &mm, RKNPU_PREC_FP16, M, K, 16, false, false, 7);
        rknpu_mm_program(&t, &mm, 1);
        struct reg_case c = {
            "fp16 SURFACE_ADD M x 8", RKNPU_DPU_SURFACE_ADD, bad ? SET : KEEP, (M * 8) << 4, false,
            bad ? CONFIG : RIGHT};
        corrupt(&mm, &c);
        ck_assert_int_eq(run_and_see(&mm), c.want);
        rknpu_mm_free(&mm);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("rknpu_model_regs");
    TCase *tc = tcase_create("registers");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, one_corrupted_register_never_passes_silently, 0,
                        (int)(sizeof(CASES) / sizeof(CASES[0])));
    tcase_add_test(tc, fp16_reads_its_own_strides_and_surface_add);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    rknpu_require_model("the model's reading of each register is the model's");
    return npv_test_run(suite());
}

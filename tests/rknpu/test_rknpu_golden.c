/* SPDX-License-Identifier: MIT */
/*
 * Golden: the driver's command list for a matmul equals, word for word, what
 * the silicon-run example mtx512/rk3588-npu (src/npu_matmul.c gen_matmul_task
 * with gen_matmul_int8 / gen_matmul_fp16, tests/matmul_int8.c's task fields)
 * writes for the same shapes. The table is that example's formulas evaluated
 * by hand for three shapes -- literal numbers, never the driver's own
 * formulas -- so a driver value that drifts from the example fails here.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <npuvfio/rknpu.h>

#include "driver_internal.h"
#include "npv_test.h"
#include "regcmd.h"
#include "status_decode.h"

/* Targets as mtx512 npu_hw.h spells them: OP_REG_CNA, OP_REG_CORE, OP_REG_DPU. */
enum { CNA = 0x0201, CORE = 0x0801, DPU = 0x1001 };

#define A_IOVA 0x100000u
#define B_IOVA 0x200000u
#define C_IOVA 0x300000u

/* The shapes, in the order of the table's value columns. */
static const struct {
    enum npv_rknpu_dtype dtype;
    uint32_t m, k, n;
} SHAPES[3] = {
    {NPV_RKNPU_INT8, 64, 128, 32}, /* one data bank */
    {NPV_RKNPU_FP16, 4, 32, 16},   /* the smallest: surface stride 0 */
    {NPV_RKNPU_FP16, 256, 256, 64} /* four data banks */
};

/* mtx512 gen_matmul_task ops[0..103] for SHAPES (A, B, C at the IOVAs above). */
static const struct {
    uint16_t target, reg;
    uint32_t value[3];
} GOLDEN[104] = {
    {DPU, 0x4004, {0xe, 0xe, 0xe}},                      /* ops[0] */
    {CNA, 0x100c, {0x0, 0x120, 0x120}},                  /* ops[1] */
    {CNA, 0x1010, {0x410, 0x50, 0x1010}},                /* ops[2] */
    {CNA, 0x1014, {0x9, 0x9, 0x9}},                      /* ops[3] */
    {CNA, 0x1020, {0x10040, 0x10004, 0x10100}},          /* ops[4] */
    {CNA, 0x1024, {0x7f0080, 0x1f0020, 0xff0100}},       /* ops[5] */
    {CNA, 0x1028, {0x1, 0x1, 0x1}},                      /* ops[6] */
    {CNA, 0x102c, {0x40, 0x4, 0x100}},                   /* ops[7] */
    {CNA, 0x1030, {0x1000, 0x400, 0x8000}},              /* ops[8] */
    {CNA, 0x1034, {0x80, 0x40, 0x200}},                  /* ops[9] */
    {CNA, 0x1038, {0x1010020, 0x1010010, 0x1010040}},    /* ops[10] */
    {CNA, 0x1040, {0xb1, 0xb1, 0x84}},                   /* ops[11] */
    {CNA, 0x1044, {0x2, 0x1, 0x8}},                      /* ops[12] */
    {CNA, 0x104c, {0xb, 0xb, 0xb}},                      /* ops[13] */
    {CNA, 0x1050, {0x10000, 0x10000, 0x10000}},          /* ops[14] */
    {CNA, 0x1054, {0x10000, 0x10000, 0x10000}},          /* ops[15] */
    {CNA, 0x1058, {0x10000, 0x10000, 0x10000}},          /* ops[16] */
    {CNA, 0x105c, {0x10000, 0x10000, 0x10000}},          /* ops[17] */
    {CNA, 0x1060, {0x0, 0x0, 0x0}},                      /* ops[18] */
    {CNA, 0x1064, {0x0, 0x0, 0x0}},                      /* ops[19] */
    {CNA, 0x1068, {0x0, 0x0, 0x0}},                      /* ops[20] */
    {CNA, 0x1070, {0x100000, 0x100000, 0x100000}},       /* ops[21] */
    {CNA, 0x1074, {0x0, 0x0, 0x0}},                      /* ops[22] */
    {CNA, 0x1078, {0xf000f, 0xf000f, 0xf000f}},          /* ops[23] */
    {CNA, 0x107c, {0x4, 0x4, 0x4}},                      /* ops[24] */
    {CNA, 0x1080, {0x3c, 0x0, 0xfc}},                    /* ops[25] */
    {CNA, 0x1084, {0x10040, 0x10004, 0x10100}},          /* ops[26] */
    {CNA, 0x1088, {0x80, 0x20, 0x100}},                  /* ops[27] */
    {CNA, 0x1100, {0x0, 0x0, 0x0}},                      /* ops[28] */
    {CNA, 0x1104, {0x0, 0x0, 0x0}},                      /* ops[29] */
    {CNA, 0x1110, {0x200000, 0x200000, 0x200000}},       /* ops[30] */
    {CNA, 0x1140, {0x0, 0x0, 0x0}},                      /* ops[31] */
    {CNA, 0x1144, {0x0, 0x0, 0x0}},                      /* ops[32] */
    {CNA, 0x1148, {0x0, 0x0, 0x0}},                      /* ops[33] */
    {CNA, 0x114c, {0x0, 0x0, 0x0}},                      /* ops[34] */
    {CNA, 0x1150, {0x0, 0x0, 0x0}},                      /* ops[35] */
    {CNA, 0x1154, {0x0, 0x0, 0x0}},                      /* ops[36] */
    {CNA, 0x1158, {0x0, 0x0, 0x0}},                      /* ops[37] */
    {CNA, 0x115c, {0x0, 0x0, 0x0}},                      /* ops[38] */
    {CNA, 0x1160, {0x0, 0x0, 0x0}},                      /* ops[39] */
    {CNA, 0x1164, {0x0, 0x0, 0x0}},                      /* ops[40] */
    {CNA, 0x1168, {0x0, 0x0, 0x0}},                      /* ops[41] */
    {CNA, 0x116c, {0x0, 0x0, 0x0}},                      /* ops[42] */
    {CNA, 0x1170, {0x0, 0x0, 0x0}},                      /* ops[43] */
    {CNA, 0x1174, {0x0, 0x0, 0x0}},                      /* ops[44] */
    {CNA, 0x1178, {0x0, 0x0, 0x0}},                      /* ops[45] */
    {CNA, 0x117c, {0x0, 0x0, 0x0}},                      /* ops[46] */
    {CNA, 0x1180, {0x0, 0x0, 0x0}},                      /* ops[47] */
    {CNA, 0x1184, {0x0, 0x0, 0x0}},                      /* ops[48] */
    {CORE, 0x3010, {0x1, 0x201, 0x201}},                 /* ops[49] */
    {CORE, 0x3014, {0x3f0000, 0x30000, 0xff0000}},       /* ops[50] */
    {CORE, 0x3018, {0x1f, 0xf, 0x3f}},                   /* ops[51] */
    {CORE, 0x301c, {0x0, 0x0, 0x0}},                     /* ops[52] */
    {CORE, 0x3030, {0x0, 0x0, 0x0}},                     /* ops[53] */
    {DPU, 0x400c, {0x1e4, 0x1e4, 0x1e4}},                /* ops[54] */
    {DPU, 0x4010, {0x80000000, 0xa8000002, 0xa8000002}}, /* ops[55] */
    {DPU, 0x4014, {0x0, 0x0, 0x0}},                      /* ops[56] */
    {DPU, 0x4020, {0x300000, 0x300000, 0x300000}},       /* ops[57] */
    {DPU, 0x4024, {0x400, 0x40, 0x1000}},                /* ops[58] */
    {DPU, 0x4030, {0x0, 0x0, 0x0}},                      /* ops[59] */
    {DPU, 0x4034, {0x3f, 0x3, 0xff}},                    /* ops[60] */
    {DPU, 0x4038, {0x0, 0x0, 0x0}},                      /* ops[61] */
    {DPU, 0x403c, {0x1f001f, 0xf000f, 0x3f003f}},        /* ops[62] */
    {DPU, 0x4040, {0x53, 0x53, 0x53}},                   /* ops[63] */
    {DPU, 0x4044, {0x0, 0x0, 0x0}},                      /* ops[64] */
    {DPU, 0x4048, {0x0, 0x0, 0x0}},                      /* ops[65] */
    {DPU, 0x404c, {0x0, 0x0, 0x0}},                      /* ops[66] */
    {DPU, 0x4050, {0x7fe, 0x36e, 0x36e}},                /* ops[67] */
    {DPU, 0x4054, {0x0, 0x0, 0x0}},                      /* ops[68] */
    {DPU, 0x4058, {0x1f, 0xf, 0x3f}},                    /* ops[69] */
    {DPU, 0x405c, {0x3f0000, 0x30000, 0xff0000}},        /* ops[70] */
    {DPU, 0x4060, {0x53, 0x53, 0x53}},                   /* ops[71] */
    {DPU, 0x4064, {0x0, 0x0, 0x0}},                      /* ops[72] */
    {DPU, 0x4068, {0x0, 0x0, 0x0}},                      /* ops[73] */
    {DPU, 0x406c, {0x0, 0x0, 0x0}},                      /* ops[74] */
    {DPU, 0x4070, {0x383, 0x383, 0x383}},                /* ops[75] */
    {DPU, 0x4074, {0x0, 0x0, 0x0}},                      /* ops[76] */
    {DPU, 0x4078, {0x1, 0x1, 0x1}},                      /* ops[77] */
    {DPU, 0x407c, {0x0, 0x0, 0x0}},                      /* ops[78] */
    {DPU, 0x4080, {0x0, 0x0, 0x0}},                      /* ops[79] */
    {DPU, 0x4084, {0x1, 0x1, 0x1}},                      /* ops[80] */
    {DPU, 0x4088, {0x0, 0x0, 0x0}},                      /* ops[81] */
    {DPU, 0x4090, {0x0, 0x0, 0x0}},                      /* ops[82] */
    {DPU, 0x4094, {0x0, 0x0, 0x0}},                      /* ops[83] */
    {DPU, 0x4098, {0x0, 0x0, 0x0}},                      /* ops[84] */
    {DPU, 0x409c, {0x0, 0x0, 0x0}},                      /* ops[85] */
    {DPU, 0x40a0, {0x0, 0x0, 0x0}},                      /* ops[86] */
    {DPU, 0x40a4, {0x0, 0x0, 0x0}},                      /* ops[87] */
    {DPU, 0x40a8, {0x0, 0x0, 0x0}},                      /* ops[88] */
    {DPU, 0x40ac, {0x0, 0x0, 0x0}},                      /* ops[89] */
    {DPU, 0x40c0, {0x2000, 0x100, 0x4000}},              /* ops[90] */
    {DPU, 0x40c4, {0x0, 0x0, 0x0}},                      /* ops[91] */
    {DPU, 0x4100, {0x0, 0x0, 0x0}},                      /* ops[92] */
    {DPU, 0x4104, {0x0, 0x0, 0x0}},                      /* ops[93] */
    {DPU, 0x4108, {0x0, 0x0, 0x0}},                      /* ops[94] */
    {DPU, 0x410c, {0x0, 0x0, 0x0}},                      /* ops[95] */
    {DPU, 0x4110, {0x0, 0x0, 0x0}},                      /* ops[96] */
    {DPU, 0x4114, {0x0, 0x0, 0x0}},                      /* ops[97] */
    {DPU, 0x4118, {0x0, 0x0, 0x0}},                      /* ops[98] */
    {DPU, 0x411c, {0x0, 0x0, 0x0}},                      /* ops[99] */
    {DPU, 0x4120, {0x0, 0x0, 0x0}},                      /* ops[100] */
    {DPU, 0x4124, {0x0, 0x0, 0x0}},                      /* ops[101] */
    {DPU, 0x4128, {0x0, 0x0, 0x0}},                      /* ops[102] */
    {DPU, 0x412c, {0x0, 0x0, 0x0}},                      /* ops[103] */
};

static struct npv_rknpu_matmul shape(unsigned i)
{
    return (struct npv_rknpu_matmul){.dtype = SHAPES[i].dtype,
                                     .m = SHAPES[i].m,
                                     .k = SHAPES[i].k,
                                     .n = SHAPES[i].n,
                                     .a = A_IOVA,
                                     .b = B_IOVA,
                                     .c = C_IOVA};
}

START_TEST(body_equals_the_example_register_for_register)
{
    struct npv_rknpu_matmul mm = shape((unsigned)_i);
    uint64_t w[NPV_RKNPU_MATMUL_MAX_WORDS];
    struct npv_rknpu_task task;
    int n = npv_rknpu_matmul_task(&mm, w, NPV_RKNPU_MATMUL_MAX_WORDS, &task);
    /* tests/matmul_int8.c: regcfg_amount = 112 - (4 + 4) = 104, enable_mask 0xd. */
    ck_assert_int_eq(n, 104);
    ck_assert_uint_eq(task.regcmd_count, 104);
    ck_assert_uint_eq(task.enable_mask, 0xd);
    for (unsigned i = 0; i < 104; i++) {
        uint64_t want =
            (uint64_t)GOLDEN[i].target << 48 | (uint64_t)GOLDEN[i].value[_i] << 16 | GOLDEN[i].reg;
        ck_assert_msg(w[i] == want,
                      "shape %d word %u: 0x%016llx, the example writes 0x%016llx "
                      "(target 0x%04x reg 0x%04x value 0x%x)",
                      _i, i, (unsigned long long)w[i], (unsigned long long)want, GOLDEN[i].target,
                      GOLDEN[i].reg, GOLDEN[i].value[_i]);
    }
}
END_TEST

START_TEST(last_trailer_equals_the_example)
{
    /* mtx512 gen_matmul_task ops[104..107]: OP_NONE, PC_REGISTER_AMOUNTS 0, OP_40, OP_ENABLE 0xd.
     */
    const uint64_t want[4] = {0, 0x0101000000000014ull, 0x0041000000000000ull,
                              0x00810000000d0008ull};
    uint64_t t[4];
    memset(t, 0xa5, sizeof(t));
    rknpu_regcmd_trailer(t, 0xd);
    for (unsigned i = 0; i < 4; i++)
        ck_assert_msg(t[i] == want[i], "trailer word %u: 0x%016llx, the example 0x%016llx", i,
                      (unsigned long long)t[i], (unsigned long long)want[i]);
}
END_TEST

START_TEST(chained_trailer_and_amounts_follow_both_kernels)
{
    /*
     * The first task's amount as rocket_job_hw_submit ((count + 1) / 2 - 1,
     * count with the trailer) and the vendor's rknpu_job_subcore_commit_pc
     * ((regcfg_amount + 4 + 1) / 2 - 1) write it: 53 for the 108-word list.
     */
    ck_assert_uint_eq(rknpu_regcmd_amount(104 + RKNPU_TRAILER_WORDS), 53);
    ck_assert_uint_eq(rknpu_regcmd_amount(106 + RKNPU_TRAILER_WORDS), 54);
    uint64_t t[4];
    rknpu_regcmd_trailer(t, 0xd);
    rknpu_regcmd_chain(t, 0x12340, 53);
    /* Mesa compile_operation: the trailer's first two words name the next task. */
    ck_assert_uint_eq(t[0], 0x0101000123400010ull);
    ck_assert_uint_eq(t[1], 0x0101000000350014ull);
    ck_assert_uint_eq(t[2], 0x0041000000000000ull);
    ck_assert_uint_eq(t[3], 0x00810000000d0008ull);
}
END_TEST

START_TEST(bias_adds_the_rdma_words_and_changes_only_bs_cfg)
{
    struct npv_rknpu_matmul mm = shape(0);
    uint64_t plain[NPV_RKNPU_MATMUL_MAX_WORDS], biased[NPV_RKNPU_MATMUL_MAX_WORDS];
    ck_assert_int_eq(npv_rknpu_matmul_task(&mm, plain, NPV_RKNPU_MATMUL_MAX_WORDS, NULL), 104);
    mm.bias = 0x400000;
    struct npv_rknpu_task task;
    ck_assert_int_eq(npv_rknpu_matmul_task(&mm, biased, NPV_RKNPU_MATMUL_MAX_WORDS, &task), 106);
    /* Mesa: enable 0x1d (DPU_RDMA fetches the bias). */
    ck_assert_uint_eq(task.enable_mask, 0x1d);
    for (unsigned i = 0; i < 104; i++) {
        if (rknpu_regcmd_reg(plain[i]) == RKNPU_DPU_BS_CFG) {
            /* Mesa fill_first_regcmd: ALU_ALGO(2) | ALU_SRC(1) | RELU_BYPASS(1) | MUL_BYPASS(1). */
            ck_assert_uint_eq(rknpu_regcmd_value(biased[i]),
                              2u << 16 | 1u << 8 | 1u << 6 | 1u << 4);
            continue;
        }
        ck_assert_uint_eq(biased[i], plain[i]);
    }
    ck_assert_uint_eq(biased[104], 0x200100000002501cull); /* BRDMA_CFG = DATA_USE(1) */
    ck_assert_uint_eq(biased[105], 0x2001004000005020ull); /* BS_BASE_ADDR */
}
END_TEST

START_TEST(ppu_ending_chains_complete_on_the_ppu_pair)
{
    /* The vendor completes a PPU-ending task on int_mask 0xc00, a DPU-ending one on 0x300. */
    uint32_t ppu = rknpu_done_mask(RKNPU_MM_ENABLE | RKNPU_ENABLE_PPU);
    uint32_t dpu = rknpu_done_mask(RKNPU_MM_ENABLE);
    ck_assert_uint_eq(ppu, 0xc00);
    ck_assert_uint_eq(dpu, 0x300);
    ck_assert_int_eq(rknpu_decode_irq_status(RKNPU_INT_PPU_0, ppu), 1);
    ck_assert_int_eq(rknpu_decode_irq_status(RKNPU_INT_DPU_0 | RKNPU_INT_PPU_1, ppu), 1);
    ck_assert_int_eq(rknpu_decode_irq_status(RKNPU_INT_DPU_0, ppu), 0); /* the DPU is not the end */
    ck_assert_int_eq(rknpu_decode_irq_status(RKNPU_INT_DPU_1, dpu), 1);
    ck_assert_int_eq(rknpu_decode_irq_status(RKNPU_INT_PPU_0, dpu), -NPV_EDEVFAULT);
}
END_TEST

START_TEST(too_small_a_buffer_is_enospc)
{
    struct npv_rknpu_matmul mm = shape(1);
    uint64_t w[103];
    ck_assert_int_eq(npv_rknpu_matmul_task(&mm, w, 103, NULL), -ENOSPC);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("rknpu_golden");
    TCase *tc = tcase_create("golden");
    tcase_add_loop_test(tc, body_equals_the_example_register_for_register, 0, 3);
    tcase_add_test(tc, last_trailer_equals_the_example);
    tcase_add_test(tc, chained_trailer_and_amounts_follow_both_kernels);
    tcase_add_test(tc, bias_adds_the_rdma_words_and_changes_only_bs_cfg);
    tcase_add_test(tc, ppu_ending_chains_complete_on_the_ppu_pair);
    tcase_add_test(tc, too_small_a_buffer_is_enospc);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return npv_test_run(suite());
}

/* SPDX-License-Identifier: MIT */
/*
 * regs.h and regcmd.h against the public sources: the regcmd word format and
 * the TRM's example words (Mesa's rkt_regcmd.c), the fetch amount both
 * drivers compute (rocket_job_hw_submit in rocket_job.c,
 * rknpu_job_subcore_commit_pc in the vendor's rknpu_job.c), the native
 * layouts' address formulas (mtx512/rk3588-npu), and a matmul task's list
 * (even, trailer last).
 */
#include <check.h>

#include "npv_test.h"
#include "rknpu/regcmd.h"
#include "rknpu/regs.h"

START_TEST(regcmd_word_packs_target_value_and_offset)
{
    /* The TRM's "enable all blocks" word (via Mesa): target 0x0081, value 0x7f, PC OP_EN. */
    uint64_t w = rknpu_regcmd(RKNPU_TGT_OP_EN | RKNPU_TGT_WRITE, RKNPU_ENABLE_ALL,
                              RKNPU_PC_OPERATION_ENABLE);
    ck_assert_uint_eq(w, 0x00810000007f0008ull);
    ck_assert_uint_eq(rknpu_regcmd(RKNPU_TGT_BARRIER | RKNPU_TGT_WRITE, 0, 0),
                      0x0041000000000000ull);
    w = rknpu_regcmd_write(RKNPU_TGT_CNA, RKNPU_CNA_FEATURE_DATA_ADDR, 0xdeadbeef);
    ck_assert_uint_eq(rknpu_regcmd_target(w), 0x0201);
    ck_assert_uint_eq(rknpu_regcmd_value(w), 0xdeadbeef);
    ck_assert_uint_eq(rknpu_regcmd_reg(w), 0x1070);
}
END_TEST

START_TEST(fetch_amount_matches_both_drivers)
{
    /* mtx512: 108 words (104 + the 4-word trailer) -> vendor (104 + 4 + 1) / 2 - 1 = 53. */
    ck_assert_uint_eq(rknpu_regcmd_amount(108), 53);
    ck_assert_uint_eq(rknpu_regcmd_fetch_words(53), 108);
    /* An odd list is fetched with one word more. */
    ck_assert_uint_eq(rknpu_regcmd_fetch_words(rknpu_regcmd_amount(31)), 32);
}
END_TEST

START_TEST(native_layouts_place_elements_as_the_notes_say)
{
    /* A int8 [K/16][M][16], M = 4: (m 1, k 17) in surface 1, line 1, lane 1. */
    ck_assert_uint_eq(rknpu_a_index_int8(1, 17, 4), (1 * 4 + 1) * 16 + 1);
    ck_assert_uint_eq(rknpu_a_index_fp16(3, 9, 4), (1 * 4 + 3) * 8 + 1);
    /* B int8 [N/32][K/32][32][32], K = 64: (k 33, n 34) in tile (1, 1), row 2, lane 1. */
    ck_assert_uint_eq(rknpu_b_index_int8(33, 34, 64), (1 * 2 + 1) * 1024 + 2 * 32 + 1);
    ck_assert_uint_eq(rknpu_b_index_fp16(33, 17, 64), (1 * 2 + 1) * 512 + 1 * 32 + 1);
    /* C [N/4][M][4], M = 4: (m 2, n 5) in surface 1, line 2, lane 1. */
    ck_assert_uint_eq(rknpu_c_index(2, 5, 4), (1 * 4 + 2) * 4 + 1);
}
END_TEST

START_TEST(matmul_list_is_even_and_ends_with_the_trailer)
{
    uint64_t w[RKNPU_MATMUL_REGCMD_MAX];
    for (int bias = 0; bias < 2; bias++) {
        struct rknpu_matmul_desc d = {.prec = RKNPU_PREC_INT8,
                                      .m = 4,
                                      .k = 32,
                                      .n = 32,
                                      .a = 0x1000,
                                      .b = 0x2000,
                                      .c = 0x3000,
                                      .bias = bias ? 0x4000u : 0u};
        uint32_t n = rknpu_matmul_regcmd(&d, w, 0x5000, 15);
        ck_assert_uint_le(n, RKNPU_MATMUL_REGCMD_MAX);
        ck_assert_uint_eq(n % 2, 0);
        ck_assert_uint_eq(w[n - 4],
                          rknpu_regcmd_write(RKNPU_TGT_PC, RKNPU_PC_BASE_ADDRESS, 0x5000));
        ck_assert_uint_eq(w[n - 3],
                          rknpu_regcmd_write(RKNPU_TGT_PC, RKNPU_PC_REGISTER_AMOUNTS, 15));
        ck_assert_uint_eq(rknpu_regcmd_target(w[n - 2]), RKNPU_TGT_BARRIER | RKNPU_TGT_WRITE);
        ck_assert_uint_eq(rknpu_regcmd_value(w[n - 1]),
                          bias ? RKNPU_MM_ENABLE_BIAS : RKNPU_MM_ENABLE);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("rknpu_regs");
    TCase *tc = tcase_create("regs");
    tcase_add_test(tc, regcmd_word_packs_target_value_and_offset);
    tcase_add_test(tc, fetch_amount_matches_both_drivers);
    tcase_add_test(tc, native_layouts_place_elements_as_the_notes_say);
    tcase_add_test(tc, matmul_list_is_even_and_ends_with_the_trailer);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return npv_test_run(suite());
}

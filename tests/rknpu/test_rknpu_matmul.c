/* SPDX-License-Identifier: MIT */
/*
 * Hand-built register-command programs against the cores, without a driver:
 * a 1x1-convolution matmul in the native layouts, int8 bit-exact and fp16
 * within tolerance, with bias and ReLU, on every core, chained tasks, and the
 * three cores at once. Runs on the model, or on a real NPU named by
 * NPUVFIO_TEST_RKNPU.
 */
#include <check.h>

#include "npv_test.h"
#include "rknpu_harness.h"

static struct rknpu_t t;

static void setup(void)
{
    rknpu_open(&t);
}

static void teardown(void)
{
    rknpu_close(&t);
}

/* One run on core: the vector fires with DPU done, the status clears, C is the reference. */
static void run_and_check(unsigned core, struct rknpu_mm *mm, uint32_t ntasks)
{
    rknpu_mm_program(&t, mm, ntasks);
    rknpu_run(&t, core, &mm->prog, mm->prog_words, ntasks,
              RKNPU_INT_DPU_DONE | RKNPU_INT_DMA_ERROR);
    uint32_t st = rknpu_wait(&t, core, RKNPU_GENEROUS_NS);
    ck_assert_msg(st != 0, "core %u: no interrupt", core);
    ck_assert_msg((st & RKNPU_INT_DPU_DONE) && !(st & RKNPU_INT_DMA_ERROR), "core %u: status %#x",
                  core, st);
    ck_assert_uint_eq(rknpu_rd(&t, core, RKNPU_PC_TASK_STATUS) & RKNPU_TASK_STATUS_COUNT_MASK,
                      ntasks);
    rknpu_finish(&t, core);
    ck_assert_uint_eq(rknpu_rd(&t, core, RKNPU_PC_INTERRUPT_RAW_STATUS), 0);
    ck_assert_msg(rknpu_mm_check(mm), "core %u: C differs from the CPU reference", core);
}

START_TEST(int8_matmul_is_bit_exact_on_every_core)
{
    struct rknpu_mm mm;
    rknpu_mm_init(&t, &mm, RKNPU_PREC_INT8, 4, 32, 32, false, false, 11u + (uint32_t)_i);
    run_and_check((unsigned)_i, &mm, 1);
    rknpu_mm_free(&mm);
}
END_TEST

START_TEST(int8_matmul_of_odd_rows_and_wide_k_is_bit_exact)
{
    struct rknpu_mm mm;
    rknpu_mm_init(&t, &mm, RKNPU_PREC_INT8, 7, 96, 64, false, false, 5);
    run_and_check(1, &mm, 1);
    rknpu_mm_free(&mm);
}
END_TEST

START_TEST(int8_matmul_adds_bias_and_applies_relu_bit_exact)
{
    struct rknpu_mm mm;
    rknpu_mm_init(&t, &mm, RKNPU_PREC_INT8, 8, 64, 32, true, true, 21);
    run_and_check(0, &mm, 1);
    /* The reference has both signs before ReLU: the ReLU did something. */
    const int32_t *c = mm.c.va;
    size_t zeros = 0;
    for (size_t i = 0; i < 8 * 32; i++)
        zeros += c[i] == 0;
    ck_assert_uint_gt(zeros, 0);
    rknpu_mm_free(&mm);
}
END_TEST

START_TEST(fp16_matmul_is_within_tolerance_on_every_core)
{
    struct rknpu_mm mm;
    rknpu_mm_init(&t, &mm, RKNPU_PREC_FP16, 4, 64, 32, false, false, 31u + (uint32_t)_i);
    run_and_check((unsigned)_i, &mm, 1);
    rknpu_mm_free(&mm);
}
END_TEST

START_TEST(fp16_matmul_with_bias_and_relu_is_within_tolerance)
{
    struct rknpu_mm mm;
    rknpu_mm_init(&t, &mm, RKNPU_PREC_FP16, 5, 32, 48, true, true, 41);
    run_and_check(2, &mm, 1);
    rknpu_mm_free(&mm);
}
END_TEST

START_TEST(chained_tasks_all_run_and_count_in_task_status)
{
    struct rknpu_mm mm;
    rknpu_mm_init(&t, &mm, RKNPU_PREC_INT8, 4, 32, 32, true, false, 51);
    run_and_check(0, &mm, 3);
    rknpu_mm_free(&mm);
}
END_TEST

START_TEST(three_cores_run_at_once_each_exact)
{
    struct rknpu_mm mm[RKNPU_NUM_CORES];
    for (unsigned c = 0; c < RKNPU_NUM_CORES; c++) {
        rknpu_mm_init(&t, &mm[c], c == 1 ? RKNPU_PREC_FP16 : RKNPU_PREC_INT8, 16, 256, 64, c == 2,
                      c == 2, 61 + c);
        rknpu_mm_program(&t, &mm[c], 2);
    }
    for (unsigned c = 0; c < RKNPU_NUM_CORES; c++)
        rknpu_run(&t, c, &mm[c].prog, mm[c].prog_words, 2,
                  RKNPU_INT_DPU_DONE | RKNPU_INT_DMA_ERROR);
    for (unsigned c = 0; c < RKNPU_NUM_CORES; c++) {
        uint32_t st = rknpu_wait(&t, c, RKNPU_GENEROUS_NS);
        ck_assert_msg((st & RKNPU_INT_DPU_DONE) && !(st & RKNPU_INT_DMA_ERROR), "core %u: %#x", c,
                      st);
        rknpu_finish(&t, c);
        ck_assert_msg(rknpu_mm_check(&mm[c]), "core %u: C differs", c);
        rknpu_mm_free(&mm[c]);
    }
}
END_TEST

START_TEST(a_core_runs_again_after_its_status_is_cleared)
{
    struct rknpu_mm mm;
    rknpu_mm_init(&t, &mm, RKNPU_PREC_INT8, 4, 32, 32, false, false, 71);
    for (int i = 0; i < 5; i++) {
        rknpu_mm_poison(&mm);
        run_and_check(1, &mm, 1);
    }
    rknpu_mm_free(&mm);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("rknpu_matmul");
    TCase *tc = tcase_create("matmul");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, int8_matmul_is_bit_exact_on_every_core, 0, RKNPU_NUM_CORES);
    tcase_add_test(tc, int8_matmul_of_odd_rows_and_wide_k_is_bit_exact);
    tcase_add_test(tc, int8_matmul_adds_bias_and_applies_relu_bit_exact);
    tcase_add_loop_test(tc, fp16_matmul_is_within_tolerance_on_every_core, 0, RKNPU_NUM_CORES);
    tcase_add_test(tc, fp16_matmul_with_bias_and_relu_is_within_tolerance);
    tcase_add_test(tc, chained_tasks_all_run_and_count_in_task_status);
    tcase_add_test(tc, three_cores_run_at_once_each_exact);
    tcase_add_test(tc, a_core_runs_again_after_its_status_is_cleared);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return npv_test_run(suite());
}

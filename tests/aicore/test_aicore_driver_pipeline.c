/* SPDX-License-Identifier: MIT */
/*
 * Issue 12 acceptance 5: two runs overlap, one executing while the next is
 * prepared, and both are exact. And what admission refuses: a second
 * preparation behind one that is not launched, a taken slot, a launch while
 * the other run holds the device.
 */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "aic_driver.h"
#include "npv_test.h"

static struct aicd d;

static void setup(void)
{
    aicd_open(&d, NULL, NULL);
}

static void teardown(void)
{
    aicd_close(&d);
}

START_TEST(two_overlapping_runs_are_both_exact)
{
    struct npv_aicore_run *a, *b;
    ck_assert_int_eq(aicd_prepare(&d, 0, true, 11, &a), 0);
    ck_assert_int_eq(npv_aicore_launch(a), 0);
    /* a is active: the device is driven only by polls, so it stays so until waited for. */
    ck_assert_int_eq(npv_aicore_poll(a), -EINPROGRESS);
    ck_assert_int_eq(aicd_prepare(&d, 1, false, 12, &b), 0);
    ck_assert_int_eq(npv_aicore_launch(b), -EBUSY); /* one run executes at a time */
    bool exact_a, exact_b;
    ck_assert_int_eq(aicd_finish(&d, a, &exact_a), 0);
    ck_assert_int_eq(npv_aicore_launch(b), 0);
    ck_assert_int_eq(aicd_finish(&d, b, &exact_b), 0);
    ck_assert(exact_a && exact_b);
    struct npv_aicore_run_info ia, ib;
    npv_aicore_run_info(a, &ia);
    npv_aicore_run_info(b, &ib);
    ck_assert_uint_ne(ia.epoch, 0);
    ck_assert_uint_gt(ib.epoch, ia.epoch);
    struct npv_aicore_result ra, rb;
    ck_assert_int_eq(npv_aicore_result(a, &ra), 0);
    ck_assert_int_eq(npv_aicore_result(b, &rb), 0);
    ck_assert_uint_eq(ra.epoch, ia.epoch);
    ck_assert_uint_eq(rb.epoch, ib.epoch);
    ck_assert_uint_eq(ra.tasks_done, d.g[0].desc.nr_tasks);
    ck_assert_int_eq(npv_aicore_release(a), 0);
    ck_assert_int_eq(npv_aicore_release(b), 0);
}
END_TEST

START_TEST(a_second_preparation_waits_until_its_predecessor_is_launched)
{
    struct npv_aicore_run *a, *b;
    ck_assert_int_eq(aicd_prepare(&d, 0, false, 1, &a), 0);
    ck_assert_int_eq(aicd_prepare(&d, 1, false, 2, &b), -EBUSY);
    ck_assert_int_eq(aicd_prepare(&d, 0, false, 2, &b), -EBUSY); /* taken slot */
    ck_assert_int_eq(npv_aicore_prepare(d.ac, 2, &d.g[0].desc, &b), -EINVAL);
    ck_assert_int_eq(npv_aicore_launch(a), 0);
    ck_assert_int_eq(aicd_prepare(&d, 1, false, 2, &b), 0);
    ck_assert_int_eq(npv_aicore_release(a), -EBUSY); /* active */
    bool exact;
    ck_assert_int_eq(aicd_finish(&d, a, &exact), 0);
    ck_assert(exact);
    ck_assert_int_eq(npv_aicore_release(a), 0);
    ck_assert_int_eq(npv_aicore_launch(b), 0);
    ck_assert_int_eq(aicd_finish(&d, b, &exact), 0);
    ck_assert(exact);
    ck_assert_int_eq(npv_aicore_release(b), 0);
    ck_assert_int_eq(npv_aicore_release(b), -EINVAL);
}
END_TEST

START_TEST(a_stale_result_record_is_not_taken_for_the_next_run)
{
    /* Slot 0's record holds run 1's epoch when run 3 starts there. */
    bool exact;
    for (uint32_t i = 0; i < 3; i++) {
        ck_assert_int_eq(aicd_run(&d, 0, false, i + 1, &exact), 0);
        ck_assert(exact);
    }
    struct npv_aicore_counters c;
    npv_aicore_counters(d.ac, &c);
    ck_assert_uint_eq(c.runs, 3);
}
END_TEST

/* Operand i of a many-task graph: 256 floats each in one buffer. */
#define N     256u
#define SLOTS 40u
static float *op(struct aic_buf *b, uint32_t i)
{
    return (float *)b->va + (size_t)i * N;
}
static npv_iova_t op_iova(struct aic_buf *b, uint32_t i)
{
    return b->iova + (uint64_t)i * N * sizeof(float);
}

START_TEST(many_tasks_per_core_use_both_payload_slots_and_cross_core_dependencies)
{
    const uint32_t clusters = d.t.clusters;
    const uint32_t aiv0 = npv_aicore_phys_aiv(clusters, 0, 0),
                   aiv1 = npv_aicore_phys_aiv(clusters, 0, 1);
    const uint32_t aic = npv_aicore_phys_aic(clusters, 0);
    struct aic_buf b;
    aic_buf_new(&d.t, SLOTS * N * sizeof(float), &b);
    for (uint32_t i = 0; i < SLOTS; i++)
        for (uint32_t k = 0; k < N; k++)
            op(&b, i)[k] = (float)((int)((i * 31u + k * 7u) % 97u) - 48) / 8.0f;
    struct npv_aicore_task t[16];
    uint32_t n = 0;
    /* aiv0: 6 independent adds, op 10+i = op i + op (i+1). */
    for (uint32_t i = 0; i < 6; i++)
        t[n++] = (struct npv_aicore_task){.op = NPV_AICORE_OP_VADD,
                                          .core = aiv0,
                                          .n = N,
                                          .dep = NPV_AICORE_NO_DEP,
                                          .a = op_iova(&b, i),
                                          .b = op_iova(&b, i + 1),
                                          .c = op_iova(&b, 10 + i)};
    /* aiv1: a chain after aiv0's last add, op 20+i = op 20+i-1 + op 7 (op 19 is an input). */
    for (uint32_t i = 0, at = n; i < 5; i++, n++)
        t[n] = (struct npv_aicore_task){.op = NPV_AICORE_OP_VADD,
                                        .core = aiv1,
                                        .n = N,
                                        .dep = i == 0 ? 5 : at + i - 1,
                                        .a = op_iova(&b, 19 + i),
                                        .b = op_iova(&b, 7),
                                        .c = op_iova(&b, 20 + i)};
    /* aic: three 16x16 matmuls; the last reads both AIVs' last results, after aiv1's chain end. */
    for (uint32_t i = 0; i < 3; i++)
        t[n++] = (struct npv_aicore_task){.op = NPV_AICORE_OP_MATMUL,
                                          .core = aic,
                                          .m = 16,
                                          .n = 16,
                                          .k = 16,
                                          .dep = i == 2 ? 10 : NPV_AICORE_NO_DEP,
                                          .a = op_iova(&b, i == 2 ? 15 : i),
                                          .b = op_iova(&b, i == 2 ? 24 : 8),
                                          .c = op_iova(&b, 30 + i)};
    ck_assert(t[10].core == aiv1 && t[5].core == aiv0);
    struct npv_aicore_run_desc desc = {.tasks = t, .nr_tasks = n};
    struct npv_aicore_run *run;
    ck_assert_int_eq(npv_aicore_prepare(d.ac, 0, &desc, &run), 0);
    ck_assert_int_eq(npv_aicore_launch(run), 0);
    ck_assert_int_eq(npv_aicore_wait(run, AIC_GENEROUS_NS), 0);
    struct npv_aicore_result res;
    ck_assert_int_eq(npv_aicore_result(run, &res), 0);
    ck_assert_uint_eq(res.tasks_done, n);
    ck_assert_int_eq(npv_aicore_release(run), 0);

    float want[N];
    for (uint32_t i = 0; i < 6; i++) {
        for (uint32_t k = 0; k < N; k++)
            want[k] = op(&b, i)[k] + op(&b, i + 1)[k];
        ck_assert(memcmp(want, op(&b, 10 + i), sizeof(want)) == 0);
    }
    for (uint32_t i = 0; i < 5; i++) {
        for (uint32_t k = 0; k < N; k++)
            want[k] = op(&b, 19 + i)[k] + op(&b, 7)[k];
        ck_assert(memcmp(want, op(&b, 20 + i), sizeof(want)) == 0);
    }
    for (uint32_t i = 0; i < 3; i++) {
        const float *x = op(&b, i == 2 ? 15 : i), *y = op(&b, i == 2 ? 24 : 8);
        for (uint32_t r = 0; r < 16; r++)
            for (uint32_t c = 0; c < 16; c++) {
                float acc = 0.0f;
                for (uint32_t p = 0; p < 16; p++) {
                    float prod = x[r * 16 + p] * y[p * 16 + c];
                    acc = acc + prod;
                }
                want[r * 16 + c] = acc;
            }
        ck_assert(memcmp(want, op(&b, 30 + i), sizeof(want)) == 0);
    }
    if (!d.t.hardware) {
        ck_assert_uint_eq(aicd_port(&d, AICORE_TP_TASKS(aiv0)), 6);
        ck_assert_uint_eq(aicd_port(&d, AICORE_TP_TASKS(aiv1)), 5);
        ck_assert_uint_eq(aicd_port(&d, AICORE_TP_TASKS(aic)), 3);
    }
    aic_buf_free(&b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("aicore_driver_pipeline");
    TCase *tc = tcase_create("pipeline");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, two_overlapping_runs_are_both_exact);
    tcase_add_test(tc, a_second_preparation_waits_until_its_predecessor_is_launched);
    tcase_add_test(tc, a_stale_result_record_is_not_taken_for_the_next_run);
    tcase_add_test(tc, many_tasks_per_core_use_both_payload_slots_and_cross_core_dependencies);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}

/* SPDX-License-Identifier: MIT */
/*
 * Issue 12 acceptance 5: two runs overlap, one executing while the next is
 * prepared, and both are exact. And what admission refuses: a second
 * preparation behind one that is not launched, a taken slot, a launch while
 * the other run holds the device.
 */
#include <check.h>
#include <errno.h>

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

int main(void)
{
    Suite *s = suite_create("aicore_driver_pipeline");
    TCase *tc = tcase_create("pipeline");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, two_overlapping_runs_are_both_exact);
    tcase_add_test(tc, a_second_preparation_waits_until_its_predecessor_is_launched);
    tcase_add_test(tc, a_stale_result_record_is_not_taken_for_the_next_run);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}

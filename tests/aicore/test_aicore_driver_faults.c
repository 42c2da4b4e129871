/* SPDX-License-Identifier: MIT */
/*
 * Issue 12 acceptance 4: a hung task trips the device's watchdog and the run
 * fails with the device's error before the host's own deadline; the device is
 * reset before its next use and that run is exact. A dropped FIN and a ready
 * record with a bad physical id end in clear errors, never a hang; so does a
 * sub-core that never leaves its loop after the last task. A reset that does
 * not complete is retried; a device no reset brings back is declared dead.
 */
#include <check.h>
#include <errno.h>
#include <string.h>

#include <npuvfio/ctx.h>

#include "aic_driver.h"
#include "npv_test.h"

#define MS           1000000ull
#define TASK_TIMEOUT (2000 * MS) /* the device's watchdog: half of it */

static struct aicd d;
static unsigned reset_warnings;

static void count_reset_warnings(void *user, enum npv_log_level level, const char *msg)
{
    (void)user;
    if (level == NPV_LOG_WARN && strstr(msg, "reset did not complete") != NULL)
        reset_warnings++;
}

static void setup(void)
{
    struct npv_aicore_config cfg = {.task_timeout_ns = TASK_TIMEOUT};
    aicd_open(&d, NULL, &cfg);
    reset_warnings = 0;
    npv_ctx_set_log_sink(d.t.ctx, count_reset_warnings, NULL);
}

static void teardown(void)
{
    aicd_close(&d);
}

/* Run once with the fault armed on phys: the run's status and result. */
static int faulted_run(uint32_t phys, uint64_t fault, uint64_t arg, struct npv_aicore_result *res)
{
    struct npv_aicore_run *run;
    bool exact;
    aic_fault(&d.t, phys, fault, arg);
    ck_assert_int_eq(aicd_prepare(&d, 0, true, 7, &run), 0);
    ck_assert_int_eq(npv_aicore_launch(run), 0);
    int r = aicd_finish(&d, run, &exact);
    ck_assert_int_eq(npv_aicore_result(run, res), 0);
    ck_assert_int_eq(res->status, r);
    ck_assert_int_eq(npv_aicore_release(run), 0);
    return r;
}

static void next_run_is_exact_after_one_reset(void)
{
    bool exact;
    /* In the faulted run's slot, whose result record still holds that run's ERROR. */
    ck_assert_int_eq(aicd_run(&d, 0, true, 8, &exact), 0);
    ck_assert(exact);
    struct npv_aicore_counters c;
    npv_aicore_counters(d.ac, &c);
    ck_assert_uint_eq(c.resets, 1);
    ck_assert_uint_eq(aic_rd(&d.t, AICORE_REG_GLOBAL_ERR), 0);
}

START_TEST(watchdog_fault_fails_the_run_resets_the_device_and_the_next_run_is_exact)
{
    struct npv_aicore_result res;
    ck_assert_int_eq(faulted_run(npv_aicore_phys_aic(d.t.clusters, 0), AICORE_FAULT_HANG, 0, &res),
                     -EIO);
    ck_assert_uint_ne((uint64_t)(uint32_t)res.code & AICORE_ERR_WATCHDOG, 0);
    ck_assert_uint_eq(res.verdict, AICORE_VERDICT_ERROR);
    struct npv_aicore_counters c;
    npv_aicore_counters(d.ac, &c);
    ck_assert_uint_eq(c.timeouts, 0); /* the device said so first */
    ck_assert_uint_eq(c.resets, 0);   /* reset before the next use, not before */
    ck_assert_uint_ne(aic_rd(&d.t, AICORE_REG_STATUS) & AICORE_STATUS_POISONED, 0);
    next_run_is_exact_after_one_reset();
}
END_TEST

START_TEST(dropped_fin_times_out_the_task_and_the_next_run_is_exact)
{
    struct npv_aicore_result res;
    ck_assert_int_eq(
        faulted_run(npv_aicore_phys_aic(d.t.clusters, 0), AICORE_FAULT_DROP_FIN, 0, &res),
        -ETIMEDOUT);
    struct npv_aicore_counters c;
    npv_aicore_counters(d.ac, &c);
    ck_assert_uint_eq(c.timeouts, 1);
    next_run_is_exact_after_one_reset();
}
END_TEST

START_TEST(bad_physical_id_in_a_ready_record_is_a_protocol_error)
{
    struct npv_aicore_result res;
    ck_assert_int_eq(
        faulted_run(npv_aicore_phys_aiv(d.t.clusters, 3, 1), AICORE_FAULT_BAD_PHYS_ID, 0, &res),
        -EPROTO);
    ck_assert_uint_eq(res.tasks_done, 0);
    next_run_is_exact_after_one_reset();
}
END_TEST

START_TEST(a_late_ack_within_the_deadline_is_no_error)
{
    struct npv_aicore_result res;
    ck_assert_int_eq(
        faulted_run(npv_aicore_phys_aiv(d.t.clusters, 1, 0), AICORE_FAULT_DELAY_ACK, 100000, &res),
        0);
    ck_assert_uint_eq(aicore_sample_check(&d.g[0]), 0);
    struct npv_aicore_counters c;
    npv_aicore_counters(d.ac, &c);
    ck_assert_uint_eq(c.resets, 0);
}
END_TEST

START_TEST(a_sub_core_that_never_exits_times_out_the_run_and_the_next_run_is_exact)
{
    struct npv_aicore_result res;
    ck_assert_int_eq(
        faulted_run(npv_aicore_phys_aiv(d.t.clusters, 5, 0), AICORE_FAULT_STUCK_EXIT, 0, &res),
        -ETIMEDOUT);
    /* Every task had finished: only the exit was missing. */
    ck_assert_uint_eq(res.tasks_done, d.g[0].desc.nr_tasks);
    struct npv_aicore_counters c;
    npv_aicore_counters(d.ac, &c);
    ck_assert_uint_eq(c.timeouts, 1);
    next_run_is_exact_after_one_reset();
}
END_TEST

/* A reset that does not complete is written again: the next run is exact, the miss reported. */
START_TEST(a_reset_that_does_not_complete_once_is_retried_and_the_run_is_exact)
{
    struct npv_aicore_result res;
    ck_assert_int_eq(faulted_run(npv_aicore_phys_aic(d.t.clusters, 0), AICORE_FAULT_HANG, 0, &res),
                     -EIO);
    aic_fault(&d.t, 0, AICORE_FAULT_RESET_STUCK, 0);
    next_run_is_exact_after_one_reset();
    ck_assert_uint_eq(reset_warnings, 1);
}
END_TEST

/*
 * A device no reset brings back: the reset fails after its tries, the device
 * is dead and says so at once, and an explicit reset revives it once it can.
 */
START_TEST(a_device_that_never_resets_is_declared_dead_and_fails_fast)
{
    struct npv_aicore_result res;
    ck_assert_int_eq(faulted_run(npv_aicore_phys_aic(d.t.clusters, 1), AICORE_FAULT_HANG, 0, &res),
                     -EIO);
    aic_fault(&d.t, 0, AICORE_FAULT_RESET_DEAD, 0);
    struct npv_aicore_run *run;
    ck_assert_int_eq(aicd_prepare(&d, 0, false, 9, &run), -ETIMEDOUT);
    ck_assert_uint_eq(reset_warnings, 3);
    ck_assert_int_eq(aicd_prepare(&d, 1, false, 10, &run), -EIO);
    ck_assert_uint_eq(reset_warnings, 3); /* dead: no reset tried again */
    aic_fault(&d.t, 0, AICORE_FAULT_NONE, 0);
    ck_assert_int_eq(npv_aicore_reset(d.ac), 0);
    bool exact;
    ck_assert_int_eq(aicd_run(&d, 0, true, 11, &exact), 0);
    ck_assert(exact);
}
END_TEST

int main(void)
{
    aic_require_model("faults are injected through the model's test port");
    Suite *s = suite_create("aicore_driver_faults");
    TCase *tc = tcase_create("faults");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, watchdog_fault_fails_the_run_resets_the_device_and_the_next_run_is_exact);
    tcase_add_test(tc, dropped_fin_times_out_the_task_and_the_next_run_is_exact);
    tcase_add_test(tc, bad_physical_id_in_a_ready_record_is_a_protocol_error);
    tcase_add_test(tc, a_late_ack_within_the_deadline_is_no_error);
    tcase_add_test(tc, a_sub_core_that_never_exits_times_out_the_run_and_the_next_run_is_exact);
    tcase_add_test(tc, a_reset_that_does_not_complete_once_is_retried_and_the_run_is_exact);
    tcase_add_test(tc, a_device_that_never_resets_is_declared_dead_and_fails_fast);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}

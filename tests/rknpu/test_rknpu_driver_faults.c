/* SPDX-License-Identifier: MIT */
/*
 * Acceptance 5 of issue 11, and the other faults the model injects: a
 * stalled core fails its job with -ETIMEDOUT within the job's deadline, is
 * soft-reset, and the jobs queued behind it run exact; a reset that fails
 * once is retried and reported; a DMA error and impossible status bits fail
 * only their job; a driver opening cores a dead owner left running, enabled
 * or held in reset starts them from a soft reset. The model only: a real NPU
 * cannot be told to fail.
 */
#include <check.h>
#include <errno.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/failpoint.h>
#include <npuvfio/stats.h>
#include <stdio.h>
#include <time.h>

#include "npv_test.h"
#include "rk_drv.h"

static struct rk t;
static unsigned reset_warnings;

static int64_t rknpu_now_ns_for_tests(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void count_reset_warnings(void *user, enum npv_log_level level, const char *msg)
{
    (void)user;
    if (level == NPV_LOG_WARN && strstr(msg, "soft reset of core") != NULL)
        reset_warnings++;
}

static void setup(void)
{
    /* Short deadlines: these tests wait them out on purpose. */
    const struct npv_rknpu_config cfg = {.job_timeout_ns = 300 * MS, .reset_timeout_ns = 50 * MS};
    rk_open(&t, &cfg);
    reset_warnings = 0;
    npv_ctx_set_log_sink(t.ctx, count_reset_warnings, NULL);
}

static void setup_irq(void)
{
    const struct npv_rknpu_config cfg = {
        .job_timeout_ns = 300 * MS, .reset_timeout_ns = 50 * MS, .completion = NPV_RKNPU_IRQ};
    rk_open(&t, &cfg);
    reset_warnings = 0;
    npv_ctx_set_log_sink(t.ctx, count_reset_warnings, NULL);
}

static void teardown(void)
{
    rk_close(&t);
}

static const struct rknpu_sample_shape SHAPE = {.dtype = NPV_RKNPU_INT8, .m = 8, .k = 64, .n = 32};

static struct npv_rknpu_counters counters(void)
{
    struct npv_rknpu_counters c;
    npv_rknpu_counters(t.npu, &c);
    return c;
}

static void submit(struct rknpu_sample_mm *s, uint32_t mask, uint64_t cookie)
{
    rknpu_sample_mm_poison(s);
    struct npv_rknpu_job job = {
        .tasks = &s->task, .nr_tasks = 1, .core_mask = mask, .cookie = cookie};
    ck_assert_int_eq(npv_rknpu_submit(t.npu, &job), 0);
}

/* Collect n completions into cpl[cookie]; no wait longer than GENEROUS_NS. */
static void collect(struct npv_cpl *by_cookie, unsigned n)
{
    struct npv_cpl cpl[8];
    for (unsigned got = 0; got < n;) {
        int r = npv_rknpu_wait(t.npu, 1, GENEROUS_NS, cpl, 8);
        ck_assert_int_gt(r, 0);
        for (int k = 0; k < r; k++)
            by_cookie[cpl[k].cookie] = cpl[k];
        got += (unsigned)r;
    }
}

/* The stall is armed for the next run: wait until the core took it (bounded). */
static void wait_stalled(unsigned core)
{
    for (unsigned tries = 0;
         rk_port_read(&t, RKNPU_TP_CORE(core) + RKNPU_TP_STATE) != RKNPU_CORE_STALLED; tries++)
        ck_assert_msg(tries < 100000, "core %u never took its stall", core);
}

START_TEST(a_stalled_core_fails_its_job_with_etimedout_and_the_queue_behind_it_runs_exact)
{
    struct rknpu_sample_mm *s[3];
    for (unsigned i = 0; i < 3; i++)
        ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 20 + i, &s[i]), 0);
    uint32_t model_resets = rk_port_read(&t, RKNPU_TP_CORE(1) + RKNPU_TP_RESETS);
    rk_fault(&t, 1, RKNPU_FAULT_STALL);
    submit(s[0], 0x2, 0); /* stalls */
    submit(s[1], 0x2, 1); /* queued behind it on the same core */
    submit(s[2], 0x1, 2); /* another core, unaffected */
    struct npv_cpl cpl[3];
    collect(cpl, 3);
    ck_assert_int_eq(cpl[0].status, -ETIMEDOUT);
    ck_assert_int_eq(cpl[1].status, 0);
    ck_assert_int_eq(cpl[2].status, 0);
    ck_assert_uint_eq(rknpu_sample_mm_check(s[1]), 0);
    ck_assert_uint_eq(rknpu_sample_mm_check(s[2]), 0);
    struct npv_rknpu_counters c = counters();
    ck_assert_uint_eq(c.timeouts, 1);
    ck_assert_uint_eq(c.resets, 1);
    ck_assert_uint_eq(rk_port_read(&t, RKNPU_TP_CORE(1) + RKNPU_TP_RESETS), model_resets + 1);
    /* lib/stats (stats.h) carries the same: the timeout and the reset on core 1's queue. */
    char name[96];
    snprintf(name, sizeof(name), "rknpu:%s", npv_dev_name(t.dev));
    struct npv_stats st;
    ck_assert_int_eq(npv_stats_read(t.ctx, name, &st, sizeof(st)), 3); /* a queue per core */
    ck_assert_uint_eq(st.timeout, 1);
    ck_assert_uint_eq(st.resets, 1);
    ck_assert_uint_eq(st.ok, 2);
    /* The next job on the reset core is exact. */
    rk_assert_exact(&t, s[0], 0x2);
    for (unsigned i = 0; i < 3; i++)
        rknpu_sample_mm_free(s[i]);
}
END_TEST

START_TEST(a_reset_that_fails_once_is_retried_and_reported)
{
    struct rknpu_sample_mm *s;
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 30, &s), 0);
    rk_fault(&t, 2, RKNPU_FAULT_STALL);
    submit(s, 0x4, 0);
    /* The stall took its fault; the next reset of the core fails once. */
    wait_stalled(2);
    rk_fault(&t, 2, RKNPU_FAULT_RESET_FAILS_ONCE);
    struct npv_cpl cpl;
    collect(&cpl, 1);
    ck_assert_int_eq(cpl.status, -ETIMEDOUT);
    struct npv_rknpu_counters c = counters();
    ck_assert_uint_eq(c.reset_retries, 1);
    ck_assert_uint_eq(c.resets, 1);
    ck_assert_uint_eq(reset_warnings, 1);
    ck_assert_uint_eq(rk_port_read(&t, RKNPU_TP_CORE(2) + RKNPU_TP_RESET_FAILURES), 1);
    rk_assert_exact(&t, s, 0x4);
    rknpu_sample_mm_free(s);
}
END_TEST

START_TEST(a_dma_error_fails_only_its_job_with_eio_and_the_core_recovers)
{
    struct rknpu_sample_mm *s;
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 40, &s), 0);
    rk_fault(&t, 0, RKNPU_FAULT_DMA_ERROR);
    submit(s, 0x1, 0);
    struct npv_cpl cpl;
    collect(&cpl, 1);
    ck_assert_int_eq(cpl.status, -EIO);
    ck_assert_uint_ne(cpl.dev_error & RKNPU_INT_DMA_WRITE_ERROR, 0);
    ck_assert_uint_eq(counters().timeouts, 0);
    rk_assert_exact(&t, s, 0x1);
    rknpu_sample_mm_free(s);
}
END_TEST

START_TEST(impossible_status_bits_are_a_device_fault_never_a_completion)
{
    struct rknpu_sample_mm *s;
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 50, &s), 0);
    rk_fault(&t, 1, RKNPU_FAULT_WRONG_STATUS);
    submit(s, 0x2, 0);
    struct npv_cpl cpl;
    collect(&cpl, 1);
    ck_assert_int_eq(cpl.status, -NPV_EDEVFAULT);
    rk_assert_exact(&t, s, 0x2);
    rknpu_sample_mm_free(s);
}
END_TEST

START_TEST(reset_fails_every_job_in_flight_with_ecanceled)
{
    struct rknpu_sample_mm *s[2];
    for (unsigned i = 0; i < 2; i++)
        ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 60 + i, &s[i]), 0);
    rk_fault(&t, 0, RKNPU_FAULT_STALL);
    submit(s[0], 0x1, 0);
    submit(s[1], 0x1, 1);
    wait_stalled(0);
    ck_assert_int_eq(npv_rknpu_reset(t.npu), 0);
    struct npv_cpl cpl[2];
    collect(cpl, 2);
    ck_assert_int_eq(cpl[0].status, -ECANCELED);
    ck_assert_int_eq(cpl[1].status, -ECANCELED);
    rk_assert_exact(&t, s[1], 0x1);
    for (unsigned i = 0; i < 2; i++)
        rknpu_sample_mm_free(s[i]);
}
END_TEST

/*
 * A previous owner dies leaving core 0's enable high (the next 1 would be no
 * edge), core 1 stalled mid-run and core 2 held in reset: a new driver must
 * start every core from a soft reset and run exact on each at once.
 */
START_TEST(cores_a_dead_owner_left_running_enabled_or_in_reset_are_reset_at_open)
{
    const struct npv_rknpu_config cfg = {.job_timeout_ns = 300 * MS, .reset_timeout_ns = 50 * MS};
    rk_close_client(&t);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        rk_reopen(&t, &cfg);
        struct rknpu_sample_mm *s;
        struct npv_bar *bar;
        int ok = rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 60, &s) == 0 &&
                 npv_bar_map(t.dev, RKNPU_BAR_INDEX, &bar) == 0;
        if (ok) {
            rk_fault(&t, 1, RKNPU_FAULT_STALL);
            submit(s, 0x2, 0);
            wait_stalled(1);
            ok = npv_bar_write(bar, RKNPU_CORE_BASE(0) + RKNPU_PC_OPERATION_ENABLE, 4,
                               RKNPU_PC_OP_EN) == 0 &&
                 npv_bar_write(bar, RKNPU_CORE_BASE(2) + RKNPU_GLOBAL_SOFT_RESET, 4,
                               RKNPU_SOFT_RESET_LINES) == 0;
        }
        _exit(ok ? 0 : 1); /* no close: the owner is gone */
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the dying owner: status %d",
                  status);
    rk_reopen(&t, &cfg);
    ck_assert_uint_eq(counters().resets, 0);
    struct rknpu_sample_mm *s;
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 61, &s), 0);
    for (unsigned c = 0; c < 3; c++)
        rk_assert_exact(&t, s, 1u << c);
    struct npv_rknpu_counters c = counters();
    ck_assert_uint_eq(c.timeouts, 0);
    ck_assert_uint_eq(c.resets, 0);
    rknpu_sample_mm_free(s);
}
END_TEST

static char last_error[512];
static unsigned warnings_polling;

static void keep_messages(void *user, enum npv_log_level level, const char *msg)
{
    (void)user;
    if (level == NPV_LOG_ERROR)
        snprintf(last_error, sizeof(last_error), "%s", msg);
    if (level == NPV_LOG_WARN && strstr(msg, "polling") != NULL)
        warnings_polling++;
}

/*
 * Issue 22 section 3: where the transport has no reset (the SoC through
 * vfio-platform: no register-level reset, no reset handler), a stalled core
 * is taken out of service: its job times out, the job queued behind it and
 * every later job on it fail at once with -EIO and a message naming the fix,
 * and the other cores go on. On the model: its reset register made absent.
 */
START_TEST(without_a_reset_a_stalled_core_goes_out_of_service_and_the_others_go_on)
{
    rk_close_client(&t);
    uint32_t absent = 1;
    /* The test port is reached through a fresh client's BAR2. */
    rk_reopen(&t, NULL);
    ck_assert_int_eq(npv_bar_write(t.port, RKNPU_TP_SOFT_RESET_ABSENT, 4, absent), 0);
    rk_close_client(&t);
    const struct npv_rknpu_config cfg = {.job_timeout_ns = 300 * MS, .reset_timeout_ns = 50 * MS};
    rk_reopen(&t, &cfg);
    last_error[0] = '\0';
    npv_ctx_set_log_sink(t.ctx, keep_messages, NULL);
    uint32_t model_resets = rk_port_read(&t, RKNPU_TP_CORE(1) + RKNPU_TP_RESETS);

    struct rknpu_sample_mm *s[4];
    for (unsigned i = 0; i < 4; i++)
        ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 40 + i, &s[i]), 0);
    rk_fault(&t, 1, RKNPU_FAULT_STALL);
    submit(s[0], 0x2, 0); /* stalls */
    submit(s[1], 0x2, 1); /* queued behind it on the same core */
    submit(s[2], 0x1, 2); /* other cores, unaffected */
    submit(s[3], 0x4, 3);
    struct npv_cpl cpl[4];
    uint64_t t0 = (uint64_t)rknpu_now_ns_for_tests();
    collect(cpl, 4);
    ck_assert_int_eq(cpl[0].status, -ETIMEDOUT);
    ck_assert_int_eq(cpl[1].status, -EIO); /* failed fast, not after its own deadline */
    ck_assert_int_eq(cpl[2].status, 0);
    ck_assert_int_eq(cpl[3].status, 0);
    ck_assert_uint_lt((uint64_t)rknpu_now_ns_for_tests() - t0, 2 * 300 * MS);
    ck_assert_uint_eq(rknpu_sample_mm_check(s[2]), 0);
    ck_assert_uint_eq(rknpu_sample_mm_check(s[3]), 0);
    ck_assert_msg(strstr(last_error, "core 1 is out of service") != NULL &&
                      strstr(last_error, "rebind the NPU") != NULL,
                  "the error does not name the state and the fix: %s", last_error);
    /* Nothing was reset: the model's lines were never touched. */
    ck_assert_uint_eq(rk_port_read(&t, RKNPU_TP_CORE(1) + RKNPU_TP_RESETS), model_resets);
    ck_assert_uint_eq(counters().resets, 0);
    /* Later jobs on core 1 fail at submit; mask 0 avoids it; cores 0 and 2 stay exact. */
    struct npv_rknpu_job job = {.tasks = &s[0]->task, .nr_tasks = 1, .core_mask = 0x2};
    ck_assert_int_eq(npv_rknpu_submit(t.npu, &job), -EIO);
    job.core_mask = 0x7;
    ck_assert_int_eq(npv_rknpu_submit(t.npu, &job), -EIO);
    for (unsigned i = 0; i < 3; i++)
        rk_assert_exact(&t, s[i], 0);
    rk_assert_exact(&t, s[0], 0x1);
    rk_assert_exact(&t, s[1], 0x4);
    ck_assert_int_eq(npv_rknpu_reset(t.npu), -EOPNOTSUPP);
    for (unsigned i = 0; i < 4; i++)
        rknpu_sample_mm_free(s[i]);
    /* The next test's model has its reset again. */
    absent = 0;
    ck_assert_int_eq(npv_bar_write(t.port, RKNPU_TP_SOFT_RESET_ABSENT, 4, absent), 0);
}
END_TEST

/*
 * Issue 22 section 3: when the cores' interrupts cannot be had (on the
 * RK3588 the NPU's line is shared with its IOMMU and vfio-platform requests
 * it unshared), NPV_RKNPU_IRQ falls back to polling with a warning;
 * NPV_RKNPU_IRQ_ONLY refuses to open instead. The refusal is the library's
 * eventfd failpoint: the first eventfd of the interrupt set-up fails.
 */
START_TEST(irq_that_cannot_be_had_falls_back_to_polling_or_refuses_by_option)
{
    npv_rknpu_close(t.npu);
    t.npu = NULL;
    warnings_polling = 0;
    last_error[0] = '\0';
    npv_ctx_set_log_sink(t.ctx, keep_messages, NULL);
    struct npv_rknpu_config cfg = {.completion = NPV_RKNPU_IRQ};
    ck_assert_int_eq(npv_failpoint_arm(t.ctx, NPV_FAIL_EVENTFD, 1), 0);
    ck_assert_int_eq(npv_rknpu_open(t.dev, &cfg, &t.npu), 0);
    ck_assert_uint_ge(npv_failpoint_calls(t.ctx, NPV_FAIL_EVENTFD), 1);
    npv_failpoint_disarm(t.ctx);
    ck_assert_uint_eq(warnings_polling, 1);
    struct rknpu_sample_mm *s;
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 50, &s), 0);
    rk_assert_exact(&t, s, 0x7);
    rknpu_sample_mm_free(s);
    npv_rknpu_close(t.npu);
    t.npu = NULL;

    cfg.completion = NPV_RKNPU_IRQ_ONLY;
    ck_assert_int_eq(npv_failpoint_arm(t.ctx, NPV_FAIL_EVENTFD, 1), 0);
    ck_assert_int_eq(npv_rknpu_open(t.dev, &cfg, &t.npu), -EMFILE);
    npv_failpoint_disarm(t.ctx);
    ck_assert_ptr_null(t.npu);
    ck_assert_msg(strstr(last_error, "interrupt") != NULL, "no reason given: %s", last_error);
    /* Without the failpoint the same option opens on interrupts. */
    ck_assert_int_eq(npv_rknpu_open(t.dev, &cfg, &t.npu), 0);
}
END_TEST

/*
 * Issue 22 section 2: the version is PC_VERSION + (PC_VERSION_NUM & 0xffff),
 * as rocket_core_init computes it: a core whose VERSION_NUM is not the
 * RK3588's 0 (an RK3576 part: another register layout) is refused, though
 * its PC_VERSION alone reads "FIRE".
 */
START_TEST(the_version_counts_version_num_as_rocket_does)
{
    npv_rknpu_close(t.npu);
    t.npu = NULL;
    uint32_t num = 1;
    ck_assert_int_eq(npv_bar_write(t.port, RKNPU_TP_VERSION_NUM, 4, num), 0);
    struct npv_rknpu *npu = NULL;
    ck_assert_int_eq(npv_rknpu_open(t.dev, NULL, &npu), -EPROTO);
    ck_assert_ptr_null(npu);
    /* Only the low 16 bits count. */
    num = 0x10000;
    ck_assert_int_eq(npv_bar_write(t.port, RKNPU_TP_VERSION_NUM, 4, num), 0);
    ck_assert_int_eq(npv_rknpu_open(t.dev, NULL, &t.npu), 0);
    npv_rknpu_close(t.npu);
    num = 0;
    ck_assert_int_eq(npv_bar_write(t.port, RKNPU_TP_VERSION_NUM, 4, num), 0);
    ck_assert_int_eq(npv_rknpu_open(t.dev, NULL, &t.npu), 0);
}
END_TEST

int main(void)
{
    rk_require_model("fault injection is the model's test port");
    Suite *s = suite_create("rknpu_driver_faults");
    TCase *tc = tcase_create("faults");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc,
                   a_stalled_core_fails_its_job_with_etimedout_and_the_queue_behind_it_runs_exact);
    tcase_add_test(tc, a_reset_that_fails_once_is_retried_and_reported);
    tcase_add_test(tc, a_dma_error_fails_only_its_job_with_eio_and_the_core_recovers);
    tcase_add_test(tc, impossible_status_bits_are_a_device_fault_never_a_completion);
    tcase_add_test(tc, reset_fails_every_job_in_flight_with_ecanceled);
    tcase_add_test(tc, cores_a_dead_owner_left_running_enabled_or_in_reset_are_reset_at_open);
    tcase_add_test(tc, without_a_reset_a_stalled_core_goes_out_of_service_and_the_others_go_on);
    tcase_add_test(tc, irq_that_cannot_be_had_falls_back_to_polling_or_refuses_by_option);
    tcase_add_test(tc, the_version_counts_version_num_as_rocket_does);
    suite_add_tcase(s, tc);
    /* Sleeping on interrupts: a stalled core raises none, its deadline still ends the wait. */
    TCase *irq = tcase_create("irq");
    tcase_add_checked_fixture(irq, setup_irq, teardown);
    tcase_add_test(irq,
                   a_stalled_core_fails_its_job_with_etimedout_and_the_queue_behind_it_runs_exact);
    tcase_add_test(irq, a_dma_error_fails_only_its_job_with_eio_and_the_core_recovers);
    suite_add_tcase(s, irq);
    return npv_test_run(s);
}

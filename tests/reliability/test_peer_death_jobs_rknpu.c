/* SPDX-License-Identifier: MIT */
/*
 * The RKNPU model SIGKILLed with jobs queued and running on all three cores:
 * every core is stalled first so that none of them can have finished, then
 * the model dies. Every job must come back exactly once with an error within
 * a bounded number of job deadlines (its deadline passes, the soft reset over
 * a dead transport fails), the driver then refuses new jobs (the NPU is
 * dead), and a new model on the same socket runs the sample exact.
 *
 * Prints for scripts/reliability-report.py:
 *   peer-jobs device=rknpu in-flight=N completed=N failed=N then=ERRNO reopened=exact
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "npv_test.h"
#include "rel_harness.h"
#include "rk_drv.h"

#define JOBS           12u
#define JOB_TIMEOUT_NS (300 * MS)
/* Collect for at most this many job deadlines: far more than a healthy failure takes. */
#define DEADLINES_TO_WAIT 50u

static const struct rknpu_sample_shape SHAPE = {.dtype = NPV_RKNPU_INT8, .m = 8, .k = 64, .n = 32};

START_TEST(rknpu_jobs_in_flight_when_the_model_dies_all_fail_once)
{
    rk_require_model("the NPU's model is killed");
    const struct npv_device_entry *e = npv_device_find("rknpu");
    ck_assert_ptr_nonnull(e);
    struct rk t;
    const struct npv_rknpu_config cfg = {.job_timeout_ns = JOB_TIMEOUT_NS,
                                         .reset_timeout_ns = 50 * MS};
    rk_open(&t, &cfg);
    unsigned cores = npv_rknpu_num_cores(t.npu);
    struct rknpu_sample_mm *mm[JOBS];
    for (unsigned i = 0; i < JOBS; i++)
        ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 40 + i, &mm[i]), 0);
    for (unsigned c = 0; c < cores; c++)
        rk_fault(&t, c, RKNPU_FAULT_STALL);
    for (unsigned i = 0; i < JOBS; i++) {
        struct npv_rknpu_job job = {
            .tasks = &mm[i]->task, .nr_tasks = 1, .core_mask = 1u << (i % cores), .cookie = i + 1};
        ck_assert_int_eq(npv_rknpu_submit(t.npu, &job), 0);
    }
    vu_server_crash(&t.srv);

    uint8_t seen[JOBS + 1] = {0};
    unsigned completed = 0, failed = 0;
    for (unsigned round = 0; round < DEADLINES_TO_WAIT && completed < JOBS; round++) {
        struct npv_cpl c[JOBS];
        int n = npv_rknpu_wait(t.npu, 1, JOB_TIMEOUT_NS, c, JOBS - completed);
        if (n < 0)
            break;
        for (int i = 0; i < n; i++) {
            uint64_t k = c[i].cookie;
            ck_assert_msg(k >= 1 && k <= JOBS, "rknpu: a completion for cookie %llu",
                          (unsigned long long)k);
            ck_assert_msg(!seen[k], "rknpu: job %llu completed twice", (unsigned long long)k);
            seen[k] = 1;
            completed++;
            ck_assert_msg(c[i].status != 0, "rknpu: job %llu on a stalled, then dead NPU succeeded",
                          (unsigned long long)k);
            failed++;
        }
    }
    ck_assert_msg(completed == JOBS, "rknpu: %u of %u jobs came back", completed, JOBS);
    /* The cores could not be reset: the driver says the NPU is dead instead of queueing. */
    struct npv_rknpu_job again = {.tasks = &mm[0]->task, .nr_tasks = 1, .core_mask = 1};
    int then = npv_rknpu_submit(t.npu, &again);
    ck_assert_msg(then < 0, "rknpu: a job was accepted by a driver whose model is dead");

    /*
     * The old client closed first: a model is forked from this process, and
     * TSan refuses a fork while the old client's threads may still run.
     */
    for (unsigned i = 0; i < JOBS; i++)
        rknpu_sample_mm_free(mm[i]);
    rk_close_client(&t);

    /* A new model on the same socket, a new client: exact. */
    rel_model_restart(&t.srv, e);
    struct npv_ctx *ctx = rel_ctx_new();
    struct rel_pass p;
    rel_pass_run(ctx, e, t.srv.path, 2, NULL, NULL, &p);
    ck_assert_msg(p.err == 0 && p.exact, "rknpu: the new model: %s at %s", strerror(-p.err),
                  p.step ? p.step : "-");
    npv_ctx_free(ctx);
    printf("peer-jobs device=rknpu in-flight=%u completed=%u failed=%u then=%s reopened=exact\n",
           JOBS, completed, failed, strerrorname_np(-then));
    fflush(stdout);
    vu_server_kill(&t.srv);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("peer_death_jobs_rknpu");
    TCase *tc = tcase_create("jobs");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, rknpu_jobs_in_flight_when_the_model_dies_all_fail_once);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}

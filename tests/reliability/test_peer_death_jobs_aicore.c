/* SPDX-License-Identifier: MIT */
/*
 * The AICore model SIGKILLed with both pipeline slots in use: slot 0's run
 * launched with a hung task (a sub-core that never finishes, its watchdog
 * far off), so it cannot have finished, and slot 1's run prepared behind it
 * (the device runs one at a time; a launch while one runs is -EBUSY). Then
 * the model dies. Each run must end exactly once with an error within a
 * bounded number of task deadlines (slot 1's at its launch or its wait) and
 * keep that verdict, the driver then refuses a new run (the
 * device is gone), and a new model on the same socket runs the sample exact.
 *
 * Prints for scripts/reliability-report.py:
 *   peer-jobs device=aicore in-flight=N completed=N failed=N then=ERRNO reopened=exact
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "aic_driver.h"
#include "deadline.h"
#include "npv_test.h"
#include "rel_harness.h"

#define TASK_TIMEOUT_NS (300 * 1000000ull)
/* Wait for at most this many task deadlines: far more than a healthy failure takes. */
#define DEADLINES_TO_WAIT 50u

START_TEST(aicore_runs_in_flight_when_the_model_dies_all_fail_once)
{
    aic_require_model("the device's model is killed");
    const struct npv_device_entry *e = npv_device_find("aicore");
    ck_assert_ptr_nonnull(e);
    struct aicd d;
    struct npv_aicore_config cfg = {.task_timeout_ns = TASK_TIMEOUT_NS,
                                    .handshake_timeout_ns = TASK_TIMEOUT_NS,
                                    .poll_timeout_ns = TASK_TIMEOUT_NS};
    aicd_open(&d, NULL, &cfg);
    struct npv_aicore_run *run[NPV_AICORE_SLOTS];
    /* Every cube core hangs on its next task: both runs have tasks that cannot finish. */
    for (uint32_t c = 0; c < d.t.clusters; c++)
        aic_fault(&d.t, npv_aicore_phys_aic(d.t.clusters, c), AICORE_FAULT_HANG, 0);
    ck_assert_int_eq(aicd_prepare(&d, 0, false, 50, &run[0]), 0);
    ck_assert_int_eq(npv_aicore_launch(run[0]), 0);
    ck_assert_int_eq(aicd_prepare(&d, 1, false, 51, &run[1]), 0);
    vu_server_crash(&d.t.srv);

    unsigned completed = 0, failed = 0;
    uint64_t bound = npv_now_ns() + DEADLINES_TO_WAIT * TASK_TIMEOUT_NS;
    for (unsigned s = 0; s < NPV_AICORE_SLOTS; s++) {
        uint64_t left = npv_now_ns() < bound ? bound - npv_now_ns() : 0;
        int r = s == 0 ? 0 : npv_aicore_launch(run[s]);
        if (r == 0)
            r = npv_aicore_wait(run[s], left);
        ck_assert_msg(r != -EINPROGRESS, "aicore: run %u still in progress after %u deadlines", s,
                      DEADLINES_TO_WAIT);
        ck_assert_msg(r < 0, "aicore: run %u on a hung, then dead device succeeded", s);
        completed++;
        failed++;
        /* Once: the verdict stays, a second wait does not turn it into another. */
        if (s == 0)
            ck_assert_int_eq(npv_aicore_wait(run[s], 0), r);
    }
    for (unsigned s = 0; s < NPV_AICORE_SLOTS; s++)
        (void)npv_aicore_release(run[s]);
    struct npv_aicore_run *again = NULL;
    int then = aicd_prepare(&d, 0, false, 60, &again);
    if (then == 0) {
        then = npv_aicore_launch(again);
        if (then == 0)
            then = npv_aicore_wait(again, DEADLINES_TO_WAIT * TASK_TIMEOUT_NS);
        (void)npv_aicore_release(again);
    }
    ck_assert_msg(then < 0, "aicore: a run succeeded on a device whose model is dead");

    /*
     * The old client closed first: a model is forked from this process, and
     * TSan refuses a fork while the old client's threads may still run.
     */
    for (unsigned s = 0; s < NPV_AICORE_SLOTS; s++)
        aicore_sample_free(d.ac, &d.g[s]);
    npv_aicore_close(d.ac);
    struct vu_server srv = d.t.srv;
    d.t.srv = (struct vu_server){0};
    aic_close(&d.t); /* the client's bars, device, domain and context; srv stays */

    /* A new model on the same socket, a new client: exact. */
    rel_model_restart(&srv, e);
    struct npv_ctx *ctx = rel_ctx_new();
    struct rel_pass p;
    rel_pass_run(ctx, e, srv.path, 2, NULL, NULL, &p);
    ck_assert_msg(p.err == 0 && p.exact, "aicore: the new model: %s at %s", strerror(-p.err),
                  p.step ? p.step : "-");
    npv_ctx_free(ctx);
    printf("peer-jobs device=aicore in-flight=%u completed=%u failed=%u then=%s reopened=exact\n",
           (unsigned)NPV_AICORE_SLOTS, completed, failed, strerrorname_np(-then));
    fflush(stdout);
    vu_server_kill(&srv);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("peer_death_jobs_aicore");
    TCase *tc = tcase_create("jobs");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, aicore_runs_in_flight_when_the_model_dies_all_fail_once);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}

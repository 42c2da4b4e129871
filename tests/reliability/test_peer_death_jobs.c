/* SPDX-License-Identifier: MIT */
/*
 * The model SIGKILLed with many jobs in flight, job by job: the device is
 * made to hang first so that none of them can have finished, then its model
 * dies. Every job must come back exactly once with an error (its deadline
 * passes, the reset over a dead transport fails), within a bounded number of
 * job deadlines, never a hang. One case per device; the devices' own submit
 * and wait calls differ, so each has its case.
 *
 * Prints for scripts/reliability-report.py:
 *   peer-jobs device=NAME in-flight=N completed=N failed=N
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <npuvfio/dev.h>
#include <npuvfio/domain.h>
#include <npuvfio/testdev.h>

#include "edgetpu/regs.h"
#include "etpu_harness.h"
#include "npv_test.h"
#include "rel_harness.h"

#define JOBS           16u
#define JOB_TIMEOUT_NS (300 * 1000000ull)
/* Collect for at most this many job deadlines: far more than a healthy failure takes. */
#define DEADLINES_TO_WAIT 50u

struct tally {
    uint8_t seen[JOBS + 1];
    unsigned completed, failed;
};

static void count(struct tally *t, const struct npv_cpl *c, const char *dev)
{
    ck_assert_msg(c->cookie >= 1 && c->cookie <= JOBS, "%s: a completion for cookie %llu", dev,
                  (unsigned long long)c->cookie);
    ck_assert_msg(!t->seen[c->cookie], "%s: job %llu completed twice", dev,
                  (unsigned long long)c->cookie);
    t->seen[c->cookie] = 1;
    t->completed++;
    ck_assert_msg(c->status != 0, "%s: job %llu on a hung, then dead device succeeded", dev,
                  (unsigned long long)c->cookie);
    t->failed++;
}

START_TEST(testdev_jobs_in_flight_when_the_model_dies_all_fail_once)
{
    const struct npv_device_entry *e = npv_device_find("testdev");
    ck_assert_ptr_nonnull(e);
    struct vu_server srv;
    struct npv_domain *dom;
    struct npv_dev *dev;
    struct npv_testdev *td;
    rel_model_start(&srv, e);
    struct npv_ctx *ctx = rel_ctx_new();
    ck_assert_int_eq(npv_domain_new(ctx, NULL, &dom), 0);
    ck_assert_int_eq(npv_dev_open_vfio_user(ctx, srv.path, dom, NULL, &dev), 0);
    struct npv_testdev_config cfg = {.job_timeout_ns = JOB_TIMEOUT_NS};
    ck_assert_int_eq(npv_testdev_open(dev, &cfg, &td), 0);
    struct npv_ring *ring = npv_testdev_ring(td);
    ck_assert_int_eq(npv_testdev_inject_fault(td, NPV_TESTDEV_FAULT_HANG), 0);
    struct npv_testdev_desc nop = npv_testdev_nop(0);
    for (uint64_t i = 1; i <= JOBS; i++)
        ck_assert_int_eq(npv_ring_push(ring, &nop, i), 0);
    ck_assert_int_eq(npv_ring_submit(ring), (int)JOBS);
    vu_server_crash(&srv);

    struct tally t = {0};
    for (unsigned round = 0; round < DEADLINES_TO_WAIT && t.completed < JOBS; round++) {
        struct npv_cpl c[JOBS];
        int n = npv_testdev_wait(td, NPV_RING_WAIT_POLL, JOBS - t.completed, JOB_TIMEOUT_NS, c);
        for (int i = 0; i < n; i++)
            count(&t, &c[i], "testdev");
    }
    ck_assert_msg(t.completed == JOBS, "testdev: %u of %u jobs came back", t.completed, JOBS);
    printf("peer-jobs device=testdev in-flight=%u completed=%u failed=%u\n", JOBS, t.completed,
           t.failed);
    fflush(stdout);
    npv_testdev_close(td);
    npv_dev_close(dev);
    npv_domain_put(dom);
    npv_ctx_free(ctx);
    vu_server_kill(&srv);
}
END_TEST

START_TEST(edgetpu_requests_in_flight_when_the_model_dies_all_fail_once)
{
    struct etpu t;
    struct npv_edgetpu_config cfg = {.request_timeout_ns = JOB_TIMEOUT_NS,
                                     .poll_timeout_ns = JOB_TIMEOUT_NS};
    etpu_require_model("the chip's model is killed");
    etpu_open(&t, &cfg);
    etpu_fault(&t, EDGETPU_FAULT_HANG);
    for (uint64_t i = 1; i <= JOBS; i++)
        ck_assert_int_eq(npv_edgetpu_submit(t.tpu, t.exe, &t.in_va, &t.out_va, i), 0);
    vu_server_crash(&t.srv);

    struct tally tl = {0};
    for (unsigned round = 0; round < DEADLINES_TO_WAIT && tl.completed < JOBS; round++) {
        struct npv_cpl c[JOBS];
        int n = npv_edgetpu_wait(t.tpu, 1, JOB_TIMEOUT_NS, c, JOBS - tl.completed);
        if (n < 0)
            break;
        for (int i = 0; i < n; i++)
            count(&tl, &c[i], "edgetpu");
    }
    ck_assert_msg(tl.completed == JOBS, "edgetpu: %u of %u requests came back", tl.completed, JOBS);
    printf("peer-jobs device=edgetpu in-flight=%u completed=%u failed=%u\n", JOBS, tl.completed,
           tl.failed);
    fflush(stdout);
    etpu_close(&t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("peer_death_jobs");
    TCase *tc = tcase_create("jobs");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, testdev_jobs_in_flight_when_the_model_dies_all_fail_once);
    if (npv_device_find("edgetpu") != NULL)
        tcase_add_test(tc, edgetpu_requests_in_flight_when_the_model_dies_all_fail_once);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}

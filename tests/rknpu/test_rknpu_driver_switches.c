/* SPDX-License-Identifier: MIT */
/*
 * Issue 22 section 4: the domain switch under everything a job can be. Jobs
 * over 5 domains with core masks 0x7, 0x3, 0, 0x1, 0x4, 0x2 and 1 to 5 tasks,
 * in poll and in irq mode, runs of 1 to 3 jobs per domain so that some
 * switches are skipped: every result exact and the switch count EXACT (a
 * job starts only in submission order, so the count is the number of domain
 * changes along the submissions, plus the first attach). Then a stall and a
 * reset while a switch waits, and an attach that fails. The model only.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>

#include <npuvfio/failpoint.h>

#include "npv_test.h"
#include "rk_drv.h"

#define DOMAINS 5u
#define QUEUE   8u /* jobs in flight at once */

static struct rk t;

static void setup_poll(void)
{
    const struct npv_rknpu_config cfg = {.job_timeout_ns = 300 * MS, .reset_timeout_ns = 50 * MS};
    rk_open(&t, &cfg);
}

static void setup_irq(void)
{
    const struct npv_rknpu_config cfg = {
        .job_timeout_ns = 300 * MS, .reset_timeout_ns = 50 * MS, .completion = NPV_RKNPU_IRQ};
    rk_open(&t, &cfg);
}

static void teardown(void)
{
    rk_close(&t);
}

static const struct rknpu_sample_shape SHAPE = {.dtype = NPV_RKNPU_INT8, .m = 4, .k = 32, .n = 32};
static const uint32_t MASKS[6] = {0x7, 0x3, 0x0, 0x1, 0x4, 0x2};

static struct npv_rknpu_counters counters(void)
{
    struct npv_rknpu_counters c;
    npv_rknpu_counters(t.npu, &c);
    return c;
}

/* Job j's domain: runs of 1, 2, 3 jobs per domain in turn (j = 0, 1 | 2, 3, 4 | 5 ...). */
static uint32_t domain_of(unsigned j)
{
    unsigned run = 0, at = 0;
    for (unsigned len = 1;; len = len % 3 + 1, run++) {
        if (j < at + len)
            return run % DOMAINS;
        at += len;
    }
}

static void mixed(unsigned jobs)
{
    /* One matmul per domain; a job of n tasks runs that matmul n times (same result). */
    struct rknpu_sample_mm *s[DOMAINS];
    struct npv_rknpu_task tasks[DOMAINS][5];
    for (uint32_t d = 0; d < DOMAINS; d++) {
        ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, d, 0, 900 + d, &s[d]), 0);
        rknpu_sample_mm_poison(s[d]);
        for (unsigned k = 0; k < 5; k++)
            tasks[d][k] = s[d]->task;
    }
    struct npv_rknpu_counters before = counters();
    uint64_t want_switches = 0;
    uint32_t last = UINT32_MAX; /* the device starts in the test's own domain */
    unsigned submitted = 0, completed = 0, in_flight = 0;
    struct npv_cpl cpl[QUEUE];
    while (completed < jobs) {
        while (submitted < jobs && in_flight < QUEUE) {
            uint32_t d = domain_of(submitted);
            struct npv_rknpu_job job = {
                .tasks = tasks[d],
                .nr_tasks = 1 + submitted % 5,
                .core_mask = MASKS[submitted % 6],
                .domain_id = d,
                .timeout_ns = GENEROUS_NS,
                .cookie = submitted,
            };
            int r = npv_rknpu_submit(t.npu, &job);
            ck_assert_msg(r == 0, "submit %u: %s", submitted, npv_strerror(r));
            want_switches += d != last;
            last = d;
            submitted++;
            in_flight++;
        }
        int n = npv_rknpu_wait(t.npu, 1, GENEROUS_NS, cpl, QUEUE);
        ck_assert_msg(n > 0, "no completion after %u of %u jobs", completed, jobs);
        for (int k = 0; k < n; k++)
            ck_assert_msg(cpl[k].status == 0, "job %llu: %s", (unsigned long long)cpl[k].cookie,
                          npv_strerror(cpl[k].status));
        completed += (unsigned)n;
        in_flight -= (unsigned)n;
    }
    for (uint32_t d = 0; d < DOMAINS; d++)
        ck_assert_uint_eq(rknpu_sample_mm_check(s[d]), 0);
    struct npv_rknpu_counters after = counters();
    ck_assert_uint_eq(after.jobs - before.jobs, jobs);
    ck_assert_uint_eq(after.timeouts, before.timeouts);
    ck_assert_uint_eq(after.domain_switches - before.domain_switches, want_switches);
    for (uint32_t d = 0; d < DOMAINS; d++)
        rknpu_sample_mm_free(s[d]);
}

START_TEST(masks_tasks_and_domains_mixed_exact_with_the_exact_switch_count)
{
    mixed(600);
}
END_TEST

static void submit_one(struct rknpu_sample_mm *s, uint32_t mask, uint32_t domain, uint64_t cookie,
                       uint64_t timeout_ns)
{
    rknpu_sample_mm_poison(s);
    struct npv_rknpu_job job = {.tasks = &s->task,
                                .nr_tasks = 1,
                                .core_mask = mask,
                                .domain_id = domain,
                                .timeout_ns = timeout_ns,
                                .cookie = cookie};
    ck_assert_int_eq(npv_rknpu_submit(t.npu, &job), 0);
}

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

START_TEST(a_stall_while_a_switch_waits_fails_alone_and_the_switch_happens)
{
    struct rknpu_sample_mm *a, *b, *c;
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 31, &a), 0);
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 1, 0, 32, &b), 0);
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 33, &c), 0);
    struct npv_rknpu_counters before = counters();
    rk_fault(&t, 1, RKNPU_FAULT_STALL);
    submit_one(a, 0x2, 0, 0, 0); /* domain 0, stalls on core 1 */
    submit_one(b, 0x1, 1, 1, 0); /* domain 1: waits for a switch, core 0 idle */
    submit_one(c, 0x4, 0, 2, 0); /* domain 0 again, behind the waiting switch */
    struct npv_cpl cpl[3];
    collect(cpl, 3);
    ck_assert_int_eq(cpl[0].status, -ETIMEDOUT);
    ck_assert_int_eq(cpl[1].status, 0);
    ck_assert_int_eq(cpl[2].status, 0);
    ck_assert_uint_eq(rknpu_sample_mm_check(b), 0);
    ck_assert_uint_eq(rknpu_sample_mm_check(c), 0);
    struct npv_rknpu_counters after = counters();
    /* Into 0, into 1 once the stalled core was reset, back into 0. */
    ck_assert_uint_eq(after.domain_switches - before.domain_switches, 3);
    ck_assert_uint_eq(after.resets - before.resets, 1);
    rknpu_sample_mm_free(a);
    rknpu_sample_mm_free(b);
    rknpu_sample_mm_free(c);
}
END_TEST

START_TEST(a_reset_while_a_switch_waits_cancels_both_and_the_next_switch_works)
{
    struct rknpu_sample_mm *a, *b;
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 2, 0, 41, &a), 0);
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 3, 0, 42, &b), 0);
    struct npv_rknpu_counters before = counters();
    rk_fault(&t, 0, RKNPU_FAULT_STALL);
    submit_one(a, 0x1, 2, 0, GENEROUS_NS); /* runs (stalled) in domain 2 */
    submit_one(b, 0x2, 3, 1, GENEROUS_NS); /* waits to switch to domain 3 */
    struct npv_cpl none[2];
    ck_assert_int_eq(npv_rknpu_poll(t.npu, none, 2), 0);
    ck_assert_int_eq(npv_rknpu_reset(t.npu), 0);
    struct npv_cpl cpl[2];
    collect(cpl, 2);
    ck_assert_int_eq(cpl[0].status, -ECANCELED);
    ck_assert_int_eq(cpl[1].status, -ECANCELED);
    /* Only the first switch happened; the waiting one never did. */
    ck_assert_uint_eq(counters().domain_switches - before.domain_switches, 1);
    rk_assert_exact(&t, b, 0x2); /* now the switch to 3 */
    rk_assert_exact(&t, a, 0x4); /* and back to 2 */
    ck_assert_uint_eq(counters().domain_switches - before.domain_switches, 3);
    rknpu_sample_mm_free(a);
    rknpu_sample_mm_free(b);
}
END_TEST

START_TEST(an_attach_that_fails_fails_its_job_and_the_next_switch_works)
{
    struct rknpu_sample_mm *a, *b;
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 51, &a), 0);
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 1, 0, 52, &b), 0);
    rk_assert_exact(&t, a, 0x1); /* the device is in domain 0 */
    struct npv_rknpu_counters before = counters();
    /* The switch's first allocation fails. */
    ck_assert_int_eq(npv_failpoint_arm(t.ctx, NPV_FAIL_ALLOC, 1), 0);
    submit_one(b, 0x1, 1, 0, GENEROUS_NS);
    struct npv_cpl cpl[1];
    collect(cpl, 1);
    npv_failpoint_disarm(t.ctx);
    ck_assert_int_lt(cpl[0].status, 0);
    ck_assert_uint_eq(counters().domain_switches, before.domain_switches);
    /* The next switches work, both ways, and compute exact. */
    rk_assert_exact(&t, b, 0x1);
    rk_assert_exact(&t, a, 0x2);
    rk_assert_exact(&t, b, 0x4);
    ck_assert_uint_eq(counters().domain_switches - before.domain_switches, 3);
    rknpu_sample_mm_free(a);
    rknpu_sample_mm_free(b);
}
END_TEST

int main(void)
{
    rk_require_model("stalls, resets and failing attaches are the model's");
    Suite *s = suite_create("rknpu_driver_switches");
    TCase *poll = tcase_create("poll");
    tcase_add_checked_fixture(poll, setup_poll, teardown);
    tcase_add_test(poll, masks_tasks_and_domains_mixed_exact_with_the_exact_switch_count);
    tcase_add_test(poll, a_stall_while_a_switch_waits_fails_alone_and_the_switch_happens);
    tcase_add_test(poll, a_reset_while_a_switch_waits_cancels_both_and_the_next_switch_works);
    tcase_add_test(poll, an_attach_that_fails_fails_its_job_and_the_next_switch_works);
    suite_add_tcase(s, poll);
    TCase *irq = tcase_create("irq");
    tcase_add_checked_fixture(irq, setup_irq, teardown);
    tcase_add_test(irq, masks_tasks_and_domains_mixed_exact_with_the_exact_switch_count);
    tcase_add_test(irq, a_stall_while_a_switch_waits_fails_alone_and_the_switch_happens);
    suite_add_tcase(s, irq);
    return npv_test_run(s);
}

/* SPDX-License-Identifier: MIT */
/*
 * Acceptance 3 of issue 11: 10,000 jobs cycling across 5 domains as fast as
 * they go: all complete, none hangs, every result exact. Consecutive jobs
 * name different domains, so the driver keeps draining the cores and
 * switching the device's domain under them.
 */
#include <check.h>
#include <errno.h>

#include "npv_test.h"
#include "rk_drv.h"

/* 10,000 in the plain build; a sanitizer build a tenth (npv_test_volume). */
#define JOBS    ((unsigned)npv_test_volume(10000u))
#define DOMAINS 5u
#define PER_DOM 4u
#define MATMULS (DOMAINS * PER_DOM)

static struct rk t;

static void setup(void)
{
    rk_open(&t, NULL);
}

static void teardown(void)
{
    rk_close(&t);
}

static const struct rknpu_sample_shape SHAPES[2] = {
    {.dtype = NPV_RKNPU_INT8, .m = 8, .k = 32, .n = 32, .bias = true, .relu = true},
    {.dtype = NPV_RKNPU_INT8, .m = 4, .k = 64, .n = 64},
};

START_TEST(ten_thousand_jobs_cycling_over_five_domains_all_complete_exact)
{
    struct rknpu_sample_mm *s[MATMULS];
    bool busy[MATMULS] = {false};
    for (unsigned i = 0; i < MATMULS; i++)
        ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPES[i % 2], i % DOMAINS, 0, 500 + i, &s[i]),
                         0);
    struct npv_rknpu_counters before;
    npv_rknpu_counters(t.npu, &before);
    ck_assert_uint_eq(before.domains_live, DOMAINS);

    unsigned submitted = 0, completed = 0;
    uint64_t wrong = 0;
    struct npv_cpl cpl[MATMULS];
    while (completed < JOBS) {
        /* Job j uses matmul j % 20, in domain j % 5: no two consecutive jobs share a domain. */
        while (submitted < JOBS && !busy[submitted % MATMULS]) {
            unsigned i = submitted % MATMULS;
            rknpu_sample_mm_poison(s[i]);
            struct npv_rknpu_job job = {
                .tasks = &s[i]->task,
                .nr_tasks = 1,
                .core_mask = 0,
                .domain_id = i % DOMAINS,
                .timeout_ns = GENEROUS_NS,
                .cookie = i,
            };
            int r = npv_rknpu_submit(t.npu, &job);
            ck_assert_msg(r == 0, "submit %u: %s", submitted, npv_strerror(r));
            busy[i] = true;
            submitted++;
        }
        int n = npv_rknpu_wait(t.npu, 1, GENEROUS_NS, cpl, MATMULS);
        ck_assert_msg(n > 0, "no completion within 30 s after %u of %u jobs", completed, JOBS);
        for (int k = 0; k < n; k++) {
            ck_assert_msg(cpl[k].status == 0, "job of matmul %llu: %s",
                          (unsigned long long)cpl[k].cookie, npv_strerror(cpl[k].status));
            ck_assert_uint_lt(cpl[k].cookie, MATMULS);
            unsigned i = (unsigned)cpl[k].cookie;
            wrong += rknpu_sample_mm_check(s[i]);
            busy[i] = false;
        }
        completed += (unsigned)n;
    }
    ck_assert_uint_eq(wrong, 0);

    struct npv_rknpu_counters after;
    npv_rknpu_counters(t.npu, &after);
    ck_assert_uint_eq(after.jobs - before.jobs, JOBS);
    ck_assert_uint_eq(after.timeouts, before.timeouts);
    ck_assert_uint_eq(after.resets, before.resets);
    /*
     * Domains cycle job after job and jobs start in submission order: every
     * job switches, the first one too (the device starts in the test's own
     * domain). Exactly JOBS switches (issue 22 section 4).
     */
    ck_assert_uint_eq(after.domain_switches - before.domain_switches, JOBS);
    printf("%u jobs over %u domains: %llu domain switches\n", JOBS, DOMAINS,
           (unsigned long long)(after.domain_switches - before.domain_switches));
    for (unsigned i = 0; i < MATMULS; i++)
        rknpu_sample_mm_free(s[i]);
    npv_rknpu_counters(t.npu, &after);
    ck_assert_uint_eq(after.domains_live, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rknpu_driver_stress");
    TCase *tc = tcase_create("stress");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, ten_thousand_jobs_cycling_over_five_domains_all_complete_exact);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}

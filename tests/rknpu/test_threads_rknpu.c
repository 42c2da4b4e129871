/* SPDX-License-Identifier: MIT */
/*
 * Many threads on one RKNPU (issue 24 item 1), against the model in a child
 * process: 4 threads share the driver through an npv_share, each with 8
 * int8 matmul jobs of its own in flight (buffers of its own, the driver
 * choosing the core), every output poisoned before its job and compared with
 * the CPU reference after it, every completion routed to its own ticket
 * once. 10,000 jobs per thread by default; NPUVFIO_THREADS_REQUESTS=100000
 * for the acceptance count.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "rk_drv.h"
#include "threads_run.h"

#define SLOTS (THREADS_N * THREADS_DEPTH)

static const struct rknpu_sample_shape SHAPE = {
    .dtype = NPV_RKNPU_INT8, .m = 4, .k = 32, .n = 32, .bias = true, .relu = true};

struct rkt {
    struct rk t;
    struct rknpu_sample_mm *s[SLOTS];
    struct npv_rknpu_job job[SLOTS]; /* what each slot's request points to */
};

static void prepare(void *dev, unsigned th, unsigned slot, uint64_t i, void *req)
{
    struct rkt *d = dev;
    unsigned k = th * THREADS_DEPTH + slot;
    rknpu_sample_mm_poison(d->s[k]);
    d->job[k] = (struct npv_rknpu_job){
        .tasks = &d->s[k]->task,
        .nr_tasks = 1,
        .core_mask = 0,
        .domain_id = 0,
        .timeout_ns = GENEROUS_NS,
        .cookie = i,
    };
    struct npv_rknpu_request q = {.job = &d->job[k]};
    memcpy(req, &q, sizeof(q));
}

static bool check(void *dev, unsigned th, unsigned slot, uint64_t i)
{
    struct rkt *d = dev;
    (void)i;
    return rknpu_sample_mm_check(d->s[th * THREADS_DEPTH + slot]) == 0;
}

START_TEST(four_threads_share_the_cores_exact_and_routed)
{
    static struct rkt d;
    rk_require_model("the run's size is set for the model");
    rk_open(&d.t, NULL);
    for (unsigned k = 0; k < SLOTS; k++)
        ck_assert_int_eq(rknpu_sample_mm_new(d.t.npu, &SHAPE, 0, 0, 900 + k, &d.s[k]), 0);
    struct threads_run run = {
        .ops = npv_rknpu_share_ops(),
        .drv = d.t.npu,
        .dev = &d,
        .depth = THREADS_DEPTH,
        .requests = threads_requests(10000),
        .req_size = sizeof(struct npv_rknpu_request),
        .wait_ns = GENEROUS_NS,
        .prepare = prepare,
        .check = check,
    };
    threads_run_all(&run);
    printf("rknpu: %u threads x %llu jobs, exact\n", THREADS_N, (unsigned long long)run.requests);
    for (unsigned k = 0; k < SLOTS; k++)
        rknpu_sample_mm_free(d.s[k]);
    rk_close(&d.t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("threads_rknpu");
    TCase *tc = tcase_create("threads");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, four_threads_share_the_cores_exact_and_routed);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

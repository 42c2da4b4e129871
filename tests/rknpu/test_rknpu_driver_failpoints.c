/* SPDX-License-Identifier: MIT */
/*
 * Acceptance 4 of issue 11: failure injection on domain creation and on
 * every allocation along mem_create and submit. For each class of call
 * (allocation, mmap, memfd, socket) and k = 1, 2, ... the kth call from
 * the start of "create buffers in a domain not yet created, submit a matmul
 * in it, wait, destroy" fails once: the step that met it fails (or the
 * library recovers), and afterwards the driver's domain and buffer counters,
 * the process's file descriptors and its memory mappings are back where
 * they started. The walk ends at the first k the sequence no longer reaches;
 * that run must succeed, exact.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>

#include <npuvfio/failpoint.h>

#include "npv_test.h"
#include "rk_drv.h"

static struct rk t;

static void setup(void)
{
    rk_open(&t, NULL);
}

static void teardown(void)
{
    rk_close(&t);
}

static const struct rknpu_sample_shape SHAPE = {
    .dtype = NPV_RKNPU_INT8, .m = 8, .k = 32, .n = 32, .bias = true, .relu = true};

struct outcome {
    int r;          /* the first failing step's error, or the job's status */
    uint64_t wrong; /* result elements off, when the job succeeded */
};

/* Domain 3 is not created before: its creation is part of the walk. */
static struct outcome sequence(void)
{
    struct outcome o = {0};
    struct rknpu_sample_mm *s = NULL;
    o.r = rknpu_sample_mm_new(t.npu, &SHAPE, 3, 0, 77, &s);
    if (o.r < 0)
        return o;
    struct npv_rknpu_job job = {.tasks = &s->task, .nr_tasks = 1, .core_mask = 0x2, .domain_id = 3};
    o.r = npv_rknpu_submit(t.npu, &job);
    if (o.r == 0) {
        struct npv_cpl cpl;
        int n = npv_rknpu_wait(t.npu, 1, GENEROUS_NS, &cpl, 1);
        ck_assert_int_eq(n, 1); /* a job always ends, failed or not */
        o.r = cpl.status;
        if (o.r == 0)
            o.wrong = rknpu_sample_mm_check(s);
    }
    rknpu_sample_mm_free(s);
    return o;
}

static void walk(enum npv_fail_class cls)
{
    const char *name = npv_failpoint_class_name(cls);
    unsigned failed = 0;
    for (uint64_t k = 1;; k++) {
        ck_assert_msg(k < 10000, "%s: the walk does not end", name);
        if (k > 1)
            rk_reopen(&t, NULL);
        struct npv_rknpu_counters c0;
        npv_rknpu_counters(t.npu, &c0);
        unsigned fds = rk_fd_count(), maps = rk_map_count();

        int ar = npv_failpoint_arm(t.ctx, cls, k);
        if (ar == -ENOTSUP) {
            rk_close(&t);
            printf("SKIPPED: built without NPUVFIO_FAILPOINTS\n");
            exit(77);
        }
        ck_assert_int_eq(ar, 0);
        struct outcome o = sequence();
        uint64_t calls = npv_failpoint_calls(t.ctx, cls);
        npv_failpoint_disarm(t.ctx);

        struct npv_rknpu_counters c1;
        npv_rknpu_counters(t.npu, &c1);
        ck_assert_msg(c1.domains_live == c0.domains_live && c1.mems_live == c0.mems_live &&
                          c1.mem_bytes == c0.mem_bytes,
                      "%s k=%llu (%s): domains %u -> %u, buffers %u -> %u", name,
                      (unsigned long long)k, npv_strerror(o.r), c0.domains_live, c1.domains_live,
                      c0.mems_live, c1.mems_live);
        ck_assert_msg(rk_fd_count() == fds, "%s k=%llu (%s): fds %u -> %u", name,
                      (unsigned long long)k, npv_strerror(o.r), fds, rk_fd_count());
        ck_assert_msg(rk_map_count() == maps, "%s k=%llu (%s): mappings %u -> %u", name,
                      (unsigned long long)k, npv_strerror(o.r), maps, rk_map_count());
        if (o.r == 0)
            ck_assert_uint_eq(o.wrong, 0);
        else
            failed++;
        rk_close_client(&t);
        if (calls < k) {
            /* The armed call was never reached: the sequence ran without a failure. */
            ck_assert_msg(o.r == 0, "%s: unarmed run failed: %s", name, npv_strerror(o.r));
            printf("%s: %llu calls along the sequence, %u failures injected made it fail, all "
                   "released\n",
                   name, (unsigned long long)calls, failed);
            break;
        }
    }
    rk_reopen(&t, NULL); /* for teardown */
}

START_TEST(every_allocation_failure_along_mem_create_and_submit_releases_everything)
{
    walk(NPV_FAIL_ALLOC);
}
END_TEST

START_TEST(every_mmap_failure_along_mem_create_and_submit_releases_everything)
{
    walk(NPV_FAIL_MMAP);
}
END_TEST

START_TEST(every_memfd_failure_along_mem_create_and_submit_releases_everything)
{
    walk(NPV_FAIL_MEMFD);
}
END_TEST

START_TEST(every_socket_failure_along_mem_create_and_submit_releases_everything)
{
    walk(NPV_FAIL_SOCKET);
}
END_TEST

int main(void)
{
    rk_require_model("the walk reconnects to the device hundreds of times");
    Suite *s = suite_create("rknpu_driver_failpoints");
    TCase *tc = tcase_create("failpoints");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, every_allocation_failure_along_mem_create_and_submit_releases_everything);
    tcase_add_test(tc, every_mmap_failure_along_mem_create_and_submit_releases_everything);
    tcase_add_test(tc, every_memfd_failure_along_mem_create_and_submit_releases_everything);
    tcase_add_test(tc, every_socket_failure_along_mem_create_and_submit_releases_everything);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}

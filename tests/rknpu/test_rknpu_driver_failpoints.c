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
 * that run must succeed, exact. The same walk over the owner's sequence
 * (issue 27): claim a domain, wrap client memory at a fixed IOVA, run a list
 * laid out there, unwrap, release; for allocations, mmap and memfd only: a
 * failed socket call ends the vfio-user connection, and a wrapped buffer's
 * unmap then fails for good, so by npv_rknpu_mem_unwrap's contract (the
 * mapping is kept while it cannot be undone) the caller's memory and its
 * domain stay.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <npuvfio/failpoint.h>

#include "npv_test.h"
#include "regcmd.h"
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

/*
 * The owner's sequence (issue 27): claim domain 3, wrap client memory at a
 * fixed IOVA, lay a matmul list out in it (A and B zero, so C must come
 * back all zeros over its poison), run it laid out, unwrap, release.
 */
static struct outcome laid_out_sequence(void)
{
    struct outcome o = {0};
    const npv_iova_t at = 0x20000000u;
    const struct npv_rknpu_matmul mm = {.dtype = NPV_RKNPU_INT8,
                                        .m = 8,
                                        .k = 32,
                                        .n = 32,
                                        .a = at + 4096,
                                        .b = at + 8192,
                                        .c = at + 16384};
    struct npv_dma *dma = NULL;
    struct npv_rknpu_mem *mem = NULL;
    o.r = npv_rknpu_domain_claim(t.npu, 3);
    if (o.r < 0)
        return o;
    const struct npv_dma_opts opts = {.page = NPV_DMA_PAGE_4K, .numa_node = -1};
    o.r = npv_dma_alloc(t.ctx, 65536, &opts, &dma);
    if (o.r < 0)
        goto out_claim;
    o.r = npv_rknpu_mem_wrap_at(t.npu, dma, 3, at, &mem);
    if (o.r < 0)
        goto out_dma;
    uint8_t *va = npv_dma_vaddr(dma);
    memset(va, 0, 16384);
    memset(va + 16384, 0x5a, (size_t)mm.m * mm.n * 4u);
    uint64_t *list = (uint64_t *)va;
    struct npv_rknpu_task task;
    int n = npv_rknpu_matmul_task(&mm, list, NPV_RKNPU_MATMUL_MAX_WORDS, &task);
    ck_assert_int_gt(n, 0);
    uint32_t w = (uint32_t)n;
    if ((w + RKNPU_TRAILER_WORDS) % 2u != 0)
        list[w++] = 0;
    rknpu_trailer_end(&list[w], task.enable_mask);
    w += RKNPU_TRAILER_WORDS;
    npv_dma_sync_for_device(dma, 0, 65536);
    const struct npv_rknpu_laid_out_job job = {.regcmd_iova = at,
                                               .amount = rknpu_regcmd_amount(w),
                                               .nr_tasks = 1,
                                               .done_mask = RKNPU_INT_DPU_DONE,
                                               .core_mask = 0x2,
                                               .domain_id = 3};
    o.r = npv_rknpu_submit_laid_out(t.npu, &job);
    if (o.r == 0) {
        struct npv_cpl cpl;
        ck_assert_int_eq(npv_rknpu_wait(t.npu, 1, GENEROUS_NS, &cpl, 1), 1);
        o.r = cpl.status;
        npv_dma_sync_for_cpu(dma, 16384, (size_t)mm.m * mm.n * 4u);
        const int32_t *c = (const int32_t *)(va + 16384);
        for (uint32_t i = 0; o.r == 0 && i < mm.m * mm.n; i++)
            o.wrong += c[i] != 0;
    }
    /* An unmap the injection failed keeps the mapping (npv_rknpu_mem_unwrap): retried once. */
    int u = npv_rknpu_mem_unwrap(mem);
    if (u < 0)
        u = npv_rknpu_mem_unwrap(mem);
    ck_assert_msg(u == 0, "unwrap: %s", npv_strerror(u));
out_dma:
    npv_dma_free(dma);
out_claim:
    ck_assert_int_eq(npv_rknpu_domain_release(t.npu, 3), 0);
    return o;
}

static void walk(enum npv_fail_class cls, struct outcome (*run)(void))
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
        struct outcome o = run();
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
    walk(NPV_FAIL_ALLOC, sequence);
}
END_TEST

START_TEST(every_allocation_failure_along_claim_wrap_at_and_a_laid_out_job_releases_everything)
{
    walk(NPV_FAIL_ALLOC, laid_out_sequence);
}
END_TEST

START_TEST(every_mmap_failure_along_mem_create_and_submit_releases_everything)
{
    walk(NPV_FAIL_MMAP, sequence);
}
END_TEST

START_TEST(every_mmap_failure_along_claim_wrap_at_and_a_laid_out_job_releases_everything)
{
    walk(NPV_FAIL_MMAP, laid_out_sequence);
}
END_TEST

START_TEST(every_memfd_failure_along_mem_create_and_submit_releases_everything)
{
    walk(NPV_FAIL_MEMFD, sequence);
}
END_TEST

START_TEST(every_memfd_failure_along_claim_wrap_at_and_a_laid_out_job_releases_everything)
{
    walk(NPV_FAIL_MEMFD, laid_out_sequence);
}
END_TEST

START_TEST(every_socket_failure_along_mem_create_and_submit_releases_everything)
{
    walk(NPV_FAIL_SOCKET, sequence);
}
END_TEST

int main(void)
{
    rk_require_model("the walk reconnects to the device hundreds of times");
    Suite *s = suite_create("rknpu_driver_failpoints");
    TCase *tc = tcase_create("failpoints");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, every_allocation_failure_along_mem_create_and_submit_releases_everything);
    tcase_add_test(
        tc, every_allocation_failure_along_claim_wrap_at_and_a_laid_out_job_releases_everything);
    tcase_add_test(tc, every_mmap_failure_along_mem_create_and_submit_releases_everything);
    tcase_add_test(tc,
                   every_mmap_failure_along_claim_wrap_at_and_a_laid_out_job_releases_everything);
    tcase_add_test(tc, every_memfd_failure_along_mem_create_and_submit_releases_everything);
    tcase_add_test(tc,
                   every_memfd_failure_along_claim_wrap_at_and_a_laid_out_job_releases_everything);
    tcase_add_test(tc, every_socket_failure_along_mem_create_and_submit_releases_everything);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}

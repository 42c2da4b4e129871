/* SPDX-License-Identifier: MIT */
/*
 * Many threads on one test device (issue 24 item 1): 4 threads share the
 * device's ring through an npv_share, each with 8 COPY jobs of its own in
 * flight; every completion reaches the thread that submitted it, once, with
 * the bytes the CPU wrote copied exactly. The model runs in a child process.
 * 100,000 requests per thread (the acceptance count, ~7 s here);
 * NPUVFIO_THREADS_REQUESTS sets another.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include <npuvfio/testdev.h>

#include "harness.h"
#include "threads_run.h"

#define JOB_BYTES 64u
#define SLOTS     (THREADS_N * THREADS_DEPTH)

struct tdt {
    struct td t;
    struct npv_dma *buf; /* per slot: src at 2*k*JOB_BYTES, dst after it */
    npv_iova_t iova;
};

static uint8_t byte_of(unsigned th, uint64_t i, unsigned j)
{
    return (uint8_t)(i * 131u + j * 7u + th * 17u + 1u);
}

static uint8_t *slot_mem(struct tdt *d, unsigned th, unsigned slot, bool dst)
{
    size_t k = (size_t)th * THREADS_DEPTH + slot;
    return (uint8_t *)npv_dma_vaddr(d->buf) + (2 * k + (dst ? 1 : 0)) * JOB_BYTES;
}

static void prepare(void *dev, unsigned th, unsigned slot, uint64_t i, void *req)
{
    struct tdt *d = dev;
    uint8_t *src = slot_mem(d, th, slot, false), *dst = slot_mem(d, th, slot, true);
    for (unsigned j = 0; j < JOB_BYTES; j++)
        src[j] = byte_of(th, i, j);
    memset(dst, 0, JOB_BYTES);
    size_t k = (size_t)th * THREADS_DEPTH + slot;
    struct npv_testdev_desc desc = npv_testdev_copy(d->iova + (2 * k + 1) * JOB_BYTES,
                                                    d->iova + 2 * k * JOB_BYTES, JOB_BYTES, 0);
    memcpy(req, &desc, sizeof(desc));
}

static bool check(void *dev, unsigned th, unsigned slot, uint64_t i)
{
    const uint8_t *dst = slot_mem(dev, th, slot, true);
    for (unsigned j = 0; j < JOB_BYTES; j++)
        if (dst[j] != byte_of(th, i, j))
            return false;
    return true;
}

START_TEST(four_threads_share_one_ring_with_no_lost_or_duplicated_completion)
{
    struct vu_server srv;
    struct tdt d;
    vu_server_start(&srv, vu_serve_testdev, NULL);
    td_open(&d.t, srv.path);
    struct npv_testdev_config cfg = {.entries = 256, .job_timeout_ns = GENEROUS_NS};
    ck_assert_int_eq(npv_testdev_open(d.t.dev, &cfg, &d.t.drv), 0);
    ck_assert_int_eq(npv_dma_alloc(d.t.ctx, 2 * SLOTS * JOB_BYTES, NULL, &d.buf), 0);
    ck_assert_int_eq(npv_dma_map(d.buf, d.t.dom, NPV_DMA_RW, &d.iova), 0);
    struct threads_run run = {
        .ops = npv_testdev_share_ops(),
        .drv = d.t.drv,
        .dev = &d,
        .depth = THREADS_DEPTH,
        .requests = threads_requests(100000),
        .req_size = sizeof(struct npv_testdev_desc),
        .wait_ns = GENEROUS_NS,
        .prepare = prepare,
        .check = check,
    };
    threads_run_all(&run);
    printf("testdev: %u threads x %llu requests, exact\n", THREADS_N,
           (unsigned long long)run.requests);
    npv_dma_unmap(d.buf, d.t.dom);
    npv_dma_free(d.buf);
    td_close(&d.t);
    vu_server_kill(&srv);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("threads_testdev");
    TCase *tc = tcase_create("threads");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, four_threads_share_one_ring_with_no_lost_or_duplicated_completion);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

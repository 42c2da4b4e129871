/* SPDX-License-Identifier: MIT */
/* Opening and closing a vfio-user device, with everything a driver takes, leaks nothing. */
#include <check.h>

#include <npuvfio/irq.h>

#include "harness.h"

static struct vu_server srv;

static void setup(void)
{
    vu_server_start(&srv, vu_serve_testdev, NULL);
}

static void teardown(void)
{
    vu_server_kill(&srv);
}

/* One driver lifetime: open, map a buffer, route the IRQ, run a job, release all. */
static void cycle(void)
{
    struct td t;
    td_open(&t, srv.path);
    td_enable(&t, true);
    struct npv_irq_waitset *ws;
    ck_assert_int_eq(npv_irq_waitset_new(t.ctx, 2, &ws), 0);
    ck_assert_int_eq(npv_irq_waitset_add(ws, npv_testdev_irq(t.drv), 0, 1), 0);
    struct npv_dma *buf;
    npv_iova_t iova;
    ck_assert_int_eq(npv_dma_alloc(t.ctx, 4096, NULL, &buf), 0);
    ck_assert_int_eq(npv_dma_map(buf, t.dom, NPV_DMA_RW, &iova), 0);
    struct npv_testdev_desc d = npv_testdev_fill(iova, 3, 64, NPV_TESTDEV_DESC_IRQ);
    td_submit(&t, &d);
    uint64_t cookie;
    ck_assert_int_eq(npv_irq_waitset_wait(ws, GENEROUS_NS, &cookie, 1), 1);
    struct npv_cpl c;
    ck_assert_int_eq(td_wait(&t, GENEROUS_NS, &c), 0);
    ck_assert_int_eq(c.status, 0);
    ck_assert_uint_eq(((uint8_t *)npv_dma_vaddr(buf))[63], 3);
    npv_irq_waitset_free(ws);
    npv_dma_free(buf);
    td_close(&t);
}

START_TEST(open_close_cycles_leak_no_fd_and_no_mapping)
{
    /* The first cycle creates what a process keeps (a thread arena, the log's state). */
    cycle();
    int fds = count_fds(), maps = count_maps();
    for (int i = 0; i < 20; i++)
        cycle();
    ck_assert_int_eq(count_fds(), fds);
    ck_assert_int_le(count_maps(), maps + MAPS_SLACK);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("vfio-user cycles");
    TCase *tc = tcase_create("cycles");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, open_close_cycles_leak_no_fd_and_no_mapping);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

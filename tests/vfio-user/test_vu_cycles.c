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

/* One driver lifetime: open, map BAR and buffers, route IRQs, run a job, release all. */
static void cycle(void)
{
    struct td t;
    td_open(&t, srv.path);
    struct npv_irq *irq;
    ck_assert_int_eq(npv_irq_enable(t.dev, NPV_IRQ_MSIX, TESTDEV_MSIX_VECTORS, &irq), 0);
    struct npv_irq_waitset *ws;
    ck_assert_int_eq(npv_irq_waitset_new(t.ctx, 2, &ws), 0);
    ck_assert_int_eq(npv_irq_waitset_add(ws, irq, 0, 1), 0);
    td_enable(&t, TESTDEV_CTRL_IRQ_ENABLE);
    struct npv_testdev_desc d = {.opcode = NPV_TESTDEV_OP_FILL,
                             .flags = NPV_TESTDEV_DESC_IRQ,
                             .dst = t.status_iova + 1024,
                             .len = 64,
                             .pattern = 3};
    td_submit(&t, &d);
    uint64_t cookie;
    ck_assert_int_eq(npv_irq_waitset_wait(ws, GENEROUS_NS, &cookie, 1), 1);
    ck_assert_int_eq(td_wait(&t, GENEROUS_NS), 0);
    ck_assert_uint_eq(td_status(&t)->error, NPV_TESTDEV_ERR_NONE);
    npv_irq_waitset_free(ws);
    npv_irq_disable(irq);
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

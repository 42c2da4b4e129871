/* SPDX-License-Identifier: MIT */
/*
 * The completion fd (issue 24 item 4) against the testdev model's MSI-X over
 * vfio-user: an epoll loop is woken when completions wait, stays woken
 * (level-triggered) while some are left unreaped, and is not woken when
 * none wait.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <npuvfio/ring.h>

#include "harness.h"

static struct vu_server srv;
static struct td t;
static struct npv_ring *ring;
static int ep = -1;

static void setup(void)
{
    vu_server_start(&srv, vu_serve_testdev, NULL);
    td_open(&t, srv.path);
    td_enable(&t, true);
    ring = t.ring;
    int fd = npv_ring_completion_fd(ring);
    ck_assert_int_ge(fd, 0);
    ep = epoll_create1(EPOLL_CLOEXEC);
    ck_assert_int_ge(ep, 0);
    struct epoll_event ev = {.events = EPOLLIN};
    ck_assert_int_eq(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
}

static void teardown(void)
{
    close(ep);
    ring = NULL;
    td_close(&t);
    vu_server_kill(&srv);
}

/* Whether epoll reports the fd readable within timeout_ms. */
static int ready(int timeout_ms)
{
    struct epoll_event ev;
    int n = epoll_wait(ep, &ev, 1, timeout_ms);
    ck_assert_int_ge(n, 0);
    return n;
}

START_TEST(epoll_wakes_exactly_while_completions_wait)
{
    const struct npv_testdev_desc d = {.opcode = NPV_TESTDEV_OP_NOP, .flags = NPV_TESTDEV_DESC_IRQ};
    /* Nothing submitted: nothing to wake for. */
    ck_assert_int_eq(ready(0), 0);
    ck_assert_int_eq(ready(20), 0);
    uint64_t cookie = 0;
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < 3; i++)
            ck_assert_int_eq(npv_ring_push(ring, &d, cookie + (uint64_t)i), 0);
        npv_ring_submit(ring);
        unsigned got = 0, empty = 0;
        while (got < 3) {
            /* Jobs are in flight or waiting: the loop is always woken, never left asleep. */
            ck_assert_int_eq(ready(30000), 1);
            struct npv_cpl c;
            int n = npv_ring_reap_fd(ring, &c, 1);
            ck_assert_int_ge(n, 0);
            if (n == 0) {
                empty++;
                continue;
            }
            ck_assert_uint_eq(c.cookie, cookie + got);
            ck_assert_int_eq(c.status, 0);
            got++;
            /* Every job the device finished is collected: the rest wait, so it stays readable. */
            if (got < 3 && npv_ring_in_flight(ring) == 0)
                ck_assert_msg(ready(0) == 1, "level-triggered: %u completions left unreaped",
                              3 - got);
        }
        /* An interrupt of a job collected early may still come: an empty reap per such interrupt (a
         * late one of the round before included). */
        ck_assert_uint_le(empty, 6);
        while (ready(50) == 1)
            ck_assert_int_eq(npv_ring_reap_fd(ring, &(struct npv_cpl){0}, 1), 0);
        /* Nothing waits: no wake-up. */
        ck_assert_int_eq(ready(0), 0);
        cookie += 3;
    }
    /* The polled path still works on the same ring. */
    ck_assert_int_eq(npv_ring_push(ring, &d, 999), 0);
    npv_ring_submit(ring);
    struct npv_cpl c;
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 1, GENEROUS_NS, &c, 1), 1);
    ck_assert_uint_eq(c.cookie, 999);
}
END_TEST

START_TEST(a_ring_without_an_interrupt_has_no_completion_fd)
{
    struct vu_server s2;
    struct td t2;
    vu_server_start(&s2, vu_serve_testdev, NULL);
    td_open(&t2, s2.path);
    td_enable(&t2, false);
    ck_assert_int_eq(npv_ring_completion_fd(t2.ring), -EINVAL);
    struct npv_cpl c;
    ck_assert_int_eq(npv_ring_reap_fd(t2.ring, &c, 1), -EINVAL);
    td_close(&t2);
    vu_server_kill(&s2);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("completion_fd");
    TCase *tc = tcase_create("epoll");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, epoll_wakes_exactly_while_completions_wait);
    suite_add_tcase(s, tc);
    tc = tcase_create("no_irq");
    tcase_add_test(tc, a_ring_without_an_interrupt_has_no_completion_fd);
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

/* SPDX-License-Identifier: MIT */
/*
 * Interrupt vectors and wait sets, with plain eventfds standing in for the
 * device: what SET_IRQS the layer asks the transport for, counters, and
 * deadlines that expire.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <npuvfio/irq.h>

#include "dev_internal.h"
#include "irq_internal.h"

#define MS 1000000ull
/* Long enough never to expire on a loaded machine; the test never waits it out. */
#define GENEROUS (30000 * MS)

static void fire(int fd, uint64_t n)
{
    ck_assert_int_eq(write(fd, &n, sizeof(n)), (ssize_t)sizeof(n));
}

static int new_efd(void)
{
    int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    ck_assert_int_ge(fd, 0);
    return fd;
}

START_TEST(waitset_reports_the_vector_that_fired)
{
    struct npv_irq_waitset *ws;
    ck_assert_int_eq(npv_irq_waitset_new(NULL, 4, &ws), 0);
    int fds[3];
    for (int i = 0; i < 3; i++) {
        fds[i] = new_efd();
        ck_assert_int_eq(npv_irq_waitset_add_fd(ws, fds[i], 100 + (uint64_t)i), 0);
    }
    fire(fds[2], 1);
    uint64_t cookies[4];
    ck_assert_int_eq(npv_irq_waitset_wait(ws, GENEROUS, cookies, 4), 1);
    ck_assert_uint_eq(cookies[0], 102);
    /* The counter was consumed: the next wait times out. */
    ck_assert_int_eq(npv_irq_waitset_wait(ws, 20 * MS, cookies, 4), -ETIMEDOUT);
    npv_irq_waitset_free(ws);
    for (int i = 0; i < 3; i++)
        close(fds[i]);
}
END_TEST

START_TEST(waitset_times_out_when_nothing_fires)
{
    struct npv_irq_waitset *ws;
    ck_assert_int_eq(npv_irq_waitset_new(NULL, 2, &ws), 0);
    int a = new_efd(), b = new_efd();
    ck_assert_int_eq(npv_irq_waitset_add_fd(ws, a, 1), 0);
    ck_assert_int_eq(npv_irq_waitset_add_fd(ws, b, 2), 0);
    uint64_t cookie;
    ck_assert_int_eq(npv_irq_waitset_wait(ws, 30 * MS, &cookie, 1), -ETIMEDOUT);
    /* A zero deadline is a poll: still a timeout, never a hang. */
    ck_assert_int_eq(npv_irq_waitset_wait(ws, 0, &cookie, 1), -ETIMEDOUT);
    npv_irq_waitset_free(ws);
    close(a);
    close(b);
}
END_TEST

START_TEST(waitset_keeps_what_did_not_fit_for_the_next_wait)
{
    struct npv_irq_waitset *ws;
    ck_assert_int_eq(npv_irq_waitset_new(NULL, 2, &ws), 0);
    int a = new_efd(), b = new_efd();
    ck_assert_int_eq(npv_irq_waitset_add_fd(ws, a, 1), 0);
    ck_assert_int_eq(npv_irq_waitset_add_fd(ws, b, 2), 0);
    fire(a, 1);
    fire(b, 1);
    uint64_t c1, c2;
    /* Both may need two waits to show up (polls complete one by one); neither is lost. */
    uint64_t seen = 0;
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(npv_irq_waitset_wait(ws, GENEROUS, &c1, 1), 1);
        seen |= 1u << c1;
    }
    ck_assert_uint_eq(seen, (1u << 1) | (1u << 2));
    ck_assert_int_eq(npv_irq_waitset_wait(ws, 10 * MS, &c2, 1), -ETIMEDOUT);
    npv_irq_waitset_free(ws);
    close(a);
    close(b);
}
END_TEST

struct delayed {
    int fd;
    unsigned delay_ms;
};

static void *fire_later(void *arg)
{
    struct delayed *d = arg;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)d->delay_ms * 1000000};
    nanosleep(&ts, NULL);
    uint64_t one = 1;
    ssize_t n = write(d->fd, &one, sizeof(one));
    (void)n;
    return NULL;
}

START_TEST(waitset_wakes_for_a_vector_firing_during_the_wait)
{
    struct npv_irq_waitset *ws;
    ck_assert_int_eq(npv_irq_waitset_new(NULL, 8, &ws), 0);
    int fds[8];
    for (int i = 0; i < 8; i++) {
        fds[i] = new_efd();
        ck_assert_int_eq(npv_irq_waitset_add_fd(ws, fds[i], (uint64_t)i), 0);
    }
    struct delayed d = {.fd = fds[5], .delay_ms = 30};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, fire_later, &d), 0);
    uint64_t cookies[8];
    ck_assert_int_eq(npv_irq_waitset_wait(ws, GENEROUS, cookies, 8), 1);
    ck_assert_uint_eq(cookies[0], 5);
    pthread_join(t, NULL);
    /* Polls still armed from that wait keep working for the next one. */
    fire(fds[0], 1);
    ck_assert_int_eq(npv_irq_waitset_wait(ws, GENEROUS, cookies, 8), 1);
    ck_assert_uint_eq(cookies[0], 0);
    npv_irq_waitset_free(ws);
    for (int i = 0; i < 8; i++)
        close(fds[i]);
}
END_TEST

START_TEST(waitset_refuses_more_entries_than_its_size)
{
    struct npv_irq_waitset *ws;
    ck_assert_int_eq(npv_irq_waitset_new(NULL, 1, &ws), 0);
    int a = new_efd(), b = new_efd();
    ck_assert_int_eq(npv_irq_waitset_add_fd(ws, a, 1), 0);
    ck_assert_int_eq(npv_irq_waitset_add_fd(ws, b, 2), -ENOSPC);
    uint64_t c;
    ck_assert_int_eq(npv_irq_waitset_wait(ws, 0, NULL, 1), -EINVAL);
    ck_assert_int_eq(npv_irq_waitset_wait(ws, 0, &c, 0), -EINVAL);
    npv_irq_waitset_free(ws);
    npv_irq_waitset_free(NULL);
    ck_assert_int_eq(npv_irq_waitset_new(NULL, 0, &ws), -EINVAL);
    close(a);
    close(b);
}
END_TEST

START_TEST(eventfd_wait_returns_the_count_or_times_out)
{
    int fd = new_efd();
    ck_assert_int_eq(npv_eventfd_wait(fd, 20 * MS), -ETIMEDOUT);
    fire(fd, 3);
    ck_assert_int_eq(npv_eventfd_wait(fd, GENEROUS), 3);
    ck_assert_int_eq(npv_eventfd_wait(fd, 0), -ETIMEDOUT);
    close(fd);
}
END_TEST

/* ---- npv_irq over a transport that records SET_IRQS ---- */

struct rec {
    uint32_t index, flags, start, count;
    int fds[8];
    unsigned calls;
};

static int r_get_info(struct npv_dev *dev, struct npv_dev_info *info)
{
    (void)dev;
    memset(info, 0, sizeof(*info));
    info->num_irqs = 5;
    return 0;
}

static int r_irq_info(struct npv_dev *dev, uint32_t index, struct npv_irq_info *info)
{
    (void)dev;
    info->index = index;
    info->flags = NPV_IRQ_INFO_EVENTFD | NPV_IRQ_INFO_MASKABLE;
    info->count = index == NPV_IRQ_MSIX ? 4 : 0;
    return 0;
}

static int r_set_irqs(struct npv_dev *dev, uint32_t index, uint32_t flags, uint32_t start,
                      uint32_t count, const int32_t *fds)
{
    struct rec *r = dev->priv;
    r->index = index;
    r->flags = flags;
    r->start = start;
    r->count = count;
    r->calls++;
    for (uint32_t i = 0; fds != NULL && i < count && i < 8; i++)
        r->fds[i] = fds[i];
    return 0;
}

static void r_close(struct npv_dev *dev)
{
    (void)dev;
}

static const struct npv_dev_ops rec_ops = {
    .get_info = r_get_info,
    .irq_info = r_irq_info,
    .set_irqs = r_set_irqs,
    .close = r_close,
};

START_TEST(irq_enable_routes_vectors_to_eventfds_and_disable_clears_them)
{
    struct npv_ctx *ctx;
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    struct rec r = {0};
    struct npv_dev *dev = npv_dev_alloc(ctx, &rec_ops, NPV_TRANSPORT_VFIO_USER, "rec", NULL);
    ck_assert_ptr_nonnull(dev);
    dev->priv = &r;

    struct npv_irq *irq;
    ck_assert_int_eq(npv_irq_enable(dev, NPV_IRQ_MSIX, 5, &irq), -EINVAL);
    ck_assert_int_eq(npv_irq_enable(dev, NPV_IRQ_MSIX, 2, &irq), 0);
    ck_assert_uint_eq(r.index, NPV_IRQ_MSIX);
    ck_assert_uint_eq(r.flags, NPV_IRQ_SET_DATA_EVENTFD | NPV_IRQ_SET_ACTION_TRIGGER);
    ck_assert_uint_eq(r.start, 0);
    ck_assert_uint_eq(r.count, 2);
    ck_assert_int_eq(r.fds[1], npv_irq_fd(irq, 1));
    ck_assert_uint_eq(npv_irq_count(irq), 2);

    fire(npv_irq_fd(irq, 1), 2);
    ck_assert_int_eq(npv_irq_wait(irq, 1, GENEROUS), 2);
    ck_assert_int_eq(npv_irq_wait(irq, 0, 10 * MS), -ETIMEDOUT);
    ck_assert_int_eq(npv_irq_wait(irq, 2, 0), -EINVAL);

    ck_assert_int_eq(npv_irq_mask(irq, 1), 0);
    ck_assert_uint_eq(r.flags, NPV_IRQ_SET_DATA_NONE | NPV_IRQ_SET_ACTION_MASK);
    ck_assert_uint_eq(r.start, 1);
    ck_assert_uint_eq(r.count, 1);
    ck_assert_int_eq(npv_irq_unmask(irq, 1), 0);
    ck_assert_uint_eq(r.flags, NPV_IRQ_SET_DATA_NONE | NPV_IRQ_SET_ACTION_UNMASK);

    npv_irq_disable(irq);
    ck_assert_uint_eq(r.flags, NPV_IRQ_SET_DATA_NONE | NPV_IRQ_SET_ACTION_TRIGGER);
    ck_assert_uint_eq(r.count, 0);
    npv_irq_disable(NULL);
    npv_dev_close(dev);
    npv_ctx_free(ctx);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("irq");
    TCase *tc = tcase_create("waitset");
    tcase_add_test(tc, waitset_reports_the_vector_that_fired);
    tcase_add_test(tc, waitset_times_out_when_nothing_fires);
    tcase_add_test(tc, waitset_keeps_what_did_not_fit_for_the_next_wait);
    tcase_add_test(tc, waitset_wakes_for_a_vector_firing_during_the_wait);
    tcase_add_test(tc, waitset_refuses_more_entries_than_its_size);
    tcase_add_test(tc, eventfd_wait_returns_the_count_or_times_out);
    suite_add_tcase(s, tc);
    tc = tcase_create("vectors");
    tcase_add_test(tc, irq_enable_routes_vectors_to_eventfds_and_disable_clears_them);
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

/* SPDX-License-Identifier: MIT */
/*
 * Interrupt waits against the fake device, which raises its MSI (writes the
 * vector's eventfd) after each status write: an interrupt left over from a
 * job already collected never ends a later wait early.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <npuvfio/ring.h>

#include "fake_dev.h"
#include "fake_irq.h"

#define LONG_NS  (10ull * 1000000000ull)
#define SHORT_NS (20ull * 1000000ull) /* a wait that is meant to run out */

static struct npv_ctx *ctx;
static struct fake_dev dev;
static struct fake_irq fi;
static struct npv_ring_config cfg;
static struct npv_ring *ring;

static void quiet_log(void *user, enum npv_log_level level, const char *msg)
{
    (void)user;
    (void)level;
    (void)msg;
}

static void setup(void)
{
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    npv_ctx_set_log_sink(ctx, quiet_log, NULL);
    ck_assert_int_eq(fake_irq_open(ctx, &fi), 0);
    fake_dev_init(&dev, 64, &cfg);
    dev.irq_fd = npv_irq_fd(fi.irq, 0);
    cfg.irq = fi.irq;
    cfg.irq_vec = 0;
    cfg.spin_ns = 1000; /* hybrid: spin briefly, then sleep */
    ck_assert_int_eq(npv_ring_new(ctx, &cfg, &ring), 0);
}

static void teardown(void)
{
    npv_ring_free(ring);
    ring = NULL;
    fake_dev_fini(&dev);
    fake_irq_close(&fi);
    npv_ctx_free(ctx);
}

static void push(uint64_t seq)
{
    void *slot;
    ck_assert_int_eq(npv_ring_next(ring, seq, &slot), 0);
    struct fake_desc *d = slot;
    memset(d, 0, sizeof(*d));
    d->seq = seq;
    ck_assert_int_eq(npv_ring_submit(ring), 1);
}

/*
 * Job A completes and raises its interrupt, but is collected by a poll that
 * never reads the eventfd; job B is then waited for and does not complete.
 */
static void stale_interrupt_then_wait(enum npv_ring_wait_mode mode)
{
    struct npv_cpl cpl[4];
    push(0);
    ck_assert_uint_eq(fake_dev_step(&dev, UINT32_MAX), 1);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 4), 1);
    ck_assert_uint_eq(cpl[0].cookie, 0);
    push(1);
    struct npv_ring_stats before, after;
    npv_ring_stats(ring, &before);
    /* A's interrupt must not end B's wait: it runs out with nothing, and harms nothing. */
    ck_assert_int_eq(npv_ring_wait(ring, mode, 1, SHORT_NS, cpl, 4), 0);
    npv_ring_stats(ring, &after);
    ck_assert_uint_eq(npv_ring_in_flight(ring), 1);
    ck_assert_uint_eq(dev.resets, 0);
    /* One sleep, to the wait's end: the stale count was drained, not slept on. */
    ck_assert_uint_eq(after.irq_sleeps - before.irq_sleeps, 1);
    /* B completes: its own interrupt ends the next wait with B. */
    ck_assert_uint_eq(fake_dev_step(&dev, UINT32_MAX), 1);
    ck_assert_int_eq(npv_ring_wait(ring, mode, 1, LONG_NS, cpl, 4), 1);
    ck_assert_uint_eq(cpl[0].cookie, 1);
    ck_assert_int_eq(cpl[0].status, 0);
    ck_assert_uint_eq(dev.bad_descs, 0);
}

START_TEST(irq_wait_is_not_ended_by_an_earlier_jobs_interrupt)
{
    stale_interrupt_then_wait(NPV_RING_WAIT_IRQ);
}
END_TEST

START_TEST(hybrid_wait_is_not_ended_by_an_earlier_jobs_interrupt)
{
    stale_interrupt_then_wait(NPV_RING_WAIT_HYBRID);
}
END_TEST

START_TEST(irq_wait_round_trips_with_device_thread)
{
    struct npv_cpl cpl[4];
    ck_assert_int_eq(fake_dev_start(&dev), 0);
    uint64_t bad = 0;
    for (uint64_t i = 0; i < 2000; i++) {
        push(i);
        int got = npv_ring_wait(ring, i % 2 ? NPV_RING_WAIT_HYBRID : NPV_RING_WAIT_IRQ, 1, LONG_NS,
                                cpl, 4);
        bad += got != 1 || cpl[0].cookie != i || cpl[0].status != 0;
    }
    fake_dev_stop(&dev);
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_eq(dev.resets, 0);
}
END_TEST

START_TEST(irq_wait_fails_a_job_at_its_deadline_without_waiting_out_the_wait)
{
    /* The job's deadline is already past; the wait's own timeout is long. */
    struct npv_cpl cpl[4];
    void *slot;
    ck_assert_int_eq(npv_ring_next_timed(ring, 9, 1, &slot), 0);
    memset(slot, 0, sizeof(struct fake_desc));
    ck_assert_int_eq(npv_ring_submit(ring), 1);
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_IRQ, 1, LONG_NS, cpl, 4), 1);
    ck_assert_uint_eq(cpl[0].cookie, 9);
    ck_assert_int_eq(cpl[0].status, -ETIMEDOUT);
    ck_assert_uint_eq(dev.resets, 1);
}
END_TEST

/* The interrupt-wanted word: a granule of its own, as the engine requires. */
static _Alignas(128) uint32_t wanted[32];

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The device of a suppressing driver: it completes only once someone wants its interrupt. */
static void *complete_when_wanted(void *arg)
{
    (void)arg;
    uint64_t give_up = mono_ns() + 5000000000ull;
    while (__atomic_load_n(&wanted[0], __ATOMIC_ACQUIRE) == 0)
        if (mono_ns() > give_up)
            return NULL;
    fake_dev_step(&dev, UINT32_MAX);
    return NULL;
}

START_TEST(irq_wanted_word_is_set_only_while_a_wait_sleeps)
{
    /* Refused inside the status block's granule, or misaligned. */
    ck_assert_int_eq(npv_ring_set_irq_wanted(ring, (uint32_t *)(void *)dev.status + 4, NULL),
                     -EINVAL);
    ck_assert_int_eq(npv_ring_set_irq_wanted(ring, (uint32_t *)(void *)((char *)wanted + 2), NULL),
                     -EINVAL);
    wanted[0] = 7;
    ck_assert_int_eq(npv_ring_set_irq_wanted(ring, wanted, NULL), 0);
    ck_assert_uint_eq(wanted[0], 0);
    /* A completion found without sleeping leaves the word alone. */
    struct npv_cpl cpl[1];
    push(0);
    npv_ring_submit(ring);
    ck_assert_uint_eq(fake_dev_step(&dev, UINT32_MAX), 1);
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_IRQ, 1, LONG_NS, cpl, 1), 1);
    ck_assert_uint_eq(wanted[0], 0);
    /* A wait that must sleep sets it first, is woken, and clears it. */
    push(1);
    npv_ring_submit(ring);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, complete_when_wanted, NULL), 0);
    int got = npv_ring_wait(ring, NPV_RING_WAIT_HYBRID, 1, LONG_NS, cpl, 1);
    pthread_join(t, NULL);
    ck_assert_int_eq(got, 1);
    ck_assert_uint_eq(cpl[0].cookie, 1);
    ck_assert_uint_eq(wanted[0], 0);
    ck_assert_int_eq(npv_ring_set_irq_wanted(ring, NULL, NULL), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ring_irq");
    TCase *tc = tcase_create("irq");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, irq_wait_is_not_ended_by_an_earlier_jobs_interrupt);
    tcase_add_test(tc, hybrid_wait_is_not_ended_by_an_earlier_jobs_interrupt);
    tcase_add_test(tc, irq_wait_round_trips_with_device_thread);
    tcase_add_test(tc, irq_wait_fails_a_job_at_its_deadline_without_waiting_out_the_wait);
    tcase_add_test(tc, irq_wanted_word_is_set_only_while_a_wait_sleeps);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* SPDX-License-Identifier: MIT */
/*
 * The ring engine against a device shaped like the Edge TPU's instruction
 * queue (fake_edgetpu.h): a completed head masked to the ring size, a slot
 * doorbell (one slot always free) and a sticky fatal error word.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/ring.h>

#include "fake_edgetpu.h"

#define LONG_NS (10ull * 1000000000ull)

static struct npv_ctx *ctx;
static struct fake_etpu dev;
static struct npv_ring_config cfg;
static struct npv_ring *ring;
static uint64_t next_seq;

static void quiet_log(void *user, enum npv_log_level level, const char *msg)
{
    (void)user;
    (void)level;
    (void)msg;
}

static void open_ring(uint32_t entries)
{
    fake_etpu_init(&dev, entries, &cfg);
    ck_assert_int_eq(npv_ring_new(ctx, &cfg, &ring), 0);
    next_seq = 0;
}

static void setup(void)
{
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    npv_ctx_set_log_sink(ctx, quiet_log, NULL);
    open_ring(ETPU_ENTRIES);
}

static void teardown(void)
{
    npv_ring_free(ring);
    ring = NULL;
    fake_etpu_fini(&dev);
    npv_ctx_free(ctx);
}

static void reopen_ring(uint32_t entries)
{
    npv_ring_free(ring);
    fake_etpu_fini(&dev);
    open_ring(entries);
}

/* cookie = seq * 3 + 2; the descriptor carries seq as its address, which the fake checks. */
static int push_timed(uint64_t timeout_ns)
{
    void *slot;
    int rc = npv_ring_next_timed(ring, next_seq * 3 + 2, timeout_ns, &slot);
    if (rc < 0)
        return rc;
    struct etpu_desc *d = slot;
    d->address = next_seq;
    d->size_in_bytes = 64;
    d->reserved = 0;
    next_seq++;
    return 0;
}

static int push(void)
{
    return push_timed(0);
}

START_TEST(etpu_masked_head_wraps_a_million_times_in_order)
{
    /* An 8-entry queue (7 in flight) wraps every 8 jobs: 1M wraps in 8M jobs. */
    reopen_ring(8);
    const uint64_t wraps = 1u << 20;
    uint64_t reaped = 0, bad = 0, batch = 1;
    struct npv_cpl cpl[8];
    while (dev.wraps < wraps) {
        for (uint64_t i = 0; i < batch; i++)
            bad += push() != 0;
        bad += npv_ring_submit(ring) != (int)batch;
        /* Heads land mid-batch and on every slot, slot 0 included. */
        fake_etpu_step(&dev, (uint32_t)(batch / 2));
        fake_etpu_step(&dev, UINT32_MAX);
        int got = npv_ring_poll(ring, cpl, 8);
        bad += got != (int)batch;
        for (int i = 0; i < got; i++) {
            bad += cpl[i].cookie != reaped * 3 + 2 || cpl[i].status != 0;
            reaped++;
        }
        batch = batch % 7 + 1;
    }
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_eq(dev.status->fatal_error, 0); /* every tail was masked, every slot right */
    ck_assert_uint_eq(dev.resets, 0);
    ck_assert_uint_eq(npv_ring_in_flight(ring), 0);
    ck_assert_uint_ge(reaped, 8 * wraps - 8);
}
END_TEST

START_TEST(etpu_full_ring_holds_one_less_than_entries_and_its_tail_never_reads_empty)
{
    ck_assert_uint_eq(npv_ring_capacity(ring), ETPU_ENTRIES - 1);
    for (uint32_t i = 0; i < ETPU_ENTRIES - 1; i++)
        ck_assert_int_eq(push(), 0);
    ck_assert_int_eq(push(), -EAGAIN);
    ck_assert_int_eq(npv_ring_submit(ring), (int)ETPU_ENTRIES - 1);
    ck_assert_uint_eq(fake_etpu_tail(&dev), ETPU_ENTRIES - 1);
    ck_assert_uint_eq(fake_etpu_step(&dev, UINT32_MAX), ETPU_ENTRIES - 1);
    struct npv_cpl cpl[ETPU_ENTRIES];
    ck_assert_int_eq(npv_ring_poll(ring, cpl, ETPU_ENTRIES), (int)ETPU_ENTRIES - 1);
    /* The next lap: the tail wraps through slot 0 masked, and the head follows it. */
    for (uint32_t i = 0; i < 10; i++)
        ck_assert_int_eq(push(), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 10);
    ck_assert_uint_eq(fake_etpu_tail(&dev), (ETPU_ENTRIES - 1 + 10) % ETPU_ENTRIES);
    ck_assert_uint_eq(fake_etpu_step(&dev, UINT32_MAX), 10);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, ETPU_ENTRIES), 10);
    ck_assert_uint_eq(cpl[9].cookie, (ETPU_ENTRIES - 1 + 9) * 3 + 2);
    ck_assert_uint_eq(dev.status->fatal_error, 0);
}
END_TEST

/* Complete jobs until the device's masked head reads slot. */
static void advance_head_to(uint32_t slot)
{
    struct npv_cpl many[128];
    while (dev.status->completed_head != slot) {
        uint32_t k = (slot - dev.status->completed_head) & (ETPU_ENTRIES - 1);
        k = k > 120 ? 120 : k;
        for (uint32_t i = 0; i < k; i++)
            ck_assert_int_eq(push(), 0);
        ck_assert_int_eq(npv_ring_submit(ring), (int)k);
        fake_etpu_step(&dev, UINT32_MAX);
        ck_assert_int_eq(npv_ring_poll(ring, many, 128), (int)k);
    }
}

START_TEST(etpu_masked_head_beyond_what_was_announced_is_a_fault)
{
    /*
     * Head at slot 240, four more announced: the head may read 241..244. Past
     * the tail, across the wrap, backwards, and outside the ring are faults.
     */
    static const uint32_t wild[] = {245, 255, 3, 239, ETPU_ENTRIES, 0xffffffffu};
    struct npv_cpl cpl[8];
    for (size_t w = 0; w < sizeof(wild) / sizeof(wild[0]); w++) {
        advance_head_to(240);
        for (int i = 0; i < 4; i++)
            ck_assert_int_eq(push(), 0);
        ck_assert_int_eq(npv_ring_submit(ring), 4);
        fake_etpu_write_head(&dev, wild[w]);
        ck_assert_int_eq(npv_ring_poll(ring, cpl, 8), -NPV_EDEVFAULT);
        ck_assert_int_eq(npv_ring_poll(ring, cpl, 8), 4);
        ck_assert_int_eq(cpl[0].status, -NPV_EDEVFAULT);
        ck_assert_int_eq(cpl[3].status, -ECANCELED);
        ck_assert_uint_eq(dev.resets, w + 1);
    }
    /* The largest legal step still passes: all four at once. */
    advance_head_to(240);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(push(), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 4);
    fake_etpu_write_head(&dev, 244);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 8), 4);
    ck_assert_int_eq(cpl[3].status, 0);
}
END_TEST

START_TEST(etpu_head_that_wrapped_exactly_to_the_announced_tail_is_not_a_fault)
{
    /* 200 + 100 crosses slot 0: the head reads 44, less than before, and is right. */
    struct npv_cpl cpl[ETPU_ENTRIES];
    for (int i = 0; i < 200; i++)
        ck_assert_int_eq(push(), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 200);
    fake_etpu_step(&dev, UINT32_MAX);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, ETPU_ENTRIES), 200);
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(push(), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 100);
    fake_etpu_step(&dev, UINT32_MAX);
    ck_assert_uint_eq(dev.status->completed_head, 44);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, ETPU_ENTRIES), 100);
    ck_assert_int_eq(cpl[99].status, 0);
    ck_assert_uint_eq(dev.resets, 0);
}
END_TEST

START_TEST(etpu_fatal_error_fails_the_oldest_job_with_the_word_cancels_the_rest_and_resets)
{
    struct npv_cpl cpl[8];
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(push(), 0);
    dev.fatal_after = 3; /* two descriptors complete, then the queue faults */
    ck_assert_int_eq(npv_ring_submit(ring), 5);
    fake_etpu_step(&dev, UINT32_MAX);
    ck_assert_uint_eq(dev.status->fatal_error, ETPU_FATAL_INJECTED);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 8), 5);
    ck_assert_int_eq(cpl[0].status, 0);
    ck_assert_int_eq(cpl[1].status, 0);
    ck_assert_int_eq(cpl[2].status, -EIO);
    ck_assert_uint_eq(cpl[2].dev_error, ETPU_FATAL_INJECTED);
    ck_assert_uint_eq(cpl[2].cookie, 2 * 3 + 2);
    ck_assert_int_eq(cpl[3].status, -ECANCELED);
    ck_assert_int_eq(cpl[4].status, -ECANCELED);
    ck_assert_uint_eq(dev.resets, 1);
    ck_assert_uint_eq(dev.status->fatal_error, 0);
    /* The queue runs again from slot 0. */
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(push(), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 3);
    ck_assert_uint_eq(fake_etpu_tail(&dev), 3);
    fake_etpu_step(&dev, UINT32_MAX);
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 3, LONG_NS, cpl, 8), 3);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(cpl[i].status, 0);
}
END_TEST

START_TEST(etpu_fatal_error_is_never_read_as_success_even_when_it_repeats)
{
    struct npv_cpl cpl[8];
    for (int round = 0; round < 3; round++) {
        ck_assert_int_eq(push(), 0);
        dev.fatal_after = 1;
        ck_assert_int_eq(npv_ring_submit(ring), 1);
        fake_etpu_step(&dev, UINT32_MAX);
        ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 1, LONG_NS, cpl, 8), 1);
        ck_assert_int_eq(cpl[0].status, -EIO);
        ck_assert_uint_eq(cpl[0].dev_error, ETPU_FATAL_INJECTED);
    }
    ck_assert_uint_eq(dev.resets, 3);
    /* A fatal word with nothing in flight still resets the queue. */
    dev.status->fatal_error = ETPU_FATAL_INJECTED;
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 8), 0);
    ck_assert_uint_eq(dev.resets, 4);
    struct npv_ring_stats st;
    npv_ring_stats(ring, &st);
    ck_assert_uint_eq(st.faults, 4);
}
END_TEST

START_TEST(etpu_hung_queue_fails_the_job_at_its_deadline_by_polling)
{
    struct npv_cpl cpl[8];
    dev.hang = true;
    ck_assert_int_eq(push_timed(1), 0);
    ck_assert_int_eq(push_timed(UINT64_MAX), 0); /* no deadline: it can only be cancelled */
    ck_assert_int_eq(npv_ring_submit(ring), 2);
    int got = 0;
    for (unsigned i = 0; i < 64u * NPV_RING_CLOCK_EVERY && got == 0; i++)
        got = npv_ring_poll(ring, cpl, 8);
    ck_assert_int_eq(got, 2);
    ck_assert_int_eq(cpl[0].status, -ETIMEDOUT);
    ck_assert_int_eq(cpl[1].status, -ECANCELED);
    ck_assert_uint_eq(dev.resets, 1);
    ck_assert_uint_eq(fake_etpu_tail(&dev), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ring_edgetpu_shape");
    TCase *tc = tcase_create("edgetpu_shape");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, etpu_masked_head_wraps_a_million_times_in_order);
    tcase_add_test(tc, etpu_full_ring_holds_one_less_than_entries_and_its_tail_never_reads_empty);
    tcase_add_test(tc, etpu_masked_head_beyond_what_was_announced_is_a_fault);
    tcase_add_test(tc, etpu_head_that_wrapped_exactly_to_the_announced_tail_is_not_a_fault);
    tcase_add_test(tc,
                   etpu_fatal_error_fails_the_oldest_job_with_the_word_cancels_the_rest_and_resets);
    tcase_add_test(tc, etpu_fatal_error_is_never_read_as_success_even_when_it_repeats);
    tcase_add_test(tc, etpu_hung_queue_fails_the_job_at_its_deadline_by_polling);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

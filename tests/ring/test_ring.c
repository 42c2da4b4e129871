/* SPDX-License-Identifier: MIT */
/* The ring engine and its bookkeeping against an in-process fake device. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/ring.h>

#include "fake_dev.h"

#define LONG_NS (10ull * 1000000000ull) /* generous: the machine is shared */

static struct npv_ctx *ctx;
static struct fake_dev dev;
static struct npv_ring_config cfg;
static struct npv_ring *ring;
static uint64_t next_seq;

static void quiet_log(void *user, enum npv_log_level level, const char *msg)
{
    (void)user;
    (void)level;
    (void)msg;
}

static void setup_n(uint32_t entries)
{
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    npv_ctx_set_log_sink(ctx, quiet_log, NULL);
    fake_dev_init(&dev, entries, &cfg);
    ck_assert_int_eq(npv_ring_new(ctx, &cfg, &ring), 0);
    next_seq = 0;
}

static void setup(void)
{
    setup_n(64);
}

static void teardown(void)
{
    npv_ring_free(ring);
    ring = NULL;
    fake_dev_fini(&dev);
    npv_ctx_free(ctx);
}

/* Claim a slot with its own deadline, fill it as the fake device expects, cookie = seq * 7 + 1. */
static int push_one_timed(uint32_t fail, uint64_t timeout_ns)
{
    void *slot;
    int rc = npv_ring_next_timed(ring, next_seq * 7 + 1, timeout_ns, &slot);
    if (rc < 0)
        return rc;
    struct fake_desc *d = slot;
    d->seq = next_seq;
    d->fail = fail;
    d->payload = ~next_seq;
    next_seq++;
    return 0;
}

static int push_one(uint32_t fail)
{
    return push_one_timed(fail, 0);
}

/* A deadline that has passed by the time anyone looks: the point is the order, not the time. */
#define ALREADY_PASSED_NS 1ull

/* Poll until something comes back; polls read the clock every NPV_RING_CLOCK_EVERY calls. */
static int poll_until_some(struct npv_cpl *cpl, unsigned max)
{
    for (unsigned i = 0; i < 64u * NPV_RING_CLOCK_EVERY; i++) {
        int got = npv_ring_poll(ring, cpl, max);
        if (got != 0)
            return got;
    }
    return 0;
}

START_TEST(ring_wraps_over_1m_entries_in_order)
{
    /* Check records every ck_assert through a pipe: the loop counts mismatches instead. */
    const uint64_t total = 1u << 20;
    uint64_t reaped = 0, batch = 1, bad = 0;
    struct npv_cpl cpl[64];
    while (next_seq < total) {
        uint64_t n = batch;
        if (n > total - next_seq)
            n = total - next_seq;
        for (uint64_t i = 0; i < n; i++)
            bad += push_one(0) != 0;
        bad += npv_ring_submit(ring) != (int)n;
        /* The device completes in two pieces so heads land mid-batch. */
        fake_dev_step(&dev, (uint32_t)(n / 2));
        fake_dev_step(&dev, UINT32_MAX);
        int got = npv_ring_poll(ring, cpl, 64);
        bad += got != (int)n;
        for (int i = 0; i < got; i++) {
            bad += cpl[i].cookie != reaped * 7 + 1 || cpl[i].status != 0;
            reaped++;
        }
        batch = batch % 64 + 1;
    }
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_eq(reaped, total);
    ck_assert_uint_eq(dev.bad_descs, 0);
    ck_assert_uint_eq(dev.status->head, (uint32_t)total);
    ck_assert_uint_eq(npv_ring_in_flight(ring), 0);
}
END_TEST

START_TEST(ring_full_returns_eagain_until_reaped)
{
    struct npv_cpl cpl[64];
    for (int i = 0; i < 64; i++)
        ck_assert_int_eq(push_one(0), 0);
    ck_assert_int_eq(push_one(0), -EAGAIN);
    ck_assert_int_eq(npv_ring_submit(ring), 64);
    fake_dev_step(&dev, UINT32_MAX);
    /* Completed but not reaped still occupies the slot: the cookie lives there. */
    ck_assert_int_eq(push_one(0), -EAGAIN);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 1), 1);
    ck_assert_int_eq(push_one(0), 0);
    ck_assert_int_eq(push_one(0), -EAGAIN);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 64), 63);
    ck_assert_int_eq(npv_ring_submit(ring), 1);
    fake_dev_step(&dev, UINT32_MAX);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 64), 1);
    ck_assert_uint_eq(cpl[0].cookie, 64 * 7 + 1);
    ck_assert_uint_eq(dev.bad_descs, 0);
}
END_TEST

START_TEST(ring_batches_descriptors_behind_one_doorbell)
{
    struct npv_ring_stats st;
    for (int i = 0; i < 32; i++)
        ck_assert_int_eq(push_one(0), 0);
    ck_assert_uint_eq(fake_dev_doorbell(&dev), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 32);
    ck_assert_int_eq(npv_ring_submit(ring), 0);
    ck_assert_uint_eq(fake_dev_doorbell(&dev), 32);
    npv_ring_stats(ring, &st);
    ck_assert_uint_eq(st.doorbells, 1);
    ck_assert_uint_eq(st.submitted, 32);
}
END_TEST

START_TEST(ring_slot_doorbell_format_writes_index_modulo_entries)
{
    npv_ring_free(ring);
    cfg.db_format = NPV_RING_DB_SLOT;
    ck_assert_int_eq(npv_ring_new(ctx, &cfg, &ring), 0);
    struct npv_cpl cpl[64];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 40; i++)
            ck_assert_int_eq(push_one(0), 0);
        ck_assert_int_eq(npv_ring_submit(ring), 40);
        ck_assert_uint_eq(fake_dev_doorbell(&dev), (uint32_t)(40 * (round + 1)) % 64);
        /* This fake device counts indexes; complete by writing the head directly. */
        fake_dev_write_head(&dev, (uint32_t)(40 * (round + 1)));
        ck_assert_int_eq(npv_ring_poll(ring, cpl, 64), 40);
    }
}
END_TEST

START_TEST(ring_rejects_device_head_beyond_doorbell)
{
    struct npv_cpl cpl[64];
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(push_one(0), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 8);
    ck_assert_int_eq(push_one(0), 0); /* claimed, not yet announced */
    fake_dev_step(&dev, 3);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 64), 3);
    /* 9 is beyond the doorbell (8) even though a ninth slot is claimed. */
    fake_dev_write_head(&dev, 9);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 64), -NPV_EDEVFAULT);
    ck_assert_uint_eq(dev.resets, 1);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 64), 6);
    ck_assert_int_eq(cpl[0].status, -NPV_EDEVFAULT);
    ck_assert_uint_eq(cpl[0].cookie, 3 * 7 + 1);
    for (int i = 1; i < 6; i++)
        ck_assert_int_eq(cpl[i].status, -ECANCELED);
    struct npv_ring_stats st;
    npv_ring_stats(ring, &st);
    ck_assert_uint_eq(st.faults, 1);
}
END_TEST

START_TEST(ring_rejects_device_head_moving_backwards)
{
    struct npv_cpl cpl[64];
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(push_one(0), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 8);
    fake_dev_step(&dev, 5);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 64), 5);
    fake_dev_write_head(&dev, 4);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 64), -NPV_EDEVFAULT);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 64), 3);
    ck_assert_int_eq(cpl[0].status, -NPV_EDEVFAULT);
}
END_TEST

START_TEST(ring_wild_head_values_never_index_out_of_bounds)
{
    /* Values around every boundary; ASan checks that none is used as an index. */
    static const uint32_t wild[] = {65, 64 + 1, 0x80000000u, 0xffffffffu, 1u << 16, 100000};
    struct npv_cpl cpl[64];
    for (size_t w = 0; w < sizeof(wild) / sizeof(wild[0]); w++) {
        for (int i = 0; i < 4; i++)
            ck_assert_int_eq(push_one(0), 0);
        ck_assert_int_eq(npv_ring_submit(ring), 4);
        fake_dev_write_head(&dev, wild[w]);
        ck_assert_int_eq(npv_ring_poll(ring, cpl, 64), -NPV_EDEVFAULT);
        ck_assert_int_eq(npv_ring_poll(ring, cpl, 64), 4);
        ck_assert_uint_eq(npv_ring_in_flight(ring), 0);
    }
    ck_assert_uint_eq(dev.resets, sizeof(wild) / sizeof(wild[0]));
}
END_TEST

START_TEST(ring_reports_device_error_word_on_the_named_job)
{
    struct npv_cpl cpl[64];
    ck_assert_int_eq(push_one(0), 0);
    ck_assert_int_eq(push_one(0x2a), 0);
    ck_assert_int_eq(push_one(0), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 3);
    fake_dev_step(&dev, UINT32_MAX);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 64), 3);
    ck_assert_int_eq(cpl[0].status, 0);
    ck_assert_int_eq(cpl[1].status, -EIO);
    ck_assert_uint_eq(cpl[1].dev_error, 0x2a);
    ck_assert_int_eq(cpl[2].status, 0);
    /* The word stays set in the status block; the next batch must not inherit it. */
    ck_assert_int_eq(push_one(0), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 1);
    fake_dev_step(&dev, UINT32_MAX);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 64), 1);
    ck_assert_int_eq(cpl[0].status, 0);
}
END_TEST

START_TEST(ring_ignores_error_index_outside_the_completed_batch)
{
    struct npv_cpl cpl[64];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(push_one(0), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 4);
    dev.status->error = 7;
    dev.status->error_index = 0xdeadbeef;
    fake_dev_step(&dev, UINT32_MAX);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 64), 4);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(cpl[i].status, 0);
}
END_TEST

START_TEST(ring_error_word_without_index_reports_a_repeated_code_as_a_new_failure)
{
    npv_ring_free(ring);
    cfg.fields.error_index = NPV_RING_NO_FIELD;
    dev.no_index = true;
    ck_assert_int_eq(npv_ring_new(ctx, &cfg, &ring), 0);
    struct npv_cpl cpl[64];
    ck_assert_int_eq(push_one(0), 0);
    ck_assert_int_eq(push_one(5), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 2);
    /* Head over job 0, then the word: it names job 1, which the head leaves out. */
    ck_assert_uint_eq(fake_dev_step(&dev, UINT32_MAX), 1);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 64), 1);
    ck_assert_int_eq(cpl[0].status, 0);
    /* The engine took the word; only then does the device complete job 1. */
    ck_assert_uint_eq(dev.status->error, 0);
    ck_assert_uint_eq(fake_dev_step(&dev, UINT32_MAX), 1);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 64), 1);
    ck_assert_int_eq(cpl[0].status, -EIO);
    ck_assert_uint_eq(cpl[0].dev_error, 5);
    /* A second failure with the same code is a failure, not "no news". */
    ck_assert_int_eq(push_one(5), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 1);
    ck_assert_uint_eq(fake_dev_step(&dev, UINT32_MAX), 0); /* the word, no head */
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 64), 0);
    ck_assert_uint_eq(dev.status->error, 0);
    ck_assert_uint_eq(fake_dev_step(&dev, UINT32_MAX), 1);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 64), 1);
    ck_assert_int_eq(cpl[0].status, -EIO);
    ck_assert_uint_eq(cpl[0].dev_error, 5);
    /* And a job that succeeds after it is a success. */
    ck_assert_int_eq(push_one(0), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 1);
    fake_dev_step(&dev, UINT32_MAX);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 64), 1);
    ck_assert_int_eq(cpl[0].status, 0);
    ck_assert_uint_eq(dev.bad_descs, 0);
}
END_TEST

START_TEST(ring_error_word_without_index_and_no_job_left_is_a_device_fault)
{
    npv_ring_free(ring);
    cfg.fields.error_index = NPV_RING_NO_FIELD;
    ck_assert_int_eq(npv_ring_new(ctx, &cfg, &ring), 0);
    struct npv_cpl cpl[64];
    ck_assert_int_eq(push_one(0), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 1);
    fake_dev_step(&dev, UINT32_MAX);
    /* The head covers the only job announced: a word now names nothing. */
    __atomic_store_n(&dev.status->error, 9, __ATOMIC_RELEASE);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 64), -NPV_EDEVFAULT);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 64), 1);
    ck_assert_int_eq(cpl[0].status, 0);
    ck_assert_uint_eq(dev.status->error, 0);
    ck_assert_uint_eq(dev.resets, 1);
}
END_TEST

START_TEST(ring_wait_timeout_fails_nothing_and_resets_nothing)
{
    struct npv_cpl cpl[64];
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(push_one(0), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 10);
    fake_dev_step(&dev, 2);
    dev.hang = true;
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 2, LONG_NS, cpl, 64), 2);
    /* The device is slow, not dead: the wait gives up, the jobs stay in flight. */
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 1, 1000000ull, cpl, 64), 0);
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 8, 1000000ull, cpl, 64), 0);
    ck_assert_uint_eq(dev.resets, 0);
    ck_assert_uint_eq(npv_ring_in_flight(ring), 8);
    /* Part of it arrives: a wait for more returns what is there when its time runs out. */
    dev.hang = false;
    fake_dev_step(&dev, 3);
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 8, 1000000ull, cpl, 64), 3);
    fake_dev_step(&dev, UINT32_MAX);
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 5, LONG_NS, cpl, 64), 5);
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(cpl[i].status, 0);
        ck_assert_uint_eq(cpl[i].cookie, (uint64_t)(5 + i) * 7 + 1);
    }
    struct npv_ring_stats st;
    npv_ring_stats(ring, &st);
    ck_assert_uint_eq(st.timeouts, 0);
    ck_assert_uint_eq(st.resets, 0);
    ck_assert_uint_eq(dev.bad_descs, 0);
}
END_TEST

START_TEST(ring_job_past_its_own_deadline_fails_alone_and_the_rest_are_cancelled)
{
    struct npv_cpl cpl[64];
    /* Only job 2 has a deadline (one that has passed): the others can only be cancelled. */
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(push_one_timed(0, UINT64_MAX), 0);
    ck_assert_int_eq(push_one_timed(0, ALREADY_PASSED_NS), 0); /* job 2 */
    ck_assert_int_eq(push_one_timed(0, UINT64_MAX), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 4);
    fake_dev_step(&dev, 1);
    dev.hang = true;
    /* A plain poll notices it (no wait involved), and returns the failures as completions. */
    int got = poll_until_some(cpl, 64);
    ck_assert_int_eq(got, 1);
    ck_assert_int_eq(cpl[0].status, 0);
    got = poll_until_some(cpl, 64);
    ck_assert_int_eq(got, 3);
    ck_assert_int_eq(cpl[0].status, -ECANCELED);
    ck_assert_uint_eq(cpl[0].cookie, 1 * 7 + 1);
    ck_assert_int_eq(cpl[1].status, -ETIMEDOUT);
    ck_assert_uint_eq(cpl[1].cookie, 2 * 7 + 1);
    ck_assert_int_eq(cpl[2].status, -ECANCELED);
    ck_assert_uint_eq(dev.resets, 1);
    struct npv_ring_stats st;
    npv_ring_stats(ring, &st);
    ck_assert_uint_eq(st.timeouts, 1);
    /* The device was reset (indexes at 0) and the ring works again. */
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(push_one(0), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 5);
    ck_assert_uint_eq(fake_dev_doorbell(&dev), 5);
    fake_dev_step(&dev, UINT32_MAX);
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 5, LONG_NS, cpl, 64), 5);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(cpl[i].status, 0);
    ck_assert_uint_eq(dev.bad_descs, 0);
}
END_TEST

START_TEST(ring_wait_returns_jobs_failed_by_their_deadline_as_completions)
{
    struct npv_cpl cpl[64];
    ck_assert_int_eq(push_one_timed(0, ALREADY_PASSED_NS), 0);
    ck_assert_int_eq(push_one_timed(0, UINT64_MAX), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 2);
    dev.hang = true;
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 2, LONG_NS, cpl, 64), 2);
    ck_assert_int_eq(cpl[0].status, -ETIMEDOUT);
    ck_assert_int_eq(cpl[1].status, -ECANCELED);
    ck_assert_uint_eq(dev.resets, 1);
}
END_TEST

START_TEST(ring_job_completed_in_time_is_never_failed_however_late_it_is_reaped)
{
    struct npv_cpl cpl[64];
    ck_assert_int_eq(push_one_timed(0, ALREADY_PASSED_NS), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 1);
    fake_dev_step(&dev, UINT32_MAX);
    ck_assert_int_eq(poll_until_some(cpl, 64), 1);
    ck_assert_int_eq(cpl[0].status, 0);
    ck_assert_uint_eq(dev.resets, 0);
}
END_TEST

START_TEST(ring_without_job_deadlines_never_expires_a_job)
{
    npv_ring_free(ring);
    cfg.job_timeout_ns = UINT64_MAX;
    ck_assert_int_eq(npv_ring_new(ctx, &cfg, &ring), 0);
    struct npv_cpl cpl[64];
    ck_assert_int_eq(push_one(0), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 1);
    ck_assert_int_eq(poll_until_some(cpl, 64), 0);
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 1, 1000000ull, cpl, 64), 0);
    ck_assert_uint_eq(npv_ring_in_flight(ring), 1);
    ck_assert_uint_eq(dev.resets, 0);
}
END_TEST

START_TEST(ring_slot_doorbell_keeps_one_slot_free)
{
    npv_ring_free(ring);
    fake_dev_fini(&dev);
    fake_dev_init(&dev, 8, &cfg);
    cfg.db_format = NPV_RING_DB_SLOT;
    ck_assert_int_eq(npv_ring_new(ctx, &cfg, &ring), 0);
    ck_assert_uint_eq(npv_ring_capacity(ring), 7);
    for (int i = 0; i < 7; i++)
        ck_assert_int_eq(push_one(0), 0);
    ck_assert_int_eq(push_one(0), -EAGAIN);
    ck_assert_int_eq(npv_ring_submit(ring), 7);
    /* A full ring's doorbell differs from an empty one's (0). */
    ck_assert_uint_eq(fake_dev_doorbell(&dev), 7);
    fake_dev_write_head(&dev, 7);
    struct npv_cpl cpl[8];
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 8), 7);
    for (int i = 0; i < 7; i++)
        ck_assert_int_eq(push_one(0), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 7);
    ck_assert_uint_eq(fake_dev_doorbell(&dev), 14 % 8);
}
END_TEST

START_TEST(ring_failed_reset_leaves_ring_dead_until_reinitialised)
{
    struct npv_cpl cpl[64];
    ck_assert_int_eq(push_one_timed(0, ALREADY_PASSED_NS), 0);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(push_one(0), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 3);
    dev.hang = true;
    dev.reset_rc = -EIO;
    /* What was decided is still delivered from a dead ring. */
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 1, LONG_NS, cpl, 64), 3);
    ck_assert_int_eq(npv_ring_dead(ring), 1);
    ck_assert_int_eq(cpl[0].status, -ETIMEDOUT);
    ck_assert_int_eq(push_one(0), -EIO);
    dev.hang = false;
    ck_assert_int_eq(npv_ring_reset(ring), 0);
    ck_assert_int_eq(npv_ring_dead(ring), 0);
    ck_assert_uint_eq(dev.resets, 2);
    ck_assert_int_eq(push_one(0), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 1);
    fake_dev_step(&dev, UINT32_MAX);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 64), 1);
    ck_assert_int_eq(cpl[0].status, 0);
}
END_TEST

START_TEST(ring_reset_cancels_jobs_in_flight)
{
    struct npv_cpl cpl[64];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(push_one(0), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 4);
    ck_assert_int_eq(npv_ring_reset(ring), 0);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 64), 4);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(cpl[i].status, -ECANCELED);
}
END_TEST

/*
 * ring.h, "In flight": a job is in flight from its claim, submitted or not; it
 * counts against the capacity, has its deadline, and a reset cancels it.
 */
START_TEST(ring_claimed_unsubmitted_jobs_are_in_flight_and_cancelled_by_a_reset)
{
    struct npv_cpl cpl[64];
    uint32_t cap = npv_ring_capacity(ring);
    for (uint32_t i = 0; i < cap; i++)
        ck_assert_int_eq(push_one(0), 0);
    ck_assert_uint_eq(npv_ring_in_flight(ring), cap);
    ck_assert_int_eq(push_one(0), -EAGAIN);
    ck_assert_uint_eq(fake_dev_doorbell(&dev), 0);
    ck_assert_int_eq(npv_ring_reset(ring), 0);
    ck_assert_uint_eq(dev.resets, 1);
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 64), (int)cap);
    for (uint32_t i = 0; i < cap; i++) {
        ck_assert_int_eq(cpl[i].status, -ECANCELED);
        ck_assert_uint_eq(cpl[i].cookie, (uint64_t)i * 7 + 1);
    }
    ck_assert_uint_eq(npv_ring_in_flight(ring), 0);
}
END_TEST

START_TEST(ring_claimed_unsubmitted_job_fails_at_its_deadline)
{
    struct npv_cpl cpl[4];
    ck_assert_int_eq(push_one_timed(0, ALREADY_PASSED_NS), 0);
    ck_assert_int_eq(push_one(0), 0);
    ck_assert_int_eq(poll_until_some(cpl, 4), 2);
    ck_assert_int_eq(cpl[0].status, -ETIMEDOUT);
    ck_assert_int_eq(cpl[1].status, -ECANCELED);
    ck_assert_uint_eq(fake_dev_doorbell(&dev), 0);
    ck_assert_uint_eq(dev.resets, 1);
}
END_TEST

START_TEST(ring_wait_rejects_impossible_requests)
{
    struct npv_cpl cpl[4];
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 1, LONG_NS, cpl, 4), -EINVAL);
    ck_assert_int_eq(push_one(0), 0);
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 2, LONG_NS, cpl, 4), -EINVAL);
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 0, LONG_NS, cpl, 4), -EINVAL);
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 3, LONG_NS, cpl, 2), -EINVAL);
    /* No interrupt configured. */
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_IRQ, 1, LONG_NS, cpl, 4), -EINVAL);
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_HYBRID, 1, LONG_NS, cpl, 4), -EINVAL);
}
END_TEST

START_TEST(ring_new_rejects_bad_configs)
{
    struct npv_ring *r = NULL;
    struct npv_ring_config c = cfg;
    c.entries = 48;
    ck_assert_int_eq(npv_ring_new(ctx, &c, &r), -EINVAL);
    c = cfg;
    c.desc_size = 30;
    ck_assert_int_eq(npv_ring_new(ctx, &c, &r), -EINVAL);
    c = cfg;
    c.fields.head = 62; /* crosses the end of the status block */
    ck_assert_int_eq(npv_ring_new(ctx, &c, &r), -EINVAL);
    c = cfg;
    c.db_off = 4094;
    ck_assert_int_eq(npv_ring_new(ctx, &c, &r), -EINVAL);
    c = cfg;
    c.db_width = 2;
    ck_assert_int_eq(npv_ring_new(ctx, &c, &r), -EINVAL);
    c = cfg;
    c.reset = NULL;
    ck_assert_int_eq(npv_ring_new(ctx, &c, &r), -EINVAL);
    c = cfg;
    c.fields.error = NPV_RING_NO_FIELD; /* an error index without an error word */
    ck_assert_int_eq(npv_ring_new(ctx, &c, &r), -EINVAL);
    c = cfg;
    c.error_format = NPV_RING_ERROR_FATAL; /* a fatal word has no index */
    ck_assert_int_eq(npv_ring_new(ctx, &c, &r), -EINVAL);
    c = cfg;
    c.head_format = NPV_RING_HEAD_SLOT; /* with an error index: it would alias across laps */
    ck_assert_int_eq(npv_ring_new(ctx, &c, &r), -EINVAL);
    c.fields.error_index = NPV_RING_NO_FIELD;
    ck_assert_int_eq(npv_ring_new(ctx, &c, &r), 0);
    npv_ring_free(r);
    r = NULL;
    c = cfg;
    c.head_format = 7;
    ck_assert_int_eq(npv_ring_new(ctx, &c, &r), -EINVAL);
    /* A status block in the descriptors' last cache granule. */
    c = cfg;
    c.status_vaddr = (uint8_t *)cfg.desc_vaddr + cfg.entries * cfg.desc_size - 64;
    ck_assert_int_eq(npv_ring_new(ctx, &c, &r), -EINVAL);
    /* Right after the ring but within 128 bytes of its end: arm64 granules are up to 128. */
    c.status_vaddr = (uint8_t *)cfg.desc_vaddr + cfg.entries * cfg.desc_size + 64;
    c.desc_vaddr = (uint8_t *)cfg.desc_vaddr + 64;
    ck_assert_int_eq(npv_ring_new(ctx, &c, &r), -EINVAL);
    ck_assert_ptr_null(r);
    npv_ring_free(NULL);
}
END_TEST

START_TEST(ring_poll_wait_round_trips_with_device_thread)
{
    struct npv_cpl cpl[8];
    ck_assert_int_eq(fake_dev_start(&dev), 0);
    uint64_t reaped = 0, bad = 0;
    int last_err = 0;
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(push_one(0), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 8);
    while (reaped < 100000 && last_err == 0) {
        int got = npv_ring_wait(ring, NPV_RING_WAIT_POLL, 1, LONG_NS, cpl, 8);
        if (got <= 0) {
            last_err = got;
            break;
        }
        for (int i = 0; i < got; i++) {
            bad += cpl[i].cookie != reaped * 7 + 1 || cpl[i].status != 0;
            reaped++;
            bad += push_one(0) != 0;
        }
        bad += npv_ring_submit(ring) != got;
    }
    fake_dev_stop(&dev);
    ck_assert_int_eq(last_err, 0);
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_eq(dev.bad_descs, 0);
}
END_TEST

/* ---- bookkeeping alone, as register-driven devices use it ---- */

START_TEST(inflight_completes_in_order_and_fans_out_failures)
{
    struct npv_inflight *t;
    struct npv_cpl cpl[8];
    uint32_t seq;
    ck_assert_int_eq(npv_inflight_new(NULL, 4, &t), 0);
    for (uint64_t i = 0; i < 4; i++) {
        ck_assert_int_eq(npv_inflight_add(t, 100 + i, 1000 - i, &seq), 0);
        ck_assert_uint_eq(seq, i);
    }
    ck_assert_int_eq(npv_inflight_add(t, 9, 0, &seq), -EAGAIN);
    ck_assert_uint_eq(npv_inflight_next_deadline(t), 997);
    ck_assert_int_eq(npv_inflight_complete(t, 5), -NPV_EDEVFAULT);
    ck_assert_int_eq(npv_inflight_set_status(t, 1, -EIO, 3), 0);
    ck_assert_int_eq(npv_inflight_complete(t, 2), 0);
    ck_assert_int_eq(npv_inflight_complete(t, 1), -NPV_EDEVFAULT);
    ck_assert_int_eq(npv_inflight_set_status(t, 0, -EIO, 3), -ERANGE);
    ck_assert_uint_eq(npv_inflight_fail_all(t, -ETIMEDOUT, -ECANCELED), 2);
    ck_assert_uint_eq(npv_inflight_reap(t, cpl, 8), 4);
    ck_assert_int_eq(cpl[0].status, 0);
    ck_assert_int_eq(cpl[1].status, -EIO);
    ck_assert_uint_eq(cpl[1].dev_error, 3);
    ck_assert_int_eq(cpl[2].status, -ETIMEDOUT);
    ck_assert_int_eq(cpl[3].status, -ECANCELED);
    ck_assert_uint_eq(cpl[3].cookie, 103);
    ck_assert_uint_eq(npv_inflight_next_deadline(t), 0);
    struct npv_inflight *bad = NULL;
    ck_assert_int_eq(npv_inflight_new(NULL, 3, &bad), -EINVAL);
    npv_inflight_free(t);
    npv_inflight_free(NULL);
}
END_TEST

START_TEST(inflight_earliest_deadline_follows_jobs_out_of_deadline_order)
{
    struct npv_inflight *t;
    struct npv_cpl cpl[8];
    ck_assert_int_eq(npv_inflight_new(NULL, 8, &t), 0);
    /* seq:       0    1   2    3   4 */
    static const uint64_t dl[] = {500, 0, 300, 900, 300};
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(npv_inflight_add(t, (uint64_t)i, dl[i], NULL), 0);
    ck_assert_uint_eq(npv_inflight_next_deadline(t), 300);
    ck_assert_int_eq(npv_inflight_complete(t, 3), 0);      /* 0, 1, 2 done */
    ck_assert_uint_eq(npv_inflight_next_deadline(t), 300); /* job 4's */
    ck_assert_int_eq(npv_inflight_complete(t, 5), 0);
    ck_assert_uint_eq(npv_inflight_next_deadline(t), 0);
    ck_assert_uint_eq(npv_inflight_reap(t, cpl, 8), 5);
    /* Expiry: nothing before the earliest, then late jobs -ETIMEDOUT, the rest -ECANCELED. */
    ck_assert_int_eq(npv_inflight_add(t, 10, 700, NULL), 0);
    ck_assert_int_eq(npv_inflight_add(t, 11, 200, NULL), 0);
    ck_assert_int_eq(npv_inflight_add(t, 12, 0, NULL), 0);
    ck_assert_int_eq(npv_inflight_add(t, 13, 250, NULL), 0);
    ck_assert_uint_eq(npv_inflight_next_deadline(t), 200);
    ck_assert_uint_eq(npv_inflight_expire(t, 199), 0);
    ck_assert_uint_eq(npv_inflight_unfinished(t), 4);
    ck_assert_uint_eq(npv_inflight_expire(t, 260), 4);
    ck_assert_uint_eq(npv_inflight_reap(t, cpl, 8), 4);
    ck_assert_int_eq(cpl[0].status, -ECANCELED);
    ck_assert_int_eq(cpl[1].status, -ETIMEDOUT);
    ck_assert_int_eq(cpl[2].status, -ECANCELED);
    ck_assert_int_eq(cpl[3].status, -ETIMEDOUT);
    ck_assert_uint_eq(npv_inflight_next_deadline(t), 0);
    npv_inflight_free(t);
}
END_TEST

START_TEST(inflight_earliest_deadline_matches_a_scan_over_many_laps)
{
    /* Random deadlines, random completion batches: the O(1) answer equals the O(n) one. */
    struct npv_inflight *t;
    struct npv_cpl cpl[16];
    uint64_t dl[16];
    ck_assert_int_eq(npv_inflight_new(NULL, 16, &t), 0);
    uint32_t rnd = 12345, bad = 0;
    for (int step = 0; step < 200000; step++) {
        rnd = rnd * 1103515245u + 12345u;
        uint32_t seq;
        if ((rnd >> 16) % 3 != 0 && npv_inflight_add(t, 0, (rnd >> 8) % 50, &seq) == 0) {
            dl[seq & 15] = (rnd >> 8) % 50;
        } else if (npv_inflight_unfinished(t) > 0) {
            uint32_t k = 1 + (rnd >> 20) % npv_inflight_unfinished(t);
            npv_inflight_complete(t, npv_inflight_done(t) + k);
            npv_inflight_reap(t, cpl, 16);
        }
        uint64_t want = 0;
        for (uint32_t s = npv_inflight_done(t); s != npv_inflight_tail(t); s++)
            if (dl[s & 15] != 0 && (want == 0 || dl[s & 15] < want))
                want = dl[s & 15];
        bad += npv_inflight_next_deadline(t) != want;
    }
    ck_assert_uint_eq(bad, 0);
    npv_inflight_free(t);
}
END_TEST

static Suite *ring_suite(void)
{
    Suite *s = suite_create("ring");
    TCase *tc = tcase_create("engine");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, ring_wraps_over_1m_entries_in_order);
    tcase_add_test(tc, ring_full_returns_eagain_until_reaped);
    tcase_add_test(tc, ring_batches_descriptors_behind_one_doorbell);
    tcase_add_test(tc, ring_slot_doorbell_format_writes_index_modulo_entries);
    tcase_add_test(tc, ring_rejects_device_head_beyond_doorbell);
    tcase_add_test(tc, ring_rejects_device_head_moving_backwards);
    tcase_add_test(tc, ring_wild_head_values_never_index_out_of_bounds);
    tcase_add_test(tc, ring_reports_device_error_word_on_the_named_job);
    tcase_add_test(tc, ring_ignores_error_index_outside_the_completed_batch);
    tcase_add_test(tc, ring_error_word_without_index_reports_a_repeated_code_as_a_new_failure);
    tcase_add_test(tc, ring_error_word_without_index_and_no_job_left_is_a_device_fault);
    tcase_add_test(tc, ring_wait_timeout_fails_nothing_and_resets_nothing);
    tcase_add_test(tc, ring_job_past_its_own_deadline_fails_alone_and_the_rest_are_cancelled);
    tcase_add_test(tc, ring_wait_returns_jobs_failed_by_their_deadline_as_completions);
    tcase_add_test(tc, ring_job_completed_in_time_is_never_failed_however_late_it_is_reaped);
    tcase_add_test(tc, ring_without_job_deadlines_never_expires_a_job);
    tcase_add_test(tc, ring_slot_doorbell_keeps_one_slot_free);
    tcase_add_test(tc, ring_failed_reset_leaves_ring_dead_until_reinitialised);
    tcase_add_test(tc, ring_reset_cancels_jobs_in_flight);
    tcase_add_test(tc, ring_claimed_unsubmitted_jobs_are_in_flight_and_cancelled_by_a_reset);
    tcase_add_test(tc, ring_claimed_unsubmitted_job_fails_at_its_deadline);
    tcase_add_test(tc, ring_wait_rejects_impossible_requests);
    tcase_add_test(tc, ring_new_rejects_bad_configs);
    tcase_add_test(tc, ring_poll_wait_round_trips_with_device_thread);
    suite_add_tcase(s, tc);
    TCase *tb = tcase_create("inflight");
    tcase_add_test(tb, inflight_completes_in_order_and_fans_out_failures);
    tcase_add_test(tb, inflight_earliest_deadline_follows_jobs_out_of_deadline_order);
    tcase_add_test(tb, inflight_earliest_deadline_matches_a_scan_over_many_laps);
    suite_add_tcase(s, tb);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ring_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* SPDX-License-Identifier: MIT */
/*
 * The ring engine against the real testdev model over vfio-user (the model
 * in a child process): results of the device's DMA, wraparound over many
 * batches, each injected fault ending as the engine promises, interrupt
 * waits through the model's MSI-X, and the model never touching memory the
 * client has unmapped while its poller runs.
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <npuvfio/irq.h>
#include <npuvfio/ring.h>

#include "harness.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct vu_server srv;
static struct td t;
static struct npv_ring *ring;
static char last_err[512];

static void keep_errors(void *user, enum npv_log_level level, const char *msg)
{
    (void)user;
    if (level == NPV_LOG_ERROR)
        snprintf(last_err, sizeof(last_err), "%s", msg);
}

/* The device opened by its driver, which programs the ring and is the ring's reset callback. */
static void open_with(bool irq)
{
    vu_server_start(&srv, vu_serve_testdev, NULL);
    td_open(&t, srv.path);
    last_err[0] = '\0';
    npv_ctx_set_log_sink(t.ctx, keep_errors, NULL);
    td_enable(&t, irq);
    ring = t.ring;
}

static void setup(void)
{
    open_with(false);
}

static void setup_irq(void)
{
    open_with(true);
}

static void teardown(void)
{
    ring = NULL;
    td_close(&t);
    vu_server_kill(&srv);
}

static struct npv_dma *mapped_buffer(size_t size, unsigned prot, npv_iova_t *iova)
{
    struct npv_dma *b;
    ck_assert_int_eq(npv_dma_alloc(t.ctx, size, NULL, &b), 0);
    ck_assert_int_eq(npv_dma_map(b, t.dom, prot, iova), 0);
    return b;
}

static void push(const struct npv_testdev_desc *d, uint64_t cookie)
{
    ck_assert_int_eq(npv_ring_push(ring, d, cookie), 0);
}

static const struct npv_testdev_desc nop = {.opcode = NPV_TESTDEV_OP_NOP};

/* Wait for exactly one completion and return it. */
static struct npv_cpl wait_one(enum npv_ring_wait_mode mode)
{
    struct npv_cpl c;
    int got = npv_ring_wait(ring, mode, 1, GENEROUS_NS, &c, 1);
    ck_assert_msg(got == 1, "wait: %s", got < 0 ? npv_strerror(got) : "none");
    return c;
}

START_TEST(ring_runs_copy_and_fill_through_the_model)
{
    npv_iova_t src_iova, dst_iova;
    struct npv_dma *src = mapped_buffer(8192, NPV_DMA_READ, &src_iova);
    struct npv_dma *dst = mapped_buffer(8192, NPV_DMA_RW, &dst_iova);
    uint8_t *s = npv_dma_vaddr(src), *d = npv_dma_vaddr(dst);
    for (int i = 0; i < 8192; i++)
        s[i] = (uint8_t)(i * 13 + 5);
    memset(d, 0, 8192);
    struct npv_testdev_desc copy = {
        .opcode = NPV_TESTDEV_OP_COPY, .src = src_iova, .dst = dst_iova, .len = 4096};
    struct npv_testdev_desc fill = {
        .opcode = NPV_TESTDEV_OP_FILL, .dst = dst_iova + 4096, .len = 4096, .pattern = 0x1a5};
    push(&copy, 100);
    push(&fill, 101);
    ck_assert_int_eq(npv_ring_submit(ring), 2);
    struct npv_cpl c[2];
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 2, GENEROUS_NS, c, 2), 2);
    ck_assert_uint_eq(c[0].cookie, 100);
    ck_assert_uint_eq(c[1].cookie, 101);
    ck_assert_int_eq(c[0].status, 0);
    ck_assert_int_eq(c[1].status, 0);
    ck_assert_int_eq(memcmp(s, d, 4096), 0);
    for (int i = 4096; i < 8192; i++)
        ck_assert_uint_eq(d[i], 0xa5);
    npv_dma_free(src);
    npv_dma_free(dst);
}
END_TEST

START_TEST(ring_wraps_across_many_batches_against_the_model)
{
    /* Every 5th job is a FILL of its own 64-byte cell with its sequence number: checked at reap. */
    const uint64_t total = 20000;
    npv_iova_t iova;
    struct npv_dma *cells = mapped_buffer(TD_ENTRIES * 64, NPV_DMA_RW, &iova);
    uint8_t *mem = npv_dma_vaddr(cells);
    uint64_t next = 0, reaped = 0, bad = 0;
    unsigned batch = 1;
    struct npv_cpl cpl[TD_ENTRIES];
    while (reaped < total) {
        unsigned room = TD_ENTRIES - npv_ring_in_flight(ring);
        unsigned n = batch < room ? batch : room;
        if (n > total - next)
            n = (unsigned)(total - next);
        for (unsigned i = 0; i < n; i++, next++) {
            struct npv_testdev_desc d = nop;
            if (next % 5 == 0)
                d = (struct npv_testdev_desc){.opcode = NPV_TESTDEV_OP_FILL,
                                              .dst = iova + (next % TD_ENTRIES) * 64,
                                              .len = 64,
                                              .pattern = (uint32_t)(next & 0xff)};
            bad += npv_ring_push(ring, &d, next) != 0;
        }
        npv_ring_submit(ring);
        batch = batch % (TD_ENTRIES + 3) + 7; /* sizes that do not divide the ring */
        int got = npv_ring_wait(ring, NPV_RING_WAIT_POLL, 1, GENEROUS_NS, cpl, TD_ENTRIES);
        ck_assert_msg(got > 0, "wait: %s", npv_strerror(got));
        for (int i = 0; i < got; i++, reaped++) {
            bad += cpl[i].cookie != reaped || cpl[i].status != 0;
            if (reaped % 5 == 0)
                bad += mem[(reaped % TD_ENTRIES) * 64 + 63] != (uint8_t)(reaped & 0xff);
        }
    }
    ck_assert_uint_eq(bad, 0);
    struct npv_ring_stats st;
    npv_ring_stats(ring, &st);
    ck_assert_uint_eq(st.completed, total);
    ck_assert_uint_eq(st.resets, 0);
    ck_assert_uint_gt(st.submitted / TD_ENTRIES, 100); /* many laps of the ring */
    npv_dma_free(cells);
}
END_TEST

/* After a recovery the ring takes and completes work again. */
static void assert_ring_works(void)
{
    push(&nop, 7777);
    ck_assert_int_eq(npv_ring_submit(ring), 1);
    struct npv_cpl c = wait_one(NPV_RING_WAIT_POLL);
    ck_assert_uint_eq(c.cookie, 7777);
    ck_assert_int_eq(c.status, 0);
}

START_TEST(hung_model_times_out_resets_fans_out_and_works_again)
{
    ck_assert_int_eq(npv_testdev_inject_fault(t.drv, NPV_TESTDEV_FAULT_HANG), 0);
    for (uint64_t i = 0; i < 3; i++)
        push(&nop, i);
    npv_ring_submit(ring);
    struct npv_cpl c[4];
    /* A wait that runs out harms nothing; the jobs' own deadlines (1 s default) fail them. */
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 1, 1 * MS, c, 4), 0);
    ck_assert_uint_eq(npv_ring_in_flight(ring), 3);
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 3, GENEROUS_NS, c, 4), 3);
    /* Claimed together, their deadlines pass within microseconds: the later may be either. */
    ck_assert_int_eq(c[0].status, -ETIMEDOUT);
    for (int i = 1; i < 3; i++)
        ck_assert(c[i].status == -ETIMEDOUT || c[i].status == -ECANCELED);
    struct npv_ring_stats st;
    npv_ring_stats(ring, &st);
    ck_assert_uint_eq(st.timeouts, 1);
    ck_assert_uint_eq(st.resets, 1);
    ck_assert(!npv_ring_dead(ring));
    assert_ring_works();
}
END_TEST

START_TEST(wild_head_from_the_model_is_a_device_fault_naming_the_value)
{
    ck_assert_int_eq(npv_testdev_inject_fault(t.drv, NPV_TESTDEV_FAULT_WILD_HEAD), 0);
    push(&nop, 1);
    push(&nop, 2);
    npv_ring_submit(ring);
    struct npv_cpl c[2];
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 2, GENEROUS_NS, c, 2), -NPV_EDEVFAULT);
    /* The model writes tail + entries + 7 as its completed head. */
    char want[32];
    snprintf(want, sizeof(want), "head %u,", 2 + TD_ENTRIES + 7);
    ck_assert_msg(strstr(last_err, want) != NULL, "logged: %s", last_err);
    ck_assert_int_eq(npv_ring_poll(ring, c, 2), 2);
    ck_assert_int_eq(c[0].status, -NPV_EDEVFAULT);
    ck_assert_int_eq(c[1].status, -ECANCELED);
    assert_ring_works();
}
END_TEST

START_TEST(dma_to_an_unmapped_iova_fails_the_job_with_the_device_error_word)
{
    npv_iova_t iova;
    struct npv_dma *b = mapped_buffer(4096, NPV_DMA_RW, &iova);
    memset(npv_dma_vaddr(b), 0, 4096);
    ck_assert_int_eq(npv_testdev_inject_fault(t.drv, NPV_TESTDEV_FAULT_DMA_UNMAPPED), 0);
    push(&nop, 10);
    struct npv_testdev_desc fill = {
        .opcode = NPV_TESTDEV_OP_FILL, .dst = iova, .len = 64, .pattern = 3};
    push(&fill, 11);
    npv_ring_submit(ring);
    struct npv_cpl c[2];
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 2, GENEROUS_NS, c, 2), 2);
    ck_assert_int_eq(c[0].status, 0);
    ck_assert_uint_eq(c[1].cookie, 11);
    ck_assert_int_eq(c[1].status, -EIO);
    ck_assert_uint_eq(c[1].dev_error, NPV_TESTDEV_ERR_DMA);
    ck_assert_uint_eq(((uint8_t *)npv_dma_vaddr(b))[0], 0);
    ck_assert(td_state(&t).fault);
    /* The engine stopped at the fault; a reset brings it back. */
    ck_assert_int_eq(npv_testdev_reset(t.drv), 0);
    assert_ring_works();
    npv_dma_free(b);
}
END_TEST

START_TEST(irq_waits_complete_through_the_models_msix_vector)
{
    struct npv_testdev_desc d = {.opcode = NPV_TESTDEV_OP_NOP, .flags = NPV_TESTDEV_DESC_IRQ};
    for (uint64_t i = 0; i < 200; i++) {
        push(&d, i);
        npv_ring_submit(ring);
        struct npv_cpl c = wait_one(i % 2 ? NPV_RING_WAIT_HYBRID : NPV_RING_WAIT_IRQ);
        ck_assert_uint_eq(c.cookie, i);
        ck_assert_int_eq(c.status, 0);
    }
    struct npv_ring_stats st;
    npv_ring_stats(ring, &st);
    ck_assert_uint_eq(st.completed, 200);
    ck_assert_uint_eq(st.timeouts, 0);
    /* Without the interrupt an IRQ wait would time out; some waits had to sleep on it. */
    ck_assert_uint_gt(st.irq_sleeps, 0);
    ck_assert_uint_gt(npv_irq_count(npv_testdev_irq(t.drv)), 0);
}
END_TEST

/*
 * The interrupt fires as the descriptor that asked for it completes, not once
 * the whole doorbell batch is worked: a driver that asks at the end of each
 * of its reap batches is then woken while the device works the next one.
 * Three descriptors behind one doorbell, the first two asking: two
 * interrupts (one per asking descriptor), where raising at the end of the
 * batch would make one.
 */
START_TEST(model_interrupts_as_each_flagged_descriptor_completes)
{
    int fd = npv_irq_fd(npv_testdev_irq(t.drv), 0);
    ck_assert_int_ge(fd, 0);
    struct npv_testdev_desc asks = {.opcode = NPV_TESTDEV_OP_NOP, .flags = NPV_TESTDEV_DESC_IRQ};
    struct npv_testdev_desc quiet = {.opcode = NPV_TESTDEV_OP_NOP};
    push(&asks, 0);
    push(&asks, 1);
    push(&quiet, 2);
    npv_ring_submit(ring);
    struct npv_cpl c[3];
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 3, GENEROUS_NS, c, 3), 3);
    /* The device raised its interrupts before it wrote the head that covers them. */
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    ck_assert_int_eq(poll(&pfd, 1, 1000), 1);
    uint64_t count = 0;
    ck_assert_int_eq(read(fd, &count, sizeof(count)), (ssize_t)sizeof(count));
    ck_assert_uint_eq(count, 2);
}
END_TEST

/* The eventfd's count, without waiting for one (0: no interrupt since it was last read). */
static uint64_t irq_count_now(void)
{
    struct pollfd pfd = {.fd = npv_irq_fd(npv_testdev_irq(t.drv), 0), .events = POLLIN};
    uint64_t count = 0;
    if (poll(&pfd, 1, 0) == 1)
        ck_assert_int_eq(read(pfd.fd, &count, sizeof(count)), (ssize_t)sizeof(count));
    return count;
}

/*
 * Event suppression: while nobody sleeps the model raises no interrupt, even
 * for descriptors that ask for one, so a polling caller costs the device
 * nothing; and an interrupt wait still wakes, since the engine sets the word
 * before it sleeps.
 */
START_TEST(irq_on_sleep_only_raises_nothing_for_polled_jobs_and_still_wakes_waits)
{
    ck_assert_int_eq(npv_testdev_irq_on_sleep_only(t.drv, true), 0);
    irq_count_now();
    struct npv_testdev_desc asks = {.opcode = NPV_TESTDEV_OP_NOP, .flags = NPV_TESTDEV_DESC_IRQ};
    for (uint64_t i = 0; i < 100; i++) {
        push(&asks, i);
        npv_ring_submit(ring);
        ck_assert_uint_eq(wait_one(NPV_RING_WAIT_POLL).cookie, i);
    }
    ck_assert_uint_eq(irq_count_now(), 0);
    /*
     * Jobs long enough (4 MiB fills) that a wait arms the word and sleeps
     * before they finish: the interrupt must still come.
     */
    npv_iova_t iova;
    struct npv_dma *b = mapped_buffer(4u << 20, NPV_DMA_RW, &iova);
    struct npv_testdev_desc slow = npv_testdev_fill(iova, 0x5a, 4u << 20, NPV_TESTDEV_DESC_IRQ);
    struct npv_ring_stats before, after;
    npv_ring_stats(ring, &before);
    for (uint64_t i = 100; i < 120; i++) {
        push(&slow, i);
        npv_ring_submit(ring);
        struct npv_cpl c = wait_one(i % 2 ? NPV_RING_WAIT_HYBRID : NPV_RING_WAIT_IRQ);
        ck_assert_uint_eq(c.cookie, i);
        ck_assert_int_eq(c.status, 0);
    }
    npv_ring_stats(ring, &after);
    ck_assert_uint_eq(after.timeouts, 0);
    ck_assert_uint_gt(after.irq_sleeps, before.irq_sleeps);
    npv_dma_free(b);
    /* It survives a reset (the driver programs the word again), and turns off. */
    ck_assert_int_eq(npv_testdev_reset(t.drv), 0);
    push(&asks, 120);
    npv_ring_submit(ring);
    ck_assert_uint_eq(wait_one(NPV_RING_WAIT_IRQ).cookie, 120);
    ck_assert_int_eq(npv_testdev_irq_on_sleep_only(t.drv, false), 0);
    irq_count_now();
    push(&asks, 121);
    npv_ring_submit(ring);
    ck_assert_uint_eq(wait_one(NPV_RING_WAIT_POLL).cookie, 121);
    struct pollfd pfd = {.fd = npv_irq_fd(npv_testdev_irq(t.drv), 0), .events = POLLIN};
    ck_assert_int_eq(poll(&pfd, 1, 1000), 1);
}
END_TEST

/* ---- unmap while the model's poller runs ---- */

#define BIG (16u << 20) /* the model's largest descriptor */

/*
 * One try: fill a buffer with a ring's worth of the largest descriptors and
 * unmap it at once. Returns how many jobs failed (0: the model finished them
 * all before the unmap came, and the race was not exercised).
 */
static unsigned unmap_under_running_fills(void)
{
    npv_iova_t iova;
    struct npv_dma *b = mapped_buffer(BIG, NPV_DMA_RW, &iova);
    uint8_t *mem = npv_dma_vaddr(b);
    struct npv_testdev_desc fill = {
        .opcode = NPV_TESTDEV_OP_FILL, .dst = iova, .len = BIG, .pattern = 0x5a};
    for (uint64_t i = 0; i < TD_ENTRIES; i++)
        push(&fill, i);
    npv_ring_submit(ring);
    ck_assert_int_eq(npv_dma_unmap(b, t.dom), 0);
    /* The client still owns the memory: any later write by the model would show here. */
    memset(mem, 0, BIG);
    struct npv_cpl c[TD_ENTRIES];
    unsigned got = 0, failed = 0;
    while (got < TD_ENTRIES) {
        int n = npv_ring_wait(ring, NPV_RING_WAIT_POLL, 1, 2000 * MS, c, TD_ENTRIES);
        if (n == 0)
            continue; /* the engine stopped at the fault: the jobs' deadlines fail the rest */
        ck_assert_msg(n > 0, "wait: %s", npv_strerror(n));
        for (int i = 0; i < n; i++)
            failed += c[i].status != 0;
        got += (unsigned)n;
    }
    size_t dirty = 0;
    for (size_t i = 0; i < BIG; i += 64)
        dirty += mem[i] != 0;
    ck_assert_uint_eq(dirty, 0);
    /* A fault stops the engine: a reset starts the next try clean. */
    ck_assert_int_eq(npv_testdev_reset(t.drv), 0);
    npv_dma_free(b);
    return failed;
}

START_TEST(model_never_writes_a_buffer_after_its_unmap_returns)
{
    unsigned failed = 0;
    /* Each try moves 1 GiB; the unmap lands in it unless this process sleeps through all of it. */
    for (int try = 0; try < 3 && failed == 0; try++)
        failed = unmap_under_running_fills();
    ck_assert_msg(failed > 0, "the model finished every fill before the unmap, three times");
    assert_ring_works();
}
END_TEST

#define BLOCKER_IOVA 0x7e000000ull

START_TEST(model_follows_ring_and_status_remapped_at_the_same_iova)
{
    for (uint64_t i = 0; i < 3; i++)
        push(&nop, i);
    npv_ring_submit(ring);
    struct npv_cpl c[3];
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 3, GENEROUS_NS, c, 3), 3);

    /*
     * New memory behind the same IOVAs, the device not reprogrammed: the
     * model must take the new mappings, not pointers into the old ones
     * (which the server has unmapped: a stale use would crash the model or
     * land in whatever the address holds now). The driver keeps the ring and
     * the status block in one buffer; both move.
     */
    struct npv_dma *mem = npv_testdev_ring_memory(t.drv), *mem2;
    size_t size = npv_dma_size(mem), ring_bytes = TD_ENTRIES * sizeof(struct npv_testdev_desc);
    npv_iova_t iova;
    ck_assert_int_eq(npv_dma_iova(mem, t.dom, &iova), 0);
    ck_assert_int_eq(npv_dma_alloc(t.ctx, size, NULL, &mem2), 0);
    ck_assert_int_eq(npv_dma_unmap(mem, t.dom), 0);
    memcpy(npv_dma_vaddr(mem2), npv_dma_vaddr(mem), size);
    /*
     * The server would likely mmap the new buffer where the old one was:
     * buffers mapped first take those addresses, holding bytes no valid
     * descriptor has, so a stale pointer cannot pass for a fresh one.
     */
    struct npv_dma *blocker[2];
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(npv_dma_alloc(t.ctx, size, NULL, &blocker[i]), 0);
        memset(npv_dma_vaddr(blocker[i]), 0xff, size);
        ck_assert_int_eq(npv_dma_map_at(blocker[i], t.dom, BLOCKER_IOVA + i * size, NPV_DMA_RW), 0);
    }
    ck_assert_int_eq(npv_dma_map_at(mem2, t.dom, iova, NPV_DMA_RW), 0);

    /*
     * Descriptor 3 is a NOP in the new ring; the ring engine still writes the
     * old memory, where it puts an opcode the device refuses.
     */
    struct npv_testdev_desc *now = npv_dma_vaddr(mem2);
    now[3] = nop;
    const struct npv_testdev_desc bad = {.opcode = 99};
    push(&bad, 3);
    ck_assert_int_eq(npv_ring_submit(ring), 1);
    const struct testdev_status *st =
        (const void *)((const uint8_t *)npv_dma_vaddr(mem2) + ring_bytes);
    uint64_t deadline = now_ns() + GENEROUS_NS;
    while (__atomic_load_n(&st->completed_head, __ATOMIC_ACQUIRE) != 4)
        ck_assert_msg(now_ns() < deadline, "model never completed in the new ring");
    ck_assert_uint_eq(st->error, NPV_TESTDEV_ERR_NONE);
    const struct testdev_status *old_st =
        (const void *)((const uint8_t *)npv_dma_vaddr(mem) + ring_bytes);
    ck_assert_uint_eq(old_st->completed_head, 3);
    npv_dma_free(mem2);
    npv_dma_free(blocker[0]);
    npv_dma_free(blocker[1]);
}
END_TEST

START_TEST(ring_memory_unmapped_under_a_running_model_is_a_device_fault)
{
    struct npv_dma *mem = npv_testdev_ring_memory(t.drv);
    size_t size = npv_dma_size(mem), ring_bytes = TD_ENTRIES * sizeof(struct npv_testdev_desc);
    npv_iova_t iova;
    ck_assert_int_eq(npv_dma_iova(mem, t.dom, &iova), 0);
    ck_assert_int_eq(npv_dma_unmap(mem, t.dom), 0);
    push(&nop, 1);
    npv_ring_submit(ring);
    uint64_t deadline = now_ns() + GENEROUS_NS;
    while (!td_state(&t).fault)
        ck_assert_msg(now_ns() < deadline, "no fault reported");
    /* The device names an address of the ring or of the status block it could not reach. */
    npv_iova_t bad = td_state(&t).fault_iova;
    ck_assert_msg(bad >= iova && bad < iova + size, "fault at 0x%llx", (unsigned long long)bad);
    /* The client's copy of the status block was never written. */
    const struct testdev_status *st =
        (const void *)((const uint8_t *)npv_dma_vaddr(mem) + ring_bytes);
    ck_assert_uint_eq(st->completed_head, 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("ring against the testdev model");
    TCase *tc = tcase_create("poll");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, ring_runs_copy_and_fill_through_the_model);
    tcase_add_test(tc, ring_wraps_across_many_batches_against_the_model);
    tcase_add_test(tc, hung_model_times_out_resets_fans_out_and_works_again);
    tcase_add_test(tc, wild_head_from_the_model_is_a_device_fault_naming_the_value);
    tcase_add_test(tc, dma_to_an_unmapped_iova_fails_the_job_with_the_device_error_word);
    suite_add_tcase(s, tc);
    tc = tcase_create("irq");
    tcase_add_checked_fixture(tc, setup_irq, teardown);
    tcase_add_test(tc, irq_waits_complete_through_the_models_msix_vector);
    tcase_add_test(tc, model_interrupts_as_each_flagged_descriptor_completes);
    tcase_add_test(tc, irq_on_sleep_only_raises_nothing_for_polled_jobs_and_still_wakes_waits);
    suite_add_tcase(s, tc);
    tc = tcase_create("unmap");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, model_never_writes_a_buffer_after_its_unmap_returns);
    tcase_add_test(tc, model_follows_ring_and_status_remapped_at_the_same_iova);
    tcase_add_test(tc, ring_memory_unmapped_under_a_running_model_is_a_device_fault);
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

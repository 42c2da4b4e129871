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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
static struct npv_irq *irq;
static char last_err[512];

static void keep_errors(void *user, enum npv_log_level level, const char *msg)
{
    (void)user;
    if (level == NPV_LOG_ERROR)
        snprintf(last_err, sizeof(last_err), "%s", msg);
}

/* The reset callback: CTRL.RESET forgets the ring; then base, size, status, enable. */
static int program(void *arg)
{
    struct td *d = arg;
    uint32_t ctrl = TESTDEV_CTRL_ENABLE | (irq != NULL ? TESTDEV_CTRL_IRQ_ENABLE : 0);
    int rc = npv_bar_write(d->bar, TESTDEV_REG_CTRL, 4, TESTDEV_CTRL_RESET);
    if (rc == 0)
        rc = npv_bar_write(d->bar, TESTDEV_REG_RING_BASE, 8, d->ring_iova);
    if (rc == 0)
        rc = npv_bar_write(d->bar, TESTDEV_REG_RING_ENTRIES, 4, TD_ENTRIES);
    if (rc == 0)
        rc = npv_bar_write(d->bar, TESTDEV_REG_STATUS_BASE, 8, d->status_iova);
    if (rc == 0)
        rc = npv_bar_write(d->bar, TESTDEV_REG_CTRL, 4, ctrl);
    return rc;
}

static void ring_open(bool with_irq)
{
    if (with_irq)
        ck_assert_int_eq(npv_irq_enable(t.dev, NPV_IRQ_MSIX, 1, &irq), 0);
    memset(npv_dma_vaddr(t.ring), 0, 4096);
    ck_assert_int_eq(program(&t), 0);
    struct npv_ring_config cfg = {
        .entries = TD_ENTRIES,
        .desc_size = sizeof(struct testdev_desc),
        .desc_vaddr = npv_dma_vaddr(t.ring),
        .desc_iova = t.ring_iova,
        .status_vaddr = npv_dma_vaddr(t.status),
        .status_iova = t.status_iova,
        .status_size = sizeof(struct testdev_status),
        .fields = {.head = offsetof(struct testdev_status, completed_head),
                   .error = offsetof(struct testdev_status, error),
                   .error_index = offsetof(struct testdev_status, error_index)},
        .db_bar = t.bar,
        .db_off = TESTDEV_REG_DOORBELL,
        .db_width = 4,
        .db_format = NPV_RING_DB_INDEX,
        .irq = irq,
        .irq_vec = 0,
        .reset = program,
        .reset_arg = &t,
    };
    ck_assert_int_eq(npv_ring_new(t.ctx, &cfg, &ring), 0);
}

static void setup(void)
{
    vu_server_start(&srv, vu_serve_testdev, NULL);
    td_open(&t, srv.path);
    last_err[0] = '\0';
    npv_ctx_set_log_sink(t.ctx, keep_errors, NULL);
    ring_open(false);
}

static void setup_irq(void)
{
    vu_server_start(&srv, vu_serve_testdev, NULL);
    td_open(&t, srv.path);
    npv_ctx_set_log_sink(t.ctx, keep_errors, NULL);
    ring_open(true);
}

static void teardown(void)
{
    npv_ring_free(ring);
    ring = NULL;
    npv_irq_disable(irq);
    irq = NULL;
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

static void push(const struct testdev_desc *d, uint64_t cookie)
{
    ck_assert_int_eq(npv_ring_push(ring, d, cookie), 0);
}

static const struct testdev_desc nop = {.opcode = TESTDEV_OP_NOP};

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
    struct testdev_desc copy = {
        .opcode = TESTDEV_OP_COPY, .src = src_iova, .dst = dst_iova, .len = 4096};
    struct testdev_desc fill = {
        .opcode = TESTDEV_OP_FILL, .dst = dst_iova + 4096, .len = 4096, .pattern = 0x1a5};
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
            struct testdev_desc d = nop;
            if (next % 5 == 0)
                d = (struct testdev_desc){.opcode = TESTDEV_OP_FILL,
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
    ck_assert_int_eq(npv_bar_write(t.bar, TESTDEV_REG_FAULT_INJECT, 4, TESTDEV_FAULT_HANG), 0);
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
    ck_assert_int_eq(npv_bar_write(t.bar, TESTDEV_REG_FAULT_INJECT, 4, TESTDEV_FAULT_WILD_HEAD), 0);
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
    ck_assert_int_eq(npv_bar_write(t.bar, TESTDEV_REG_FAULT_INJECT, 4, TESTDEV_FAULT_DMA_UNMAPPED),
                     0);
    push(&nop, 10);
    struct testdev_desc fill = {.opcode = TESTDEV_OP_FILL, .dst = iova, .len = 64, .pattern = 3};
    push(&fill, 11);
    npv_ring_submit(ring);
    struct npv_cpl c[2];
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 2, GENEROUS_NS, c, 2), 2);
    ck_assert_int_eq(c[0].status, 0);
    ck_assert_uint_eq(c[1].cookie, 11);
    ck_assert_int_eq(c[1].status, -EIO);
    ck_assert_uint_eq(c[1].dev_error, TESTDEV_ERR_DMA);
    ck_assert_uint_eq(((uint8_t *)npv_dma_vaddr(b))[0], 0);
    uint64_t v;
    ck_assert_int_eq(npv_bar_read(t.bar, TESTDEV_REG_STATUS, 4, &v), 0);
    ck_assert_uint_eq(v & TESTDEV_STATUS_FAULT, TESTDEV_STATUS_FAULT);
    /* The engine stopped at the fault; a reset brings it back. */
    ck_assert_int_eq(npv_ring_reset(ring), 0);
    assert_ring_works();
    npv_dma_free(b);
}
END_TEST

START_TEST(irq_waits_complete_through_the_models_msix_vector)
{
    struct testdev_desc d = {.opcode = TESTDEV_OP_NOP, .flags = TESTDEV_DESC_IRQ};
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
    ck_assert_uint_gt(npv_irq_count(irq), 0);
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
    struct testdev_desc fill = {
        .opcode = TESTDEV_OP_FILL, .dst = iova, .len = BIG, .pattern = 0x5a};
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
    ck_assert_int_eq(npv_ring_reset(ring), 0);
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
     * land in whatever the address holds now).
     */
    npv_iova_t ring_iova = t.ring_iova, status_iova = t.status_iova;
    struct npv_dma *ring2, *status2;
    ck_assert_int_eq(npv_dma_alloc(t.ctx, 4096, NULL, &ring2), 0);
    ck_assert_int_eq(npv_dma_alloc(t.ctx, 4096, NULL, &status2), 0);
    ck_assert_int_eq(npv_dma_unmap(t.ring, t.dom), 0);
    ck_assert_int_eq(npv_dma_unmap(t.status, t.dom), 0);
    memcpy(npv_dma_vaddr(status2), npv_dma_vaddr(t.status), 4096);
    /*
     * The server would likely mmap the new buffers where the old ones were:
     * buffers mapped first take those addresses, holding bytes no valid
     * descriptor has, so a stale pointer cannot pass for a fresh one.
     */
    struct npv_dma *blocker[2];
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(npv_dma_alloc(t.ctx, 4096, NULL, &blocker[i]), 0);
        memset(npv_dma_vaddr(blocker[i]), 0xff, 4096);
        ck_assert_int_eq(npv_dma_map_at(blocker[i], t.dom, BLOCKER_IOVA + i * 4096u, NPV_DMA_RW),
                         0);
    }
    ck_assert_int_eq(npv_dma_map_at(ring2, t.dom, ring_iova, NPV_DMA_RW), 0);
    ck_assert_int_eq(npv_dma_map_at(status2, t.dom, status_iova, NPV_DMA_RW), 0);

    /* Descriptor 3 in the new ring, the doorbell rung by hand; the old ring holds a FILL. */
    struct testdev_desc *old = npv_dma_vaddr(t.ring);
    old[3] = (struct testdev_desc){.opcode = 99};
    struct testdev_desc *now = npv_dma_vaddr(ring2);
    now[3] = nop;
    npv_bar_write32_release(t.bar, TESTDEV_REG_DOORBELL, 4);
    const struct testdev_status *st = npv_dma_vaddr(status2);
    uint64_t deadline = now_ns() + GENEROUS_NS;
    while (__atomic_load_n(&st->completed_head, __ATOMIC_ACQUIRE) != 4)
        ck_assert_msg(now_ns() < deadline, "model never completed in the new ring");
    ck_assert_uint_eq(st->error, TESTDEV_ERR_NONE);
    ck_assert_uint_eq(((const struct testdev_status *)npv_dma_vaddr(t.status))->completed_head, 3);
    npv_dma_free(ring2);
    npv_dma_free(status2);
    npv_dma_free(blocker[0]);
    npv_dma_free(blocker[1]);
}
END_TEST

START_TEST(status_block_unmapped_under_a_running_model_is_a_device_fault)
{
    ck_assert_int_eq(npv_dma_unmap(t.status, t.dom), 0);
    push(&nop, 1);
    npv_ring_submit(ring);
    uint64_t v = 0, deadline = now_ns() + GENEROUS_NS;
    while (npv_bar_read(t.bar, TESTDEV_REG_STATUS, 4, &v) == 0 && !(v & TESTDEV_STATUS_FAULT))
        ck_assert_msg(now_ns() < deadline, "no fault reported");
    ck_assert_int_eq(npv_bar_read(t.bar, TESTDEV_REG_FAULT_IOVA, 8, &v), 0);
    ck_assert_uint_eq(v, t.status_iova);
    /* The client's copy of the status block was never written. */
    ck_assert_uint_eq(((const struct testdev_status *)npv_dma_vaddr(t.status))->completed_head, 0);
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
    suite_add_tcase(s, tc);
    tc = tcase_create("unmap");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, model_never_writes_a_buffer_after_its_unmap_returns);
    tcase_add_test(tc, model_follows_ring_and_status_remapped_at_the_same_iova);
    tcase_add_test(tc, status_block_unmapped_under_a_running_model_is_a_device_fault);
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

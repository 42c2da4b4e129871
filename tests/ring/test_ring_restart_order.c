/* SPDX-License-Identifier: MIT */
/*
 * Cache maintenance order on a restart, observed through the ring's sync
 * seam (lib/ring/ring_internal.h): on non-coherent DMA the status block must
 * be zeroed and cleaned to the point of coherency BEFORE the reset callback
 * enables the device (otherwise the next clean+invalidate writes the CPU's
 * zero over the device's first completion), and zeroed and cleaned AGAIN
 * after the callback returns and before the next doorbell, so that a status
 * write the device made while the reset was stopping it does not survive the
 * reset (ring.h: the restarted device writes nothing to the block before the
 * next doorbell). The recorder logs every sync and every reset, in order,
 * with what the status block and the doorbell held at that moment.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/dma.h>
#include <npuvfio/domain.h>
#include <npuvfio/ring.h>

#include "fake_dev.h"
#include "fake_sink.h"
#include "ring_internal.h"

#define LONG_NS    (10ull * 1000000000ull)
#define MAX_EVENTS 64
#define STALE_MARKER                                                                               \
    0x77u /* a status write that raced the reset, landing as the callback stops the device */

enum ev_kind { EV_FOR_DEVICE, EV_FOR_CPU, EV_RESET };

struct event {
    enum ev_kind kind;
    const struct npv_dma *dma;
    size_t off, len;
    bool status_zero; /* the whole status block read 0 */
    uint32_t doorbell;
};

static struct npv_ctx *ctx;
static struct fake_dev dev;
static struct npv_ring_config cfg;
static struct npv_ring *ring;
static struct npv_dma *ring_dma, *status_dma;
static struct event events[MAX_EVENTS];
static unsigned nev;

static void quiet_log(void *user, enum npv_log_level level, const char *msg)
{
    (void)user;
    (void)level;
    (void)msg;
}

static bool status_is_zero(void)
{
    const uint8_t *p = (const uint8_t *)dev.status;
    for (size_t i = 0; i < cfg.status_size; i++)
        if (p[i] != 0)
            return false;
    return true;
}

static void record(enum ev_kind kind, const struct npv_dma *dma, size_t off, size_t len)
{
    if (nev == MAX_EVENTS)
        return;
    events[nev++] = (struct event){.kind = kind,
                                   .dma = dma,
                                   .off = off,
                                   .len = len,
                                   .status_zero = status_is_zero(),
                                   .doorbell = fake_dev_doorbell(&dev)};
}

static void rec_for_device(void *arg, struct npv_dma *dma, size_t off, size_t len)
{
    (void)arg;
    record(EV_FOR_DEVICE, dma, off, len);
}

static void rec_for_cpu(void *arg, struct npv_dma *dma, size_t off, size_t len)
{
    (void)arg;
    record(EV_FOR_CPU, dma, off, len);
}

static const struct npv_ring_sync_hook recorder = {
    .for_device = rec_for_device, .for_cpu = rec_for_cpu, .arg = NULL};

/* Inside the reset callback: a write the device made before it stopped lands now. */
static void on_enable(struct fake_dev *d)
{
    record(EV_RESET, NULL, 0, 0);
    __atomic_store_n(&d->status->head, 3, __ATOMIC_RELEASE);
    __atomic_store_n(&d->status->error_index, STALE_MARKER, __ATOMIC_RELEASE);
}

static void setup(void)
{
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    npv_ctx_set_log_sink(ctx, quiet_log, NULL);
    ck_assert_int_eq(npv_dma_alloc(ctx, 4096, NULL, &ring_dma), 0);
    ck_assert_int_eq(npv_dma_alloc(ctx, 4096, NULL, &status_dma), 0);
    fake_dev_init(&dev, 64, &cfg);
    fake_dev_use_memory(&dev, &cfg, npv_dma_vaddr(ring_dma), npv_dma_vaddr(status_dma));
    cfg.desc_dma = ring_dma;
    cfg.status_dma = status_dma;
    /* Whatever the memory held before: npv_ring_new must leave the block empty. */
    memset(dev.status, 0xff, sizeof(*dev.status));
    ck_assert_int_eq(npv_ring_new(ctx, &cfg, &ring), 0);
    ck_assert(status_is_zero());
    npv_ring_set_sync_hook(ring, &recorder);
    dev.on_enable = on_enable;
    nev = 0;
}

static void teardown(void)
{
    npv_ring_free(ring);
    ring = NULL;
    fake_dev_fini(&dev);
    npv_dma_free(ring_dma);
    npv_dma_free(status_dma);
    npv_ctx_free(ctx);
}

static void push(uint64_t seq, uint64_t timeout_ns)
{
    void *slot;
    ck_assert_int_eq(npv_ring_next_timed(ring, seq, timeout_ns, &slot), 0);
    struct fake_desc *d = slot;
    memset(d, 0, sizeof(*d));
    d->seq = seq;
}

static int find(enum ev_kind kind, const struct npv_dma *dma, unsigned from)
{
    for (unsigned i = from; i < nev; i++)
        if (events[i].kind == kind && (dma == NULL || events[i].dma == dma))
            return (int)i;
    return -1;
}

/*
 * The recovery's order: the block zeroed and cleaned, then the device reset
 * and enabled, then the block zeroed and cleaned again before any doorbell.
 */
static void assert_cleaned_before_enable(void)
{
    int reset = find(EV_RESET, NULL, 0);
    ck_assert_msg(reset >= 0, "the reset callback was not called");
    int clean = -1;
    for (int i = 0; i < reset; i++)
        if (events[i].kind == EV_FOR_DEVICE && events[i].dma == status_dma)
            clean = i;
    ck_assert_msg(clean >= 0, "the status block was not cleaned before the device was enabled");
    ck_assert_msg(events[clean].status_zero, "the status block was cleaned before it was zeroed");
    ck_assert_uint_le(events[clean].off, 0);
    ck_assert_uint_ge(events[clean].off + events[clean].len, cfg.status_size);
    /* After the callback: zeroed and cleaned again, the doorbell not yet rung. */
    int again = find(EV_FOR_DEVICE, status_dma, (unsigned)reset + 1);
    ck_assert_msg(again >= 0, "the status block was not cleaned after the reset callback");
    ck_assert_msg(events[again].status_zero, "a write racing the reset survived it");
    ck_assert_uint_le(events[again].off, 0);
    ck_assert_uint_ge(events[again].off + events[again].len, cfg.status_size);
    ck_assert_uint_eq(events[again].doorbell, 0);
    ck_assert_uint_eq(__atomic_load_n(&dev.status->head, __ATOMIC_ACQUIRE), 0);
    ck_assert_uint_eq(__atomic_load_n(&dev.status->error_index, __ATOMIC_ACQUIRE), 0);
}

START_TEST(ring_reset_zeroes_and_cleans_the_status_block_before_enabling_the_device)
{
    push(0, 0);
    push(1, 0);
    ck_assert_int_eq(npv_ring_submit(ring), 2);
    fake_dev_step(&dev, 1);
    ck_assert_int_eq(npv_ring_reset(ring), 0);
    assert_cleaned_before_enable();
}
END_TEST

START_TEST(ring_deadline_recovery_cleans_the_status_block_before_enabling_the_device)
{
    push(0, 1);
    ck_assert_int_eq(npv_ring_submit(ring), 1);
    struct npv_cpl cpl[4];
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 1, LONG_NS, cpl, 4), 1);
    ck_assert_int_eq(cpl[0].status, -ETIMEDOUT);
    assert_cleaned_before_enable();
}
END_TEST

START_TEST(ring_fault_recovery_cleans_the_status_block_before_enabling_the_device)
{
    push(0, 0);
    ck_assert_int_eq(npv_ring_submit(ring), 1);
    fake_dev_write_head(&dev, 5);
    struct npv_cpl cpl[4];
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 4), -NPV_EDEVFAULT);
    assert_cleaned_before_enable();
}
END_TEST

START_TEST(ring_cleans_descriptors_before_the_doorbell_and_invalidates_status_before_reading)
{
    push(0, 0);
    push(1, 0);
    ck_assert_int_eq(npv_ring_submit(ring), 2);
    int desc = find(EV_FOR_DEVICE, ring_dma, 0);
    ck_assert_int_ge(desc, 0);
    ck_assert_uint_eq(events[desc].doorbell, 0); /* before the doorbell announced them */
    ck_assert_uint_eq(events[desc].off, 0);
    ck_assert_uint_eq(events[desc].len, 2 * sizeof(struct fake_desc));
    fake_dev_step(&dev, UINT32_MAX);
    unsigned before = nev;
    struct npv_cpl cpl[4];
    ck_assert_int_eq(npv_ring_poll(ring, cpl, 4), 2);
    ck_assert_int_ge(find(EV_FOR_CPU, status_dma, before), 0);
}
END_TEST

START_TEST(ring_round_trips_with_real_cache_maintenance_on_a_non_coherent_domain)
{
    /*
     * No recorder: the real npv_dma_sync_* calls, which on arm64 run dc cvac
     * / dc civac because the domain behind the buffers is not coherent (the
     * arm64 run under qemu executes them; x86 leaves them out).
     */
    npv_ring_set_sync_hook(ring, NULL);
    struct npv_domain *dom;
    struct fake_sink nc;
    fake_sink_init(&nc, 0);
    ck_assert_int_eq(npv_domain_new(ctx, NULL, &dom), 0);
    ck_assert_int_eq(npv_domain_add_sink(dom, &nc.sink), 0);
    ck_assert_int_eq(npv_dma_map(ring_dma, dom, NPV_DMA_RW, NULL), 0);
    ck_assert_int_eq(npv_dma_map(status_dma, dom, NPV_DMA_RW, NULL), 0);
    ck_assert_int_eq(npv_domain_coherent(dom), 0);
    struct npv_cpl cpl[8];
    uint64_t bad = 0;
    for (uint64_t i = 0; i < 1000; i++) {
        push(i, 0);
        bad += npv_ring_submit(ring) != 1;
        fake_dev_step(&dev, UINT32_MAX);
        bad += npv_ring_poll(ring, cpl, 8) != 1 || cpl[0].cookie != i || cpl[0].status != 0;
    }
    ck_assert_int_eq(npv_ring_reset(ring), 0);
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_eq(dev.bad_descs, 0);
    npv_domain_remove_sink(dom, &nc.sink, true);
    npv_domain_put(dom);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ring_restart_order");
    TCase *tc = tcase_create("order");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, ring_reset_zeroes_and_cleans_the_status_block_before_enabling_the_device);
    tcase_add_test(tc, ring_deadline_recovery_cleans_the_status_block_before_enabling_the_device);
    tcase_add_test(tc, ring_fault_recovery_cleans_the_status_block_before_enabling_the_device);
    tcase_add_test(
        tc, ring_cleans_descriptors_before_the_doorbell_and_invalidates_status_before_reading);
    tcase_add_test(tc, ring_round_trips_with_real_cache_maintenance_on_a_non_coherent_domain);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* SPDX-License-Identifier: MIT */
/*
 * Issue 24 items 2 and 3 on the AICore: the sample graph's operands in
 * caller memory (npv_dma_wrap of a memfd mapping, npv_aicore_mem_map) run
 * exact; memory a vfio-user server cannot reach is refused; a mapping a run
 * names is not unmapped while the run is prepared or active, or while a run
 * the host abandoned may still be on the device; a per-run budget
 * (npv_aicore_prepare_within) fails a stalled run, or a run still waiting
 * for the other slot, with -ETIMEDOUT on its own budget while the run beside
 * it completes exact. Faults and the vfio-user refusal need the model.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/stats.h>

#include "aic_driver.h"
#include "npv_test.h"

#define MS (1000000ull)
/* The per-task deadline (the device's watchdog is half of it): only a budget ends a hang sooner. */
#define TASK_TIMEOUT (10000 * MS)

static struct aicd d;

static void setup(void)
{
    struct npv_aicore_config cfg = {.task_timeout_ns = TASK_TIMEOUT};
    aicd_open(&d, NULL, &cfg);
}

static void teardown(void)
{
    aicd_close(&d);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct npv_aicore_counters counters(void)
{
    struct npv_aicore_counters c;
    npv_aicore_counters(d.ac, &c);
    return c;
}

/* The sample graph's operands in a memfd the caller maps shared. */
struct caller_graph {
    int fd;
    void *base;
    size_t len;
    struct npv_dma *dma;
    struct aicore_sample_graph g;
};

static void caller_graph_new(struct caller_graph *c)
{
    c->len = (aicore_sample_len(d.ac) + 4095u) & ~(size_t)4095u;
    c->fd = memfd_create("aicore-caller-tensors", MFD_CLOEXEC);
    ck_assert_int_ge(c->fd, 0);
    ck_assert_int_eq(ftruncate(c->fd, (off_t)c->len), 0);
    c->base = mmap(NULL, c->len, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, 0);
    ck_assert_ptr_ne(c->base, MAP_FAILED);
    ck_assert_int_eq(npv_dma_wrap(d.t.ctx, c->base, c->len, c->fd, 0, 0, &c->dma), 0);
    int r = aicore_sample_build_in(d.ac, false, c->dma, &c->g);
    ck_assert_msg(r == 0, "build in caller memory: %s", npv_strerror(r));
    ck_assert_ptr_eq(c->g.mem, c->base);
}

static void caller_graph_free(struct caller_graph *c)
{
    aicore_sample_free(d.ac, &c->g);
    ck_assert_ptr_null(c->g.dma); /* unmapped */
    npv_dma_free(c->dma);
    ck_assert_int_eq(munmap(c->base, c->len), 0);
    close(c->fd);
}

static struct npv_aicore_run *prepare(struct aicore_sample_graph *g, unsigned slot, uint32_t seed,
                                      uint64_t budget_ns)
{
    struct npv_aicore_run *run;
    aicore_sample_fill(g, seed);
    int r = budget_ns != 0 ? npv_aicore_prepare_within(d.ac, slot, &g->desc, budget_ns, &run)
                           : npv_aicore_prepare(d.ac, slot, &g->desc, &run);
    ck_assert_msg(r == 0, "prepare: %s", npv_strerror(r));
    return run;
}

START_TEST(operands_in_a_memfd_run_exact)
{
    struct caller_graph c;
    caller_graph_new(&c);
    for (uint32_t seed = 1; seed <= 3; seed++) {
        struct npv_aicore_run *run = prepare(&c.g, seed & 1u, seed, 0);
        ck_assert_int_eq(npv_aicore_launch(run), 0);
        ck_assert_int_eq(npv_aicore_wait(run, AIC_GENEROUS_NS), 0);
        ck_assert_uint_eq(aicore_sample_check(&c.g), 0);
        ck_assert_int_eq(npv_aicore_release(run), 0);
    }
    /* The outputs are in the file: another mapping of it reads them. */
    void *again = mmap(NULL, c.len, PROT_READ, MAP_SHARED, c.fd, 0);
    ck_assert_ptr_ne(again, MAP_FAILED);
    ck_assert_int_eq(memcmp(again, c.base, c.len), 0);
    munmap(again, c.len);
    npv_iova_t iova;
    ck_assert_int_eq(npv_aicore_mem_map(d.ac, c.dma, NPV_DMA_RW, &iova), -EEXIST);
    caller_graph_free(&c);
}
END_TEST

START_TEST(memory_a_vfio_user_server_cannot_reach_is_refused)
{
    aic_require_model("vfio-user only: a kernel IOMMU maps anonymous memory");
    void *heap = aligned_alloc(4096, 8192);
    ck_assert_ptr_nonnull(heap);
    struct npv_dma *dma;
    ck_assert_int_eq(npv_dma_wrap(d.t.ctx, heap, 8192, -1, 0, 0, &dma), 0);
    npv_iova_t iova;
    ck_assert_int_eq(npv_aicore_mem_map(d.ac, dma, NPV_DMA_READ, &iova), -NPV_ENOTSHARED);
    ck_assert_int_eq(npv_aicore_mem_unmap(d.ac, dma), -ENOENT);
    npv_dma_free(dma);
    free(heap);
}
END_TEST

START_TEST(memory_a_run_names_is_not_unmapped_until_the_run_is_over)
{
    struct caller_graph c;
    caller_graph_new(&c);
    /* Another caller buffer no run names unmaps at any time. */
    struct caller_graph other;
    caller_graph_new(&other);
    struct npv_aicore_run *run = prepare(&c.g, 0, 5, 0);
    ck_assert_int_eq(npv_aicore_mem_unmap(d.ac, c.dma), -EBUSY); /* prepared */
    ck_assert_int_eq(npv_aicore_launch(run), 0);
    ck_assert_int_eq(npv_aicore_mem_unmap(d.ac, c.dma), -EBUSY); /* active */
    caller_graph_free(&other);
    ck_assert_int_eq(npv_aicore_wait(run, AIC_GENEROUS_NS), 0);
    ck_assert_uint_eq(aicore_sample_check(&c.g), 0); /* the refusals changed nothing */
    ck_assert_int_eq(npv_aicore_release(run), 0);
    caller_graph_free(&c);
}
END_TEST

START_TEST(an_abandoned_run_keeps_its_memory_mapped_until_the_reset)
{
    aic_require_model("fault injection is the model's test port");
    struct caller_graph c;
    caller_graph_new(&c);
    aic_fault(&d.t, npv_aicore_phys_aic(d.t.clusters, 0), AICORE_FAULT_HANG, 0);
    struct npv_aicore_run *run = prepare(&c.g, 0, 6, 100 * MS);
    ck_assert_int_eq(npv_aicore_launch(run), 0);
    ck_assert_int_eq(npv_aicore_wait(run, AIC_GENEROUS_NS), -ETIMEDOUT);
    ck_assert_int_eq(npv_aicore_release(run), 0);
    /* The device may still be running it: no unmap before the reset. */
    ck_assert_int_eq(npv_aicore_mem_unmap(d.ac, c.dma), -EBUSY);
    ck_assert_int_eq(npv_aicore_reset(d.ac), 0);
    caller_graph_free(&c);
}
END_TEST

START_TEST(a_stalled_run_fails_on_its_budget_and_the_next_slot_runs_exact)
{
    aic_require_model("fault injection is the model's test port");
    aic_fault(&d.t, npv_aicore_phys_aic(d.t.clusters, 0), AICORE_FAULT_HANG, 0);
    uint64_t t0 = now_ns();
    struct npv_aicore_run *stalled = prepare(&d.g[0], 0, 7, 100 * MS);
    ck_assert_int_eq(npv_aicore_launch(stalled), 0);
    struct npv_aicore_run *next = prepare(&d.g[1], 1, 8, 0); /* prepared behind it */
    ck_assert_int_eq(npv_aicore_wait(stalled, AIC_GENEROUS_NS), -ETIMEDOUT);
    uint64_t took = now_ns() - t0;
    ck_assert_uint_ge(took, 100 * MS);
    ck_assert_msg(took < TASK_TIMEOUT / 4, "the hang ended after %llu ms: not on its budget",
                  (unsigned long long)(took / MS));
    struct npv_aicore_result res;
    ck_assert_int_eq(npv_aicore_result(stalled, &res), 0);
    ck_assert_int_eq(res.status, -ETIMEDOUT);
    ck_assert_int_eq(npv_aicore_release(stalled), 0);
    /* The neighbour launches on the reset device and is exact. */
    ck_assert_int_eq(npv_aicore_launch(next), 0);
    ck_assert_int_eq(npv_aicore_wait(next, AIC_GENEROUS_NS), 0);
    ck_assert_uint_eq(aicore_sample_check(&d.g[1]), 0);
    ck_assert_int_eq(npv_aicore_release(next), 0);
    struct npv_aicore_counters c = counters();
    ck_assert_uint_eq(c.timeouts, 1);
    ck_assert_uint_eq(c.resets, 1);
}
END_TEST

START_TEST(a_run_past_its_budget_before_launch_fails_unlaunched_and_its_neighbour_is_exact)
{
    aic_require_model("fault injection is the model's test port");
    struct npv_aicore_counters before = counters();
    /* A slow but healthy run: one ACK 300 ms late. */
    aic_fault(&d.t, npv_aicore_phys_aiv(d.t.clusters, 0, 0), AICORE_FAULT_DELAY_ACK, 300000);
    struct npv_aicore_run *slow = prepare(&d.g[0], 0, 9, 0);
    ck_assert_int_eq(npv_aicore_launch(slow), 0);
    struct npv_aicore_run *late = prepare(&d.g[1], 1, 10, 50 * MS);
    ck_assert_int_eq(npv_aicore_wait(slow, AIC_GENEROUS_NS), 0);
    ck_assert_uint_eq(aicore_sample_check(&d.g[0]), 0);
    ck_assert_int_eq(npv_aicore_release(slow), 0);
    ck_assert_int_eq(npv_aicore_launch(late), -ETIMEDOUT);
    ck_assert_int_eq(npv_aicore_poll(late), -ETIMEDOUT);
    struct npv_aicore_result res;
    ck_assert_int_eq(npv_aicore_result(late, &res), 0);
    ck_assert_int_eq(res.status, -ETIMEDOUT);
    ck_assert_uint_eq(res.epoch, 0);                    /* never launched */
    ck_assert_uint_ne(aicore_sample_check(&d.g[1]), 0); /* its outputs untouched: the poison */
    ck_assert_int_eq(npv_aicore_release(late), 0);
    struct npv_aicore_counters c = counters();
    ck_assert_uint_eq(c.runs, before.runs + 1);
    ck_assert_uint_eq(c.resets, before.resets); /* nothing to reset: the device never saw it */
    ck_assert_uint_eq(c.timeouts, before.timeouts + 1);
    bool exact;
    ck_assert_int_eq(aicd_run(&d, 1, false, 11, &exact), 0);
    ck_assert(exact);
}
END_TEST

START_TEST(a_budget_of_zero_is_refused)
{
    struct npv_aicore_run *run;
    ck_assert_int_eq(npv_aicore_prepare_within(d.ac, 0, &d.g[0].desc, 0, &run), -EINVAL);
    /* A budget a healthy run meets changes nothing. */
    run = prepare(&d.g[0], 0, 12, AIC_GENEROUS_NS);
    ck_assert_int_eq(npv_aicore_launch(run), 0);
    ck_assert_int_eq(npv_aicore_wait(run, AIC_GENEROUS_NS), 0);
    ck_assert_uint_eq(aicore_sample_check(&d.g[0]), 0);
    ck_assert_int_eq(npv_aicore_release(run), 0);
}
END_TEST

/* The driver's runs in lib/stats (issue 24 item 5): device "aicore:<name>", queue "runs". */
static struct npv_stats aicore_stats(void)
{
    char name[96];
    snprintf(name, sizeof(name), "aicore:%s", npv_dev_name(npv_aicore_dev(d.ac)));
    struct npv_stats st;
    ck_assert_int_eq(npv_stats_read(d.t.ctx, name, &st, sizeof(st)), 1);
    return st;
}

START_TEST(runs_are_counted_in_stats_by_how_they_ended)
{
    aic_require_model("fault injection is the model's test port");
    struct npv_stats s0 = aicore_stats();
    bool exact;
    for (uint32_t seed = 20; seed < 23; seed++) {
        ck_assert_int_eq(aicd_run(&d, seed & 1u, false, seed, &exact), 0);
        ck_assert(exact);
    }
    /* A stalled run past its budget: a timeout, and the reset before the next launch. */
    aic_fault(&d.t, npv_aicore_phys_aic(d.t.clusters, 0), AICORE_FAULT_HANG, 0);
    struct npv_aicore_run *stalled = prepare(&d.g[0], 0, 23, 100 * MS);
    ck_assert_int_eq(npv_aicore_launch(stalled), 0);
    ck_assert_int_eq(npv_aicore_wait(stalled, AIC_GENEROUS_NS), -ETIMEDOUT);
    ck_assert_int_eq(npv_aicore_release(stalled), 0);
    /* A run cancelled by an explicit reset while active. */
    struct npv_aicore_run *run = prepare(&d.g[1], 1, 24, 0);
    ck_assert_int_eq(npv_aicore_launch(run), 0);
    ck_assert_int_eq(npv_aicore_reset(d.ac), 0);
    ck_assert_int_eq(npv_aicore_poll(run), -ECANCELED);
    ck_assert_int_eq(npv_aicore_release(run), 0);
    struct npv_stats s1 = aicore_stats();
    ck_assert_uint_eq(s1.requests - s0.requests, 5);
    ck_assert_uint_eq(s1.ok - s0.ok, 3);
    ck_assert_uint_eq(s1.timeout - s0.timeout, 1);
    ck_assert_uint_eq(s1.cancelled - s0.cancelled, 1);
    ck_assert_uint_eq(s1.in_flight, 0);
    ck_assert_uint_ge(s1.resets - s0.resets, 1);
    struct npv_aicore_counters c = counters();
    ck_assert_uint_eq(s1.resets, c.resets); /* the same recoveries, not the bring-up reset */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("aicore_driver_serving");
    TCase *tc = tcase_create("serving");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, operands_in_a_memfd_run_exact);
    tcase_add_test(tc, memory_a_vfio_user_server_cannot_reach_is_refused);
    tcase_add_test(tc, memory_a_run_names_is_not_unmapped_until_the_run_is_over);
    tcase_add_test(tc, an_abandoned_run_keeps_its_memory_mapped_until_the_reset);
    tcase_add_test(tc, a_stalled_run_fails_on_its_budget_and_the_next_slot_runs_exact);
    tcase_add_test(tc,
                   a_run_past_its_budget_before_launch_fails_unlaunched_and_its_neighbour_is_exact);
    tcase_add_test(tc, a_budget_of_zero_is_refused);
    tcase_add_test(tc, runs_are_counted_in_stats_by_how_they_ended);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}

/* SPDX-License-Identifier: MIT */
/*
 * Many threads on one Edge TPU (issue 24 item 1) and a deadline per request
 * (item 2), against the model in a child process.
 *
 * The chip has one in-order queue: 4 threads share it through an npv_share
 * (a multi-producer claim, completions routed to each submitter's ticket),
 * each with 8 requests of the sample network in flight in buffers of its
 * own; every output must equal the CPU reference and every completion reach
 * its own ticket once. 10,000 requests per thread by default (the model runs
 * each program for 50 us: 4 x 100,000 take minutes on a loaded machine);
 * NPUVFIO_THREADS_REQUESTS=100000 for the acceptance count.
 *
 * The deadline: a request stalled on the chip (the model's HANG fault)
 * fails with -ETIMEDOUT on its own budget, far below the config's request
 * timeout, the requests before it complete exact, and the chip runs exact
 * after the reset its stall cost.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <npuvfio/dma.h>

#include "etpu_harness.h"
#include "regs.h"
#include "threads_run.h"

#define SLOTS (THREADS_N * THREADS_DEPTH)

struct etpt {
    struct etpu t;
    struct npv_dma *in[SLOTS], *out[SLOTS];
    uint64_t in_va[SLOTS], out_va[SLOTS];
};

static uint32_t input_no(unsigned th, uint64_t i)
{
    return (uint32_t)(i * THREADS_N + th);
}

static void prepare(void *dev, unsigned th, unsigned slot, uint64_t i, void *req)
{
    struct etpt *d = dev;
    unsigned k = th * THREADS_DEPTH + slot;
    edgetpu_sample_input(input_no(th, i), npv_dma_vaddr(d->in[k]));
    memset(npv_dma_vaddr(d->out[k]), 0xcc, EDGETPU_SAMPLE_OUTPUT_BYTES);
    struct npv_edgetpu_request r = {
        .exe = d->t.exe, .input_va = &d->in_va[k], .output_va = &d->out_va[k]};
    memcpy(req, &r, sizeof(r));
}

static bool check(void *dev, unsigned th, unsigned slot, uint64_t i)
{
    struct etpt *d = dev;
    unsigned k = th * THREADS_DEPTH + slot;
    int8_t x[EDGETPU_SAMPLE_INPUT_BYTES], want[EDGETPU_SAMPLE_OUTPUT_BYTES];
    edgetpu_sample_input(input_no(th, i), x);
    edgetpu_sample_reference(&d->t.sample, x, want);
    return memcmp(npv_dma_vaddr(d->out[k]), want, sizeof(want)) == 0;
}

static void map_slots(struct etpt *d)
{
    for (unsigned k = 0; k < SLOTS; k++) {
        ck_assert_int_eq(npv_dma_alloc(d->t.ctx, 4096, NULL, &d->in[k]), 0);
        ck_assert_int_eq(npv_dma_alloc(d->t.ctx, 4096, NULL, &d->out[k]), 0);
        ck_assert_int_eq(npv_dma_map(d->in[k], d->t.dom, NPV_DMA_RW, NULL), 0);
        ck_assert_int_eq(npv_dma_map(d->out[k], d->t.dom, NPV_DMA_RW, NULL), 0);
        ck_assert_int_eq(
            npv_edgetpu_map(d->t.tpu, d->in[k], 0, EDGETPU_SAMPLE_INPUT_BYTES, &d->in_va[k]), 0);
        ck_assert_int_eq(
            npv_edgetpu_map(d->t.tpu, d->out[k], 0, EDGETPU_SAMPLE_OUTPUT_BYTES, &d->out_va[k]), 0);
    }
}

static void unmap_slots(struct etpt *d)
{
    for (unsigned k = 0; k < SLOTS; k++) {
        ck_assert_int_eq(npv_edgetpu_unmap(d->t.tpu, d->in_va[k], EDGETPU_SAMPLE_INPUT_BYTES), 0);
        ck_assert_int_eq(npv_edgetpu_unmap(d->t.tpu, d->out_va[k], EDGETPU_SAMPLE_OUTPUT_BYTES), 0);
        npv_dma_unmap(d->in[k], d->t.dom);
        npv_dma_unmap(d->out[k], d->t.dom);
        npv_dma_free(d->in[k]);
        npv_dma_free(d->out[k]);
    }
}

static void run_threads(enum npv_edgetpu_completion mode, uint64_t dflt)
{
    static struct etpt d;
    struct npv_edgetpu_config cfg = {.completion = mode, .request_timeout_ns = GENEROUS_NS};
    etpu_require_model("the sample is in our instruction format");
    etpu_open(&d.t, &cfg);
    map_slots(&d);
    struct threads_run run = {
        .ops = npv_edgetpu_share_ops(),
        .drv = d.t.tpu,
        .dev = &d,
        .depth = THREADS_DEPTH,
        .requests = threads_requests(dflt),
        .req_size = sizeof(struct npv_edgetpu_request),
        .wait_ns = GENEROUS_NS,
        .prepare = prepare,
        .check = check,
    };
    threads_run_all(&run);
    printf("edgetpu: %u threads x %llu requests, exact\n", THREADS_N,
           (unsigned long long)run.requests);
    unmap_slots(&d);
    etpu_close(&d.t);
}

START_TEST(four_threads_share_the_queue_polling_exact_and_routed)
{
    run_threads(NPV_EDGETPU_POLL, 10000);
}
END_TEST

START_TEST(four_threads_share_the_queue_with_interrupts_exact_and_routed)
{
    run_threads(NPV_EDGETPU_IRQ_SC_HOST, 2000);
}
END_TEST

/* ---- a deadline per request ---- */

#define BUDGET_NS (100 * MS)

static uint64_t mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void stalled_request_fails_on_its_own_budget(enum npv_edgetpu_completion mode)
{
    static struct etpt d;
    /* The config's timeout is 30 s: only the request's budget can end it in time. */
    struct npv_edgetpu_config cfg = {.completion = mode, .request_timeout_ns = GENEROUS_NS};
    etpu_require_model("the stall is the model's fault");
    etpu_open(&d.t, &cfg);
    map_slots(&d);
    for (unsigned k = 0; k < 2; k++) {
        edgetpu_sample_input(k, npv_dma_vaddr(d.in[k]));
        memset(npv_dma_vaddr(d.out[k]), 0xcc, EDGETPU_SAMPLE_OUTPUT_BYTES);
    }
    /* Request 0 (generous) before the stall completes; request 1 stalls on the chip. */
    ck_assert_int_eq(npv_edgetpu_submit(d.t.tpu, d.t.exe, &d.in_va[0], &d.out_va[0], 100), 0);
    struct npv_cpl c[4];
    ck_assert_int_eq(npv_edgetpu_wait(d.t.tpu, 1, GENEROUS_NS, c, 1), 1);
    ck_assert_uint_eq(c[0].cookie, 100);
    ck_assert_int_eq(c[0].status, 0);
    ck_assert(check(&d, 0, 0, 0));
    etpu_fault(&d.t, EDGETPU_FAULT_HANG);
    ck_assert_int_eq(npv_edgetpu_submit_within(d.t.tpu, d.t.exe, &d.in_va[1], &d.out_va[1], 101, 0),
                     -EINVAL);
    uint64_t t0 = mono();
    ck_assert_int_eq(
        npv_edgetpu_submit_within(d.t.tpu, d.t.exe, &d.in_va[1], &d.out_va[1], 101, BUDGET_NS), 0);
    /* Within 5 s (the config's 30 s would not have ended it). */
    int n = npv_edgetpu_wait(d.t.tpu, 1, 5000 * MS, c, 1);
    uint64_t took = mono() - t0;
    ck_assert_msg(n == 1, "the stalled request did not fail on its 100 ms budget (%d)", n);
    ck_assert_uint_eq(c[0].cookie, 101);
    ck_assert_int_eq(c[0].status, -ETIMEDOUT);
    ck_assert_uint_ge(took, BUDGET_NS);
    /* The reset left a working chip: a request after it runs exact. */
    bool exact = false;
    ck_assert_int_eq(etpu_run_check(&d.t, 7, &exact), 0);
    ck_assert(exact);
    unmap_slots(&d);
    etpu_close(&d.t);
}

START_TEST(stalled_request_fails_on_its_own_budget_polling)
{
    stalled_request_fails_on_its_own_budget(NPV_EDGETPU_POLL);
}
END_TEST

START_TEST(stalled_request_fails_on_its_own_budget_interrupts)
{
    stalled_request_fails_on_its_own_budget(NPV_EDGETPU_IRQ_SC_HOST);
}
END_TEST

/*
 * A request running past its budget after the chip consumed its chunk (the
 * model's program time set to 2 s, the budget 100 ms): -ETIMEDOUT on the
 * budget, long before the program would have finished, and the chip runs
 * exact after the reset.
 */
START_TEST(slow_program_fails_on_its_budget_not_on_its_end)
{
    static struct etpt d;
    struct npv_edgetpu_config cfg = {.request_timeout_ns = GENEROUS_NS};
    etpu_require_model("the program time is the model's knob");
    etpu_open(&d.t, &cfg);
    map_slots(&d);
    edgetpu_sample_input(0, npv_dma_vaddr(d.in[0]));
    ck_assert_int_eq(npv_bar_write(d.t.port, EDGETPU_MODEL_EXEC_US, 8, 1000000), 0); /* 1 s */
    uint64_t t0 = mono();
    ck_assert_int_eq(
        npv_edgetpu_submit_within(d.t.tpu, d.t.exe, &d.in_va[0], &d.out_va[0], 201, BUDGET_NS), 0);
    struct npv_cpl c;
    int n = npv_edgetpu_wait(d.t.tpu, 1, 5000 * MS, &c, 1);
    uint64_t took = mono() - t0;
    ck_assert_int_eq(n, 1);
    ck_assert_uint_eq(c.cookie, 201);
    ck_assert_int_eq(c.status, -ETIMEDOUT);
    ck_assert_uint_ge(took, BUDGET_NS);
    ck_assert_msg(took < 1000 * MS, "failed after %llu ms: on the program's end, not its budget",
                  (unsigned long long)(took / MS));
    ck_assert_int_eq(
        npv_bar_write(d.t.port, EDGETPU_MODEL_EXEC_US, 8, EDGETPU_MODEL_EXEC_US_DEFAULT), 0);
    bool exact = false;
    ck_assert_int_eq(etpu_run_check(&d.t, 9, &exact), 0);
    ck_assert(exact);
    unmap_slots(&d);
    etpu_close(&d.t);
}
END_TEST

/*
 * Budgets are per request, not FIFO: a younger request with a short budget
 * behind an elder with a generous one (both programs slow) is the one that
 * fails with -ETIMEDOUT, on its own budget; the elder, still running when
 * the chip is reset for it, is cancelled (the one queue cannot drop one
 * request: docs/threads.md), and the chip runs exact after.
 */
START_TEST(younger_request_fails_on_its_own_budget_not_its_elder)
{
    static struct etpt d;
    struct npv_edgetpu_config cfg = {.request_timeout_ns = GENEROUS_NS};
    etpu_require_model("the program time is the model's knob");
    etpu_open(&d.t, &cfg);
    map_slots(&d);
    for (unsigned k = 0; k < 2; k++)
        edgetpu_sample_input(k, npv_dma_vaddr(d.in[k]));
    ck_assert_int_eq(npv_bar_write(d.t.port, EDGETPU_MODEL_EXEC_US, 8, 1000000), 0); /* 1 s */
    uint64_t t0 = mono();
    ck_assert_int_eq(npv_edgetpu_submit(d.t.tpu, d.t.exe, &d.in_va[0], &d.out_va[0], 300), 0);
    ck_assert_int_eq(
        npv_edgetpu_submit_within(d.t.tpu, d.t.exe, &d.in_va[1], &d.out_va[1], 301, BUDGET_NS), 0);
    struct npv_cpl c[2];
    unsigned got = 0;
    while (got < 2 && mono() - t0 < 5000 * MS) {
        int n = npv_edgetpu_wait(d.t.tpu, 1, 100 * MS, c + got, 2 - got);
        ck_assert_int_ge(n, 0);
        got += (unsigned)n;
    }
    uint64_t took = mono() - t0;
    ck_assert_uint_eq(got, 2);
    ck_assert_uint_eq(c[0].cookie, 300);
    ck_assert_uint_eq(c[1].cookie, 301);
    ck_assert_msg(c[1].status == -ETIMEDOUT, "the request past its budget ended with %s",
                  npv_strerror(c[1].status));
    ck_assert_msg(c[0].status == -ECANCELED, "its elder ended with %s", npv_strerror(c[0].status));
    ck_assert_msg(took < 1000 * MS, "ended after %llu ms: not on the younger's 100 ms budget",
                  (unsigned long long)(took / MS));
    ck_assert_int_eq(
        npv_bar_write(d.t.port, EDGETPU_MODEL_EXEC_US, 8, EDGETPU_MODEL_EXEC_US_DEFAULT), 0);
    bool exact = false;
    ck_assert_int_eq(etpu_run_check(&d.t, 11, &exact), 0);
    ck_assert(exact);
    unmap_slots(&d);
    etpu_close(&d.t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("threads_edgetpu");
    TCase *tc = tcase_create("threads");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, four_threads_share_the_queue_polling_exact_and_routed);
    tcase_add_test(tc, four_threads_share_the_queue_with_interrupts_exact_and_routed);
    suite_add_tcase(s, tc);
    TCase *dl = tcase_create("deadline");
    tcase_set_timeout(dl, 120);
    tcase_add_test(dl, stalled_request_fails_on_its_own_budget_polling);
    tcase_add_test(dl, stalled_request_fails_on_its_own_budget_interrupts);
    tcase_add_test(dl, slow_program_fails_on_its_budget_not_on_its_end);
    tcase_add_test(dl, younger_request_fails_on_its_own_budget_not_its_elder);
    suite_add_tcase(s, dl);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

/* SPDX-License-Identifier: MIT */
/*
 * The Edge TPU driver runs the sample network bit-exact against the model,
 * in both completion modes, pipelined, with late status blocks, writing
 * 64-bit registers whole. The sample is in our instruction format, which
 * only the model executes: on a real chip (NPUVFIO_TEST_EDGETPU) the suite
 * is SKIPPED.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/dev.h>
#include <npuvfio/domain.h>

#include "etpu_harness.h"
#include "npv_test.h"
#include "sample_run.h"

/* 10,000 in the plain build (39 ring wraps); a sanitizer build a tenth, still 3 wraps. */
#define REQUESTS ((uint32_t)npv_test_volume(10000u))

static void run_many(enum npv_edgetpu_completion mode, uint32_t n)
{
    struct etpu t;
    struct npv_edgetpu_config cfg = {.completion = mode, .request_timeout_ns = GENEROUS_NS};
    etpu_open(&t, &cfg);
    for (uint32_t i = 0; i < n; i++) {
        bool exact = false;
        int r = etpu_run_check(&t, i, &exact);
        ck_assert_msg(r == 0, "request %u: %s", i, npv_strerror(r));
        ck_assert_msg(exact, "request %u: output differs from the CPU reference", i);
    }
    etpu_close(&t);
}

START_TEST(sample_bit_exact_for_10000_requests_polling)
{
    /* 10000 requests on a 256-entry queue wrap the ring 39 times. */
    run_many(NPV_EDGETPU_POLL, REQUESTS);
}
END_TEST

START_TEST(sample_bit_exact_for_10000_requests_interrupts)
{
    run_many(NPV_EDGETPU_IRQ, REQUESTS);
}
END_TEST

START_TEST(sample_bit_exact_for_10000_requests_sc_host_interrupts)
{
    run_many(NPV_EDGETPU_IRQ_SC_HOST, REQUESTS);
}
END_TEST

START_TEST(pipelined_requests_fill_the_queue_and_stay_exact)
{
    struct etpu t;
    struct npv_edgetpu_config cfg = {.queue_entries = 8, .request_timeout_ns = GENEROUS_NS};
    etpu_open(&t, &cfg);
    enum { DEPTH = 7, ROUNDS = 40 };
    struct npv_dma *in[DEPTH], *out[DEPTH];
    uint64_t in_va[DEPTH], out_va[DEPTH];
    for (unsigned k = 0; k < DEPTH; k++) {
        ck_assert_int_eq(npv_dma_alloc(t.ctx, 4096, NULL, &in[k]), 0);
        ck_assert_int_eq(npv_dma_alloc(t.ctx, 4096, NULL, &out[k]), 0);
        ck_assert_int_eq(npv_dma_map(in[k], t.dom, NPV_DMA_RW, NULL), 0);
        ck_assert_int_eq(npv_dma_map(out[k], t.dom, NPV_DMA_RW, NULL), 0);
        ck_assert_int_eq(npv_edgetpu_map(t.tpu, in[k], 0, EDGETPU_SAMPLE_INPUT_BYTES, &in_va[k]),
                         0);
        ck_assert_int_eq(npv_edgetpu_map(t.tpu, out[k], 0, EDGETPU_SAMPLE_OUTPUT_BYTES, &out_va[k]),
                         0);
    }
    for (unsigned round = 0; round < ROUNDS; round++) {
        for (unsigned k = 0; k < DEPTH; k++) {
            edgetpu_sample_input(round * DEPTH + k, npv_dma_vaddr(in[k]));
            memset(npv_dma_vaddr(out[k]), 0xcc, EDGETPU_SAMPLE_OUTPUT_BYTES);
            ck_assert_int_eq(npv_edgetpu_submit(t.tpu, t.exe, &in_va[k], &out_va[k], k), 0);
        }
        /* One slot stays free: an 8-entry queue holds 7. */
        ck_assert_int_eq(npv_edgetpu_submit(t.tpu, t.exe, &in_va[0], &out_va[0], 99), -EAGAIN);
        struct npv_cpl cpl[DEPTH];
        unsigned got = 0;
        while (got < DEPTH) {
            int r = npv_edgetpu_wait(t.tpu, 1, GENEROUS_NS, cpl + got, DEPTH - got);
            ck_assert_msg(r > 0, "wait: %s", npv_strerror(r));
            got += (unsigned)r;
        }
        for (unsigned k = 0; k < DEPTH; k++) {
            int8_t want[EDGETPU_SAMPLE_OUTPUT_BYTES];
            ck_assert_uint_eq(cpl[k].cookie, k);
            ck_assert_int_eq(cpl[k].status, 0);
            edgetpu_sample_reference(&t.sample, npv_dma_vaddr(in[k]), want);
            ck_assert_mem_eq(npv_dma_vaddr(out[k]), want, sizeof(want));
        }
    }
    for (unsigned k = 0; k < DEPTH; k++) {
        ck_assert_int_eq(npv_edgetpu_unmap(t.tpu, in_va[k], EDGETPU_SAMPLE_INPUT_BYTES), 0);
        ck_assert_int_eq(npv_edgetpu_unmap(t.tpu, out_va[k], EDGETPU_SAMPLE_OUTPUT_BYTES), 0);
        npv_dma_free(in[k]);
        npv_dma_free(out[k]);
    }
    etpu_close(&t);
}
END_TEST

START_TEST(opening_in_a_domain_above_4gib_is_refused)
{
    struct etpu t;
    etpu_open(&t, NULL);
    /* A second driver instance in a domain whose aperture starts at 4 GiB. */
    struct npv_domain *high;
    struct npv_domain_opts o = {.aperture_start = 1ull << 32, .aperture_last = (1ull << 40) - 1};
    ck_assert_int_eq(npv_domain_new(t.ctx, &o, &high), 0);
    npv_edgetpu_unload(t.exe);
    npv_edgetpu_close(t.tpu);
    t.tpu = NULL;
    ck_assert_int_eq(npv_dev_attach(t.dev, high), 0);
    struct npv_edgetpu *tpu = NULL;
    ck_assert_int_eq(npv_edgetpu_open(t.dev, NULL, &tpu), -ERANGE);
    ck_assert_ptr_null(tpu);
    ck_assert_int_eq(npv_dev_attach(t.dev, t.dom), 0);
    npv_domain_put(high);
    t.exe = NULL;
    etpu_close(&t);
}
END_TEST

/* Every valid entry of the page table and of the level-1 tables is an IOVA of the domain. */
START_TEST(sixty_four_bit_registers_are_written_whole)
{
    struct etpu t;
    etpu_open(&t, NULL);
    bool exact;
    ck_assert_int_eq(etpu_run_check(&t, 2, &exact), 0);
    ck_assert(exact);
    npv_edgetpu_unload(t.exe);
    npv_edgetpu_close(t.tpu); /* the close path too */
    t.exe = NULL;
    t.tpu = NULL;
    ck_assert_uint_eq(etpu_port_read(&t, EDGETPU_MODEL_SPLIT_ACCESSES), 0);
    /* The model is strict: half a page-table entry is refused, and counted. */
    ck_assert_int_eq(npv_bar_write(t.bar2, EDGETPU_PAGE_TABLE + 8, 4, 0x1001), 0); /* posted */
    ck_assert_int_lt(npv_dev_flush(t.dev), 0);
    ck_assert_uint_eq(etpu_port_read(&t, EDGETPU_MODEL_SPLIT_ACCESSES), 1);
    etpu_close(&t);
}
END_TEST

START_TEST(results_stay_exact_with_a_late_status_block)
{
    for (int mode = NPV_EDGETPU_POLL; mode <= NPV_EDGETPU_IRQ_SC_HOST; mode++) {
        struct etpu t;
        struct npv_edgetpu_config cfg = {.completion = (enum npv_edgetpu_completion)mode,
                                         .request_timeout_ns = GENEROUS_NS};
        etpu_open(&t, &cfg);
        ck_assert_int_eq(npv_bar_write(t.port, EDGETPU_MODEL_LATE_SB_US, 8, 300), 0);
        etpu_fault(&t, EDGETPU_FAULT_LATE_STATUS);
        for (uint32_t i = 0; i < 200; i++) {
            bool exact = false;
            int r = etpu_run_check(&t, i, &exact);
            ck_assert_msg(r == 0, "request %u: %s", i, npv_strerror(r));
            ck_assert_msg(exact, "request %u differs", i);
        }
        etpu_close(&t);
    }
}
END_TEST

START_TEST(sample_runner_checks_every_output_and_reports_checksum_and_percentiles)
{
    for (int mode = NPV_EDGETPU_POLL; mode <= NPV_EDGETPU_IRQ_SC_HOST; mode++) {
        struct etpu t;
        struct npv_edgetpu_config cfg = {.completion = (enum npv_edgetpu_completion)mode};
        etpu_open(&t, &cfg);
        struct npv_sample_opts opts = {.iterations = 500};
        struct npv_sample_result res;
        uint64_t sum = 0;
        int r = edgetpu_sample_run(t.tpu, &opts, &res, &sum);
        ck_assert_msg(r == 0, "sample run: %s", npv_strerror(r));
        ck_assert_uint_eq(res.iterations, 500);
        ck_assert_uint_eq(res.mismatches, 0);
        uint64_t h = EDGETPU_FNV_OFFSET;
        for (uint32_t i = 0; i < 500; i++) {
            int8_t x[EDGETPU_SAMPLE_INPUT_BYTES], y[EDGETPU_SAMPLE_OUTPUT_BYTES];
            edgetpu_sample_input(i, x);
            edgetpu_sample_reference(&t.sample, x, y);
            h = edgetpu_fnv1a(h, y, sizeof(y));
        }
        ck_assert_uint_eq(sum, h);
        ck_assert_uint_le(res.p50_ns, res.p99_ns);
        printf("sample run (mode %d): %s; p50 %llu ns, p99 %llu ns, %.0f requests/s\n", mode,
               res.what, (unsigned long long)res.p50_ns, (unsigned long long)res.p99_ns,
               res.elapsed_ns ? 1e9 * (double)res.iterations / (double)res.elapsed_ns : 0.0);
        etpu_close(&t);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("edgetpu_inference");
    TCase *tc = tcase_create("inference");
    tcase_set_timeout(tc, 280);
    tcase_add_test(tc, sample_bit_exact_for_10000_requests_polling);
    tcase_add_test(tc, sample_bit_exact_for_10000_requests_interrupts);
    tcase_add_test(tc, sample_bit_exact_for_10000_requests_sc_host_interrupts);
    tcase_add_test(tc, pipelined_requests_fill_the_queue_and_stay_exact);
    tcase_add_test(tc, opening_in_a_domain_above_4gib_is_refused);
    tcase_add_test(tc, sixty_four_bit_registers_are_written_whole);
    tcase_add_test(tc, results_stay_exact_with_a_late_status_block);
    tcase_add_test(tc, sample_runner_checks_every_output_and_reports_checksum_and_percentiles);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    etpu_require_model("the sample is in our instruction format, which only the model executes");
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

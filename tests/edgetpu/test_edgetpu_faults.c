/* SPDX-License-Identifier: MIT */
/*
 * Faults the model injects, and how the driver reports and survives them:
 * each failure is named (error bit, faulting address), the chip is reset,
 * and the next request is exact again. Only a model can do this: on a real
 * chip (NPUVFIO_TEST_EDGETPU) the suite is SKIPPED.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etpu_harness.h"

#define SHORT_TIMEOUT_NS (300 * MS)

static void expect_exact(struct etpu *t, uint32_t n)
{
    bool exact = false;
    int r = etpu_run_check(t, n, &exact);
    ck_assert_msg(r == 0, "request %u after recovery: %s", n, npv_strerror(r));
    ck_assert_msg(exact, "request %u after recovery differs from the reference", n);
}

START_TEST(descriptor_written_after_its_doorbell_gives_a_fault_or_a_wrong_result)
{
    struct etpu t;
    struct npv_edgetpu_config cfg = {.test_hooks = NPV_EDGETPU_HOOK_DESC_AFTER_DOORBELL,
                                     .request_timeout_ns = GENEROUS_NS};
    etpu_open(&t, &cfg);
    bool exact = false;
    int r = etpu_run_check(&t, 0, &exact);
    ck_assert_msg(r != 0 || !exact, "the model forgave a descriptor written after its doorbell");
    /* The chip fetched the empty slot the instant the tail landed: a zero-length DMA. */
    ck_assert_int_eq(r, -EIO);
    struct npv_edgetpu_error e;
    npv_edgetpu_last_error(t.tpu, &e);
    ck_assert_uint_eq(e.hib_error_status & EDGETPU_HIB_ERR_LENGTH_0_DMA,
                      EDGETPU_HIB_ERR_LENGTH_0_DMA);
    ck_assert_uint_ne(e.fatal_word, 0);
    etpu_close(&t);
}
END_TEST

START_TEST(output_to_an_unmapped_device_address_names_it_and_recovers)
{
    struct etpu t;
    etpu_open(&t, NULL);
    expect_exact(&t, 0);
    /* The instruction keeps pointing at the output, which the chip's MMU no longer maps. */
    ck_assert_int_eq(npv_edgetpu_unmap(t.tpu, t.out_va, EDGETPU_SAMPLE_OUTPUT_BYTES), 0);
    bool exact;
    ck_assert_int_eq(etpu_run_check(&t, 1, &exact), -EIO);
    struct npv_edgetpu_error e;
    npv_edgetpu_last_error(t.tpu, &e);
    ck_assert_uint_eq(e.hib_error_status, EDGETPU_HIB_ERR_EXTENDED_PAGE_FAULT);
    ck_assert_uint_eq(e.hib_first_error_status, EDGETPU_HIB_ERR_EXTENDED_PAGE_FAULT);
    ck_assert_uint_eq(e.page_fault_address, t.out_va);
    ck_assert_str_eq(npv_edgetpu_hib_error_name(1), "extended_page_fault");
    ck_assert_str_eq(npv_edgetpu_hib_error_name(13), "length_0_dma");
    ck_assert_ptr_null(npv_edgetpu_hib_error_name(15));
    ck_assert_int_eq(npv_edgetpu_map(t.tpu, t.out, 0, EDGETPU_SAMPLE_OUTPUT_BYTES, &t.out_va), 0);
    expect_exact(&t, 2);
    etpu_close(&t);
}
END_TEST

START_TEST(injected_page_fault_names_the_address_and_recovers)
{
    struct etpu t;
    etpu_open(&t, NULL);
    etpu_fault(&t, EDGETPU_FAULT_PAGE_FAULT);
    bool exact;
    ck_assert_int_eq(etpu_run_check(&t, 0, &exact), -EIO);
    struct npv_edgetpu_error e;
    npv_edgetpu_last_error(t.tpu, &e);
    ck_assert_uint_eq(e.hib_error_status & EDGETPU_HIB_ERR_EXTENDED_PAGE_FAULT,
                      EDGETPU_HIB_ERR_EXTENDED_PAGE_FAULT);
    ck_assert_uint_eq(e.page_fault_address, EDGETPU_WILD_DEVICE_VA);
    expect_exact(&t, 1);
    etpu_close(&t);
}
END_TEST

START_TEST(axi_error_is_reported_with_its_address_and_recovers)
{
    struct etpu t;
    etpu_open(&t, NULL);
    etpu_fault(&t, EDGETPU_FAULT_AXI_ERROR);
    bool exact;
    ck_assert_int_eq(etpu_run_check(&t, 0, &exact), -EIO);
    struct npv_edgetpu_error e;
    npv_edgetpu_last_error(t.tpu, &e);
    ck_assert_uint_eq(e.hib_error_status, EDGETPU_HIB_ERR_AXI_SLAVE_B);
    /* The first layer's write (to the request's scratch, in extended space) took the error. */
    ck_assert_uint_ne(e.page_fault_address & EDGETPU_VA_EXTENDED, 0);
    expect_exact(&t, 1);
    etpu_close(&t);
}
END_TEST

START_TEST(hung_chip_times_out_is_reset_and_runs_exact_again)
{
    struct etpu t;
    struct npv_edgetpu_config cfg = {.request_timeout_ns = SHORT_TIMEOUT_NS};
    etpu_open(&t, &cfg);
    etpu_fault(&t, EDGETPU_FAULT_HANG);
    bool exact;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    ck_assert_int_eq(etpu_run_check(&t, 0, &exact), -ETIMEDOUT);
    clock_gettime(CLOCK_MONOTONIC, &b);
    /* Not before its deadline (a lower bound only: the machine is noisy). */
    int64_t took = (b.tv_sec - a.tv_sec) * 1000000000ll + (b.tv_nsec - a.tv_nsec);
    ck_assert_int_ge(took, (int64_t)SHORT_TIMEOUT_NS);
    ck_assert(!exact);
    expect_exact(&t, 1);
    expect_exact(&t, 2);
    etpu_close(&t);
}
END_TEST

/*
 * A wait that runs out on a hung chip harms nothing: it returns 0 with the
 * request still in flight; the request's own deadline then fails it and the
 * chip is reset.
 */
START_TEST(short_wait_on_a_hung_chip_resets_nothing_until_the_request_deadline)
{
    struct etpu t;
    struct npv_edgetpu_config cfg = {.request_timeout_ns = SHORT_TIMEOUT_NS};
    etpu_open(&t, &cfg);
    etpu_fault(&t, EDGETPU_FAULT_HANG);
    ck_assert_int_eq(npv_edgetpu_submit(t.tpu, t.exe, &t.in_va, &t.out_va, 7), 0);
    struct npv_cpl c;
    ck_assert_int_eq(npv_edgetpu_wait(t.tpu, 1, 1 * MS, &c, 1), 0);
    ck_assert_int_eq(npv_edgetpu_wait(t.tpu, 1, 1 * MS, &c, 1), 0);
    ck_assert_int_eq(npv_edgetpu_wait(t.tpu, 1, GENEROUS_NS, &c, 1), 1);
    ck_assert_uint_eq(c.cookie, 7);
    ck_assert_int_eq(c.status, -ETIMEDOUT);
    expect_exact(&t, 1);
    etpu_close(&t);
}
END_TEST

START_TEST(wild_completed_head_is_a_device_fault)
{
    struct etpu t;
    etpu_open(&t, NULL);
    etpu_fault(&t, EDGETPU_FAULT_WILD_HEAD);
    bool exact;
    ck_assert_int_eq(etpu_run_check(&t, 0, &exact), -NPV_EDEVFAULT);
    expect_exact(&t, 1);
    etpu_close(&t);
}
END_TEST

START_TEST(bad_instruction_is_a_scalar_core_error)
{
    struct etpu t;
    etpu_open(&t, NULL);
    struct edgetpu_sample bad = t.sample;
    bad.insn[1].opcode = 0x77;
    bad.desc.instructions = bad.insn;
    bad.desc.fields = bad.fields;
    bad.desc.parameters = bad.params;
    struct npv_edgetpu_executable *exe;
    ck_assert_int_eq(npv_edgetpu_load(t.tpu, &bad.desc, &exe), 0);
    ck_assert_int_eq(npv_edgetpu_run(t.tpu, exe, &t.in_va, &t.out_va), -EIO);
    struct npv_edgetpu_error e;
    npv_edgetpu_last_error(t.tpu, &e);
    ck_assert_uint_eq(e.scalar_core_error, EDGETPU_SC_ERROR_BAD_INSTRUCTION);
    npv_edgetpu_unload(exe);
    expect_exact(&t, 1);
    etpu_close(&t);
}
END_TEST

START_TEST(device_gone_is_a_clear_error_and_never_a_hang)
{
    struct etpu t;
    struct npv_edgetpu_config cfg = {.request_timeout_ns = SHORT_TIMEOUT_NS,
                                     .poll_timeout_ns = SHORT_TIMEOUT_NS};
    etpu_open(&t, &cfg);
    expect_exact(&t, 0);
    etpu_fault(&t, EDGETPU_FAULT_DEVICE_GONE);
    bool exact;
    ck_assert_int_eq(etpu_run_check(&t, 1, &exact), -ENODEV);
    ck_assert_int_eq(etpu_run_check(&t, 2, &exact), -ENODEV);
    ck_assert_int_eq(npv_edgetpu_reset(t.tpu), -ENODEV);
    etpu_close(&t); /* returns: close does not wait on a chip that is gone */
}
END_TEST

/*
 * A reset that does not bring the chip back (the GCB stays held) is an error
 * within the poll deadline; the chip is refused until a reset succeeds.
 */
START_TEST(failed_reset_is_an_error_and_a_later_reset_brings_the_chip_back)
{
    struct etpu t;
    struct npv_edgetpu_config cfg = {.request_timeout_ns = SHORT_TIMEOUT_NS,
                                     .poll_timeout_ns = SHORT_TIMEOUT_NS};
    etpu_open(&t, &cfg);
    expect_exact(&t, 0);
    etpu_fault(&t, EDGETPU_FAULT_FAIL_RESET);
    int r = npv_edgetpu_reset(t.tpu);
    ck_assert_msg(r < 0, "a reset the chip never finished returned %d", r);
    bool exact = true;
    ck_assert_int_lt(etpu_run_check(&t, 1, &exact), 0);
    ck_assert(!exact);
    ck_assert_int_eq(npv_edgetpu_reset(t.tpu), 0);
    expect_exact(&t, 1);
    expect_exact(&t, 2);
    etpu_close(&t);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("edgetpu_faults");
    TCase *tc = tcase_create("faults");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, descriptor_written_after_its_doorbell_gives_a_fault_or_a_wrong_result);
    tcase_add_test(tc, output_to_an_unmapped_device_address_names_it_and_recovers);
    tcase_add_test(tc, injected_page_fault_names_the_address_and_recovers);
    tcase_add_test(tc, axi_error_is_reported_with_its_address_and_recovers);
    tcase_add_test(tc, hung_chip_times_out_is_reset_and_runs_exact_again);
    tcase_add_test(tc, short_wait_on_a_hung_chip_resets_nothing_until_the_request_deadline);
    tcase_add_test(tc, wild_completed_head_is_a_device_fault);
    tcase_add_test(tc, bad_instruction_is_a_scalar_core_error);
    tcase_add_test(tc, device_gone_is_a_clear_error_and_never_a_hang);
    tcase_add_test(tc, failed_reset_is_an_error_and_a_later_reset_brings_the_chip_back);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    etpu_require_model("fault injection needs the model");
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

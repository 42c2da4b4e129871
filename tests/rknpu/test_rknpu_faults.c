/* SPDX-License-Identifier: MIT */
/*
 * The faults the model injects per core through its test port, and the soft
 * reset that recovers from them: a stalled run never completes until the
 * core is reset; a wrong status bit; a DMA error; a reset that leaves the
 * core in reset once. After each, the next run on that core is exact and the
 * counters say what happened. Only a model can do this: on a real NPU
 * (NPUVFIO_TEST_RKNPU) the suite is SKIPPED.
 */
#include <check.h>
#include <errno.h>

#include "npv_test.h"
#include "rknpu_harness.h"

static struct rknpu_t t;
static struct rknpu_mm mm;

static void setup(void)
{
    rknpu_open(&t);
    rknpu_mm_init(&t, &mm, RKNPU_PREC_INT8, 4, 64, 32, true, false, 99);
    rknpu_mm_program(&t, &mm, 1);
}

static void teardown(void)
{
    rknpu_mm_free(&mm);
    rknpu_close(&t);
}

static uint32_t port_core(unsigned core, uint32_t reg)
{
    return rknpu_port_rd(&t, RKNPU_TP_CORE(core) + reg);
}

/*
 * The core's state once its thread has taken the run: the enable edge marks
 * the core RUNNING at once, and the core thread applies a stall fault only
 * when it takes the run, which on a loaded machine can come after other
 * cores have finished whole runs.
 */
static uint32_t port_core_settled(unsigned core)
{
    int64_t deadline = rknpu_now_ns() + (int64_t)RKNPU_GENEROUS_NS;
    uint32_t state = port_core(core, RKNPU_TP_STATE);
    while (state == RKNPU_CORE_RUNNING && rknpu_now_ns() < deadline)
        state = port_core(core, RKNPU_TP_STATE);
    return state;
}

static void start(unsigned core)
{
    rknpu_mm_poison(&mm);
    rknpu_run(&t, core, &mm.prog, mm.prog_words, 1, RKNPU_INT_DPU_DONE | RKNPU_INT_DMA_ERROR);
}

static void expect_exact_run(unsigned core)
{
    start(core);
    uint32_t st = rknpu_wait(&t, core, RKNPU_GENEROUS_NS);
    ck_assert_msg(st == RKNPU_INT_DPU_0, "core %u: status %#x", core, st);
    rknpu_finish(&t, core);
    ck_assert_msg(rknpu_mm_check(&mm), "core %u: C differs from the reference", core);
}

START_TEST(stalled_run_never_completes_until_the_core_is_reset)
{
    unsigned core = (unsigned)_i;
    uint32_t resets = port_core(core, RKNPU_TP_RESETS);
    rknpu_fault(&t, core, RKNPU_FAULT_STALL);
    start(core);
    ck_assert_int_eq(npv_irq_wait(t.irq, core, RKNPU_QUIET_NS), -ETIMEDOUT);
    ck_assert_uint_eq(rknpu_rd(&t, core, RKNPU_PC_INTERRUPT_RAW_STATUS), 0);
    ck_assert_uint_eq(rknpu_rd(&t, core, RKNPU_PC_TASK_STATUS), 0);
    ck_assert_uint_eq(port_core_settled(core), RKNPU_CORE_STALLED);
    /* A stalled core takes no new program either. */
    start(core);
    ck_assert_int_eq(npv_irq_wait(t.irq, core, RKNPU_QUIET_NS), -ETIMEDOUT);
    ck_assert_uint_eq(rknpu_soft_reset(&t, core), 0);
    ck_assert_uint_eq(port_core(core, RKNPU_TP_RESETS), resets + 1);
    ck_assert_uint_eq(port_core(core, RKNPU_TP_STATE), RKNPU_CORE_IDLE);
    expect_exact_run(core);
}
END_TEST

START_TEST(a_stall_on_one_core_leaves_the_others_running)
{
    rknpu_fault(&t, 0, RKNPU_FAULT_STALL);
    start(0);
    expect_exact_run(1);
    expect_exact_run(2);
    ck_assert_uint_eq(port_core_settled(0), RKNPU_CORE_STALLED);
    ck_assert_uint_eq(rknpu_soft_reset(&t, 0), 0);
    expect_exact_run(0);
}
END_TEST

START_TEST(wrong_status_fault_reports_ppu_instead_of_dpu_done)
{
    rknpu_fault(&t, 1, RKNPU_FAULT_WRONG_STATUS);
    start(1);
    ck_assert_int_ge(npv_irq_wait(t.irq, 1, RKNPU_GENEROUS_NS), 1);
    /* Masked out, the wrong bit shows only in RAW: no DPU done for a driver that waits for it. */
    ck_assert_uint_eq(rknpu_rd(&t, 1, RKNPU_PC_INTERRUPT_STATUS), 0);
    ck_assert_uint_eq(rknpu_rd(&t, 1, RKNPU_PC_INTERRUPT_RAW_STATUS), RKNPU_INT_PPU_0);
    rknpu_finish(&t, 1);
    /* The fault is for one run. */
    expect_exact_run(1);
}
END_TEST

START_TEST(dma_error_fault_fails_one_run_with_dma_write_error)
{
    uint32_t faults = port_core(2, RKNPU_TP_DMA_FAULTS);
    rknpu_fault(&t, 2, RKNPU_FAULT_DMA_ERROR);
    start(2);
    ck_assert_uint_eq(rknpu_wait(&t, 2, RKNPU_GENEROUS_NS), RKNPU_INT_DMA_WRITE_ERROR);
    ck_assert_uint_eq(port_core(2, RKNPU_TP_DMA_FAULTS), faults + 1);
    ck_assert_uint_eq(port_core(2, RKNPU_TP_FAULT_IOVA), mm.desc.c);
    ck_assert_uint_eq(rknpu_rd(&t, 2, RKNPU_PC_TASK_STATUS), 0);
    rknpu_finish(&t, 2);
    expect_exact_run(2);
}
END_TEST

START_TEST(reset_that_fails_once_keeps_the_core_in_reset_until_retried)
{
    uint32_t resets = port_core(0, RKNPU_TP_RESETS);
    rknpu_fault(&t, 0, RKNPU_FAULT_RESET_FAILS_ONCE);
    ck_assert_uint_eq(rknpu_soft_reset(&t, 0), RKNPU_SOFT_RESET_IN_RESET);
    ck_assert_uint_eq(port_core(0, RKNPU_TP_RESET_FAILURES), 1);
    ck_assert_uint_eq(port_core(0, RKNPU_TP_STATE), RKNPU_CORE_IN_RESET);
    /* Held in reset: the window reads 0 and takes no program. */
    ck_assert_uint_eq(rknpu_rd(&t, 0, RKNPU_PC_VERSION), 0);
    start(0);
    ck_assert_uint_eq(port_core(0, RKNPU_TP_RUNS), 0);
    ck_assert_uint_eq(rknpu_soft_reset(&t, 0), 0);
    ck_assert_uint_eq(port_core(0, RKNPU_TP_RESETS), resets + 1);
    ck_assert_uint_eq(rknpu_rd(&t, 0, RKNPU_PC_VERSION), RKNPU_VERSION_VALUE);
    expect_exact_run(0);
}
END_TEST

START_TEST(soft_reset_returns_the_core_registers_to_reset_values)
{
    expect_exact_run(1);
    rknpu_wr(&t, 1, RKNPU_PC_INTERRUPT_MASK, RKNPU_INT_DPU_DONE);
    start(1);
    ck_assert_uint_ne(rknpu_wait(&t, 1, RKNPU_GENEROUS_NS), 0);
    ck_assert_uint_ne(rknpu_rd(&t, 1, RKNPU_PC_INTERRUPT_RAW_STATUS), 0);
    ck_assert_uint_eq(rknpu_soft_reset(&t, 1), 0);
    ck_assert_uint_eq(rknpu_rd(&t, 1, RKNPU_PC_INTERRUPT_RAW_STATUS), 0);
    ck_assert_uint_eq(rknpu_rd(&t, 1, RKNPU_PC_INTERRUPT_MASK), 0);
    ck_assert_uint_eq(rknpu_rd(&t, 1, RKNPU_PC_TASK_STATUS), 0);
    ck_assert_uint_eq(rknpu_rd(&t, 1, RKNPU_CNA_FEATURE_DATA_ADDR), 0);
    /* Counters survive: they are the test port's, not the core's. */
    ck_assert_uint_eq(port_core(1, RKNPU_TP_TASKS_EXECUTED), 2);
    expect_exact_run(1);
}
END_TEST

START_TEST(reset_during_a_slow_run_abandons_it)
{
    /* Each task now takes a second: the reset lands while the run is in flight. */
    rknpu_port_wr(&t, RKNPU_TP_TASK_DELAY_US, 1000000);
    start(2);
    ck_assert_uint_eq(rknpu_soft_reset(&t, 2), 0);
    ck_assert_int_eq(npv_irq_wait(t.irq, 2, RKNPU_QUIET_NS), -ETIMEDOUT);
    ck_assert_uint_eq(rknpu_rd(&t, 2, RKNPU_PC_INTERRUPT_RAW_STATUS), 0);
    ck_assert_uint_eq(port_core(2, RKNPU_TP_TASKS_EXECUTED), 0);
    rknpu_port_wr(&t, RKNPU_TP_TASK_DELAY_US, 0);
    expect_exact_run(2);
}
END_TEST

START_TEST(test_port_refuses_an_unknown_fault)
{
    /* Posted over vfio-user: the refusal comes back on the flush. */
    ck_assert_int_eq(npv_bar_write(t.port, RKNPU_TP_CORE(0) + RKNPU_TP_FAULT, 4, 99), 0);
    ck_assert_int_ne(npv_dev_flush(t.dev), 0);
    ck_assert_uint_eq(port_core(0, RKNPU_TP_FAULT), RKNPU_FAULT_NONE);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("rknpu_faults");
    TCase *tc = tcase_create("faults");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, stalled_run_never_completes_until_the_core_is_reset, 0,
                        RKNPU_NUM_CORES);
    tcase_add_test(tc, a_stall_on_one_core_leaves_the_others_running);
    tcase_add_test(tc, wrong_status_fault_reports_ppu_instead_of_dpu_done);
    tcase_add_test(tc, dma_error_fault_fails_one_run_with_dma_write_error);
    tcase_add_test(tc, reset_that_fails_once_keeps_the_core_in_reset_until_retried);
    tcase_add_test(tc, soft_reset_returns_the_core_registers_to_reset_values);
    tcase_add_test(tc, reset_during_a_slow_run_abandons_it);
    tcase_add_test(tc, test_port_refuses_an_unknown_fault);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    rknpu_require_model("fault injection needs the model");
    return npv_test_run(suite());
}

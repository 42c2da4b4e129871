/* SPDX-License-Identifier: MIT */
/*
 * The RKNPU model against a hostile client speaking raw vfio-user: first the
 * protocol probes every model passes (tests/common/vu_hostile.c, the same the
 * testdev server passes), then the model's own: register accesses of the
 * wrong width, offset or region, test-port values it does not take, garbage
 * and oversized register-command programs, a client that leaves mid-run.
 * Each is an error reply, a DMA error or a config error on that core, never a
 * crash; afterwards a well-formed client runs an exact matmul on every core
 * of the same model process. Model only.
 */
#include <check.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "npv_test.h"
#include "rknpu_harness.h"
#include "vu_hostile.h"

#define RAM_IOVA 0x10000000u
#define RAM_SIZE 0x10000u

static const struct vu_hostile_target rknpu_target = {
    .start = rknpu_server_start,
    .id_region = RKNPU_BAR_INDEX,
    .id_offset = RKNPU_CORE_BASE(0) + RKNPU_PC_VERSION,
    .id_width = 4,
    .id_value = RKNPU_VERSION_VALUE,
    .region0_size = RKNPU_BAR0_SIZE,
};

/* A driverless client on the same model process: reset every core, one exact matmul on each. */
static void well_formed_client_runs_exact(void)
{
    struct rknpu_t t;
    rknpu_open_at(&t, vu_hostile_path());
    struct rknpu_mm mm;
    rknpu_mm_init(&t, &mm, RKNPU_PREC_INT8, 4, 32, 32, true, true, 123);
    rknpu_mm_program(&t, &mm, 1);
    for (unsigned c = 0; c < RKNPU_NUM_CORES; c++) {
        ck_assert_uint_eq(rknpu_soft_reset(&t, c), 0);
        rknpu_mm_poison(&mm);
        rknpu_run(&t, c, &mm.prog, mm.prog_words, 1, RKNPU_INT_DPU_DONE | RKNPU_INT_DMA_ERROR);
        ck_assert_uint_eq(rknpu_wait(&t, c, RKNPU_GENEROUS_NS), RKNPU_INT_DPU_0);
        rknpu_finish(&t, c);
        ck_assert_msg(rknpu_mm_check(&mm), "core %u after the hostile client", c);
    }
    rknpu_mm_free(&mm);
    rknpu_close(&t);
}

static void core_wr(int fd, unsigned core, uint32_t off, uint32_t v)
{
    vu_raw_write(fd, RKNPU_BAR_INDEX, RKNPU_CORE_BASE(core) + off, 4, v);
}

static uint32_t port_core(int fd, unsigned core, uint32_t reg)
{
    return (uint32_t)vu_raw_read(fd, RKNPU_TP_BAR_INDEX, RKNPU_TP_CORE(core) + reg, 4);
}

/* Program core with a list at iova of amount and raise OPERATION_ENABLE. */
static void raw_run(int fd, unsigned core, uint32_t iova, uint32_t amount, uint32_t tasks)
{
    core_wr(fd, core, RKNPU_PC_BASE_ADDRESS, iova);
    core_wr(fd, core, RKNPU_PC_REGISTER_AMOUNTS, amount);
    core_wr(fd, core, RKNPU_PC_INTERRUPT_MASK, RKNPU_INT_VALID_MASK);
    core_wr(fd, core, RKNPU_PC_TASK_CON, tasks);
    core_wr(fd, core, RKNPU_PC_OPERATION_ENABLE, RKNPU_PC_OP_EN);
    core_wr(fd, core, RKNPU_PC_OPERATION_ENABLE, 0);
}

/* The core's run ended (idle with a status bit, or stalled): wait for it, under a deadline. */
static uint32_t raw_wait_end(int fd, unsigned core)
{
    int64_t deadline = rknpu_now_ns() + (int64_t)RKNPU_GENEROUS_NS;
    for (;;) {
        uint32_t state = port_core(fd, core, RKNPU_TP_STATE);
        uint32_t raw = (uint32_t)vu_raw_read(
            fd, RKNPU_BAR_INDEX, RKNPU_CORE_BASE(core) + RKNPU_PC_INTERRUPT_RAW_STATUS, 4);
        if (state == RKNPU_CORE_STALLED || (state == RKNPU_CORE_IDLE && raw != 0))
            return state;
        ck_assert_msg(rknpu_now_ns() < deadline, "core %u: run never ended", core);
        usleep(1000);
    }
}

START_TEST(bad_register_accesses_are_refused_and_the_model_keeps_serving)
{
    int fd = vu_raw_handshake();
    uint64_t v = 0;
    /* The cores' registers are 32 bits wide and aligned. */
    ck_assert_uint_eq(vu_raw_access(fd, 0, RKNPU_PC_VERSION, 8, false, &v), EINVAL);
    ck_assert_uint_eq(vu_raw_access(fd, 0, RKNPU_PC_VERSION, 2, false, &v), EINVAL);
    ck_assert_uint_eq(vu_raw_access(fd, 0, RKNPU_PC_VERSION + 2, 4, false, &v), EINVAL);
    ck_assert_uint_eq(vu_raw_access(fd, 0, RKNPU_PC_OPERATION_ENABLE, 1, true, &v), EINVAL);
    /* Past the BAR, an absent BAR, past the test port. */
    ck_assert_uint_eq(vu_raw_access(fd, 0, RKNPU_BAR0_SIZE - 2, 4, false, &v), EINVAL);
    ck_assert_uint_ne(vu_raw_access(fd, 1, 0, 4, false, &v), 0);
    ck_assert_uint_ne(vu_raw_access(fd, RKNPU_TP_BAR_INDEX, RKNPU_TP_BAR_SIZE, 4, false, &v), 0);
    /* A fault the test port does not know. */
    v = 77;
    ck_assert_uint_eq(
        vu_raw_access(fd, RKNPU_TP_BAR_INDEX, RKNPU_TP_CORE(1) + RKNPU_TP_FAULT, 4, true, &v),
        EINVAL);
    /* Every offset of a window and of the hole after them reads without harm. */
    for (uint64_t off = 0; off < RKNPU_MSIX_TABLE; off += 0x404)
        vu_raw_access(fd, 0, off & ~3ull, 4, false, &v);
    /* Writes to registers that do not exist are stored or dropped, never fatal. */
    for (uint32_t off = 0x100; off < RKNPU_CORE_WINDOW_SIZE; off += 0x1004)
        vu_raw_write(fd, 0, RKNPU_CORE_BASE(2) + (off & ~3u), 4, 0xffffffffu);
    ck_assert_uint_eq(vu_raw_read(fd, 0, RKNPU_CORE_BASE(1) + RKNPU_PC_VERSION, 4),
                      RKNPU_VERSION_VALUE);
    close(fd);
    well_formed_client_runs_exact();
}
END_TEST

START_TEST(garbage_programs_end_in_an_error_on_their_core_not_a_crash)
{
    int fd = vu_raw_handshake();
    uint64_t *ram = vu_raw_dma_map_memfd(fd, RAM_IOVA, RAM_SIZE);
    uint32_t seed = 0x5eed;
    for (size_t i = 0; i < RAM_SIZE / 8; i++) {
        seed = seed * 1664525u + 1013904223u;
        ram[i] = (uint64_t)seed << 32 | (seed ^ 0xa5a5a5a5u);
    }
    /* Random words; an amount past the mapping; a chain of 4095 tasks into the same garbage. */
    raw_run(fd, 0, RAM_IOVA, 63, 1);
    raw_run(fd, 1, RAM_IOVA + 0x100, RKNPU_PC_REGISTER_AMOUNTS_MASK, 1);
    raw_run(fd, 2, RAM_IOVA + 0x200, 7, RKNPU_MAX_TASKS_PER_RUN);
    for (unsigned c = 0; c < RKNPU_NUM_CORES; c++) {
        raw_wait_end(fd, c);
        ck_assert_uint_eq(port_core(fd, c, RKNPU_TP_TASKS_EXECUTED), 0);
        ck_assert_uint_eq(
            port_core(fd, c, RKNPU_TP_CONFIG_ERRORS) + port_core(fd, c, RKNPU_TP_DMA_FAULTS), 1);
    }
    /* The fetch past the end of the mapping is a DMA read error, not a read of other memory. */
    ck_assert_uint_eq(port_core(fd, 1, RKNPU_TP_DMA_FAULTS), 1);
    munmap(ram, RAM_SIZE);
    close(fd);
    well_formed_client_runs_exact();
}
END_TEST

START_TEST(a_client_that_leaves_mid_run_leaves_the_model_serving)
{
    struct rknpu_t t;
    /* Slow tasks, a chained run, and the client leaves while it is in flight. */
    rknpu_open_at(&t, vu_hostile_path());
    struct rknpu_mm mm;
    rknpu_mm_init(&t, &mm, RKNPU_PREC_INT8, 4, 32, 32, false, false, 3);
    rknpu_mm_program(&t, &mm, 2);
    rknpu_port_wr(&t, RKNPU_TP_TASK_DELAY_US, 200000);
    rknpu_run(&t, 0, &mm.prog, mm.prog_words, 2, RKNPU_INT_DPU_DONE);
    rknpu_mm_free(&mm);
    rknpu_close(&t);
    /* The next client finds the run ended (its memory went with its client) and works. */
    struct rknpu_t u;
    rknpu_open_at(&u, vu_hostile_path());
    rknpu_port_wr(&u, RKNPU_TP_TASK_DELAY_US, 0);
    rknpu_close(&u);
    well_formed_client_runs_exact();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("rknpu_hostile");
    vu_hostile_set_target(&rknpu_target);
    TCase *tc = tcase_create("protocol");
    vu_hostile_add_cases(tc);
    suite_add_tcase(s, tc);
    tc = tcase_create("device");
    tcase_add_checked_fixture(tc, vu_hostile_start, vu_hostile_stop);
    tcase_add_test(tc, bad_register_accesses_are_refused_and_the_model_keeps_serving);
    tcase_add_test(tc, garbage_programs_end_in_an_error_on_their_core_not_a_crash);
    tcase_add_test(tc, a_client_that_leaves_mid_run_leaves_the_model_serving);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    rknpu_require_model("hostile-client probing is aimed at the model");
    return npv_test_run(suite());
}

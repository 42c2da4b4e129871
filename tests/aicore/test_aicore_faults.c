/* SPDX-License-Identifier: MIT */
/*
 * Every fault the AICore model injects, and the device errors a bad host
 * causes, seen from a raw client: the watchdog poisons the device until
 * RESET; a dropped FIN, a late ACK, a bad physical id and a failed copy are
 * visible and recoverable; a malformed payload or an unmapped operand is a
 * fatal error with its bit, never a crash. Model only (fault injection), on
 * trapped windows: a refused dispatch is checked right after it is written.
 */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "aic_harness.h"
#include "npv_test.h"

#define CTRL_TABLE (AICORE_DEVMEM_BASE + 0x0000)

static struct aic t;
static struct aic_run r;
static uint32_t aiv, aic; /* ranks of the first AIV and the first AIC */

static void setup(void)
{
    const struct npv_aicore_model_config trapped = {.trapped_windows = true};
    aic_open(&t, &trapped);
    aic_upload_tables(&t, CTRL_TABLE, 0);
    aic_run_new(&t, &r);
}

static void teardown(void)
{
    aic_run_free(&r);
    aic_close(&t);
}

static void start_run(uint64_t epoch)
{
    ck_assert_uint_eq(aic_run_launch(&t, &r, CTRL_TABLE, 0, epoch), AICORE_LAUNCH_ACCEPTED);
    aic_run_wait_ready(&t, &r, r.nr);
    aiv = aic = UINT32_MAX;
    for (uint32_t rank = 0; rank < r.nr; rank++) {
        uint32_t type = aicore_core_type(t.clusters, r.phys[rank]);
        if (type == AICORE_CORE_TYPE_AIV && aiv == UINT32_MAX)
            aiv = rank;
        if (type == AICORE_CORE_TYPE_AIC && aic == UINT32_MAX)
            aic = rank;
    }
    aic_run_open(&t, &r, aiv);
    aic_run_open(&t, &r, aic);
}

static uint32_t cond_after(uint32_t rank, uint32_t want)
{
    uint32_t last = 0;
    ck_assert_msg(aic_wait_cond(&t, r.phys[rank], want, AIC_GENEROUS_NS, &last) == 0,
                  "sub-core %u: COND %#x, want %#x", r.phys[rank], last, want);
    return last;
}

/* A whole healthy run: every sub-core opened, one task on each of two, exit, result OK. */
static void healthy_run(uint64_t epoch)
{
    start_run(epoch);
    struct aic_task add, mm;
    aic_task_new(&t, &add, AICORE_KERNEL_VADD, 0, 256, 0, (uint32_t)epoch);
    aic_task_new(&t, &mm, AICORE_KERNEL_MATMUL, 8, 8, 8, (uint32_t)epoch);
    aic_task_fill(&r, aiv, 1, &add, 10);
    aic_task_fill(&r, aic, 1, &mm, 10);
    aic_dispatch(&t, r.phys[aiv], 1);
    aic_dispatch(&t, r.phys[aic], 1);
    cond_after(aiv, AICORE_COND_FIN(1));
    cond_after(aic, AICORE_COND_FIN(1));
    ck_assert(aic_task_exact(&add));
    ck_assert(aic_task_exact(&mm));
    aic_exit_all(&t, &r);
    ck_assert_int_eq(aic_wait_result(&t, &r, AIC_GENEROUS_NS), 0);
    ck_assert_uint_eq(((struct aicore_result *)r.result.va)->verdict, AICORE_VERDICT_OK);
    aic_task_free(&add);
    aic_task_free(&mm);
}

/* The run ended in a fatal error of rank's sub-core with bit err: result, poison, refusals. */
static void expect_fatal(uint32_t rank, uint64_t err)
{
    ck_assert_int_eq(aic_wait_result(&t, &r, AIC_GENEROUS_NS), 0);
    const struct aicore_result *res = r.result.va;
    ck_assert_uint_eq(res->verdict, AICORE_VERDICT_ERROR);
    ck_assert_uint_eq(res->fault_core, r.phys[rank] + 1);
    ck_assert(res->error & err);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_GLOBAL_ERR) & AICORE_ERR_FATAL_MASK, err);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_FAULT_CORE), r.phys[rank] + 1);
    uint64_t deadline = aic_now_ns() + AIC_GENEROUS_NS;
    while (aic_rd(&t, AICORE_REG_STATUS) & AICORE_STATUS_RUNNING)
        ck_assert(aic_now_ns() < deadline);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_STATUS), AICORE_STATUS_POISONED);
    /* Poisoned: a dispatch is ignored, LAUNCH refused. */
    uint32_t other = rank == aiv ? aic : aiv;
    uint32_t dmb = aic_ctrl_rd(&t, r.phys[other], AICORE_CTRL_DMB);
    aic_dispatch(&t, r.phys[other], 9);
    ck_assert_uint_eq(aic_ctrl_rd(&t, r.phys[other], AICORE_CTRL_DMB), dmb);
    ck_assert(aic_rd(&t, AICORE_REG_GLOBAL_ERR) & AICORE_ERR_DISPATCH_POISONED);
    aic_wr(&t, AICORE_REG_LAUNCH, AICORE_LAUNCH_VALUE);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_LAUNCH_STATUS), AICORE_LAUNCH_REFUSED_POISONED);
}

/* RESET clears device memory too: the table goes up again before the next run. */
static void reset_and_run_exact(uint64_t epoch)
{
    aic_wr(&t, AICORE_REG_RESET, AICORE_RESET_VALUE);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_GLOBAL_ERR), 0);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_STATUS), 0);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_FAULT_CORE), 0);
    aic_upload_tables(&t, CTRL_TABLE, 0);
    healthy_run(epoch);
}

START_TEST(a_hung_task_trips_the_watchdog_and_poisons_the_device_until_reset)
{
    aic_wr(&t, AICORE_REG_OP_TIMEOUT, 20000);
    start_run(1);
    aic_fault(&t, r.phys[aiv], AICORE_FAULT_HANG, 0);
    struct aic_task add;
    aic_task_new(&t, &add, AICORE_KERNEL_VADD, 0, 32, 0, 1);
    aic_task_fill(&r, aiv, 1, &add, 1);
    aic_dispatch(&t, r.phys[aiv], 1);
    cond_after(aiv, AICORE_COND_ACK(1));
    expect_fatal(aiv, AICORE_ERR_WATCHDOG);
    /* The hung core never wrote FIN. */
    ck_assert_uint_eq(aic_ctrl_rd(&t, r.phys[aiv], AICORE_CTRL_COND), AICORE_COND_ACK(1));
    aic_task_free(&add);
    reset_and_run_exact(2);
}
END_TEST

START_TEST(a_dropped_fin_leaves_cond_at_ack_and_the_core_takes_the_next_task)
{
    start_run(1);
    aic_fault(&t, r.phys[aiv], AICORE_FAULT_DROP_FIN, 0);
    struct aic_task a1, a2;
    aic_task_new(&t, &a1, AICORE_KERNEL_VADD, 0, 32, 0, 1);
    aic_task_new(&t, &a2, AICORE_KERNEL_VADD, 0, 32, 0, 2);
    aic_task_fill(&r, aiv, 1, &a1, 1);
    aic_dispatch(&t, r.phys[aiv], 1);
    uint64_t deadline = aic_now_ns() + AIC_GENEROUS_NS;
    while (aic_port_rd(&t, AICORE_TP_TASKS(r.phys[aiv])) != 1)
        ck_assert(aic_now_ns() < deadline);
    /* The task ran, but its FIN never came: the host's deadline has to catch this. */
    ck_assert(aic_task_exact(&a1));
    ck_assert_uint_eq(aic_ctrl_rd(&t, r.phys[aiv], AICORE_CTRL_COND), AICORE_COND_ACK(1));
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_GLOBAL_ERR), 0);
    /* Not poisoned: the next token is served and FINished. */
    aic_task_fill(&r, aiv, 2, &a2, 1);
    aic_dispatch(&t, r.phys[aiv], 2);
    cond_after(aiv, AICORE_COND_FIN(2));
    ck_assert(aic_task_exact(&a2));
    aic_exit_all(&t, &r);
    ck_assert_int_eq(aic_wait_result(&t, &r, AIC_GENEROUS_NS), 0);
    aic_task_free(&a1);
    aic_task_free(&a2);
}
END_TEST

START_TEST(a_delayed_ack_arrives_late_and_the_task_still_finishes)
{
    start_run(1);
    aic_fault(&t, r.phys[aiv], AICORE_FAULT_DELAY_ACK, 50000);
    struct aic_task add;
    aic_task_new(&t, &add, AICORE_KERNEL_VADD, 0, 32, 0, 1);
    aic_task_fill(&r, aiv, 1, &add, 1);
    uint64_t t0 = aic_now_ns();
    aic_dispatch(&t, r.phys[aiv], 1);
    cond_after(aiv, AICORE_COND_FIN(1));
    /* A lower bound only: the model cannot be early, however loaded the machine. */
    ck_assert_uint_ge(aic_now_ns() - t0, 50 * AIC_MS);
    ck_assert(aic_task_exact(&add));
    aic_exit_all(&t, &r);
    ck_assert_int_eq(aic_wait_result(&t, &r, AIC_GENEROUS_NS), 0);
    aic_task_free(&add);
}
END_TEST

START_TEST(a_bad_physical_id_in_a_ready_record_is_out_of_range_and_the_run_still_ends)
{
    uint32_t victim = npv_aicore_phys_aiv(t.clusters, 2, 1);
    aic_fault(&t, victim, AICORE_FAULT_BAD_PHYS_ID, 0);
    ck_assert_uint_eq(aic_run_launch(&t, &r, CTRL_TABLE, 0, 1), AICORE_LAUNCH_ACCEPTED);
    aic_run_wait_ready(&t, &r, r.nr);
    uint32_t bad = UINT32_MAX;
    for (uint32_t rank = 0; rank < r.nr; rank++)
        if (r.phys[rank] >= t.nsub)
            bad = rank;
    ck_assert_uint_ne(bad, UINT32_MAX);
    ck_assert_uint_eq(r.phys[bad], AICORE_BAD_PHYS_ID(victim));
    /* The host rejects the record; it retires that window by its id, which it knows. */
    r.phys[bad] = victim;
    aic_exit_all(&t, &r);
    ck_assert_int_eq(aic_wait_result(&t, &r, AIC_GENEROUS_NS), 0);
    ck_assert_uint_eq(((struct aicore_result *)r.result.va)->verdict, AICORE_VERDICT_OK);
    /* One-shot: the next run's records are right. */
    ck_assert_uint_eq(aic_run_launch(&t, &r, CTRL_TABLE, 0, 2), AICORE_LAUNCH_ACCEPTED);
    aic_run_wait_ready(&t, &r, r.nr);
    for (uint32_t rank = 0; rank < r.nr; rank++)
        ck_assert_uint_lt(r.phys[rank], t.nsub);
    aic_exit_all(&t, &r);
    ck_assert_int_eq(aic_wait_result(&t, &r, AIC_GENEROUS_NS), 0);
}
END_TEST

START_TEST(a_failed_copy_writes_nothing_and_the_next_copy_works)
{
    struct aic_buf in, out;
    aic_buf_new(&t, 4096, &in);
    aic_buf_new(&t, 4096, &out);
    memset(in.va, 0x5a, 4096);
    uint64_t dev = AICORE_DEVMEM_BASE + 0x80000;
    aic_fault(&t, 0, AICORE_FAULT_FAIL_COPY, 0);
    ck_assert_uint_eq(aic_copy(&t, AICORE_COPY_H2D, in.iova, dev, 4096), AICORE_COPY_ERROR);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_GLOBAL_ERR), AICORE_ERR_COPY);
    ck_assert_uint_eq(aic_copy(&t, AICORE_COPY_D2H, out.iova, dev, 4096), AICORE_COPY_DONE);
    for (size_t i = 0; i < 4096; i++)
        ck_assert_uint_eq(((uint8_t *)out.va)[i], 0);
    aic_port_wr(&t, AICORE_TP_COPY_QUERY_ADDR, dev);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_COPY_QUERY_COUNT), 0);
    ck_assert_uint_eq(aic_copy(&t, AICORE_COPY_H2D, in.iova, dev, 4096), AICORE_COPY_DONE);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_COPY_QUERY_COUNT), 1);
    ck_assert_uint_eq(aic_copy(&t, AICORE_COPY_D2H, out.iova, dev, 4096), AICORE_COPY_DONE);
    ck_assert_int_eq(memcmp(in.va, out.va, 4096), 0);
    aic_buf_free(&in);
    aic_buf_free(&out);
}
END_TEST

START_TEST(malformed_payloads_are_fatal_bad_payload_errors)
{
    struct aic_task add, mm;
    aic_task_new(&t, &add, AICORE_KERNEL_VADD, 0, 32, 0, 1);
    aic_task_new(&t, &mm, AICORE_KERNEL_MATMUL, 4, 4, 4, 1);
    for (unsigned c = 0; c < 6; c++) {
        start_run(c + 1);
        uint32_t rank = c == 1 ? aic : aiv;
        uint32_t token = 3;
        aic_task_fill(&r, rank, token, &add, 1);
        struct aicore_task_payload *p = aic_run_slot(&r, rank, token);
        switch (c) {
        case 0: /* the slot of the other token parity: its token does not match */
            aic_task_fill(&r, rank, token + 1, &add, 1);
            memset(p, 0, sizeof(*p));
            break;
        case 1: /* a vector kernel on the cube core */
            break;
        case 2:
            p->kernel = 77;
            break;
        case 3:
            p->n = AICORE_VADD_MAX_N + 1;
            break;
        case 4:
            p->reserved[1] = 1;
            break;
        case 5: /* a matmul on a vector core */
            aic_task_fill(&r, rank, token, &mm, 1);
            break;
        }
        aic_dispatch(&t, r.phys[rank], token);
        expect_fatal(rank, AICORE_ERR_BAD_PAYLOAD);
        aic_wr(&t, AICORE_REG_RESET, AICORE_RESET_VALUE);
        aic_upload_tables(&t, CTRL_TABLE, 0); /* RESET cleared device memory */
    }
    aic_task_free(&add);
    aic_task_free(&mm);
    reset_and_run_exact(10);
}
END_TEST

START_TEST(an_unmapped_operand_is_a_fatal_dma_fault)
{
    start_run(1);
    struct aic_task add;
    aic_task_new(&t, &add, AICORE_KERNEL_VADD, 0, 32, 0, 1);
    aic_task_fill(&r, aiv, 1, &add, 1);
    aic_run_slot(&r, aiv, 1)->c = 0x7000000000ull; /* nobody mapped it */
    aic_dispatch(&t, r.phys[aiv], 1);
    expect_fatal(aiv, AICORE_ERR_DMA_FAULT);
    aic_task_free(&add);
    reset_and_run_exact(2);
}
END_TEST

START_TEST(unmapped_workers_are_a_fatal_dma_fault_at_the_handshake)
{
    aic_wr(&t, AICORE_REG_RUN_CTRL_TABLE, CTRL_TABLE);
    aic_wr(&t, AICORE_REG_RUN_PMU_TABLE, 0);
    aic_wr(&t, AICORE_REG_RUN_WORKERS, 0x7000000000ull);
    aic_wr(&t, AICORE_REG_RUN_WORKERS_COUNT, AICORE_MAX_SUBCORES);
    aic_wr(&t, AICORE_REG_RUN_RESULT, r.result.iova);
    aic_wr(&t, AICORE_REG_RUN_EPOCH, 1);
    r.epoch = 1;
    aic_wr(&t, AICORE_REG_LAUNCH, AICORE_LAUNCH_VALUE);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_LAUNCH_STATUS), AICORE_LAUNCH_ACCEPTED);
    ck_assert_int_eq(aic_wait_result(&t, &r, AIC_GENEROUS_NS), 0);
    const struct aicore_result *res = r.result.va;
    ck_assert_uint_eq(res->verdict, AICORE_VERDICT_ERROR);
    ck_assert(res->error & AICORE_ERR_DMA_FAULT);
    ck_assert(aic_rd(&t, AICORE_REG_STATUS) & AICORE_STATUS_POISONED);
    reset_and_run_exact(2);
}
END_TEST

START_TEST(faults_are_one_shot_and_fault_none_disarms_them)
{
    aic_fault(&t, npv_aicore_phys_aiv(t.clusters, 0, 0), AICORE_FAULT_HANG, 0);
    aic_fault(&t, 0, AICORE_FAULT_FAIL_COPY, 0);
    aic_port_wr(&t, AICORE_TP_FAULT, AICORE_FAULT_NONE);
    healthy_run(1);
    /* Refused: an unknown fault, a core that does not exist, a zero delay. */
    /* Each write is posted over vfio-user: its refusal comes back on the flush. */
    ck_assert_int_eq(npv_bar_write(t.port, AICORE_TP_FAULT, 8, 99), 0);
    ck_assert_int_ne(npv_dev_flush(t.dev), 0);
    aic_port_wr(&t, AICORE_TP_FAULT_CORE, t.nsub);
    ck_assert_int_eq(npv_bar_write(t.port, AICORE_TP_FAULT, 8, AICORE_FAULT_HANG), 0);
    ck_assert_int_ne(npv_dev_flush(t.dev), 0);
    aic_port_wr(&t, AICORE_TP_FAULT_CORE, 0);
    aic_port_wr(&t, AICORE_TP_FAULT_ARG, 0);
    ck_assert_int_eq(npv_bar_write(t.port, AICORE_TP_FAULT, 8, AICORE_FAULT_DELAY_ACK), 0);
    ck_assert_int_ne(npv_dev_flush(t.dev), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("aicore_faults");
    TCase *tc = tcase_create("faults");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, a_hung_task_trips_the_watchdog_and_poisons_the_device_until_reset);
    tcase_add_test(tc, a_dropped_fin_leaves_cond_at_ack_and_the_core_takes_the_next_task);
    tcase_add_test(tc, a_delayed_ack_arrives_late_and_the_task_still_finishes);
    tcase_add_test(tc, a_bad_physical_id_in_a_ready_record_is_out_of_range_and_the_run_still_ends);
    tcase_add_test(tc, a_failed_copy_writes_nothing_and_the_next_copy_works);
    tcase_add_test(tc, malformed_payloads_are_fatal_bad_payload_errors);
    tcase_add_test(tc, an_unmapped_operand_is_a_fatal_dma_fault);
    tcase_add_test(tc, unmapped_workers_are_a_fatal_dma_fault_at_the_handshake);
    tcase_add_test(tc, faults_are_one_shot_and_fault_none_disarms_them);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    aic_require_model("fault injection needs the model's test port");
    return npv_test_run(suite());
}

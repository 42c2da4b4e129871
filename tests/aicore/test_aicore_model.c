/* SPDX-License-Identifier: MIT */
/*
 * The AICore model from a raw client (no driver): identity and topology,
 * absent and powered-off windows, the dispatch handshake by hand with real
 * kernels, LAUNCH resetting DMB, the copy engine, PMU counting and the test
 * port's counters. Model only: these check the model itself, register by
 * register, so most run on trapped windows (every access seen as it is made);
 * the cases at the end run on the mapped windows the model polls.
 */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "aic_harness.h"
#include "npv_test.h"

#define CTRL_TABLE (AICORE_DEVMEM_BASE + 0x0000)
#define PMU_TABLE  (AICORE_DEVMEM_BASE + 0x1000)

static struct aic t;
static const struct npv_aicore_model_config trapped = {.trapped_windows = true};

static void setup(void)
{
    aic_open(&t, &trapped);
}

static void teardown(void)
{
    aic_close(&t);
}

/* Tables uploaded, LAUNCH accepted, every sub-core ready. */
static void start_run(struct aic_run *r, uint64_t pmu_table, uint64_t epoch)
{
    ck_assert_uint_eq(aic_run_launch(&t, r, CTRL_TABLE, pmu_table, epoch), AICORE_LAUNCH_ACCEPTED);
    aic_run_wait_ready(&t, r, r->nr);
}

/* The first rank whose sub-core has type `type`. */
static uint32_t rank_of_type(const struct aic_run *r, uint32_t type)
{
    for (uint32_t rank = 0; rank < r->nr; rank++)
        if (aicore_core_type(t.clusters, r->phys[rank]) == type)
            return rank;
    ck_abort_msg("no sub-core of type %u", type);
    return 0;
}

static void run_task(struct aic_run *r, uint32_t rank, uint32_t token, const struct aic_task *k,
                     uint32_t work)
{
    aic_task_fill(r, rank, token, k, work);
    aic_dispatch(&t, r->phys[rank], token);
    uint32_t last = 0;
    ck_assert_msg(
        aic_wait_cond(&t, r->phys[rank], AICORE_COND_FIN(token), AIC_GENEROUS_NS, &last) == 0,
        "token %u: COND %#x", token, last);
}

static void finish_run(struct aic_run *r, uint32_t verdict)
{
    aic_exit_all(&t, r);
    ck_assert_int_eq(aic_wait_result(&t, r, AIC_GENEROUS_NS), 0);
    const struct aicore_result *res = r->result.va;
    ck_assert_uint_eq(res->verdict, verdict);
    ck_assert_uint_eq(res->cores_exited, r->nr);
}

START_TEST(identity_and_topology_registers_describe_the_default_part)
{
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_ID), AICORE_ID_VALUE);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_VERSION), AICORE_VERSION_VALUE);
    uint64_t caps = aic_rd(&t, AICORE_REG_CAPS);
    ck_assert_uint_eq(AICORE_CAPS_CLUSTERS(caps), AICORE_DEFAULT_CLUSTERS);
    ck_assert_uint_eq(AICORE_CAPS_AIC_PER_CLUSTER(caps), 1);
    ck_assert_uint_eq(AICORE_CAPS_AIV_PER_CLUSTER(caps), 2);
    ck_assert_uint_eq(AICORE_CAPS_PMU_COUNTERS(caps), AICORE_PMU_COUNTERS);
    ck_assert(!(caps & AICORE_CAPS_PMU_IN_CTRL));
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_WINDOW_STRIDE), AICORE_WINDOW_STRIDE);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_SYS_CNT_HZ), AICORE_SYS_CNT_HZ);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_DEVMEM_BASE), AICORE_DEVMEM_BASE);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_DEVMEM_SIZE), AICORE_DEVMEM_SIZE_DEFAULT);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_CTRL_REG_BASE), AICORE_CTRL_REG_BASE);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_PMU_REG_BASE), AICORE_PMU_REG_BASE);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_OP_TIMEOUT), AICORE_OP_TIMEOUT_DEFAULT_US);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_GLOBAL_ERR), 0);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_STATUS), 0);
    /* 72 sub-cores, one cluster fused off: its AIC and its two AIVs. */
    uint32_t c = AICORE_DEFAULT_ABSENT_CLUSTER, n = 0;
    for (uint32_t i = 0; i < t.nsub; i++) {
        bool absent = i == npv_aicore_phys_aic(t.clusters, c) ||
                      i == npv_aicore_phys_aiv(t.clusters, c, 0) ||
                      i == npv_aicore_phys_aiv(t.clusters, c, 1);
        ck_assert_msg(aic_live(&t, i) == !absent, "sub-core %u", i);
        if (!absent) {
            ck_assert_uint_eq(aic_ctrl_rd(&t, i, AICORE_CTRL_PHYS_ID), i);
            ck_assert_uint_eq(aic_ctrl_rd(&t, i, AICORE_CTRL_FAST_PATH), AICORE_FAST_PATH_CLOSE);
            n++;
        }
    }
    ck_assert_uint_eq(n, 69);
    ck_assert_uint_eq(t.power_on[0], ~0ull);
    ck_assert_uint_eq(t.power_on[1], 0xff);
    uint64_t c0 = aic_rd(&t, AICORE_REG_SYS_CNT), c1;
    while ((c1 = aic_rd(&t, AICORE_REG_SYS_CNT)) == c0)
        ;
    ck_assert_uint_gt(c1, c0);
}
END_TEST

START_TEST(absent_and_powered_off_windows_read_zero_and_a_dispatch_there_is_an_error)
{
    uint32_t absent = npv_aicore_phys_aic(t.clusters, AICORE_DEFAULT_ABSENT_CLUSTER);
    uint32_t off = npv_aicore_phys_aiv(t.clusters, 3, 1);
    aic_port_wr(&t, AICORE_TP_POWER_ON_LO, t.power_on[0] & ~(1ull << off));
    aic_topology(&t);
    ck_assert(!aic_live(&t, off));
    uint32_t dead[] = {absent, off, t.nsub, AICORE_MAX_SUBCORES - 1};
    for (unsigned k = 0; k < 4; k++) {
        aic_ctrl_wr(&t, dead[k], AICORE_CTRL_FAST_PATH, AICORE_FAST_PATH_OPEN);
        ck_assert_uint_eq(aic_ctrl_rd(&t, dead[k], AICORE_CTRL_PHYS_ID), 0);
        ck_assert_uint_eq(aic_ctrl_rd(&t, dead[k], AICORE_CTRL_FAST_PATH), 0);
        ck_assert_uint_eq(aic_ctrl_rd(&t, dead[k], AICORE_CTRL_COND), 0);
        ck_assert_uint_eq(aic_pmu_rd(&t, dead[k], AICORE_PMU_CTRL_0), 0);
    }
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_GLOBAL_ERR), 0);
    aic_ctrl_wr(&t, off, AICORE_CTRL_DMB, 5);
    ck_assert_uint_eq(aic_ctrl_rd(&t, off, AICORE_CTRL_DMB), 0);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_GLOBAL_ERR), AICORE_ERR_DISPATCH_ABSENT);
    /* Not fatal: the device is not poisoned by it. */
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_STATUS), 0);
    /* The powered-off core is not launched, and gets no ready record. */
    aic_upload_tables(&t, CTRL_TABLE, 0);
    struct aic_run r;
    aic_run_new(&t, &r);
    start_run(&r, 0, 1);
    ck_assert_uint_eq(r.nr, 68);
    for (uint32_t rank = 0; rank < r.nr; rank++)
        ck_assert(r.phys[rank] != off && r.phys[rank] != absent);
    ck_assert_uint_eq(((struct aicore_handshake *)r.workers.va)[r.nr].done, 0);
    finish_run(&r, AICORE_VERDICT_OK);
    aic_run_free(&r);
}
END_TEST

START_TEST(hand_driven_handshake_runs_vector_add_and_matmul_exact)
{
    aic_upload_tables(&t, CTRL_TABLE, 0);
    struct aic_run r;
    aic_run_new(&t, &r);
    start_run(&r, 0, 7);
    /* Ranks: AICs in physical order, then AIVs; every physical id once. */
    uint32_t prev = 0;
    for (uint32_t rank = 0; rank < r.nr; rank++) {
        ck_assert(aic_live(&t, r.phys[rank]));
        if (rank > 0)
            ck_assert_uint_gt(r.phys[rank], prev);
        prev = r.phys[rank];
    }
    /* Until the window opens, COND is at its reset value. */
    uint32_t aiv = rank_of_type(&r, AICORE_CORE_TYPE_AIV);
    uint32_t aic = rank_of_type(&r, AICORE_CORE_TYPE_AIC);
    ck_assert_uint_eq(aic_ctrl_rd(&t, r.phys[aiv], AICORE_CTRL_COND), AICORE_COND_RESET);
    aic_run_open(&t, &r, aiv);
    aic_run_open(&t, &r, aic);

    struct aic_task add, add2, mm;
    aic_task_new(&t, &add, AICORE_KERNEL_VADD, 0, 1000, 0, 1);
    aic_task_new(&t, &add2, AICORE_KERNEL_VADD, 0, 4096, 0, 2);
    aic_task_new(&t, &mm, AICORE_KERNEL_MATMUL, 17, 9, 33, 3);
    run_task(&r, aiv, 1, &add, 100); /* slot 1 */
    run_task(&r, aic, 1, &mm, 100);
    run_task(&r, aiv, 2, &add2, 100); /* slot 0 */
    ck_assert(aic_task_exact(&add));
    ck_assert(aic_task_exact(&add2));
    ck_assert(aic_task_exact(&mm));
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_TASKS(r.phys[aiv])), 2);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_TASKS(r.phys[aic])), 1);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_DISPATCHES), 3);

    finish_run(&r, AICORE_VERDICT_OK);
    const struct aicore_result *res = r.result.va;
    ck_assert_uint_eq(res->epoch, 7);
    ck_assert_uint_eq(res->tasks_done, 3);
    ck_assert_uint_eq(res->fault_core, 0);
    ck_assert_uint_le(res->start_sys_cnt, res->end_sys_cnt);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_STATUS), 0);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_GLOBAL_ERR), 0);
    aic_task_free(&add);
    aic_task_free(&add2);
    aic_task_free(&mm);
    aic_run_free(&r);
}
END_TEST

START_TEST(launch_resets_every_dmb_and_cond)
{
    aic_upload_tables(&t, CTRL_TABLE, 0);
    struct aic_run r;
    aic_run_new(&t, &r);
    start_run(&r, 0, 1);
    for (uint32_t rank = 0; rank < r.nr; rank++)
        aic_run_open(&t, &r, rank);
    finish_run(&r, AICORE_VERDICT_OK);
    for (uint32_t i = 0; i < t.nsub; i++)
        if (aic_live(&t, i))
            ck_assert_uint_eq(aic_ctrl_rd(&t, i, AICORE_CTRL_DMB), AICORE_DMB_EXIT);
    ck_assert_uint_eq(aic_run_launch(&t, &r, CTRL_TABLE, 0, 2), AICORE_LAUNCH_ACCEPTED);
    for (uint32_t i = 0; i < t.nsub; i++) {
        ck_assert_uint_eq(aic_ctrl_rd(&t, i, AICORE_CTRL_DMB), AICORE_DMB_CLOSED);
        ck_assert_uint_eq(aic_ctrl_rd(&t, i, AICORE_CTRL_COND), AICORE_COND_RESET);
    }
    /* The second run shakes hands again from scratch and computes. */
    aic_run_wait_ready(&t, &r, r.nr);
    uint32_t aiv = rank_of_type(&r, AICORE_CORE_TYPE_AIV);
    aic_run_open(&t, &r, aiv);
    struct aic_task add;
    aic_task_new(&t, &add, AICORE_KERNEL_VADD, 0, 64, 0, 9);
    run_task(&r, aiv, 1, &add, 1);
    ck_assert(aic_task_exact(&add));
    finish_run(&r, AICORE_VERDICT_OK);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_LAUNCHES), 2);
    aic_task_free(&add);
    aic_run_free(&r);
}
END_TEST

START_TEST(launch_is_refused_without_parameters_and_while_busy)
{
    aic_upload_tables(&t, CTRL_TABLE, 0);
    struct aic_run r;
    aic_run_new(&t, &r);
    ck_assert_uint_eq(aic_run_launch(&t, &r, CTRL_TABLE, 0, 0), AICORE_LAUNCH_REFUSED_BAD_PARAM);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_GLOBAL_ERR), AICORE_ERR_LAUNCH_REFUSED);
    ck_assert_uint_eq(aic_run_launch(&t, &r, 0, 0, 1), AICORE_LAUNCH_REFUSED_BAD_PARAM);
    aic_wr(&t, AICORE_REG_RUN_WORKERS_COUNT, 10);
    aic_wr(&t, AICORE_REG_LAUNCH, AICORE_LAUNCH_VALUE);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_LAUNCH_STATUS), AICORE_LAUNCH_REFUSED_BAD_PARAM);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_LAUNCHES), 0);
    start_run(&r, 0, 3);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_STATUS), AICORE_STATUS_RUNNING);
    aic_wr(&t, AICORE_REG_LAUNCH, AICORE_LAUNCH_VALUE);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_LAUNCH_STATUS), AICORE_LAUNCH_REFUSED_BUSY);
    /* The refused LAUNCH did not disturb the running one. */
    finish_run(&r, AICORE_VERDICT_OK);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_LAUNCHES), 1);
    aic_run_free(&r);
}
END_TEST

START_TEST(a_table_entry_that_is_not_the_window_leaves_that_core_never_ready)
{
    /* Two entries swapped: both sub-cores find a window that is not theirs. */
    uint32_t x = npv_aicore_phys_aiv(t.clusters, 0, 0), y = npv_aicore_phys_aiv(t.clusters, 0, 1);
    struct aic_buf b;
    aic_buf_new(&t, t.nsub * 8u, &b);
    uint64_t *e = b.va;
    for (uint32_t i = 0; i < t.nsub; i++)
        e[i] = aic_live(&t, i) ? AICORE_CTRL_REG_BASE + i * AICORE_WINDOW_STRIDE : 0;
    e[x] = AICORE_CTRL_REG_BASE + y * AICORE_WINDOW_STRIDE;
    e[y] = AICORE_CTRL_REG_BASE + x * AICORE_WINDOW_STRIDE;
    ck_assert_uint_eq(aic_copy(&t, AICORE_COPY_H2D, b.iova, CTRL_TABLE, b.len), AICORE_COPY_DONE);
    struct aic_run r;
    aic_run_new(&t, &r);
    ck_assert_uint_eq(aic_run_launch(&t, &r, CTRL_TABLE, 0, 5), AICORE_LAUNCH_ACCEPTED);
    uint64_t deadline = aic_now_ns() + AIC_GENEROUS_NS;
    while (aic_port_rd(&t, AICORE_TP_TABLE_MISMATCHES) != 2)
        ck_assert(aic_now_ns() < deadline);
    /* Every other sub-core reports ready; x and y (the first two AIV ranks) never do. */
    volatile struct aicore_handshake *h = r.workers.va;
    uint32_t ready;
    do {
        ck_assert(aic_now_ns() < deadline);
        ready = 0;
        for (uint32_t rank = 0; rank < r.nr; rank++)
            ready += __atomic_load_n(&h[rank].done, __ATOMIC_ACQUIRE) != 0;
    } while (ready != r.nr - 2);
    uint32_t first_aiv = t.clusters - 1; /* the absent cluster's AIC has no rank */
    ck_assert_uint_eq(h[first_aiv].done, 0);
    ck_assert_uint_eq(h[first_aiv + 1].done, 0);
    /* The run cannot end: no result record, LAUNCH stays refused, until RESET. */
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_STATUS), AICORE_STATUS_RUNNING);
    ck_assert_uint_eq(((const struct aicore_result *)r.result.va)->epoch, 0);
    aic_wr(&t, AICORE_REG_RESET, AICORE_RESET_VALUE);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_STATUS), 0);
    /* A table in zeroed device memory (uploaded nowhere): no sub-core is ever ready. */
    ck_assert_uint_eq(aic_run_launch(&t, &r, AICORE_DEVMEM_BASE + 0x100000, 0, 6),
                      AICORE_LAUNCH_ACCEPTED);
    while (aic_port_rd(&t, AICORE_TP_TABLE_MISMATCHES) != 2 + r.nr)
        ck_assert(aic_now_ns() < deadline);
    ck_assert_uint_eq(h[0].done, 0);
    aic_wr(&t, AICORE_REG_RESET, AICORE_RESET_VALUE);
    aic_buf_free(&b);
    aic_run_free(&r);
}
END_TEST

START_TEST(copy_engine_round_trips_and_refuses_what_is_outside_device_memory)
{
    struct aic_buf in, out;
    aic_buf_new(&t, 8192, &in);
    aic_buf_new(&t, 8192, &out);
    for (size_t i = 0; i < 8192; i++)
        ((uint8_t *)in.va)[i] = (uint8_t)(i * 7 + 3);
    uint64_t dev = AICORE_DEVMEM_BASE + 0x20000;
    ck_assert_uint_eq(aic_copy(&t, AICORE_COPY_H2D, in.iova, dev, 8192), AICORE_COPY_DONE);
    ck_assert_uint_eq(aic_copy(&t, AICORE_COPY_D2H, out.iova + 100, dev + 50, 4000),
                      AICORE_COPY_DONE);
    ck_assert_int_eq(memcmp((uint8_t *)out.va + 100, (uint8_t *)in.va + 50, 4000), 0);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_COPY_DONE), 2);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_GLOBAL_ERR), 0);
    uint64_t end = AICORE_DEVMEM_BASE + AICORE_DEVMEM_SIZE_DEFAULT;
    ck_assert_uint_eq(aic_copy(&t, AICORE_COPY_H2D, in.iova, end - 8, 16), AICORE_COPY_ERROR);
    ck_assert_uint_eq(aic_copy(&t, AICORE_COPY_H2D, in.iova, AICORE_DEVMEM_BASE - 8, 16),
                      AICORE_COPY_ERROR);
    ck_assert_uint_eq(aic_copy(&t, AICORE_COPY_H2D, in.iova, dev, 0), AICORE_COPY_ERROR);
    ck_assert_uint_eq(aic_copy(&t, 7, in.iova, dev, 16), AICORE_COPY_ERROR);
    ck_assert_uint_eq(aic_copy(&t, AICORE_COPY_H2D, 0xdead0000000ull, dev, 16), AICORE_COPY_ERROR);
    ck_assert_uint_eq(aic_copy(&t, AICORE_COPY_D2H, ~0ull - 8, dev, 16), AICORE_COPY_ERROR);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_GLOBAL_ERR), AICORE_ERR_COPY);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_COPIES_FAILED), 6);
    /* A copy error is not fatal: the engine and the device go on. */
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_STATUS), 0);
    ck_assert_uint_eq(aic_copy(&t, AICORE_COPY_H2D, in.iova, end - 16, 16), AICORE_COPY_DONE);
    aic_buf_free(&in);
    aic_buf_free(&out);
}
END_TEST

START_TEST(the_test_port_counts_copies_per_destination_and_table_reads_per_table)
{
    struct aic_buf b;
    aic_buf_new(&t, 4096, &b);
    uint64_t x = AICORE_DEVMEM_BASE + 0x40000, y = x + 0x1000;
    ck_assert_uint_eq(aic_copy(&t, AICORE_COPY_H2D, b.iova, x, 64), AICORE_COPY_DONE);
    ck_assert_uint_eq(aic_copy(&t, AICORE_COPY_H2D, b.iova, x, 64), AICORE_COPY_DONE);
    ck_assert_uint_eq(aic_copy(&t, AICORE_COPY_H2D, b.iova, y, 64), AICORE_COPY_DONE);
    ck_assert_uint_eq(aic_copy(&t, AICORE_COPY_D2H, b.iova, x, 64), AICORE_COPY_DONE);
    aic_port_wr(&t, AICORE_TP_COPY_QUERY_ADDR, x);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_COPY_QUERY_COUNT), 2);
    aic_port_wr(&t, AICORE_TP_COPY_QUERY_ADDR, y);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_COPY_QUERY_COUNT), 1);
    aic_port_wr(&t, AICORE_TP_COPY_QUERY_ADDR, y + 8);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_COPY_QUERY_COUNT), 0);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_COPIES_H2D), 3);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_COPIES_D2H), 1);

    aic_upload_tables(&t, CTRL_TABLE, PMU_TABLE);
    struct aic_run r;
    aic_run_new(&t, &r);
    for (uint64_t epoch = 1; epoch <= 3; epoch++) {
        start_run(&r, epoch == 2 ? 0 : PMU_TABLE, epoch);
        finish_run(&r, AICORE_VERDICT_OK);
    }
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_CTRL_TABLE_READS), 3);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_CTRL_TABLE_DISTINCT), 1);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_CTRL_TABLE_LAST), CTRL_TABLE);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_PMU_TABLE_READS), 2);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_PMU_TABLE_DISTINCT), 1);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_PMU_TABLE_LAST), PMU_TABLE);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_TABLE_MISMATCHES), 0);

    aic_port_wr(&t, AICORE_TP_COUNTERS_CLEAR, 1);
    aic_port_wr(&t, AICORE_TP_COPY_QUERY_ADDR, x);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_COPY_QUERY_COUNT), 0);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_COPIES_H2D), 0);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_CTRL_TABLE_READS), 0);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_PMU_TABLE_DISTINCT), 0);
    aic_run_free(&r);
    aic_buf_free(&b);
}
END_TEST

static void pmu_program(uint32_t phys, uint64_t start, uint64_t stop, uint32_t ctrl)
{
    for (uint32_t i = 0; i < AICORE_PMU_COUNTERS; i++) {
        aic_pmu_wr(&t, phys, AICORE_PMU_EVT_IDX(i), i + 1);
        aic_pmu_wr(&t, phys, AICORE_PMU_CNT(i), 0);
    }
    aic_pmu_wr(&t, phys, AICORE_PMU_CNT_TOTAL_LO, 0);
    aic_pmu_wr(&t, phys, AICORE_PMU_CNT_TOTAL_HI, 0);
    aic_pmu_wr(&t, phys, AICORE_PMU_START_CYC_LO, (uint32_t)start);
    aic_pmu_wr(&t, phys, AICORE_PMU_START_CYC_HI, (uint32_t)(start >> 32));
    aic_pmu_wr(&t, phys, AICORE_PMU_STOP_CYC_LO, (uint32_t)stop);
    aic_pmu_wr(&t, phys, AICORE_PMU_STOP_CYC_HI, (uint32_t)(stop >> 32));
    aic_pmu_wr(&t, phys, AICORE_PMU_CTRL_0, ctrl);
}

static void pmu_expect(uint32_t phys, uint64_t cycles)
{
    uint64_t total = aic_pmu_rd(&t, phys, AICORE_PMU_CNT_TOTAL_LO) |
                     (uint64_t)aic_pmu_rd(&t, phys, AICORE_PMU_CNT_TOTAL_HI) << 32;
    ck_assert_uint_eq(total, cycles);
    for (uint32_t i = 0; i < AICORE_PMU_COUNTERS; i++)
        ck_assert_uint_eq(aic_pmu_rd(&t, phys, AICORE_PMU_CNT(i)),
                          (uint32_t)aicore_pmu_event_count(i + 1, cycles));
}

/* One PMU run on the first AIV: tasks of the given work, in order. */
static void pmu_case(uint64_t pmu_table, uint64_t epoch, const uint32_t *work, unsigned n,
                     uint64_t start, uint64_t stop, uint32_t ctrl, uint64_t want)
{
    struct aic_run r;
    aic_run_new(&t, &r);
    start_run(&r, pmu_table, epoch);
    uint32_t aiv = rank_of_type(&r, AICORE_CORE_TYPE_AIV);
    pmu_program(r.phys[aiv], start, stop, ctrl);
    aic_run_open(&t, &r, aiv);
    struct aic_task add;
    aic_task_new(&t, &add, AICORE_KERNEL_VADD, 0, 16, 0, 4);
    for (unsigned i = 0; i < n; i++)
        run_task(&r, aiv, i + 1, &add, work[i]);
    pmu_expect(r.phys[aiv], want);
    finish_run(&r, AICORE_VERDICT_OK);
    aic_task_free(&add);
    aic_run_free(&r);
}

START_TEST(pmu_counts_deterministically_only_when_enabled_and_inside_the_cycle_window)
{
    aic_upload_tables(&t, CTRL_TABLE, PMU_TABLE);
    const uint32_t work[] = {1000, 500};
    /* Enabled, whole window: every declared cycle. */
    pmu_case(PMU_TABLE, 1, work, 2, 0, ~0ull, AICORE_PMU_CTRL_ENABLE_PART, 1500);
    /* Disabled in CTRL_0: nothing. */
    pmu_case(PMU_TABLE, 2, work, 2, 0, ~0ull, 0, 0);
    /* PMU off for the run (no Pmu table): nothing, even enabled. */
    pmu_case(0, 3, work, 2, 0, ~0ull, AICORE_PMU_CTRL_ENABLE, 0);
    /* The sub-core's cycle clock is at 4500 now; a window [4900, 5099] sees 200 of [4500, 6000). */
    pmu_case(PMU_TABLE, 4, work, 2, 4900, 5099, AICORE_PMU_CTRL_ENABLE, 200);
}
END_TEST

START_TEST(pmu_aliased_into_ctrl_moves_the_registers_and_the_table_base)
{
    aic_close(&t);
    struct npv_aicore_model_config cfg = {.pmu_in_ctrl = true, .trapped_windows = true};
    aic_open(&t, &cfg);
    ck_assert(t.pmu_in_ctrl);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_PMU_REG_BASE), aic_rd(&t, AICORE_REG_CTRL_REG_BASE));
    /* Nothing answers in BAR3. */
    ck_assert_int_eq(npv_bar_write(t.pmu, AICORE_PMU_CTRL_0, 4, 1), 0);
    uint64_t v = 9;
    ck_assert_int_eq(npv_bar_read(t.pmu, AICORE_PMU_CTRL_0, 4, &v), 0);
    ck_assert_uint_eq(v, 0);
    aic_upload_tables(&t, CTRL_TABLE, PMU_TABLE);
    const uint32_t work[] = {300};
    pmu_case(PMU_TABLE, 1, work, 1, 0, ~0ull, AICORE_PMU_CTRL_ENABLE, 300);
    /* A Pmu table built for the separate page is wrong on this part: nobody gets ready. */
    struct aic_buf b;
    aic_buf_new(&t, t.nsub * 8u, &b);
    uint64_t *e = b.va;
    for (uint32_t i = 0; i < t.nsub; i++)
        e[i] = aic_live(&t, i) ? AICORE_PMU_REG_BASE + i * AICORE_WINDOW_STRIDE : 0;
    ck_assert_uint_eq(aic_copy(&t, AICORE_COPY_H2D, b.iova, PMU_TABLE, b.len), AICORE_COPY_DONE);
    struct aic_run r;
    aic_run_new(&t, &r);
    ck_assert_uint_eq(aic_run_launch(&t, &r, CTRL_TABLE, PMU_TABLE, 2), AICORE_LAUNCH_ACCEPTED);
    uint64_t deadline = aic_now_ns() + AIC_GENEROUS_NS;
    while (aic_port_rd(&t, AICORE_TP_TABLE_MISMATCHES) != r.nr)
        ck_assert(aic_now_ns() < deadline);
    aic_wr(&t, AICORE_REG_RESET, AICORE_RESET_VALUE);
    aic_run_free(&r);
    aic_buf_free(&b);
}
END_TEST

START_TEST(a_custom_topology_shapes_the_part)
{
    aic_close(&t);
    struct npv_aicore_model_config cfg = {
        .clusters = 4,
        .trapped_windows = true,
        .custom_topology = true,
        .present = {0xfffu & ~(1ull << 5)},
        .power_on = {0xfffu & ~(1ull << 1)},
    };
    aic_open(&t, &cfg);
    ck_assert_uint_eq(t.clusters, 4);
    ck_assert_uint_eq(t.nsub, 12);
    ck_assert(!aic_live(&t, 5) && !aic_live(&t, 1) && aic_live(&t, 0) && aic_live(&t, 11));
    aic_upload_tables(&t, CTRL_TABLE, 0);
    struct aic_run r;
    aic_run_new(&t, &r);
    start_run(&r, 0, 1);
    ck_assert_uint_eq(r.nr, 10);
    finish_run(&r, AICORE_VERDICT_OK);
    /* Bits past the topology are refused. */
    uint64_t v = 1ull << 12;
    /* Posted over vfio-user: the refusal comes back on the flush. */
    ck_assert_int_eq(npv_bar_write(t.port, AICORE_TP_PRESENT_LO, 8, v), 0);
    ck_assert_int_ne(npv_dev_flush(t.dev), 0);
    aic_run_free(&r);
}
END_TEST

/* Issue 23 item 6: the record is simpler's Handshake, byte for byte. */
START_TEST(ready_records_are_laid_out_as_simplers_handshake)
{
    aic_upload_tables(&t, CTRL_TABLE, 0);
    struct aic_run r;
    aic_run_new(&t, &r);
    start_run(&r, 0, 1);
    for (uint32_t rank = 0; rank < r.nr; rank++) {
        const uint32_t *w = (const uint32_t *)((const uint8_t *)r.workers.va + rank * 64u);
        ck_assert_uint_eq(w[0], 0);        /* aicpu_ready@0: legacy, nobody's */
        ck_assert_uint_eq(w[1], rank + 1); /* aicore_done@4 */
        ck_assert_uint_eq(w[2], 0);        /* task@8: the host's, not written yet */
        ck_assert_uint_eq(w[4], aicore_core_type(t.clusters, r.phys[rank])); /* core_type@16 */
        ck_assert_uint_eq(w[5], r.phys[rank]); /* physical_core_id@20 */
    }
    finish_run(&r, AICORE_VERDICT_OK);
    aic_run_free(&r);
}
END_TEST

/* A task on the first AIV that never ends (the watchdog off): the sub-core's CTRL while it runs. */
/*
 * CTRL of the sub-core a hung task holds. The model acknowledges the task
 * (ACK) one worker step before the kernel starts and the gate opens
 * (model_core.c step_idle, then step_run), so a read right after ACK may come
 * first: CTRL is read until it shows want (a PMU run's open gate) or the
 * deadline passes, and the last read is returned.
 */
static uint32_t ctrl_while_hung(uint64_t pmu_table, uint64_t epoch, uint32_t want)
{
    aic_upload_tables(&t, CTRL_TABLE, PMU_TABLE);
    aic_wr(&t, AICORE_REG_OP_TIMEOUT, 0);
    struct aic_run r;
    aic_run_new(&t, &r);
    start_run(&r, pmu_table, epoch);
    uint32_t aiv = rank_of_type(&r, AICORE_CORE_TYPE_AIV), p = r.phys[aiv];
    aic_run_open(&t, &r, aiv);
    ck_assert_uint_eq(aic_ctrl_rd(&t, p, AICORE_CTRL_CTRL), 0); /* polling is not counted */
    struct aic_task add;
    aic_task_new(&t, &add, AICORE_KERNEL_VADD, 0, 16, 0, 3);
    aic_fault(&t, p, AICORE_FAULT_HANG, 0);
    aic_task_fill(&r, aiv, 1, &add, 10);
    aic_dispatch(&t, p, 1);
    ck_assert_int_eq(aic_wait_cond(&t, p, AICORE_COND_ACK(1), AIC_GENEROUS_NS, NULL), 0);
    uint64_t deadline = aic_now_ns() + AIC_GENEROUS_NS;
    uint32_t ctrl = aic_ctrl_rd(&t, p, AICORE_CTRL_CTRL);
    while (ctrl != want && aic_now_ns() < deadline)
        ctrl = aic_ctrl_rd(&t, p, AICORE_CTRL_CTRL);
    /* The sub-core's own register: a host store is refused. */
    aic_ctrl_wr(&t, p, AICORE_CTRL_CTRL, ctrl ^ AICORE_CTRL_CTRL_PMU);
    ck_assert_uint_eq(aic_ctrl_rd(&t, p, AICORE_CTRL_CTRL), ctrl);
    ck_assert(aic_rd(&t, AICORE_REG_GLOBAL_ERR) & AICORE_ERR_BAD_ACCESS);
    aic_wr(&t, AICORE_REG_RESET, AICORE_RESET_VALUE);
    aic_task_free(&add);
    aic_run_free(&r);
    return ctrl;
}

/* Issue 23 item 3: CTRL at 0x0, bit 0 the per-task PMU gate, opened only on a PMU run. */
START_TEST(the_sub_core_opens_its_ctrl_pmu_gate_around_a_task_of_a_pmu_run_only)
{
    ck_assert_uint_eq(ctrl_while_hung(PMU_TABLE, 1, AICORE_CTRL_CTRL_PMU), AICORE_CTRL_CTRL_PMU);
    ck_assert_uint_eq(ctrl_while_hung(0, 2, 0), 0);
}
END_TEST

/* Issue 23 item 1: as on the part, a counter read clears it (trapped windows). */
START_TEST(pmu_counters_clear_when_read)
{
    aic_upload_tables(&t, CTRL_TABLE, PMU_TABLE);
    struct aic_run r;
    aic_run_new(&t, &r);
    start_run(&r, PMU_TABLE, 1);
    uint32_t aiv = rank_of_type(&r, AICORE_CORE_TYPE_AIV), p = r.phys[aiv];
    pmu_program(p, 0, ~0ull, AICORE_PMU_CTRL_ENABLE_PART);
    aic_run_open(&t, &r, aiv);
    struct aic_task add;
    aic_task_new(&t, &add, AICORE_KERNEL_VADD, 0, 16, 0, 4);
    run_task(&r, aiv, 1, &add, 1000);
    ck_assert_uint_eq(aic_pmu_rd(&t, p, AICORE_PMU_CNT_TOTAL_LO), 1000);
    ck_assert_uint_eq(aic_pmu_rd(&t, p, AICORE_PMU_CNT_TOTAL_LO), 0);
    ck_assert_uint_eq(aic_pmu_rd(&t, p, AICORE_PMU_CNT(0)), aicore_pmu_event_count(1, 1000));
    ck_assert_uint_eq(aic_pmu_rd(&t, p, AICORE_PMU_CNT(0)), 0);
    /* The next task counts from zero; selectors and the window are not counters: they stay. */
    run_task(&r, aiv, 2, &add, 300);
    ck_assert_uint_eq(aic_pmu_rd(&t, p, AICORE_PMU_CNT(0)), aicore_pmu_event_count(1, 300));
    ck_assert_uint_eq(aic_pmu_rd(&t, p, AICORE_PMU_CNT(7)), aicore_pmu_event_count(8, 1300));
    ck_assert_uint_eq(aic_pmu_rd(&t, p, AICORE_PMU_EVT_IDX(7)), 8);
    ck_assert_uint_eq(aic_pmu_rd(&t, p, AICORE_PMU_STOP_CYC_LO), UINT32_MAX);
    finish_run(&r, AICORE_VERDICT_OK);
    aic_task_free(&add);
    aic_run_free(&r);
}
END_TEST

/* The table's entries as device memory holds them now, by a D2H copy. */
static bool table_present(void)
{
    struct aic_buf b;
    aic_buf_new(&t, t.nsub * 8u, &b);
    ck_assert_uint_eq(aic_copy(&t, AICORE_COPY_D2H, b.iova, CTRL_TABLE, b.len), AICORE_COPY_DONE);
    bool present = ((const uint64_t *)b.va)[0] == AICORE_CTRL_REG_BASE;
    aic_buf_free(&b);
    return present;
}

/* Issue 23 item 2: RESET clears device memory (the strict model, the default). */
START_TEST(reset_clears_device_memory_unless_the_model_is_built_lenient)
{
    aic_upload_tables(&t, CTRL_TABLE, 0);
    ck_assert(table_present());
    aic_wr(&t, AICORE_REG_RESET, AICORE_RESET_VALUE);
    ck_assert(!table_present());
    /* A run on the table uploaded before the reset: no sub-core finds its window. */
    struct aic_run r;
    aic_run_new(&t, &r);
    ck_assert_uint_eq(aic_run_launch(&t, &r, CTRL_TABLE, 0, 1), AICORE_LAUNCH_ACCEPTED);
    uint64_t deadline = aic_now_ns() + AIC_GENEROUS_NS;
    while (aic_port_rd(&t, AICORE_TP_TABLE_MISMATCHES) != r.nr)
        ck_assert(aic_now_ns() < deadline);
    aic_wr(&t, AICORE_REG_RESET, AICORE_RESET_VALUE);
    aic_run_free(&r);

    aic_close(&t);
    const struct npv_aicore_model_config lenient = {.trapped_windows = true,
                                                    .devmem_survives_reset = true};
    aic_open(&t, &lenient);
    aic_upload_tables(&t, CTRL_TABLE, 0);
    aic_wr(&t, AICORE_REG_RESET, AICORE_RESET_VALUE);
    ck_assert(table_present());
}
END_TEST

/* ---- the mapped windows (the default model) ---- */

static void open_mapped(void)
{
    aic_close(&t);
    aic_open(&t, NULL);
    ck_assert_int_eq(npv_bar_is_direct(t.ctrl, 0, AICORE_CTRL_BAR_SIZE), 1);
    ck_assert_int_eq(npv_bar_is_direct(t.pmu, 0, AICORE_PMU_BAR_SIZE), 1);
}

/* The value phys's register reg settles at, as the model's next passes leave it. */
static void wait_reg(uint32_t phys, uint32_t reg, uint32_t want)
{
    uint64_t deadline = aic_now_ns() + AIC_GENEROUS_NS;
    uint32_t v;
    while ((v = aic_ctrl_rd(&t, phys, reg)) != want)
        ck_assert_msg(aic_now_ns() < deadline, "window %u reg %#x: %#x, want %#x", phys, reg, v,
                      want);
}

static void wait_err(uint64_t bit)
{
    uint64_t deadline = aic_now_ns() + AIC_GENEROUS_NS;
    while (!(aic_rd(&t, AICORE_REG_GLOBAL_ERR) & bit))
        ck_assert(aic_now_ns() < deadline);
}

START_TEST(mapped_windows_run_the_handshake_exact_and_stores_to_what_the_sub_core_owns_are_undone)
{
    open_mapped();
    aic_upload_tables(&t, CTRL_TABLE, PMU_TABLE);
    struct aic_run r;
    aic_run_new(&t, &r);
    start_run(&r, PMU_TABLE, 1);
    uint32_t aiv = rank_of_type(&r, AICORE_CORE_TYPE_AIV),
             aic = rank_of_type(&r, AICORE_CORE_TYPE_AIC);
    uint32_t p = r.phys[aiv];
    pmu_program(p, 0, ~0ull, AICORE_PMU_CTRL_ENABLE);
    aic_run_open(&t, &r, aiv);
    struct aic_task add;
    aic_task_new(&t, &add, AICORE_KERNEL_VADD, 0, 4096, 0, 6);
    run_task(&r, aiv, 1, &add, 700);
    ck_assert(aic_task_exact(&add));
    /* Mapped counters cannot see a read: they hold until written (regs.h, AICORE_PMU_CNT). */
    pmu_expect(p, 700);
    pmu_expect(p, 700);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_GLOBAL_ERR), 0);

    /* COND, CTRL and PHYS_ID are the sub-core's: a store there is undone and counted. */
    uint64_t bad = aic_port_rd(&t, AICORE_TP_BAD_ACCESSES);
    aic_ctrl_wr(&t, p, AICORE_CTRL_COND, AICORE_COND_FIN(77));
    wait_reg(p, AICORE_CTRL_COND, AICORE_COND_FIN(1));
    aic_ctrl_wr(&t, p, AICORE_CTRL_PHYS_ID, 5);
    wait_reg(p, AICORE_CTRL_PHYS_ID, p);
    aic_ctrl_wr(&t, p, AICORE_CTRL_FAST_PATH, 0x1234);
    wait_reg(p, AICORE_CTRL_FAST_PATH, AICORE_FAST_PATH_OPEN);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_BAD_ACCESSES), bad + 3);
    wait_err(AICORE_ERR_BAD_ACCESS);
    /* A token into a window never opened is refused and the register keeps its value. */
    uint32_t closed = r.phys[aic];
    aic_ctrl_wr(&t, closed, AICORE_CTRL_DMB, 5);
    wait_err(AICORE_ERR_WINDOW_CLOSED);
    wait_reg(closed, AICORE_CTRL_DMB, AICORE_DMB_CLOSED);
    /* A dead window reads 0 again, and a dispatch there is said so. */
    uint32_t absent = npv_aicore_phys_aic(t.clusters, AICORE_DEFAULT_ABSENT_CLUSTER);
    aic_ctrl_wr(&t, absent, AICORE_CTRL_DMB, 5);
    wait_err(AICORE_ERR_DISPATCH_ABSENT);
    wait_reg(absent, AICORE_CTRL_DMB, 0);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_DISPATCHES), 1);
    /* Not fatal: the run ends as any other. */
    finish_run(&r, AICORE_VERDICT_OK);
    aic_task_free(&add);
    aic_run_free(&r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("aicore_model");
    TCase *tc = tcase_create("model");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, identity_and_topology_registers_describe_the_default_part);
    tcase_add_test(tc, absent_and_powered_off_windows_read_zero_and_a_dispatch_there_is_an_error);
    tcase_add_test(tc, hand_driven_handshake_runs_vector_add_and_matmul_exact);
    tcase_add_test(tc, launch_resets_every_dmb_and_cond);
    tcase_add_test(tc, launch_is_refused_without_parameters_and_while_busy);
    tcase_add_test(tc, a_table_entry_that_is_not_the_window_leaves_that_core_never_ready);
    tcase_add_test(tc, copy_engine_round_trips_and_refuses_what_is_outside_device_memory);
    tcase_add_test(tc, the_test_port_counts_copies_per_destination_and_table_reads_per_table);
    tcase_add_test(tc, pmu_counts_deterministically_only_when_enabled_and_inside_the_cycle_window);
    tcase_add_test(tc, pmu_aliased_into_ctrl_moves_the_registers_and_the_table_base);
    tcase_add_test(tc, a_custom_topology_shapes_the_part);
    tcase_add_test(tc, ready_records_are_laid_out_as_simplers_handshake);
    tcase_add_test(tc, the_sub_core_opens_its_ctrl_pmu_gate_around_a_task_of_a_pmu_run_only);
    tcase_add_test(tc, pmu_counters_clear_when_read);
    tcase_add_test(tc, reset_clears_device_memory_unless_the_model_is_built_lenient);
    tcase_add_test(
        tc, mapped_windows_run_the_handshake_exact_and_stores_to_what_the_sub_core_owns_are_undone);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    aic_require_model("these cases check the model itself");
    return npv_test_run(suite());
}

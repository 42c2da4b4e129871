/* SPDX-License-Identifier: MIT */
/*
 * Issue 23: the handshake and the PMU as the part and simpler run them. Each
 * run's PMU counts are its own on a part whose counters clear when read, a
 * prepared successor's included; a reset drops the tables and they go up
 * again once per reset; where Pmu sits in the Ctrl window one table serves
 * both; opening a window is the acknowledgement (no COND poll before the
 * first token); every window is closed again after the run; a PMU run reads
 * only the counters it enabled.
 */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "aic_driver.h"
#include "npv_test.h"

static const struct npv_aicore_model_config trapped = {.trapped_windows = true};

/* The declared work of the sample's tasks on core p (each usable core runs one). */
static uint64_t work_on(const struct aicore_sample_graph *g, uint32_t p)
{
    uint64_t w = 0;
    for (uint32_t i = 0; i < g->desc.nr_tasks; i++) {
        const struct npv_aicore_task *k = &g->desc.tasks[i];
        if (k->core == p)
            w += k->op == NPV_AICORE_OP_MATMUL ? (uint64_t)k->m * k->n * k->k : k->n;
    }
    return w;
}

/* Every core's counts are exactly what its own tasks of this run declared. */
static void pmu_is_the_runs_own(struct aicd *d, struct npv_aicore_run *run, unsigned slot)
{
    struct npv_aicore_core_pmu out[NPV_AICORE_MAX_CORES];
    struct npv_aicore_topology topo;
    npv_aicore_topology(d->ac, &topo);
    int n = npv_aicore_pmu(run, out, NPV_AICORE_MAX_CORES);
    ck_assert_int_eq(n, (int)topo.nr_usable);
    for (int c = 0; c < n; c++) {
        uint64_t w = work_on(&d->g[slot], out[c].core);
        ck_assert_msg(out[c].total_cycles == w, "core %u: %llu cycles, want %llu", out[c].core,
                      (unsigned long long)out[c].total_cycles, (unsigned long long)w);
        for (uint32_t e = 0; e < NPV_AICORE_PMU_EVENTS; e++)
            ck_assert_uint_eq(out[c].counters[e],
                              aicore_pmu_event_count(d->g[slot].desc.pmu_events[e], w));
    }
}

/*
 * Four runs through both slots: PMU, a PMU run prepared while the first
 * executes, one without PMU, PMU again. Each PMU run's counts are its own.
 */
static void four_runs_count_their_own(const struct npv_aicore_model_config *mcfg)
{
    struct aicd d;
    aicd_open(&d, mcfg, NULL);
    const bool pmu[4] = {true, true, false, true};
    struct npv_aicore_run *run[2] = {NULL, NULL};
    ck_assert_int_eq(aicd_prepare(&d, 0, pmu[0], 1, &run[0]), 0);
    ck_assert_int_eq(npv_aicore_launch(run[0]), 0);
    for (unsigned i = 0; i < 4; i++) {
        unsigned s = i & 1u, next = s ^ 1u;
        if (i + 1 < 4)
            ck_assert_int_eq(aicd_prepare(&d, next, pmu[i + 1], i + 2, &run[next]), 0);
        bool exact;
        ck_assert_int_eq(aicd_finish(&d, run[s], &exact), 0);
        ck_assert_msg(exact, "run %u differs from the CPU reference", i);
        if (pmu[i])
            pmu_is_the_runs_own(&d, run[s], s);
        ck_assert_int_eq(npv_aicore_release(run[s]), 0);
        if (i + 1 < 4)
            ck_assert_int_eq(npv_aicore_launch(run[next]), 0);
    }
    aicd_close(&d);
}

START_TEST(each_pmu_run_counts_its_own_where_counters_clear_on_read_successor_included)
{
    four_runs_count_their_own(&trapped);
}
END_TEST

START_TEST(each_pmu_run_counts_its_own_on_mapped_windows)
{
    four_runs_count_their_own(NULL);
}
END_TEST

/*
 * Where the counters clear on read every read is a trapped message the model
 * counts. A PMU run with two of the eight events on reads, per sub-core, those
 * two counters and the 64-bit total (two registers) when it is armed and again
 * after it: 8 register reads, not the 20 of every counter. A run without PMU
 * reads none. The selectors programmed by the first run are kept, so the
 * second run is the steady state.
 */
START_TEST(pmu_collection_reads_only_the_counters_the_run_enabled)
{
    struct aicd d;
    aicd_open(&d, &trapped, NULL);
    static const uint32_t two[NPV_AICORE_PMU_EVENTS] = {0, 3, 0, 0, 0, 6, 0, 0};
    memcpy(d.g[0].desc.pmu_events, two, sizeof(two));
    struct npv_aicore_topology topo;
    npv_aicore_topology(d.ac, &topo);
    for (unsigned i = 0; i < 3; i++) {
        bool pmu = i != 1;
        struct npv_aicore_run *run;
        aic_port_wr(&d.t, AICORE_TP_COUNTERS_CLEAR, 1);
        ck_assert_int_eq(aicd_prepare(&d, 0, pmu, i + 1, &run), 0);
        ck_assert_int_eq(npv_aicore_launch(run), 0);
        bool exact;
        ck_assert_int_eq(aicd_finish(&d, run, &exact), 0);
        ck_assert_msg(exact, "run %u differs from the CPU reference", i);
        uint64_t reads = aicd_port(&d, AICORE_TP_PMU_COUNTER_READS);
        if (i == 0) {
            /* Programming reads every counter once to clear it, then the run's two reads. */
            ck_assert_uint_eq(reads, (uint64_t)topo.nr_usable * (10u + 2u * 4u));
        } else {
            ck_assert_uint_eq(reads, pmu ? (uint64_t)topo.nr_usable * 2u * 4u : 0);
        }
        if (pmu)
            pmu_is_the_runs_own(&d, run, 0);
        ck_assert_int_eq(npv_aicore_release(run), 0);
    }
    aicd_close(&d);
}
END_TEST

START_TEST(a_reset_drops_the_tables_and_they_go_up_again_once_per_reset)
{
    struct aicd d;
    aicd_open(&d, NULL, NULL);
    bool exact;
    for (unsigned i = 0; i < 3; i++) {
        if (i > 0)
            ck_assert_int_eq(npv_aicore_reset(d.ac), 0);
        ck_assert_int_eq(aicd_run(&d, i & 1u, true, i + 1, &exact), 0);
        ck_assert_msg(exact, "run %u differs from the CPU reference", i);
    }
    /* Two resets between runs with nothing launched in between: one upload for both. */
    ck_assert_int_eq(npv_aicore_reset(d.ac), 0);
    ck_assert_int_eq(npv_aicore_reset(d.ac), 0);
    ck_assert_int_eq(aicd_run(&d, 1, false, 9, &exact), 0);
    ck_assert(exact);
    struct npv_aicore_counters c;
    npv_aicore_counters(d.ac, &c);
    ck_assert_uint_eq(c.resets, 4);
    ck_assert_uint_eq(c.ctrl_uploads, 4);
    ck_assert_uint_eq(c.ctrl_commits, 4);
    ck_assert_uint_eq(c.pmu_uploads, 3);
    ck_assert_uint_eq(c.device_blocks, 2); /* the same two blocks throughout */
    if (!d.t.hardware) {
        ck_assert_uint_eq(aicd_port(&d, AICORE_TP_CTRL_TABLE_DISTINCT), 1);
        ck_assert_uint_eq(aicd_port(&d, AICORE_TP_PMU_TABLE_DISTINCT), 1);
        ck_assert_uint_eq(aicd_port(&d, AICORE_TP_TABLE_MISMATCHES), 0);
        ck_assert_uint_eq(aicd_copies_to(&d, aicd_port(&d, AICORE_TP_CTRL_TABLE_LAST)), 4);
    }
    aicd_close(&d);
}
END_TEST

START_TEST(where_pmu_is_in_the_ctrl_window_one_table_serves_both)
{
    struct aicd d;
    const struct npv_aicore_model_config aliased = {.pmu_in_ctrl = true};
    aicd_open(&d, &aliased, NULL);
    struct npv_aicore_run *run;
    ck_assert_int_eq(aicd_prepare(&d, 0, true, 3, &run), 0);
    struct npv_aicore_run_info info;
    npv_aicore_run_info(run, &info);
    ck_assert_uint_ne(info.ctrl_table, 0);
    ck_assert_uint_eq(info.pmu_table, info.ctrl_table);
    ck_assert_int_eq(npv_aicore_launch(run), 0);
    bool exact;
    ck_assert_int_eq(aicd_finish(&d, run, &exact), 0);
    ck_assert(exact);
    pmu_is_the_runs_own(&d, run, 0);
    ck_assert_int_eq(npv_aicore_release(run), 0);
    struct npv_aicore_counters c;
    npv_aicore_counters(d.ac, &c);
    ck_assert_uint_eq(c.ctrl_uploads, 1);
    ck_assert_uint_eq(c.pmu_uploads, 0);
    ck_assert_uint_eq(c.device_blocks, 1);
    if (!d.t.hardware) {
        ck_assert_uint_eq(aicd_port(&d, AICORE_TP_COPIES_H2D), 1);
        ck_assert_uint_eq(aicd_port(&d, AICORE_TP_PMU_TABLE_LAST), info.ctrl_table);
        ck_assert_uint_eq(aicd_port(&d, AICORE_TP_TABLE_MISMATCHES), 0);
    }
    aicd_close(&d);
}
END_TEST

START_TEST(opening_the_window_is_the_acknowledgement_no_cond_poll_before_the_first_token)
{
    struct aicd d;
    aicd_open(&d, &trapped, NULL);
    bool exact;
    ck_assert_int_eq(aicd_run(&d, 0, false, 5, &exact), 0);
    ck_assert(exact);
    ck_assert_uint_eq(aicd_port(&d, AICORE_TP_IDLE_POLLS), 0);
    aicd_close(&d);
}
END_TEST

START_TEST(every_window_is_closed_again_after_the_run)
{
    struct aicd d;
    aicd_open(&d, NULL, NULL);
    bool exact;
    ck_assert_int_eq(aicd_run(&d, 0, true, 6, &exact), 0);
    ck_assert(exact);
    uint32_t n = 0;
    for (uint32_t p = 0; p < d.t.nsub; p++) {
        if (!aic_live(&d.t, p))
            continue;
        n++;
        ck_assert_uint_eq(aic_ctrl_rd(&d.t, p, AICORE_CTRL_COND), AICORE_COND_EXITED);
        ck_assert_uint_eq(aic_ctrl_rd(&d.t, p, AICORE_CTRL_DMB), AICORE_DMB_IDLE);
        ck_assert_uint_eq(aic_ctrl_rd(&d.t, p, AICORE_CTRL_FAST_PATH), AICORE_FAST_PATH_CLOSE);
    }
    ck_assert_uint_gt(n, 0);
    aicd_close(&d);
}
END_TEST

int main(void)
{
    aic_require_model("the model's trapped and aliased builds are part of the checks");
    Suite *s = suite_create("aicore_driver_part");
    TCase *tc = tcase_create("part");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, each_pmu_run_counts_its_own_where_counters_clear_on_read_successor_included);
    tcase_add_test(tc, each_pmu_run_counts_its_own_on_mapped_windows);
    tcase_add_test(tc, pmu_collection_reads_only_the_counters_the_run_enabled);
    tcase_add_test(tc, a_reset_drops_the_tables_and_they_go_up_again_once_per_reset);
    tcase_add_test(tc, where_pmu_is_in_the_ctrl_window_one_table_serves_both);
    tcase_add_test(tc,
                   opening_the_window_is_the_acknowledgement_no_cond_poll_before_the_first_token);
    tcase_add_test(tc, every_window_is_closed_again_after_the_run);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}

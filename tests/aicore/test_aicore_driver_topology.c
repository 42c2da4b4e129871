/* SPDX-License-Identifier: MIT */
/*
 * Issue 12 acceptance 3: partial-good (absent) and power-gated sub-cores have
 * 0 entries in both tables and never receive work; the sample graph on every
 * other sub-core is bit-exact against the CPU reference, with PMU counts
 * that follow the device's deterministic rule. Also on the newer part, whose
 * Pmu registers live in the Ctrl window.
 */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "aic_driver.h"
#include "npv_test.h"

#define CLUSTERS 24u
#define RUNS     4u

static void set_bit(uint64_t *map, uint32_t i, bool on)
{
    if (on)
        map[i / 64] |= 1ull << (i % 64);
    else
        map[i / 64] &= ~(1ull << (i % 64));
}

/* Cluster 13 fused off; cluster 7 powered off, with cluster 5's AIC and cluster 2's second AIV. */
static void gated_topology(struct npv_aicore_model_config *m)
{
    memset(m, 0, sizeof(*m));
    m->clusters = CLUSTERS;
    m->custom_topology = true;
    for (uint32_t i = 0; i < CLUSTERS * 3; i++) {
        set_bit(m->present, i, true);
        set_bit(m->power_on, i, true);
    }
    const uint32_t absent[] = {npv_aicore_phys_aic(CLUSTERS, 13),
                               npv_aicore_phys_aiv(CLUSTERS, 13, 0),
                               npv_aicore_phys_aiv(CLUSTERS, 13, 1)};
    const uint32_t off[] = {npv_aicore_phys_aic(CLUSTERS, 7), npv_aicore_phys_aiv(CLUSTERS, 7, 0),
                            npv_aicore_phys_aiv(CLUSTERS, 7, 1), npv_aicore_phys_aic(CLUSTERS, 5),
                            npv_aicore_phys_aiv(CLUSTERS, 2, 1)};
    for (size_t i = 0; i < 3; i++)
        set_bit(m->present, absent[i], false);
    for (size_t i = 0; i < 5; i++)
        set_bit(m->power_on, off[i], false);
}

static bool usable(const struct npv_aicore_model_config *m, uint32_t i)
{
    return ((m->present[i / 64] & m->power_on[i / 64]) >> (i % 64)) & 1u;
}

/* The table as the device holds it, read back through the copy engine. */
static void check_table(struct aicd *d, const struct npv_aicore_model_config *m, uint64_t table,
                        uint64_t base)
{
    struct aic_buf b;
    aic_buf_new(&d->t, CLUSTERS * 3 * 8, &b);
    ck_assert_uint_eq(aic_copy(&d->t, AICORE_COPY_D2H, b.iova, table, CLUSTERS * 3 * 8),
                      AICORE_COPY_DONE);
    const uint64_t *e = b.va;
    for (uint32_t i = 0; i < CLUSTERS * 3; i++)
        ck_assert_msg(e[i] == (usable(m, i) ? base + (uint64_t)i * AICORE_WINDOW_STRIDE : 0),
                      "entry %u: %llx", i, (unsigned long long)e[i]);
    aic_buf_free(&b);
}

static void check_pmu(struct npv_aicore_run *run, const struct npv_aicore_model_config *m)
{
    struct npv_aicore_core_pmu p[NPV_AICORE_MAX_CORES];
    int n = npv_aicore_pmu(run, p, NPV_AICORE_MAX_CORES);
    uint32_t want = 0;
    for (uint32_t i = 0; i < CLUSTERS * 3; i++)
        want += usable(m, i);
    ck_assert_int_eq(n, (int)want);
    for (int c = 0; c < n; c++) {
        ck_assert(usable(m, p[c].core));
        uint64_t work = aicore_core_type(CLUSTERS, p[c].core) == AICORE_CORE_TYPE_AIC
                            ? AICORE_SAMPLE_DIM * AICORE_SAMPLE_DIM * AICORE_SAMPLE_DIM
                            : AICORE_SAMPLE_ELEMS;
        ck_assert_uint_eq(p[c].total_cycles, work);
        for (uint32_t e = 0; e < NPV_AICORE_PMU_EVENTS; e++)
            ck_assert_uint_eq(p[c].counters[e], aicore_pmu_event_count(p[c].events[e], work));
    }
}

static void run_gated(bool pmu_in_ctrl)
{
    struct npv_aicore_model_config m;
    gated_topology(&m);
    m.pmu_in_ctrl = pmu_in_ctrl;
    struct aicd d;
    aicd_open(&d, &m, NULL);
    struct npv_aicore_topology topo;
    npv_aicore_topology(d.ac, &topo);
    ck_assert_uint_eq(topo.nr_usable, CLUSTERS * 3 - 8);
    ck_assert(topo.pmu_aliased == pmu_in_ctrl);

    struct npv_aicore_run_info info = {0};
    for (uint32_t i = 0; i < RUNS; i++) {
        struct npv_aicore_run *run;
        bool exact;
        /* PMU off in run 1, and new events from run 2: each run counts only its own work. */
        bool pmu = i != 1;
        for (uint32_t e = 0; e < NPV_AICORE_PMU_EVENTS; e++)
            d.g[i & 1u].desc.pmu_events[e] = e + 1 + (i >= 2 ? 3 * i : 0);
        ck_assert_int_eq(aicd_prepare(&d, i & 1u, pmu, i + 1, &run), 0);
        ck_assert_int_eq(npv_aicore_launch(run), 0);
        ck_assert_int_eq(aicd_finish(&d, run, &exact), 0);
        ck_assert_msg(exact, "run %u differs from the CPU reference", i);
        if (pmu) {
            check_pmu(run, &m);
            npv_aicore_run_info(run, &info);
        }
        ck_assert_int_eq(npv_aicore_release(run), 0);
    }
    uint64_t ctrl_base = aic_rd(&d.t, AICORE_REG_CTRL_REG_BASE);
    uint64_t pmu_base = aic_rd(&d.t, AICORE_REG_PMU_REG_BASE);
    ck_assert(pmu_in_ctrl ? pmu_base == ctrl_base : pmu_base != ctrl_base);
    check_table(&d, &m, info.ctrl_table, ctrl_base);
    check_table(&d, &m, info.pmu_table, pmu_base);
    for (uint32_t i = 0; i < CLUSTERS * 3; i++)
        ck_assert_msg(aicd_port(&d, AICORE_TP_TASKS(i)) == (usable(&m, i) ? RUNS : 0),
                      "sub-core %u ran %llu tasks", i,
                      (unsigned long long)aicd_port(&d, AICORE_TP_TASKS(i)));
    ck_assert_uint_eq(aic_rd(&d.t, AICORE_REG_GLOBAL_ERR) & AICORE_ERR_DISPATCH_ABSENT, 0);

    /* Work for a fused-off or powered-off sub-core is refused before anything reaches the device.
     */
    struct npv_aicore_task task = d.g[0].tasks[0];
    struct npv_aicore_run_desc desc = {.tasks = &task, .nr_tasks = 1};
    struct npv_aicore_run *run;
    task.core = npv_aicore_phys_aiv(CLUSTERS, 13, 0);
    ck_assert_int_eq(npv_aicore_prepare(d.ac, 0, &desc, &run), -ENXIO);
    task.core = npv_aicore_phys_aiv(CLUSTERS, 2, 1);
    ck_assert_int_eq(npv_aicore_prepare(d.ac, 0, &desc, &run), -ENXIO);
    aicd_close(&d);
}

START_TEST(absent_and_powered_off_cores_have_zero_entries_and_get_no_work)
{
    run_gated(false);
}
END_TEST

START_TEST(pmu_aliased_into_ctrl_counts_the_same_on_the_newer_part)
{
    run_gated(true);
}
END_TEST

int main(void)
{
    aic_require_model("the topology is chosen through the model's configuration and test port");
    Suite *s = suite_create("aicore_driver_topology");
    TCase *tc = tcase_create("topology");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, absent_and_powered_off_cores_have_zero_entries_and_get_no_work);
    tcase_add_test(tc, pmu_aliased_into_ctrl_counts_the_same_on_the_newer_part);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}

/* SPDX-License-Identifier: MIT */
/*
 * Issue 12 acceptance 1: the register tables are device constants of the
 * context. 14 preparations, 11 with PMU on, over both slots (each prepared
 * while its predecessor runs): exactly one Ctrl and one Pmu upload, the
 * driver's and the model's counters agree, every preparation carries the same
 * two addresses, every run exact.
 */
#include <check.h>
#include <errno.h>

#include "aic_driver.h"
#include "npv_test.h"

#define PREPARATIONS 14u

static bool pmu_for(uint32_t i)
{
    return i % 5u != 1u; /* off for 1, 6, 11: 11 of 14 on */
}

START_TEST(tables_upload_once_over_fourteen_preparations_in_both_slots)
{
    struct aicd d;
    aicd_open(&d, NULL, NULL);
    struct npv_aicore_run *run[NPV_AICORE_SLOTS] = {NULL, NULL};
    uint64_t ctrl = 0, pmu = 0;
    uint32_t nr_pmu = 0;
    ck_assert_int_eq(aicd_prepare(&d, 0, pmu_for(0), 1, &run[0]), 0);
    ck_assert_int_eq(npv_aicore_launch(run[0]), 0);
    for (uint32_t i = 0; i < PREPARATIONS; i++) {
        unsigned s = i & 1u, next = s ^ 1u;
        struct npv_aicore_run_info info;
        npv_aicore_run_info(run[s], &info);
        ck_assert_uint_eq(info.slot, s);
        if (ctrl == 0)
            ctrl = info.ctrl_table;
        ck_assert_uint_ne(info.ctrl_table, 0);
        ck_assert_uint_eq(info.ctrl_table, ctrl);
        if (pmu_for(i)) {
            nr_pmu++;
            if (pmu == 0)
                pmu = info.pmu_table;
            ck_assert_uint_ne(info.pmu_table, 0);
            ck_assert_uint_eq(info.pmu_table, pmu);
        } else {
            ck_assert_uint_eq(info.pmu_table, 0);
        }
        if (i + 1 < PREPARATIONS)
            ck_assert_int_eq(aicd_prepare(&d, next, pmu_for(i + 1), i + 2, &run[next]), 0);
        bool exact;
        ck_assert_int_eq(aicd_finish(&d, run[s], &exact), 0);
        ck_assert_msg(exact, "run %u differs from the CPU reference", i);
        ck_assert_int_eq(npv_aicore_release(run[s]), 0);
        if (i + 1 < PREPARATIONS)
            ck_assert_int_eq(npv_aicore_launch(run[next]), 0);
    }
    ck_assert_uint_eq(nr_pmu, 11);
    ck_assert_uint_ne(ctrl, pmu);

    struct npv_aicore_counters c;
    npv_aicore_counters(d.ac, &c);
    ck_assert_uint_eq(c.ctrl_uploads, 1);
    ck_assert_uint_eq(c.pmu_uploads, 1);
    ck_assert_uint_eq(c.ctrl_commits, 1);
    ck_assert_uint_eq(c.pmu_commits, 1);
    ck_assert_uint_eq(c.runs, PREPARATIONS);
    ck_assert_uint_eq(c.device_blocks, 2);
    if (!d.t.hardware) {
        ck_assert_uint_eq(aicd_copies_to(&d, ctrl), c.ctrl_uploads);
        ck_assert_uint_eq(aicd_copies_to(&d, pmu), c.pmu_uploads);
        ck_assert_uint_eq(aicd_port(&d, AICORE_TP_COPIES_H2D), 2);
        ck_assert_uint_eq(aicd_port(&d, AICORE_TP_CTRL_TABLE_READS), PREPARATIONS);
        ck_assert_uint_eq(aicd_port(&d, AICORE_TP_CTRL_TABLE_DISTINCT), 1);
        ck_assert_uint_eq(aicd_port(&d, AICORE_TP_CTRL_TABLE_LAST), ctrl);
        ck_assert_uint_eq(aicd_port(&d, AICORE_TP_PMU_TABLE_READS), nr_pmu);
        ck_assert_uint_eq(aicd_port(&d, AICORE_TP_PMU_TABLE_DISTINCT), 1);
        ck_assert_uint_eq(aicd_port(&d, AICORE_TP_PMU_TABLE_LAST), pmu);
        ck_assert_uint_eq(aicd_port(&d, AICORE_TP_TABLE_MISMATCHES), 0);
    }
    aicd_close(&d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("aicore_driver_tables");
    TCase *tc = tcase_create("tables");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, tables_upload_once_over_fourteen_preparations_in_both_slots);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}

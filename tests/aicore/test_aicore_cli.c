/* SPDX-License-Identifier: MIT */
/*
 * Issue 12 acceptance 6: `npuvfio run --device aicore` starts the model, runs
 * the sample graph through both pipeline slots, checks it bit-exact and
 * prints timing and the PMU counters; `npuvfio demo` has its row.
 */
#include <check.h>
#include <string.h>

#include "run_cli.h"

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

static struct cli_result r;

START_TEST(run_aicore_checks_the_sample_graph_and_prints_timing_and_pmu_counters)
{
    run_cli(&r, NULL, ARGS("run", "--device", "aicore", "--iterations", "6"));
    ck_assert_msg(r.status == 0, "exit %d; stderr: %s", r.status, r.err);
    ck_assert_msg(strstr(r.out, "device:     aicore (") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "on 69 of 72 sub-cores, 2 slots") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "6 (414 jobs); every result matches the CPU reference") != NULL,
                  "%s", r.out);
    ck_assert_msg(strstr(r.out, "latency:    p50 ") != NULL && strstr(r.out, ", p99 ") != NULL,
                  "%s", r.out);
    /* 6 runs of 23 AICs (4096 cycles each) and 46 AIVs (256 each); event 1 counts 2/8 of them. */
    ck_assert_msg(strstr(r.out, "counters:   PMU over all cores and runs: cycles 635904, ev1 "
                                "158976, ev2 238464") != NULL,
                  "%s", r.out);
}
END_TEST

START_TEST(run_aicore_json_carries_the_counters)
{
    run_cli(&r, NULL, ARGS("--json", "run", "--device", "aicore", "--iterations", "2"));
    ck_assert_msg(r.status == 0, "exit %d; stderr: %s", r.status, r.err);
    ck_assert_msg(strstr(r.out, "\"detail\":\"PMU over all cores and runs: cycles ") != NULL, "%s",
                  r.out);
    ck_assert_msg(strstr(r.out, "\"mismatches\":0,") != NULL, "%s", r.out);
}
END_TEST

START_TEST(demo_runs_aicore)
{
    run_cli(&r, NULL, ARGS("demo", "--device", "aicore", "--iterations", "3"));
    ck_assert_msg(r.status == 0, "exit %d; stderr: %s", r.status, r.err);
    const char *row = strstr(r.out, "\naicore ");
    ck_assert_msg(row != NULL && strstr(row, "matches CPU, 3 iterations") != NULL, "%s", r.out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("aicore_cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, run_aicore_checks_the_sample_graph_and_prints_timing_and_pmu_counters);
    tcase_add_test(tc, run_aicore_json_carries_the_counters);
    tcase_add_test(tc, demo_runs_aicore);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

/* SPDX-License-Identifier: MIT */
/*
 * Issue 12 acceptance 2: a table upload that fails, with a rollback free that
 * fails too. No task reaches the device, the error reaches the caller, the
 * block stays owned but uncommitted; the next preparation uploads into that
 * same block and commits it; close frees it; nothing leaks. The copy fails in
 * the device (the model's FAIL_COPY), the free in a wrapped ops table.
 */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "aic_driver.h"
#include "npv_test.h"

static struct {
    uint32_t allocs, free_calls, fail_frees;
    int64_t live; /* blocks allocated and not freed */
    uint64_t first_alloc, freed[8];
} w;

static int wrap_alloc(struct npv_aicore *ac, void *arg, size_t len, uint64_t *addr)
{
    int r = npv_aicore_default_mem_ops()->alloc(ac, arg, len, addr);
    if (r == 0) {
        if (w.allocs++ == 0)
            w.first_alloc = *addr;
        w.live++;
    }
    return r;
}

static int wrap_free(struct npv_aicore *ac, void *arg, uint64_t addr)
{
    w.free_calls++;
    if (w.fail_frees > 0) {
        w.fail_frees--;
        return -EIO;
    }
    int r = npv_aicore_default_mem_ops()->free(ac, arg, addr);
    if (r == 0 && w.live > 0) {
        w.freed[(w.live - 1) % 8] = addr;
        w.live--;
    }
    return r;
}

static int wrap_copy(struct npv_aicore *ac, void *arg, uint64_t dev, npv_iova_t src, size_t len)
{
    return npv_aicore_default_mem_ops()->copy_h2d(ac, arg, dev, src, len);
}

static const struct npv_aicore_mem_ops wrap_ops = {
    .alloc = wrap_alloc,
    .free = wrap_free,
    .copy_h2d = wrap_copy,
};

START_TEST(failed_upload_with_failing_rollback_keeps_the_block_and_the_next_use_commits_it)
{
    struct aic t;
    struct npv_aicore *ac;
    struct aicore_sample_graph g;
    memset(&w, 0, sizeof(w));
    aic_open(&t, NULL);
    size_t mappings = npv_domain_mapping_count(t.dom);
    struct npv_aicore_config cfg = {.mem_ops = &wrap_ops};
    ck_assert_int_eq(npv_aicore_open(t.dev, &cfg, &ac), 0);
    ck_assert_int_eq(aicore_sample_build(ac, false, &g), 0);

    aic_fault(&t, 0, AICORE_FAULT_FAIL_COPY, 0);
    w.fail_frees = 1;
    struct npv_aicore_run *run = NULL;
    aicore_sample_fill(&g, 1);
    ck_assert_int_eq(npv_aicore_prepare(ac, 0, &g.desc, &run), -EIO);
    ck_assert_ptr_null(run);
    struct npv_aicore_counters c;
    npv_aicore_counters(ac, &c);
    ck_assert_uint_eq(c.ctrl_uploads, 1);
    ck_assert_uint_eq(c.ctrl_commits, 0);
    ck_assert_uint_eq(c.device_blocks, 1); /* owned, not committed */
    ck_assert_uint_eq(w.allocs, 1);
    ck_assert_uint_eq(w.free_calls, 1);
    ck_assert_int_eq(w.live, 1);
    /* Nothing reached the sub-cores. */
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_LAUNCHES), 0);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_DISPATCHES), 0);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_COPIES_FAILED), 1);

    /* The next preparation reuses the retained block and commits it; PMU takes a new one. */
    g.desc.pmu = true;
    ck_assert_int_eq(npv_aicore_prepare(ac, 0, &g.desc, &run), 0);
    struct npv_aicore_run_info info;
    npv_aicore_run_info(run, &info);
    ck_assert_uint_eq(info.ctrl_table, w.first_alloc);
    ck_assert_uint_ne(info.pmu_table, 0);
    ck_assert_uint_eq(w.allocs, 2);
    npv_aicore_counters(ac, &c);
    ck_assert_uint_eq(c.ctrl_uploads, 2);
    ck_assert_uint_eq(c.ctrl_commits, 1);
    ck_assert_uint_eq(c.pmu_uploads, 1);
    aic_port_wr(&t, AICORE_TP_COPY_QUERY_ADDR, info.ctrl_table);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_COPY_QUERY_COUNT) +
                          aic_port_rd(&t, AICORE_TP_COPIES_FAILED),
                      c.ctrl_uploads);
    ck_assert_int_eq(npv_aicore_launch(run), 0);
    ck_assert_int_eq(npv_aicore_wait(run, AIC_GENEROUS_NS), 0);
    ck_assert_uint_eq(aicore_sample_check(&g), 0);
    ck_assert_int_eq(npv_aicore_release(run), 0);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_TABLE_MISMATCHES), 0);

    /* Close frees both blocks, the retained one included; every DMA mapping goes. */
    aicore_sample_free(ac, &g);
    npv_aicore_close(ac);
    ck_assert_int_eq(w.live, 0);
    ck_assert_uint_eq(w.free_calls, 3);
    ck_assert(w.freed[0] == w.first_alloc || w.freed[1] == w.first_alloc);
    ck_assert_uint_eq(npv_domain_mapping_count(t.dom), mappings);
    aic_close(&t);
}
END_TEST

START_TEST(a_failed_upload_whose_rollback_succeeds_gives_the_block_back)
{
    struct aic t;
    struct npv_aicore *ac;
    struct aicore_sample_graph g;
    memset(&w, 0, sizeof(w));
    aic_open(&t, NULL);
    struct npv_aicore_config cfg = {.mem_ops = &wrap_ops};
    ck_assert_int_eq(npv_aicore_open(t.dev, &cfg, &ac), 0);
    ck_assert_int_eq(aicore_sample_build(ac, false, &g), 0);
    aic_fault(&t, 0, AICORE_FAULT_FAIL_COPY, 0);
    struct npv_aicore_run *run;
    aicore_sample_fill(&g, 1);
    ck_assert_int_eq(npv_aicore_prepare(ac, 0, &g.desc, &run), -EIO);
    ck_assert_int_eq(w.live, 0);
    struct npv_aicore_counters c;
    npv_aicore_counters(ac, &c);
    ck_assert_uint_eq(c.device_blocks, 0);
    ck_assert_int_eq(npv_aicore_prepare(ac, 0, &g.desc, &run), 0);
    ck_assert_int_eq(npv_aicore_launch(run), 0);
    ck_assert_int_eq(npv_aicore_wait(run, AIC_GENEROUS_NS), 0);
    ck_assert_uint_eq(aicore_sample_check(&g), 0);
    ck_assert_int_eq(npv_aicore_release(run), 0);
    aicore_sample_free(ac, &g);
    npv_aicore_close(ac);
    ck_assert_int_eq(w.live, 0);
    aic_close(&t);
}
END_TEST

/* A copy that says it worked but put the table one entry off: every entry is a neighbour's. */
static int lying_copy(struct npv_aicore *ac, void *arg, uint64_t dev, npv_iova_t src, size_t len)
{
    return npv_aicore_default_mem_ops()->copy_h2d(ac, arg, dev + AICORE_TABLE_ENTRY_SIZE, src, len);
}

static const struct npv_aicore_mem_ops lying_ops = {
    .alloc = wrap_alloc,
    .free = wrap_free,
    .copy_h2d = lying_copy,
};

START_TEST(sub_cores_that_cannot_find_their_window_fail_the_handshake_deadline)
{
    struct aic t;
    struct npv_aicore *ac;
    struct aicore_sample_graph g;
    memset(&w, 0, sizeof(w));
    aic_open(&t, NULL);
    struct npv_aicore_config cfg = {.mem_ops = &lying_ops, .handshake_timeout_ns = 500 * AIC_MS};
    ck_assert_int_eq(npv_aicore_open(t.dev, &cfg, &ac), 0);
    ck_assert_int_eq(aicore_sample_build(ac, false, &g), 0);
    struct npv_aicore_run *run;
    aicore_sample_fill(&g, 1);
    ck_assert_int_eq(npv_aicore_prepare(ac, 0, &g.desc, &run), 0);
    ck_assert_int_eq(npv_aicore_launch(run), 0);
    ck_assert_int_eq(npv_aicore_wait(run, AIC_GENEROUS_NS), -ETIMEDOUT);
    ck_assert_uint_gt(aic_port_rd(&t, AICORE_TP_TABLE_MISMATCHES), 0);
    ck_assert_uint_eq(aic_port_rd(&t, AICORE_TP_DISPATCHES), 0);
    struct npv_aicore_counters c;
    npv_aicore_counters(ac, &c);
    ck_assert_uint_eq(c.timeouts, 1);
    ck_assert_int_eq(npv_aicore_release(run), 0);
    aicore_sample_free(ac, &g);
    npv_aicore_close(ac);
    ck_assert_int_eq(w.live, 0);
    aic_close(&t);
}
END_TEST

int main(void)
{
    aic_require_model("a failing copy is injected through the model's test port");
    Suite *s = suite_create("aicore_driver_rollback");
    TCase *tc = tcase_create("rollback");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc,
                   failed_upload_with_failing_rollback_keeps_the_block_and_the_next_use_commits_it);
    tcase_add_test(tc, a_failed_upload_whose_rollback_succeeds_gives_the_block_back);
    tcase_add_test(tc, sub_cores_that_cannot_find_their_window_fail_the_handshake_deadline);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}

/* SPDX-License-Identifier: MIT */
/*
 * Acceptance 2 of issue 11, and the domain life cycle: more than 4 GiB of
 * NPU-resident buffers across two domains (sparse memory: only touched pages
 * cost RAM) load and run; one domain refuses 4 GiB + 1 with -ENOSPC; domains
 * are created on first use, freed with their last reference, and a switch
 * is skipped when the domain is unchanged.
 */
#include <check.h>
#include <errno.h>
#include <string.h>

#include <npuvfio/ctx.h>

#include "driver_internal.h"
#include "npv_test.h"
#include "rk_drv.h"

#define GIB (1ull << 30)
#define MIB (1ull << 20)

static struct rk t;

static void setup(void)
{
    rk_open(&t, NULL);
}

static void teardown(void)
{
    rk_close(&t);
}

static const struct rknpu_sample_shape SHAPE = {
    .dtype = NPV_RKNPU_INT8, .m = 16, .k = 64, .n = 32, .bias = true, .relu = true};

static struct npv_rknpu_counters counters(void)
{
    struct npv_rknpu_counters c;
    npv_rknpu_counters(t.npu, &c);
    return c;
}

/*
 * Run s's matmul with A, B, bias and C placed at offset `at` of the big
 * buffer instead of its own: the NPU reads and writes there, and the result
 * is copied back into s's C for the CPU check.
 */
static uint64_t run_in_big(struct rknpu_sample_mm *s, struct npv_rknpu_mem *big, uint64_t at,
                           unsigned core)
{
    struct npv_rknpu_matmul_sizes sz;
    ck_assert_int_eq(npv_rknpu_matmul_sizes(&s->mm, &sz), 0);
    uint8_t *base = (uint8_t *)npv_rknpu_mem_vaddr(big) + at;
    npv_iova_t iova = npv_rknpu_mem_iova(big) + at;
    uint64_t off_b = 4096, off_bias = off_b + sz.b, off_c = (off_bias + sz.bias + 15) & ~15ull;
    ck_assert_uint_le(off_c + sz.c, 1 * MIB);
    memcpy(base, npv_rknpu_mem_vaddr(s->a), sz.a);
    memcpy(base + off_b, npv_rknpu_mem_vaddr(s->b), sz.b);
    memcpy(base + off_bias, npv_rknpu_mem_vaddr(s->bias), sz.bias);
    memset(base + off_c, 0x5a, sz.c);
    /* As a user on a non-coherent host (rknpu.h): what the CPU wrote, out of its caches. */
    ck_assert_int_eq(npv_rknpu_mem_sync_for_device(big, at, off_c + sz.c), 0);
    struct npv_rknpu_matmul mm = s->mm;
    mm.a = iova;
    mm.b = iova + off_b;
    mm.bias = iova + off_bias;
    mm.c = iova + off_c;
    uint64_t words[NPV_RKNPU_MATMUL_MAX_WORDS];
    struct npv_rknpu_task task;
    ck_assert_int_gt(npv_rknpu_matmul_task(&mm, words, NPV_RKNPU_MATMUL_MAX_WORDS, &task), 0);
    int r = rk_run_tasks(&t, &task, 1, 1u << core, npv_rknpu_mem_domain(big), GENEROUS_NS);
    ck_assert_msg(r == 0, "job in domain %u: %s", npv_rknpu_mem_domain(big), npv_strerror(r));
    ck_assert_int_eq(npv_rknpu_mem_sync_for_cpu(big, at + off_c, sz.c), 0);
    memcpy(npv_rknpu_mem_vaddr(s->c), base + off_c, sz.c);
    return rknpu_sample_mm_check(s);
}

START_TEST(more_than_4gib_across_two_domains_runs_and_costs_only_touched_pages)
{
    uint64_t rss_before = rk_rss_bytes();
    struct npv_rknpu_mem *big[2];
    struct rknpu_sample_mm *s[2];
    for (uint32_t d = 0; d < 2; d++) {
        int r = npv_rknpu_mem_create(t.npu, 3 * GIB, d, NPV_RKNPU_MEM_SPARSE, &big[d]);
        ck_assert_msg(r == 0, "3 GiB in domain %u: %s", d, npv_strerror(r));
        ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, d, 0, 11 + d, &s[d]), 0);
    }
    struct npv_rknpu_counters c = counters();
    ck_assert_uint_eq(c.domains_live, 2);
    ck_assert_uint_gt(c.mem_bytes, 4 * GIB);
    /* Both domains' IOVA spaces overlap: each is its own 4 GiB. */
    ck_assert_uint_lt(npv_rknpu_mem_iova(big[0]), 4 * GIB);
    ck_assert_uint_lt(npv_rknpu_mem_iova(big[1]), 4 * GIB);

    /* The top and the bottom of each 3 GiB buffer, on different cores, switching back and forth. */
    const uint64_t places[] = {3 * GIB - 1 * MIB, 0, 2 * GIB};
    for (unsigned round = 0; round < 3; round++)
        for (uint32_t d = 0; d < 2; d++)
            ck_assert_uint_eq(run_in_big(s[d], big[d], places[round], (round + d) % 3), 0);
    ck_assert_uint_ge(counters().domain_switches, 6);

    uint64_t grown = rk_rss_bytes() - rss_before;
    ck_assert_msg(grown < 64 * MIB, "RSS grew by %llu MiB for 6 GiB of sparse buffers",
                  (unsigned long long)(grown / MIB));
    for (uint32_t d = 0; d < 2; d++) {
        rknpu_sample_mm_free(s[d]);
        npv_rknpu_mem_destroy(big[d]);
    }
    ck_assert_uint_eq(counters().domains_live, 0);
    ck_assert_uint_eq(counters().mems_live, 0);
}
END_TEST

START_TEST(a_single_domain_refuses_4gib_plus_one_with_enospc)
{
    struct npv_rknpu_mem *m = NULL;
    ck_assert_int_eq(npv_rknpu_mem_create(t.npu, 4 * GIB + 1, 2, NPV_RKNPU_MEM_SPARSE, &m),
                     -ENOSPC);
    /* Refused before memory is taken, even without the sparse flag. */
    ck_assert_int_eq(npv_rknpu_mem_create(t.npu, 4 * GIB + 1, 2, 0, &m), -ENOSPC);
    ck_assert_ptr_null(m);
    ck_assert_uint_eq(counters().domains_live, 0);

    /* The domain's own allocator says no once 3 GiB of its 4 are taken. */
    struct npv_rknpu_mem *a;
    ck_assert_int_eq(npv_rknpu_mem_create(t.npu, 3 * GIB, 2, NPV_RKNPU_MEM_SPARSE, &a), 0);
    ck_assert_int_eq(npv_rknpu_mem_create(t.npu, 2 * GIB, 2, NPV_RKNPU_MEM_SPARSE, &m), -ENOSPC);
    ck_assert_uint_eq(counters().domains_live, 1);
    ck_assert_uint_eq(counters().mems_live, 1);
    /* The same 2 GiB fit in another domain. */
    ck_assert_int_eq(npv_rknpu_mem_create(t.npu, 2 * GIB, 3, NPV_RKNPU_MEM_SPARSE, &m), 0);
    ck_assert_uint_eq(counters().domains_live, 2);
    npv_rknpu_mem_destroy(m);
    npv_rknpu_mem_destroy(a);
    ck_assert_uint_eq(counters().domains_live, 0);
}
END_TEST

/*
 * Issue 22 section 4: the exact boundary. A fresh domain holds the zero
 * guard page, the driver's command memory (one slot of max_job_words words,
 * whole pages, per queued job: 64 x 32 KiB by default) and then exactly the
 * rest of its 4 GiB: that much is one buffer, a page more is -ENOSPC.
 */
START_TEST(a_domain_holds_exactly_4gib_minus_the_guard_and_its_command_memory)
{
    const uint64_t cmd = 64u * (4096u * 8u); /* default queue_depth x slot bytes */
    const uint64_t room = 4 * GIB - NPV_DOMAIN_IOVA_ZERO_GUARD - cmd;
    struct npv_rknpu_mem *m = NULL;
    ck_assert_int_eq(npv_rknpu_mem_create(t.npu, room + 4096, 4, NPV_RKNPU_MEM_SPARSE, &m),
                     -ENOSPC);
    ck_assert_ptr_null(m);
    ck_assert_uint_eq(counters().domains_live, 0); /* the failed create gave its domain back */
    ck_assert_int_eq(npv_rknpu_mem_create(t.npu, room, 4, NPV_RKNPU_MEM_SPARSE, &m), 0);
    struct npv_rknpu_mem *one = NULL;
    ck_assert_int_eq(npv_rknpu_mem_create(t.npu, 4096, 4, NPV_RKNPU_MEM_SPARSE, &one), -ENOSPC);
    npv_rknpu_mem_destroy(m);
    /* Freed, the whole room is there again (a page at a time, the first is enough to see). */
    ck_assert_int_eq(npv_rknpu_mem_create(t.npu, room, 4, NPV_RKNPU_MEM_SPARSE, &m), 0);
    npv_rknpu_mem_destroy(m);
    ck_assert_uint_eq(counters().domains_live, 0);
}
END_TEST

static unsigned unbalanced;

static void count_unbalanced(void *user, enum npv_log_level level, const char *msg)
{
    (void)user;
    if (level == NPV_LOG_ERROR && strstr(msg, "unbalanced put of domain") != NULL)
        unbalanced++;
}

/* Issue 22 section 4: a put without its get is refused and logged, never a double free. */
START_TEST(an_unbalanced_put_is_refused_and_logged)
{
    unbalanced = 0;
    npv_ctx_set_log_sink(t.ctx, count_unbalanced, NULL);
    rknpu_domain_put(t.npu, 6); /* never created */
    ck_assert_uint_eq(unbalanced, 1);
    struct npv_rknpu_mem *m;
    ck_assert_int_eq(npv_rknpu_mem_create(t.npu, 4096, 6, 0, &m), 0);
    ck_assert_uint_eq(counters().domains_live, 1);
    npv_rknpu_mem_destroy(m); /* the last reference: the domain is freed */
    ck_assert_uint_eq(counters().domains_live, 0);
    rknpu_domain_put(t.npu, 6); /* one put too many */
    ck_assert_uint_eq(unbalanced, 2);
    ck_assert_uint_eq(counters().domains_live, 0);
    rknpu_domain_put(t.npu, NPV_RKNPU_MAX_DOMAINS); /* out of range: ignored */
    ck_assert_uint_eq(unbalanced, 2);
    /* The domain still works after. */
    ck_assert_int_eq(npv_rknpu_mem_create(t.npu, 4096, 6, 0, &m), 0);
    npv_rknpu_mem_destroy(m);
    ck_assert_uint_eq(counters().domains_live, 0);
}
END_TEST

START_TEST(domains_are_created_on_first_use_and_freed_with_their_last_buffer)
{
    ck_assert_uint_eq(counters().domains_live, 0);
    struct npv_rknpu_mem *a, *b;
    ck_assert_int_eq(npv_rknpu_mem_create(t.npu, 4096, 5, 0, &a), 0);
    ck_assert_uint_eq(counters().domains_live, 1);
    ck_assert_int_eq(npv_rknpu_mem_create(t.npu, 8192, 5, 0, &b), 0);
    ck_assert_uint_eq(counters().domains_live, 1);
    ck_assert_uint_eq(npv_rknpu_mem_domain(b), 5);
    ck_assert_uint_eq(npv_rknpu_mem_size(b), 8192);
    npv_rknpu_mem_destroy(a);
    ck_assert_uint_eq(counters().domains_live, 1);
    npv_rknpu_mem_destroy(b);
    ck_assert_uint_eq(counters().domains_live, 0);
    /* Put of nothing is harmless. */
    npv_rknpu_mem_destroy(NULL);
    npv_rknpu_close(NULL);
    ck_assert_uint_eq(counters().domains_live, 0);
    /* Ids past the sixteen, size 0, unknown flags. */
    ck_assert_int_eq(npv_rknpu_mem_create(t.npu, 4096, NPV_RKNPU_MAX_DOMAINS, 0, &a), -EINVAL);
    ck_assert_int_eq(npv_rknpu_mem_create(t.npu, 0, 1, 0, &a), -EINVAL);
    ck_assert_int_eq(npv_rknpu_mem_create(t.npu, 4096, 1, 0x80, &a), -EINVAL);
    ck_assert_uint_eq(counters().domains_live, 0);
}
END_TEST

START_TEST(a_job_in_a_domain_without_buffers_is_refused)
{
    uint64_t word = 0;
    struct npv_rknpu_task task = {.regcmd = &word, .regcmd_count = 1};
    ck_assert_int_eq(rk_run_tasks(&t, &task, 1, 1, 7, 0), -ENOENT);
    ck_assert_uint_eq(counters().domains_live, 0);
}
END_TEST

START_TEST(a_finished_job_leaves_no_reference_on_its_domain)
{
    struct rknpu_sample_mm *s;
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 4, 0, 3, &s), 0);
    struct npv_rknpu_job job = {.tasks = &s->task, .nr_tasks = 1, .core_mask = 2, .domain_id = 4};
    ck_assert_int_eq(npv_rknpu_submit(t.npu, &job), 0);
    struct npv_cpl cpl;
    ck_assert_int_eq(npv_rknpu_wait(t.npu, 1, GENEROUS_NS, &cpl, 1), 1);
    ck_assert_int_eq(cpl.status, 0);
    ck_assert_uint_eq(rknpu_sample_mm_check(s), 0);
    rknpu_sample_mm_free(s);
    ck_assert_uint_eq(counters().domains_live, 0);
}
END_TEST

START_TEST(the_device_switches_domain_only_when_a_job_needs_another)
{
    struct rknpu_sample_mm *s0, *s1;
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 1, &s0), 0);
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 1, 0, 2, &s1), 0);
    uint64_t before = counters().domain_switches;
    rk_assert_exact(&t, s0, 1);
    rk_assert_exact(&t, s0, 2);
    ck_assert_uint_eq(counters().domain_switches, before + 1);
    rk_assert_exact(&t, s1, 4);
    rk_assert_exact(&t, s1, 1);
    ck_assert_uint_eq(counters().domain_switches, before + 2);
    rk_assert_exact(&t, s0, 4);
    ck_assert_uint_eq(counters().domain_switches, before + 3);
    rknpu_sample_mm_free(s0);
    rknpu_sample_mm_free(s1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rknpu_driver_domains");
    TCase *tc = tcase_create("domains");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, more_than_4gib_across_two_domains_runs_and_costs_only_touched_pages);
    tcase_add_test(tc, a_single_domain_refuses_4gib_plus_one_with_enospc);
    tcase_add_test(tc, a_domain_holds_exactly_4gib_minus_the_guard_and_its_command_memory);
    tcase_add_test(tc, an_unbalanced_put_is_refused_and_logged);
    tcase_add_test(tc, domains_are_created_on_first_use_and_freed_with_their_last_buffer);
    tcase_add_test(tc, a_job_in_a_domain_without_buffers_is_refused);
    tcase_add_test(tc, a_finished_job_leaves_no_reference_on_its_domain);
    tcase_add_test(tc, the_device_switches_domain_only_when_a_job_needs_another);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}

/* SPDX-License-Identifier: MIT */
/*
 * Issue 24 items 2 and 3 on the RKNPU: caller memory (npv_dma_wrap of a
 * memfd mapping, mapped into a job's domain with npv_rknpu_mem_wrap) runs a
 * matmul exact, memory a vfio-user server cannot reach is refused, and a
 * wrapped buffer is not unmapped while a job of its domain is in flight; a
 * per-request budget (npv_rknpu_submit_within) fails a stalled or queued
 * job with -ETIMEDOUT on its own budget while its neighbours complete exact.
 * The budget and in-flight tests need the model's test port (stall, task
 * delay); the caller-memory runs also run on a real NPU.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <npuvfio/ctx.h>
#include <npuvfio/dma.h>

#include "npv_test.h"
#include "rk_drv.h"

static struct rk t;

static const struct rknpu_sample_shape SHAPE = {
    .dtype = NPV_RKNPU_INT8, .m = 8, .k = 64, .n = 32, .bias = true};

/* Long enough that only a budget can end a stalled job within a test's bounds. */
#define HANG_NS (10000 * MS)

static void setup(void)
{
    const struct npv_rknpu_config cfg = {.job_timeout_ns = HANG_NS, .reset_timeout_ns = 50 * MS};
    rk_open(&t, &cfg);
}

static void teardown(void)
{
    rk_close(&t);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct npv_rknpu_counters counters(void)
{
    struct npv_rknpu_counters c;
    npv_rknpu_counters(t.npu, &c);
    return c;
}

static uint64_t page_up(uint64_t n)
{
    return (n + 4095u) & ~4095ull;
}

/* Caller memory: one memfd, mapped shared, A B C bias as four wrapped slices of it. */
struct caller_mem {
    int fd;
    uint8_t *base;
    size_t len;
    struct npv_dma *dma[4];
};

static void caller_mem_new(struct caller_mem *m)
{
    struct npv_rknpu_matmul mm = {.dtype = SHAPE.dtype, .m = SHAPE.m, .k = SHAPE.k, .n = SHAPE.n};
    struct npv_rknpu_matmul_sizes sz;
    ck_assert_int_eq(npv_rknpu_matmul_sizes(&mm, &sz), 0);
    const uint64_t len[4] = {page_up(sz.a), page_up(sz.b), page_up(sz.c), page_up(sz.bias)};
    m->len = (size_t)(len[0] + len[1] + len[2] + len[3]);
    m->fd = memfd_create("rknpu-caller-tensors", MFD_CLOEXEC);
    ck_assert_int_ge(m->fd, 0);
    ck_assert_int_eq(ftruncate(m->fd, (off_t)m->len), 0);
    m->base = mmap(NULL, m->len, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
    ck_assert_ptr_ne(m->base, MAP_FAILED);
    uint64_t off = 0;
    for (unsigned i = 0; i < 4; i++) {
        int r = npv_dma_wrap(t.ctx, m->base + off, (size_t)len[i], m->fd, off, 0, &m->dma[i]);
        ck_assert_msg(r == 0, "npv_dma_wrap: %s", npv_strerror(r));
        off += len[i];
    }
}

static void caller_mem_free(struct caller_mem *m)
{
    for (unsigned i = 0; i < 4; i++)
        npv_dma_free(m->dma[i]);
    ck_assert_int_eq(munmap(m->base, m->len), 0);
    close(m->fd);
}

static void submit_within(struct rknpu_sample_mm *s, uint32_t mask, uint64_t cookie,
                          uint64_t budget_ns)
{
    rknpu_sample_mm_poison(s);
    struct npv_rknpu_job job = {.tasks = &s->task,
                                .nr_tasks = 1,
                                .core_mask = mask,
                                .domain_id = npv_rknpu_mem_domain(s->a),
                                .cookie = cookie};
    int r = budget_ns != 0 ? npv_rknpu_submit_within(t.npu, &job, budget_ns)
                           : npv_rknpu_submit(t.npu, &job);
    ck_assert_int_eq(r, 0);
}

/* Collect n completions by cookie, with the time each arrived (at may be NULL). */
static void collect(struct npv_cpl *by_cookie, uint64_t *at, unsigned n)
{
    struct npv_cpl cpl[8];
    for (unsigned got = 0; got < n;) {
        int r = npv_rknpu_wait(t.npu, 1, GENEROUS_NS, cpl, 8);
        ck_assert_int_gt(r, 0);
        uint64_t now = now_ns();
        for (int k = 0; k < r; k++) {
            by_cookie[cpl[k].cookie] = cpl[k];
            if (at != NULL)
                at[cpl[k].cookie] = now;
        }
        got += (unsigned)r;
    }
}

static void wait_stalled(unsigned core)
{
    for (unsigned tries = 0;
         rk_port_read(&t, RKNPU_TP_CORE(core) + RKNPU_TP_STATE) != RKNPU_CORE_STALLED; tries++)
        ck_assert_msg(tries < 100000, "core %u never took its stall", core);
}

START_TEST(caller_memory_in_a_memfd_runs_exact_in_two_domains)
{
    struct caller_mem m;
    caller_mem_new(&m);
    struct npv_rknpu_counters before = counters();
    struct rknpu_sample_mm *s;
    int r = rknpu_sample_mm_new_wrapped(t.npu, &SHAPE, 3, m.dma, 41, &s);
    ck_assert_msg(r == 0, "wrap: %s", npv_strerror(r));
    /* The device reads and writes the caller's pages: the pointer is theirs. */
    ck_assert_ptr_eq(npv_rknpu_mem_vaddr(s->a), m.base);
    ck_assert_uint_lt(npv_rknpu_mem_iova(s->c) + npv_rknpu_mem_size(s->c), NPV_RKNPU_DOMAIN_SIZE);
    ck_assert_uint_eq(counters().mems_live, before.mems_live + 4);
    for (uint32_t mask = 1; mask <= 4; mask <<= 1)
        rk_assert_exact(&t, s, mask);
    /* C came back through the caller's own mapping of the file: read it there too. */
    uint8_t *c_by_file = mmap(NULL, npv_rknpu_mem_size(s->c), PROT_READ, MAP_SHARED, m.fd,
                              (off_t)((uint8_t *)npv_rknpu_mem_vaddr(s->c) - m.base));
    ck_assert_ptr_ne(c_by_file, MAP_FAILED);
    ck_assert_int_eq(memcmp(c_by_file, npv_rknpu_mem_vaddr(s->c), npv_rknpu_mem_size(s->c)), 0);
    munmap(c_by_file, npv_rknpu_mem_size(s->c));
    /* A buffer wrapped twice into one domain is the map's -EEXIST; into another domain it maps. */
    struct npv_rknpu_mem *again;
    ck_assert_int_eq(npv_rknpu_mem_wrap(t.npu, m.dma[0], 3, &again), -EEXIST);
    rknpu_sample_mm_free(s);
    ck_assert_uint_eq(counters().mems_live, before.mems_live);
    ck_assert_uint_eq(counters().domains_live, before.domains_live);
    /* The same memory again in the same domain (unwrapped is unmapped: no -EEXIST), and in another.
     */
    ck_assert_int_eq(rknpu_sample_mm_new_wrapped(t.npu, &SHAPE, 3, m.dma, 42, &s), 0);
    rk_assert_exact(&t, s, 0x2);
    rknpu_sample_mm_free(s);
    ck_assert_int_eq(rknpu_sample_mm_new_wrapped(t.npu, &SHAPE, 5, m.dma, 44, &s), 0);
    rk_assert_exact(&t, s, 0x4);
    rknpu_sample_mm_free(s);
    caller_mem_free(&m);
}
END_TEST

START_TEST(memory_a_vfio_user_server_cannot_reach_is_refused_and_leaves_nothing)
{
    rk_require_model("vfio-user only: a kernel IOMMU maps anonymous memory");
    void *heap = aligned_alloc(4096, 16384);
    ck_assert_ptr_nonnull(heap);
    struct npv_dma *dma;
    ck_assert_int_eq(npv_dma_wrap(t.ctx, heap, 16384, -1, 0, 0, &dma), 0);
    struct npv_rknpu_counters before = counters();
    struct npv_rknpu_mem *mem = NULL;
    ck_assert_int_eq(npv_rknpu_mem_wrap(t.npu, dma, 2, &mem), -NPV_ENOTSHARED);
    ck_assert_ptr_null(mem);
    struct npv_rknpu_counters after = counters();
    ck_assert_uint_eq(after.mems_live, before.mems_live);
    ck_assert_uint_eq(after.domains_live, before.domains_live);
    npv_dma_free(dma);
    free(heap);
}
END_TEST

START_TEST(a_wrapped_buffer_is_not_unmapped_while_a_job_of_its_domain_is_in_flight)
{
    rk_require_model("the task delay is the model's test port");
    struct caller_mem m;
    caller_mem_new(&m);
    struct rknpu_sample_mm *s;
    ck_assert_int_eq(rknpu_sample_mm_new_wrapped(t.npu, &SHAPE, 1, m.dma, 43, &s), 0);
    ck_assert_int_eq(npv_bar_write(t.port, RKNPU_TP_TASK_DELAY_US, 4, 200000), 0);
    submit_within(s, 0x1, 0, 0);
    /* In flight: refused, nothing changed (destroy logs and keeps it). */
    ck_assert_int_eq(npv_rknpu_mem_unwrap(s->c), -EBUSY);
    npv_rknpu_mem_destroy(s->b);
    /* Had either let go of its mapping, the job's DMA would fault (-EIO) or miss: it is exact. */
    struct npv_cpl cpl[1];
    collect(cpl, NULL, 1);
    ck_assert_int_eq(npv_bar_write(t.port, RKNPU_TP_TASK_DELAY_US, 4, 0), 0);
    ck_assert_int_eq(cpl[0].status, 0);
    ck_assert_uint_eq(rknpu_sample_mm_check(s), 0);
    /* Reaped: the mapping may go. An npu_mem_create buffer is not unwrapped. */
    struct npv_rknpu_mem *own;
    ck_assert_int_eq(npv_rknpu_mem_create(t.npu, 4096, 1, 0, &own), 0);
    ck_assert_int_eq(npv_rknpu_mem_unwrap(own), -EINVAL);
    npv_rknpu_mem_destroy(own);
    rknpu_sample_mm_free(s); /* unwraps a, b (kept by the refused destroy), c, bias */
    ck_assert_uint_eq(counters().mems_live, 0);
    ck_assert_uint_eq(counters().domains_live, 0);
    caller_mem_free(&m);
}
END_TEST

START_TEST(a_stalled_job_fails_on_its_budget_and_its_neighbours_complete)
{
    rk_require_model("fault injection is the model's test port");
    struct rknpu_sample_mm *s[3];
    for (unsigned i = 0; i < 3; i++)
        ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 50 + i, &s[i]), 0);
    rk_fault(&t, 1, RKNPU_FAULT_STALL);
    uint64_t t0 = now_ns();
    submit_within(s[0], 0x2, 0, 100 * MS); /* stalls: only its budget ends it */
    wait_stalled(1);
    submit_within(s[1], 0x2, 1, GENEROUS_NS); /* queued behind it on the same core */
    submit_within(s[2], 0x1, 2, 0);           /* another core, no budget */
    struct npv_cpl cpl[3];
    uint64_t at[3];
    collect(cpl, at, 3);
    ck_assert_int_eq(cpl[0].status, -ETIMEDOUT);
    ck_assert_int_eq(cpl[1].status, 0);
    ck_assert_int_eq(cpl[2].status, 0);
    ck_assert_uint_ge(at[0] - t0, 100 * MS);
    ck_assert_msg(at[0] - t0 < HANG_NS / 2, "the stall ended after %llu ms: not on its budget",
                  (unsigned long long)((at[0] - t0) / MS));
    ck_assert_uint_eq(rknpu_sample_mm_check(s[1]), 0);
    ck_assert_uint_eq(rknpu_sample_mm_check(s[2]), 0);
    struct npv_rknpu_counters c = counters();
    ck_assert_uint_eq(c.timeouts, 1);
    ck_assert_uint_eq(c.resets, 1); /* the stalled core's, as for a hang */
    rk_assert_exact(&t, s[0], 0x2);
    for (unsigned i = 0; i < 3; i++)
        rknpu_sample_mm_free(s[i]);
}
END_TEST

START_TEST(a_queued_job_past_its_budget_fails_where_it_waits_without_a_reset)
{
    rk_require_model("fault injection is the model's test port");
    /* A short start-relative deadline for the stalled job, a shorter budget for the one behind. */
    struct rknpu_sample_mm *s[3];
    for (unsigned i = 0; i < 3; i++)
        ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 60 + i, &s[i]), 0);
    rk_fault(&t, 1, RKNPU_FAULT_STALL);
    rknpu_sample_mm_poison(s[0]);
    struct npv_rknpu_job stalled = {
        .tasks = &s[0]->task, .nr_tasks = 1, .core_mask = 0x2, .timeout_ns = 1500 * MS};
    uint64_t t0 = now_ns();
    ck_assert_int_eq(npv_rknpu_submit(t.npu, &stalled), 0);
    wait_stalled(1);
    submit_within(s[1], 0x2, 1, 100 * MS); /* never starts: its core is stalled */
    submit_within(s[2], 0x1, 2, GENEROUS_NS);
    struct npv_cpl cpl[3];
    uint64_t at[3];
    collect(cpl, at, 3);
    ck_assert_int_eq(cpl[1].status, -ETIMEDOUT);
    ck_assert_int_eq(cpl[0].status, -ETIMEDOUT); /* its own hang deadline */
    ck_assert_int_eq(cpl[2].status, 0);
    ck_assert_uint_eq(rknpu_sample_mm_check(s[2]), 0);
    /* The queued job failed on its budget, long before the stalled one's deadline freed its core.
     */
    ck_assert_msg(at[1] - t0 < 1500 * MS, "the queued job failed after %llu ms",
                  (unsigned long long)((at[1] - t0) / MS));
    ck_assert_uint_ge(at[0] - t0, 1500 * MS);
    /* It never ran: its C still holds the poison in every element. */
    ck_assert_uint_eq(rknpu_sample_mm_check(s[1]), (uint64_t)SHAPE.m * SHAPE.n);
    struct npv_rknpu_counters c = counters();
    ck_assert_uint_eq(c.timeouts, 2);
    ck_assert_uint_eq(c.resets, 1); /* the stall's: the queued job cost none */
    rk_assert_exact(&t, s[1], 0x2);
    for (unsigned i = 0; i < 3; i++)
        rknpu_sample_mm_free(s[i]);
}
END_TEST

START_TEST(a_budget_passes_behind_a_job_waiting_for_a_domain_switch)
{
    rk_require_model("fault injection is the model's test port");
    /* A stalls in domain 0; B (domain 1) waits for the switch; C (domain 1) behind B has a budget.
     */
    struct rknpu_sample_mm *s[3];
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 80, &s[0]), 0);
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 1, 0, 81, &s[1]), 0);
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 1, 0, 82, &s[2]), 0);
    rk_fault(&t, 1, RKNPU_FAULT_STALL);
    rknpu_sample_mm_poison(s[0]);
    struct npv_rknpu_job stalled = {
        .tasks = &s[0]->task, .nr_tasks = 1, .core_mask = 0x2, .timeout_ns = 1500 * MS};
    uint64_t t0 = now_ns();
    ck_assert_int_eq(npv_rknpu_submit(t.npu, &stalled), 0);
    wait_stalled(1);
    submit_within(s[1], 0x1, 1, 0);
    submit_within(s[2], 0x4, 2, 100 * MS);
    struct npv_cpl cpl[3];
    uint64_t at[3];
    collect(cpl, at, 3);
    ck_assert_int_eq(cpl[0].status, -ETIMEDOUT);
    ck_assert_int_eq(cpl[1].status, 0);
    ck_assert_int_eq(cpl[2].status, -ETIMEDOUT);
    ck_assert_uint_eq(rknpu_sample_mm_check(s[1]), 0);
    ck_assert_msg(at[2] - t0 < 1500 * MS, "the budget behind the switch ended after %llu ms",
                  (unsigned long long)((at[2] - t0) / MS));
    for (unsigned i = 0; i < 3; i++)
        rknpu_sample_mm_free(s[i]);
}
END_TEST

START_TEST(a_budget_of_zero_is_refused)
{
    struct rknpu_sample_mm *s;
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 70, &s), 0);
    struct npv_rknpu_job job = {.tasks = &s->task, .nr_tasks = 1, .core_mask = 0x1};
    ck_assert_int_eq(npv_rknpu_submit_within(t.npu, &job, 0), -EINVAL);
    /* A budget every healthy run meets changes nothing. */
    rknpu_sample_mm_poison(s);
    ck_assert_int_eq(npv_rknpu_submit_within(t.npu, &job, GENEROUS_NS), 0);
    struct npv_cpl cpl[1];
    collect(cpl, NULL, 1);
    ck_assert_int_eq(cpl[0].status, 0);
    ck_assert_uint_eq(rknpu_sample_mm_check(s), 0);
    rknpu_sample_mm_free(s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rknpu_driver_serving");
    TCase *tc = tcase_create("serving");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, caller_memory_in_a_memfd_runs_exact_in_two_domains);
    tcase_add_test(tc, memory_a_vfio_user_server_cannot_reach_is_refused_and_leaves_nothing);
    tcase_add_test(tc, a_wrapped_buffer_is_not_unmapped_while_a_job_of_its_domain_is_in_flight);
    tcase_add_test(tc, a_stalled_job_fails_on_its_budget_and_its_neighbours_complete);
    tcase_add_test(tc, a_queued_job_past_its_budget_fails_where_it_waits_without_a_reset);
    tcase_add_test(tc, a_budget_passes_behind_a_job_waiting_for_a_domain_switch);
    tcase_add_test(tc, a_budget_of_zero_is_refused);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}

/* SPDX-License-Identifier: MIT */
/*
 * Non-coherent hosts: the RK3588's NPU does not snoop the CPU caches, so
 * everything the CPU wrote must be cleaned before the NPU reads it and what
 * the NPU wrote invalidated before the CPU reads it (npv_rknpu_mem_sync_*,
 * rknpu.h). Made observable on a coherent build machine as
 * test_edgetpu_noncoherent.c does for the Edge TPU: the suite is linked with
 * -Wl,--wrap for npv_dma_alloc / npv_dma_free / npv_dma_sync_for_device /
 * npv_dma_sync_for_cpu / npv_bar_write / npv_inflight_complete (the suites
 * link the libraries statically, so --wrap redirects every call from the
 * driver's objects).
 *
 * Every DMA buffer made while the driver is watched gets a "device view": a
 * shadow copy of its bytes, zero at allocation (fresh memory, as the device
 * sees it) and updated at every sync_for_device, as a non-coherent device
 * would see the memory once a clean reached the point of coherency
 * (tests/common/dma_shadow.c keeps the shadows and wraps the DMA calls).
 *
 * The start of a run is the driver's write of 1 to a core's PC
 * OPERATION_ENABLE (driver.c rknpu_core_start, through npv_bar_write). At
 * that moment the chain the core is about to fetch -- from the
 * BASE_ADDRESS / REGISTER_AMOUNTS just written, task after task through the
 * trailers, TASK_NUMBER tasks -- must equal its device view, and so must
 * every byte each task reads (A's span, B, the bias: decoded from the
 * device's view of the list as the model decodes it, noncoherent_task.c)
 * and every byte it writes (C: a CPU fill left dirty would be written back
 * over the NPU's result by the clean+invalidate an arm64 sync_for_cpu is).
 *
 * Outputs: the bytes of C as they were at the start are the CPU's cached
 * view. When the driver completes the core's part (npv_inflight_complete on
 * the core's tracker, after it read the done status), what the NPU wrote
 * becomes C's device view, and C's memory is put back to the CPU's stale
 * view until a sync_for_cpu covers it (then the NPU's bytes come back) or a
 * sync_for_device does (the CPU's bytes are then what the device sees). A
 * read of the output without an invalidate therefore sees the stale bytes:
 * the sample's CPU check fails.
 *
 * How it was shown to fail (report rknpu-sync.md): with the driver's clean
 * of the laid-out command list (driver_job.c submit) deleted, every job is
 * caught at its start ("regcmd ... not synced"), and with the queue's
 * (driver_queue.c) every queued job; with the sample's invalidate
 * of C (sample.c rknpu_sample_mm_check) deleted, every job's result
 * mismatches; with its clean of the inputs (sample.c pack_inputs) deleted,
 * the first job is caught at its start.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/ring.h>

#include "dma_shadow.h"
#include "driver_internal.h"
#include "noncoherent_task.h"
#include "npv_test.h"
#include "rk_drv.h"
#include "sample_run.h"

/* The real calls, reached through the linker's --wrap (the DMA ones: dma_shadow.c). */
int __real_npv_bar_write(const struct npv_bar *bar, uint64_t off, unsigned width, uint64_t val);
int __real_npv_inflight_complete(struct npv_inflight *t, uint32_t end);
int __wrap_npv_bar_write(const struct npv_bar *bar, uint64_t off, unsigned width, uint64_t val);
int __wrap_npv_inflight_complete(struct npv_inflight *t, uint32_t end);

#define MAX_PENDING 64

/* An output of a running part: C's bytes as the CPU cached them at the start. */
struct pending {
    struct dma_shadow *s;
    size_t off, len;
    uint8_t *cpu;
};

struct core_watch {
    uint32_t base, amount, tasks; /* the PC registers as last written */
    struct pending out[MAX_PENDING];
    unsigned nr_out;
};

static struct npv_rknpu *g_npu; /* checks run while it is set */
static struct core_watch cores[NPV_RKNPU_NUM_CORES];
static unsigned starts_checked, outputs_made_stale;

/* A buffer freed: no part's output any more. */
static void forget_outputs(struct dma_shadow *s)
{
    for (unsigned c = 0; c < NPV_RKNPU_NUM_CORES; c++)
        for (unsigned i = 0; i < cores[c].nr_out; i++)
            if (cores[c].out[i].s == s)
                cores[c].out[i].s = NULL;
}

/*
 * Outputs still pending from a core's last start: a queue's completions go
 * through the queue's own tracker, never the wrapped core tracker, so they
 * end here (at the core's next start, or when the test stops watching).
 */
static void drop_pending(struct core_watch *w)
{
    for (unsigned i = 0; i < w->nr_out; i++)
        free(w->out[i].cpu);
    w->nr_out = 0;
}

/* The shadow holding [iova, iova + len) of the device's domain, and its offset there. */
static struct dma_shadow *shadow_at(uint32_t iova, uint64_t len, size_t *off)
{
    /* Queue mode keeps the attachment in qsw (driver_queue.c), no other thread runs here. */
    struct npv_domain *dom = g_npu->queues_open != 0 ? g_npu->qsw.attached : g_npu->attached;
    return dma_shadow_at(dom, iova, len, off);
}

static void check_range(unsigned core, uint32_t task, const char *what, uint32_t iova, uint64_t len)
{
    size_t off;
    struct dma_shadow *s = shadow_at(iova, len, &off);
    if (s == NULL)
        dma_shadow_fail("core %u task %u: %s at IOVA 0x%x (+%llu) is in no buffer made by the "
                        "test",
                        core, task, what, iova, (unsigned long long)len);
    else if (!dma_shadow_device_sees(s, off, (size_t)len))
        dma_shadow_fail("core %u task %u: %s (%llu bytes at IOVA 0x%x) not synced for the device "
                        "before the core started",
                        core, task, what, (unsigned long long)len, iova);
}

/* Everything the core reads and writes in this run must already be in the device's view. */
static void check_start(unsigned c)
{
    struct core_watch *w = &cores[c];
    uint32_t addr = w->base, amount = w->amount;
    drop_pending(w);
    for (uint32_t t = 0; t < w->tasks; t++) {
        uint32_t count = rknpu_regcmd_fetch_words(amount);
        size_t off;
        struct dma_shadow *s = shadow_at(addr, (uint64_t)count * 8u, &off);
        if (s == NULL) {
            dma_shadow_fail("core %u task %u: regcmd at 0x%x in no driver buffer", c, t, addr);
            return;
        }
        if (!dma_shadow_device_sees(s, off, (size_t)count * 8u))
            dma_shadow_fail("core %u task %u: regcmd (%u words at 0x%x) not synced for the "
                            "device before the core started",
                            c, t, count, addr);
        /* Decoded from what the core fetches: the device's view of the list. */
        struct nc_task task;
        if (nc_task_decode((const uint64_t *)(s->view + off), count, &task) < 0) {
            dma_shadow_fail("core %u task %u: the device's view of the list is no matmul", c, t);
            return;
        }
        for (unsigned i = 0; i < task.nr_reads; i++)
            check_range(c, t,
                        i == 0   ? "A"
                        : i == 1 ? "B"
                                 : "the bias",
                        task.reads[i].iova, task.reads[i].len);
        for (unsigned i = 0; i < task.nr_writes; i++) {
            check_range(c, t, "C", task.writes[i].iova, task.writes[i].len);
            struct dma_shadow *o = shadow_at(task.writes[i].iova, task.writes[i].len, &off);
            if (o == NULL || w->nr_out == MAX_PENDING)
                continue;
            struct pending *p = &w->out[w->nr_out++];
            *p = (struct pending){.s = o,
                                  .off = off,
                                  .len = (size_t)task.writes[i].len,
                                  .cpu = malloc((size_t)task.writes[i].len)};
            ck_assert_ptr_nonnull(p->cpu);
            memcpy(p->cpu, dma_shadow_mem(o) + off, p->len);
        }
        addr = task.next_base;
        amount = task.next_amount;
    }
    starts_checked++;
}

int __wrap_npv_bar_write(const struct npv_bar *bar, uint64_t off, unsigned width, uint64_t val)
{
    for (unsigned c = 0; g_npu != NULL && c < g_npu->nr_cores; c++) {
        const struct rknpu_core *core = &g_npu->cores[c];
        if (bar != core->bar || off < core->base || off - core->base >= RKNPU_CORE_WINDOW_SIZE)
            continue;
        uint64_t reg = off - core->base;
        if (reg == RKNPU_PC_BASE_ADDRESS && val != RKNPU_PC_SEL)
            cores[c].base = (uint32_t)val & RKNPU_PC_BASE_ADDRESS_MASK;
        else if (reg == RKNPU_PC_REGISTER_AMOUNTS)
            cores[c].amount = (uint32_t)val & RKNPU_PC_REGISTER_AMOUNTS_MASK;
        else if (reg == RKNPU_PC_TASK_CON)
            cores[c].tasks = (uint32_t)val & RKNPU_TASK_CON_TASK_NUMBER_MASK;
        else if (reg == RKNPU_PC_OPERATION_ENABLE && (val & RKNPU_PC_OP_EN))
            check_start(c);
    }
    return __real_npv_bar_write(bar, off, width, val);
}

/* The core's part ended: C's memory shows the CPU's stale lines until an invalidate. */
int __wrap_npv_inflight_complete(struct npv_inflight *t, uint32_t end)
{
    for (unsigned c = 0; g_npu != NULL && c < g_npu->nr_cores; c++) {
        if (t != g_npu->cores[c].inflight)
            continue;
        struct core_watch *w = &cores[c];
        for (unsigned i = 0; i < w->nr_out; i++) {
            struct pending *p = &w->out[i];
            if (p->s != NULL) {
                dma_shadow_device_wrote(p->s, p->off, p->len, p->cpu);
                outputs_made_stale++;
            }
            free(p->cpu);
        }
        w->nr_out = 0;
    }
    return __real_npv_inflight_complete(t, end);
}

static struct rk t;

static void watch(void)
{
    rk_require_model("the non-coherence checks decode the model's matmul lists");
    rk_open(&t, NULL);
    memset(cores, 0, sizeof(cores));
    starts_checked = outputs_made_stale = 0;
    dma_shadow_set_hooks(NULL, forget_outputs);
    dma_shadow_watch(true);
    g_npu = t.npu;
}

static void unwatch(void)
{
    g_npu = NULL;
    for (unsigned c = 0; c < NPV_RKNPU_NUM_CORES; c++)
        drop_pending(&cores[c]);
    rk_close(&t);
    dma_shadow_watch(false);
}

static const struct rknpu_sample_shape INT8_BIAS = {
    .dtype = NPV_RKNPU_INT8, .m = 16, .k = 64, .n = 32, .bias = true, .relu = true};
static const struct rknpu_sample_shape FP16 = {.dtype = NPV_RKNPU_FP16, .m = 8, .k = 32, .n = 16};

START_TEST(what_a_job_reads_and_writes_is_cleaned_before_its_core_starts)
{
    watch();
    struct rknpu_sample_mm *s[2];
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &INT8_BIAS, 0, 0, 7, &s[0]), 0);
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &FP16, 0, 0, 8, &s[1]), 0);
    /* Every core, both shapes, and more jobs than slots reuse a slot's command memory. */
    for (unsigned i = 0; i < 12; i++) {
        uint64_t bad = 1;
        int r = rk_run_mm(&t, s[i % 2], 1u << (i % 3), &bad);
        ck_assert_msg(r == 0, "job %u: %s", i, npv_strerror(r));
        ck_assert_msg(dma_shadow_failure()[0] == '\0', "job %u: %s", i, dma_shadow_failure());
        ck_assert_msg(bad == 0, "job %u: %llu elements differ (read without invalidate?)", i,
                      (unsigned long long)bad);
    }
    ck_assert_uint_eq(starts_checked, 12);
    ck_assert_uint_eq(outputs_made_stale, 12);
    rknpu_sample_mm_free(s[0]);
    rknpu_sample_mm_free(s[1]);
    unwatch();
}
END_TEST

START_TEST(a_chain_of_tasks_over_three_cores_is_clean_at_each_start)
{
    watch();
    /* Six matmuls in one job over 0x7: two chained tasks per core. */
    struct rknpu_sample_mm *s[6];
    struct npv_rknpu_task tasks[6];
    for (unsigned i = 0; i < 6; i++) {
        ck_assert_int_eq(
            rknpu_sample_mm_new(t.npu, i % 2 ? &FP16 : &INT8_BIAS, 0, 0, 20 + i, &s[i]), 0);
        rknpu_sample_mm_poison(s[i]);
        tasks[i] = s[i]->task;
    }
    int r = rk_run_tasks(&t, tasks, 6, 0x7, 0, GENEROUS_NS);
    ck_assert_msg(r == 0, "%s", npv_strerror(r));
    ck_assert_msg(dma_shadow_failure()[0] == '\0', "%s", dma_shadow_failure());
    ck_assert_uint_eq(starts_checked, 3);
    ck_assert_uint_eq(outputs_made_stale, 6);
    for (unsigned i = 0; i < 6; i++) {
        ck_assert_uint_eq(rknpu_sample_mm_check(s[i]), 0);
        rknpu_sample_mm_free(s[i]);
    }
    unwatch();
}
END_TEST

START_TEST(the_cli_sample_run_cleans_and_invalidates_what_it_should)
{
    watch();
    struct npv_sample_opts opts = {.iterations = 3};
    struct npv_sample_result res;
    int r = rknpu_sample_run(t.npu, &opts, &res);
    ck_assert_msg(r == 0, "%s", npv_strerror(r));
    ck_assert_msg(dma_shadow_failure()[0] == '\0', "%s", dma_shadow_failure());
    ck_assert_uint_eq(res.mismatches, 0);
    ck_assert_uint_eq(starts_checked, 3u * 2u * npv_rknpu_num_cores(t.npu));
    unwatch();
}
END_TEST

/*
 * A queue per core lays its jobs out in its own slots of the command memory
 * (driver_queue.c): cleaned before each start too. Its completions go through
 * the queue's own tracker, so only the starts are checked here.
 */
START_TEST(a_core_queue_cleans_its_command_list_before_each_start)
{
    watch();
    struct rknpu_sample_mm *s;
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &INT8_BIAS, 0, 0, 11, &s), 0);
    struct npv_rknpu_queue *q;
    ck_assert_int_eq(npv_rknpu_queue_open(t.npu, 1, 0, &q), 0);
    for (unsigned i = 0; i < 6; i++) {
        rknpu_sample_mm_poison(s);
        struct npv_rknpu_job job = {.tasks = &s->task, .nr_tasks = 1, .cookie = i};
        ck_assert_int_eq(npv_rknpu_queue_submit(q, &job), 0);
        struct npv_cpl cpl;
        ck_assert_int_eq(npv_rknpu_queue_wait(q, 1, GENEROUS_NS, &cpl, 1), 1);
        ck_assert_int_eq(cpl.status, 0);
        ck_assert_msg(dma_shadow_failure()[0] == '\0', "job %u: %s", i, dma_shadow_failure());
        ck_assert_uint_eq(rknpu_sample_mm_check(s), 0);
    }
    ck_assert_uint_eq(starts_checked, 6);
    npv_rknpu_queue_close(q);
    rknpu_sample_mm_free(s);
    unwatch();
}
END_TEST

/* The checks themselves: an input written and not cleaned is caught at the start. */
START_TEST(an_input_written_after_its_clean_is_caught_at_the_start)
{
    watch();
    struct rknpu_sample_mm *s;
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &INT8_BIAS, 0, 0, 9, &s), 0);
    ((int8_t *)npv_rknpu_mem_vaddr(s->b))[5] ^= 0x40;
    uint64_t bad;
    (void)rk_run_mm(&t, s, 0x1, &bad);
    ck_assert_msg(strstr(dma_shadow_failure(), "B (") != NULL, "not caught: '%s'",
                  dma_shadow_failure());
    rknpu_sample_mm_free(s);
    unwatch();
}
END_TEST

/* And a result read without an invalidate is the CPU's stale fill, until the invalidate. */
START_TEST(an_output_read_without_an_invalidate_is_stale)
{
    watch();
    struct rknpu_sample_mm *s;
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &INT8_BIAS, 0, 0, 10, &s), 0);
    rknpu_sample_mm_poison(s);
    ck_assert_int_eq(rk_run_tasks(&t, &s->task, 1, 0x2, 0, GENEROUS_NS), 0);
    ck_assert_msg(dma_shadow_failure()[0] == '\0', "%s", dma_shadow_failure());
    const uint32_t *c = npv_rknpu_mem_vaddr(s->c);
    ck_assert_uint_eq(c[0], 0x7fbadbadu); /* the poison the CPU cached */
    ck_assert_int_eq(npv_rknpu_mem_sync_for_cpu(s->c, 0, npv_rknpu_mem_size(s->c)), 0);
    ck_assert_uint_ne(c[0], 0x7fbadbadu);
    ck_assert_uint_eq(rknpu_sample_mm_check(s), 0);
    rknpu_sample_mm_free(s);
    unwatch();
}
END_TEST

START_TEST(a_sync_outside_the_buffer_is_refused)
{
    watch();
    struct npv_rknpu_mem *m;
    ck_assert_int_eq(npv_rknpu_mem_create(t.npu, 5000, 0, 0, &m), 0);
    uint64_t size = npv_rknpu_mem_size(m);
    ck_assert_uint_eq(size, 8192);
    ck_assert_int_eq(npv_rknpu_mem_sync_for_device(m, 0, size), 0);
    ck_assert_int_eq(npv_rknpu_mem_sync_for_cpu(m, size, 0), 0);
    ck_assert_int_eq(npv_rknpu_mem_sync_for_device(m, 1, size), -ERANGE);
    ck_assert_int_eq(npv_rknpu_mem_sync_for_cpu(m, size + 1, 0), -ERANGE);
    ck_assert_int_eq(npv_rknpu_mem_sync_for_cpu(m, 4096, UINT64_MAX), -ERANGE);
    ck_assert_int_eq(npv_rknpu_mem_sync_for_device(NULL, 0, 1), -EINVAL);
    ck_assert_int_eq(npv_rknpu_mem_sync_for_cpu(NULL, 0, 1), -EINVAL);
    npv_rknpu_mem_destroy(m);
    unwatch();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rknpu_noncoherent");
    TCase *tc = tcase_create("sync");
    tcase_add_test(tc, what_a_job_reads_and_writes_is_cleaned_before_its_core_starts);
    tcase_add_test(tc, a_chain_of_tasks_over_three_cores_is_clean_at_each_start);
    tcase_add_test(tc, the_cli_sample_run_cleans_and_invalidates_what_it_should);
    tcase_add_test(tc, a_core_queue_cleans_its_command_list_before_each_start);
    tcase_add_test(tc, an_input_written_after_its_clean_is_caught_at_the_start);
    tcase_add_test(tc, an_output_read_without_an_invalidate_is_stale);
    tcase_add_test(tc, a_sync_outside_the_buffer_is_refused);
    suite_add_tcase(s, tc);
    /* On a real NPU every case exits NPV_TEST_SKIP (it needs the model): skipped, not failed. */
    return npv_test_run(s);
}

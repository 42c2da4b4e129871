/* SPDX-License-Identifier: MIT */
/*
 * Non-coherent hosts, for the AICore driver: what the host writes that the
 * device reads by DMA (the table images the copy engine takes, the cleared
 * handshake records, the payload pointer in each record, the task payloads,
 * the operands) must be cleaned before the register write that lets the
 * device read it, and what the device writes (ready records, the result
 * record, the outputs) invalidated before the host reads it. Made
 * observable on a coherent machine as rknpu_noncoherent and
 * edgetpu_noncoherent do: linked with -Wl,--wrap for npv_dma_alloc /
 * npv_dma_free / npv_dma_sync_for_device / npv_dma_sync_for_cpu /
 * npv_bar_write / npv_inflight_complete (the libraries are linked
 * statically), every DMA buffer made while watched gets a "device view",
 * zero at allocation, copied at each clean and taking the device's own
 * writes when a run ends.
 *
 * The moments (devices/aicore/driver*.c, after simpler's handshake,
 * aicore_execute in aicore_executor.cpp, and its cache rules,
 * docs/hardware/cache-coherency.md):
 * COPY_GO (the copy engine reads COPY_LEN bytes at COPY_HOST_IOVA); LAUNCH
 * (the device reads the handshake records the driver cleared); the
 * FAST_PATH open of a sub-core's window (the sub-core reads the payload
 * pointer the driver wrote into its record, having written the record the
 * driver read: an invalidate of that record since LAUNCH must come before);
 * DMB = token (the sub-core reads the payload slot and the task's operands,
 * and writes its output); the run's end (npv_inflight_complete on the
 * driver's run tracker, after it read the result record: an invalidate of
 * the record since LAUNCH must come before). At the end each output's
 * memory is put back to the bytes the CPU cached at its dispatch until a
 * sync_for_cpu covers it: a read without an invalidate sees the stale NaN.
 *
 * The shadow bookkeeping is tests/common/dma_shadow.c's. How it was shown to
 * fail: each sync the driver and the sample do, deleted in turn, fails a
 * check here (the table image, the cleared records, the payload pointer, the
 * payload, the inputs at their moment; the ready and result records'
 * invalidates; the outputs read stale) -- except the clean of a slot's zero
 * fill at init, which leaves no value to compare (devices/aicore/README.md).
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "aic_driver.h"
#include "aicore/driver_internal.h"
#include "dma_shadow.h"
#include "npv_test.h"

/* The real calls, reached through the linker's --wrap (the DMA ones: dma_shadow.c). */
int __real_npv_bar_write(const struct npv_bar *bar, uint64_t off, unsigned width, uint64_t val);
int __real_npv_inflight_complete(struct npv_inflight *t, uint32_t end);
int __wrap_npv_bar_write(const struct npv_bar *bar, uint64_t off, unsigned width, uint64_t val);
int __wrap_npv_inflight_complete(struct npv_inflight *t, uint32_t end);

#define MAX_OUT (3 * AICORE_SAMPLE_MAX_CLUSTERS)

struct out {
    struct dma_shadow *s;
    size_t off, len;
    uint8_t *cpu; /* the output's bytes as the CPU cached them at its dispatch */
};

static struct npv_aicore *g_ac; /* checks run while it is set */
static struct npv_aicore_run *g_run;
static uint64_t copy_iova, copy_len, workers_iova;
static bool rank_invalidated[AICORE_MAX_SUBCORES], result_invalidated;
static struct out outs[MAX_OUT];
static unsigned nr_outs;
static unsigned copies_checked, launches_checked, windows_checked, dispatches_checked, ends_checked;

static bool covers(size_t off, size_t len, size_t at, size_t n)
{
    return off <= at && at + n <= off + len;
}

/* A buffer freed: no run's output any more. */
static void forget_outputs(struct dma_shadow *s)
{
    for (unsigned i = 0; i < nr_outs; i++)
        if (outs[i].s == s)
            outs[i].s = NULL;
}

/* The driver's invalidates of the records the device writes, for the checks below. */
static void note_invalidate(struct npv_dma *dma, size_t off, size_t len)
{
    if (g_run == NULL || dma != g_run->dma)
        return;
    size_t res = (size_t)(g_run->result_iova - g_run->iova);
    result_invalidated |= covers(off, len, res, sizeof(struct aicore_result));
    for (uint32_t r = 0; r < g_run->nr_cores; r++)
        rank_invalidated[r] |= covers(off, len,
                                      (size_t)(g_run->workers_iova - g_run->iova) +
                                          r * sizeof(struct aicore_handshake),
                                      sizeof(struct aicore_handshake));
}

static struct dma_shadow *shadow_at(uint64_t iova, uint64_t len, size_t *off)
{
    return dma_shadow_at(g_ac->dom, iova, len, off);
}

/* [iova, + len) as the device is about to read it: equal to its view. */
static void check_clean(const char *what, uint64_t iova, uint64_t len)
{
    size_t off;
    struct dma_shadow *s = shadow_at(iova, len, &off);
    if (s == NULL)
        dma_shadow_fail("%s at IOVA 0x%llx (+%llu) is in no buffer made by the test", what,
                        (unsigned long long)iova, (unsigned long long)len);
    else if (!dma_shadow_device_sees(s, off, (size_t)len))
        dma_shadow_fail(
            "%s (%llu bytes at IOVA 0x%llx) not synced for the device before the device "
            "reads it",
            what, (unsigned long long)len, (unsigned long long)iova);
}

/* An operand this run's device wrote already (a dependency's output): the device's own bytes. */
static bool written_this_run(uint64_t iova, uint64_t len)
{
    size_t off;
    struct dma_shadow *s = shadow_at(iova, len, &off);
    for (unsigned i = 0; s != NULL && i < nr_outs; i++)
        if (outs[i].s == s && off < outs[i].off + outs[i].len && outs[i].off < off + len)
            return true;
    return false;
}

static void on_launch(void)
{
    g_run = NULL;
    for (unsigned s = 0; s < NPV_AICORE_SLOTS; s++)
        if (g_ac->runs[s].workers_iova == workers_iova)
            g_run = &g_ac->runs[s];
    if (g_run == NULL) {
        dma_shadow_fail("LAUNCH names records of no slot");
        return;
    }
    memset(rank_invalidated, 0, sizeof(rank_invalidated));
    result_invalidated = false;
    nr_outs = 0;
    check_clean("the cleared handshake records", g_run->workers_iova,
                (uint64_t)g_run->nr_cores * sizeof(struct aicore_handshake));
    launches_checked++;
}

static int rank_of(uint32_t phys)
{
    for (uint32_t r = 0; g_run != NULL && r < g_run->nr_cores; r++)
        if (g_run->cores[r].phys == phys)
            return (int)r;
    return -1;
}

static void on_window_open(uint32_t phys)
{
    int r = rank_of(phys);
    if (r < 0)
        return;
    uint64_t rec = g_run->workers_iova + (uint64_t)r * sizeof(struct aicore_handshake);
    if (!rank_invalidated[r])
        dma_shadow_fail("sub-core %u's ready record read without a sync for the CPU since LAUNCH",
                        phys);
    check_clean("a handshake record's payload pointer", rec, sizeof(struct aicore_handshake));
    windows_checked++;
}

static void on_dispatch(uint32_t phys, uint32_t token)
{
    int r = rank_of(phys);
    if (r < 0)
        return;
    uint64_t slot =
        g_run->cores[r].payload_iova + (token & 1u) * sizeof(struct aicore_task_payload);
    check_clean("a task payload", slot, sizeof(struct aicore_task_payload));
    size_t off;
    struct dma_shadow *s = shadow_at(slot, sizeof(struct aicore_task_payload), &off);
    if (s == NULL)
        return;
    struct aicore_task_payload p;
    memcpy(&p, s->view + off, sizeof(p)); /* what the sub-core reads */
    uint64_t a = 4ull * p.n, b = a, c = a;
    if (p.kernel == AICORE_KERNEL_MATMUL) {
        a = 4ull * p.m * p.k;
        b = 4ull * p.k * p.n;
        c = 4ull * p.m * p.n;
    }
    if (!written_this_run(p.a, a))
        check_clean("an input operand (a)", p.a, a);
    if (!written_this_run(p.b, b))
        check_clean("an input operand (b)", p.b, b);
    check_clean("an output operand", p.c, c);
    struct dma_shadow *o = shadow_at(p.c, c, &off);
    if (o != NULL && nr_outs < MAX_OUT) {
        struct out *x = &outs[nr_outs++];
        *x = (struct out){.s = o, .off = off, .len = (size_t)c, .cpu = malloc((size_t)c)};
        ck_assert_ptr_nonnull(x->cpu);
        memcpy(x->cpu, dma_shadow_mem(o) + off, x->len);
    }
    dispatches_checked++;
}

int __wrap_npv_bar_write(const struct npv_bar *bar, uint64_t off, unsigned width, uint64_t val)
{
    if (g_ac != NULL && bar == g_ac->global) {
        if (off == AICORE_REG_COPY_HOST_IOVA)
            copy_iova = val;
        else if (off == AICORE_REG_COPY_LEN)
            copy_len = val;
        else if (off == AICORE_REG_COPY_GO) {
            check_clean("a table image", copy_iova, copy_len);
            copies_checked++;
        } else if (off == AICORE_REG_RUN_WORKERS)
            workers_iova = val;
        else if (off == AICORE_REG_LAUNCH)
            on_launch();
    } else if (g_ac != NULL && bar == g_ac->ctrl && g_run != NULL) {
        uint32_t phys = (uint32_t)(off / g_ac->stride), reg = (uint32_t)(off % g_ac->stride);
        if (reg == AICORE_CTRL_FAST_PATH && val == AICORE_FAST_PATH_OPEN)
            on_window_open(phys);
        else if (reg == AICORE_CTRL_DMB && val >= 1 && val <= AICORE_TOKEN_MAX)
            on_dispatch(phys, (uint32_t)val);
    }
    return __real_npv_bar_write(bar, off, width, val);
}

/* The run ended: its records and outputs hold the device's writes; the CPU's lines are stale. */
int __wrap_npv_inflight_complete(struct npv_inflight *t, uint32_t end)
{
    if (g_ac != NULL && t == g_ac->stats && g_run != NULL) {
        if (!result_invalidated && g_run->status == 0)
            dma_shadow_fail("the result record read without a sync for the CPU since LAUNCH");
        struct dma_shadow *s = dma_shadow_of(g_run->dma);
        if (s != NULL) {
            dma_shadow_device_owns(s, (size_t)(g_run->workers_iova - g_run->iova),
                                   g_run->nr_cores * sizeof(struct aicore_handshake));
            dma_shadow_device_owns(s, (size_t)(g_run->result_iova - g_run->iova),
                                   sizeof(struct aicore_result));
        }
        for (unsigned i = 0; i < nr_outs; i++) {
            struct out *x = &outs[i];
            if (x->s != NULL)
                dma_shadow_device_wrote(x->s, x->off, x->len, x->cpu);
            free(x->cpu);
        }
        nr_outs = 0;
        g_run = NULL;
        ends_checked++;
    }
    return __real_npv_inflight_complete(t, end);
}

static struct aicd d;

static void watch(void)
{
    aic_require_model("the non-coherence checks need the model");
    copies_checked = launches_checked = windows_checked = dispatches_checked = ends_checked = 0;
    dma_shadow_set_hooks(note_invalidate, forget_outputs);
    dma_shadow_watch(true);
    aicd_open(&d, NULL, NULL);
    g_ac = d.ac;
}

static void unwatch(void)
{
    g_ac = NULL;
    g_run = NULL;
    aicd_close(&d);
    dma_shadow_watch(false);
}

START_TEST(what_the_device_reads_is_cleaned_and_what_it_writes_invalidated)
{
    watch();
    for (uint32_t i = 0; i < 6; i++) {
        bool exact = false;
        int r = aicd_run(&d, i % NPV_AICORE_SLOTS, i % 2 == 1, 100 + i, &exact);
        ck_assert_msg(r == 0, "run %u: %s", i, npv_strerror(r));
        ck_assert_msg(dma_shadow_failure()[0] == '\0', "run %u: %s", i, dma_shadow_failure());
        ck_assert_msg(exact, "run %u: outputs differ (read without an invalidate?)", i);
    }
    ck_assert_uint_ge(copies_checked, 1);
    ck_assert_uint_eq(launches_checked, 6);
    ck_assert_uint_eq(ends_checked, 6);
    ck_assert_uint_eq(windows_checked, 6u * d.ac->nr_usable); /* every sub-core, every run */
    ck_assert_uint_eq(dispatches_checked, 6 * d.g[0].desc.nr_tasks);
    unwatch();
}
END_TEST

START_TEST(tables_uploaded_again_after_a_reset_are_cleaned_first)
{
    watch();
    bool exact = false;
    ck_assert_int_eq(aicd_run(&d, 0, true, 7, &exact), 0);
    ck_assert(exact);
    unsigned before = copies_checked;
    ck_assert_int_eq(npv_aicore_reset(d.ac), 0);
    ck_assert_int_eq(aicd_run(&d, 1, true, 8, &exact), 0);
    ck_assert(exact);
    ck_assert_uint_gt(copies_checked, before);
    ck_assert_msg(dma_shadow_failure()[0] == '\0', "%s", dma_shadow_failure());
    unwatch();
}
END_TEST

/* The checks themselves: an output read without an invalidate is the CPU's stale NaN. */
START_TEST(an_output_read_without_an_invalidate_is_stale)
{
    watch();
    struct npv_aicore_run *run;
    ck_assert_int_eq(aicd_prepare(&d, 0, false, 3, &run), 0);
    ck_assert_int_eq(npv_aicore_launch(run), 0);
    ck_assert_int_eq(npv_aicore_wait(run, AIC_GENEROUS_NS), 0);
    ck_assert_msg(dma_shadow_failure()[0] == '\0', "%s", dma_shadow_failure());
    struct aicore_sample_graph *g = &d.g[0];
    int32_t t = g->task_x[0] >= 0 ? g->task_x[0] : g->task_y[0];
    ck_assert_int_ge(t, 0);
    const float *out =
        (const float *)((const uint8_t *)npv_dma_vaddr(g->dma) + (g->tasks[t].c - g->iova));
    ck_assert(isnan(out[0])); /* the poison the CPU cached */
    npv_dma_sync_for_cpu(g->dma, 0, npv_dma_size(g->dma));
    ck_assert(!isnan(out[0]));
    ck_assert_uint_eq(aicore_sample_check(g), 0);
    ck_assert_int_eq(npv_aicore_release(run), 0);
    unwatch();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("aicore_noncoherent");
    TCase *tc = tcase_create("sync");
    tcase_add_test(tc, what_the_device_reads_is_cleaned_and_what_it_writes_invalidated);
    tcase_add_test(tc, tables_uploaded_again_after_a_reset_are_cleaned_first);
    tcase_add_test(tc, an_output_read_without_an_invalidate_is_stale);
    suite_add_tcase(s, tc);
    /* On a real NPU every case exits NPV_TEST_SKIP (it needs the model): skipped, not failed. */
    return npv_test_run(s);
}

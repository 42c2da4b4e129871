/* SPDX-License-Identifier: MIT */
/*
 * Non-coherent hosts (issue 20 item 7): the driver's cache maintenance, made
 * observable on a coherent build machine. The test is linked with
 * -Wl,--wrap for npv_dma_sync_for_device / npv_dma_sync_for_cpu /
 * npv_dma_free / npv_bar_read (the suites link libnpuvfio statically, so ELF
 * interposition cannot work; --wrap redirects every call from the driver's
 * objects). Each buffer gets a "device view": a shadow copy of its bytes
 * taken at every sync_for_device, as a non-coherent device would see them
 * once a clean reached the point of coherency. The ring's sync hook
 * (lib/ring/ring_internal.h) reports the descriptor clean that
 * npv_ring_submit does immediately before its doorbell (the IQ tail write);
 * at that moment every byte the chip is about to read must equal its device
 * view: the request's instruction chunk, the executable's parameters, every
 * level-1 page table. A sync dropped, short, or done after the doorbell
 * leaves the shadow stale and fails. The status block read by the driver's
 * error snapshot must be invalidated (sync_for_cpu) before it is read; the
 * first BAR read of the snapshot (HIB_ERROR_STATUS) follows that read.
 * Compiled models (npv_edgetpu_model_invoke): the linked chunk, found through
 * the driver's own level-1 tables, must be clean at every doorbell, and the
 * driver's input and output buffers at the inference's: an output the CPU
 * filled and nobody cleaned is written back over the chip's output by the
 * clean+invalidate of npv_dma_sync_for_cpu on arm64.
 */
#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/edgetpu_model.h>

#include "driver_internal.h"
#include "etpu_harness.h"
#include "ring_internal.h"

/* The real calls, reached through the linker's --wrap. */
void __real_npv_dma_sync_for_device(struct npv_dma *dma, size_t off, size_t len);
void __real_npv_dma_sync_for_cpu(struct npv_dma *dma, size_t off, size_t len);
void __real_npv_dma_free(struct npv_dma *dma);
int __real_npv_bar_read(const struct npv_bar *bar, uint64_t off, unsigned width, uint64_t *val);
void __wrap_npv_dma_sync_for_device(struct npv_dma *dma, size_t off, size_t len);
void __wrap_npv_dma_sync_for_cpu(struct npv_dma *dma, size_t off, size_t len);
void __wrap_npv_dma_free(struct npv_dma *dma);
int __wrap_npv_bar_read(const struct npv_bar *bar, uint64_t off, unsigned width, uint64_t *val);

enum ev_kind { EV_DEV, EV_CPU, EV_RING_DEV, EV_RING_CPU, EV_DOORBELL, EV_BAR_READ };

struct ev {
    enum ev_kind kind;
    struct npv_dma *dma;
    size_t off, len;
};

#define MAX_EVENTS  65536
#define MAX_SHADOWS 256

static struct ev events[MAX_EVENTS];
static size_t nr_events;

struct shadow {
    struct npv_dma *dma;
    size_t size;
    uint8_t *view; /* the device's view: the bytes as of their last clean */
};
static struct shadow shadows[MAX_SHADOWS];

/* The driver under test, once open: checks run only while it is set. */
static struct npv_edgetpu *g_tpu;
static struct npv_edgetpu_executable *g_exe;
static char failure[512];
static unsigned doorbells_checked;
/* A compiled model being invoked, and what its buffers looked like at the last doorbell. */
static struct npv_edgetpu_bound *g_bound;
static char io_at_doorbell[512];

static void record(enum ev_kind k, struct npv_dma *dma, size_t off, size_t len)
{
    if (nr_events < MAX_EVENTS)
        events[nr_events++] = (struct ev){.kind = k, .dma = dma, .off = off, .len = len};
}

static void note_failure(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note_failure(const char *fmt, ...)
{
    if (failure[0] != '\0')
        return; /* the first one says what went wrong */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(failure, sizeof(failure), fmt, ap);
    va_end(ap);
}

static struct shadow *shadow_of(struct npv_dma *dma, bool create)
{
    struct shadow *empty = NULL;
    for (size_t i = 0; i < MAX_SHADOWS; i++) {
        if (shadows[i].dma == dma)
            return &shadows[i];
        if (empty == NULL && shadows[i].dma == NULL)
            empty = &shadows[i];
    }
    if (!create || empty == NULL)
        return NULL;
    /* Fresh DMA memory is zero, as the device sees it before any clean. */
    empty->size = npv_dma_size(dma);
    empty->view = calloc(1, empty->size);
    if (empty->view == NULL)
        return NULL;
    empty->dma = dma;
    return empty;
}

static void clean(struct npv_dma *dma, size_t off, size_t len)
{
    struct shadow *s = shadow_of(dma, true);
    if (s == NULL) {
        note_failure("no shadow for a buffer");
        return;
    }
    if (off > s->size || len > s->size - off) {
        note_failure("sync_for_device [%zu, +%zu) outside its buffer of %zu bytes", off, len,
                     s->size);
        return;
    }
    memcpy(s->view + off, (const uint8_t *)npv_dma_vaddr(dma) + off, len);
}

/* True if the device's view of [off, off + len) of dma is what the CPU wrote. */
static bool device_sees(struct npv_dma *dma, size_t off, size_t len)
{
    struct shadow *s = shadow_of(dma, false);
    if (s == NULL || off > s->size || len > s->size - off)
        return false;
    return memcmp(s->view + off, (const uint8_t *)npv_dma_vaddr(dma) + off, len) == 0;
}

/* The shadowed buffer holding CPU address p, or NULL (never cleaned). */
static struct shadow *shadow_holding(const void *p)
{
    for (size_t i = 0; i < MAX_SHADOWS; i++) {
        const uint8_t *base = shadows[i].dma != NULL ? npv_dma_vaddr(shadows[i].dma) : NULL;
        if (base != NULL && (const uint8_t *)p >= base &&
            (const uint8_t *)p < base + shadows[i].size)
            return &shadows[i];
    }
    return NULL;
}

/*
 * An extended device VA, through the driver's level-1 tables (the chip's
 * walk, driver_mmu.c) to the shadowed buffer mapped at its IOVA: NULL when
 * unmapped or never cleaned.
 */
static struct shadow *shadow_at_va(struct npv_edgetpu *tpu, uint64_t va, size_t *off)
{
    if (!(va & EDGETPU_VA_EXTENDED))
        return NULL;
    uint64_t q = (va & ~EDGETPU_VA_EXTENDED) >> EDGETPU_PAGE_SHIFT;
    uint64_t l0 = q / EDGETPU_L1_ENTRIES;
    if (l0 >= tpu->nr_l0 || tpu->l1[l0].dma == NULL)
        return NULL;
    uint64_t pte = ((const uint64_t *)npv_dma_vaddr(tpu->l1[l0].dma))[q % EDGETPU_L1_ENTRIES];
    if (!(pte & EDGETPU_PTE_VALID))
        return NULL;
    uint64_t iova = (pte & ~(uint64_t)(EDGETPU_PAGE_SIZE - 1)) | (va & (EDGETPU_PAGE_SIZE - 1));
    for (size_t i = 0; i < MAX_SHADOWS; i++) {
        npv_iova_t base;
        if (shadows[i].dma == NULL || npv_dma_iova(shadows[i].dma, tpu->dom, &base) < 0)
            continue;
        if (iova >= base && iova - base < shadows[i].size) {
            *off = (size_t)(iova - base);
            return &shadows[i];
        }
    }
    return NULL;
}

/* The bound model's input and output buffers against their device view, into io_at_doorbell. */
static void check_bound_io(void)
{
    io_at_doorbell[0] = '\0';
    for (int out = 0; out < 2; out++) {
        for (uint32_t i = 0;; i++) {
            size_t len = 0;
            void *p = out ? npv_edgetpu_bound_output(g_bound, i, NULL, &len)
                          : npv_edgetpu_bound_input(g_bound, i, NULL, &len);
            if (p == NULL)
                break;
            struct shadow *s = shadow_holding(p);
            size_t off = s != NULL ? (size_t)((uint8_t *)p - (uint8_t *)npv_dma_vaddr(s->dma)) : 0;
            if (s == NULL || !device_sees(s->dma, off, len)) {
                snprintf(io_at_doorbell, sizeof(io_at_doorbell),
                         "%s %u (%zu bytes) not synced for the device before the doorbell",
                         out ? "output" : "input", i, len);
                return;
            }
        }
    }
}

void __wrap_npv_dma_sync_for_device(struct npv_dma *dma, size_t off, size_t len)
{
    record(EV_DEV, dma, off, len);
    if (dma != NULL)
        clean(dma, off, len);
    __real_npv_dma_sync_for_device(dma, off, len);
}

void __wrap_npv_dma_sync_for_cpu(struct npv_dma *dma, size_t off, size_t len)
{
    record(EV_CPU, dma, off, len);
    __real_npv_dma_sync_for_cpu(dma, off, len);
}

void __wrap_npv_dma_free(struct npv_dma *dma)
{
    struct shadow *s = dma != NULL ? shadow_of(dma, false) : NULL;
    if (s != NULL) {
        free(s->view);
        *s = (struct shadow){0};
    }
    __real_npv_dma_free(dma);
}

int __wrap_npv_bar_read(const struct npv_bar *bar, uint64_t off, unsigned width, uint64_t *val)
{
    if (g_tpu != NULL && bar == g_tpu->bar)
        record(EV_BAR_READ, NULL, (size_t)off, width);
    return __real_npv_bar_read(bar, off, width, val);
}

/* Everything the chip reads after this doorbell must already be in its view. */
static void check_doorbell(size_t off, size_t len)
{
    struct npv_edgetpu *tpu = g_tpu;
    const uint8_t *q = npv_dma_vaddr(tpu->queue_dma);
    for (size_t o = off; o < off + len; o += sizeof(struct edgetpu_desc)) {
        struct edgetpu_desc d;
        memcpy(&d, q + o, sizeof(d));
        uint64_t rel = d.address - tpu->instr_va;
        if (d.address < tpu->instr_va || rel > npv_dma_size(tpu->instr_dma) ||
            d.size_in_bytes > npv_dma_size(tpu->instr_dma) - rel) {
            /* A compiled model's chunk: a buffer of its own, mapped in extended space. */
            size_t at = 0;
            struct shadow *c = shadow_at_va(tpu, d.address, &at);
            if (c == NULL)
                note_failure("descriptor %zu points at no buffer ever synced for the device",
                             o / sizeof(d));
            else if (d.size_in_bytes > c->size - at || !device_sees(c->dma, at, d.size_in_bytes))
                note_failure("doorbell for slot %zu: compiled chunk (%u bytes) not synced for "
                             "the device before it",
                             o / sizeof(d), d.size_in_bytes);
            continue;
        }
        if (!device_sees(tpu->instr_dma, (size_t)rel, d.size_in_bytes))
            note_failure("doorbell for slot %zu: instruction bytes [%llu, +%u) not synced for the "
                         "device before it",
                         o / sizeof(d), (unsigned long long)rel, d.size_in_bytes);
    }
    if (g_exe != NULL && g_exe->params_dma != NULL &&
        !device_sees(g_exe->params_dma, 0, g_exe->params_len))
        note_failure("doorbell: parameters (%zu bytes) not synced for the device before it",
                     g_exe->params_len);
    for (uint32_t i = 0; i < tpu->nr_l0; i++)
        if (tpu->l1[i].dma != NULL && !device_sees(tpu->l1[i].dma, 0, EDGETPU_L1_ENTRIES * 8u))
            note_failure("doorbell: level-1 page table %u written but not synced for the device",
                         i);
    if (g_bound != NULL)
        check_bound_io();
    doorbells_checked++;
}

static void ring_for_device(void *arg, struct npv_dma *dma, size_t off, size_t len)
{
    (void)arg;
    record(EV_RING_DEV, dma, off, len);
    /* The descriptor clean of npv_ring_submit: its doorbell comes next (lib/ring/ring.c). */
    if (g_tpu != NULL && dma == g_tpu->queue_dma && off < EDGETPU_PAGE_SIZE) {
        record(EV_DOORBELL, dma, off, len);
        check_doorbell(off, len);
    }
    __wrap_npv_dma_sync_for_device(dma, off, len);
}

static void ring_for_cpu(void *arg, struct npv_dma *dma, size_t off, size_t len)
{
    (void)arg;
    record(EV_RING_CPU, dma, off, len);
    __real_npv_dma_sync_for_cpu(dma, off, len);
}

static const struct npv_ring_sync_hook ring_hook = {.for_device = ring_for_device,
                                                    .for_cpu = ring_for_cpu};

static void open_watched(struct etpu *t)
{
    etpu_require_model("the non-coherence checks need the model's fault injection");
    etpu_open(t, NULL);
    g_tpu = t->tpu;
    g_exe = t->exe;
    failure[0] = '\0';
    doorbells_checked = 0;
    npv_ring_set_sync_hook(t->tpu->ring, &ring_hook);
}

static void close_watched(struct etpu *t)
{
    g_tpu = NULL;
    g_exe = NULL;
    etpu_close(t);
}

START_TEST(what_a_request_makes_the_chip_read_is_cleaned_before_its_doorbell)
{
    struct etpu t;
    open_watched(&t);
    /* More requests than ring slots: every slot's first use, and reuse. */
    uint32_t n = t.tpu->cfg.queue_entries + 2;
    for (uint32_t i = 0; i < n; i++) {
        bool exact = false;
        int r = etpu_run_check(&t, i, &exact);
        ck_assert_msg(r == 0 && exact, "request %u: %s", i, npv_strerror(r));
        ck_assert_msg(failure[0] == '\0', "request %u: %s", i, failure);
    }
    ck_assert_uint_eq(doorbells_checked, n);
    close_watched(&t);
}
END_TEST

START_TEST(page_tables_mapped_after_open_are_cleaned_before_the_chip_uses_them)
{
    struct etpu t;
    open_watched(&t);
    /* A new output buffer mapped now: fresh level-1 entries, used by the next request. */
    struct npv_dma *out2;
    uint64_t out2_va;
    ck_assert_int_eq(npv_dma_alloc(t.ctx, 1u << 20, NULL, &out2), 0);
    ck_assert_int_eq(npv_dma_map(out2, t.dom, NPV_DMA_RW, NULL), 0);
    ck_assert_int_eq(npv_edgetpu_map(t.tpu, out2, 0, 1u << 20, &out2_va), 0);
    ck_assert_int_eq(npv_edgetpu_unmap(t.tpu, out2_va, 1u << 20), 0);
    ck_assert_int_eq(
        npv_edgetpu_map(t.tpu, out2, (1u << 20) - 4096, EDGETPU_SAMPLE_OUTPUT_BYTES, &out2_va), 0);
    npv_dma_sync_for_device(out2, 0, 1u << 20);
    ck_assert_int_eq(npv_edgetpu_run(t.tpu, t.exe, &t.in_va, &out2_va), 0);
    ck_assert_msg(failure[0] == '\0', "%s", failure);
    ck_assert_uint_eq(doorbells_checked, 1);
    ck_assert_int_eq(npv_edgetpu_unmap(t.tpu, out2_va, EDGETPU_SAMPLE_OUTPUT_BYTES), 0);
    npv_dma_free(out2);
    close_watched(&t);
}
END_TEST

static bool covers_status_block(const struct ev *e, struct npv_dma *queue)
{
    return e->dma == queue && e->off <= EDGETPU_PAGE_SIZE &&
           e->off + e->len >= EDGETPU_PAGE_SIZE + sizeof(struct edgetpu_status_block);
}

START_TEST(the_status_block_is_invalidated_before_the_error_snapshot_reads_it)
{
    struct etpu t;
    open_watched(&t);
    size_t start = nr_events;
    etpu_fault(&t, EDGETPU_FAULT_AXI_ERROR);
    bool exact;
    ck_assert_int_eq(etpu_run_check(&t, 0, &exact), -EIO);
    struct npv_edgetpu_error e;
    npv_edgetpu_last_error(t.tpu, &e);
    ck_assert_uint_eq(e.hib_error_status, EDGETPU_HIB_ERR_AXI_SLAVE_B);
    /*
     * snapshot_error (driver.c): invalidate the status block, read it, then
     * read HIB_ERROR_STATUS, HIB_FIRST_ERROR_STATUS, ... (the wait path reads
     * HIB_ERROR_STATUS too, after FATAL_ERR_INT_STATUS: not this pair). The
     * invalidate must lie between the BAR read before the snapshot and the
     * snapshot's first one: after it, the status block was read stale.
     */
    size_t snap = SIZE_MAX, prev_read = start, inval = SIZE_MAX;
    for (size_t i = start; i < nr_events && snap == SIZE_MAX; i++) {
        if (events[i].kind != EV_BAR_READ)
            continue;
        size_t next = i + 1;
        while (next < nr_events && events[next].kind != EV_BAR_READ)
            next++;
        if (events[i].off == EDGETPU_HIB_ERROR_STATUS && next < nr_events &&
            events[next].off == EDGETPU_HIB_FIRST_ERROR_STATUS)
            snap = i;
        else
            prev_read = i;
    }
    ck_assert_msg(snap != SIZE_MAX, "the error snapshot's BAR reads were not seen");
    for (size_t i = prev_read; i < snap; i++)
        if (events[i].kind == EV_CPU && covers_status_block(&events[i], t.tpu->queue_dma))
            inval = i;
    ck_assert_msg(inval != SIZE_MAX,
                  "the status block was not synced for the CPU before the error snapshot read it");
    ck_assert_msg(failure[0] == '\0', "%s", failure);
    /* And the chip recovered with its page tables and instructions clean again. */
    ck_assert_int_eq(etpu_run_check(&t, 1, &exact), 0);
    ck_assert(exact);
    ck_assert_msg(failure[0] == '\0', "%s", failure);
    close_watched(&t);
}
END_TEST

#define SPLIT_CONCAT NPV_EDGETPU_DATA "/split_concat_edgetpu.tflite"

START_TEST(a_compiled_models_chunk_inputs_and_outputs_are_cleaned_before_its_doorbell)
{
    /* The model (started by open_watched) checks every run against the package. */
    setenv("NPV_EDGETPU_MODEL_PACKAGES", SPLIT_CONCAT, 1);
    struct etpu t;
    open_watched(&t);
    struct npv_edgetpu_model *m;
    char why[256] = "";
    ck_assert_msg(npv_edgetpu_model_load(t.ctx, SPLIT_CONCAT, &m, why, sizeof(why)) == 0, "%s",
                  why);
    struct npv_edgetpu_bound *b;
    ck_assert_int_eq(npv_edgetpu_model_bind(t.tpu, m, &b), 0);
    g_bound = b;
    unsigned doorbells = doorbells_checked;
    for (uint32_t n = 0; n < 4; n++) {
        size_t len;
        uint8_t *p;
        for (uint32_t i = 0; (p = npv_edgetpu_bound_input(b, i, NULL, &len)) != NULL; i++)
            memset(p, (int)(n * 16 + i), len);
        /* A fill the CPU writes: its lines are dirty until cleaned. */
        for (uint32_t i = 0; (p = npv_edgetpu_bound_output(b, i, NULL, &len)) != NULL; i++)
            memset(p, 0xcc, len);
        int r = npv_edgetpu_model_invoke(b, NULL, NULL);
        ck_assert_msg(r >= 0, "invoke %u: %s", n, npv_strerror(r));
        ck_assert_msg(failure[0] == '\0', "invoke %u: %s", n, failure);
        ck_assert_msg(io_at_doorbell[0] == '\0', "invoke %u: %s", n, io_at_doorbell);
        ck_assert_uint_eq(doorbells_checked, doorbells + 1 + (n == 0)); /* caching, then each */
        doorbells = doorbells_checked;
    }
    g_bound = NULL;
    npv_edgetpu_model_unbind(b);
    npv_edgetpu_model_unload(m);
    close_watched(&t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("edgetpu_noncoherent");
    TCase *tc = tcase_create("sync");
    tcase_add_test(tc, what_a_request_makes_the_chip_read_is_cleaned_before_its_doorbell);
    tcase_add_test(tc, page_tables_mapped_after_open_are_cleaned_before_the_chip_uses_them);
    tcase_add_test(tc, the_status_block_is_invalidated_before_the_error_snapshot_reads_it);
    tcase_add_test(tc, a_compiled_models_chunk_inputs_and_outputs_are_cleaned_before_its_doorbell);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* SPDX-License-Identifier: MIT */
/*
 * The Edge TPU's device MMU, driver side. Simple slots (BAR2 page table) hold
 * the queue memory; extended space (level-0 slots pointing at level-1 tables
 * of 512 entries in host memory, 2 MiB each) holds everything else, as
 * libedgetpu's DualAddressSpace does. Every entry is an IOVA of the device's
 * domain | valid, as gasket writes the DMA API's address (google/gasket-driver
 * src/gasket_page_table.c gasket_perform_mapping: dma_map_page's result |
 * GASKET_VALID_SLOT_FLAG): the chip's DMA goes through the IOMMU, so a host
 * physical or virtual address there would be a wild DMA, read or written
 * elsewhere with no error reported (as gasket's src/gasket_core.c says of
 * the DMA its dma_bit_mask parameter works around).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "driver_internal.h"

#define L1_BYTES (EDGETPU_L1_ENTRIES * 8u)

int edgetpu_mmu_init(struct npv_edgetpu *tpu)
{
    tpu->nr_l0 = EDGETPU_PAGE_TABLE_ENTRIES - tpu->cfg.simple_entries;
    tpu->ext_pages = (uint64_t)tpu->nr_l0 * EDGETPU_L1_ENTRIES;
    tpu->l1 = calloc(tpu->nr_l0, sizeof(*tpu->l1));
    tpu->ext_bitmap = calloc((size_t)(tpu->ext_pages + 63) / 64, sizeof(uint64_t));
    tpu->ext_hint = 0;
    if (tpu->l1 == NULL || tpu->ext_bitmap == NULL) {
        edgetpu_mmu_fini(tpu);
        return -ENOMEM;
    }
    return 0;
}

void edgetpu_mmu_fini(struct npv_edgetpu *tpu)
{
    for (uint32_t i = 0; tpu->l1 != NULL && i < tpu->nr_l0; i++) {
        if (tpu->l1[i].dma == NULL)
            continue;
        (void)npv_dma_unmap(tpu->l1[i].dma, tpu->dom);
        npv_dma_free(tpu->l1[i].dma);
    }
    free(tpu->l1);
    free(tpu->ext_bitmap);
    tpu->l1 = NULL;
    tpu->ext_bitmap = NULL;
}

int edgetpu_map_simple(struct npv_edgetpu *tpu, uint32_t slot, npv_iova_t iova)
{
    if (slot >= tpu->cfg.simple_entries || (iova & (EDGETPU_PAGE_SIZE - 1)))
        return -EINVAL;
    return edgetpu_write64(tpu, EDGETPU_PAGE_TABLE + 8ull * slot, iova | EDGETPU_PTE_VALID);
}

static int l0_program(struct npv_edgetpu *tpu, uint32_t l0)
{
    uint64_t slot = tpu->cfg.simple_entries + l0;
    return edgetpu_write64(tpu, EDGETPU_PAGE_TABLE + 8ull * slot,
                           tpu->l1[l0].iova | EDGETPU_PTE_VALID);
}

int edgetpu_mmu_clear(struct npv_edgetpu *tpu)
{
    /* gasket_page_table.c gasket_page_table_reset: every slot 0, then extended_table. */
    int r = 0;
    for (uint32_t slot = 0; r == 0 && slot < EDGETPU_PAGE_TABLE_ENTRIES; slot++)
        r = edgetpu_write64(tpu, EDGETPU_PAGE_TABLE + 8ull * slot, 0);
    if (r == 0)
        r = edgetpu_write64(tpu, EDGETPU_KHIB_EXTENDED_TABLE, EDGETPU_PAGE_TABLE_ENTRIES);
    return r;
}

int edgetpu_mmu_program(struct npv_edgetpu *tpu)
{
    uint32_t ring_slot = (uint32_t)(tpu->ring_va >> EDGETPU_PAGE_SHIFT);
    int r = edgetpu_map_simple(tpu, ring_slot, tpu->queue_iova);
    if (r == 0)
        r = edgetpu_map_simple(tpu, ring_slot + 1, tpu->queue_iova + EDGETPU_PAGE_SIZE);
    for (uint32_t i = 0; r == 0 && i < tpu->nr_l0; i++)
        if (tpu->l1[i].dma != NULL)
            r = l0_program(tpu, i);
    return r;
}

/* A level-1 table for level-0 index l0, created on first use (below 4 GiB of IOVA). */
static int l1_get(struct npv_edgetpu *tpu, uint32_t l0)
{
    struct edgetpu_l1 *t = &tpu->l1[l0];
    if (t->dma != NULL)
        return 0;
    struct npv_dma_opts o = {.page = NPV_DMA_PAGE_4K, .numa_node = -1};
    int r = npv_dma_alloc(tpu->ctx, L1_BYTES, &o, &t->dma);
    if (r < 0)
        return r;
    memset(npv_dma_vaddr(t->dma), 0, L1_BYTES);
    r = npv_dma_map(t->dma, tpu->dom, NPV_DMA_READ, &t->iova);
    if (r == 0 && t->iova + L1_BYTES > FOUR_GIB)
        r = -ERANGE;
    if (r == 0)
        r = l0_program(tpu, l0);
    if (r < 0) {
        (void)npv_dma_unmap(t->dma, tpu->dom);
        npv_dma_free(t->dma);
        t->dma = NULL;
        t->iova = 0;
    }
    return r;
}

static bool page_used(const struct npv_edgetpu *tpu, uint64_t p)
{
    return (tpu->ext_bitmap[p / 64] >> (p % 64)) & 1;
}

static void page_set(struct npv_edgetpu *tpu, uint64_t p, bool used)
{
    if (used)
        tpu->ext_bitmap[p / 64] |= 1ull << (p % 64);
    else
        tpu->ext_bitmap[p / 64] &= ~(1ull << (p % 64));
}

/* n free contiguous pages, next-fit from the hint. -ENOSPC. */
static int pages_alloc(struct npv_edgetpu *tpu, uint64_t n, uint64_t *first)
{
    uint64_t total = tpu->ext_pages;
    if (n == 0 || n > total)
        return -ENOSPC;
    for (int pass = 0; pass < 2; pass++) {
        uint64_t p = pass == 0 ? tpu->ext_hint : 0;
        uint64_t end = pass == 0 ? total : tpu->ext_hint + n;
        while (p + n <= total && p < end) {
            uint64_t run = 0;
            while (run < n && !page_used(tpu, p + run))
                run++;
            if (run == n) {
                *first = p;
                tpu->ext_hint = p + n;
                return 0;
            }
            p += run + 1;
        }
    }
    return -ENOSPC;
}

static uint64_t *l1_entries(struct npv_edgetpu *tpu, uint32_t l0)
{
    return npv_dma_vaddr(tpu->l1[l0].dma);
}

static void l1_sync(struct npv_edgetpu *tpu, uint64_t first, uint64_t n)
{
    for (uint64_t q = first; q < first + n; q = (q / EDGETPU_L1_ENTRIES + 1) * EDGETPU_L1_ENTRIES)
        npv_dma_sync_for_device(tpu->l1[q / EDGETPU_L1_ENTRIES].dma, 0, L1_BYTES);
    /* The entries are in memory before any doorbell that makes the chip use them. */
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

int edgetpu_map_iova(struct npv_edgetpu *tpu, npv_iova_t iova, size_t len, uint64_t *va)
{
    uint64_t page0 = iova & ~(uint64_t)(EDGETPU_PAGE_SIZE - 1);
    uint64_t n =
        ((iova & (EDGETPU_PAGE_SIZE - 1)) + len + EDGETPU_PAGE_SIZE - 1) >> EDGETPU_PAGE_SHIFT;
    uint64_t first;
    if (len == 0)
        return -EINVAL;
    int r = pages_alloc(tpu, n, &first);
    if (r < 0)
        return r;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t q = first + i;
        uint32_t l0 = (uint32_t)(q / EDGETPU_L1_ENTRIES);
        r = l1_get(tpu, l0);
        if (r < 0) {
            for (uint64_t k = 0; k < i; k++) {
                uint64_t u = first + k;
                l1_entries(tpu, (uint32_t)(u / EDGETPU_L1_ENTRIES))[u % EDGETPU_L1_ENTRIES] = 0;
                tpu->l1[u / EDGETPU_L1_ENTRIES].used--;
                page_set(tpu, u, false);
            }
            return r;
        }
        l1_entries(tpu, l0)[q % EDGETPU_L1_ENTRIES] =
            (page0 + i * EDGETPU_PAGE_SIZE) | EDGETPU_PTE_VALID;
        tpu->l1[l0].used++;
        page_set(tpu, q, true);
    }
    l1_sync(tpu, first, n);
    *va = EDGETPU_VA_EXTENDED | first << EDGETPU_PAGE_SHIFT | (iova & (EDGETPU_PAGE_SIZE - 1));
    return 0;
}

int npv_edgetpu_map(struct npv_edgetpu *tpu, struct npv_dma *dma, size_t off, size_t len,
                    uint64_t *device_va)
{
    npv_iova_t iova;
    if (dma == NULL || device_va == NULL || off > npv_dma_size(dma) ||
        len > npv_dma_size(dma) - off)
        return -EINVAL;
    int r = npv_dma_iova(dma, tpu->dom, &iova);
    if (r < 0)
        return -ENOENT;
    return edgetpu_map_iova(tpu, iova + off, len, device_va);
}

int npv_edgetpu_unmap(struct npv_edgetpu *tpu, uint64_t device_va, size_t len)
{
    if (!(device_va & EDGETPU_VA_EXTENDED) || len == 0)
        return -EINVAL;
    uint64_t first = (device_va & ~EDGETPU_VA_EXTENDED) >> EDGETPU_PAGE_SHIFT;
    uint64_t n =
        ((device_va & (EDGETPU_PAGE_SIZE - 1)) + len + EDGETPU_PAGE_SIZE - 1) >> EDGETPU_PAGE_SHIFT;
    if (first > tpu->ext_pages || n > tpu->ext_pages - first)
        return -EINVAL;
    for (uint64_t i = 0; i < n; i++)
        if (!page_used(tpu, first + i))
            return -EINVAL;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t q = first + i;
        l1_entries(tpu, (uint32_t)(q / EDGETPU_L1_ENTRIES))[q % EDGETPU_L1_ENTRIES] = 0;
        tpu->l1[q / EDGETPU_L1_ENTRIES].used--;
        page_set(tpu, q, false);
    }
    l1_sync(tpu, first, n);
    return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * The Ctrl and Pmu register-address tables: device constants, one per
 * context (the per-context lifetime the part's runtime settled on in
 * hw-native-sys/simpler PR #2277: DeviceRunnerBase::ensure_aicore_reg_table
 * in src/common/platform/onboard/host/device_runner_base.h,
 * init_aicore_register_addresses in host_regs.cpp). Reuse keys on the
 * committed flag, release on the address: an upload that failed and whose
 * rollback free failed too leaves a block we still own, which the next
 * ensure fills and close frees.
 */
#include <errno.h>
#include <string.h>

#include "driver_internal.h"

/* Entry i: the device address of sub-core i's window, 0 where no sub-core can use it. */
void aicore_table_build(struct npv_aicore *ac, struct aicore_table *t, uint64_t reg_base)
{
    size_t len = (size_t)ac->topo.nr_cores * AICORE_TABLE_ENTRY_SIZE;
    bool changed = len != t->len;
    for (uint32_t i = 0; i < ac->topo.nr_cores; i++) {
        uint64_t e = aicore_core_usable(ac, i) ? reg_base + (uint64_t)i * ac->stride : 0;
        changed |= t->host[i] != e;
        t->host[i] = e;
    }
    if (!changed)
        return;
    t->len = len;
    /* The device holds the old image: upload the new one into the block already owned. */
    t->committed = false;
}

int aicore_table_ensure(struct npv_aicore *ac, struct aicore_table *t)
{
    if (t->committed)
        return 0;
    if (!t->owned) {
        /* Sized for the largest topology, so a new image always fits the block. */
        int r = ac->ops->alloc(ac, ac->ops->arg,
                               (size_t)AICORE_MAX_SUBCORES * AICORE_TABLE_ENTRY_SIZE, &t->addr);
        if (r < 0)
            return r;
        t->owned = true;
    }
    t->uploads++;
    /*
     * The copy engine reads the image by DMA: out of the CPU's caches first on
     * a non-coherent host, the DMA API's rule for memory a device reads
     * (npv_dma_sync_for_device, dma.h; a no-op where DMA is coherent).
     */
    npv_dma_sync_for_device(
        ac->staging, (size_t)((uint8_t *)t->host - (uint8_t *)npv_dma_vaddr(ac->staging)), t->len);
    int r = ac->ops->copy_h2d(ac, ac->ops->arg, t->addr, t->host_iova, t->len);
    if (r == 0) {
        t->committed = true;
        t->commits++;
        return 0;
    }
    /* Roll back; a failed free keeps the block ours (owned, not committed) for the next try. */
    if (ac->ops->free(ac, ac->ops->arg, t->addr) == 0) {
        t->owned = false;
        t->addr = 0;
    }
    return r;
}

/*
 * Where the Pmu registers are in the Ctrl window (the newer part), the Pmu
 * table's entries are the Ctrl table's: the Ctrl table serves both, and no
 * second, identical table is uploaded (the duplication simpler's PR #2277
 * removed: "PMU-gated, not per-run varying").
 */
struct aicore_table *aicore_pmu_table_of(struct npv_aicore *ac)
{
    return ac->pmu_in_ctrl ? &ac->ctrl_table : &ac->pmu_table;
}

int aicore_tables_ensure(struct npv_aicore *ac, bool pmu)
{
    int r = aicore_table_ensure(ac, &ac->ctrl_table);
    if (r == 0 && pmu)
        r = aicore_table_ensure(ac, aicore_pmu_table_of(ac));
    return r;
}

void aicore_table_release(struct npv_aicore *ac, struct aicore_table *t)
{
    if (t->owned && ac->ops->free(ac, ac->ops->arg, t->addr) == 0) {
        t->owned = false;
        t->addr = 0;
    }
    t->committed = false;
}

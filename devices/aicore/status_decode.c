/* SPDX-License-Identifier: MIT */
/*
 * Everything here is device-written and untrusted: a shape the driver's
 * tables cannot hold, a record that names another run, sub-core or rank, or
 * an OK whose counts do not match what the host saw is an error, never a
 * success.
 */
#include <errno.h>
#include <string.h>

#include "driver_internal.h"
#include "status_decode.h"

static bool bit_set(const uint64_t *map, uint32_t i)
{
    return (map[i / 64] >> (i % 64)) & 1u;
}

bool aicore_topology_usable(const struct npv_aicore_topology *t, uint32_t phys)
{
    return phys < t->nr_cores && bit_set(t->present, phys) && bit_set(t->powered, phys);
}

int aicore_decode_topology(const struct aicore_topology_regs *regs, struct aicore_shape *out)
{
    if (regs->id != AICORE_ID_VALUE)
        return -ENODEV;
    struct npv_aicore_topology t = {0};
    uint64_t caps = regs->caps;
    t.clusters = AICORE_CAPS_CLUSTERS(caps);
    t.aic_per_cluster = AICORE_CAPS_AIC_PER_CLUSTER(caps);
    t.aiv_per_cluster = AICORE_CAPS_AIV_PER_CLUSTER(caps);
    t.pmu_counters = AICORE_CAPS_PMU_COUNTERS(caps);
    t.pmu_aliased = (caps & AICORE_CAPS_PMU_IN_CTRL) != 0;
    t.device_memory = regs->devmem_size;
    /* Physical ids follow the a2a3 table order, which assumes 1C2V clusters. */
    if (t.clusters == 0 || t.clusters > AICORE_MAX_CLUSTERS ||
        t.aic_per_cluster != AICORE_AIC_PER_CLUSTER ||
        t.aiv_per_cluster != AICORE_AIV_PER_CLUSTER || t.pmu_counters < AICORE_PMU_COUNTERS)
        return -EPROTO;
    t.nr_cores = t.clusters * AICORE_SUBCORES_PER_CLUSTER;
    if (regs->stride < AICORE_WINDOW_STRIDE || regs->stride > AICORE_CTRL_BAR_SIZE / t.nr_cores ||
        regs->ctrl_reg_base == 0 || (!t.pmu_aliased && regs->pmu_reg_base == 0))
        return -EPROTO;
    /*
     * Device memory is only ever named by address (the host cannot map it): a range that is
     * empty, wraps, or starts off the allocator's alignment would have it hand out blocks
     * outside the device's memory.
     */
    if (regs->devmem_size == 0 || regs->devmem_base % AICORE_DEVMEM_ALIGN != 0 ||
        regs->devmem_size > UINT64_MAX - regs->devmem_base)
        return -EPROTO;
    t.present[0] = regs->present[0];
    t.present[1] = regs->present[1];
    t.powered[0] = regs->powered[0];
    t.powered[1] = regs->powered[1];
    for (uint32_t i = 0; i < t.nr_cores; i++)
        if (aicore_topology_usable(&t, i)) {
            /* Ranks: AICs by id, then AIVs by id, which is id order (regs.h). */
            out->phys_rank[i] = t.nr_usable;
            out->rank_phys[t.nr_usable++] = i;
        }
    out->topo = t;
    out->stride = regs->stride;
    out->ctrl_reg_base = regs->ctrl_reg_base;
    out->pmu_reg_base = regs->pmu_reg_base;
    out->devmem_base = regs->devmem_base;
    return 0;
}

int aicore_decode_ready(uint32_t done, uint32_t phys, uint32_t type, uint32_t rank,
                        uint32_t want_phys, uint32_t clusters)
{
    if (done == 0)
        return 0;
    if (done != rank + 1 || phys != want_phys || type != aicore_core_type(clusters, want_phys))
        return -EPROTO;
    return 1;
}

int aicore_decode_record(const struct aicore_result *rec, uint64_t epoch, uint32_t nr_tasks,
                         uint32_t nr_cores, uint32_t host_tasks_done, bool all_exited)
{
    if (rec->epoch != epoch)
        return -EINPROGRESS; /* stale: a previous run's, or none yet */
    if (rec->verdict == AICORE_VERDICT_ERROR)
        return -EIO;
    if (rec->verdict == AICORE_VERDICT_OK && !all_exited)
        return -EINPROGRESS; /* the host has not seen every EXITED yet: it checks, not trusts */
    if (rec->verdict != AICORE_VERDICT_OK || rec->tasks_done != nr_tasks ||
        rec->cores_exited != nr_cores || host_tasks_done != nr_tasks)
        return -EPROTO; /* an OK that does not add up is no success */
    return 0;
}

int aicore_decode_launch_status(uint64_t status)
{
    if (status == AICORE_LAUNCH_ACCEPTED)
        return 0;
    return status == AICORE_LAUNCH_REFUSED_BUSY ? -EBUSY : -EIO;
}

bool aicore_copy_finished(uint64_t done_before, uint64_t done)
{
    return done != done_before;
}

int aicore_decode_copy_status(uint64_t status)
{
    return status == AICORE_COPY_DONE ? 0 : -EIO;
}

int aicore_decode_reset(uint64_t status, uint64_t global_err)
{
    if (status == ~0ull)
        return -ENODEV;
    if ((status & (AICORE_STATUS_RUNNING | AICORE_STATUS_POISONED)) == 0 && global_err == 0)
        return 0;
    return 1;
}

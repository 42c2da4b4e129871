/* SPDX-License-Identifier: MIT */
/*
 * The AICore driver's reading of the global registers that describe the
 * device, at open and after every reset (aicore_decode_topology, called by
 * read_topology in devices/aicore/driver.c): ID, CAPS, WINDOW_STRIDE, the
 * Ctrl/Pmu register-table bases, device memory, and the PRESENT/POWER_ON
 * bitmaps. The input is the eleven 64-bit registers in that order (missing
 * bytes read 0); byte 0 bit 0 of a short input forces the right ID.
 * Aborts when an accepted shape does not fit the driver's tables (sub-core
 * count, windows inside the Ctrl BAR, a zero table base, device memory that
 * is empty, unaligned or wraps past 2^64), when a rank names
 * a sub-core that is not present and powered or the two rank tables
 * disagree, or when a refused shape changed what the driver keeps.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#include "regs.h"
#include "status_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool bit(const uint64_t *map, uint32_t i)
{
    return (map[i / 64] >> (i % 64)) & 1u;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t v[11] = {0};
    memcpy(v, data, size < sizeof(v) ? size : sizeof(v));
    if (size < sizeof(v) && size > 0 && (data[0] & 1))
        v[0] = AICORE_ID_VALUE;
    const struct aicore_topology_regs regs = {
        .id = v[0],
        .caps = v[1],
        .stride = v[2],
        .ctrl_reg_base = v[3],
        .pmu_reg_base = v[4],
        .devmem_base = v[5],
        .devmem_size = v[6],
        .present = {v[7], v[8]},
        .powered = {v[9], v[10]},
    };
    struct aicore_shape shape, before;
    memset(&shape, 0xa5, sizeof(shape));
    before = shape;
    int r = aicore_decode_topology(&regs, &shape);
    require(r == 0 || r == -ENODEV || r == -EPROTO, "undocumented answer", r);
    if (regs.id != AICORE_ID_VALUE)
        require(r == -ENODEV, "a foreign or absent device accepted", regs.id);
    if (r < 0) {
        require(memcmp(&shape, &before, sizeof(shape)) == 0, "a refused shape was kept", 0);
        return 0;
    }
    const struct npv_aicore_topology *t = &shape.topo;
    require(t->clusters >= 1 && t->clusters <= AICORE_MAX_CLUSTERS, "cluster count", t->clusters);
    require(t->nr_cores == t->clusters * AICORE_SUBCORES_PER_CLUSTER &&
                t->nr_cores <= AICORE_MAX_SUBCORES,
            "sub-core count", t->nr_cores);
    require(t->aic_per_cluster == AICORE_AIC_PER_CLUSTER &&
                t->aiv_per_cluster == AICORE_AIV_PER_CLUSTER,
            "a cluster shape the id tables do not follow", regs.caps);
    require(t->pmu_counters >= AICORE_PMU_COUNTERS, "too few PMU counters", t->pmu_counters);
    require(shape.stride >= AICORE_WINDOW_STRIDE &&
                shape.stride * t->nr_cores <= AICORE_CTRL_BAR_SIZE,
            "a Ctrl window outside the BAR", shape.stride);
    require(shape.ctrl_reg_base != 0 && (t->pmu_aliased || shape.pmu_reg_base != 0),
            "a zero register-table base", shape.ctrl_reg_base);
    require(t->device_memory != 0 && shape.devmem_base % 64u == 0 &&
                t->device_memory <= UINT64_MAX - shape.devmem_base,
            "device memory that is empty, unaligned or wraps", shape.devmem_base);
    require(t->nr_usable <= t->nr_cores, "more usable sub-cores than sub-cores", t->nr_usable);
    uint32_t usable = 0;
    for (uint32_t i = 0; i < t->nr_cores; i++)
        usable += bit(regs.present, i) && bit(regs.powered, i);
    require(usable == t->nr_usable, "usable count differs from the bitmaps", t->nr_usable);
    for (uint32_t rank = 0; rank < t->nr_usable; rank++) {
        uint32_t p = shape.rank_phys[rank];
        require(p < t->nr_cores, "a rank beyond the sub-cores", p);
        require(bit(regs.present, p) && bit(regs.powered, p), "a rank on an unusable sub-core", p);
        require(rank == 0 || p > shape.rank_phys[rank - 1], "ranks out of id order", p);
        require(shape.phys_rank[p] == rank, "rank tables disagree", p);
        require(aicore_topology_usable(t, p), "usable test disagrees", p);
    }
    for (uint32_t i = t->nr_cores; i < AICORE_MAX_SUBCORES; i++)
        require(!aicore_topology_usable(t, i), "a sub-core beyond the count is usable", i);
    return 0;
}

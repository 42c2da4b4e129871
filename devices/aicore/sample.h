/* SPDX-License-Identifier: MIT */
/*
 * The AICore sample graph and its CPU reference. Per cluster, on the
 * sub-cores that are present and powered: x = a + b on the first AIV,
 * y = x + d on the second (after the first), z = x * y (16 x 16 matmul) on
 * the AIC (after both); a missing AIV's output is replaced by its input, so
 * every cluster with any usable sub-core works. fp32 in the same operation
 * order as the device (no fused multiply-add), so the check is bit-exact.
 */
#ifndef NPV_AICORE_SAMPLE_H
#define NPV_AICORE_SAMPLE_H

#include <stdint.h>
#include <npuvfio/aicore.h>
#include <npuvfio/dma.h>

#define AICORE_SAMPLE_DIM          16u
#define AICORE_SAMPLE_ELEMS        (AICORE_SAMPLE_DIM * AICORE_SAMPLE_DIM)
#define AICORE_SAMPLE_MAX_CLUSTERS (NPV_AICORE_MAX_CORES / 3u)

/* One cluster's operands, in DMA memory. */
enum { SAMPLE_A, SAMPLE_B, SAMPLE_D, SAMPLE_X, SAMPLE_Y, SAMPLE_Z, SAMPLE_BUFFERS };

struct aicore_sample_graph {
    struct npv_dma *dma;
    npv_iova_t iova;
    float *mem;  /* [clusters][SAMPLE_BUFFERS][AICORE_SAMPLE_ELEMS] */
    bool caller; /* dma is the caller's (aicore_sample_build_in): unmapped, not freed */
    uint32_t clusters;
    int32_t task_x[AICORE_SAMPLE_MAX_CLUSTERS], task_y[AICORE_SAMPLE_MAX_CLUSTERS],
        task_z[AICORE_SAMPLE_MAX_CLUSTERS]; /* task index, -1 for none */
    struct npv_aicore_task tasks[3 * AICORE_SAMPLE_MAX_CLUSTERS];
    struct npv_aicore_run_desc desc;
};

/*
 * Allocate and map the operands, build the graph for ac's topology. PMU on
 * with events 1..8 when pmu. 0, -ENOMEM, the mapping's errno; -ENXIO when no
 * sub-core is usable.
 */
int aicore_sample_build(struct npv_aicore *ac, bool pmu, struct aicore_sample_graph *g);
/*
 * The same in the caller's dma (at least aicore_sample_len bytes, else
 * -EINVAL), mapped with npv_aicore_mem_map; aicore_sample_free unmaps it
 * (npv_aicore_mem_unmap: while a run names it, nothing is freed and g stays
 * as it is) and leaves dma to the caller.
 */
int aicore_sample_build_in(struct npv_aicore *ac, bool pmu, struct npv_dma *dma,
                           struct aicore_sample_graph *g);
size_t aicore_sample_len(struct npv_aicore *ac);
void aicore_sample_free(struct npv_aicore *ac, struct aicore_sample_graph *g);
/*
 * Fresh inputs for seed; the outputs poisoned so a stale one cannot pass; all
 * synced for the device (npv_dma_sync_for_device: a non-coherent host).
 */
void aicore_sample_fill(struct aicore_sample_graph *g, uint32_t seed);
/* Bytes of the outputs that differ from the CPU reference, read after npv_dma_sync_for_cpu. */
uint64_t aicore_sample_check(const struct aicore_sample_graph *g);
/* Bytes the device writes per run. */
uint64_t aicore_sample_bytes(const struct aicore_sample_graph *g);

#endif

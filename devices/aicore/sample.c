/* SPDX-License-Identifier: MIT */
/* The AICore sample graph (sample.h) and its CPU reference. Built with -ffp-contract=off. */
#include <errno.h>
#include <string.h>

#include <npuvfio/dev.h>

#include "regs.h"
#include "sample.h"

#define BUF_BYTES (AICORE_SAMPLE_ELEMS * sizeof(float))

static float *buf(const struct aicore_sample_graph *g, uint32_t cluster, unsigned which)
{
    return g->mem + ((size_t)cluster * SAMPLE_BUFFERS + which) * AICORE_SAMPLE_ELEMS;
}

static npv_iova_t buf_iova(const struct aicore_sample_graph *g, uint32_t cluster, unsigned which)
{
    return g->iova + ((uint64_t)cluster * SAMPLE_BUFFERS + which) * BUF_BYTES;
}

static int32_t add_task(struct aicore_sample_graph *g, const struct npv_aicore_task *t)
{
    g->tasks[g->desc.nr_tasks] = *t;
    return (int32_t)g->desc.nr_tasks++;
}

static void build_cluster(struct aicore_sample_graph *g, const struct npv_aicore_topology *t,
                          uint32_t c)
{
    uint32_t aiv[2], nr_aiv = 0;
    for (uint32_t j = 0; j < AICORE_AIV_PER_CLUSTER; j++)
        if (npv_aicore_core_usable(t, npv_aicore_phys_aiv(t->clusters, c, j)))
            aiv[nr_aiv++] = npv_aicore_phys_aiv(t->clusters, c, j);
    g->task_x[c] = g->task_y[c] = g->task_z[c] = -1;
    npv_iova_t x = buf_iova(g, c, SAMPLE_A), y = buf_iova(g, c, SAMPLE_B);
    uint32_t last = NPV_AICORE_NO_DEP;
    if (nr_aiv >= 1) {
        g->task_x[c] = add_task(g, &(struct npv_aicore_task){.op = NPV_AICORE_OP_VADD,
                                                             .core = aiv[0],
                                                             .n = AICORE_SAMPLE_ELEMS,
                                                             .dep = NPV_AICORE_NO_DEP,
                                                             .a = buf_iova(g, c, SAMPLE_A),
                                                             .b = buf_iova(g, c, SAMPLE_B),
                                                             .c = buf_iova(g, c, SAMPLE_X)});
        x = buf_iova(g, c, SAMPLE_X);
        last = (uint32_t)g->task_x[c];
    }
    if (nr_aiv == 2) {
        g->task_y[c] = add_task(g, &(struct npv_aicore_task){.op = NPV_AICORE_OP_VADD,
                                                             .core = aiv[1],
                                                             .n = AICORE_SAMPLE_ELEMS,
                                                             .dep = last,
                                                             .a = x,
                                                             .b = buf_iova(g, c, SAMPLE_D),
                                                             .c = buf_iova(g, c, SAMPLE_Y)});
        y = buf_iova(g, c, SAMPLE_Y);
        last = (uint32_t)g->task_y[c];
    }
    uint32_t aic = npv_aicore_phys_aic(t->clusters, c);
    if (npv_aicore_core_usable(t, aic))
        g->task_z[c] = add_task(g, &(struct npv_aicore_task){.op = NPV_AICORE_OP_MATMUL,
                                                             .core = aic,
                                                             .m = AICORE_SAMPLE_DIM,
                                                             .n = AICORE_SAMPLE_DIM,
                                                             .k = AICORE_SAMPLE_DIM,
                                                             .dep = last,
                                                             .a = x,
                                                             .b = y,
                                                             .c = buf_iova(g, c, SAMPLE_Z)});
}

size_t aicore_sample_len(struct npv_aicore *ac)
{
    struct npv_aicore_topology t;
    npv_aicore_topology(ac, &t);
    return (size_t)t.clusters * SAMPLE_BUFFERS * BUF_BYTES;
}

static int sample_build(struct npv_aicore *ac, bool pmu, struct npv_dma *caller,
                        struct aicore_sample_graph *g)
{
    struct npv_aicore_topology t;
    npv_aicore_topology(ac, &t);
    memset(g, 0, sizeof(*g));
    if (t.nr_usable == 0 || t.clusters > AICORE_SAMPLE_MAX_CLUSTERS)
        return -ENXIO;
    struct npv_dev *dev = npv_aicore_dev(ac);
    g->clusters = t.clusters;
    size_t len = (size_t)t.clusters * SAMPLE_BUFFERS * BUF_BYTES;
    int r;
    if (caller != NULL) {
        if (npv_dma_size(caller) < len)
            return -EINVAL;
        r = npv_aicore_mem_map(ac, caller, NPV_DMA_RW, &g->iova);
        if (r < 0)
            return r;
        g->dma = caller;
        g->caller = true;
    } else {
        r = npv_dma_alloc(npv_dev_ctx(dev), len, NULL, &g->dma);
        if (r == 0)
            r = npv_dma_map(g->dma, npv_dev_domain(dev), NPV_DMA_RW, &g->iova);
        if (r < 0) {
            aicore_sample_free(ac, g);
            return r;
        }
    }
    g->mem = npv_dma_vaddr(g->dma);
    for (uint32_t c = 0; c < t.clusters; c++)
        build_cluster(g, &t, c);
    g->desc.tasks = g->tasks;
    g->desc.pmu = pmu;
    for (uint32_t i = 0; i < NPV_AICORE_PMU_EVENTS; i++)
        g->desc.pmu_events[i] = i + 1;
    return 0;
}

int aicore_sample_build(struct npv_aicore *ac, bool pmu, struct aicore_sample_graph *g)
{
    return sample_build(ac, pmu, NULL, g);
}

int aicore_sample_build_in(struct npv_aicore *ac, bool pmu, struct npv_dma *dma,
                           struct aicore_sample_graph *g)
{
    if (dma == NULL)
        return -EINVAL;
    return sample_build(ac, pmu, dma, g);
}

void aicore_sample_free(struct npv_aicore *ac, struct aicore_sample_graph *g)
{
    if (g->dma != NULL && g->caller) {
        int r = npv_aicore_mem_unmap(ac, g->dma);
        if (r < 0)
            return; /* a run still names it: the caller frees again once it is over */
    } else if (g->dma != NULL) {
        (void)npv_dma_unmap(g->dma, npv_dev_domain(npv_aicore_dev(ac)));
        npv_dma_free(g->dma);
    }
    g->dma = NULL;
    g->mem = NULL;
}

/* Small integers over powers of two: exact in fp32, but sums and products that round. */
static float input(uint32_t seed, uint32_t cluster, unsigned which, uint32_t i)
{
    uint32_t h = seed * 2654435761u ^ (cluster * 40503u + which * 9973u + i * 2246822519u);
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    return (float)((int32_t)(h % 2001u) - 1000) / (float)(1u << (h % 7u));
}

void aicore_sample_fill(struct aicore_sample_graph *g, uint32_t seed)
{
    for (uint32_t c = 0; c < g->clusters; c++) {
        static const unsigned inputs[] = {SAMPLE_A, SAMPLE_B, SAMPLE_D};
        for (size_t k = 0; k < 3; k++)
            for (uint32_t i = 0; i < AICORE_SAMPLE_ELEMS; i++)
                buf(g, c, inputs[k])[i] = input(seed, c, inputs[k], i);
        for (unsigned o = SAMPLE_X; o <= SAMPLE_Z; o++)
            memset(buf(g, c, o), 0xff, BUF_BYTES); /* NaN: a result never written cannot match */
    }
    /*
     * Inputs and the NaN fills out of the CPU's caches before the device reads
     * or writes them (a non-coherent host; a no-op where DMA is coherent).
     */
    npv_dma_sync_for_device(g->dma, 0, npv_dma_size(g->dma));
}

static void vadd(const float *a, const float *b, float *c)
{
    for (uint32_t i = 0; i < AICORE_SAMPLE_ELEMS; i++)
        c[i] = a[i] + b[i];
}

/* regs.h: accumulate from 0.0f over p = 0, 1, ..., a separate multiply and add. */
static void matmul(const float *a, const float *b, float *c)
{
    const uint32_t d = AICORE_SAMPLE_DIM;
    for (uint32_t i = 0; i < d; i++)
        for (uint32_t j = 0; j < d; j++) {
            float acc = 0.0f;
            for (uint32_t p = 0; p < d; p++) {
                float prod = a[i * d + p] * b[p * d + j];
                acc = acc + prod;
            }
            c[i * d + j] = acc;
        }
}

static uint64_t diff_bytes(const float *got, const float *want)
{
    const uint8_t *x = (const uint8_t *)got, *y = (const uint8_t *)want;
    uint64_t n = 0;
    for (size_t i = 0; i < BUF_BYTES; i++)
        n += x[i] != y[i];
    return n;
}

uint64_t aicore_sample_check(const struct aicore_sample_graph *g)
{
    float x[AICORE_SAMPLE_ELEMS], y[AICORE_SAMPLE_ELEMS], z[AICORE_SAMPLE_ELEMS];
    uint64_t bad = 0;
    /* The device's writes, past any line the CPU still caches. */
    npv_dma_sync_for_cpu(g->dma, 0, npv_dma_size(g->dma));
    for (uint32_t c = 0; c < g->clusters; c++) {
        const float *px = buf(g, c, SAMPLE_A), *py = buf(g, c, SAMPLE_B);
        if (g->task_x[c] >= 0) {
            vadd(buf(g, c, SAMPLE_A), buf(g, c, SAMPLE_B), x);
            bad += diff_bytes(buf(g, c, SAMPLE_X), x);
            px = x;
        }
        if (g->task_y[c] >= 0) {
            vadd(px, buf(g, c, SAMPLE_D), y);
            bad += diff_bytes(buf(g, c, SAMPLE_Y), y);
            py = y;
        }
        if (g->task_z[c] >= 0) {
            matmul(px, py, z);
            bad += diff_bytes(buf(g, c, SAMPLE_Z), z);
        }
    }
    return bad;
}

uint64_t aicore_sample_bytes(const struct aicore_sample_graph *g)
{
    return (uint64_t)g->desc.nr_tasks * BUF_BYTES;
}

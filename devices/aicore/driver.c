/* SPDX-License-Identifier: MIT */
/*
 * The AICore driver's device context: open, reset, close, topology, register
 * access. The host plays the on-chip scheduler (../shared/hw/aicore.md
 * sections 2-4), so the context owns what the part's runtime keeps per
 * device: the device-memory allocator and the Ctrl/Pmu register tables.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver_internal.h"

#define DEFAULT_TIMEOUT_NS 1000000000ull
#define DEFAULT_MAX_TASKS  1024u
#define MAX_TASKS_LIMIT    (1u << 20)

uint64_t aicore_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Bitmaps may read all-ones; ID and STATUS tell a device off the bus. */
int aicore_global_read(struct npv_aicore *ac, uint64_t off, uint64_t *v)
{
    return npv_bar_read(ac->global, off, 8, v);
}

int aicore_global_write(struct npv_aicore *ac, uint64_t off, uint64_t v)
{
    return npv_bar_write(ac->global, off, 8, v);
}

int aicore_ctrl_read(struct npv_aicore *ac, uint32_t phys, uint32_t off, uint32_t *v)
{
    uint64_t x;
    int r = npv_bar_read(ac->ctrl, phys * ac->stride + off, 4, &x);
    *v = (uint32_t)x;
    return r;
}

int aicore_ctrl_write(struct npv_aicore *ac, uint32_t phys, uint32_t off, uint32_t v)
{
    return npv_bar_write(ac->ctrl, phys * ac->stride + off, 4, v);
}

/* The newer part keeps the Pmu registers in the Ctrl window (CAPS.PMU_IN_CTRL). */
int aicore_pmu_read(struct npv_aicore *ac, uint32_t phys, uint32_t off, uint32_t *v)
{
    uint64_t x;
    int r = npv_bar_read(ac->pmu_in_ctrl ? ac->ctrl : ac->pmu_bar, phys * ac->stride + off, 4, &x);
    *v = (uint32_t)x;
    return r;
}

int aicore_pmu_write(struct npv_aicore *ac, uint32_t phys, uint32_t off, uint32_t v)
{
    return npv_bar_write(ac->pmu_in_ctrl ? ac->ctrl : ac->pmu_bar, phys * ac->stride + off, 4, v);
}

static bool bit_set(const uint64_t *map, uint32_t i)
{
    return (map[i / 64] >> (i % 64)) & 1u;
}

bool aicore_core_usable(const struct npv_aicore *ac, uint32_t phys)
{
    return phys < ac->topo.nr_cores && bit_set(ac->topo.present, phys) &&
           bit_set(ac->topo.powered, phys);
}

/* Identity, shape, bitmaps and addresses; a shape the driver cannot hold is -EPROTO. */
static int read_topology(struct npv_aicore *ac)
{
    uint64_t id = 0, caps = 0, stride = 0, v[4] = {0};
    int r = aicore_global_read(ac, AICORE_REG_ID, &id);
    if (r < 0)
        return r;
    if (id == ~0ull)
        ac->gone = true; /* off the bus: every read returns all-ones */
    if (id != AICORE_ID_VALUE)
        return -ENODEV;
    r = aicore_global_read(ac, AICORE_REG_CAPS, &caps);
    if (r == 0)
        r = aicore_global_read(ac, AICORE_REG_WINDOW_STRIDE, &stride);
    if (r == 0)
        r = aicore_global_read(ac, AICORE_REG_CTRL_REG_BASE, &ac->ctrl_reg_base);
    if (r == 0)
        r = aicore_global_read(ac, AICORE_REG_PMU_REG_BASE, &ac->pmu_reg_base);
    if (r == 0)
        r = aicore_global_read(ac, AICORE_REG_DEVMEM_BASE, &ac->devmem.base);
    if (r == 0)
        r = aicore_global_read(ac, AICORE_REG_DEVMEM_SIZE, &ac->topo.device_memory);
    static const uint64_t maps[4] = {AICORE_REG_PRESENT_LO, AICORE_REG_PRESENT_HI,
                                     AICORE_REG_POWER_ON_LO, AICORE_REG_POWER_ON_HI};
    for (int i = 0; r == 0 && i < 4; i++)
        r = aicore_global_read(ac, maps[i], &v[i]);
    if (r < 0)
        return r;

    struct npv_aicore_topology *t = &ac->topo;
    t->clusters = AICORE_CAPS_CLUSTERS(caps);
    t->aic_per_cluster = AICORE_CAPS_AIC_PER_CLUSTER(caps);
    t->aiv_per_cluster = AICORE_CAPS_AIV_PER_CLUSTER(caps);
    t->pmu_counters = AICORE_CAPS_PMU_COUNTERS(caps);
    t->pmu_aliased = (caps & AICORE_CAPS_PMU_IN_CTRL) != 0;
    /* Physical ids follow the a2a3 table order, which assumes 1C2V clusters. */
    if (t->clusters == 0 || t->clusters > AICORE_MAX_CLUSTERS ||
        t->aic_per_cluster != AICORE_AIC_PER_CLUSTER ||
        t->aiv_per_cluster != AICORE_AIV_PER_CLUSTER || t->pmu_counters < AICORE_PMU_COUNTERS)
        return -EPROTO;
    t->nr_cores = t->clusters * AICORE_SUBCORES_PER_CLUSTER;
    if (stride < AICORE_WINDOW_STRIDE || stride > AICORE_CTRL_BAR_SIZE / t->nr_cores ||
        ac->ctrl_reg_base == 0 || (!t->pmu_aliased && ac->pmu_reg_base == 0))
        return -EPROTO;
    ac->stride = stride;
    ac->pmu_in_ctrl = t->pmu_aliased;
    memset(t->present, 0, sizeof(t->present));
    memset(t->powered, 0, sizeof(t->powered));
    t->present[0] = v[0];
    t->present[1] = v[1];
    t->powered[0] = v[2];
    t->powered[1] = v[3];
    ac->nr_usable = 0;
    for (uint32_t i = 0; i < t->nr_cores; i++)
        if (aicore_core_usable(ac, i)) {
            /* Ranks: AICs by id, then AIVs by id, which is id order (regs.h). */
            ac->phys_rank[i] = ac->nr_usable;
            ac->rank_phys[ac->nr_usable++] = i;
        }
    t->nr_usable = ac->nr_usable;
    return 0;
}

/* The bitmaps the device launches with, as read at open or at the last reset. */
static int topology_unchanged(struct npv_aicore *ac)
{
    static const uint64_t maps[4] = {AICORE_REG_PRESENT_LO, AICORE_REG_PRESENT_HI,
                                     AICORE_REG_POWER_ON_LO, AICORE_REG_POWER_ON_HI};
    const uint64_t want[4] = {ac->topo.present[0], ac->topo.present[1], ac->topo.powered[0],
                              ac->topo.powered[1]};
    for (int i = 0; i < 4; i++) {
        uint64_t v;
        int r = aicore_global_read(ac, maps[i], &v);
        if (r < 0)
            return r;
        if (v != want[i])
            return -ESTALE;
    }
    return 0;
}

int aicore_launch_check_topology(struct npv_aicore *ac)
{
    return topology_unchanged(ac);
}

static uint64_t watchdog_us(const struct npv_aicore *ac)
{
    /* The device's watchdog fires before the host's task deadline, as the part's op-execute
     * timeout sits below its stream-sync timeout: the device reports, the host need not guess. */
    uint64_t us = ac->cfg.task_timeout_ns / 2000u;
    return us == 0 ? 1 : us;
}

int aicore_device_reset(struct npv_aicore *ac)
{
    int r = aicore_global_write(ac, AICORE_REG_RESET, AICORE_RESET_VALUE);
    if (r < 0)
        return r;
    uint64_t deadline = aicore_now_ns() + ac->cfg.poll_timeout_ns;
    for (;;) {
        uint64_t status = 0, err = 0;
        r = aicore_global_read(ac, AICORE_REG_STATUS, &status);
        if (r == 0)
            r = aicore_global_read(ac, AICORE_REG_GLOBAL_ERR, &err);
        if (r < 0)
            return r;
        if (status == ~0ull) {
            ac->gone = true;
            return -ENODEV;
        }
        if ((status & (AICORE_STATUS_RUNNING | AICORE_STATUS_POISONED)) == 0 && err == 0)
            break;
        if (aicore_now_ns() >= deadline)
            return -ETIMEDOUT;
        struct timespec nap = {.tv_sec = 0, .tv_nsec = 10000};
        nanosleep(&nap, NULL);
    }
    ac->counters.resets++;
    r = read_topology(ac);
    if (r == 0)
        r = aicore_global_write(ac, AICORE_REG_OP_TIMEOUT, watchdog_us(ac));
    if (r < 0)
        return r;
    ac->poisoned = false;
    aicore_pmu_forget(ac);
    /* A new topology changes the tables' content: upload again, into the blocks already owned. */
    aicore_table_build(ac, &ac->ctrl_table, ac->ctrl_reg_base);
    aicore_table_build(ac, &ac->pmu_table, ac->pmu_reg_base);
    return 0;
}

static int check_config(struct npv_aicore_config *c)
{
    if (c->task_timeout_ns == 0)
        c->task_timeout_ns = DEFAULT_TIMEOUT_NS;
    if (c->handshake_timeout_ns == 0)
        c->handshake_timeout_ns = DEFAULT_TIMEOUT_NS;
    if (c->poll_timeout_ns == 0)
        c->poll_timeout_ns = DEFAULT_TIMEOUT_NS;
    if (c->max_tasks == 0)
        c->max_tasks = DEFAULT_MAX_TASKS;
    if (c->max_tasks > MAX_TASKS_LIMIT)
        return -EINVAL;
    return 0;
}

static int map_bars(struct npv_aicore *ac)
{
    int r = npv_bar_map(ac->dev, AICORE_BAR_GLOBAL, &ac->global);
    if (r == 0)
        r = npv_bar_map(ac->dev, AICORE_BAR_CTRL, &ac->ctrl);
    if (r == 0)
        r = npv_bar_map(ac->dev, AICORE_BAR_PMU, &ac->pmu_bar);
    return r;
}

static void unmap_bars(struct npv_aicore *ac)
{
    npv_bar_unmap(ac->pmu_bar);
    npv_bar_unmap(ac->ctrl);
    npv_bar_unmap(ac->global);
}

/* One page of DMA memory holds both tables' images, the copy engine's source. */
static int alloc_staging(struct npv_aicore *ac)
{
    size_t len = (size_t)AICORE_MAX_SUBCORES * AICORE_TABLE_ENTRY_SIZE;
    npv_iova_t iova;
    int r = npv_dma_alloc(ac->ctx, 2 * len, NULL, &ac->staging);
    if (r == 0)
        r = npv_dma_map(ac->staging, ac->dom, NPV_DMA_READ, &iova);
    if (r < 0)
        return r;
    uint8_t *va = npv_dma_vaddr(ac->staging);
    ac->ctrl_table.host = (uint64_t *)va;
    ac->ctrl_table.host_iova = iova;
    ac->pmu_table.host = (uint64_t *)(va + len);
    ac->pmu_table.host_iova = iova + len;
    return 0;
}

static void free_staging(struct npv_aicore *ac)
{
    if (ac->staging == NULL)
        return;
    (void)npv_dma_unmap(ac->staging, ac->dom);
    npv_dma_free(ac->staging);
    ac->staging = NULL;
}

int npv_aicore_open(struct npv_dev *dev, const struct npv_aicore_config *cfg,
                    struct npv_aicore **out)
{
    if (dev == NULL || out == NULL || npv_dev_domain(dev) == NULL)
        return -EINVAL;
    struct npv_aicore *ac = calloc(1, sizeof(*ac));
    if (ac == NULL)
        return -ENOMEM;
    ac->dev = dev;
    ac->ctx = npv_dev_ctx(dev);
    ac->dom = npv_dev_domain(dev);
    if (cfg != NULL)
        ac->cfg = *cfg;
    int r = check_config(&ac->cfg);
    if (r < 0)
        goto err_free;
    ac->ops = ac->cfg.mem_ops != NULL ? ac->cfg.mem_ops : npv_aicore_default_mem_ops();
    ac->next_epoch = 1; /* epoch 0 is never valid: a zeroed record is nobody's */
    r = map_bars(ac);
    if (r < 0)
        goto err_bars;
    r = alloc_staging(ac);
    if (r < 0)
        goto err_staging;
    r = aicore_device_reset(ac);
    if (r < 0)
        goto err_staging;
    ac->counters.resets = 0; /* the bring-up reset is not a recovery */
    aicore_devmem_init(&ac->devmem, ac->devmem.base, ac->topo.device_memory);
    r = aicore_runs_init(ac);
    if (r < 0)
        goto err_runs;
    *out = ac;
    return 0;

err_runs:
    aicore_runs_fini(ac);
err_staging:
    free_staging(ac);
err_bars:
    unmap_bars(ac);
err_free:
    free(ac);
    return r;
}

void npv_aicore_close(struct npv_aicore *ac)
{
    if (ac == NULL)
        return;
    if (ac->active != NULL)
        aicore_run_abandon(ac->active, -ECANCELED);
    /* Stop whatever the device still runs before its memory goes away. */
    if (ac->poisoned && !ac->gone)
        (void)aicore_global_write(ac, AICORE_REG_RESET, AICORE_RESET_VALUE);
    aicore_table_release(ac, &ac->ctrl_table);
    aicore_table_release(ac, &ac->pmu_table);
    aicore_runs_fini(ac);
    free_staging(ac);
    unmap_bars(ac);
    free(ac);
}

int npv_aicore_reset(struct npv_aicore *ac)
{
    if (ac->active != NULL)
        aicore_run_abandon(ac->active, -ECANCELED);
    if (ac->gone)
        return -ENODEV;
    int r = aicore_device_reset(ac);
    if (r < 0)
        ac->poisoned = true;
    return r;
}

struct npv_dev *npv_aicore_dev(const struct npv_aicore *ac)
{
    return ac->dev;
}

void npv_aicore_topology(const struct npv_aicore *ac, struct npv_aicore_topology *out)
{
    *out = ac->topo;
}

void npv_aicore_counters(const struct npv_aicore *ac, struct npv_aicore_counters *out)
{
    *out = ac->counters;
    out->ctrl_uploads = ac->ctrl_table.uploads;
    out->pmu_uploads = ac->pmu_table.uploads;
    out->ctrl_commits = ac->ctrl_table.commits;
    out->pmu_commits = ac->pmu_table.commits;
    out->device_blocks = ac->devmem.nr_blocks;
}

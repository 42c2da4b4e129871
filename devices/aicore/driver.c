/* SPDX-License-Identifier: MIT */
/*
 * The AICore driver's device context: open, reset, close, topology, register
 * access. The host plays the on-chip scheduler (simpler's AICPU scheduler,
 * src/a2a3/runtime/tensormap_and_ringbuffer/runtime/scheduler/), so the
 * context owns what the part's runtime keeps per device context
 * (DeviceRunnerBase, src/common/platform/onboard/host/device_runner_base.h):
 * the device-memory allocator and the Ctrl/Pmu register tables.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver_internal.h"
#include "status_decode.h"

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

int aicore_pmu_read64(struct npv_aicore *ac, uint32_t phys, uint32_t off, uint64_t *v)
{
    return npv_bar_read(ac->pmu_in_ctrl ? ac->ctrl : ac->pmu_bar, phys * ac->stride + off, 8, v);
}

int aicore_pmu_write(struct npv_aicore *ac, uint32_t phys, uint32_t off, uint32_t v)
{
    return npv_bar_write(ac->pmu_in_ctrl ? ac->ctrl : ac->pmu_bar, phys * ac->stride + off, 4, v);
}

bool aicore_core_usable(const struct npv_aicore *ac, uint32_t phys)
{
    return aicore_topology_usable(&ac->topo, phys);
}

/* Identity, shape, bitmaps and addresses, decided by aicore_decode_topology. */
static int read_topology(struct npv_aicore *ac)
{
    struct aicore_topology_regs regs = {0};
    int r = aicore_global_read(ac, AICORE_REG_ID, &regs.id);
    if (r < 0)
        return r;
    if (regs.id == ~0ull)
        ac->gone = true; /* off the bus: every read returns all-ones */
    if (regs.id != AICORE_ID_VALUE)
        return -ENODEV;
    const struct {
        uint64_t off;
        uint64_t *v;
    } reads[] = {
        {AICORE_REG_CAPS, &regs.caps},
        {AICORE_REG_WINDOW_STRIDE, &regs.stride},
        {AICORE_REG_CTRL_REG_BASE, &regs.ctrl_reg_base},
        {AICORE_REG_PMU_REG_BASE, &regs.pmu_reg_base},
        {AICORE_REG_DEVMEM_BASE, &regs.devmem_base},
        {AICORE_REG_DEVMEM_SIZE, &regs.devmem_size},
        {AICORE_REG_PRESENT_LO, &regs.present[0]},
        {AICORE_REG_PRESENT_HI, &regs.present[1]},
        {AICORE_REG_POWER_ON_LO, &regs.powered[0]},
        {AICORE_REG_POWER_ON_HI, &regs.powered[1]},
    };
    for (size_t i = 0; r == 0 && i < sizeof(reads) / sizeof(reads[0]); i++)
        r = aicore_global_read(ac, reads[i].off, reads[i].v);
    if (r < 0)
        return r;
    struct aicore_shape shape;
    r = aicore_decode_topology(&regs, &shape);
    if (r < 0)
        return r;
    ac->topo = shape.topo;
    ac->stride = shape.stride;
    ac->ctrl_reg_base = shape.ctrl_reg_base;
    ac->pmu_reg_base = shape.pmu_reg_base;
    ac->devmem.base = shape.devmem_base;
    ac->pmu_in_ctrl = shape.topo.pmu_aliased;
    ac->nr_usable = shape.topo.nr_usable;
    memcpy(ac->rank_phys, shape.rank_phys, sizeof(ac->rank_phys));
    memcpy(ac->phys_rank, shape.phys_rank, sizeof(ac->phys_rank));
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

/* One RESET and the wait, bounded by the poll timeout, for it to complete. */
static int reset_once(struct npv_aicore *ac)
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
        int state = aicore_decode_reset(status, err);
        if (state == -ENODEV)
            ac->gone = true;
        if (state < 0)
            return state;
        if (state == 0)
            break;
        if (aicore_now_ns() >= deadline)
            return -ETIMEDOUT;
        struct timespec nap = {.tv_sec = 0, .tv_nsec = 10000};
        nanosleep(&nap, NULL);
    }
    return 0;
}

/*
 * A reset that does not complete is written again, up to RESET_ATTEMPTS
 * times; then the device is declared dead: every later prepare fails at once
 * with -EIO instead of each caller waiting out the resets again, until an
 * explicit npv_aicore_reset succeeds.
 */
int aicore_device_reset(struct npv_aicore *ac)
{
    int r = 0;
    for (int attempt = 1; attempt <= RESET_ATTEMPTS; attempt++) {
        r = reset_once(ac);
        if (r == 0 || ac->gone)
            break;
        npv_ctx_log(ac->ctx, NPV_LOG_WARN, "aicore: reset did not complete (%s), attempt %d of %d",
                    npv_strerror(r), attempt, RESET_ATTEMPTS);
    }
    if (r < 0) {
        if (!ac->gone) {
            npv_ctx_log(ac->ctx, NPV_LOG_ERROR, "aicore: the device does not reset: it is dead");
            ac->dead = true;
        }
        return r;
    }
    ac->dead = false;
    ac->counters.resets++;
    if (ac->stats != NULL) /* NULL at bring-up, which is not a recovery */
        npv_inflight_count_reset(ac->stats);
    r = read_topology(ac);
    if (r == 0)
        r = aicore_global_write(ac, AICORE_REG_OP_TIMEOUT, watchdog_us(ac));
    if (r < 0)
        return r;
    ac->poisoned = false;
    /* The device let go of every run: their memory may be unmapped (npv_aicore_mem_unmap). */
    for (unsigned s = 0; s < NPV_AICORE_SLOTS; s++)
        ac->runs[s].abandoned = false;
    aicore_pmu_forget(ac);
    /*
     * Nothing says the part keeps device memory over a reset (simpler never
     * reuses a device it had to reset: DeviceRunner::recover_device_or_mark_unusable
     * and finalize's force reset, src/a2a3/platform/onboard/host/device_runner.cpp):
     * the tables go back up before the next launch, once per reset, into the
     * blocks already owned. A new topology changes their content as well.
     */
    aicore_table_build(ac, &ac->ctrl_table, ac->ctrl_reg_base);
    aicore_table_build(ac, &ac->pmu_table, ac->pmu_reg_base);
    ac->ctrl_table.committed = false;
    ac->pmu_table.committed = false;
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

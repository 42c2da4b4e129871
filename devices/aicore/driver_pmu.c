/* SPDX-License-Identifier: MIT */
/*
 * The PMU, as simpler's AICPU drives the part's (pmu_collector_aicpu.cpp):
 * selectors, the whole cycle window and the CTRL_0 enable are programmed once
 * per sub-core and left so (pmu_start; nothing undoes it until the selectors
 * change or a reset); counting is gated per task by the sub-core's own CTRL
 * bit 0, which it opens only on a run with PMU on, so nothing counts between
 * runs. The counters clear when read on the part (regs.h, AICORE_PMU_CNT):
 * programming reads each once to clear it, arming a run reads the enabled
 * ones again for its baseline (0 on the part; the running count on a model
 * whose mapped counters cannot see a read), and collecting reads them once
 * more: the run's counts are the difference (mod 2^32). Only what the run
 * enabled is read: counters with an event, and the total.
 */
#include <errno.h>
#include <string.h>

#include "driver_internal.h"

void aicore_pmu_forget(struct npv_aicore *ac)
{
    for (uint32_t i = 0; i < AICORE_MAX_SUBCORES; i++)
        ac->pmu_core[i].valid = false;
}

/* The enabled counters and the 64-bit total of sub-core p, as read now. */
static int read_counts(struct npv_aicore *ac, uint32_t p, const uint32_t *events,
                       uint32_t cnt[NPV_AICORE_PMU_EVENTS], uint64_t *total)
{
    int r = 0;
    for (uint32_t i = 0; r == 0 && i < NPV_AICORE_PMU_EVENTS; i++) {
        cnt[i] = 0;
        if (events[i] != 0)
            r = aicore_pmu_read(ac, p, AICORE_PMU_CNT(i), &cnt[i]);
    }
    if (r == 0)
        r = aicore_pmu_read64(ac, p, AICORE_PMU_CNT_TOTAL_LO, total);
    return r;
}

/* Selectors, the whole cycle window, the enable; every counter read once to clear it. */
static int program(struct npv_aicore *ac, uint32_t p, const uint32_t *events)
{
    struct aicore_pmu_core *pc = &ac->pmu_core[p];
    static const uint32_t all[NPV_AICORE_PMU_EVENTS] = {1, 1, 1, 1, 1, 1, 1, 1};
    const uint32_t window[][2] = {
        {AICORE_PMU_START_CYC_LO, 0},
        {AICORE_PMU_START_CYC_HI, 0},
        {AICORE_PMU_STOP_CYC_LO, UINT32_MAX},
        {AICORE_PMU_STOP_CYC_HI, UINT32_MAX},
        {AICORE_PMU_CTRL_0, AICORE_PMU_CTRL_ENABLE_PART},
    };
    int r = 0;
    pc->valid = false;
    for (uint32_t i = 0; r == 0 && i < NPV_AICORE_PMU_EVENTS; i++)
        r = aicore_pmu_write(ac, p, AICORE_PMU_EVT_IDX(i), events[i]);
    for (size_t i = 0; r == 0 && i < sizeof(window) / sizeof(window[0]); i++)
        r = aicore_pmu_write(ac, p, window[i][0], window[i][1]);
    uint32_t cnt[NPV_AICORE_PMU_EVENTS];
    uint64_t total;
    if (r == 0)
        r = read_counts(ac, p, all, cnt, &total);
    if (r < 0)
        return r;
    memcpy(pc->events, events, sizeof(pc->events));
    pc->valid = true;
    return 0;
}

int aicore_pmu_arm(struct npv_aicore_run *run)
{
    struct npv_aicore *ac = run->ac;
    int r = 0;
    for (uint32_t c = 0; r == 0 && c < run->nr_cores; c++) {
        uint32_t p = run->cores[c].phys;
        struct aicore_pmu_core *pc = &ac->pmu_core[p];
        if (!pc->valid || memcmp(pc->events, run->pmu_events, sizeof(pc->events)) != 0)
            r = program(ac, p, run->pmu_events);
        if (r == 0)
            r = read_counts(ac, p, run->pmu_events, pc->base, &pc->base_total);
    }
    if (r < 0)
        aicore_pmu_forget(ac);
    return r;
}

int aicore_pmu_collect(struct npv_aicore_run *run)
{
    struct npv_aicore *ac = run->ac;
    int r = 0;
    for (uint32_t c = 0; r == 0 && c < run->nr_cores; c++) {
        uint32_t p = run->cores[c].phys, cnt[NPV_AICORE_PMU_EVENTS];
        uint64_t total = 0;
        const struct aicore_pmu_core *pc = &ac->pmu_core[p];
        struct npv_aicore_core_pmu *o = &run->pmu_out[c];
        memset(o, 0, sizeof(*o));
        o->core = p;
        r = read_counts(ac, p, run->pmu_events, cnt, &total);
        for (uint32_t i = 0; r == 0 && i < NPV_AICORE_PMU_EVENTS; i++) {
            o->events[i] = run->pmu_events[i];
            o->counters[i] = (uint32_t)(cnt[i] - pc->base[i]);
        }
        o->total_cycles = total - pc->base_total;
    }
    if (r < 0)
        aicore_pmu_forget(ac);
    return r;
}

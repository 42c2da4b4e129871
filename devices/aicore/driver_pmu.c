/* SPDX-License-Identifier: MIT */
/*
 * The per-run PMU gate. Programming every counter of every sub-core takes 22
 * register writes each (over vfio-user, a message each); the part's AICPU
 * programs selectors and the cycle window once and gates counting per task.
 * So a run whose selectors match what a sub-core already holds only enables
 * counting, and its counts are the difference from the values the previous
 * collect read (32-bit counters wrap: the difference is taken mod 2^32).
 */
#include <errno.h>
#include <string.h>

#include "driver_internal.h"

void aicore_pmu_forget(struct npv_aicore *ac)
{
    for (uint32_t i = 0; i < AICORE_MAX_SUBCORES; i++)
        ac->pmu_core[i].valid = false;
}

/* Selectors, zeroed counts, the whole cycle window. */
static int program(struct npv_aicore *ac, uint32_t p, const uint32_t *events)
{
    struct aicore_pmu_core *pc = &ac->pmu_core[p];
    int r = 0;
    pc->valid = false;
    for (uint32_t i = 0; r == 0 && i < NPV_AICORE_PMU_EVENTS; i++) {
        r = aicore_pmu_write(ac, p, AICORE_PMU_EVT_IDX(i), events[i]);
        if (r == 0)
            r = aicore_pmu_write(ac, p, AICORE_PMU_CNT(i), 0);
    }
    static const uint32_t zero[] = {AICORE_PMU_CNT_TOTAL_LO, AICORE_PMU_CNT_TOTAL_HI,
                                    AICORE_PMU_START_CYC_LO, AICORE_PMU_START_CYC_HI};
    for (size_t i = 0; r == 0 && i < sizeof(zero) / sizeof(zero[0]); i++)
        r = aicore_pmu_write(ac, p, zero[i], 0);
    if (r == 0)
        r = aicore_pmu_write(ac, p, AICORE_PMU_STOP_CYC_LO, UINT32_MAX);
    if (r == 0)
        r = aicore_pmu_write(ac, p, AICORE_PMU_STOP_CYC_HI, UINT32_MAX);
    if (r < 0)
        return r;
    memcpy(pc->events, events, sizeof(pc->events));
    memset(pc->base, 0, sizeof(pc->base));
    pc->base_total = 0;
    pc->valid = true;
    return 0;
}

int aicore_pmu_arm(struct npv_aicore_run *run)
{
    struct npv_aicore *ac = run->ac;
    int r = 0;
    for (uint32_t c = 0; r == 0 && c < run->nr_cores; c++) {
        uint32_t p = run->cores[c].phys;
        const struct aicore_pmu_core *pc = &ac->pmu_core[p];
        if (!pc->valid || memcmp(pc->events, run->pmu_events, sizeof(pc->events)) != 0)
            r = program(ac, p, run->pmu_events);
        if (r == 0)
            r = aicore_pmu_write(ac, p, AICORE_PMU_CTRL_0, AICORE_PMU_CTRL_ENABLE_PART);
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
        uint32_t p = run->cores[c].phys, lo = 0, hi = 0;
        struct aicore_pmu_core *pc = &ac->pmu_core[p];
        struct npv_aicore_core_pmu *o = &run->pmu_out[c];
        memset(o, 0, sizeof(*o));
        o->core = p;
        r = aicore_pmu_write(ac, p, AICORE_PMU_CTRL_0, 0);
        for (uint32_t i = 0; r == 0 && i < NPV_AICORE_PMU_EVENTS; i++) {
            uint32_t v = 0;
            o->events[i] = run->pmu_events[i];
            r = aicore_pmu_read(ac, p, AICORE_PMU_CNT(i), &v);
            o->counters[i] = (uint32_t)(v - pc->base[i]);
            pc->base[i] = v;
        }
        if (r == 0)
            r = aicore_pmu_read(ac, p, AICORE_PMU_CNT_TOTAL_LO, &lo);
        if (r == 0)
            r = aicore_pmu_read(ac, p, AICORE_PMU_CNT_TOTAL_HI, &hi);
        uint64_t total = (uint64_t)hi << 32 | lo;
        o->total_cycles = total - pc->base_total;
        pc->base_total = total;
    }
    if (r < 0)
        aicore_pmu_forget(ac);
    return r;
}

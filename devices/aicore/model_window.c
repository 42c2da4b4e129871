/* SPDX-License-Identifier: MIT */
/*
 * The per-sub-core windows: Ctrl in BAR2 (FAST_PATH, DMB, COND, physical id,
 * and the Pmu registers when they are aliased into it, as on the newer part)
 * and Pmu in BAR3. Registers are 32 bits; an 8-byte access at an 8-aligned
 * offset is two of them, low first. A window that is absent (partial-good) or
 * powered off reads 0 and drops writes, as an unclocked block does; a
 * dispatch into one is an error the host can see in GLOBAL_ERR.
 */
#include <errno.h>
#include <string.h>

#include "model_internal.h"

static bool pmu_read(const struct aicore_pmu *p, uint32_t reg, uint32_t *v)
{
    for (uint32_t i = 0; i < AICORE_PMU_COUNTERS; i++) {
        if (reg == AICORE_PMU_CNT(i)) {
            *v = p->cnt[i];
            return true;
        }
        if (reg == AICORE_PMU_EVT_IDX(i)) {
            *v = p->evt[i];
            return true;
        }
    }
    switch (reg) {
    case AICORE_PMU_CTRL_0:
        *v = p->ctrl0;
        return true;
    case AICORE_PMU_CNT_TOTAL_LO:
        *v = (uint32_t)p->total;
        return true;
    case AICORE_PMU_CNT_TOTAL_HI:
        *v = (uint32_t)(p->total >> 32);
        return true;
    case AICORE_PMU_START_CYC_LO:
        *v = (uint32_t)p->start_cyc;
        return true;
    case AICORE_PMU_START_CYC_HI:
        *v = (uint32_t)(p->start_cyc >> 32);
        return true;
    case AICORE_PMU_STOP_CYC_LO:
        *v = (uint32_t)p->stop_cyc;
        return true;
    case AICORE_PMU_STOP_CYC_HI:
        *v = (uint32_t)(p->stop_cyc >> 32);
        return true;
    default:
        return false;
    }
}

static void set_lo(uint64_t *r, uint32_t v)
{
    *r = (*r & ~0xffffffffull) | v;
}

static void set_hi(uint64_t *r, uint32_t v)
{
    *r = (*r & 0xffffffffull) | (uint64_t)v << 32;
}

static bool pmu_write(struct aicore_pmu *p, uint32_t reg, uint32_t v)
{
    for (uint32_t i = 0; i < AICORE_PMU_COUNTERS; i++) {
        if (reg == AICORE_PMU_CNT(i)) {
            p->cnt[i] = v;
            return true;
        }
        if (reg == AICORE_PMU_EVT_IDX(i)) {
            p->evt[i] = v;
            return true;
        }
    }
    switch (reg) {
    case AICORE_PMU_CTRL_0:
        p->ctrl0 = v;
        return true;
    case AICORE_PMU_CNT_TOTAL_LO:
        set_lo(&p->total, v);
        return true;
    case AICORE_PMU_CNT_TOTAL_HI:
        set_hi(&p->total, v);
        return true;
    case AICORE_PMU_START_CYC_LO:
        set_lo(&p->start_cyc, v);
        return true;
    case AICORE_PMU_START_CYC_HI:
        set_hi(&p->start_cyc, v);
        return true;
    case AICORE_PMU_STOP_CYC_LO:
        set_lo(&p->stop_cyc, v);
        return true;
    case AICORE_PMU_STOP_CYC_HI:
        set_hi(&p->stop_cyc, v);
        return true;
    default:
        return false;
    }
}

static uint32_t ctrl_read(struct npv_aicore_model *m, uint32_t id, uint32_t reg)
{
    struct aicore_subcore *c = &m->core[id];
    uint32_t v = 0;
    switch (reg) {
    case AICORE_CTRL_PHYS_ID:
        return id;
    case AICORE_CTRL_FAST_PATH:
        return c->fast_path;
    case AICORE_CTRL_DMB:
        return c->dmb;
    case AICORE_CTRL_DMB_HIGH:
        return c->dmb_high;
    case AICORE_CTRL_COND:
        return c->cond;
    default:
        if (m->pmu_in_ctrl)
            (void)pmu_read(&c->pmu, reg, &v);
        return v;
    }
}

static bool dmb_value_valid(uint32_t v)
{
    return v <= AICORE_TOKEN_MAX || v == AICORE_DMB_IDLE || v == AICORE_DMB_EXIT;
}

static void dmb_write(struct npv_aicore_model *m, struct aicore_subcore *c, uint32_t v)
{
    if (m->poisoned) {
        aicore_error(m, AICORE_ERR_DISPATCH_POISONED);
        return;
    }
    if (c->fast_path != AICORE_FAST_PATH_OPEN) {
        aicore_error(m, AICORE_ERR_WINDOW_CLOSED);
        return;
    }
    if (!dmb_value_valid(v)) {
        m->bad_accesses++;
        aicore_error(m, AICORE_ERR_BAD_ACCESS);
        return;
    }
    c->dmb = v;
    pthread_cond_signal(&m->wake);
}

static void ctrl_write(struct npv_aicore_model *m, uint32_t id, uint32_t reg, uint32_t v)
{
    struct aicore_subcore *c = &m->core[id];
    switch (reg) {
    case AICORE_CTRL_FAST_PATH:
        if (v == AICORE_FAST_PATH_OPEN || v == AICORE_FAST_PATH_CLOSE) {
            c->fast_path = v;
            return;
        }
        break;
    case AICORE_CTRL_DMB:
        dmb_write(m, c, v);
        return;
    case AICORE_CTRL_DMB_HIGH:
        c->dmb_high = v;
        return;
    default:
        if (m->pmu_in_ctrl && pmu_write(&c->pmu, reg, v))
            return;
        break;
    }
    /* PHYS_ID, COND (the sub-core's), a bad FAST_PATH value, a hole. */
    m->bad_accesses++;
    aicore_error(m, AICORE_ERR_BAD_ACCESS);
}

static uint32_t pmu_window_read(struct npv_aicore_model *m, uint32_t id, uint32_t reg)
{
    uint32_t v = 0;
    if (!m->pmu_in_ctrl)
        (void)pmu_read(&m->core[id].pmu, reg, &v);
    return v;
}

static void pmu_window_write(struct npv_aicore_model *m, uint32_t id, uint32_t reg, uint32_t v)
{
    if (m->pmu_in_ctrl)
        return; /* no Pmu page on the aliased part: nothing answers here */
    if (!pmu_write(&m->core[id].pmu, reg, v)) {
        m->bad_accesses++;
        aicore_error(m, AICORE_ERR_BAD_ACCESS);
    }
}

typedef uint32_t (*reg_read_fn)(struct npv_aicore_model *m, uint32_t id, uint32_t reg);
typedef void (*reg_write_fn)(struct npv_aicore_model *m, uint32_t id, uint32_t reg, uint32_t v);

/* One or two 32-bit registers of one window, or an error for any other shape. */
static int window_access(struct npv_aicore_model *m, uint64_t off, void *buf, size_t len,
                         bool is_write, bool is_ctrl, reg_read_fn rd, reg_write_fn wr)
{
    if (!((len == 4 && (off & 3u) == 0) || (len == 8 && (off & 7u) == 0))) {
        m->bad_accesses++;
        aicore_error(m, AICORE_ERR_BAD_ACCESS);
        return -EINVAL;
    }
    uint32_t id = (uint32_t)(off / AICORE_WINDOW_STRIDE);
    uint32_t reg = (uint32_t)(off % AICORE_WINDOW_STRIDE);
    bool live = aicore_window_live(m, id);
    for (size_t k = 0; k < len / 4; k++) {
        uint32_t r = reg + (uint32_t)(4 * k), v = 0;
        if (is_write) {
            memcpy(&v, (uint8_t *)buf + 4 * k, 4);
            if (live)
                wr(m, id, r, v);
            else if (is_ctrl && r == AICORE_CTRL_DMB)
                aicore_error(m, AICORE_ERR_DISPATCH_ABSENT);
        } else {
            if (live)
                v = rd(m, id, r);
            memcpy((uint8_t *)buf + 4 * k, &v, 4);
        }
    }
    return 0;
}

int aicore_ctrl_access(void *arg, uint32_t index, uint64_t off, void *buf, size_t len,
                       bool is_write)
{
    struct npv_aicore_model *m = arg;
    (void)index;
    pthread_mutex_lock(&m->lock);
    int r = window_access(m, off, buf, len, is_write, true, ctrl_read, ctrl_write);
    pthread_mutex_unlock(&m->lock);
    return r;
}

int aicore_pmu_access(void *arg, uint32_t index, uint64_t off, void *buf, size_t len, bool is_write)
{
    struct npv_aicore_model *m = arg;
    (void)index;
    pthread_mutex_lock(&m->lock);
    int r = window_access(m, off, buf, len, is_write, false, pmu_window_read, pmu_window_write);
    pthread_mutex_unlock(&m->lock);
    return r;
}

/* SPDX-License-Identifier: MIT */
/*
 * The per-sub-core windows: Ctrl in BAR2 (CTRL, FAST_PATH, DMB, COND,
 * physical id, and the Pmu registers when they are aliased into it, as on
 * the newer part) and Pmu in BAR3. Both are shared memory: the registers
 * live there, the client maps them (unless the model is built with trapped
 * windows) and the worker polls them (aicore_windows_poll), because DMB and
 * FAST_PATH are levels the sub-core polls and COND and CTRL are values it
 * writes (our reading of simpler's aicore_executor.cpp, where the sub-core
 * spins on DMB, and scheduler_completion.cpp, where the AICPU polls COND): no
 * edge is lost by polling.
 *
 * On trapped windows every access reaches the callbacks below with its
 * width; on mapped windows the framework serves even a message from the
 * memory, and the poll is what sees any store. A window that is absent (partial-good) or powered
 * off reads 0 and drops writes, as an unclocked block does; a dispatch into one is an error the
 * host can see in GLOBAL_ERR.
 */
#include <errno.h>
#include <string.h>

#include "model_internal.h"

/* The named registers of a Ctrl window, the ones the poll looks at. */
static const uint32_t ctrl_regs[] = {AICORE_CTRL_CTRL, AICORE_CTRL_PHYS_ID,  AICORE_CTRL_FAST_PATH,
                                     AICORE_CTRL_DMB,  AICORE_CTRL_DMB_HIGH, AICORE_CTRL_COND};

void aicore_bad_access(struct npv_aicore_model *m)
{
    m->bad_accesses++;
    aicore_error(m, AICORE_ERR_BAD_ACCESS);
}

static bool pmu_counter(uint32_t reg)
{
    if (reg == AICORE_PMU_CNT_TOTAL_LO || reg == AICORE_PMU_CNT_TOTAL_HI)
        return true;
    return reg >= AICORE_PMU_CNT(0) && reg <= AICORE_PMU_CNT(AICORE_PMU_COUNTERS - 1) &&
           (reg - AICORE_PMU_CNT(0)) % 8u == 0;
}

static bool pmu_reg(uint32_t reg)
{
    if (pmu_counter(reg))
        return true;
    if (reg >= AICORE_PMU_EVT_IDX(0) && reg <= AICORE_PMU_EVT_IDX(AICORE_PMU_COUNTERS - 1) &&
        (reg - AICORE_PMU_EVT_IDX(0)) % 4u == 0)
        return true;
    switch (reg) {
    case AICORE_PMU_CTRL_0:
    case AICORE_PMU_START_CYC_LO:
    case AICORE_PMU_START_CYC_HI:
    case AICORE_PMU_STOP_CYC_LO:
    case AICORE_PMU_STOP_CYC_HI:
        return true;
    default:
        return false;
    }
}

/* A trapped read of a Pmu register: the counters clear when read (regs.h, AICORE_PMU_CNT). */
static uint32_t pmu_read(struct npv_aicore_model *m, uint32_t id, uint32_t reg)
{
    uint32_t *p = aicore_pmu_cell(m, id, reg);
    if (!pmu_counter(reg))
        return aicore_cell_ld(p);
    m->pmu_counter_reads++;
    return __atomic_exchange_n(p, 0u, __ATOMIC_ACQ_REL);
}

void aicore_set_cond(struct npv_aicore_model *m, uint32_t id, uint32_t v)
{
    m->core[id].cond = v;
    aicore_cell_st(aicore_ctrl_cell(m, id, AICORE_CTRL_COND), v);
}

void aicore_set_ctrl(struct npv_aicore_model *m, uint32_t id, uint32_t v)
{
    m->core[id].ctrl = v;
    aicore_cell_st(aicore_ctrl_cell(m, id, AICORE_CTRL_CTRL), v);
}

/* A live window shows the model's view; any other reads 0 in every named register. */
static void publish_one(struct npv_aicore_model *m, uint32_t id)
{
    const struct aicore_subcore *c = &m->core[id];
    bool live = aicore_window_live(m, id);
    const uint32_t v[] = {c->ctrl, id, c->fast_path, c->dmb, 0, c->cond};
    for (size_t k = 0; k < sizeof(ctrl_regs) / sizeof(ctrl_regs[0]); k++)
        if (ctrl_regs[k] != AICORE_CTRL_DMB_HIGH || !live)
            aicore_cell_st(aicore_ctrl_cell(m, id, ctrl_regs[k]), live ? v[k] : 0);
}

void aicore_windows_publish(struct npv_aicore_model *m)
{
    for (uint32_t id = 0; id < AICORE_MAX_SUBCORES; id++)
        publish_one(m, id);
}

static bool dmb_value_valid(uint32_t v)
{
    return v <= AICORE_TOKEN_MAX || v == AICORE_DMB_IDLE || v == AICORE_DMB_EXIT;
}

/* Whether a DMB value written to a live window is taken; the reason it is not, recorded. */
static bool dmb_accept(struct npv_aicore_model *m, bool open, uint32_t v)
{
    if (m->poisoned) {
        aicore_error(m, AICORE_ERR_DISPATCH_POISONED);
        return false;
    }
    if (!open) {
        aicore_error(m, AICORE_ERR_WINDOW_CLOSED);
        return false;
    }
    if (!dmb_value_valid(v)) {
        aicore_bad_access(m);
        return false;
    }
    return true;
}

static void dmb_taken(struct npv_aicore_model *m, uint32_t id, uint32_t v)
{
    m->core[id].dmb = v;
    aicore_cell_st(aicore_ctrl_cell(m, id, AICORE_CTRL_DMB), v);
    pthread_cond_signal(&m->wake);
}

static bool fast_path_valid(uint32_t v)
{
    return v == AICORE_FAST_PATH_OPEN || v == AICORE_FAST_PATH_CLOSE;
}

/* ---- trapped accesses ---- */

static uint32_t ctrl_read(struct npv_aicore_model *m, uint32_t id, uint32_t reg)
{
    struct aicore_subcore *c = &m->core[id];
    switch (reg) {
    case AICORE_CTRL_CTRL:
        return c->ctrl;
    case AICORE_CTRL_PHYS_ID:
        return id;
    case AICORE_CTRL_FAST_PATH:
        return c->fast_path;
    case AICORE_CTRL_DMB:
        return c->dmb;
    case AICORE_CTRL_DMB_HIGH:
        return aicore_cell_ld(aicore_ctrl_cell(m, id, reg));
    case AICORE_CTRL_COND:
        /* An open window given no token yet: the host asks what opening already told it. */
        if (m->running && c->dmb == AICORE_DMB_IDLE && !c->got_token)
            m->idle_polls++;
        return c->cond;
    default:
        return m->pmu_in_ctrl && pmu_reg(reg) ? pmu_read(m, id, reg) : 0;
    }
}

static void ctrl_write(struct npv_aicore_model *m, uint32_t id, uint32_t reg, uint32_t v)
{
    struct aicore_subcore *c = &m->core[id];
    switch (reg) {
    case AICORE_CTRL_FAST_PATH:
        if (fast_path_valid(v)) {
            c->fast_path = v;
            aicore_cell_st(aicore_ctrl_cell(m, id, reg), v);
            return;
        }
        break;
    case AICORE_CTRL_DMB:
        if (dmb_accept(m, c->fast_path == AICORE_FAST_PATH_OPEN, v))
            dmb_taken(m, id, v);
        return;
    case AICORE_CTRL_DMB_HIGH:
        aicore_cell_st(aicore_ctrl_cell(m, id, reg), v);
        return;
    default:
        if (m->pmu_in_ctrl && pmu_reg(reg)) {
            aicore_cell_st(aicore_pmu_cell(m, id, reg), v);
            return;
        }
        break;
    }
    /* CTRL, PHYS_ID, COND (the sub-core's), a bad FAST_PATH value, a hole. */
    aicore_bad_access(m);
}

static uint32_t pmu_window_read(struct npv_aicore_model *m, uint32_t id, uint32_t reg)
{
    return !m->pmu_in_ctrl && pmu_reg(reg) ? pmu_read(m, id, reg) : 0;
}

static void pmu_window_write(struct npv_aicore_model *m, uint32_t id, uint32_t reg, uint32_t v)
{
    if (m->pmu_in_ctrl)
        return; /* no Pmu page on the aliased part: nothing answers here */
    if (pmu_reg(reg))
        aicore_cell_st(aicore_pmu_cell(m, id, reg), v);
    else
        aicore_bad_access(m);
}

typedef uint32_t (*reg_read_fn)(struct npv_aicore_model *m, uint32_t id, uint32_t reg);
typedef void (*reg_write_fn)(struct npv_aicore_model *m, uint32_t id, uint32_t reg, uint32_t v);

/* One or two 32-bit registers of one window, or an error for any other shape. */
static int window_access(struct npv_aicore_model *m, uint64_t off, void *buf, size_t len,
                         bool is_write, bool is_ctrl, reg_read_fn rd, reg_write_fn wr)
{
    if (!((len == 4 && (off & 3u) == 0) || (len == 8 && (off & 7u) == 0))) {
        aicore_bad_access(m);
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
    aicore_model_lock(m);
    int r = window_access(m, off, buf, len, is_write, true, ctrl_read, ctrl_write);
    aicore_model_unlock(m);
    return r;
}

int aicore_pmu_access(void *arg, uint32_t index, uint64_t off, void *buf, size_t len, bool is_write)
{
    struct npv_aicore_model *m = arg;
    (void)index;
    aicore_model_lock(m);
    int r = window_access(m, off, buf, len, is_write, false, pmu_window_read, pmu_window_write);
    aicore_model_unlock(m);
    return r;
}

/* ---- the poll of mapped windows (worker, under lock) ---- */

/* A register the sub-core owns: a client store there is undone and counted. */
static void republish(struct npv_aicore_model *m, uint32_t id, uint32_t reg, uint32_t want)
{
    uint32_t *p = aicore_ctrl_cell(m, id, reg);
    if (aicore_cell_ld(p) == want)
        return;
    aicore_cell_st(p, want);
    aicore_bad_access(m);
}

/* FAST_PATH as the client left it (v): a value the part does not know is undone. */
static void take_fast_path(struct npv_aicore_model *m, uint32_t id, uint32_t v)
{
    struct aicore_subcore *c = &m->core[id];
    if (v == c->fast_path)
        return;
    if (fast_path_valid(v)) {
        c->fast_path = v;
        return;
    }
    aicore_cell_st(aicore_ctrl_cell(m, id, AICORE_CTRL_FAST_PATH), c->fast_path);
    aicore_bad_access(m);
}

/* A dead window: whatever a client stored in it reads 0 again; a dispatch there is an error. */
static void tidy_dead(struct npv_aicore_model *m, uint32_t id)
{
    for (size_t k = 0; k < sizeof(ctrl_regs) / sizeof(ctrl_regs[0]); k++) {
        uint32_t *p = aicore_ctrl_cell(m, id, ctrl_regs[k]);
        if (aicore_cell_ld(p) == 0)
            continue;
        aicore_cell_st(p, 0);
        if (ctrl_regs[k] == AICORE_CTRL_DMB)
            aicore_error(m, AICORE_ERR_DISPATCH_ABSENT);
    }
}

/*
 * A new DMB value. A poll sees only where the client has got to: a window
 * opened and then dispatched into, or a last IDLE and then closed, shows a
 * DMB store and a FAST_PATH store at once. The store is taken when the window
 * was open at either end of that span (DMB is read first, so a FAST_PATH
 * store before it is seen too); only on trapped windows is the order exact.
 */
static bool poll_dmb(struct npv_aicore_model *m, uint32_t id)
{
    struct aicore_subcore *c = &m->core[id];
    uint32_t *p = aicore_ctrl_cell(m, id, AICORE_CTRL_DMB);
    uint32_t v = aicore_cell_ld(p);
    uint32_t fp = aicore_cell_ld(aicore_ctrl_cell(m, id, AICORE_CTRL_FAST_PATH));
    bool was_open = c->fast_path == AICORE_FAST_PATH_OPEN;
    take_fast_path(m, id, fp);
    if (v == c->dmb)
        return false;
    if (dmb_accept(m, was_open || c->fast_path == AICORE_FAST_PATH_OPEN, v)) {
        c->dmb = v;
        return true;
    }
    /* Refused: the register keeps its value, unless the client has stored again since. */
    uint32_t seen = v;
    __atomic_compare_exchange_n(p, &seen, c->dmb, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return false;
}

bool aicore_windows_poll(struct npv_aicore_model *m)
{
    bool taken = false;
    for (uint32_t id = 0; id < AICORE_MAX_SUBCORES; id++) {
        if (!aicore_window_live(m, id)) {
            tidy_dead(m, id);
            continue;
        }
        const struct aicore_subcore *c = &m->core[id];
        republish(m, id, AICORE_CTRL_CTRL, c->ctrl);
        republish(m, id, AICORE_CTRL_PHYS_ID, id);
        republish(m, id, AICORE_CTRL_COND, c->cond);
        taken |= poll_dmb(m, id);
    }
    return taken;
}

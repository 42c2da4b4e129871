/* SPDX-License-Identifier: MIT */
/*
 * The AICore stand-in as a vfio-user server: PCI identity, the global
 * registers in BAR0 (identity, topology, system counter, LAUNCH, RESET,
 * GLOBAL_ERR, the copy engine), the test port in BAR1, and the model's life
 * cycle. The windows are in model_window.c, the sub-cores in model_core.c.
 *
 * Strict like hardware: a 64-bit register takes one 8-byte access (anything
 * else is an error reply and counted); LAUNCH with a missing parameter, on a
 * busy or poisoned device, is refused and says why; RESET is the only way out
 * of a fatal error.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "deadline.h"
#include "model_internal.h"

#define DEVMEM_MIN   4096ull
#define DEVMEM_MAX   (1ull << 30)
#define SCRATCH_SIZE ((size_t)AICORE_VADD_MAX_N * sizeof(float))

static_assert((size_t)AICORE_MATMUL_MAX * AICORE_MATMUL_MAX * sizeof(float) <= SCRATCH_SIZE,
              "a matmul operand fits a scratch buffer");

uint64_t aicore_sys_cnt(const struct npv_aicore_model *m)
{
    return (npv_now_ns() - m->t0_ns) / (1000000000ull / AICORE_SYS_CNT_HZ);
}

void aicore_error(struct npv_aicore_model *m, uint64_t bits)
{
    m->global_err |= bits;
}

void aicore_model_lock(struct npv_aicore_model *m)
{
    atomic_fetch_add_explicit(&m->want_lock, 1u, memory_order_acq_rel);
    pthread_mutex_lock(&m->lock);
    atomic_fetch_sub_explicit(&m->want_lock, 1u, memory_order_acq_rel);
}

void aicore_model_unlock(struct npv_aicore_model *m)
{
    pthread_mutex_unlock(&m->lock);
}

/* Sub-cores back to their power-on state. */
static void cores_reset(struct npv_aicore_model *m)
{
    for (uint32_t i = 0; i < AICORE_MAX_SUBCORES; i++) {
        struct aicore_subcore *c = &m->core[i];
        bool hang = c->arm_hang, drop = c->arm_drop_fin, bad = c->arm_bad_phys;
        bool stuck_exit = c->arm_stuck_exit;
        uint64_t delay = c->arm_delay_ack_us;
        memset(c, 0, sizeof(*c));
        c->state = CORE_OFF;
        c->fast_path = AICORE_FAST_PATH_CLOSE;
        /* Armed faults are the test's, not the device's: they survive RESET. */
        c->arm_hang = hang;
        c->arm_drop_fin = drop;
        c->arm_bad_phys = bad;
        c->arm_stuck_exit = stuck_exit;
        c->arm_delay_ack_us = delay;
    }
}

/*
 * RESET: the sub-cores, their windows (the Pmu registers included) and,
 * unless the model is built lenient, the device memory: nothing says the
 * part keeps it, and simpler never reuses a device it had to reset
 * (DeviceRunner::recover_device_or_mark_unusable fails every later run and
 * finalize() force-resets the card:
 * src/a2a3/platform/onboard/host/device_runner.cpp), so a driver must upload
 * its tables again. The worker zeroes the memory before it touches it next.
 */
static void device_reset(struct npv_aicore_model *m)
{
    m->gen++;
    cores_reset(m);
    memset(m->ctrl_mem, 0, AICORE_CTRL_BAR_SIZE);
    memset(m->pmu_mem, 0, AICORE_PMU_BAR_SIZE);
    aicore_windows_publish(m);
    if (!m->devmem_survives_reset)
        m->devmem_clear_pending = true;
    m->op_timeout_us = AICORE_OP_TIMEOUT_DEFAULT_US;
    m->global_err = 0;
    m->poisoned = false;
    m->fault_core = 0;
    m->launch_status = AICORE_LAUNCH_NONE;
    m->launches = 0;
    m->running = m->result_pending = false;
    m->launched = m->exited = m->run_tasks = 0;
    m->copy_status = AICORE_COPY_IDLE;
    m->copy_pending = false;
    m->copy_done = 0;
    /* A reset that never completes leaves the device reading RUNNING, launching nothing. */
    m->reset_incomplete = m->arm_reset_stuck || m->reset_dead;
    m->arm_reset_stuck = false;
    pthread_cond_signal(&m->wake);
}

static void table_seen(struct table_stats *s, uint64_t addr)
{
    s->reads++;
    s->last = addr;
    for (uint64_t i = 0; i < s->distinct && i < AICORE_MODEL_TABLE_ADDRS; i++)
        if (s->seen[i] == addr)
            return;
    if (s->distinct < AICORE_MODEL_TABLE_ADDRS)
        s->seen[s->distinct] = addr;
    s->distinct++;
}

/* Launched sub-cores in rank order: AICs by physical id, then AIVs (that is, physical order). */
static uint32_t launchable(const struct npv_aicore_model *m)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->nsub; i++)
        n += aicore_window_live(m, i);
    return n;
}

static enum aicore_launch_status launch_check(const struct npv_aicore_model *m)
{
    if (m->poisoned)
        return AICORE_LAUNCH_REFUSED_POISONED;
    if (m->reset_incomplete)
        return AICORE_LAUNCH_REFUSED_BUSY;
    if (m->running)
        return AICORE_LAUNCH_REFUSED_BUSY;
    if (m->p_ctrl_table == 0 || m->p_workers == 0 || (m->p_workers % 64u) != 0 ||
        m->p_result == 0 || (m->p_result % 8u) != 0 || m->p_epoch == 0 ||
        m->p_workers_count < launchable(m))
        return AICORE_LAUNCH_REFUSED_BAD_PARAM;
    return AICORE_LAUNCH_ACCEPTED;
}

static void launch(struct npv_aicore_model *m)
{
    enum aicore_launch_status st = launch_check(m);
    m->launch_status = st;
    if (st != AICORE_LAUNCH_ACCEPTED) {
        aicore_error(m, AICORE_ERR_LAUNCH_REFUSED);
        return;
    }
    m->gen++;
    m->launches++;
    m->r_ctrl_table = m->p_ctrl_table;
    m->r_pmu_table = m->p_pmu_table;
    m->r_workers = m->p_workers;
    m->r_result = m->p_result;
    m->r_epoch = m->p_epoch;
    m->launched = m->exited = m->run_tasks = 0;
    m->run_start_cnt = aicore_sys_cnt(m);
    for (uint32_t i = 0; i < AICORE_MAX_SUBCORES; i++) {
        struct aicore_subcore *c = &m->core[i];
        /* Kernel launch resets every DMB to 0 (verified on a2a3 silicon), COND with it. */
        c->dmb = c->cond = c->ctrl = c->last_dmb = 0;
        aicore_cell_st(aicore_ctrl_cell(m, i, AICORE_CTRL_DMB_HIGH), 0);
        c->token = 0;
        c->got_token = false;
        c->task_ptr = 0;
        c->state = CORE_OFF;
        if (aicore_window_live(m, i)) {
            c->state = CORE_FIND_TABLE;
            c->rank = m->launched++;
        }
    }
    aicore_windows_publish(m);
    if (m->launched > 0) {
        table_seen(&m->ctrl_stats, m->r_ctrl_table);
        if (m->r_pmu_table != 0)
            table_seen(&m->pmu_stats, m->r_pmu_table);
    }
    m->running = true;
    m->result_pending = true;
    pthread_cond_signal(&m->wake);
}

static void copy_go(struct npv_aicore_model *m)
{
    m->copy_status = AICORE_COPY_BUSY;
    m->copy_pending = true;
    pthread_cond_signal(&m->wake);
}

static uint64_t global_read(struct npv_aicore_model *m, uint64_t off)
{
    switch (off) {
    case AICORE_REG_ID:
        return AICORE_ID_VALUE;
    case AICORE_REG_VERSION:
        return AICORE_VERSION_VALUE;
    case AICORE_REG_CAPS:
        return AICORE_CAPS_MAKE(m->clusters, AICORE_AIC_PER_CLUSTER, AICORE_AIV_PER_CLUSTER,
                                AICORE_PMU_COUNTERS) |
               (m->pmu_in_ctrl ? AICORE_CAPS_PMU_IN_CTRL : 0);
    case AICORE_REG_WINDOW_STRIDE:
        return AICORE_WINDOW_STRIDE;
    case AICORE_REG_PRESENT_LO:
        return m->present[0];
    case AICORE_REG_PRESENT_HI:
        return m->present[1];
    case AICORE_REG_POWER_ON_LO:
        return m->power_on[0];
    case AICORE_REG_POWER_ON_HI:
        return m->power_on[1];
    case AICORE_REG_SYS_CNT:
        return aicore_sys_cnt(m);
    case AICORE_REG_SYS_CNT_HZ:
        return AICORE_SYS_CNT_HZ;
    case AICORE_REG_CTRL_REG_BASE:
        return AICORE_CTRL_REG_BASE;
    case AICORE_REG_PMU_REG_BASE:
        return m->pmu_in_ctrl ? AICORE_CTRL_REG_BASE : AICORE_PMU_REG_BASE;
    case AICORE_REG_DEVMEM_BASE:
        return AICORE_DEVMEM_BASE;
    case AICORE_REG_DEVMEM_SIZE:
        return m->devmem_size;
    case AICORE_REG_OP_TIMEOUT:
        return m->op_timeout_us;
    case AICORE_REG_GLOBAL_ERR:
        return m->global_err;
    case AICORE_REG_STATUS:
        return (m->running || m->reset_incomplete ? AICORE_STATUS_RUNNING : 0) |
               (m->poisoned ? AICORE_STATUS_POISONED : 0) |
               (m->copy_status == AICORE_COPY_BUSY ? AICORE_STATUS_COPY_BUSY : 0);
    case AICORE_REG_LAUNCH_STATUS:
        return m->launch_status;
    case AICORE_REG_FAULT_CORE:
        return m->fault_core;
    case AICORE_REG_LAUNCHES:
        return m->launches;
    case AICORE_REG_RUN_CTRL_TABLE:
        return m->p_ctrl_table;
    case AICORE_REG_RUN_PMU_TABLE:
        return m->p_pmu_table;
    case AICORE_REG_RUN_WORKERS:
        return m->p_workers;
    case AICORE_REG_RUN_WORKERS_COUNT:
        return m->p_workers_count;
    case AICORE_REG_RUN_RESULT:
        return m->p_result;
    case AICORE_REG_RUN_EPOCH:
        return m->p_epoch;
    case AICORE_REG_COPY_HOST_IOVA:
        return m->c_host;
    case AICORE_REG_COPY_DEV_ADDR:
        return m->c_dev;
    case AICORE_REG_COPY_LEN:
        return m->c_len;
    case AICORE_REG_COPY_DIR:
        return m->c_dir;
    case AICORE_REG_COPY_STATUS:
        return m->copy_status;
    case AICORE_REG_COPY_DONE:
        return m->copy_done;
    default:
        return 0;
    }
}

/* A copy-engine parameter: refused while a copy runs (the engine latches nothing). */
static void copy_param(struct npv_aicore_model *m, uint64_t *reg, uint64_t v)
{
    if (m->copy_status == AICORE_COPY_BUSY) {
        aicore_bad_access(m);
        return;
    }
    *reg = v;
}

static void global_write(struct npv_aicore_model *m, uint64_t off, uint64_t v)
{
    switch (off) {
    case AICORE_REG_OP_TIMEOUT:
        m->op_timeout_us = v;
        break;
    case AICORE_REG_RESET:
        if (v == AICORE_RESET_VALUE)
            device_reset(m);
        else
            aicore_bad_access(m);
        break;
    case AICORE_REG_LAUNCH:
        if (v == AICORE_LAUNCH_VALUE)
            launch(m);
        else
            aicore_bad_access(m);
        break;
    case AICORE_REG_RUN_CTRL_TABLE:
        m->p_ctrl_table = v;
        break;
    case AICORE_REG_RUN_PMU_TABLE:
        m->p_pmu_table = v;
        break;
    case AICORE_REG_RUN_WORKERS:
        m->p_workers = v;
        break;
    case AICORE_REG_RUN_WORKERS_COUNT:
        m->p_workers_count = v;
        break;
    case AICORE_REG_RUN_RESULT:
        m->p_result = v;
        break;
    case AICORE_REG_RUN_EPOCH:
        m->p_epoch = v;
        break;
    case AICORE_REG_COPY_HOST_IOVA:
        copy_param(m, &m->c_host, v);
        break;
    case AICORE_REG_COPY_DEV_ADDR:
        copy_param(m, &m->c_dev, v);
        break;
    case AICORE_REG_COPY_LEN:
        copy_param(m, &m->c_len, v);
        break;
    case AICORE_REG_COPY_DIR:
        copy_param(m, &m->c_dir, v);
        break;
    case AICORE_REG_COPY_GO:
        if (v == AICORE_COPY_GO_VALUE && m->copy_status != AICORE_COPY_BUSY)
            copy_go(m);
        else
            aicore_bad_access(m);
        break;
    default:
        /* The read-only registers and the holes between registers. */
        aicore_bad_access(m);
        break;
    }
}

static int global_access(void *arg, uint32_t index, uint64_t off, void *buf, size_t len,
                         bool is_write)
{
    struct npv_aicore_model *m = arg;
    (void)index;
    aicore_model_lock(m);
    if (len != 8 || (off & 7u) != 0) {
        aicore_bad_access(m);
        aicore_model_unlock(m);
        return -EINVAL;
    }
    uint64_t v = 0;
    if (is_write) {
        memcpy(&v, buf, 8);
        global_write(m, off, v);
    } else {
        v = global_read(m, off);
        memcpy(buf, &v, 8);
    }
    aicore_model_unlock(m);
    return 0;
}

/* ---- the test port ---- */

static uint64_t copy_count_of(const struct npv_aicore_model *m, uint64_t addr)
{
    for (uint32_t i = 0; i < m->nr_copy_counts; i++)
        if (m->copy_counts[i].addr == addr)
            return m->copy_counts[i].count;
    return 0;
}

static void counters_clear(struct npv_aicore_model *m)
{
    m->copies_h2d = m->copies_d2h = m->copies_failed = 0;
    m->nr_copy_counts = 0;
    memset(&m->ctrl_stats, 0, sizeof(m->ctrl_stats));
    memset(&m->pmu_stats, 0, sizeof(m->pmu_stats));
    m->table_mismatches = m->bad_accesses = m->dispatches = m->idle_polls = 0;
    m->pmu_counter_reads = 0;
    memset(m->tasks, 0, sizeof(m->tasks));
}

static int arm_fault(struct npv_aicore_model *m, uint64_t kind)
{
    if (kind == AICORE_FAULT_NONE) {
        for (uint32_t i = 0; i < AICORE_MAX_SUBCORES; i++) {
            m->core[i].arm_hang = m->core[i].arm_drop_fin = m->core[i].arm_bad_phys = false;
            m->core[i].arm_stuck_exit = false;
            m->core[i].arm_delay_ack_us = 0;
        }
        m->arm_fail_copy = false;
        m->arm_reset_stuck = m->reset_dead = false;
        return 0;
    }
    if (kind == AICORE_FAULT_FAIL_COPY) {
        m->arm_fail_copy = true;
        return 0;
    }
    if (kind == AICORE_FAULT_RESET_STUCK) {
        m->arm_reset_stuck = true;
        return 0;
    }
    if (kind == AICORE_FAULT_RESET_DEAD) {
        m->reset_dead = true;
        return 0;
    }
    if (m->tp_fault_core >= m->nsub)
        return -EINVAL;
    struct aicore_subcore *c = &m->core[m->tp_fault_core];
    switch (kind) {
    case AICORE_FAULT_HANG:
        c->arm_hang = true;
        return 0;
    case AICORE_FAULT_DROP_FIN:
        c->arm_drop_fin = true;
        return 0;
    case AICORE_FAULT_DELAY_ACK:
        if (m->tp_fault_arg == 0)
            return -EINVAL;
        c->arm_delay_ack_us = m->tp_fault_arg;
        return 0;
    case AICORE_FAULT_BAD_PHYS_ID:
        c->arm_bad_phys = true;
        return 0;
    case AICORE_FAULT_STUCK_EXIT:
        c->arm_stuck_exit = true;
        return 0;
    default:
        return -EINVAL;
    }
}

static uint64_t subcore_mask_word(uint32_t nsub, unsigned w)
{
    uint64_t v = 0;
    for (uint32_t i = w * 64u; i < nsub && i < (w + 1u) * 64u; i++)
        v |= 1ull << (i % 64u);
    return v;
}

/* A topology bitmap: only bits of sub-cores that exist, and never under a running run. */
static int topology_write(struct npv_aicore_model *m, uint64_t *word, unsigned w, uint64_t v)
{
    if ((v & ~subcore_mask_word(m->nsub, w)) != 0)
        return -EINVAL;
    if (m->running)
        return -EBUSY;
    *word = v;
    aicore_windows_publish(m); /* a window that came back shows its registers again */
    return 0;
}

static uint64_t port_read(struct npv_aicore_model *m, uint64_t off)
{
    if (off >= AICORE_TP_TASKS(0) && off < AICORE_TP_TASKS(AICORE_MAX_SUBCORES))
        return m->tasks[(off - AICORE_TP_TASKS(0)) / 8u];
    switch (off) {
    case AICORE_TP_ID:
        return AICORE_TP_ID_VALUE;
    case AICORE_TP_FAULT_CORE:
        return m->tp_fault_core;
    case AICORE_TP_FAULT_ARG:
        return m->tp_fault_arg;
    case AICORE_TP_PRESENT_LO:
        return m->present[0];
    case AICORE_TP_PRESENT_HI:
        return m->present[1];
    case AICORE_TP_POWER_ON_LO:
        return m->power_on[0];
    case AICORE_TP_POWER_ON_HI:
        return m->power_on[1];
    case AICORE_TP_PMU_ALIAS:
        return m->pmu_in_ctrl;
    case AICORE_TP_COPY_QUERY_ADDR:
        return m->copy_query_addr;
    case AICORE_TP_COPY_QUERY_COUNT:
        return copy_count_of(m, m->copy_query_addr);
    case AICORE_TP_COPIES_H2D:
        return m->copies_h2d;
    case AICORE_TP_COPIES_D2H:
        return m->copies_d2h;
    case AICORE_TP_COPIES_FAILED:
        return m->copies_failed;
    case AICORE_TP_CTRL_TABLE_READS:
        return m->ctrl_stats.reads;
    case AICORE_TP_CTRL_TABLE_LAST:
        return m->ctrl_stats.last;
    case AICORE_TP_CTRL_TABLE_DISTINCT:
        return m->ctrl_stats.distinct;
    case AICORE_TP_PMU_TABLE_READS:
        return m->pmu_stats.reads;
    case AICORE_TP_PMU_TABLE_LAST:
        return m->pmu_stats.last;
    case AICORE_TP_PMU_TABLE_DISTINCT:
        return m->pmu_stats.distinct;
    case AICORE_TP_TABLE_MISMATCHES:
        return m->table_mismatches;
    case AICORE_TP_BAD_ACCESSES:
        return m->bad_accesses;
    case AICORE_TP_DISPATCHES:
        return m->dispatches;
    case AICORE_TP_IDLE_POLLS:
        return m->idle_polls;
    case AICORE_TP_PMU_COUNTER_READS:
        return m->pmu_counter_reads;
    default:
        return 0;
    }
}

static int port_write(struct npv_aicore_model *m, uint64_t off, uint64_t v)
{
    switch (off) {
    case AICORE_TP_FAULT:
        return arm_fault(m, v);
    case AICORE_TP_FAULT_CORE:
        m->tp_fault_core = v;
        return 0;
    case AICORE_TP_FAULT_ARG:
        m->tp_fault_arg = v;
        return 0;
    case AICORE_TP_PRESENT_LO:
        return topology_write(m, &m->present[0], 0, v);
    case AICORE_TP_PRESENT_HI:
        return topology_write(m, &m->present[1], 1, v);
    case AICORE_TP_POWER_ON_LO:
        return topology_write(m, &m->power_on[0], 0, v);
    case AICORE_TP_POWER_ON_HI:
        return topology_write(m, &m->power_on[1], 1, v);
    case AICORE_TP_PMU_ALIAS:
        if (v > 1)
            return -EINVAL;
        if (m->running)
            return -EBUSY;
        m->pmu_in_ctrl = v != 0;
        memset(m->pmu_mem, 0, AICORE_PMU_BAR_SIZE);
        return 0;
    case AICORE_TP_COPY_QUERY_ADDR:
        m->copy_query_addr = v;
        return 0;
    case AICORE_TP_COUNTERS_CLEAR:
        if (v != 1)
            return -EINVAL;
        counters_clear(m);
        return 0;
    default:
        return -EINVAL; /* the port's counters are read-only */
    }
}

static int port_access(void *arg, uint32_t index, uint64_t off, void *buf, size_t len,
                       bool is_write)
{
    struct npv_aicore_model *m = arg;
    (void)index;
    int r = 0;
    aicore_model_lock(m);
    if (len != 8 || (off & 7u) != 0) {
        r = -EINVAL;
    } else if (is_write) {
        uint64_t v;
        memcpy(&v, buf, 8);
        r = port_write(m, off, v);
    } else {
        uint64_t v = port_read(m, off);
        memcpy(buf, &v, 8);
    }
    if (r < 0)
        m->bad_accesses++;
    aicore_model_unlock(m);
    return r;
}

/* ---- server callbacks and life cycle ---- */

static int model_reset(void *arg)
{
    struct npv_aicore_model *m = arg;
    aicore_model_lock(m);
    device_reset(m);
    aicore_model_unlock(m);
    return 0;
}

static void model_disconnect(void *arg)
{
    struct npv_aicore_model *m = arg;
    /* The client's memory is gone: the run stops with it; registers and errors stay. */
    aicore_model_lock(m);
    m->gen++;
    for (uint32_t i = 0; i < AICORE_MAX_SUBCORES; i++)
        if (m->core[i].state != CORE_FAULT)
            m->core[i].state = CORE_OFF;
    m->running = m->result_pending = false;
    if (m->copy_status == AICORE_COPY_BUSY) {
        m->copy_status = AICORE_COPY_ERROR;
        m->copy_pending = false;
        m->copy_done++;
        aicore_error(m, AICORE_ERR_COPY);
    }
    aicore_model_unlock(m);
}

static int apply_config(struct npv_aicore_model *m, const struct npv_aicore_model_config *cfg)
{
    struct npv_aicore_model_config def = {0};
    if (cfg == NULL)
        cfg = &def;
    m->clusters = cfg->clusters != 0 ? cfg->clusters : AICORE_DEFAULT_CLUSTERS;
    if (m->clusters > AICORE_MAX_CLUSTERS)
        return -EINVAL;
    m->nsub = m->clusters * AICORE_SUBCORES_PER_CLUSTER;
    m->devmem_size = cfg->devmem_size != 0 ? cfg->devmem_size : AICORE_DEVMEM_SIZE_DEFAULT;
    if (m->devmem_size < DEVMEM_MIN || m->devmem_size > DEVMEM_MAX)
        return -EINVAL;
    m->pmu_in_ctrl = cfg->pmu_in_ctrl;
    m->trapped_windows = cfg->trapped_windows;
    m->devmem_survives_reset = cfg->devmem_survives_reset;
    for (unsigned w = 0; w < 2; w++) {
        uint64_t valid = subcore_mask_word(m->nsub, w);
        if (cfg->custom_topology) {
            if ((cfg->present[w] & ~valid) != 0 || (cfg->power_on[w] & ~valid) != 0)
                return -EINVAL;
            m->present[w] = cfg->present[w];
            m->power_on[w] = cfg->power_on[w];
        } else {
            m->present[w] = m->power_on[w] = valid;
        }
    }
    if (!cfg->custom_topology && AICORE_DEFAULT_ABSENT_CLUSTER < m->clusters) {
        uint32_t c = AICORE_DEFAULT_ABSENT_CLUSTER;
        uint32_t ids[3] = {npv_aicore_phys_aic(m->clusters, c),
                           npv_aicore_phys_aiv(m->clusters, c, 0),
                           npv_aicore_phys_aiv(m->clusters, c, 1)};
        for (unsigned k = 0; k < 3; k++)
            m->present[ids[k] / 64u] &= ~(1ull << (ids[k] % 64u));
    }
    return 0;
}

static int alloc_memory(struct npv_aicore_model *m)
{
    /* Its own mapping: pages the device never touches are never backed, and RESET drops them. */
    void *p =
        mmap(NULL, m->devmem_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -ENOMEM;
    m->devmem = p;
    for (unsigned i = 0; i < 3; i++) {
        m->scratch[i] = malloc(SCRATCH_SIZE);
        if (m->scratch[i] == NULL)
            return -ENOMEM;
    }
    return 0;
}

static void free_memory(struct npv_aicore_model *m)
{
    for (unsigned i = 0; i < 3; i++)
        free(m->scratch[i]);
    if (m->devmem != NULL)
        munmap(m->devmem, m->devmem_size);
}

static int init_sync(struct npv_aicore_model *m)
{
    pthread_condattr_t ca;
    int r = pthread_condattr_init(&ca);
    if (r != 0)
        return -r;
    /* The worker's timed waits are deadlines on CLOCK_MONOTONIC, as everywhere else. */
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    r = pthread_cond_init(&m->wake, &ca);
    pthread_condattr_destroy(&ca);
    if (r != 0)
        return -r;
    pthread_mutex_init(&m->lock, NULL);
    return 0;
}

int npv_aicore_model_new(struct npv_ctx *ctx, const struct npv_aicore_model_config *mcfg,
                         struct npv_aicore_model **out)
{
    struct npv_aicore_model *m = calloc(1, sizeof(*m));
    int r;
    if (m == NULL)
        return -ENOMEM;
    atomic_init(&m->compute, NULL);
    r = apply_config(m, mcfg);
    if (r < 0)
        goto err_free;
    r = alloc_memory(m);
    if (r < 0)
        goto err_mem;
    r = init_sync(m);
    if (r < 0)
        goto err_mem;
    m->t0_ns = npv_now_ns();

    const uint32_t rw = NPV_VUS_REGION_READ | NPV_VUS_REGION_WRITE;
    struct npv_vus_config cfg = {
        .vendor_id = AICORE_PCI_VENDOR,
        .device_id = AICORE_PCI_DEVICE,
        .subsys_vendor_id = AICORE_PCI_VENDOR,
        .subsys_id = AICORE_PCI_DEVICE,
        .class_code = AICORE_PCI_CLASS,
        .arg = m,
        .reset = model_reset,
        .disconnect = model_disconnect,
    };
    cfg.bars[AICORE_BAR_GLOBAL] =
        (struct npv_vus_region){.size = AICORE_GLOBAL_SIZE, .flags = rw, .access = global_access};
    cfg.bars[AICORE_BAR_TESTPORT] =
        (struct npv_vus_region){.size = AICORE_TESTPORT_SIZE, .flags = rw, .access = port_access};
    /* The windows: shared memory, offered whole for mmap unless they are to stay trapped. */
    cfg.bars[AICORE_BAR_CTRL] = (struct npv_vus_region){.size = AICORE_CTRL_BAR_SIZE,
                                                        .flags = rw,
                                                        .shared = true,
                                                        .nr_areas = m->trapped_windows ? 0 : 1,
                                                        .areas = {{0, AICORE_CTRL_BAR_SIZE}},
                                                        .access = aicore_ctrl_access};
    cfg.bars[AICORE_BAR_PMU] = (struct npv_vus_region){.size = AICORE_PMU_BAR_SIZE,
                                                       .flags = rw,
                                                       .shared = true,
                                                       .nr_areas = m->trapped_windows ? 0 : 1,
                                                       .areas = {{0, AICORE_PMU_BAR_SIZE}},
                                                       .access = aicore_pmu_access};
    r = npv_vus_new(ctx, &cfg, &m->srv);
    if (r < 0)
        goto err_sync;
    m->ctrl_mem = npv_vus_region_mem(m->srv, AICORE_BAR_CTRL);
    m->pmu_mem = npv_vus_region_mem(m->srv, AICORE_BAR_PMU);
    if (m->ctrl_mem == NULL || m->pmu_mem == NULL) {
        r = -ENOMEM;
        goto err_srv;
    }
    device_reset(m);
    r = pthread_create(&m->worker, NULL, aicore_worker_main, m);
    if (r != 0) {
        r = -r;
        goto err_srv;
    }
    m->worker_started = true;
    *out = m;
    return 0;

err_srv:
    npv_vus_free(m->srv);
err_sync:
    pthread_cond_destroy(&m->wake);
    pthread_mutex_destroy(&m->lock);
err_mem:
    free_memory(m);
err_free:
    free(m);
    return r;
}

void npv_aicore_model_free(struct npv_aicore_model *m)
{
    if (m == NULL)
        return;
    if (m->worker_started) {
        pthread_mutex_lock(&m->lock);
        m->stop = true;
        pthread_cond_signal(&m->wake);
        pthread_mutex_unlock(&m->lock);
        pthread_join(m->worker, NULL);
    }
    npv_vus_free(m->srv);
    pthread_cond_destroy(&m->wake);
    pthread_mutex_destroy(&m->lock);
    free_memory(m);
    free(m);
}

struct npv_vus *npv_aicore_model_server(struct npv_aicore_model *m)
{
    return m->srv;
}

int npv_aicore_serve_config(const char *socket_path, bool once,
                            const struct npv_aicore_model_config *cfg)
{
    struct npv_ctx *ctx;
    struct npv_aicore_model *m;
    int r = npv_ctx_new(&ctx);
    if (r < 0)
        return r;
    r = npv_aicore_model_new(ctx, cfg, &m);
    if (r < 0)
        goto out_ctx;
    r = npv_vus_listen(m->srv, socket_path);
    if (r == 0)
        r = npv_vus_run(m->srv, once);
    npv_aicore_model_free(m);
out_ctx:
    npv_ctx_free(ctx);
    return r;
}

int npv_aicore_serve(const char *socket_path, bool once)
{
    return npv_aicore_serve_config(socket_path, once, NULL);
}

void npv_aicore_model_count_compute(struct npv_aicore_model *m, struct npv_model_compute *c)
{
    atomic_store_explicit(&m->compute, c, memory_order_relaxed);
}

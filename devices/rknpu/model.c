/* SPDX-License-Identifier: MIT */
/*
 * The RKNPU stand-in as a vfio-user server: PCI identity, the three cores'
 * register windows (trapped, 32-bit accesses only, as the NPU's APB
 * registers are), the per-core soft reset, and the test port in BAR2. The
 * core engine is model_core.c; the matmul, model_matmul.c.
 *
 * Strict like the chip: a run starts only on an OPERATION_ENABLE 0->1 edge
 * (both drivers write 0 between runs); a core held in reset reads 0 and drops
 * writes; interrupt status is RAW & MASK and only INTERRUPT_CLEAR lowers it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

#define PC_REG(c, off) ((c)->regs[(off) / 4u])

static bool core_in_reset(const struct rknpu_core *c)
{
    return c->reset_lines != 0 || c->held_in_reset;
}

/*
 * OPERATION_ENABLE rose. Under lock. 0, or a forwarding model's refusal
 * (the core stays idle, the write fails).
 */
static int start_run(struct rknpu_core *c)
{
    uint32_t base = PC_REG(c, RKNPU_PC_BASE_ADDRESS);
    uint32_t con = PC_REG(c, RKNPU_PC_TASK_CON);
    /* A busy or stalled core does not take a new program; PC_SEL (slave mode) fetches nothing. */
    if (c->state != RKNPU_CORE_IDLE || (base & RKNPU_PC_SEL) ||
        (base & RKNPU_PC_BASE_ADDRESS_MASK) == 0)
        return 0;
    struct rknpu_run rn = {
        .base = base & RKNPU_PC_BASE_ADDRESS_MASK,
        .amount = PC_REG(c, RKNPU_PC_REGISTER_AMOUNTS) & RKNPU_PC_REGISTER_AMOUNTS_MASK,
        .tasks = con & RKNPU_TASK_CON_TASK_NUMBER_MASK,
        .pingpong = (con & RKNPU_TASK_CON_TASK_PP_EN) != 0,
        .int_mask = PC_REG(c, RKNPU_PC_INTERRUPT_MASK),
    };
    if (c->m->forwarding) {
        int r = c->m->fwd.start ? c->m->fwd.start(c->m->fwd.arg, c->index, c->gen, &rn) : 0;
        if (r < 0)
            return r;
    }
    if (con & RKNPU_TASK_CON_TASK_COUNT_CLEAR)
        c->task_status = 0;
    c->pending = rn;
    c->state = RKNPU_CORE_RUNNING;
    if (c->m->forwarding) {
        c->runs++; /* the core thread counts its own runs as it takes them */
        return 0;
    }
    c->run_pending = true;
    pthread_cond_broadcast(&c->cond);
    return 0;
}

/* The reset lines changed. Under lock. */
static void soft_reset_write(struct rknpu_core *c, uint32_t v)
{
    uint32_t lines = v & RKNPU_SOFT_RESET_LINES;
    uint32_t was = c->reset_lines;
    c->reset_lines = lines;
    if (lines != 0) {
        rknpu_core_enter_reset(c);
        return;
    }
    if (was == 0)
        return;
    if (c->fault == RKNPU_FAULT_RESET_FAILS_ONCE) {
        c->fault = RKNPU_FAULT_NONE;
        c->held_in_reset = true;
        c->reset_failures++;
        return;
    }
    c->held_in_reset = false;
    c->state = RKNPU_CORE_IDLE;
    c->resets++;
}

static int core_write(struct rknpu_core *c, uint32_t off, uint32_t v)
{
    if (off == RKNPU_GLOBAL_SOFT_RESET) {
        /* Absent (RKNPU_TP_SOFT_RESET_ABSENT): an unused offset, as on the SoC. */
        if (!atomic_load(&c->m->soft_reset_absent))
            soft_reset_write(c, v);
        return 0;
    }
    if (core_in_reset(c))
        return 0;
    uint32_t old = c->regs[off / 4u];
    switch (off) {
    case RKNPU_PC_VERSION:
    case RKNPU_PC_VERSION_NUM:
    case RKNPU_PC_INTERRUPT_STATUS:
    case RKNPU_PC_INTERRUPT_RAW_STATUS:
    case RKNPU_PC_TASK_STATUS:
        return 0; /* read-only */
    case RKNPU_PC_INTERRUPT_CLEAR:
        c->raw_status &= ~v;
        return 0;
    case RKNPU_PC_INTERRUPT_MASK:
        c->regs[off / 4u] = v & RKNPU_INT_VALID_MASK;
        /* Unmasking a pending bit asserts the line. */
        if (c->raw_status & v & ~old)
            npv_vus_irq_raise(c->m->srv, RKNPU_MSIX_IRQ_INDEX, RKNPU_MSIX_VECTOR(c->index));
        return 0;
    case RKNPU_PC_OPERATION_ENABLE:
        if (!(old & RKNPU_PC_OP_EN) && (v & RKNPU_PC_OP_EN)) {
            int r = start_run(c);
            if (r < 0)
                return r; /* refused: the enable stays low, as if never written */
        }
        c->regs[off / 4u] = v;
        return 0;
    default:
        c->regs[off / 4u] = v;
        return 0;
    }
}

static uint32_t core_read(struct rknpu_core *c, uint32_t off)
{
    if (off == RKNPU_GLOBAL_SOFT_RESET) {
        if (atomic_load(&c->m->soft_reset_absent))
            return 0;
        return RKNPU_SOFT_RESET_PRESENT | c->reset_lines |
               (core_in_reset(c) ? RKNPU_SOFT_RESET_IN_RESET : 0u);
    }
    if (core_in_reset(c))
        return 0;
    switch (off) {
    case RKNPU_PC_VERSION:
        return RKNPU_VERSION_VALUE;
    case RKNPU_PC_VERSION_NUM:
        return atomic_load(&c->m->version_num);
    case RKNPU_PC_INTERRUPT_CLEAR:
        return 0;
    case RKNPU_PC_INTERRUPT_STATUS:
        return c->raw_status & PC_REG(c, RKNPU_PC_INTERRUPT_MASK);
    case RKNPU_PC_INTERRUPT_RAW_STATUS:
        return c->raw_status;
    case RKNPU_PC_TASK_STATUS:
        return c->task_status;
    default:
        return c->regs[off / 4u];
    }
}

static uint32_t port_core_read(const struct rknpu_core *c, uint32_t reg)
{
    switch (reg) {
    case RKNPU_TP_FAULT:
        return c->fault;
    case RKNPU_TP_TASKS_EXECUTED:
        return c->tasks_executed;
    case RKNPU_TP_DMA_FAULTS:
        return c->dma_faults;
    case RKNPU_TP_RESETS:
        return c->resets;
    case RKNPU_TP_CONFIG_ERRORS:
        return c->config_errors;
    case RKNPU_TP_FAULT_IOVA:
        return c->fault_iova;
    case RKNPU_TP_BAD_WORD_LO:
        return (uint32_t)c->bad_word;
    case RKNPU_TP_BAD_WORD_HI:
        return (uint32_t)(c->bad_word >> 32);
    case RKNPU_TP_STATE:
        return core_in_reset(c) ? (uint32_t)RKNPU_CORE_IN_RESET : (uint32_t)c->state;
    case RKNPU_TP_RUNS:
        return c->runs;
    case RKNPU_TP_RESET_FAILURES:
        return c->reset_failures;
    default:
        return 0;
    }
}

static int port_access(struct npv_rknpu_model *m, uint32_t off, uint32_t *v, bool is_write)
{
    if (off < RKNPU_TP_CORE(0)) {
        if (off == RKNPU_TP_ID && !is_write)
            *v = RKNPU_TP_ID_VALUE;
        else if (off == RKNPU_TP_TASK_DELAY_US && is_write)
            atomic_store(&m->task_delay_us, *v > 1000000u ? 1000000u : *v);
        else if (off == RKNPU_TP_TASK_DELAY_US)
            *v = atomic_load(&m->task_delay_us);
        else if (off == RKNPU_TP_VERSION_NUM && is_write)
            atomic_store(&m->version_num, *v);
        else if (off == RKNPU_TP_VERSION_NUM)
            *v = atomic_load(&m->version_num);
        else if (off == RKNPU_TP_SOFT_RESET_ABSENT && is_write)
            atomic_store(&m->soft_reset_absent, *v != 0);
        else if (off == RKNPU_TP_SOFT_RESET_ABSENT)
            *v = atomic_load(&m->soft_reset_absent) ? 1u : 0u;
        else if (!is_write)
            *v = 0;
        return 0;
    }
    uint32_t idx = (off - RKNPU_TP_CORE(0)) / (RKNPU_TP_CORE(1) - RKNPU_TP_CORE(0));
    uint32_t reg = (off - RKNPU_TP_CORE(0)) % (RKNPU_TP_CORE(1) - RKNPU_TP_CORE(0));
    if (idx >= RKNPU_NUM_CORES) {
        if (!is_write)
            *v = 0;
        return 0;
    }
    struct rknpu_core *c = &m->cores[idx];
    if (is_write && reg == RKNPU_TP_FAULT && *v > RKNPU_FAULT_RESET_FAILS_ONCE)
        return -EINVAL;
    pthread_mutex_lock(&c->lock);
    if (is_write && reg == RKNPU_TP_FAULT)
        c->fault = *v;
    else if (!is_write)
        *v = port_core_read(c, reg);
    pthread_mutex_unlock(&c->lock);
    return 0;
}

static int regs_access(void *arg, uint32_t index, uint64_t off, void *buf, size_t len,
                       bool is_write)
{
    struct npv_rknpu_model *m = arg;
    uint32_t v = 0;
    int r = 0;
    if (len != 4 || (off & 3u))
        return -EINVAL; /* 32-bit registers on a 32-bit APB */
    if (is_write)
        memcpy(&v, buf, 4);
    if (index == RKNPU_TP_BAR_INDEX) {
        r = port_access(m, (uint32_t)off, &v, is_write);
    } else if (index == RKNPU_BAR_INDEX && off < RKNPU_NUM_CORES * RKNPU_CORE_WINDOW_SIZE) {
        struct rknpu_core *c = &m->cores[off / RKNPU_CORE_WINDOW_SIZE];
        uint32_t reg = (uint32_t)(off % RKNPU_CORE_WINDOW_SIZE);
        pthread_mutex_lock(&c->lock);
        if (is_write)
            r = core_write(c, reg, v);
        else
            v = core_read(c, reg);
        pthread_mutex_unlock(&c->lock);
    } else {
        v = 0; /* the hole between the windows and the MSI-X table */
    }
    if (!is_write && r == 0)
        memcpy(buf, &v, 4);
    return r;
}

/* DEVICE_RESET: every core through a reset that cannot fail, faults disarmed. */
static int model_reset(void *arg)
{
    struct npv_rknpu_model *m = arg;
    for (unsigned i = 0; i < RKNPU_NUM_CORES; i++) {
        struct rknpu_core *c = &m->cores[i];
        pthread_mutex_lock(&c->lock);
        rknpu_core_enter_reset(c);
        c->reset_lines = 0;
        c->held_in_reset = false;
        c->fault = RKNPU_FAULT_NONE;
        c->state = RKNPU_CORE_IDLE;
        pthread_mutex_unlock(&c->lock);
    }
    return 0;
}

/* The server's callbacks take the model; a forwarder's take its own argument. */
static int fwd_dma_map(void *arg, npv_iova_t iova, uint64_t size, unsigned prot, void *vaddr,
                       int fd, uint64_t fd_offset)
{
    struct npv_rknpu_model *m = arg;
    return m->fwd.dma_map ? m->fwd.dma_map(m->fwd.arg, iova, size, prot, vaddr, fd, fd_offset) : 0;
}

static void fwd_dma_unmap(void *arg, npv_iova_t iova, uint64_t size)
{
    struct npv_rknpu_model *m = arg;
    if (m->fwd.dma_unmap)
        m->fwd.dma_unmap(m->fwd.arg, iova, size);
}

static void fwd_disconnect(void *arg)
{
    struct npv_rknpu_model *m = arg;
    if (m->fwd.disconnect)
        m->fwd.disconnect(m->fwd.arg);
}

static void cores_stop(struct npv_rknpu_model *m)
{
    atomic_store(&m->stop, true);
    for (unsigned i = 0; i < RKNPU_NUM_CORES; i++) {
        struct rknpu_core *c = &m->cores[i];
        pthread_mutex_lock(&c->lock);
        pthread_cond_broadcast(&c->cond);
        pthread_mutex_unlock(&c->lock);
        if (c->thread_started)
            pthread_join(c->thread, NULL);
        c->thread_started = false;
    }
}

static int core_init(struct npv_rknpu_model *m, unsigned i)
{
    struct rknpu_core *c = &m->cores[i];
    pthread_condattr_t attr;
    c->m = m;
    c->index = i;
    c->state = RKNPU_CORE_IDLE;
    pthread_mutex_init(&c->lock, NULL);
    /* The per-task delay waits on CLOCK_MONOTONIC: a wall-clock step must not stretch it. */
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cond, &attr);
    pthread_condattr_destroy(&attr);
    return 0;
}

static int model_new(struct npv_ctx *ctx, const struct rknpu_forward *fwd,
                     struct npv_rknpu_model **out)
{
    struct npv_rknpu_model *m = calloc(1, sizeof(*m));
    int r;
    if (m == NULL)
        return -ENOMEM;
    atomic_init(&m->stop, false);
    atomic_init(&m->task_delay_us, 0u);
    atomic_init(&m->compute, NULL);
    for (unsigned i = 0; i < RKNPU_NUM_CORES; i++)
        core_init(m, i);
    if (fwd != NULL) {
        m->forwarding = true;
        m->fwd = *fwd;
    }

    struct npv_vus_config cfg = {
        .vendor_id = RKNPU_PCI_VENDOR,
        .device_id = RKNPU_PCI_DEVICE,
        .subsys_vendor_id = RKNPU_PCI_VENDOR,
        .subsys_id = RKNPU_PCI_DEVICE,
        .class_code = RKNPU_PCI_CLASS,
        .msix_vectors = RKNPU_MSIX_VECTORS,
        .msix_bar = RKNPU_BAR_INDEX,
        .msix_table_offset = RKNPU_MSIX_TABLE,
        .msix_pba_offset = RKNPU_MSIX_PBA,
        .arg = m,
        .reset = model_reset,
    };
    if (fwd != NULL) {
        cfg.dma_map = fwd_dma_map;
        cfg.dma_unmap = fwd_dma_unmap;
        cfg.disconnect = fwd_disconnect;
    }
    cfg.bars[RKNPU_BAR_INDEX] = (struct npv_vus_region){
        .size = RKNPU_BAR0_SIZE,
        .flags = NPV_VUS_REGION_READ | NPV_VUS_REGION_WRITE,
        .access = regs_access,
    };
    cfg.bars[RKNPU_TP_BAR_INDEX] = (struct npv_vus_region){
        .size = RKNPU_TP_BAR_SIZE,
        .flags = NPV_VUS_REGION_READ | NPV_VUS_REGION_WRITE,
        .access = regs_access,
    };
    r = npv_vus_new(ctx, &cfg, &m->srv);
    if (r < 0)
        goto err_free;
    for (unsigned i = 0; i < RKNPU_NUM_CORES && !m->forwarding; i++) {
        r = -pthread_create(&m->cores[i].thread, NULL, rknpu_core_main, &m->cores[i]);
        if (r < 0)
            goto err_threads;
        m->cores[i].thread_started = true;
    }
    *out = m;
    return 0;

err_threads:
    cores_stop(m);
    npv_vus_free(m->srv);
err_free:
    for (unsigned i = 0; i < RKNPU_NUM_CORES; i++) {
        pthread_cond_destroy(&m->cores[i].cond);
        pthread_mutex_destroy(&m->cores[i].lock);
    }
    free(m);
    return r;
}

int npv_rknpu_model_new(struct npv_ctx *ctx, struct npv_rknpu_model **out)
{
    return model_new(ctx, NULL, out);
}

int npv_rknpu_model_new_forwarding(struct npv_ctx *ctx, const struct rknpu_forward *fwd,
                                   struct npv_rknpu_model **out)
{
    if (fwd == NULL)
        return -EINVAL;
    return model_new(ctx, fwd, out);
}

void npv_rknpu_model_finish(struct npv_rknpu_model *m, unsigned core, uint64_t gen,
                            uint32_t raw_bits, uint32_t tasks_done)
{
    if (core >= RKNPU_NUM_CORES)
        return;
    struct rknpu_core *c = &m->cores[core];
    pthread_mutex_lock(&c->lock);
    if (c->gen == gen && c->state == RKNPU_CORE_RUNNING) {
        c->task_status = (c->task_status + tasks_done) & RKNPU_TASK_STATUS_COUNT_MASK;
        c->tasks_executed += tasks_done;
        if (raw_bits & RKNPU_INT_DMA_ERROR)
            c->dma_faults++;
        c->state = RKNPU_CORE_IDLE;
        rknpu_core_raise(c, raw_bits);
    }
    pthread_mutex_unlock(&c->lock);
}

void npv_rknpu_model_free(struct npv_rknpu_model *m)
{
    if (m == NULL)
        return;
    cores_stop(m);
    npv_vus_free(m->srv);
    for (unsigned i = 0; i < RKNPU_NUM_CORES; i++) {
        pthread_cond_destroy(&m->cores[i].cond);
        pthread_mutex_destroy(&m->cores[i].lock);
    }
    free(m);
}

struct npv_vus *npv_rknpu_model_server(struct npv_rknpu_model *m)
{
    return m->srv;
}

int npv_rknpu_serve(const char *socket_path, bool once)
{
    struct npv_ctx *ctx = NULL;
    struct npv_rknpu_model *m = NULL;
    int r = npv_ctx_new(&ctx);
    if (r == 0)
        r = npv_rknpu_model_new(ctx, &m);
    if (r == 0)
        r = npv_vus_listen(m->srv, socket_path);
    if (r == 0)
        r = npv_vus_run(m->srv, once);
    npv_rknpu_model_free(m);
    npv_ctx_free(ctx);
    return r;
}

void npv_rknpu_model_count_compute(struct npv_rknpu_model *m, struct npv_model_compute *c)
{
    atomic_store_explicit(&m->compute, c, memory_order_relaxed);
}

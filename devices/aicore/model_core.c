/* SPDX-License-Identifier: MIT */
/*
 * The model's worker: it steps every sub-core's state machine (table lookup,
 * ready record, window open, ACK, task, FIN, exit), runs the copy engine and
 * writes the result record. One thread for all sub-cores (a model choice):
 * simpler's simulator runs one OS thread per sub-core and caps a case at 8
 * clusters for the thread count (SIM_AUTO_BLOCKDIM in
 * src/common/platform/sim/host/device_runner_base.h); that many spinning
 * threads on a two-vCPU machine livelock.
 *
 * Locking: decisions are taken under the model lock; every DMA into client
 * memory runs without it (a message-based DMA needs the event loop, which may
 * be waiting for the lock), and its outcome is committed only if no RESET,
 * LAUNCH or client loss happened meanwhile (the generation did not move).
 * Device memory is touched by this thread only. The windows' registers are
 * in shared memory the client may store to at any time: they are read and
 * written as single atomic words, and polled (aicore_windows_poll).
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "deadline.h"
#include "model_internal.h"

#define IDLE_WAIT_NS 100000000ull /* a wake-up that nothing signalled is only a safety net */
#define IDLE_POLL_NS 1000000ull   /* mapped windows without a run: a look per millisecond */
#define POLL_SPIN_NS 2000000ull
#define POLL_NAP_NS  20000l
#define POLL_DOZE_NS 100000000ull /* a run stuck this long is looked at once per IDLE_POLL_NS */

static bool same_gen(const struct npv_aicore_model *m, uint64_t gen)
{
    return m->gen == gen;
}

static void write_result(struct npv_aicore_model *m, uint32_t verdict, uint64_t gen);

void aicore_fatal(struct npv_aicore_model *m, uint32_t i, uint64_t bits)
{
    aicore_error(m, bits);
    m->poisoned = true;
    if (i != UINT32_MAX) {
        m->core[i].state = CORE_FAULT;
        if (m->fault_core == 0)
            m->fault_core = i + 1u;
    }
    if (m->result_pending)
        write_result(m, AICORE_VERDICT_ERROR, m->gen);
}

/* ---- device memory ---- */

/* A pointer to [addr, addr + len) of device memory, or NULL when any byte is outside. */
static uint8_t *devmem_at(struct npv_aicore_model *m, uint64_t addr, uint64_t len)
{
    if (addr < AICORE_DEVMEM_BASE || len > m->devmem_size ||
        addr - AICORE_DEVMEM_BASE > m->devmem_size - len)
        return NULL;
    return m->devmem + (addr - AICORE_DEVMEM_BASE);
}

/* ---- result record ---- */

/* Under lock; drops the lock around the DMA. Ends the run. */
static void write_result(struct npv_aicore_model *m, uint32_t verdict, uint64_t gen)
{
    struct aicore_result rec = {
        .verdict = verdict,
        .fault_core = (uint32_t)m->fault_core,
        .error = m->global_err,
        .tasks_done = m->run_tasks,
        .cores_exited = m->exited,
        .start_sys_cnt = m->run_start_cnt,
        .end_sys_cnt = aicore_sys_cnt(m),
    };
    uint64_t iova = m->r_result, epoch = m->r_epoch;
    m->result_pending = false;
    pthread_mutex_unlock(&m->lock);
    /* The body first, the epoch in a write of its own after it. */
    int r = npv_vus_dma_write(m->srv, iova + 8, (const uint8_t *)&rec + 8, sizeof(rec) - 8);
    if (r == 0)
        r = npv_vus_dma_write(m->srv, iova, &epoch, sizeof(epoch));
    pthread_mutex_lock(&m->lock);
    if (!same_gen(m, gen))
        return;
    m->running = false;
    if (r < 0) {
        aicore_error(m, AICORE_ERR_DMA_FAULT);
        m->poisoned = true;
    }
}

/* ---- copy engine ---- */

static void count_copy(struct npv_aicore_model *m, uint64_t dir, uint64_t dev)
{
    if (dir == AICORE_COPY_D2H) {
        m->copies_d2h++;
        return;
    }
    m->copies_h2d++;
    for (uint32_t i = 0; i < m->nr_copy_counts; i++) {
        if (m->copy_counts[i].addr == dev) {
            m->copy_counts[i].count++;
            return;
        }
    }
    if (m->nr_copy_counts < AICORE_MODEL_COPY_ADDRS)
        m->copy_counts[m->nr_copy_counts++] = (struct copy_count){.addr = dev, .count = 1};
}

static void run_copy(struct npv_aicore_model *m)
{
    uint64_t host = m->c_host, dev = m->c_dev, len = m->c_len, dir = m->c_dir, gen = m->gen;
    bool fail = m->arm_fail_copy;
    m->arm_fail_copy = false;
    m->copy_pending = false;
    uint8_t *p = NULL;
    if (len != 0 && len <= AICORE_COPY_MAX_LEN)
        p = devmem_at(m, dev, len);
    pthread_mutex_unlock(&m->lock);
    int r = -EINVAL;
    if (!fail && p != NULL && dir == AICORE_COPY_H2D)
        r = npv_vus_dma_read(m->srv, host, p, len);
    else if (!fail && p != NULL && dir == AICORE_COPY_D2H)
        r = npv_vus_dma_write(m->srv, host, p, len);
    pthread_mutex_lock(&m->lock);
    if (!same_gen(m, gen))
        return;
    m->copy_done++;
    if (r < 0) {
        m->copy_status = AICORE_COPY_ERROR;
        m->copies_failed++;
        aicore_error(m, AICORE_ERR_COPY);
        return;
    }
    m->copy_status = AICORE_COPY_DONE;
    count_copy(m, dir, dev);
}

/* ---- sub-core steps (each under lock) ---- */

static bool table_entry_is(struct npv_aicore_model *m, uint64_t table, uint32_t id, uint64_t base)
{
    uint64_t at = table + (uint64_t)id * AICORE_TABLE_ENTRY_SIZE;
    if (table == 0 || at < table)
        return false;
    uint8_t *p = devmem_at(m, at, AICORE_TABLE_ENTRY_SIZE);
    if (p == NULL)
        return false;
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v == base + (uint64_t)id * AICORE_WINDOW_STRIDE;
}

/* Where sub-core c's handshake record is in this run's workers array. */
static uint64_t record_iova(const struct npv_aicore_model *m, const struct aicore_subcore *c)
{
    return m->r_workers + (uint64_t)c->rank * sizeof(struct aicore_handshake);
}

/*
 * Back under the lock after a DMA made without it: true when the run it was
 * made for is still the current one and the DMA went through. A refused DMA
 * is the sub-core's fatal error.
 */
static bool dma_landed(struct npv_aicore_model *m, uint32_t id, uint64_t gen, int r)
{
    pthread_mutex_lock(&m->lock);
    if (!same_gen(m, gen))
        return false;
    if (r < 0) {
        aicore_fatal(m, id, AICORE_ERR_DMA_FAULT);
        return false;
    }
    return true;
}

static void core_exit(struct npv_aicore_model *m, struct aicore_subcore *c)
{
    c->last_dmb = AICORE_DMB_EXIT;
    if (c->arm_stuck_exit) {
        /* It never leaves its loop: no EXITED, no end of run, until a reset. */
        c->arm_stuck_exit = false;
        c->state = CORE_LOST;
        return;
    }
    aicore_set_cond(m, (uint32_t)(c - m->core), AICORE_COND_EXITED);
    c->state = CORE_EXITED;
    m->exited++;
}

static void step_find_table(struct npv_aicore_model *m, uint32_t id)
{
    struct aicore_subcore *c = &m->core[id];
    uint64_t pmu_base = m->pmu_in_ctrl ? AICORE_CTRL_REG_BASE : AICORE_PMU_REG_BASE;
    if (!table_entry_is(m, m->r_ctrl_table, id, AICORE_CTRL_REG_BASE) ||
        (m->r_pmu_table != 0 && !table_entry_is(m, m->r_pmu_table, id, pmu_base))) {
        /* It cannot find its DMB: it never reports ready, the host's deadline must catch it. */
        m->table_mismatches++;
        c->state = CORE_LOST;
        return;
    }
    /* core_type@16 and physical_core_id@20 of simpler's Handshake, one 8-byte write. */
    uint32_t ident[2] = {aicore_core_type(m->clusters, id),
                         c->arm_bad_phys ? AICORE_BAD_PHYS_ID(id) : id};
    static_assert(offsetof(struct aicore_handshake, physical_core_id) ==
                      offsetof(struct aicore_handshake, core_type) + 4,
                  "identity is one write");
    c->arm_bad_phys = false;
    uint32_t done = c->rank + 1u;
    uint64_t rec = record_iova(m, c), gen = m->gen;
    pthread_mutex_unlock(&m->lock);
    /* Identity, then done in a later write: the host reads done first, as on the part. */
    int r = npv_vus_dma_write(m->srv, rec + offsetof(struct aicore_handshake, core_type), ident,
                              sizeof(ident));
    if (r == 0)
        r = npv_vus_dma_write(m->srv, rec + offsetof(struct aicore_handshake, done), &done,
                              sizeof(done));
    if (dma_landed(m, id, gen, r))
        c->state = CORE_WAIT_OPEN;
}

static void step_wait_open(struct npv_aicore_model *m, uint32_t id)
{
    struct aicore_subcore *c = &m->core[id];
    if (c->dmb == 0 || c->dmb == c->last_dmb)
        return;
    if (c->dmb == AICORE_DMB_EXIT) {
        core_exit(m, c);
        return;
    }
    aicore_set_cond(m, id, AICORE_COND_IDLE);
    uint64_t rec = record_iova(m, c), gen = m->gen, task = 0;
    pthread_mutex_unlock(&m->lock);
    int r = npv_vus_dma_read(m->srv, rec + offsetof(struct aicore_handshake, task), &task,
                             sizeof(task));
    if (!dma_landed(m, id, gen, r))
        return;
    if (task == 0) {
        aicore_fatal(m, id, AICORE_ERR_BAD_PAYLOAD);
        return;
    }
    c->task_ptr = task;
    /* A token written as the opening value is dispatched on the next step. */
    c->last_dmb = AICORE_DMB_IDLE;
    c->state = CORE_IDLE;
}

static void step_idle(struct npv_aicore_model *m, uint32_t id, uint64_t now)
{
    struct aicore_subcore *c = &m->core[id];
    uint32_t v = c->dmb;
    if (v == 0 || v == c->last_dmb)
        return;
    c->last_dmb = v;
    if (v == AICORE_DMB_EXIT) {
        core_exit(m, c);
        return;
    }
    if (v == AICORE_DMB_IDLE)
        return;
    m->dispatches++;
    c->token = v;
    c->got_token = true;
    if (c->arm_delay_ack_us != 0) {
        c->ack_due_ns = now + c->arm_delay_ack_us * 1000u;
        c->arm_delay_ack_us = 0;
        c->state = CORE_ACK_WAIT;
        return;
    }
    aicore_set_cond(m, id, AICORE_COND_ACK(v));
    c->state = CORE_RUN;
}

/* ---- kernels ---- */

static bool payload_valid(const struct npv_aicore_model *m, uint32_t id,
                          const struct aicore_task_payload *p, uint32_t token)
{
    uint32_t type = aicore_core_type(m->clusters, id);
    if (p->token != token || p->reserved[0] != 0 || p->reserved[1] != 0 || p->a == 0 || p->b == 0 ||
        p->c == 0)
        return false;
    if (p->kernel == AICORE_KERNEL_VADD)
        return type == AICORE_CORE_TYPE_AIV && p->n >= 1 && p->n <= AICORE_VADD_MAX_N &&
               p->m == 0 && p->k == 0;
    if (p->kernel == AICORE_KERNEL_MATMUL)
        return type == AICORE_CORE_TYPE_AIC && p->m >= 1 && p->m <= AICORE_MATMUL_MAX &&
               p->n >= 1 && p->n <= AICORE_MATMUL_MAX && p->k >= 1 && p->k <= AICORE_MATMUL_MAX;
    return false;
}

/* Operands in, result out, by DMA. 0, or -EFAULT for a DMA the IOMMU refused. */
static int run_kernel(struct npv_aicore_model *m, const struct aicore_task_payload *p)
{
    float *a = m->scratch[0], *b = m->scratch[1], *c = m->scratch[2];
    uint64_t na, nb, nc;
    if (p->kernel == AICORE_KERNEL_VADD) {
        na = nb = nc = p->n;
    } else {
        na = (uint64_t)p->m * p->k;
        nb = (uint64_t)p->k * p->n;
        nc = (uint64_t)p->m * p->n;
    }
    int r = npv_vus_dma_read(m->srv, p->a, a, na * sizeof(float));
    if (r == 0)
        r = npv_vus_dma_read(m->srv, p->b, b, nb * sizeof(float));
    if (r < 0)
        return -EFAULT;
    if (p->kernel == AICORE_KERNEL_VADD) {
        for (uint64_t i = 0; i < nc; i++)
            c[i] = a[i] + b[i];
    } else {
        for (uint32_t i = 0; i < p->m; i++)
            for (uint32_t j = 0; j < p->n; j++) {
                float acc = 0.0f;
                for (uint32_t q = 0; q < p->k; q++) {
                    float prod = a[(uint64_t)i * p->k + q] * b[(uint64_t)q * p->n + j];
                    acc = acc + prod;
                }
                c[(uint64_t)i * p->n + j] = acc;
            }
    }
    return npv_vus_dma_write(m->srv, p->c, c, nc * sizeof(float)) < 0 ? -EFAULT : 0;
}

static uint64_t pmu_ld64(const struct npv_aicore_model *m, uint32_t id, uint32_t lo)
{
    return aicore_cell_ld(aicore_pmu_cell(m, id, lo)) |
           (uint64_t)aicore_cell_ld(aicore_pmu_cell(m, id, lo + 4u)) << 32;
}

/* A counter the host may read (and so clear) between two of our updates: add, never overwrite. */
static void pmu_add(const struct npv_aicore_model *m, uint32_t id, uint32_t reg, uint32_t n)
{
    __atomic_fetch_add(aicore_pmu_cell(m, id, reg), n, __ATOMIC_ACQ_REL);
}

/*
 * The PMU sees the task's cycles [c0, c0 + work) inside [START_CYC, STOP_CYC],
 * while CTRL_0 enables counting and the sub-core's CTRL gate is open (it opens
 * it around a task on a run with PMU on).
 */
static void pmu_account(struct npv_aicore_model *m, uint32_t id, uint32_t work)
{
    struct aicore_subcore *c = &m->core[id];
    uint64_t c0 = c->cycles, c1 = c0 + work;
    c->cycles = c1;
    uint32_t ctrl0 = aicore_cell_ld(aicore_pmu_cell(m, id, AICORE_PMU_CTRL_0));
    if (!(c->ctrl & AICORE_CTRL_CTRL_PMU) || !(ctrl0 & AICORE_PMU_CTRL_ENABLE) || work == 0)
        return;
    uint64_t start = pmu_ld64(m, id, AICORE_PMU_START_CYC_LO);
    uint64_t stop = pmu_ld64(m, id, AICORE_PMU_STOP_CYC_LO);
    uint64_t lo = c0 > start ? c0 : start;
    uint64_t hi = c1 - 1 < stop ? c1 - 1 : stop;
    if (hi < lo)
        return;
    uint64_t n = hi - lo + 1;
    /* The 64-bit total is two registers: carry from the low word into the high one. */
    uint32_t *tlo = aicore_pmu_cell(m, id, AICORE_PMU_CNT_TOTAL_LO);
    uint32_t before = __atomic_fetch_add(tlo, (uint32_t)n, __ATOMIC_ACQ_REL);
    uint32_t carry = (uint32_t)(((uint64_t)before + (uint32_t)n) >> 32);
    pmu_add(m, id, AICORE_PMU_CNT_TOTAL_HI, (uint32_t)(n >> 32) + carry);
    for (uint32_t i = 0; i < AICORE_PMU_COUNTERS; i++) {
        uint32_t evt = aicore_cell_ld(aicore_pmu_cell(m, id, AICORE_PMU_EVT_IDX(i)));
        pmu_add(m, id, AICORE_PMU_CNT(i), (uint32_t)aicore_pmu_event_count(evt, n));
    }
}

static void step_run(struct npv_aicore_model *m, uint32_t id, uint64_t now)
{
    struct aicore_subcore *c = &m->core[id];
    /* PMU begin: the gate opens around the kernel on a run with PMU on. */
    if (m->r_pmu_table != 0)
        aicore_set_ctrl(m, id, c->ctrl | AICORE_CTRL_CTRL_PMU);
    if (c->arm_hang) {
        c->arm_hang = false;
        c->hung_since_ns = now;
        c->state = CORE_HUNG;
        return;
    }
    uint32_t token = c->token;
    uint64_t slot = c->task_ptr + (uint64_t)(token & 1u) * sizeof(struct aicore_task_payload);
    uint64_t gen = m->gen;
    struct aicore_task_payload p;
    pthread_mutex_unlock(&m->lock);
    struct npv_model_compute *cc = atomic_load_explicit(&m->compute, memory_order_relaxed);
    uint64_t t0 = npv_model_compute_start(cc);
    uint64_t err = 0;
    if (npv_vus_dma_read(m->srv, slot, &p, sizeof(p)) < 0)
        err = AICORE_ERR_DMA_FAULT;
    else if (!payload_valid(m, id, &p, token))
        err = AICORE_ERR_BAD_PAYLOAD;
    else if (run_kernel(m, &p) < 0)
        err = AICORE_ERR_DMA_FAULT;
    if (err == 0)
        npv_model_compute_add(cc, t0, 0);
    pthread_mutex_lock(&m->lock);
    if (!same_gen(m, gen))
        return;
    if (err != 0) {
        aicore_fatal(m, id, err);
        return;
    }
    pmu_account(m, id, p.work_cycles);
    aicore_set_ctrl(m, id, c->ctrl & ~AICORE_CTRL_CTRL_PMU); /* PMU end */
    m->tasks[id]++;
    m->run_tasks++;
    if (c->arm_drop_fin)
        c->arm_drop_fin = false; /* COND stays ACK(token) */
    else
        aicore_set_cond(m, id, AICORE_COND_FIN(token));
    c->state = CORE_IDLE;
}

/* One step of sub-core id; true when it did something. */
static bool step_core(struct npv_aicore_model *m, uint32_t id, uint64_t now, uint64_t *next)
{
    struct aicore_subcore *c = &m->core[id];
    enum core_state before = c->state;
    uint32_t last = c->last_dmb;
    switch (c->state) {
    case CORE_FIND_TABLE:
        step_find_table(m, id);
        break;
    case CORE_WAIT_OPEN:
        step_wait_open(m, id);
        break;
    case CORE_IDLE:
        step_idle(m, id, now);
        break;
    case CORE_ACK_WAIT:
        if (now >= c->ack_due_ns) {
            aicore_set_cond(m, id, AICORE_COND_ACK(c->token));
            c->state = CORE_RUN;
        } else if (c->ack_due_ns < *next) {
            *next = c->ack_due_ns;
        }
        break;
    case CORE_RUN:
        step_run(m, id, now);
        return true;
    case CORE_HUNG:
        if (m->op_timeout_us != 0) {
            uint64_t due = c->hung_since_ns + m->op_timeout_us * 1000u;
            if (now >= due)
                aicore_fatal(m, id, AICORE_ERR_WATCHDOG);
            else if (due < *next)
                *next = due;
        }
        break;
    default:
        break;
    }
    return c->state != before || c->last_dmb != last;
}

/* RESET cleared device memory (the strict model): the pages go, and read back as zeroes. */
static void clear_devmem(struct npv_aicore_model *m)
{
    m->devmem_clear_pending = false;
    if (madvise(m->devmem, m->devmem_size, MADV_DONTNEED) != 0)
        memset(m->devmem, 0, m->devmem_size);
}

static bool step_all(struct npv_aicore_model *m, uint64_t *next)
{
    bool progressed = false;
    if (m->devmem_clear_pending)
        clear_devmem(m);
    if (m->copy_pending) {
        run_copy(m);
        progressed = true;
    }
    /* Stores into mapped windows are looked at even on a poisoned device: they are refused. */
    progressed |= aicore_windows_poll(m);
    if (m->poisoned)
        return progressed; /* frozen until RESET */
    uint64_t now = npv_now_ns();
    for (uint32_t id = 0; id < m->nsub && !m->poisoned; id++)
        progressed |= step_core(m, id, now, next);
    if (m->result_pending && !m->poisoned && m->exited == m->launched) {
        write_result(m, AICORE_VERDICT_OK, m->gen);
        progressed = true;
    }
    return progressed;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* The event loop asked for the lock (a trapped access): let it have it before the next pass. */
static void let_event_loop_in(struct npv_aicore_model *m)
{
    if (atomic_load_explicit(&m->want_lock, memory_order_acquire) == 0)
        return;
    pthread_mutex_unlock(&m->lock);
    while (atomic_load_explicit(&m->want_lock, memory_order_acquire) != 0)
        sched_yield();
    pthread_mutex_lock(&m->lock);
}

/*
 * While a run is active on mapped windows the worker polls them: without a
 * pause for POLL_SPIN_NS after the last progress (a dispatch is seen within
 * one pass), then every POLL_NAP_NS, and after POLL_DOZE_NS every
 * IDLE_POLL_NS, so a run the host has stopped driving (or one that can never
 * end) leaves the CPU. Otherwise it waits for an event loop signal (LAUNCH, a
 * trapped DMB, a copy), or for a deadline of a sub-core, and looks at the
 * mapped windows once per IDLE_POLL_NS for stores to undo.
 */
void *aicore_worker_main(void *arg)
{
    struct npv_aicore_model *m = arg;
    uint64_t last_progress = 0;
    pthread_mutex_lock(&m->lock);
    while (!m->stop) {
        uint64_t now = npv_now_ns();
        uint64_t next = now + (m->trapped_windows ? IDLE_WAIT_NS : IDLE_POLL_NS);
        bool progressed = step_all(m, &next);
        let_event_loop_in(m);
        if (progressed) {
            last_progress = now;
            continue;
        }
        if (m->running && !m->trapped_windows) {
            pthread_mutex_unlock(&m->lock);
            if (now - last_progress < POLL_SPIN_NS) {
                for (unsigned i = 0; i < 64; i++)
                    cpu_relax();
                sched_yield();
            } else {
                long ns = now - last_progress < POLL_DOZE_NS ? POLL_NAP_NS : (long)IDLE_POLL_NS;
                struct timespec nap = {.tv_sec = 0, .tv_nsec = ns};
                nanosleep(&nap, NULL);
            }
            pthread_mutex_lock(&m->lock);
            continue;
        }
        struct timespec ts;
        npv_deadline_to_abs_timespec(next, &ts);
        pthread_cond_timedwait(&m->wake, &m->lock, &ts);
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

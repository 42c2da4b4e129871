/* SPDX-License-Identifier: MIT */
/*
 * The Edge TPU as a vfio-user server: PCI identity, the trapped registers
 * (SCU, kernel HIB, idle register, page table) with their access widths, the
 * GCB reset / RAM shutdown state machine, the mapped windows watched by a
 * poller thread, and the test port in BAR0.
 *
 * Strict like the chip: a 64-bit register takes one 8-byte access (a split
 * one is refused and counted); while the GCB is in reset the HIB reads
 * 0xdeadfeeddeadfeed and drops writes; status bits follow their controls only
 * after a few reads, so a driver must poll; every page-table entry written
 * is checked against the client's DMA mappings (a value that is not a client
 * IOVA is counted; translating through it is an AXI error, as an IOMMU
 * would make it).
 */
#include <errno.h>
#include <stdio.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model_internal.h"

#define SPIN_NS 1000000ll
#define NAP_NS  50000l

static const uint32_t run_pairs[][2] = {
    {EDGETPU_SC_SCALAR_CORE_RUN_CONTROL, EDGETPU_SC_SCALAR_CORE_RUN_STATUS},
    {EDGETPU_SC_AV_DATA_POP_RUN_CONTROL, EDGETPU_SC_AV_DATA_POP_RUN_STATUS},
    {EDGETPU_SC_PARAMETER_POP_RUN_CONTROL, EDGETPU_SC_PARAMETER_POP_RUN_STATUS},
    {EDGETPU_SC_INFEED_RUN_CONTROL, EDGETPU_SC_INFEED_RUN_STATUS},
    {EDGETPU_SC_OUTFEED_RUN_CONTROL, EDGETPU_SC_OUTFEED_RUN_STATUS},
};

static const uint32_t windows[] = {EDGETPU_TILE_WINDOW, EDGETPU_SC_WINDOW, EDGETPU_UHIB_WINDOW};

int64_t edgetpu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void fill_windows(struct npv_edgetpu_model *m, uint64_t v)
{
    for (size_t w = 0; w < sizeof(windows) / sizeof(windows[0]); w++)
        for (uint32_t o = 0; o < EDGETPU_WINDOW_SIZE; o += 8)
            win_store(m, windows[w] + o, v);
}

/* ---- W0C status registers in the windows ---- */

static void w0c_init(struct w0c_reg *r, uint32_t off)
{
    r->off = off;
    r->val = 0;
    r->stored = 0;
}

/*
 * The driver stores into a mapped window whenever it likes, so the model's
 * read-modify-write of a W0C register is one compare-and-swap: a clear the
 * driver stores between our load and our store is taken in, never
 * overwritten. (An overwritten clear left the bit set, so the next event was
 * not a rising edge and raised no vector: the driver slept out its deadline.)
 * A store by the driver clears the bits it wrote as 0; then `and` and `set`
 * apply. Returns the value before `set`.
 */
static uint64_t w0c_update(struct npv_edgetpu_model *m, struct w0c_reg *r, uint64_t and,
                           uint64_t set)
{
    uint64_t *word = (uint64_t *)(m->bar2 + r->off);
    uint64_t mem = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    for (;;) {
        uint64_t before = (mem == r->stored ? r->val : r->val & mem) & and;
        uint64_t after = before | set;
        if (__atomic_compare_exchange_n(word, &mem, after, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            r->val = r->stored = after;
            return before;
        }
    }
}

/* Take in the driver's clears. */
static void w0c_sync(struct npv_edgetpu_model *m, struct w0c_reg *r)
{
    (void)w0c_update(m, r, ~0ull, 0);
}

bool edgetpu_w0c_set(struct npv_edgetpu_model *m, struct w0c_reg *r, uint64_t bits)
{
    return (bits & ~w0c_update(m, r, ~0ull, bits)) != 0;
}

void edgetpu_w0c_write(struct npv_edgetpu_model *m, struct w0c_reg *r, uint64_t v)
{
    (void)w0c_update(m, r, v, 0);
}

void edgetpu_signal(struct npv_edgetpu_model *m, struct w0c_reg *r, uint64_t bits,
                    uint32_t control_off, uint64_t control_bit, uint64_t source)
{
    bool rising = edgetpu_w0c_set(m, r, bits);
    if (!(win_load(m, control_off) & control_bit))
        return;
    if (rising)
        edgetpu_raise_vector(m, source);
    else
        m->unacked_irqs++;
}

/* ---- GCB reset ---- */

/* The HIB, tiles and scalar core at reset exit: registers at their reset values, RAMs cleared. */
static void gcb_reset_state(struct npv_edgetpu_model *m)
{
    fill_windows(m, 0);
    win_store(m, EDGETPU_IQ_DESCRIPTOR_SIZE, EDGETPU_IQ_DESC_SIZE_VALUE);
    m->extended_table = EDGETPU_PAGE_TABLE_ENTRIES;
    m->translation_enable = 1;
    memset(m->intvecctl, 0, sizeof(m->intvecctl));
    m->kdma_pause = m->kdma_pause_mask = m->status_block_delay = 0;
    /*
     * The page table keeps its contents across a GCB reset (model choice):
     * gasket clears every slot itself after each reset (apex_driver.c
     * apex_reset -> gasket_page_table_reset), so a driver that does not is
     * left with a previous owner's entries.
     */
    edgetpu_exec_flush(m);
    m->iq_control_seen = 0;
    m->iq_enabled = false;
    m->iq_base = m->iq_sb_base = 0;
    m->iq_size = 0;
    m->fetched = m->completed = 0;
    m->fatal = false;
    m->hung = false;
    m->hib_error = m->first_error = m->fault_address = 0;
    m->sc_host_count = 0;
    m->sc_error = 0;
    w0c_init(&m->iq_int_status, EDGETPU_IQ_INT_STATUS);
    w0c_init(&m->sc_host_int_status, EDGETPU_SC_HOST_INT_STATUS);
    w0c_init(&m->fatal_int_status, EDGETPU_FATAL_ERR_INT_STATUS);
    m->fault_armed = EDGETPU_FAULT_NONE;
}

static void gcb_enter_reset(struct npv_edgetpu_model *m)
{
    m->gcb_in_reset = true;
    m->reset_gen++;
    m->iq_enabled = false;
    edgetpu_exec_flush(m);
    fill_windows(m, EDGETPU_DEADFEED);
    /*
     * The MSI-X table lives in the kernel-HIB page of the GCB: a reset loses
     * the vector table and the enable (model choice after gasket, which
     * redoes MSI-X after every reset: gasket_core.c gasket_reset ->
     * gasket_interrupt_reinit). The client must set its vectors again.
     */
    if (m->srv != NULL)
        npv_vus_msix_reset(m->srv);
}

static void gcb_exit_reset(struct npv_edgetpu_model *m)
{
    m->gcb_in_reset = false;
    m->reset_gen++;
    m->gcb_resets++;
    gcb_reset_state(m);
    /* The parameters cached in the chip's memory do not survive a reset (model_pkg.h). */
    edgetpu_pkgs_reset(m->pkgs);
    /* msix_table_init: the table RAM is initialised again at reset exit, the vectors with it. */
    npv_vus_msix_reset(m->srv);
    m->init_settle = EDGETPU_MODEL_SETTLE_READS;
}

/* The SCU fields decide whether the GCB is in reset; the RO mirror bits settle after reads. */
static void scu_apply(struct npv_edgetpu_model *m)
{
    uint32_t rst = (m->scu_ctrl_2 & EDGETPU_SCU2_RG_RST_GCB_MASK) >> EDGETPU_SCU2_RG_RST_GCB_SHIFT;
    uint32_t ram_sd = (m->scu_ctrl_3_rw & EDGETPU_SCU3_RG_FORCE_RAM_SD_MASK) >>
                      EDGETPU_SCU3_RG_FORCE_RAM_SD_SHIFT;
    if ((rst == EDGETPU_RST_GCB_FORCE_RESET || ram_sd != 0) && !m->gcb_in_reset)
        gcb_enter_reset(m);
    else if (rst == EDGETPU_RST_GCB_FORCE_NOT_RESET && ram_sd == 0 && m->gcb_in_reset &&
             m->fault_armed == EDGETPU_FAULT_FAIL_RESET)
        m->fault_armed = EDGETPU_FAULT_NONE; /* this exit fails; the next release works */
    else if (rst == EDGETPU_RST_GCB_FORCE_NOT_RESET && ram_sd == 0 && m->gcb_in_reset)
        gcb_exit_reset(m);
    uint32_t target = (m->gcb_in_reset ? EDGETPU_SCU3_CUR_RST_GCB : 0) |
                      (ram_sd != 0 ? EDGETPU_SCU3_CUR_GCB_SRAM_SD : 0);
    if (target != m->scu3_target) {
        m->scu3_target = target;
        m->scu3_settle = EDGETPU_MODEL_SETTLE_READS;
    }
}

static void power_on(struct npv_edgetpu_model *m)
{
    m->scu_ctrl_0 = 0;
    m->scu_ctrl_2 = 0;
    m->scu_ctr_6 = 0;
    m->scu_ctrl_3_rw = EDGETPU_SCU3_RESET_VALUE & ~EDGETPU_SCU3_RO_MASK;
    m->scu3_cur = m->scu3_target = EDGETPU_SCU3_RESET_VALUE & EDGETPU_SCU3_RO_MASK;
    m->scu3_settle = 0;
    m->idle_register = EDGETPU_IDLE_REGISTER_RESET;
    /*
     * SRAM holds no defined value at power-on (model choice): every slot
     * reads as a valid entry to a page no client maps, so a driver that does
     * not clear the table as gasket does (gasket_page_table.c
     * gasket_page_table_reset) leaves wild translations behind.
     */
    for (uint32_t i = 0; i < EDGETPU_PAGE_TABLE_ENTRIES; i++)
        m->pte[i] = EDGETPU_MODEL_STALE_PTE;
    /* Not counted as written by a client: a test reads the table to see them. */
    memset(m->pte_flagged, 1, sizeof(m->pte_flagged));
    gcb_reset_state(m);
    gcb_enter_reset(m);
    m->init_settle = 0;
}

/* The GCB's clock forced off by software (rg_gated_gcb = 1): its CSRs are as unreachable as in
 * reset. */
static bool gcb_gated(const struct npv_edgetpu_model *m)
{
    return ((m->scu_ctrl_2 & EDGETPU_SCU2_RG_GATED_GCB_MASK) >> EDGETPU_SCU2_RG_GATED_GCB_SHIFT) ==
           1;
}

/* ---- trapped BAR2 registers ---- */

static int scu_access(struct npv_edgetpu_model *m, uint64_t off, void *buf, size_t len,
                      bool is_write)
{
    uint32_t v = 0;
    if (len != 4 || (off & 3))
        return -EINVAL; /* the SCU's registers are 32 bits wide */
    if (is_write) {
        memcpy(&v, buf, 4);
        switch (off) {
        case EDGETPU_SCU_CTRL_0:
            m->scu_ctrl_0 = v;
            break;
        case EDGETPU_SCU_CTRL_2:
            m->scu_ctrl_2 = v;
            scu_apply(m);
            break;
        case EDGETPU_SCU_CTRL_3:
            m->scu_ctrl_3_rw = v & ~EDGETPU_SCU3_RO_MASK;
            scu_apply(m);
            break;
        case EDGETPU_SCU_CTR_6:
            m->scu_ctr_6 = v;
            break;
        default:
            break;
        }
        return 0;
    }
    switch (off) {
    case EDGETPU_SCU_CTRL_0:
        v = m->scu_ctrl_0;
        break;
    case EDGETPU_SCU_CTRL_2:
        v = m->scu_ctrl_2;
        break;
    case EDGETPU_SCU_CTRL_3:
        if (m->scu3_settle > 0 && --m->scu3_settle == 0)
            m->scu3_cur = m->scu3_target;
        v = m->scu_ctrl_3_rw | m->scu3_cur;
        break;
    case EDGETPU_SCU_CTR_6:
        v = m->scu_ctr_6;
        break;
    default:
        break;
    }
    memcpy(buf, &v, 4);
    return 0;
}

static bool pte_is_client_iova(struct npv_edgetpu_model *m, uint64_t v)
{
    if (!(v & EDGETPU_PTE_VALID))
        return true;
    if (v & 0xffeull)
        return false; /* gasket writes page-aligned addresses | valid, nothing else */
    void *p;
    npv_vus_dma_begin(m->srv);
    int r = npv_vus_dma_ptr(m->srv, v & EDGETPU_PTE_ADDR_MASK, EDGETPU_PAGE_SIZE, 1, &p);
    npv_vus_dma_end(m->srv);
    return r == 0 || r == -ENOTSUP;
}

static void pte_flag(struct npv_edgetpu_model *m, uint32_t slot)
{
    if (m->pte_flagged[slot])
        return;
    m->pte_flagged[slot] = 1;
    m->bad_pte_count++;
    m->bad_pte_value = m->pte[slot];
}

static void pte_write(struct npv_edgetpu_model *m, uint32_t slot, uint64_t v)
{
    m->pte[slot] = v;
    m->pte_flagged[slot] = 0;
    if (!pte_is_client_iova(m, v))
        pte_flag(m, slot);
}

/*
 * The client changed its DMA mappings: a valid entry whose memory was unmapped
 * under it is as wrong as one written with a bad value (the driver must clear
 * the entry before it unmaps). Under lock, GCB out of reset.
 */
void edgetpu_pte_recheck(struct npv_edgetpu_model *m)
{
    uint64_t gen = npv_vus_dma_generation(m->srv);
    if (gen == m->pte_checked_gen)
        return;
    m->pte_checked_gen = gen;
    for (uint32_t slot = 0; slot < EDGETPU_PAGE_TABLE_ENTRIES; slot++)
        if ((m->pte[slot] & EDGETPU_PTE_VALID) && !pte_is_client_iova(m, m->pte[slot]))
            pte_flag(m, slot);
}

/* Kernel HIB and page table: GCB out of reset, one 8-byte access. */
static void khib_access(struct npv_edgetpu_model *m, uint64_t off, uint64_t *v, bool is_write)
{
    if (off >= EDGETPU_PAGE_TABLE && off < EDGETPU_PAGE_TABLE + 8ull * EDGETPU_PAGE_TABLE_ENTRIES) {
        uint32_t slot = (uint32_t)((off - EDGETPU_PAGE_TABLE) / 8);
        if (is_write)
            pte_write(m, slot, *v);
        else
            *v = m->pte[slot];
        return;
    }
    if (off >= EDGETPU_KHIB_INSTR_QUEUE_INTVECCTL && off <= EDGETPU_KHIB_FATAL_ERR_INTVECCTL) {
        uint64_t *r = &m->intvecctl[(off - EDGETPU_KHIB_INSTR_QUEUE_INTVECCTL) / 8];
        if (is_write)
            *r = *v;
        else
            *v = *r;
        return;
    }
    uint64_t *rw = NULL;
    switch (off) {
    case EDGETPU_KHIB_PAGE_TABLE_SIZE:
        if (!is_write)
            *v = EDGETPU_PAGE_TABLE_ENTRIES;
        return;
    case EDGETPU_KHIB_PAGE_TABLE_INIT:
    case EDGETPU_KHIB_MSIX_TABLE_INIT:
        if (!is_write) {
            if (m->init_settle > 0)
                m->init_settle--;
            *v = m->init_settle == 0 ? 1 : 0;
        }
        return;
    case EDGETPU_KHIB_EXTENDED_TABLE:
        rw = &m->extended_table;
        break;
    case EDGETPU_KHIB_TRANSLATION_ENABLE:
        rw = &m->translation_enable;
        break;
    case EDGETPU_KHIB_DMA_PAUSE:
        rw = &m->kdma_pause;
        break;
    case EDGETPU_KHIB_DMA_PAUSE_MASK:
        rw = &m->kdma_pause_mask;
        break;
    case EDGETPU_KHIB_STATUS_BLOCK_DELAY:
        rw = &m->status_block_delay;
        break;
    case EDGETPU_IDLE_REGISTER:
        rw = &m->idle_register;
        break;
    default:
        break;
    }
    if (rw != NULL) {
        if (is_write)
            *rw = *v;
        else
            *v = *rw;
    } else if (!is_write) {
        *v = 0;
    }
}

/*
 * The user-HIB page when trapped (strict mode): the same memory the poller
 * watches, reached through whole 8-byte accesses only, so a driver writing a
 * doorbell or queue register in halves is refused and counted (all CSRs take
 * 64-bit accesses: libedgetpu driver/kernel/kernel_registers.cc
 * KernelRegisters::Read/Write refuse an offset not 8-aligned). W0C status
 * registers take the acknowledge at once.
 */
static void uhib_access(struct npv_edgetpu_model *m, uint32_t off, uint64_t *v, bool is_write)
{
    struct w0c_reg *w0c = off == m->iq_int_status.off        ? &m->iq_int_status
                          : off == m->sc_host_int_status.off ? &m->sc_host_int_status
                          : off == m->fatal_int_status.off   ? &m->fatal_int_status
                                                             : NULL;
    if (!is_write)
        *v = win_load(m, off);
    else if (w0c != NULL)
        edgetpu_w0c_write(m, w0c, *v);
    else
        win_store(m, off, *v);
}

static int bar2_access(struct npv_edgetpu_model *m, uint64_t off, void *buf, size_t len,
                       bool is_write)
{
    if (m->gone) {
        if (!is_write)
            memset(buf, 0xff, len);
        return 0;
    }
    if (off >= 0x1a000 && off < 0x1b000)
        return scu_access(m, off, buf, len, is_write);
    if (len != 8 || (off & 7)) {
        m->split_accesses++;
        return -EINVAL; /* a 64-bit CSR: the chip needs the whole register at once */
    }
    uint64_t v = 0;
    if (is_write)
        memcpy(&v, buf, 8);
    bool gcb = off >= EDGETPU_KHIB_PAGE && off != EDGETPU_IDLE_REGISTER;
    if (gcb && (m->gcb_in_reset || gcb_gated(m))) {
        if (!is_write) {
            v = EDGETPU_DEADFEED;
            memcpy(buf, &v, 8);
        }
        return 0;
    }
    if (off >= EDGETPU_UHIB_WINDOW && off < EDGETPU_UHIB_WINDOW + EDGETPU_WINDOW_SIZE)
        uhib_access(m, (uint32_t)off, &v, is_write);
    else
        khib_access(m, off, &v, is_write);
    if (!is_write)
        memcpy(buf, &v, 8);
    return 0;
}

/* ---- the test port (BAR0) ---- */

static void set_gone(struct npv_edgetpu_model *m)
{
    m->gone = true;
    m->iq_enabled = false;
    fill_windows(m, ~0ull);
}

static int port_access(struct npv_edgetpu_model *m, uint64_t off, void *buf, size_t len,
                       bool is_write)
{
    uint64_t v = 0;
    if (len != 8 || (off & 7))
        return -EINVAL;
    if (m->gone) {
        if (!is_write)
            memset(buf, 0xff, len);
        return 0;
    }
    if (is_write) {
        memcpy(&v, buf, 8);
        if (off == EDGETPU_MODEL_FAULT) {
            if (v == EDGETPU_FAULT_DEVICE_GONE)
                set_gone(m);
            else if (v == EDGETPU_FAULT_LATE_STATUS)
                m->late_sb = true;
            else if (v <= EDGETPU_FAULT_PAGE_FAULT || v == EDGETPU_FAULT_FAIL_RESET)
                m->fault_armed = (uint32_t)v;
            else
                return -EINVAL;
        } else if (off == EDGETPU_MODEL_LATE_SB_US) {
            m->late_sb_us = v > 1000000 ? 1000000 : v;
        } else if (off == EDGETPU_MODEL_EXEC_US) {
            m->exec_us = v > 1000000 ? 1000000 : v;
        } else {
            (void)edgetpu_pkgs_port(m->pkgs, off, true, &v);
        }
        return 0;
    }
    switch (off) {
    case EDGETPU_MODEL_ID:
        v = EDGETPU_MODEL_ID_VALUE;
        break;
    case EDGETPU_MODEL_BAD_PTE_COUNT:
        v = m->bad_pte_count;
        break;
    case EDGETPU_MODEL_BAD_PTE_VALUE:
        v = m->bad_pte_value;
        break;
    case EDGETPU_MODEL_SPLIT_ACCESSES:
        v = m->split_accesses;
        break;
    case EDGETPU_MODEL_LATE_SB_US:
        v = m->late_sb_us;
        break;
    case EDGETPU_MODEL_HIGH_DMA_COUNT:
        v = m->high_dma_count;
        break;
    case EDGETPU_MODEL_EXEC_US:
        v = m->exec_us;
        break;
    case EDGETPU_MODEL_UNACKED_IRQS:
        v = m->unacked_irqs;
        break;
    case EDGETPU_MODEL_GCB_RESETS:
        v = m->gcb_resets;
        break;
    default:
        (void)edgetpu_pkgs_port(m->pkgs, off, false, &v);
        break;
    }
    memcpy(buf, &v, 8);
    return 0;
}

static void lock_from_loop(struct npv_edgetpu_model *m)
{
    atomic_fetch_add(&m->loop_waiting, 1);
    pthread_mutex_lock(&m->lock);
    atomic_fetch_sub(&m->loop_waiting, 1);
}

static int regs_access(void *arg, uint32_t index, uint64_t off, void *buf, size_t len,
                       bool is_write)
{
    struct npv_edgetpu_model *m = arg;
    int r;
    lock_from_loop(m);
    if (index == EDGETPU_BAR_INDEX)
        r = bar2_access(m, off, buf, len, is_write);
    else if (index == 0)
        r = port_access(m, off, buf, len, is_write);
    else
        r = -EINVAL;
    pthread_mutex_unlock(&m->lock);
    return r;
}

/* ---- the poller: the mapped windows ---- */

static void run_controls_poll(struct npv_edgetpu_model *m)
{
    for (size_t i = 0; i < sizeof(run_pairs) / sizeof(run_pairs[0]); i++) {
        uint64_t c = win_load(m, run_pairs[i][0]);
        uint64_t s = c == EDGETPU_RUN_CONTROL_RUN    ? EDGETPU_RUN_STATUS_RUN
                     : c == EDGETPU_RUN_CONTROL_HALT ? EDGETPU_RUN_STATUS_HALTED
                                                     : EDGETPU_RUN_STATUS_IDLE;
        if (win_load(m, run_pairs[i][1]) != s)
            win_store(m, run_pairs[i][1], s);
    }
}

/* One look at the windows. Under lock. */
static void windows_poll(struct npv_edgetpu_model *m)
{
    run_controls_poll(m);
    w0c_sync(m, &m->iq_int_status);
    w0c_sync(m, &m->sc_host_int_status);
    w0c_sync(m, &m->fatal_int_status);
    /* The engine works whole descriptors under the lock, so a pause has drained when seen. */
    uint64_t paused = (win_load(m, EDGETPU_UHIB_DMA_PAUSE) & 1) || (m->kdma_pause & 1);
    if (win_load(m, EDGETPU_UHIB_DMA_PAUSED) != paused)
        win_store(m, EDGETPU_UHIB_DMA_PAUSED, paused);
    edgetpu_pte_recheck(m);
    edgetpu_queue_poll(m);
}

static void *poller_main(void *arg)
{
    struct npv_edgetpu_model *m = arg;
    int64_t idle_since = edgetpu_now_ns();
    uint64_t last_work = 0;
    uint32_t spins = 0;

    while (!atomic_load_explicit(&m->stop, memory_order_relaxed)) {
        /* The event loop waits for the lock: let it in before looking again. */
        if (atomic_load_explicit(&m->loop_waiting, memory_order_relaxed) > 0) {
            sched_yield();
            continue;
        }
        pthread_mutex_lock(&m->lock);
        if (!m->gone && !m->gcb_in_reset && !gcb_gated(m))
            windows_poll(m);
        uint64_t work = m->work_count;
        pthread_mutex_unlock(&m->lock);
        if (work != last_work) {
            last_work = work;
            spins = 0;
            idle_since = 0;
            continue;
        }
        if ((++spins & 1023) == 0) {
            int64_t t = edgetpu_now_ns();
            if (idle_since == 0)
                idle_since = t;
            else if (t - idle_since >= SPIN_NS) {
                struct timespec nap = {.tv_sec = 0, .tv_nsec = NAP_NS};
                nanosleep(&nap, NULL);
                continue;
            }
        }
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    return NULL;
}

/* ---- server callbacks ---- */

static int model_reset(void *arg)
{
    struct npv_edgetpu_model *m = arg;
    lock_from_loop(m);
    if (!m->gone)
        power_on(m);
    pthread_mutex_unlock(&m->lock);
    return 0;
}

static void model_disconnect(void *arg)
{
    struct npv_edgetpu_model *m = arg;
    /* The client's memory is gone: the queue stops; registers stay as they were. */
    lock_from_loop(m);
    m->iq_enabled = false;
    m->hung = false;
    if (!m->gone && !m->gcb_in_reset)
        win_store(m, EDGETPU_IQ_STATUS, 0);
    pthread_mutex_unlock(&m->lock);
}

int npv_edgetpu_model_new(struct npv_ctx *ctx, struct npv_edgetpu_model **out)
{
    struct npv_edgetpu_model *m = calloc(1, sizeof(*m));
    int r;
    if (m == NULL)
        return -ENOMEM;
    pthread_mutex_init(&m->lock, NULL);
    atomic_init(&m->stop, false);
    atomic_init(&m->compute, NULL);
    m->exec_us = EDGETPU_MODEL_EXEC_US_DEFAULT;
    /* Strict by default; a bench may map the user-HIB page (widths then unseen there). */
    const char *map_uhib = getenv("NPV_EDGETPU_MODEL_MAP_UHIB");
    m->uhib_trapped = map_uhib == NULL || strcmp(map_uhib, "1") != 0;
    atomic_init(&m->loop_waiting, 0);
    /* Compiled models to check runs against (model_pkg.h), ':'-separated paths. */
    const char *pkgs = getenv("NPV_EDGETPU_MODEL_PACKAGES");
    if (pkgs != NULL && pkgs[0] != '\0') {
        char why[256] = "";
        r = edgetpu_pkgs_new(pkgs, &m->pkgs, why, sizeof(why));
        if (r < 0) {
            fprintf(stderr, "edgetpu model: NPV_EDGETPU_MODEL_PACKAGES: %s\n", why);
            pthread_mutex_destroy(&m->lock);
            free(m);
            return r;
        }
    }

    struct npv_vus_config cfg = {
        .vendor_id = EDGETPU_PCI_VENDOR,
        .device_id = EDGETPU_PCI_DEVICE,
        .subsys_vendor_id = EDGETPU_PCI_VENDOR,
        .subsys_id = EDGETPU_PCI_DEVICE,
        .class_code = EDGETPU_PCI_CLASS,
        .msix_vectors = EDGETPU_MSIX_VECTORS,
        .msix_bar = EDGETPU_BAR_INDEX,
        .msix_table_offset = EDGETPU_KHIB_MSIX_TABLE,
        .msix_pba_offset = EDGETPU_KHIB_MSIX_PBA,
        .arg = m,
        .reset = model_reset,
        .disconnect = model_disconnect,
    };
    cfg.bars[0] = (struct npv_vus_region){
        .size = EDGETPU_BAR0_SIZE,
        .flags = NPV_VUS_REGION_READ | NPV_VUS_REGION_WRITE | NPV_VUS_REGION_64BIT |
                 NPV_VUS_REGION_PREFETCH,
        .access = regs_access,
    };
    cfg.bars[EDGETPU_BAR_INDEX] = (struct npv_vus_region){
        .size = EDGETPU_BAR2_SIZE,
        .flags = NPV_VUS_REGION_READ | NPV_VUS_REGION_WRITE | NPV_VUS_REGION_64BIT |
                 NPV_VUS_REGION_PREFETCH,
        .shared = true,
        .nr_areas = m->uhib_trapped ? 2 : 3,
        .areas = {{.offset = EDGETPU_TILE_WINDOW, .size = EDGETPU_WINDOW_SIZE},
                  {.offset = EDGETPU_SC_WINDOW, .size = EDGETPU_WINDOW_SIZE},
                  {.offset = EDGETPU_UHIB_WINDOW, .size = EDGETPU_WINDOW_SIZE}},
        .access = regs_access,
    };
    r = npv_vus_new(ctx, &cfg, &m->srv);
    if (r < 0)
        goto err_free;
    m->bar2 = npv_vus_region_mem(m->srv, EDGETPU_BAR_INDEX);
    power_on(m);
    r = pthread_create(&m->poller, NULL, poller_main, m);
    if (r != 0) {
        r = -r;
        goto err_srv;
    }
    m->poller_started = true;
    *out = m;
    return 0;

err_srv:
    npv_vus_free(m->srv);
err_free:
    edgetpu_pkgs_free(m->pkgs);
    pthread_mutex_destroy(&m->lock);
    free(m);
    return r;
}

void npv_edgetpu_model_free(struct npv_edgetpu_model *m)
{
    if (m == NULL)
        return;
    if (m->poller_started) {
        atomic_store(&m->stop, true);
        pthread_join(m->poller, NULL);
    }
    npv_vus_free(m->srv);
    edgetpu_exec_flush(m);
    free(m->execq);
    edgetpu_pkgs_free(m->pkgs);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

struct npv_vus *npv_edgetpu_model_server(struct npv_edgetpu_model *m)
{
    return m->srv;
}

int npv_edgetpu_serve(const char *socket_path, bool once)
{
    struct npv_ctx *ctx;
    struct npv_edgetpu_model *m;
    int r = npv_ctx_new(&ctx);
    if (r < 0)
        return r;
    r = npv_edgetpu_model_new(ctx, &m);
    if (r < 0)
        goto out_ctx;
    r = npv_vus_listen(m->srv, socket_path);
    if (r == 0)
        r = npv_vus_run(m->srv, once);
    npv_edgetpu_model_free(m);
out_ctx:
    npv_ctx_free(ctx);
    return r;
}

void npv_edgetpu_model_count_compute(struct npv_edgetpu_model *m, struct npv_model_compute *c)
{
    atomic_store_explicit(&m->compute, c, memory_order_relaxed);
}

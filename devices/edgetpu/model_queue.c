/* SPDX-License-Identifier: MIT */
/*
 * The Edge TPU model's instruction queue engine, device MMU and executor.
 *
 * The engine fetches a descriptor the moment it sees the tail store (a
 * descriptor written after its doorbell is read stale), translates every
 * device VA through the page table (simple slots in BAR2, extended slots
 * through level-1 tables in the client's memory), and reaches client memory
 * only through the server's DMA table: a PTE that is not a client IOVA is an
 * AXI error, as the IOMMU would make it. The queue, the status block and the
 * level-1 tables must lie below 4 GiB of bus address (the chip's 32-bit
 * limit for them); above, the access is refused and counted.
 *
 * Order per descriptor, as the chip's (libedgetpu takes two signals:
 * driver/mmio_driver.cc MmioDriver::RegisterAndEnableAllInterrupts hands
 * vector 0 to HostQueue::ProcessStatusBlock, whose callback (set in
 * MmioDriver::TryIssueDmas) marks the chunk's DMA done, and SC_HOST_0 to
 * HandleExecutionCompletion, which completes the oldest request through
 * single_queue_dma_scheduler.cc's NotifyRequestCompletion): fetch, read the
 * chunk, then the status block by DMA and vector 0 ("chunk consumed"); the
 * scalar core runs the program exec_us later: outputs written, then SC_HOST_0
 * with its counter ("request finished"). A driver that finishes a request on
 * its status block alone reads outputs not yet written. With
 * EDGETPU_FAULT_LATE_STATUS the status block comes late_sb_us after the chunk
 * was read.
 *
 * Every interrupt is raised on its status bit's 0->1 edge only
 * (edgetpu_signal): a driver must acknowledge to be interrupted again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model_internal.h"

#define FOUR_GIB (1ull << 32)
/* Descriptors worked per look, so the event loop gets the lock in between. */
#define BATCH_MAX 16u

enum dma_kind {
    DMA_DATA,  /* instruction chunks, parameters, inputs, outputs: any bus address */
    DMA_QUEUE, /* ring, status block: below 4 GiB */
};

static uint64_t vector_of(const struct npv_edgetpu_model *m, uint32_t source)
{
    if (source <= EDGETPU_VEC_OUTPUT_ACTV_QUEUE)
        return m->intvecctl[source] & EDGETPU_INTVECCTL_FIELD_MASK;
    if (source <= EDGETPU_VEC_SC_HOST_3)
        return (m->intvecctl[4] >> (EDGETPU_INTVECCTL_FIELD_BITS * (source - 4))) &
               EDGETPU_INTVECCTL_FIELD_MASK;
    if (source <= EDGETPU_VEC_TOP_LEVEL_3)
        return (m->intvecctl[5] >> (EDGETPU_INTVECCTL_FIELD_BITS * (source - 8))) &
               EDGETPU_INTVECCTL_FIELD_MASK;
    return m->intvecctl[6] & EDGETPU_INTVECCTL_FIELD_MASK;
}

void edgetpu_raise_vector(struct npv_edgetpu_model *m, uint64_t source)
{
    uint64_t vec = vector_of(m, (uint32_t)source);
    if (vec < EDGETPU_MSIX_VECTORS)
        (void)npv_vus_irq_raise(m->srv, 2 /* MSI-X */, (uint32_t)vec);
}

/* ---- MMU ---- */

/*
 * Translate a device VA to the client's bus address (IOVA). 0, or the HIB
 * error bits of the fault.
 */
static uint64_t translate(struct npv_edgetpu_model *m, uint64_t va, uint64_t *iova)
{
    if (m->translation_enable == 0) {
        *iova = va;
        return 0;
    }
    if (va & EDGETPU_VA_EXTENDED) {
        if (va & ~EDGETPU_VA_EXTENDED & ~((1ull << EDGETPU_EXT_VA_LIMIT_BITS) - 1))
            return EDGETPU_HIB_ERR_EXTENDED_PAGE_FAULT;
        uint64_t slot = m->extended_table + EDGETPU_EXT_L0_INDEX(va);
        if (slot >= EDGETPU_PAGE_TABLE_ENTRIES || !(m->pte[slot] & EDGETPU_PTE_VALID))
            return EDGETPU_HIB_ERR_EXTENDED_PAGE_FAULT;
        uint64_t table = m->pte[slot] & EDGETPU_PTE_ADDR_MASK;
        if (table >= FOUR_GIB) {
            m->high_dma_count++;
            return EDGETPU_HIB_ERR_AXI_SLAVE_R;
        }
        uint64_t entry = 0;
        void *p;
        npv_vus_dma_begin(m->srv);
        int r = npv_vus_dma_ptr(m->srv, table + 8ull * EDGETPU_EXT_L1_INDEX(va), 8, 1, &p);
        if (r == 0)
            entry = __atomic_load_n((const uint64_t *)p, __ATOMIC_ACQUIRE);
        npv_vus_dma_end(m->srv);
        if (r < 0)
            return EDGETPU_HIB_ERR_AXI_SLAVE_R;
        if (!(entry & EDGETPU_PTE_VALID))
            return EDGETPU_HIB_ERR_EXTENDED_PAGE_FAULT;
        *iova = (entry & EDGETPU_PTE_ADDR_MASK) | (va & (EDGETPU_PAGE_SIZE - 1));
        return 0;
    }
    if (va >= EDGETPU_SIMPLE_VA_LIMIT)
        return EDGETPU_HIB_ERR_INBOUND_PAGE_FAULT;
    uint64_t slot = EDGETPU_SIMPLE_SLOT(va);
    if (slot >= m->extended_table || !(m->pte[slot] & EDGETPU_PTE_VALID))
        return EDGETPU_HIB_ERR_INBOUND_PAGE_FAULT;
    *iova = (m->pte[slot] & EDGETPU_PTE_ADDR_MASK) | (va & (EDGETPU_PAGE_SIZE - 1));
    return 0;
}

/*
 * Copy between a device VA range and buf, page by page through the MMU.
 * 0, or the HIB error bits (*bad_va names the page that failed).
 */
static uint64_t dev_copy(struct npv_edgetpu_model *m, uint64_t va, void *buf, uint64_t len,
                         bool write, enum dma_kind kind, uint64_t *bad_va)
{
    uint8_t *b = buf;
    while (len > 0) {
        uint64_t in_page = EDGETPU_PAGE_SIZE - (va & (EDGETPU_PAGE_SIZE - 1));
        uint64_t n = len < in_page ? len : in_page;
        uint64_t iova = 0;
        *bad_va = va;
        uint64_t err = translate(m, va, &iova);
        if (err != 0)
            return err;
        uint64_t axi = write ? EDGETPU_HIB_ERR_AXI_SLAVE_B : EDGETPU_HIB_ERR_AXI_SLAVE_R;
        if (kind == DMA_QUEUE && iova + n > FOUR_GIB) {
            m->high_dma_count++;
            return axi;
        }
        void *p;
        npv_vus_dma_begin(m->srv);
        int r = npv_vus_dma_ptr(m->srv, iova, n, write ? 2 : 1, &p);
        if (r == 0) {
            if (write)
                memcpy(p, b, n);
            else
                memcpy(b, p, n);
        }
        npv_vus_dma_end(m->srv);
        if (r < 0)
            return axi; /* the IOMMU refused: an AXI slave error on the device side */
        va += n;
        b += n;
        len -= n;
    }
    return 0;
}

/* ---- status block and errors ---- */

static void write_status_block(struct npv_edgetpu_model *m, uint32_t head)
{
    if (!(m->iq_control_seen & EDGETPU_IQ_CONTROL_SB_WR_ENABLE))
        return;
    struct edgetpu_status_block sb = {
        .completed_head_pointer = head,
        .fatal_error = (uint32_t)m->hib_error | (m->sc_error ? 1u : 0u),
    };
    uint64_t bad;
    (void)dev_copy(m, m->iq_sb_base, &sb, sizeof(sb), true, DMA_QUEUE, &bad);
}

void edgetpu_raise_error(struct npv_edgetpu_model *m, uint64_t bits, uint64_t fault_va, bool has_va,
                         bool queue_word)
{
    if (m->hib_error == 0 && bits != 0) {
        m->first_error = bits;
        win_store(m, EDGETPU_HIB_FIRST_ERROR_STATUS, bits);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        win_store(m, EDGETPU_HIB_FIRST_ERROR_TIMESTAMP, (uint64_t)ts.tv_sec);
    }
    m->hib_error |= bits;
    win_store(m, EDGETPU_HIB_ERROR_STATUS, m->hib_error);
    if (has_va) {
        m->fault_address = fault_va;
        win_store(m, EDGETPU_PAGE_FAULT_ADDRESS, fault_va);
    }
    m->fatal = true;
    edgetpu_exec_flush(m);
    /*
     * The queue's fatal word for the queue's own errors only (model choice:
     * libedgetpu's host-queue callback receives fatal_error, host_queue.h;
     * a program's errors reach the host through the fatal interrupt and
     * hib_error_status, its fatal handler in mmio_driver.cc).
     */
    if (m->iq_enabled && queue_word)
        write_status_block(m, m->completed);
    edgetpu_signal(m, &m->fatal_int_status, 1, EDGETPU_FATAL_ERR_INT_CONTROL, 1,
                   EDGETPU_VEC_FATAL_ERR);
}

/* ---- executor ---- */

static uint64_t va_of(uint32_t lo, uint32_t hi)
{
    return (uint64_t)hi << 32 | lo;
}

static void sc_host_interrupt(struct npv_edgetpu_model *m, uint32_t n)
{
    uint64_t shift = 16ull * n;
    uint64_t field = ((m->sc_host_count >> shift) + 1) & 0xffff;
    m->sc_host_count = (m->sc_host_count & ~(0xffffull << shift)) | field << shift;
    win_store(m, EDGETPU_SC_HOST_INT_COUNT, m->sc_host_count);
    edgetpu_signal(m, &m->sc_host_int_status, 1ull << n, EDGETPU_SC_HOST_INT_CONTROL, 1ull << n,
                   EDGETPU_VEC_SC_HOST_0 + n);
}

static int8_t requantize(int32_t acc, const struct npv_edgetpu_insn *in)
{
    int64_t v = (int64_t)acc * in->multiplier;
    if (in->shift > 0)
        v = (v + (1ll << (in->shift - 1))) >> in->shift;
    v += in->output_zero_point;
    if ((in->flags & NPV_EDGETPU_FC_RELU) && v < in->output_zero_point)
        v = in->output_zero_point;
    return (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
}

static bool fc_valid(const struct npv_edgetpu_insn *in)
{
    return in->rows > 0 && in->rows <= NPV_EDGETPU_FC_MAX_ROWS && in->in_features > 0 &&
           in->in_features <= NPV_EDGETPU_FC_MAX_DIM && in->out_features > 0 &&
           in->out_features <= NPV_EDGETPU_FC_MAX_DIM && in->shift <= 62 &&
           (in->flags & ~NPV_EDGETPU_FC_RELU) == 0;
}

/* 0, or -1 after raising the error. */
static int exec_fc(struct npv_edgetpu_model *m, const struct npv_edgetpu_insn *in)
{
    size_t rows = in->rows, nin = in->in_features, nout = in->out_features;
    int8_t *x = malloc(rows * nin);
    int8_t *w = malloc(nout * nin);
    int32_t *b = malloc(nout * sizeof(int32_t));
    int8_t *y = malloc(rows * nout);
    uint64_t err = 0, bad = 0;
    uint64_t out_va = va_of(in->output_lo, in->output_hi);
    int rc = -1;

    if (x == NULL || w == NULL || b == NULL || y == NULL) {
        err = EDGETPU_HIB_ERR_AXI_SLAVE_R; /* a model out of memory: fail loudly, never silently */
        goto out;
    }
    err = dev_copy(m, va_of(in->input_lo, in->input_hi), x, rows * nin, false, DMA_DATA, &bad);
    if (err == 0)
        err = dev_copy(m, va_of(in->weights_lo, in->weights_hi), w, nout * nin, false, DMA_DATA,
                       &bad);
    if (err == 0)
        err = dev_copy(m, va_of(in->bias_lo, in->bias_hi), b, nout * sizeof(int32_t), false,
                       DMA_DATA, &bad);
    if (err != 0)
        goto out;
    for (size_t r = 0; r < rows; r++)
        for (size_t o = 0; o < nout; o++) {
            uint32_t acc = (uint32_t)b[o];
            for (size_t i = 0; i < nin; i++)
                acc += (uint32_t)((int32_t)x[r * nin + i] * (int32_t)w[o * nin + i]);
            y[r * nout + o] = requantize((int32_t)acc, in);
        }
    if (m->fault_armed == EDGETPU_FAULT_AXI_ERROR) {
        m->fault_armed = EDGETPU_FAULT_NONE;
        err = EDGETPU_HIB_ERR_AXI_SLAVE_B;
        bad = out_va;
        goto out;
    }
    if (m->fault_armed == EDGETPU_FAULT_PAGE_FAULT) {
        m->fault_armed = EDGETPU_FAULT_NONE;
        out_va = EDGETPU_WILD_DEVICE_VA;
    }
    err = dev_copy(m, out_va, y, rows * nout, true, DMA_DATA, &bad);
    rc = err == 0 ? 0 : -1;
out:
    if (err != 0)
        edgetpu_raise_error(m, err, bad, true, false);
    free(x);
    free(w);
    free(b);
    free(y);
    return rc;
}

static int exec_chunk(struct npv_edgetpu_model *m, const uint8_t *chunk, uint32_t size)
{
    for (uint32_t off = 0; off < size; off += NPV_EDGETPU_INSN_SIZE) {
        struct npv_edgetpu_insn in;
        memcpy(&in, chunk + off, sizeof(in));
        switch (in.opcode) {
        case NPV_EDGETPU_OP_NOP:
            break;
        case NPV_EDGETPU_OP_FC:
            if (!fc_valid(&in))
                goto bad;
            if (exec_fc(m, &in) < 0)
                return -1;
            break;
        case NPV_EDGETPU_OP_SC_HOST_INT:
            if ((uint32_t)in.output_zero_point > 3)
                goto bad;
            sc_host_interrupt(m, (uint32_t)in.output_zero_point);
            break;
        default:
            goto bad;
        }
    }
    return 0;
bad:
    m->sc_error |= EDGETPU_SC_ERROR_BAD_INSTRUCTION;
    win_store(m, EDGETPU_SC_ERROR_SCALAR_CORE, m->sc_error);
    edgetpu_raise_error(m, 0, 0, false, false);
    return -1;
}

/* ---- the queue ---- */

static void queue_control(struct npv_edgetpu_model *m, uint64_t ctrl)
{
    bool was = (m->iq_control_seen & EDGETPU_IQ_CONTROL_ENABLE) != 0;
    bool now = (ctrl & EDGETPU_IQ_CONTROL_ENABLE) != 0;
    m->iq_control_seen = ctrl;
    if (now && !was) {
        /* The ring registers are latched at enable, as the DMA engine starts with them. */
        uint64_t size = win_load(m, EDGETPU_IQ_SIZE);
        m->iq_base = win_load(m, EDGETPU_IQ_BASE);
        m->iq_sb_base = win_load(m, EDGETPU_IQ_STATUS_BLOCK_BASE);
        if (size < 2 || size > EDGETPU_PAGE_TABLE_ENTRIES || (size & (size - 1)) ||
            (m->iq_base & 15) || (m->iq_sb_base & 15)) {
            edgetpu_raise_error(m, EDGETPU_HIB_ERR_IQ_BAD_CONFIGURATION, 0, false, true);
            return;
        }
        if (m->exec_cap < size) {
            struct edgetpu_exec *q = realloc(m->execq, (size_t)size * sizeof(*q));
            if (q == NULL) {
                edgetpu_raise_error(m, EDGETPU_HIB_ERR_AXI_SLAVE_R, 0, false, true);
                return;
            }
            m->execq = q;
            m->exec_cap = (uint32_t)size;
        }
        edgetpu_exec_flush(m);
        m->iq_size = (uint32_t)size;
        m->fetched = m->completed = 0;
        win_store(m, EDGETPU_IQ_FETCHED_HEAD, 0);
        win_store(m, EDGETPU_IQ_COMPLETED_HEAD, 0);
        m->iq_enabled = true;
        win_store(m, EDGETPU_IQ_STATUS, 1);
    } else if (!now && was) {
        m->iq_enabled = false;
        m->hung = false;
        edgetpu_exec_flush(m);
        win_store(m, EDGETPU_IQ_STATUS, 0);
    }
}

static void sleep_us(uint64_t us)
{
    struct timespec ts = {.tv_sec = (time_t)(us / 1000000), .tv_nsec = (long)(us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* Work the descriptor at fetched. */
static void queue_step(struct npv_edgetpu_model *m, uint32_t tail)
{
    uint32_t mask = m->iq_size - 1;
    uint64_t bad = 0, err;
    struct edgetpu_desc d;

    if (m->fault_armed == EDGETPU_FAULT_HANG) {
        m->fault_armed = EDGETPU_FAULT_NONE;
        m->hung = true;
        return;
    }
    err = dev_copy(m, m->iq_base + 16ull * m->fetched, &d, sizeof(d), false, DMA_QUEUE, &bad);
    if (err != 0) {
        edgetpu_raise_error(m, err, bad, true, true);
        return;
    }
    m->fetched = (m->fetched + 1) & mask;
    win_store(m, EDGETPU_IQ_FETCHED_HEAD, m->fetched);
    if (d.size_in_bytes == 0) {
        edgetpu_raise_error(m, EDGETPU_HIB_ERR_LENGTH_0_DMA, d.address, true, true);
        return;
    }
    /*
     * Our format: whole 64-byte instructions, at most NPV_EDGETPU_CHUNK_MAX.
     * A compiled model's chunk is its bitstream's size (libedgetpu DMAs the
     * instruction buffer as compiled): with packages, any size a package has.
     */
    bool pkg_size = edgetpu_pkgs_size_known(m->pkgs, d.size_in_bytes) &&
                    d.size_in_bytes <= EDGETPU_MODEL_PKG_CHUNK_MAX;
    if (!pkg_size &&
        (d.size_in_bytes % NPV_EDGETPU_INSN_SIZE || d.size_in_bytes > NPV_EDGETPU_CHUNK_MAX)) {
        edgetpu_raise_error(m, EDGETPU_HIB_ERR_IQ_INVALID, d.address, true, true);
        return;
    }
    uint8_t *chunk = malloc(d.size_in_bytes);
    if (chunk == NULL) {
        edgetpu_raise_error(m, EDGETPU_HIB_ERR_AXI_SLAVE_R, d.address, true, true);
        return;
    }
    err = dev_copy(m, d.address, chunk, d.size_in_bytes, false, DMA_DATA, &bad);
    if (err != 0) {
        free(chunk);
        edgetpu_raise_error(m, err, bad, true, true);
        return;
    }
    /* Consumed: the chunk is in the chip; the program runs later (exec_poll). */
    m->completed = m->fetched;
    m->work_count++;
    win_store(m, EDGETPU_IQ_COMPLETED_HEAD, m->completed);
    uint64_t gen = m->reset_gen;
    if (m->late_sb && m->late_sb_us > 0) {
        pthread_mutex_unlock(&m->lock);
        sleep_us(m->late_sb_us);
        pthread_mutex_lock(&m->lock);
    }
    if (gen != m->reset_gen || !m->iq_enabled || m->gone || m->fatal || m->exec_cap == 0) {
        free(chunk); /* reset while the write was on its way: it never lands */
        return;
    }
    uint32_t head = m->completed;
    if (m->fault_armed == EDGETPU_FAULT_WILD_HEAD) {
        m->fault_armed = EDGETPU_FAULT_NONE;
        head = (tail + m->iq_size / 2) & mask;
    }
    write_status_block(m, head);
    edgetpu_signal(m, &m->iq_int_status, 1, EDGETPU_IQ_INT_CONTROL, 1, EDGETPU_VEC_INSTR_QUEUE);
    struct edgetpu_exec *x = &m->execq[(m->exec_head + m->exec_n) % m->exec_cap];
    x->chunk = chunk;
    x->size = d.size_in_bytes;
    x->due_ns = edgetpu_now_ns() + (int64_t)m->exec_us * 1000;
    x->exec_ns = (uint64_t)m->exec_us * 1000u;
    m->exec_n++;
}

void edgetpu_exec_flush(struct npv_edgetpu_model *m)
{
    for (; m->exec_n > 0; m->exec_n--) {
        free(m->execq[m->exec_head].chunk);
        m->execq[m->exec_head].chunk = NULL;
        m->exec_head = (m->exec_head + 1) % m->exec_cap;
    }
    m->exec_head = 0;
}

static uint64_t pkg_copy(void *arg, uint64_t va, void *buf, uint64_t len, bool write,
                         uint64_t *bad_va)
{
    return dev_copy(arg, va, buf, len, write, DMA_DATA, bad_va);
}

/*
 * A compiled model's chunk (model_pkg.h), or our format. A package program
 * ends as compiled programs do, with SC_HOST_0; a refused one is a program
 * error (scalar core, model choice) or the HIB error its DMA met.
 */
static void exec_program(struct npv_edgetpu_model *m, const uint8_t *chunk, uint32_t size)
{
    if (m->pkgs != NULL) {
        struct edgetpu_pkg_io io = {.arg = m, .copy = pkg_copy};
        uint64_t hib = 0, bad = 0;
        int r = edgetpu_pkgs_exec(m->pkgs, chunk, size, &io, &hib, &bad);
        if (r == 0) {
            sc_host_interrupt(m, 0);
            return;
        }
        if (r < 0) {
            if (hib != 0) {
                edgetpu_raise_error(m, hib, bad, true, false);
                return;
            }
            m->sc_error |= EDGETPU_SC_ERROR_BAD_INSTRUCTION;
            win_store(m, EDGETPU_SC_ERROR_SCALAR_CORE, m->sc_error);
            edgetpu_raise_error(m, 0, 0, false, false);
            return;
        }
    }
    (void)exec_chunk(m, chunk, size);
}

/* Run the consumed programs whose time has come, oldest first. */
static void exec_poll(struct npv_edgetpu_model *m)
{
    int64_t now = m->exec_n > 0 ? edgetpu_now_ns() : 0;
    while (m->exec_n > 0 && !m->fatal && m->execq[m->exec_head].due_ns <= now) {
        struct edgetpu_exec x = m->execq[m->exec_head];
        m->execq[m->exec_head].chunk = NULL;
        m->exec_head = (m->exec_head + 1) % m->exec_cap;
        m->exec_n--;
        m->work_count++;
        /* Its compute: the execution time it waited out, then its instructions. */
        struct npv_model_compute *cc = atomic_load_explicit(&m->compute, memory_order_relaxed);
        uint64_t t0 = npv_model_compute_start(cc);
        exec_program(m, x.chunk, x.size);
        npv_model_compute_add(cc, t0, x.exec_ns);
        free(x.chunk);
    }
}

void edgetpu_queue_poll(struct npv_edgetpu_model *m)
{
    uint64_t ctrl = win_load(m, EDGETPU_IQ_CONTROL);
    if (ctrl != m->iq_control_seen)
        queue_control(m, ctrl);
    if (!m->iq_enabled || m->fatal)
        return;
    /* Instructions run only on a running scalar core and tiles, and not while DMA is paused. */
    if (win_load(m, EDGETPU_SC_SCALAR_CORE_RUN_CONTROL) != EDGETPU_RUN_CONTROL_RUN ||
        win_load(m, EDGETPU_TILE_OP_RUN_CONTROL) != EDGETPU_RUN_CONTROL_RUN ||
        win_load(m, EDGETPU_UHIB_DMA_PAUSED) != 0)
        return;
    exec_poll(m);
    if (m->fatal || m->hung || !m->iq_enabled)
        return;
    uint64_t tail = win_load(m, EDGETPU_IQ_TAIL);
    if (tail >= m->iq_size) {
        edgetpu_raise_error(m, EDGETPU_HIB_ERR_IQ_INVALID, 0, false, true);
        return;
    }
    /* The scalar core holds at most a ring's worth of consumed programs. */
    for (unsigned i = 0; i < BATCH_MAX && m->fetched != tail && m->exec_n + 1 < m->exec_cap; i++) {
        queue_step(m, (uint32_t)tail);
        if (m->fatal || m->hung || !m->iq_enabled)
            return;
    }
}

/* SPDX-License-Identifier: MIT */
/*
 * The generic test device, as a vfio-user server: control registers trapped
 * in BAR0 page 0, a doorbell page shared with the client and polled by a
 * thread, descriptors and data read from the client's DMA memory, a status
 * block written back with completed_head stored last (release), MSI-X vector 0
 * raised as each descriptor with NPV_TESTDEV_DESC_IRQ completes (the status
 * block written first, so it covers that descriptor).
 *
 * The client's ring contents and register values are untrusted: every IOVA
 * goes through the server's mapping table (an unmapped one is a device fault,
 * as an IOMMU would make it), every length and index is bounded.
 *
 * Hot path: the poller looks at the doorbell on every pass without a lock,
 * works everything up to it as one batch inside one DMA section of the
 * server (a client DMA_UNMAP waits for the section to end), reads the ring
 * and writes the status block through host pointers translated once per
 * server mapping generation, and writes the status block once per batch.
 * The event loop changes the engine only with the poller parked between two
 * descriptors (park()), so a register write's reply means the engine has
 * taken it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../model_compute.h"
#include "model.h"
#include "regs.h"

/* An IOVA no client maps (top of the 64-bit space), for NPV_TESTDEV_FAULT_DMA_UNMAPPED. */
#define TESTDEV_WILD_IOVA 0xfffffffffff00000ull
/* Spin this long on an idle doorbell before napping. */
#define TESTDEV_SPIN_NS 1000000ll
#define TESTDEV_NAP_NS  50000l
/* Descriptors fetched ahead of the one being worked, in a batch. */
#define TESTDEV_PREFETCH 8u
/* NOP descriptors worked in one DMA section at most. */
#define TESTDEV_SECTION_MAX 256u
/* The idle poller reads the clock once per this many doorbell looks (power of two). */
#define TESTDEV_CLOCK_EVERY 1024u

/*
 * The engine: what the poller works with. The poller owns it, except while it
 * is parked (see park()): then the event loop changes it under lock. The ring
 * registers are latched here at CTRL.ENABLE, as a DMA engine latches its
 * base registers when it starts; writes to them while running take effect at
 * the next enable.
 */
struct engine {
    bool running;
    bool hung;
    bool irq_enable;
    uint32_t fault_armed;
    uint64_t ring_base;
    uint32_t entries;
    uint64_t status_base;
    uint64_t irq_wanted_base; /* 0: interrupt unconditionally */
    uint32_t head;            /* descriptors consumed since enable */
    uint32_t completed;       /* descriptors completed since enable */
    uint32_t err, err_index;
    uint64_t err_iova;
    /*
     * Host pointers for the ring and the status block, valid only inside a
     * DMA section while the server's mapping generation is xlat_gen. NULL when
     * the range is not in one fd-backed mapping (or the status block is not
     * 8-byte aligned): then each access goes through the server's copy calls.
     */
    bool xlat_ok;
    uint64_t xlat_gen;
    const uint8_t *ring;
    struct testdev_status *st;
    const uint32_t *irq_wanted;
};

struct npv_testdev_model {
    struct npv_vus *srv;
    volatile uint32_t *doorbell;

    /*
     * Registers, and the park handshake. The event loop holds lock for every
     * register access; the poller takes it only to park and to publish a
     * fault in STATUS / FAULT_IOVA, never per doorbell.
     */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint32_t ctrl;
    uint32_t status;
    uint64_t ring_base;
    uint32_t ring_entries;
    uint64_t status_base;
    uint64_t irq_wanted_base;
    bool fail_reset;
    uint64_t fault_iova;
    uint64_t scratch;
    uint32_t last_width;
    bool parked;        /* the poller waits in poller_park() */
    bool poller_exited; /* nobody to park */
    atomic_bool park_req;

    struct engine eng;

    pthread_t poller;
    bool poller_started;
    atomic_bool stop;
    /* Where the workers add each descriptor's compute time (npv_testdev_model_count_compute); NULL:
     * nowhere. */
    _Atomic(struct npv_model_compute *) compute;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * Event loop, under lock: hold the poller between two descriptors so the
 * engine can be changed. A register write that starts, stops or resets the
 * engine is answered only after this, so once the client has its reply the
 * engine reads and writes nothing of the old configuration (the ring engine
 * zeroes the status block right after its reset callback returns).
 */
static void park(struct npv_testdev_model *td)
{
    if (!td->poller_started)
        return;
    atomic_store(&td->park_req, true);
    pthread_cond_broadcast(&td->cond);
    while (!td->parked && !td->poller_exited)
        pthread_cond_wait(&td->cond, &td->lock);
}

static void unpark(struct npv_testdev_model *td)
{
    atomic_store(&td->park_req, false);
    pthread_cond_broadcast(&td->cond);
}

static void poller_park(struct npv_testdev_model *td)
{
    pthread_mutex_lock(&td->lock);
    td->parked = true;
    pthread_cond_broadcast(&td->cond);
    while (atomic_load(&td->park_req) && !atomic_load(&td->stop))
        pthread_cond_wait(&td->cond, &td->lock);
    td->parked = false;
    pthread_mutex_unlock(&td->lock);
}

/* Stop fetching and forget the ring state (CTRL.RESET, DEVICE_RESET). Under lock, parked. */
static void engine_reset(struct npv_testdev_model *td)
{
    td->ctrl = 0;
    td->status = 0;
    td->ring_base = 0;
    td->ring_entries = 0;
    td->status_base = 0;
    td->irq_wanted_base = 0;
    td->fault_iova = 0;
    memset(&td->eng, 0, sizeof(td->eng));
    __atomic_store_n(td->doorbell, 0, __ATOMIC_RELEASE);
}

static bool ring_valid(uint32_t entries)
{
    return entries >= 2 && entries <= 65536 && (entries & (entries - 1)) == 0;
}

/* Under lock, parked. */
static void engine_enable(struct npv_testdev_model *td)
{
    struct engine *e = &td->eng;
    if (!ring_valid(td->ring_entries)) {
        td->status |= TESTDEV_STATUS_FAULT;
        e->err = NPV_TESTDEV_ERR_BAD_DESC;
        return;
    }
    e->ring_base = td->ring_base;
    e->entries = td->ring_entries;
    e->status_base = td->status_base;
    e->irq_wanted_base = td->irq_wanted_base;
    e->head = e->completed = 0;
    e->err = e->err_index = 0;
    e->err_iova = 0;
    e->hung = false;
    e->xlat_ok = false;
    e->running = true;
    td->status = TESTDEV_STATUS_RUNNING;
    __atomic_store_n(td->doorbell, 0, __ATOMIC_RELEASE);
}

/* Poller: the engine stops on a fault; STATUS and FAULT_IOVA say so. */
static void engine_fault(struct npv_testdev_model *td, bool dma, uint64_t iova)
{
    td->eng.running = false;
    pthread_mutex_lock(&td->lock);
    td->status |= TESTDEV_STATUS_FAULT;
    td->status &= ~TESTDEV_STATUS_RUNNING;
    if (dma)
        td->fault_iova = iova;
    pthread_mutex_unlock(&td->lock);
}

/*
 * Poller: a DMA section, in which the server cannot change its mapping table
 * (a client DMA_UNMAP waits for section_leave). The cached ring and status
 * pointers are taken again whenever the table changed since they were.
 */
static void section_enter(struct npv_testdev_model *td)
{
    struct engine *e = &td->eng;
    npv_vus_dma_begin(td->srv);
    uint64_t gen = npv_vus_dma_generation(td->srv);
    if (e->xlat_ok && e->xlat_gen == gen)
        return;
    void *p;
    e->ring = NULL;
    e->st = NULL;
    if (npv_vus_dma_ptr(td->srv, e->ring_base,
                        (uint64_t)e->entries * sizeof(struct npv_testdev_desc), 1, &p) == 0)
        e->ring = p;
    /* Aligned, or the stores below would not be single-copy atomic. */
    if (npv_vus_dma_ptr(td->srv, e->status_base, sizeof(struct testdev_status), 2, &p) == 0 &&
        ((uintptr_t)p & 7) == 0)
        e->st = p;
    e->irq_wanted = NULL;
    if (e->irq_wanted_base != 0 &&
        npv_vus_dma_ptr(td->srv, e->irq_wanted_base, sizeof(uint32_t), 1, &p) == 0 &&
        ((uintptr_t)p & 3) == 0)
        e->irq_wanted = p;
    e->xlat_gen = gen;
    e->xlat_ok = true;
}

static void section_leave(struct npv_testdev_model *td)
{
    npv_vus_dma_end(td->srv);
}

/*
 * Write the status block: fields first, completed_head last with release
 * order. Inside a section. Returns 0 or a negative errno.
 */
static int write_status(struct npv_testdev_model *td, uint32_t head)
{
    struct engine *e = &td->eng;
    struct testdev_status *st = e->st;
    if (st != NULL) {
        __atomic_store_n(&st->error, e->err, __ATOMIC_RELAXED);
        __atomic_store_n(&st->error_index, e->err_index, __ATOMIC_RELAXED);
        __atomic_store_n(&st->fault_iova, e->err_iova, __ATOMIC_RELAXED);
        __atomic_store_n(&st->completed_head, head, __ATOMIC_RELEASE);
        return 0;
    }
    /* Message DMA or an odd placement: the fields in one write, head last, outside the section. */
    struct testdev_status s = {
        .error = e->err, .error_index = e->err_index, .fault_iova = e->err_iova};
    section_leave(td);
    int r = npv_vus_dma_write(td->srv, e->status_base + 4, &s.error, 20);
    if (r == 0)
        r = npv_vus_dma_write(td->srv, e->status_base, &head, sizeof(head));
    section_enter(td);
    return r;
}

/*
 * Inside a section, once the status block covers the descriptor that asked:
 * raise the completion interrupt, unless the driver set up event suppression
 * and its word says nobody sleeps. The full barrier orders the head written
 * before it against the word read after it (the driver does the mirror image:
 * word, barrier, head), so a driver going to sleep is never missed.
 */
static void interrupt(struct npv_testdev_model *td)
{
    struct engine *e = &td->eng;
    if (!e->irq_enable)
        return;
    if (e->irq_wanted_base != 0) {
        uint32_t wanted = 1; /* an unreadable word: interrupt, never lose a wake-up */
        atomic_thread_fence(memory_order_seq_cst);
        if (e->irq_wanted != NULL) {
            wanted = __atomic_load_n(e->irq_wanted, __ATOMIC_RELAXED);
        } else {
            section_leave(td);
            if (npv_vus_dma_read(td->srv, e->irq_wanted_base, &wanted, sizeof(wanted)) < 0)
                wanted = 1;
            section_enter(td);
        }
        if (wanted == 0)
            return;
    }
    section_leave(td);
    npv_vus_irq_raise(td->srv, 2 /* MSI-X */, 0);
    section_enter(td);
}

/* Message DMA (client memory without fd): bounce through a buffer, outside the section. */
static uint32_t execute_by_message(struct npv_testdev_model *td, const struct npv_testdev_desc *d,
                                   uint64_t src, uint64_t dst, uint64_t *bad_iova)
{
    struct npv_vus *srv = td->srv;
    int r = 0;
    uint8_t *buf = malloc(d->len);
    if (buf == NULL)
        return NPV_TESTDEV_ERR_DMA;
    section_leave(td);
    if (d->opcode == NPV_TESTDEV_OP_COPY) {
        r = npv_vus_dma_read(srv, src, buf, d->len);
        if (r < 0)
            *bad_iova = src;
    } else {
        memset(buf, (int)(d->pattern & 0xff), d->len);
    }
    if (r == 0) {
        r = npv_vus_dma_write(srv, dst, buf, d->len);
        if (r < 0)
            *bad_iova = dst;
    }
    section_enter(td);
    free(buf);
    return r == 0 ? NPV_TESTDEV_ERR_NONE : NPV_TESTDEV_ERR_DMA;
}

/*
 * Run one descriptor's DMA, inside a section. d is the engine's own copy, so
 * the client cannot change it between the checks and the use. Returns
 * NPV_TESTDEV_ERR_*; *bad_iova names a refused address.
 */
static uint32_t execute(struct npv_testdev_model *td, const struct npv_testdev_desc *d,
                        uint64_t *bad_iova)
{
    struct npv_vus *srv = td->srv;
    uint64_t src = d->src, dst = d->dst;
    int r;

    if (d->opcode == NPV_TESTDEV_OP_NOP)
        return NPV_TESTDEV_ERR_NONE;
    if ((d->opcode != NPV_TESTDEV_OP_COPY && d->opcode != NPV_TESTDEV_OP_FILL) || d->len == 0 ||
        d->len > NPV_TESTDEV_MAX_LEN)
        return NPV_TESTDEV_ERR_BAD_DESC;
    if (td->eng.fault_armed == NPV_TESTDEV_FAULT_DMA_UNMAPPED) {
        td->eng.fault_armed = NPV_TESTDEV_FAULT_NONE;
        dst = TESTDEV_WILD_IOVA;
    }
    void *s = NULL, *t = NULL;
    r = npv_vus_dma_ptr(srv, dst, d->len, 2, &t);
    if (r == -EFAULT) {
        *bad_iova = dst;
    } else if (r == 0 && d->opcode == NPV_TESTDEV_OP_COPY) {
        r = npv_vus_dma_ptr(srv, src, d->len, 1, &s);
        if (r == -EFAULT)
            *bad_iova = src;
    }
    if (r == 0) {
        if (d->opcode == NPV_TESTDEV_OP_COPY)
            memmove(t, s, d->len);
        else
            memset(t, (int)(d->pattern & 0xff), d->len);
        return NPV_TESTDEV_ERR_NONE;
    }
    if (r != -ENOTSUP)
        return NPV_TESTDEV_ERR_DMA;
    return execute_by_message(td, d, src, dst, bad_iova);
}

/* Fetch descriptor head into d, inside a section. 0, or -EFAULT with *bad_iova set. */
static int fetch(struct npv_testdev_model *td, struct npv_testdev_desc *d, uint64_t *bad_iova)
{
    struct engine *e = &td->eng;
    uint32_t slot = e->head & (e->entries - 1);
    if (e->ring != NULL) {
        memcpy(d, e->ring + (size_t)slot * sizeof(*d), sizeof(*d));
        return 0;
    }
    uint64_t iova = e->ring_base + (uint64_t)slot * sizeof(*d);
    section_leave(td);
    int r = npv_vus_dma_read(td->srv, iova, d, sizeof(*d));
    section_enter(td);
    if (r < 0) {
        *bad_iova = iova;
        memset(d, 0, sizeof(*d));
        return -EFAULT;
    }
    return 0;
}

/*
 * Work the ring up to the doorbell value tail, in one DMA section, and write
 * the status block once for the batch. Stops early at a fault or when the
 * event loop asks to park.
 */
static void process(struct npv_testdev_model *td, uint32_t tail)
{
    struct engine *e = &td->eng;
    uint32_t avail = tail - e->head;
    uint32_t in_section = 0;
    bool irq = false;

    section_enter(td);
    /* A producer index more than a ring ahead names descriptors that do not exist. */
    if (avail > e->entries) {
        e->err = NPV_TESTDEV_ERR_BAD_DESC;
        e->err_index = e->head;
        engine_fault(td, false, 0);
        write_status(td, e->completed);
        section_leave(td);
        return;
    }
    while (e->head != tail && e->running) {
        if (atomic_load_explicit(&td->park_req, memory_order_relaxed))
            break;
        uint32_t armed = e->fault_armed;
        if (armed == NPV_TESTDEV_FAULT_HANG) {
            e->fault_armed = NPV_TESTDEV_FAULT_NONE;
            e->hung = true;
            break;
        }
        if (armed == NPV_TESTDEV_FAULT_DISCONNECT) {
            /* A device that went away works no further descriptor of this client. */
            e->fault_armed = NPV_TESTDEV_FAULT_NONE;
            e->running = false;
            npv_vus_disconnect(td->srv);
            break;
        }
        /*
         * The driver wrote these lines on its core: ask for the next ones
         * while this one runs, so the cross-core transfers overlap.
         */
        if (e->ring != NULL && tail - e->head > TESTDEV_PREFETCH)
            __builtin_prefetch(e->ring + (size_t)((e->head + TESTDEV_PREFETCH) & (e->entries - 1)) *
                                             sizeof(struct npv_testdev_desc));
        struct npv_testdev_desc d;
        uint64_t bad = 0;
        struct npv_model_compute *cc = atomic_load_explicit(&td->compute, memory_order_relaxed);
        uint64_t t0 = npv_model_compute_start(cc);
        uint32_t err = fetch(td, &d, &bad) < 0 ? NPV_TESTDEV_ERR_DMA : execute(td, &d, &bad);
        npv_model_compute_add(cc, t0, 0);
        e->head++;
        e->completed++;
        if (d.flags & NPV_TESTDEV_DESC_IRQ)
            irq = true;
        if (err != NPV_TESTDEV_ERR_NONE) {
            e->err = err;
            e->err_index = e->head - 1;
            e->err_iova = bad;
            engine_fault(td, err == NPV_TESTDEV_ERR_DMA, bad);
            break; /* the engine stops at the first failed descriptor */
        }
        /*
         * An interrupt is raised when the descriptor that asked for it
         * completes, as a DMA engine's completion interrupt fires, not when
         * the whole doorbell batch is done: a driver that asks at the end of
         * each of its reap batches is woken while the device works the next
         * one, so the wake-up overlaps the work instead of stalling it.
         */
        if (irq && tail != e->head && e->irq_enable) {
            if (write_status(td, e->completed) < 0) {
                engine_fault(td, true, e->status_base);
                break;
            }
            interrupt(td);
            irq = false;
            in_section = 0;
        }
        /*
         * A client DMA_UNMAP waits for the section: let it in after every
         * descriptor that moved data (up to 16 MiB) and every
         * TESTDEV_SECTION_MAX others, so it never waits for a whole batch.
         */
        if (d.opcode != NPV_TESTDEV_OP_NOP || ++in_section == TESTDEV_SECTION_MAX) {
            section_leave(td);
            section_enter(td);
            in_section = 0;
        }
    }
    uint32_t head = e->completed;
    if (e->fault_armed == NPV_TESTDEV_FAULT_WILD_HEAD) {
        e->fault_armed = NPV_TESTDEV_FAULT_NONE;
        head = tail + e->entries + 7; /* beyond anything the driver submitted */
    }
    if (write_status(td, head) < 0)
        engine_fault(td, true, e->status_base);
    if (irq)
        interrupt(td);
    section_leave(td);
}

/* Nothing to fetch: wait for the event loop (which parks us to change that) or a timeout. */
static void poller_idle(struct npv_testdev_model *td)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 10000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&td->lock);
    if (!atomic_load(&td->park_req) && !atomic_load(&td->stop))
        pthread_cond_timedwait(&td->cond, &td->lock, &ts);
    pthread_mutex_unlock(&td->lock);
}

/*
 * The doorbell is shared memory: it is looked at on every pass, with an
 * acquire load (the descriptors the driver wrote before it are then
 * visible), so a doorbell is answered within one PAUSE. The clock is read
 * only every TESTDEV_CLOCK_EVERY idle passes, to nap after TESTDEV_SPIN_NS of
 * idleness so an idle model leaves the CPU.
 */
static void *poller_main(void *arg)
{
    struct npv_testdev_model *td = arg;
    struct engine *e = &td->eng;
    int64_t idle_since = 0;
    uint32_t spins = 0;
    bool napping = false;

    while (!atomic_load_explicit(&td->stop, memory_order_relaxed)) {
        if (atomic_load_explicit(&td->park_req, memory_order_acquire)) {
            poller_park(td);
            spins = 0;
            napping = false;
            continue;
        }
        if (!e->running || e->hung) {
            poller_idle(td);
            continue;
        }
        uint32_t tail = __atomic_load_n(td->doorbell, __ATOMIC_ACQUIRE);
        if (tail != e->head) {
            process(td, tail);
            spins = 0;
            napping = false;
            continue;
        }
        if (napping) {
            struct timespec nap = {.tv_sec = 0, .tv_nsec = TESTDEV_NAP_NS};
            nanosleep(&nap, NULL);
            continue;
        }
        if ((++spins & (TESTDEV_CLOCK_EVERY - 1)) == 0) {
            int64_t now = now_ns();
            if (spins == TESTDEV_CLOCK_EVERY)
                idle_since = now;
            else if (now - idle_since >= TESTDEV_SPIN_NS)
                napping = true;
        }
        cpu_relax();
    }
    pthread_mutex_lock(&td->lock);
    td->poller_exited = true;
    pthread_cond_broadcast(&td->cond);
    pthread_mutex_unlock(&td->lock);
    return NULL;
}

static int reg_access64(uint64_t *reg, uint64_t off, uint64_t base, void *buf, size_t len,
                        bool is_write)
{
    uint64_t v = 0;
    if (len == 8 && off == base) {
        if (is_write)
            memcpy(reg, buf, 8);
        else
            memcpy(buf, reg, 8);
        return 0;
    }
    if (len == 4 && (off == base || off == base + 4)) {
        unsigned shift = off == base ? 0 : 32;
        if (is_write) {
            uint32_t h;
            memcpy(&h, buf, 4);
            *reg = (*reg & ~(0xffffffffull << shift)) | ((uint64_t)h << shift);
        } else {
            v = *reg >> shift;
            uint32_t h = (uint32_t)v;
            memcpy(buf, &h, 4);
        }
        return 0;
    }
    return -EINVAL;
}

/* Under lock, parked. */
static int ctrl_write(struct npv_testdev_model *td, uint32_t v)
{
    if (v & TESTDEV_CTRL_RESET) {
        if (td->fail_reset) {
            td->fail_reset = false;
            td->status |= TESTDEV_STATUS_FAULT;
            return 0; /* the reset did not happen: the driver sees the device still as it was */
        }
        engine_reset(td);
        return 0;
    }
    uint32_t old = td->ctrl;
    td->ctrl = v & (TESTDEV_CTRL_ENABLE | TESTDEV_CTRL_IRQ_ENABLE);
    if ((td->ctrl & TESTDEV_CTRL_ENABLE) && !(old & TESTDEV_CTRL_ENABLE))
        engine_enable(td);
    else if (!(td->ctrl & TESTDEV_CTRL_ENABLE) && (old & TESTDEV_CTRL_ENABLE)) {
        td->eng.running = false;
        td->status &= ~TESTDEV_STATUS_RUNNING;
    }
    td->eng.irq_enable = (td->ctrl & TESTDEV_CTRL_IRQ_ENABLE) != 0;
    return 0;
}

static int regs_access(void *arg, uint32_t index, uint64_t off, void *buf, size_t len,
                       bool is_write)
{
    struct npv_testdev_model *td = arg;
    uint32_t v32 = 0;
    int r = 0;

    if (index != 0)
        return -EINVAL;
    if (off >= 0x1000) {
        if (!is_write)
            memset(buf, 0, len);
        return 0;
    }
    pthread_mutex_lock(&td->lock);
    switch (off & ~7ull) {
    case TESTDEV_REG_RING_BASE:
        r = reg_access64(&td->ring_base, off, TESTDEV_REG_RING_BASE, buf, len, is_write);
        goto out;
    case TESTDEV_REG_STATUS_BASE:
        r = reg_access64(&td->status_base, off, TESTDEV_REG_STATUS_BASE, buf, len, is_write);
        goto out;
    case TESTDEV_REG_IRQ_WANTED:
        r = reg_access64(&td->irq_wanted_base, off, TESTDEV_REG_IRQ_WANTED, buf, len, is_write);
        if (r == 0 && is_write) {
            /* Takes effect at once: the engine's copy changes between two descriptors. */
            park(td);
            td->eng.irq_wanted_base = td->irq_wanted_base;
            td->eng.xlat_ok = false;
            unpark(td);
        }
        goto out;
    case TESTDEV_REG_SCRATCH64:
        r = reg_access64(&td->scratch, off, TESTDEV_REG_SCRATCH64, buf, len, is_write);
        if (r == 0)
            td->last_width = (uint32_t)len;
        goto out;
    case TESTDEV_REG_FAULT_IOVA:
        if (is_write)
            goto out; /* read-only */
        r = reg_access64(&td->fault_iova, off, TESTDEV_REG_FAULT_IOVA, buf, len, false);
        goto out;
    default:
        break;
    }
    if (len != 4 || (off & 3)) {
        r = -EINVAL; /* 32-bit registers take 32-bit accesses */
        goto out;
    }
    if (is_write) {
        memcpy(&v32, buf, 4);
        switch (off) {
        case TESTDEV_REG_CTRL:
            park(td);
            r = ctrl_write(td, v32);
            unpark(td);
            break;
        case TESTDEV_REG_RING_ENTRIES:
            td->ring_entries = v32;
            break;
        case TESTDEV_REG_FAULT_INJECT:
            if (v32 == NPV_TESTDEV_FAULT_FAIL_RESET)
                td->fail_reset = true;
            else if (v32 <= NPV_TESTDEV_FAULT_DISCONNECT) {
                park(td);
                td->eng.fault_armed = v32;
                unpark(td);
            }
            break;
        default:
            break; /* read-only or unassigned: dropped */
        }
        goto out;
    }
    switch (off) {
    case TESTDEV_REG_ID:
        v32 = TESTDEV_ID_VALUE;
        break;
    case TESTDEV_REG_CTRL:
        v32 = td->ctrl;
        break;
    case TESTDEV_REG_STATUS:
        v32 = td->status;
        break;
    case TESTDEV_REG_DESC_SIZE:
        v32 = sizeof(struct npv_testdev_desc);
        break;
    case TESTDEV_REG_RING_ENTRIES:
        v32 = td->ring_entries;
        break;
    case TESTDEV_REG_LAST_WIDTH:
        v32 = td->last_width;
        break;
    default:
        v32 = 0;
        break;
    }
    memcpy(buf, &v32, 4);
out:
    pthread_mutex_unlock(&td->lock);
    return r;
}

static int model_reset(void *arg)
{
    struct npv_testdev_model *td = arg;
    int r = 0;
    pthread_mutex_lock(&td->lock);
    if (td->fail_reset) {
        td->fail_reset = false;
        r = -EIO;
    } else {
        park(td);
        engine_reset(td);
        unpark(td);
    }
    pthread_mutex_unlock(&td->lock);
    return r;
}

static void model_disconnect(void *arg)
{
    struct npv_testdev_model *td = arg;
    /* The client's memory is gone: stop fetching, keep the registers. */
    pthread_mutex_lock(&td->lock);
    park(td);
    td->ctrl &= ~TESTDEV_CTRL_ENABLE;
    td->status &= ~TESTDEV_STATUS_RUNNING;
    td->eng.running = false;
    td->eng.xlat_ok = false;
    unpark(td);
    pthread_mutex_unlock(&td->lock);
}

int npv_testdev_model_new(struct npv_ctx *ctx, struct npv_testdev_model **out)
{
    struct npv_testdev_model *td = calloc(1, sizeof(*td));
    int r;
    if (td == NULL)
        return -ENOMEM;
    pthread_mutex_init(&td->lock, NULL);
    pthread_cond_init(&td->cond, NULL);
    atomic_init(&td->stop, false);
    atomic_init(&td->park_req, false);
    atomic_init(&td->compute, NULL);

    struct npv_vus_config cfg = {
        .vendor_id = NPV_TESTDEV_VENDOR_ID,
        .device_id = NPV_TESTDEV_DEVICE_ID,
        .subsys_vendor_id = NPV_TESTDEV_VENDOR_ID,
        .subsys_id = NPV_TESTDEV_DEVICE_ID,
        .class_code = NPV_TESTDEV_CLASS,
        .msix_vectors = TESTDEV_MSIX_VECTORS,
        .msix_bar = 0,
        .msix_table_offset = TESTDEV_MSIX_TABLE_OFFSET,
        .msix_pba_offset = TESTDEV_MSIX_PBA_OFFSET,
        .arg = td,
        .reset = model_reset,
        .disconnect = model_disconnect,
    };
    cfg.bars[0] = (struct npv_vus_region){
        .size = TESTDEV_BAR0_SIZE,
        .flags = NPV_VUS_REGION_READ | NPV_VUS_REGION_WRITE,
        .shared = true,
        .nr_areas = 1,
        .areas = {{.offset = TESTDEV_DOORBELL_PAGE, .size = 0x1000}},
        .access = regs_access,
    };
    r = npv_vus_new(ctx, &cfg, &td->srv);
    if (r < 0)
        goto err_free;
    td->doorbell =
        (volatile uint32_t *)((uint8_t *)npv_vus_region_mem(td->srv, 0) + TESTDEV_REG_DOORBELL);
    r = pthread_create(&td->poller, NULL, poller_main, td);
    if (r != 0) {
        r = -r;
        goto err_srv;
    }
    td->poller_started = true;
    *out = td;
    return 0;

err_srv:
    npv_vus_free(td->srv);
err_free:
    pthread_cond_destroy(&td->cond);
    pthread_mutex_destroy(&td->lock);
    free(td);
    return r;
}

void npv_testdev_model_free(struct npv_testdev_model *td)
{
    if (td == NULL)
        return;
    if (td->poller_started) {
        atomic_store(&td->stop, true);
        pthread_mutex_lock(&td->lock);
        pthread_cond_broadcast(&td->cond);
        pthread_mutex_unlock(&td->lock);
        pthread_join(td->poller, NULL);
    }
    npv_vus_free(td->srv);
    pthread_cond_destroy(&td->cond);
    pthread_mutex_destroy(&td->lock);
    free(td);
}

struct npv_vus *npv_testdev_model_server(struct npv_testdev_model *td)
{
    return td->srv;
}

int npv_testdev_serve(const char *socket_path, bool once)
{
    struct npv_ctx *ctx;
    struct npv_testdev_model *td;
    int r = npv_ctx_new(&ctx);
    if (r < 0)
        return r;
    r = npv_testdev_model_new(ctx, &td);
    if (r < 0)
        goto out_ctx;
    r = npv_vus_listen(td->srv, socket_path);
    if (r == 0)
        r = npv_vus_run(td->srv, once);
    npv_testdev_model_free(td);
out_ctx:
    npv_ctx_free(ctx);
    return r;
}

void npv_testdev_model_count_compute(struct npv_testdev_model *m, struct npv_model_compute *c)
{
    atomic_store_explicit(&m->compute, c, memory_order_relaxed);
}

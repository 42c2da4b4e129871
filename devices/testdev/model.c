/* SPDX-License-Identifier: MIT */
/*
 * The generic test device, as a vfio-user server: control registers trapped
 * in BAR0 page 0, a doorbell page shared with the client and polled by a
 * thread, descriptors and data read from the client's DMA memory, a status
 * block written back with completed_head stored last (release), the queue's
 * MSI-X vector (q for queue q) raised as each descriptor with NPV_TESTDEV_DESC_IRQ completes (the
 * status block written first, so it covers that descriptor).
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
 *
 * Queues (regs.h): the one poller serves TESTDEV_QUEUES rings, each with its
 * own registers, doorbell, status block, fault state and MSI-X vector; every
 * pass gives each enabled queue one turn (the descriptors its doorbell
 * announced at that moment), round robin, so a busy queue cannot starve the
 * others by more than one doorbell's batch.
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

/* One queue pair: its registers (under the model's lock), doorbell and engine. */
struct queue {
    unsigned index; /* its MSI-X vector too */
    volatile uint32_t *doorbell;
    uint32_t ctrl;
    uint32_t status;
    uint64_t ring_base;
    uint32_t ring_entries;
    uint64_t status_base;
    uint64_t irq_wanted_base;
    bool fail_reset;
    uint64_t fault_iova;
    struct engine eng;
};

struct npv_testdev_model {
    struct npv_vus *srv;

    /*
     * Registers, and the park handshake. The event loop holds lock for every
     * register access; the poller takes it only to park and to publish a
     * fault in STATUS / FAULT_IOVA, never per doorbell.
     */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t scratch;
    uint32_t last_width;
    bool parked;        /* the poller waits in poller_park() */
    bool poller_exited; /* nobody to park */
    atomic_bool park_req;

    struct queue q[TESTDEV_QUEUES];

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

/*
 * Stop fetching and forget a queue's ring state (its CTRL.RESET; every
 * queue's at DEVICE_RESET). Under lock, parked.
 */
static void engine_reset(struct queue *q)
{
    q->ctrl = 0;
    q->status = 0;
    q->ring_base = 0;
    q->ring_entries = 0;
    q->status_base = 0;
    q->irq_wanted_base = 0;
    q->fault_iova = 0;
    memset(&q->eng, 0, sizeof(q->eng));
    __atomic_store_n(q->doorbell, 0, __ATOMIC_RELEASE);
}

static bool ring_valid(uint32_t entries)
{
    return entries >= 2 && entries <= 65536 && (entries & (entries - 1)) == 0;
}

/* Under lock, parked. */
static void engine_enable(struct queue *q)
{
    struct engine *e = &q->eng;
    if (!ring_valid(q->ring_entries)) {
        q->status |= TESTDEV_STATUS_FAULT;
        e->err = NPV_TESTDEV_ERR_BAD_DESC;
        return;
    }
    e->ring_base = q->ring_base;
    e->entries = q->ring_entries;
    e->status_base = q->status_base;
    e->irq_wanted_base = q->irq_wanted_base;
    e->head = e->completed = 0;
    e->err = e->err_index = 0;
    e->err_iova = 0;
    e->hung = false;
    e->xlat_ok = false;
    e->running = true;
    q->status = TESTDEV_STATUS_RUNNING;
    __atomic_store_n(q->doorbell, 0, __ATOMIC_RELEASE);
}

/* Poller: the queue's engine stops on a fault; its STATUS and FAULT_IOVA say so. */
static void engine_fault(struct npv_testdev_model *td, struct queue *q, bool dma, uint64_t iova)
{
    q->eng.running = false;
    pthread_mutex_lock(&td->lock);
    q->status |= TESTDEV_STATUS_FAULT;
    q->status &= ~TESTDEV_STATUS_RUNNING;
    if (dma)
        q->fault_iova = iova;
    pthread_mutex_unlock(&td->lock);
}

/*
 * Poller: a DMA section, in which the server cannot change its mapping table
 * (a client DMA_UNMAP waits for section_leave). The cached ring and status
 * pointers are taken again whenever the table changed since they were.
 */
static void section_enter(struct npv_testdev_model *td, struct engine *e)
{
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
static int write_status(struct npv_testdev_model *td, struct engine *e, uint32_t head)
{
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
    section_enter(td, e);
    return r;
}

/*
 * Inside a section, once the status block covers the descriptor that asked:
 * raise the completion interrupt, unless the driver set up event suppression
 * and its word says nobody sleeps. The full barrier orders the head written
 * before it against the word read after it (the driver does the mirror image:
 * word, barrier, head), so a driver going to sleep is never missed.
 */
static void interrupt(struct npv_testdev_model *td, struct queue *q)
{
    struct engine *e = &q->eng;
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
            section_enter(td, e);
        }
        if (wanted == 0)
            return;
    }
    section_leave(td);
    npv_vus_irq_raise(td->srv, 2 /* MSI-X */, q->index);
    section_enter(td, e);
}

/* Message DMA (client memory without fd): bounce through a buffer, outside the section. */
static uint32_t execute_by_message(struct npv_testdev_model *td, struct engine *e,
                                   const struct npv_testdev_desc *d, uint64_t src, uint64_t dst,
                                   uint64_t *bad_iova)
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
    section_enter(td, e);
    free(buf);
    return r == 0 ? NPV_TESTDEV_ERR_NONE : NPV_TESTDEV_ERR_DMA;
}

/*
 * Run one descriptor's DMA, inside a section. d is the engine's own copy, so
 * the client cannot change it between the checks and the use. Returns
 * NPV_TESTDEV_ERR_*; *bad_iova names a refused address.
 */
static uint32_t execute(struct npv_testdev_model *td, struct engine *e,
                        const struct npv_testdev_desc *d, uint64_t *bad_iova)
{
    struct npv_vus *srv = td->srv;
    uint64_t src = d->src, dst = d->dst;
    int r;

    if (d->opcode == NPV_TESTDEV_OP_NOP)
        return NPV_TESTDEV_ERR_NONE;
    if ((d->opcode != NPV_TESTDEV_OP_COPY && d->opcode != NPV_TESTDEV_OP_FILL) || d->len == 0 ||
        d->len > NPV_TESTDEV_MAX_LEN)
        return NPV_TESTDEV_ERR_BAD_DESC;
    if (e->fault_armed == NPV_TESTDEV_FAULT_DMA_UNMAPPED) {
        e->fault_armed = NPV_TESTDEV_FAULT_NONE;
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
    return execute_by_message(td, e, d, src, dst, bad_iova);
}

/* Fetch descriptor head into d, inside a section. 0, or -EFAULT with *bad_iova set. */
static int fetch(struct npv_testdev_model *td, struct engine *e, struct npv_testdev_desc *d,
                 uint64_t *bad_iova)
{
    uint32_t slot = e->head & (e->entries - 1);
    if (e->ring != NULL) {
        memcpy(d, e->ring + (size_t)slot * sizeof(*d), sizeof(*d));
        return 0;
    }
    uint64_t iova = e->ring_base + (uint64_t)slot * sizeof(*d);
    section_leave(td);
    int r = npv_vus_dma_read(td->srv, iova, d, sizeof(*d));
    section_enter(td, e);
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
static void process(struct npv_testdev_model *td, struct queue *q, uint32_t tail)
{
    struct engine *e = &q->eng;
    uint32_t avail = tail - e->head;
    uint32_t in_section = 0;
    bool irq = false;

    /* Compute is counted per doorbell batch: a thread CPU-time read is a system call, which per
     * descriptor would cost more than a descriptor's work. */
    struct npv_model_compute *cc = atomic_load_explicit(&td->compute, memory_order_relaxed);
    uint64_t t0 = npv_model_compute_start(cc);
    uint32_t first = e->head;
    section_enter(td, e);
    /* A producer index more than a ring ahead names descriptors that do not exist. */
    if (avail > e->entries) {
        e->err = NPV_TESTDEV_ERR_BAD_DESC;
        e->err_index = e->head;
        engine_fault(td, q, false, 0);
        write_status(td, e, e->completed);
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
        uint32_t err = fetch(td, e, &d, &bad) < 0 ? NPV_TESTDEV_ERR_DMA : execute(td, e, &d, &bad);
        e->head++;
        e->completed++;
        if (d.flags & NPV_TESTDEV_DESC_IRQ)
            irq = true;
        if (err != NPV_TESTDEV_ERR_NONE) {
            e->err = err;
            e->err_index = e->head - 1;
            e->err_iova = bad;
            engine_fault(td, q, err == NPV_TESTDEV_ERR_DMA, bad);
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
            if (write_status(td, e, e->completed) < 0) {
                engine_fault(td, q, true, e->status_base);
                break;
            }
            interrupt(td, q);
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
            section_enter(td, e);
            in_section = 0;
        }
    }
    uint32_t head = e->completed;
    if (e->fault_armed == NPV_TESTDEV_FAULT_WILD_HEAD) {
        e->fault_armed = NPV_TESTDEV_FAULT_NONE;
        head = tail + e->entries + 7; /* beyond anything the driver submitted */
    }
    if (write_status(td, e, head) < 0)
        engine_fault(td, q, true, e->status_base);
    if (irq)
        interrupt(td, q);
    section_leave(td);
    npv_model_compute_add_n(cc, t0, 0, e->head - first);
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
/*
 * One pass: every enabled queue's turn, in index order (each gets at most
 * what its doorbell announced when its turn came, so the order is fair
 * round robin). Returns whether any queue was enabled; *worked, whether any
 * had descriptors.
 */
static bool serve_queues(struct npv_testdev_model *td, bool *worked)
{
    bool active = false;
    for (unsigned i = 0; i < TESTDEV_QUEUES; i++) {
        struct queue *q = &td->q[i];
        struct engine *e = &q->eng;
        if (!e->running || e->hung)
            continue;
        active = true;
        uint32_t tail = __atomic_load_n(q->doorbell, __ATOMIC_ACQUIRE);
        if (tail != e->head) {
            process(td, q, tail);
            *worked = true;
        }
    }
    return active;
}

static void *poller_main(void *arg)
{
    struct npv_testdev_model *td = arg;
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
        bool worked = false;
        if (!serve_queues(td, &worked)) {
            poller_idle(td);
            continue;
        }
        if (worked) {
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

/* A queue's CTRL. Under lock, parked. */
static int ctrl_write(struct queue *q, uint32_t v)
{
    if (v & TESTDEV_CTRL_RESET) {
        if (q->fail_reset) {
            q->fail_reset = false;
            q->status |= TESTDEV_STATUS_FAULT;
            return 0; /* the reset did not happen: the driver sees the queue still as it was */
        }
        engine_reset(q);
        return 0;
    }
    uint32_t old = q->ctrl;
    q->ctrl = v & (TESTDEV_CTRL_ENABLE | TESTDEV_CTRL_IRQ_ENABLE);
    if ((q->ctrl & TESTDEV_CTRL_ENABLE) && !(old & TESTDEV_CTRL_ENABLE))
        engine_enable(q);
    else if (!(q->ctrl & TESTDEV_CTRL_ENABLE) && (old & TESTDEV_CTRL_ENABLE)) {
        q->eng.running = false;
        q->status &= ~TESTDEV_STATUS_RUNNING;
    }
    q->eng.irq_enable = (q->ctrl & TESTDEV_CTRL_IRQ_ENABLE) != 0;
    return 0;
}

/* A device-wide register: only in queue 0's window. Under lock. */
static int device_reg_access(struct npv_testdev_model *td, uint64_t off, void *buf, size_t len,
                             bool is_write)
{
    uint32_t v32 = 0;
    switch (off & ~7ull) {
    case TESTDEV_REG_SCRATCH64: {
        int r = reg_access64(&td->scratch, off, TESTDEV_REG_SCRATCH64, buf, len, is_write);
        if (r == 0)
            td->last_width = (uint32_t)len;
        return r;
    }
    default:
        break;
    }
    if (len != 4 || (off & 3))
        return -EINVAL; /* 32-bit registers take 32-bit accesses */
    if (is_write)
        return 0; /* read-only or unassigned: dropped */
    switch (off) {
    case TESTDEV_REG_ID:
        v32 = TESTDEV_ID_VALUE;
        break;
    case TESTDEV_REG_DESC_SIZE:
        v32 = sizeof(struct npv_testdev_desc);
        break;
    case TESTDEV_REG_LAST_WIDTH:
        v32 = td->last_width;
        break;
    case TESTDEV_REG_QUEUES:
        v32 = TESTDEV_QUEUES;
        break;
    default:
        v32 = 0;
        break;
    }
    memcpy(buf, &v32, 4);
    return 0;
}

/* A register of queue q's window (off relative to the window). Under lock. */
static int queue_reg_access(struct npv_testdev_model *td, struct queue *q, uint64_t off, void *buf,
                            size_t len, bool is_write)
{
    uint32_t v32 = 0;
    int r = 0;
    switch (off & ~7ull) {
    case TESTDEV_REG_RING_BASE:
        return reg_access64(&q->ring_base, off, TESTDEV_REG_RING_BASE, buf, len, is_write);
    case TESTDEV_REG_STATUS_BASE:
        return reg_access64(&q->status_base, off, TESTDEV_REG_STATUS_BASE, buf, len, is_write);
    case TESTDEV_REG_IRQ_WANTED:
        r = reg_access64(&q->irq_wanted_base, off, TESTDEV_REG_IRQ_WANTED, buf, len, is_write);
        if (r == 0 && is_write) {
            /* Takes effect at once: the engine's copy changes between two descriptors. */
            park(td);
            q->eng.irq_wanted_base = q->irq_wanted_base;
            q->eng.xlat_ok = false;
            unpark(td);
        }
        return r;
    case TESTDEV_REG_FAULT_IOVA:
        if (is_write)
            return 0; /* read-only */
        return reg_access64(&q->fault_iova, off, TESTDEV_REG_FAULT_IOVA, buf, len, false);
    default:
        break;
    }
    if (len != 4 || (off & 3))
        return -EINVAL; /* 32-bit registers take 32-bit accesses */
    if (is_write) {
        memcpy(&v32, buf, 4);
        switch (off) {
        case TESTDEV_REG_CTRL:
            park(td);
            r = ctrl_write(q, v32);
            unpark(td);
            break;
        case TESTDEV_REG_RING_ENTRIES:
            q->ring_entries = v32;
            break;
        case TESTDEV_REG_FAULT_INJECT:
            if (v32 == NPV_TESTDEV_FAULT_FAIL_RESET)
                q->fail_reset = true;
            else if (v32 <= NPV_TESTDEV_FAULT_DISCONNECT) {
                park(td);
                q->eng.fault_armed = v32;
                unpark(td);
            }
            break;
        default:
            break; /* read-only, unassigned, or device-wide: handled by the caller */
        }
        return r;
    }
    switch (off) {
    case TESTDEV_REG_CTRL:
        v32 = q->ctrl;
        break;
    case TESTDEV_REG_STATUS:
        v32 = q->status;
        break;
    case TESTDEV_REG_RING_ENTRIES:
        v32 = q->ring_entries;
        break;
    default:
        v32 = 0; /* write-only */
        break;
    }
    memcpy(buf, &v32, 4);
    return 0;
}

static bool is_queue_reg(uint64_t off)
{
    switch (off & ~7ull) {
    case TESTDEV_REG_RING_BASE:
    case TESTDEV_REG_STATUS_BASE:
    case TESTDEV_REG_IRQ_WANTED:
    case TESTDEV_REG_FAULT_IOVA:
        return true;
    default:
        break;
    }
    return off == TESTDEV_REG_CTRL || off == TESTDEV_REG_STATUS ||
           off == TESTDEV_REG_RING_ENTRIES || off == TESTDEV_REG_FAULT_INJECT;
}

/*
 * Page 0: queue q's window at TESTDEV_QUEUE_WINDOW * q; in window 0 the
 * device-wide registers too. Windows past the last queue read 0.
 */
static int regs_access(void *arg, uint32_t index, uint64_t off, void *buf, size_t len,
                       bool is_write)
{
    struct npv_testdev_model *td = arg;
    int r = 0;

    if (index != 0)
        return -EINVAL;
    if (off >= 0x1000) {
        if (!is_write)
            memset(buf, 0, len);
        return 0;
    }
    uint64_t qi = off / TESTDEV_QUEUE_WINDOW, reg = off % TESTDEV_QUEUE_WINDOW;
    pthread_mutex_lock(&td->lock);
    if (qi < TESTDEV_QUEUES && is_queue_reg(reg))
        r = queue_reg_access(td, &td->q[qi], reg, buf, len, is_write);
    else if (qi == 0)
        r = device_reg_access(td, reg, buf, len, is_write);
    else if (len != 4 && len != 8)
        r = -EINVAL;
    else if (!is_write)
        memset(buf, 0, len);
    pthread_mutex_unlock(&td->lock);
    return r;
}

static int model_reset(void *arg)
{
    struct npv_testdev_model *td = arg;
    int r = 0;
    pthread_mutex_lock(&td->lock);
    /* Queue 0's armed failing reset fails the device's (as it did with one ring). */
    if (td->q[0].fail_reset) {
        td->q[0].fail_reset = false;
        r = -EIO;
    } else {
        park(td);
        for (unsigned i = 0; i < TESTDEV_QUEUES; i++)
            engine_reset(&td->q[i]);
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
    for (unsigned i = 0; i < TESTDEV_QUEUES; i++) {
        struct queue *q = &td->q[i];
        q->ctrl &= ~TESTDEV_CTRL_ENABLE;
        q->status &= ~TESTDEV_STATUS_RUNNING;
        q->eng.running = false;
        q->eng.xlat_ok = false;
    }
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
    for (unsigned i = 0; i < TESTDEV_QUEUES; i++) {
        td->q[i].index = i;
        td->q[i].doorbell =
            (volatile uint32_t *)((uint8_t *)npv_vus_region_mem(td->srv, 0) + TESTDEV_DOORBELL(i));
    }
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

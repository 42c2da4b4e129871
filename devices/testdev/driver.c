/* SPDX-License-Identifier: MIT */
/*
 * The generic test device's driver: the one place that programs the device
 * (regs.h). Open checks the identity, allocates the ring and status block in
 * one DMA buffer, programs them and starts the engine; the ring engine calls
 * program() again after a missed deadline or a device fault.
 *
 * The driver reaches the device only through npv_dev, npv_bar, npv_irq,
 * npv_dma and npv_ring: it runs unchanged over kernel VFIO and vfio-user.
 *
 * Queues (regs.h): td's own ring is queue 0; npv_testdev_queue_open gives
 * queue 1.. a ring of its own, programmed through that queue's register
 * window and rung through its own doorbell, so a thread per queue shares
 * nothing with the others on its fast path (no lock, no common cache line).
 */
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <npuvfio/bar.h>
#include <npuvfio/ctx.h>
#include <npuvfio/domain.h>
#include <npuvfio/testdev.h>

#include "regs.h"

#define TESTDEV_DEFAULT_ENTRIES 256u
#define TESTDEV_MAX_ENTRIES     65536u

/* One queue pair: td's own (queue 0) or one of npv_testdev_queue_open. */
struct npv_testdev_queue {
    struct npv_testdev *td;
    unsigned index;      /* its register window, doorbell and MSI-X vector */
    struct npv_irq *irq; /* td's, when this queue's vector is routed; else NULL */
    struct npv_dma *mem; /* ring, then the status block on its own cache line */
    npv_iova_t ring_iova, status_iova, irq_wanted_iova;
    uint32_t entries;
    struct npv_ring *ring;
    uint32_t *irq_wanted;   /* in mem, a cache granule of its own after the status block */
    bool irq_on_sleep_only; /* the device is told where irq_wanted is */
};

struct npv_testdev {
    struct npv_dev *dev;
    struct npv_ctx *ctx;
    struct npv_bar *bar;
    struct npv_irq *irq;
    struct npv_domain *dom;
    unsigned nqueues;     /* TESTDEV_REG_QUEUES, 1 on a single-ring device */
    uint32_t open_queues; /* bit q: queue q (q >= 1) is open */
    struct npv_testdev_queue q0;
};

static uint64_t qreg(const struct npv_testdev_queue *q, uint64_t reg)
{
    return TESTDEV_QREG(q->index, reg);
}

static int bad_config(struct npv_ctx *ctx, const char *why)
{
    npv_ctx_log(ctx, NPV_LOG_ERROR, "testdev: bad config: %s", why);
    return -EINVAL;
}

static int check_config(struct npv_ctx *ctx, const struct npv_testdev_config *cfg)
{
    uint32_t n = cfg->entries;
    if (n != 0 && (n < 2 || n > TESTDEV_MAX_ENTRIES || (n & (n - 1)) != 0))
        return bad_config(ctx, "entries must be a power of two in 2..65536");
    return 0;
}

/* A device that answers its ID register with the test device's value, and takes our descriptors. */
static int check_identity(struct npv_testdev *td)
{
    uint64_t id = 0, desc_size = 0;
    int r = npv_bar_read(td->bar, TESTDEV_REG_ID, 4, &id);
    if (r == 0)
        r = npv_bar_read(td->bar, TESTDEV_REG_DESC_SIZE, 4, &desc_size);
    if (r < 0) {
        npv_ctx_log(td->ctx, NPV_LOG_ERROR, "testdev %s: the device does not answer: %s",
                    npv_dev_name(td->dev), npv_strerror(r));
        return r;
    }
    if (id != TESTDEV_ID_VALUE || desc_size != sizeof(struct npv_testdev_desc)) {
        npv_ctx_log(td->ctx, NPV_LOG_ERROR,
                    "testdev %s: not a test device (ID 0x%08llx, descriptor size %llu)",
                    npv_dev_name(td->dev), (unsigned long long)id, (unsigned long long)desc_size);
        return -ENODEV;
    }
    return 0;
}

/*
 * The ring engine's reset callback, and the start at open: CTRL.RESET makes
 * the engine forget its ring (both indexes back to 0); the ring registers are
 * latched when CTRL.ENABLE goes from 0 to 1. STATUS tells whether the reset
 * and the start took: a device that failed its reset keeps STATUS.FAULT.
 */
static int program(void *arg)
{
    struct npv_testdev_queue *q = arg;
    struct npv_testdev *td = q->td;
    uint32_t ctrl = TESTDEV_CTRL_ENABLE | (q->irq != NULL ? TESTDEV_CTRL_IRQ_ENABLE : 0);
    uint64_t status = 0;
    /* The queue's own window (regs.h): its CTRL.RESET resets this queue alone. */
    int r = npv_bar_write(td->bar, qreg(q, TESTDEV_REG_CTRL), 4, TESTDEV_CTRL_RESET);
    if (r == 0)
        r = npv_bar_read(td->bar, qreg(q, TESTDEV_REG_STATUS), 4, &status);
    if (r == 0 && (status & TESTDEV_STATUS_FAULT)) {
        npv_ctx_log(td->ctx, NPV_LOG_ERROR, "testdev %s: queue %u failed its reset",
                    npv_dev_name(td->dev), q->index);
        return -EIO;
    }
    if (r == 0)
        r = npv_bar_write(td->bar, qreg(q, TESTDEV_REG_RING_BASE), 8, q->ring_iova);
    if (r == 0)
        r = npv_bar_write(td->bar, qreg(q, TESTDEV_REG_RING_ENTRIES), 4, q->entries);
    if (r == 0)
        r = npv_bar_write(td->bar, qreg(q, TESTDEV_REG_STATUS_BASE), 8, q->status_iova);
    if (r == 0 && q->irq_on_sleep_only)
        r = npv_bar_write(td->bar, qreg(q, TESTDEV_REG_IRQ_WANTED), 8, q->irq_wanted_iova);
    if (r == 0)
        r = npv_bar_write(td->bar, qreg(q, TESTDEV_REG_CTRL), 4, ctrl);
    if (r == 0)
        r = npv_bar_read(td->bar, qreg(q, TESTDEV_REG_STATUS), 4, &status);
    if (r < 0) {
        npv_ctx_log(td->ctx, NPV_LOG_ERROR, "testdev %s: programming ring %u: %s",
                    npv_dev_name(td->dev), q->index, npv_strerror(r));
        return r;
    }
    if ((status & (TESTDEV_STATUS_RUNNING | TESTDEV_STATUS_FAULT)) != TESTDEV_STATUS_RUNNING) {
        npv_ctx_log(td->ctx, NPV_LOG_ERROR,
                    "testdev %s: the engine of ring %u did not start (STATUS 0x%llx)",
                    npv_dev_name(td->dev), q->index, (unsigned long long)status);
        return -EIO;
    }
    return 0;
}

/*
 * One buffer: the ring, then the status block, then the interrupt-wanted
 * word. The ring is entries * 32 bytes, a multiple of 64 for entries >= 2,
 * so the status block starts a cache line of its own: the device's writes to
 * it never share a line with descriptors the CPU writes (a non-coherent clean
 * of one would overwrite the other). The word, which the CPU writes and the
 * device reads, sits NPV_RING_CACHE_GRANULE past the status block for the
 * same reason.
 */
#define TESTDEV_IRQ_WANTED_AFTER_STATUS NPV_RING_CACHE_GRANULE
#define TESTDEV_MEM_AFTER_RING          (2 * NPV_RING_CACHE_GRANULE)

static int alloc_ring(struct npv_testdev_queue *q, const struct npv_dma_opts *mem)
{
    struct npv_testdev *td = q->td;
    size_t ring_bytes = (size_t)q->entries * sizeof(struct npv_testdev_desc);
    size_t total = ring_bytes + TESTDEV_MEM_AFTER_RING;
    int r = npv_dma_alloc(td->ctx, total, mem, &q->mem);
    if (r < 0)
        return r;
    memset(npv_dma_vaddr(q->mem), 0, total);
    /* Zeroes reach memory before the device is enabled and writes the status block. */
    npv_dma_sync_for_device(q->mem, 0, total);
    r = npv_dma_map(q->mem, td->dom, NPV_DMA_RW, &q->ring_iova);
    if (r < 0) {
        npv_dma_free(q->mem);
        q->mem = NULL;
        return r;
    }
    q->status_iova = q->ring_iova + ring_bytes;
    q->irq_wanted_iova = q->status_iova + TESTDEV_IRQ_WANTED_AFTER_STATUS;
    q->irq_wanted = (uint32_t *)((uint8_t *)npv_dma_vaddr(q->mem) + ring_bytes +
                                 TESTDEV_IRQ_WANTED_AFTER_STATUS);
    return 0;
}

static int make_ring(struct npv_testdev_queue *q, const struct npv_testdev_config *cfg)
{
    struct npv_testdev *td = q->td;
    uint8_t *base = npv_dma_vaddr(q->mem);
    size_t ring_bytes = (size_t)q->entries * sizeof(struct npv_testdev_desc);
    /*
     * The device writes a free-running completed head and an error word with
     * the failed descriptor's index: the ring's default conventions (head
     * format COUNT, error format PER_JOB), so those fields stay zero.
     */
    struct npv_ring_config rc = {
        .entries = q->entries,
        .desc_size = sizeof(struct npv_testdev_desc),
        .desc_vaddr = base,
        .desc_iova = q->ring_iova,
        .status_vaddr = base + ring_bytes,
        .status_iova = q->status_iova,
        .status_size = sizeof(struct testdev_status),
        .fields = {.head = offsetof(struct testdev_status, completed_head),
                   .error = offsetof(struct testdev_status, error),
                   .error_index = offsetof(struct testdev_status, error_index)},
        .desc_dma = q->mem,
        .status_dma = q->mem,
        .db_bar = td->bar,
        .db_off = TESTDEV_DOORBELL(q->index),
        .db_width = 4,
        .db_format = NPV_RING_DB_INDEX,
        .irq = q->irq,
        .irq_vec = q->index,
        .spin_ns = cfg->spin_ns,
        .job_timeout_ns = cfg->job_timeout_ns,
        .reset = program,
        .reset_arg = q,
    };
    int r = npv_ring_new(td->ctx, &rc, &q->ring);
    if (r < 0)
        return r;
    /* Its counters in lib/stats (stats.h): device "testdev:<device name>", queue "ring<q>". */
    char name[64], qname[16];
    snprintf(name, sizeof(name), "testdev:%s", npv_dev_name(td->dev));
    snprintf(qname, sizeof(qname), "ring%u", q->index);
    npv_ring_set_name(q->ring, name, qname);
    return 0;
}

/*
 * Allocate, map and program one queue's ring (q->td, index, irq and entries
 * set). Undoes what it did on failure.
 */
static int queue_start(struct npv_testdev_queue *q, const struct npv_testdev_config *cfg)
{
    int r = alloc_ring(q, cfg->mem);
    if (r < 0)
        return r;
    /* The ring zeroes and cleans the status block, so the device is enabled after it. */
    r = make_ring(q, cfg);
    if (r == 0) {
        r = program(q);
        if (r == 0)
            return 0;
        npv_ring_free(q->ring);
        q->ring = NULL;
        npv_bar_write(q->td->bar, qreg(q, TESTDEV_REG_CTRL), 4, TESTDEV_CTRL_RESET);
    }
    npv_dma_free(q->mem);
    q->mem = NULL;
    return r;
}

/* The engine must stop reading the ring before its memory goes back (see npv_testdev_close). */
static void queue_stop(struct npv_testdev_queue *q)
{
    npv_ring_free(q->ring);
    npv_bar_write(q->td->bar, qreg(q, TESTDEV_REG_CTRL), 4, TESTDEV_CTRL_RESET);
    npv_dma_free(q->mem);
}

/* How many queues the device has (0 in TESTDEV_REG_QUEUES: a single-ring device). */
static unsigned read_queues(struct npv_testdev *td)
{
    uint64_t n = 0;
    if (npv_bar_read(td->bar, TESTDEV_REG_QUEUES, 4, &n) < 0 || n == 0)
        return 1;
    return n > 32 ? 32u : (unsigned)n;
}

/* Vectors to route: one per queue, as many as the device has. */
static uint32_t irq_vectors(struct npv_testdev *td)
{
    struct npv_irq_info ii;
    if (npv_dev_irq_info(td->dev, NPV_IRQ_MSIX, &ii) < 0 || ii.count == 0)
        return 1;
    return ii.count < td->nqueues ? ii.count : td->nqueues;
}

int npv_testdev_open(struct npv_dev *dev, const struct npv_testdev_config *cfg,
                     struct npv_testdev **out)
{
    static const struct npv_testdev_config defaults = {0};
    if (dev == NULL || out == NULL)
        return -EINVAL;
    if (cfg == NULL)
        cfg = &defaults;
    struct npv_ctx *ctx = npv_dev_ctx(dev);
    int r = check_config(ctx, cfg);
    if (r < 0)
        return r;
    struct npv_testdev *td = calloc(1, sizeof(*td));
    if (td == NULL)
        return -ENOMEM;
    td->dev = dev;
    td->ctx = ctx;
    td->dom = npv_dev_domain(dev);
    td->q0.td = td;
    td->q0.index = 0;
    td->q0.entries = cfg->entries != 0 ? cfg->entries : TESTDEV_DEFAULT_ENTRIES;

    r = npv_bar_map(dev, 0, &td->bar);
    if (r < 0) {
        npv_ctx_log(ctx, NPV_LOG_ERROR, "testdev %s: mapping BAR0: %s", npv_dev_name(dev),
                    npv_strerror(r));
        goto err_free;
    }
    r = check_identity(td);
    if (r < 0)
        goto err_bar;
    td->nqueues = read_queues(td);
    if (cfg->irq) {
        /* A vector per queue where the device has them: queue q waits on vector q. */
        r = npv_irq_enable(dev, NPV_IRQ_MSIX, irq_vectors(td), &td->irq);
        if (r < 0) {
            npv_ctx_log(ctx, NPV_LOG_ERROR, "testdev %s: routing MSI-X vectors: %s",
                        npv_dev_name(dev), npv_strerror(r));
            goto err_bar;
        }
        td->q0.irq = td->irq;
    }
    r = queue_start(&td->q0, cfg);
    if (r < 0)
        goto err_irq;
    *out = td;
    return 0;

err_irq:
    npv_irq_disable(td->irq);
err_bar:
    npv_bar_unmap(td->bar);
err_free:
    free(td);
    return r;
}

void npv_testdev_close(struct npv_testdev *td)
{
    if (td == NULL)
        return;
    uint32_t open = __atomic_load_n(&td->open_queues, __ATOMIC_ACQUIRE);
    if (open != 0)
        npv_ctx_log(td->ctx, NPV_LOG_ERROR,
                    "testdev %s: closed with queues still open (mask 0x%x): close them first",
                    npv_dev_name(td->dev), open);
    /*
     * The engine must stop reading the ring before its memory goes back. A
     * device that no longer answers cannot be stopped, and its memory is
     * unmapped from it by npv_dma_free just after.
     */
    queue_stop(&td->q0);
    npv_irq_disable(td->irq);
    npv_bar_unmap(td->bar);
    free(td);
}

struct npv_ring *npv_testdev_ring(struct npv_testdev *td)
{
    return td->q0.ring;
}

struct npv_dma *npv_testdev_ring_memory(struct npv_testdev *td)
{
    return td->q0.mem;
}

struct npv_dev *npv_testdev_dev(struct npv_testdev *td)
{
    return td->dev;
}

struct npv_irq *npv_testdev_irq(struct npv_testdev *td)
{
    return td->irq;
}

int npv_testdev_reset(struct npv_testdev *td)
{
    return npv_ring_reset(td->q0.ring);
}

static int queue_irq_on_sleep_only(struct npv_testdev_queue *q, bool on)
{
    struct npv_testdev *td = q->td;
    if (q->irq == NULL)
        return -EINVAL;
    if (on == q->irq_on_sleep_only)
        return 0;
    /*
     * On: the engine's word first (kept 0 while nobody sleeps), then the
     * device. Off: the device first, so no wait is left without its interrupt.
     */
    int r = 0;
    if (on)
        r = npv_ring_set_irq_wanted(q->ring, q->irq_wanted, q->mem);
    if (r == 0)
        r = npv_bar_write(td->bar, qreg(q, TESTDEV_REG_IRQ_WANTED), 8, on ? q->irq_wanted_iova : 0);
    if (r == 0 && !on)
        r = npv_ring_set_irq_wanted(q->ring, NULL, NULL);
    if (r == 0)
        q->irq_on_sleep_only = on;
    else if (on)
        npv_ring_set_irq_wanted(q->ring, NULL, NULL);
    return r;
}

int npv_testdev_irq_on_sleep_only(struct npv_testdev *td, bool on)
{
    return queue_irq_on_sleep_only(&td->q0, on);
}

static int queue_inject_fault(struct npv_testdev_queue *q, enum npv_testdev_fault fault)
{
    if ((unsigned)fault > NPV_TESTDEV_FAULT_FAIL_RESET)
        return -EINVAL;
    return npv_bar_write(q->td->bar, qreg(q, TESTDEV_REG_FAULT_INJECT), 4, (uint64_t)fault);
}

int npv_testdev_inject_fault(struct npv_testdev *td, enum npv_testdev_fault fault)
{
    return queue_inject_fault(&td->q0, fault);
}

/* ---- queues: a ring per thread (regs.h, docs/threads.md) ---- */

unsigned npv_testdev_queues(struct npv_testdev *td)
{
    return td->nqueues;
}

int npv_testdev_queue_open(struct npv_testdev *td, unsigned index,
                           const struct npv_testdev_config *cfg, struct npv_testdev_queue **out)
{
    static const struct npv_testdev_config defaults = {0};
    if (td == NULL || out == NULL)
        return -EINVAL;
    if (cfg == NULL)
        cfg = &defaults;
    if (index == 0 || index >= td->nqueues) {
        npv_ctx_log(td->ctx, NPV_LOG_ERROR,
                    "testdev %s: no queue %u to open (queue 0 is the device's own ring; "
                    "the device has %u)",
                    npv_dev_name(td->dev), index, td->nqueues);
        return -EINVAL;
    }
    int r = check_config(td->ctx, cfg);
    if (r < 0)
        return r;
    if (cfg->irq && (td->irq == NULL || index >= npv_irq_count(td->irq)))
        return bad_config(td->ctx, "irq on a queue needs the device opened with irq and a "
                                   "vector for the queue");
    /* Claimed atomically: threads may open and close their own queues at once. */
    uint32_t bit = 1u << index;
    if (__atomic_fetch_or(&td->open_queues, bit, __ATOMIC_ACQ_REL) & bit)
        return -EBUSY;
    struct npv_testdev_queue *q = calloc(1, sizeof(*q));
    if (q == NULL) {
        __atomic_fetch_and(&td->open_queues, ~bit, __ATOMIC_RELEASE);
        return -ENOMEM;
    }
    q->td = td;
    q->index = index;
    q->irq = cfg->irq ? td->irq : NULL;
    q->entries = cfg->entries != 0 ? cfg->entries : TESTDEV_DEFAULT_ENTRIES;
    r = queue_start(q, cfg);
    if (r < 0) {
        free(q);
        __atomic_fetch_and(&td->open_queues, ~bit, __ATOMIC_RELEASE);
        return r;
    }
    *out = q;
    return 0;
}

void npv_testdev_queue_close(struct npv_testdev_queue *q)
{
    if (q == NULL)
        return;
    queue_stop(q);
    __atomic_fetch_and(&q->td->open_queues, ~(1u << q->index), __ATOMIC_RELEASE);
    free(q);
}

struct npv_ring *npv_testdev_queue_ring(struct npv_testdev_queue *q)
{
    return q->ring;
}

unsigned npv_testdev_queue_index(const struct npv_testdev_queue *q)
{
    return q->index;
}

int npv_testdev_queue_reset(struct npv_testdev_queue *q)
{
    return npv_ring_reset(q->ring);
}

int npv_testdev_queue_inject_fault(struct npv_testdev_queue *q, enum npv_testdev_fault fault)
{
    return queue_inject_fault(q, fault);
}

int npv_testdev_queue_irq_on_sleep_only(struct npv_testdev_queue *q, bool on)
{
    return queue_irq_on_sleep_only(q, on);
}

int npv_testdev_state(struct npv_testdev *td, struct npv_testdev_state *st)
{
    uint64_t status = 0, iova = 0;
    int r = npv_bar_read(td->bar, TESTDEV_REG_STATUS, 4, &status);
    if (r == 0)
        r = npv_bar_read(td->bar, TESTDEV_REG_FAULT_IOVA, 8, &iova);
    if (r < 0)
        return r;
    st->running = (status & TESTDEV_STATUS_RUNNING) != 0;
    st->fault = (status & TESTDEV_STATUS_FAULT) != 0;
    st->fault_iova = iova;
    return 0;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * A wait that returns fewer than asked is "not yet": the ring either hands
 * back what completed before its timeout, or (a ring whose wait timeout
 * fails the jobs in flight) -ETIMEDOUT, which is passed on only when nothing
 * was collected: the jobs it failed come back as completions next time.
 */
int npv_testdev_wait(struct npv_testdev *td, enum npv_ring_wait_mode mode, unsigned n,
                     uint64_t timeout_ns, struct npv_cpl *cpl)
{
    if (n == 0)
        return -EINVAL;
    uint64_t start = mono_ns();
    unsigned got = 0;
    while (got < n) {
        uint64_t spent = mono_ns() - start;
        if (spent >= timeout_ns)
            break;
        int r = npv_ring_wait(td->q0.ring, mode, n - got, timeout_ns - spent, cpl + got, n - got);
        if (r < 0)
            return got > 0 ? (int)got : r; /* the collected ones are news; the error comes again */
        got += (unsigned)r;
    }
    return (int)got;
}

/* ---- many threads: the calls an npv_share makes (npuvfio/share.h) ---- */

static int share_submit(void *drv, const void *req, uint64_t cookie)
{
    struct npv_ring *ring = npv_testdev_ring(drv);
    int r = npv_ring_push(ring, req, cookie);
    if (r < 0)
        return r;
    npv_ring_submit(ring);
    return 0;
}

static int share_poll(void *drv, struct npv_cpl *cpl, unsigned max)
{
    return npv_ring_poll(npv_testdev_ring(drv), cpl, max);
}

const struct npv_share_ops *npv_testdev_share_ops(void)
{
    static const struct npv_share_ops ops = {.submit = share_submit, .poll = share_poll};
    return &ops;
}

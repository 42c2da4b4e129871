/* SPDX-License-Identifier: MIT */
/*
 * The generic test device's driver (libnpuvfio-testdev): a DMA engine with a
 * descriptor ring, a doorbell, a status block written back by DMA and MSI-X.
 * It has no hardware: its model (`npuvfio sim --device testdev`) is the
 * device. It is also the template the real drivers follow: open on an
 * npv_dev of any transport, program the ring, hand out the npv_ring, reset
 * and re-program after a hang or fault, close.
 *
 * Built on npv_dev, npv_domain, npv_dma, npv_bar, npv_irq and npv_ring only:
 * the driver never knows whether the device is behind kernel VFIO or a
 * vfio-user socket.
 *
 * What it takes at open, and gives back at close (in reverse order): BAR0,
 * MSI-X vectors (one per queue) when cfg->irq is set, one DMA buffer holding the ring and
 * the status block, mapped into the domain the device is attached to at open
 * (switching the device to another domain while the driver is open leaves
 * the ring unmapped there: close first). It takes no reference on dev: close
 * the driver before npv_dev_close(dev).
 *
 * Jobs: a descriptor (struct npv_testdev_desc) per job, written into the ring
 * with npv_ring_next/npv_ring_push on npv_testdev_ring(), made visible with
 * npv_ring_submit and reaped with npv_ring_poll/npv_ring_wait (ring.h). The
 * device runs them in order; a job the device failed completes with status
 * -EIO and dev_error one of enum npv_testdev_error, and the engine stops at
 * it (the ring's reset brings it back: npv_testdev_reset).
 *
 * Queues: the device has several rings (npv_testdev_queues(): 4 on the
 * model), each with its own registers, doorbell, status block, fault state
 * and MSI-X vector. The device's own ring (npv_testdev_ring) is queue 0;
 * npv_testdev_queue_open gives queue 1.. a ring of its own. A thread per
 * queue submits and reaps with the ring API on its own ring with no lock
 * anywhere (its doorbell shares no cache line with another queue's, its
 * ring and status block are its own memory); the engine serves the queues
 * round robin.
 *
 * Thread-safety: one npv_testdev (and its ring, queue 0) is used by one
 * thread at a time; so is one npv_testdev_queue (and its ring). Different
 * queues of one device are independent: each may be used by its own thread
 * at the same time as td's ring and the other queues, and queues may be
 * opened and closed from any thread while the others run (a queue's
 * register accesses take the device's control lock, never its fast path).
 * npv_testdev_close comes after every queue's close. Many threads share one
 * ring through an npv_share instead (npuvfio/share.h, docs/threads.md): a
 * lock held only across npv_ring_push + npv_ring_submit and npv_ring_poll,
 * completions routed to each submitting thread.
 */
#ifndef NPUVFIO_TESTDEV_H
#define NPUVFIO_TESTDEV_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <npuvfio/common.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/irq.h>
#include <npuvfio/ring.h>
#include <npuvfio/share.h>

#ifdef __cplusplus
extern "C" {
#endif

/* PCI identity (QEMU's test-device vendor id, as edu uses). */
#define NPV_TESTDEV_VENDOR_ID 0x1234u
#define NPV_TESTDEV_DEVICE_ID 0x4e50u
#define NPV_TESTDEV_CLASS     0x120000u /* processing accelerator */

/* What a descriptor asks for. */
enum npv_testdev_opcode {
    NPV_TESTDEV_OP_NOP = 0,
    NPV_TESTDEV_OP_COPY = 1, /* len bytes from src to dst */
    NPV_TESTDEV_OP_FILL = 2, /* len bytes of (pattern & 0xff) at dst */
};

/* Raise the queue's MSI-X vector (0 for td's ring) when this descriptor completes (with cfg->irq).
 */
#define NPV_TESTDEV_DESC_IRQ (1u << 0)
/* The longest COPY or FILL the device takes; longer is NPV_TESTDEV_ERR_BAD_DESC. */
#define NPV_TESTDEV_MAX_LEN (16u << 20)

/* One descriptor, as the device reads it from the ring (device ABI). */
struct npv_testdev_desc {
    uint32_t opcode; /* enum npv_testdev_opcode */
    uint32_t flags;  /* NPV_TESTDEV_DESC_* */
    npv_iova_t src;
    npv_iova_t dst;
    uint32_t len;
    uint32_t pattern;
};
static_assert(sizeof(struct npv_testdev_desc) == 32, "descriptor layout is device ABI");
static_assert(offsetof(struct npv_testdev_desc, src) == 8, "descriptor layout is device ABI");
static_assert(offsetof(struct npv_testdev_desc, dst) == 16, "descriptor layout is device ABI");
static_assert(offsetof(struct npv_testdev_desc, len) == 24, "descriptor layout is device ABI");

/* The device's error word: npv_cpl.dev_error of a job that completed with -EIO. */
enum npv_testdev_error {
    NPV_TESTDEV_ERR_NONE = 0,
    NPV_TESTDEV_ERR_DMA = 1,      /* a DMA of the descriptor was refused (unmapped IOVA) */
    NPV_TESTDEV_ERR_BAD_DESC = 2, /* unknown opcode, zero or too long a length */
};

/* Faults the device injects on command, armed for the next descriptor. */
enum npv_testdev_fault {
    NPV_TESTDEV_FAULT_NONE = 0,
    NPV_TESTDEV_FAULT_HANG = 1,         /* stop completing until reset */
    NPV_TESTDEV_FAULT_WILD_HEAD = 2,    /* write a completed head beyond the tail */
    NPV_TESTDEV_FAULT_DMA_UNMAPPED = 3, /* DMA to an IOVA nobody mapped */
    NPV_TESTDEV_FAULT_DISCONNECT = 4,   /* the device goes away (the server closes) */
    NPV_TESTDEV_FAULT_FAIL_RESET = 5,   /* the next reset fails */
};

struct npv_testdev_config {
    /* Ring size in descriptors: a power of two, 2..65536; 0 = 256. */
    uint32_t entries;
    /* Ring and status memory; NULL = the allocator's default (4 KiB pages, any node). */
    const struct npv_dma_opts *mem;
    /*
     * Route MSI-X vectors to eventfds so IRQ and HYBRID waits work: at open,
     * a vector per queue (as many as the device has; queue q waits on vector
     * q); on a queue, use its vector (the device opened with irq).
     */
    bool irq;
    /* Hybrid waits spin this long before sleeping; 0 = the ring's default. */
    uint64_t spin_ns;
    /*
     * A job's deadline when it is claimed with npv_ring_next/npv_ring_push:
     * 0 = NPV_RING_DEFAULT_JOB_TIMEOUT_NS, UINT64_MAX = none (ring.h).
     */
    uint64_t job_timeout_ns;
};

struct npv_testdev;

/*
 * Check that dev is a test device (its ID and descriptor-size registers),
 * allocate and map the ring, program the device and start its engine.
 * cfg may be NULL (defaults). Errors: -EINVAL a bad config (the reason is
 * logged), -ENODEV dev is not a test device, -ENOMEM, the transport's errno
 * when the device does not answer (-ENOTCONN: its vfio-user server is gone),
 * -EIO the device did not start.
 */
NPV_API int npv_testdev_open(struct npv_dev *dev, const struct npv_testdev_config *cfg,
                             struct npv_testdev **out);
/*
 * Stop the engine, forget jobs in flight, release the ring, the interrupt and
 * BAR0. Safe on a device whose server is gone. NULL is a no-op.
 */
NPV_API void npv_testdev_close(struct npv_testdev *td);

/* The ring jobs go through (owned by td). */
NPV_API struct npv_ring *npv_testdev_ring(struct npv_testdev *td);
/* The DMA buffer holding the ring and the status block (owned by td). */
NPV_API struct npv_dma *npv_testdev_ring_memory(struct npv_testdev *td);
/* The device td drives. */
NPV_API struct npv_dev *npv_testdev_dev(struct npv_testdev *td);
/* The interrupt: vector q is queue q's (owned by td), NULL without cfg->irq. */
NPV_API struct npv_irq *npv_testdev_irq(struct npv_testdev *td);

/*
 * Fail every job in flight on td's ring (queue 0) with -ECANCELED, reset
 * that queue (its CTRL.RESET: the other queues run on) and program its ring
 * again (npv_ring_reset). Brings back an engine stopped at a failed job and
 * a ring left dead by a failed reset. Returns 0, -EIO when the device did
 * not come back, or the transport's errno.
 */
NPV_API int npv_testdev_reset(struct npv_testdev *td);

/*
 * Collect n completions (1 <= n <= jobs not yet reaped) into cpl, oldest first,
 * waiting in mode for at most timeout_ns in all. Returns n; fewer (possibly
 * 0) when the timeout passed first, the rest still in flight; or, when
 * nothing was collected, a negative errno of npv_ring_wait. A completion's
 * status says how its job ended.
 */
NPV_API int npv_testdev_wait(struct npv_testdev *td, enum npv_ring_wait_mode mode, unsigned n,
                             uint64_t timeout_ns, struct npv_cpl *cpl);

/*
 * Interrupt only while a wait sleeps: the device reads a word in the ring
 * memory before each completion interrupt, and the ring engine sets it only
 * around its sleeps (npv_ring_set_irq_wanted), so a polling caller, or a
 * hybrid wait that finds its completions while it spins, costs the device no
 * interrupt. Off by default: then every descriptor with NPV_TESTDEV_DESC_IRQ
 * interrupts, as a caller that waits on the eventfd itself needs. Survives
 * resets. -EINVAL when the device was opened without irq; the transport's
 * errno.
 */
NPV_API int npv_testdev_irq_on_sleep_only(struct npv_testdev *td, bool on);

/*
 * Arm a fault for the next descriptor of td's ring (FAIL_RESET: for queue
 * 0's next reset, and the device's). -EINVAL, transport errno.
 */
NPV_API int npv_testdev_inject_fault(struct npv_testdev *td, enum npv_testdev_fault fault);

/* ---- queues: a ring per thread, no lock (docs/threads.md) ---- */

struct npv_testdev_queue;

/* How many queues (rings) the device has, td's own included: 1 on a single-ring device. */
NPV_API unsigned npv_testdev_queues(struct npv_testdev *td);

/*
 * Give queue index (1 .. npv_testdev_queues(td) - 1) a ring of its own:
 * allocate and map its ring and status block in td's domain, program the
 * queue's register window and start its engine. cfg as for
 * npv_testdev_open (NULL: defaults); cfg->irq needs td opened with irq and a
 * vector for this queue. Its counters in lib/stats: queue "ring<index>".
 * Errors: -EINVAL a bad index or config (logged), -EBUSY the queue is open,
 * -ENOMEM, the transport's errno, -EIO the queue's engine did not start.
 *
 * Resets: npv_testdev_queue_reset (and the ring's own recovery after a
 * missed deadline or a fault) resets this queue alone: the others keep
 * their jobs. A reset of the whole device (npv_dev_reset) stops every
 * queue: each ring finds its jobs in flight failed at their deadlines
 * (-ETIMEDOUT, the rest -ECANCELED), on its own thread, and its recovery
 * programs its queue again. What survives a reset, per queue: the ring, its
 * memory and config, and npv_testdev_queue_irq_on_sleep_only.
 */
NPV_API int npv_testdev_queue_open(struct npv_testdev *td, unsigned index,
                                   const struct npv_testdev_config *cfg,
                                   struct npv_testdev_queue **out);
/* Stop the queue's engine, forget its jobs in flight, release its ring. NULL is a no-op. */
NPV_API void npv_testdev_queue_close(struct npv_testdev_queue *q);
/* The queue's ring (owned by q): npv_ring_next/push/submit/poll/wait as on npv_testdev_ring. */
NPV_API struct npv_ring *npv_testdev_queue_ring(struct npv_testdev_queue *q);
/* The queue's index (its register window, doorbell and vector). */
NPV_API unsigned npv_testdev_queue_index(const struct npv_testdev_queue *q);
/* npv_testdev_reset for this queue alone. */
NPV_API int npv_testdev_queue_reset(struct npv_testdev_queue *q);
/* npv_testdev_inject_fault for this queue's next descriptor (FAIL_RESET: its next reset). */
NPV_API int npv_testdev_queue_inject_fault(struct npv_testdev_queue *q,
                                           enum npv_testdev_fault fault);
/* npv_testdev_irq_on_sleep_only for this queue (opened with cfg->irq). */
NPV_API int npv_testdev_queue_irq_on_sleep_only(struct npv_testdev_queue *q, bool on);

/*
 * The driver as an npv_share serves it to many threads (npuvfio/share.h,
 * docs/threads.md): npv_share_new(npv_testdev_share_ops(), td, &share); a
 * request is a struct npv_testdev_desc, queued with npv_ring_push and
 * announced at once (npv_ring_submit), completions from npv_ring_poll.
 */
NPV_API const struct npv_share_ops *npv_testdev_share_ops(void);

/* What the device reports about its engine. */
struct npv_testdev_state {
    bool running;        /* fetching descriptors */
    bool fault;          /* stopped at a refused DMA, a bad descriptor or a failed reset */
    uint64_t fault_iova; /* the last refused DMA address */
};
NPV_API int npv_testdev_state(struct npv_testdev *td, struct npv_testdev_state *st);

/* ---- building jobs ---- */

static inline struct npv_testdev_desc npv_testdev_nop(uint32_t flags)
{
    struct npv_testdev_desc d = {.opcode = NPV_TESTDEV_OP_NOP, .flags = flags};
    return d;
}

static inline struct npv_testdev_desc npv_testdev_copy(npv_iova_t dst, npv_iova_t src, uint32_t len,
                                                       uint32_t flags)
{
    struct npv_testdev_desc d = {
        .opcode = NPV_TESTDEV_OP_COPY, .flags = flags, .src = src, .dst = dst, .len = len};
    return d;
}

static inline struct npv_testdev_desc npv_testdev_fill(npv_iova_t dst, uint8_t byte, uint32_t len,
                                                       uint32_t flags)
{
    struct npv_testdev_desc d = {
        .opcode = NPV_TESTDEV_OP_FILL, .flags = flags, .dst = dst, .len = len, .pattern = byte};
    return d;
}

#ifdef __cplusplus
}
#endif

#endif

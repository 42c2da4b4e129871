/* SPDX-License-Identifier: MIT */
/*
 * Submitting work to a device and learning that it completed.
 *
 * Two layers:
 *
 * - npv_inflight: the bookkeeping every device needs whatever its shape:
 *   a cookie per submitted job, a deadline per job, completion in order, the
 *   status of each job (the device's error word where it has one), and the
 *   fan-out of one failure to every job still in flight. Register-driven
 *   devices (RKNPU per-core job registers, AICore per-sub-core dispatch and
 *   status registers) use it directly, without ring memory.
 *
 * - npv_ring: a descriptor ring in DMA memory, a producer index written to a
 *   doorbell register, and a status block in DMA memory in which the device
 *   writes its completed head (and an error word where it has one), with
 *   bounded waits by polling, by interrupt or both (hybrid). Used by the
 *   ring-shaped devices (Edge TPU, the generic test device).
 *
 * Indexes are free-running 32-bit sequence numbers: the device's completed
 * head and the producer index written to the doorbell count descriptors since
 * the device was (re)started, modulo 2^32; the slot of index i is
 * i & (entries - 1). A full ring holds `entries` descriptors.
 *
 * Memory ordering (what the engine does, so a driver need not):
 *
 *   submit:  descriptors are written with plain stores, then the doorbell is
 *            written with npv_bar_write32_release / _write64_release, which
 *            first orders every earlier store to DMA memory before the MMIO
 *            store. x86-64: stores are not reordered with other stores and a
 *            store to UC memory drains the write-combining buffers, so a
 *            compiler barrier suffices. arm64: `dmb oshst` (DMA memory is
 *            Normal, the BAR is Device-nGnRE; only a barrier in the outer
 *            shareable domain orders them for a bus master).
 *   reap:    the completed head is read with an acquire load (x86-64: plain
 *            mov, loads are not reordered with later loads; arm64: `ldar`),
 *            so the error word and any result data the device wrote before
 *            the head (the device's contract: head written last, with
 *            release) are read after it. The head is then range-checked.
 *   non-coherent DMA (arm64 without an IOMMU that snoops): when the config
 *            names the npv_dma of the ring and of the status block, the
 *            engine cleans the descriptors before the doorbell and
 *            invalidates the status block before reading it.
 *
 * Values the device writes are untrusted: a completed head outside
 * (last seen, last doorbell] is a device fault, reported as -NPV_EDEVFAULT
 * with the value logged, and never used as an index. An error index outside
 * the newly completed range is ignored as stale.
 *
 * Failure and recovery: when a wait's deadline passes with jobs still in
 * flight, or the device faults, the engine
 *   1. fails the oldest job with the cause (-ETIMEDOUT or -NPV_EDEVFAULT)
 *      and every other job in flight with -ECANCELED (their completions are
 *      returned by the following npv_ring_poll/npv_ring_wait calls),
 *   2. calls the config's reset callback, which resets the device and
 *      programs its ring again (both indexes restart at 0),
 *   3. returns the cause.
 * If the reset callback fails the ring is dead: submissions return -EIO
 * until npv_ring_reset() succeeds. Completions already decided are still
 * reaped from a dead ring.
 *
 * In polling mode npv_ring_next, npv_ring_submit, npv_ring_poll and
 * npv_ring_wait make no system call (the clock is read through the vDSO; a
 * test runs round trips under a seccomp filter that kills on any syscall).
 *
 * Thread-safety: one ring (and one npv_inflight) is used by one thread at a
 * time; different rings are independent.
 */
#ifndef NPUVFIO_RING_H
#define NPUVFIO_RING_H

#include <npuvfio/bar.h>
#include <npuvfio/common.h>
#include <npuvfio/ctx.h>
#include <npuvfio/dma.h>
#include <npuvfio/irq.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a job ended with. */
struct npv_cpl {
    uint64_t cookie;    /* as given at submission */
    int32_t status;     /* 0, -EIO (device error word), -ETIMEDOUT, -NPV_EDEVFAULT, -ECANCELED */
    uint32_t dev_error; /* the device's error word when status is -EIO, else 0 */
};

/* ---- bookkeeping ---- */

struct npv_inflight;

/* capacity: a power of two, 1..2^24. -EINVAL, -ENOMEM. */
NPV_API int npv_inflight_new(struct npv_ctx *ctx, uint32_t capacity, struct npv_inflight **out);
/* NULL is a no-op. */
NPV_API void npv_inflight_free(struct npv_inflight *t);

/*
 * Record a job. deadline_ns is absolute CLOCK_MONOTONIC in nanoseconds, 0 for
 * none. Writes the job's sequence number. -EAGAIN when capacity jobs are
 * recorded and not yet reaped.
 */
NPV_API int npv_inflight_add(struct npv_inflight *t, uint64_t cookie, uint64_t deadline_ns,
                             uint32_t *seq);
/*
 * The device finished every job before `end` (a sequence number). An end
 * outside [oldest unfinished, next to add] is -NPV_EDEVFAULT and changes
 * nothing.
 */
NPV_API int npv_inflight_complete(struct npv_inflight *t, uint32_t end);
/* Give an unfinished job a status other than success. -ERANGE if seq is not unfinished. */
NPV_API int npv_inflight_set_status(struct npv_inflight *t, uint32_t seq, int32_t status,
                                    uint32_t dev_error);
/*
 * Finish every unfinished job: the oldest with first_status, the others with
 * others_status. Returns how many were failed.
 */
NPV_API uint32_t npv_inflight_fail_all(struct npv_inflight *t, int32_t first_status,
                                       int32_t others_status);
/* Move up to max finished jobs, oldest first, into cpl. Returns how many. */
NPV_API unsigned npv_inflight_reap(struct npv_inflight *t, struct npv_cpl *cpl, unsigned max);
/* Jobs added and not yet finished / finished and not yet reaped. */
NPV_API uint32_t npv_inflight_unfinished(const struct npv_inflight *t);
NPV_API uint32_t npv_inflight_unreaped(const struct npv_inflight *t);
/* Sequence numbers: the oldest unfinished job and the next to be added. */
NPV_API uint32_t npv_inflight_done(const struct npv_inflight *t);
NPV_API uint32_t npv_inflight_tail(const struct npv_inflight *t);
/* The earliest deadline among unfinished jobs, 0 if none has one. O(unfinished). */
NPV_API uint64_t npv_inflight_next_deadline(const struct npv_inflight *t);

/* ---- ring ---- */

struct npv_ring;

#define NPV_RING_NO_FIELD UINT32_MAX

/* What the doorbell register takes. */
enum npv_ring_db_format {
    NPV_RING_DB_INDEX = 0, /* the free-running producer index (truncated to db_width) */
    NPV_RING_DB_SLOT,      /* the producer index modulo entries */
};

/* How the device writes its completed head. */
enum npv_ring_head_format {
    NPV_RING_HEAD_COUNT = 0, /* free-running count since (re)start, mod 2^32 */
    NPV_RING_HEAD_SLOT,      /* masked to the ring size (Edge TPU) */
};

/* What a non-zero error word means. */
enum npv_ring_error_format {
    NPV_RING_ERROR_PER_JOB = 0, /* a job's failure code (see error_index) */
    NPV_RING_ERROR_FATAL,       /* sticky fatal word (Edge TPU status block fatal_error):
                                   non-zero faults the ring until reset: oldest job -EIO
                                   with dev_error = word, the others -ECANCELED, then reset */
};

enum npv_ring_wait_mode {
    NPV_RING_WAIT_POLL = 0, /* spin on the status block until the deadline */
    NPV_RING_WAIT_IRQ,      /* sleep on the interrupt's eventfd (io_uring) */
    NPV_RING_WAIT_HYBRID,   /* spin up to spin_ns, then sleep */
};

struct npv_ring_status_fields {
    uint32_t head;        /* offset of the u32 completed head */
    uint32_t error;       /* offset of the u32 error word (0 = none), or NPV_RING_NO_FIELD */
    uint32_t error_index; /* offset of the u32 index of the failed descriptor, or NO_FIELD */
};

struct npv_ring_config {
    uint32_t entries;   /* power of two, 2..65536 */
    uint32_t desc_size; /* bytes per descriptor, as the device reads them; multiple of 4 */
    /* Ring memory: entries * desc_size bytes at desc_vaddr (device address desc_iova). */
    void *desc_vaddr;
    npv_iova_t desc_iova;
    /* The status block, status_size bytes, and where the device's words are in it. */
    void *status_vaddr;
    npv_iova_t status_iova;
    uint32_t status_size;
    struct npv_ring_status_fields fields;
    /*
     * Optional: the buffers behind desc_vaddr and status_vaddr, for cache
     * maintenance when DMA is not coherent (arm64). NULL: coherent.
     */
    struct npv_dma *desc_dma;
    struct npv_dma *status_dma;
    /* The doorbell: a register of db_width (4 or 8) bytes at db_off in db_bar. */
    const struct npv_bar *db_bar;
    uint64_t db_off;
    unsigned db_width;
    enum npv_ring_db_format db_format;
    /*
     * A slot doorbell or a slot head keeps one slot free (full and empty
     * differ): at most entries - 1 jobs in flight (npv_ring_capacity).
     */
    enum npv_ring_head_format head_format;
    enum npv_ring_error_format error_format;
    /* Interrupt waits: vector irq_vec of irq. NULL: only polling. */
    struct npv_irq *irq;
    uint32_t irq_vec;
    /* Hybrid waits spin this long before sleeping; 0 = 20 us. */
    uint64_t spin_ns;
    /*
     * Required. Reset the device and program its ring again so that both
     * indexes restart at 0 (e.g. npv_dev_reset, then write ring base, size,
     * status base and enable). Called after a missed deadline or a device
     * fault, and by npv_ring_reset. Returns 0 or a negative errno.
     */
    int (*reset)(void *arg);
    void *reset_arg;
};

/*
 * Create a ring over memory the driver allocated and mapped. The device must
 * already be programmed with the ring (indexes at 0). -EINVAL for a bad
 * config (the reason is logged), -ENOMEM.
 */
NPV_API int npv_ring_new(struct npv_ctx *ctx, const struct npv_ring_config *cfg,
                         struct npv_ring **out);
/* The jobs still in flight are forgotten. NULL is a no-op. */
NPV_API void npv_ring_free(struct npv_ring *r);

/*
 * Claim the next descriptor slot for a job with this cookie and point *desc at
 * it (desc_size bytes, contents undefined). The device sees it at the next
 * npv_ring_submit. -EAGAIN when the ring is full (reap completions first),
 * -EIO when the ring is dead.
 */
NPV_API int npv_ring_next(struct npv_ring *r, uint64_t cookie, void **desc);
/* Copy desc_size bytes from desc into the next slot: npv_ring_next + memcpy. */
NPV_API int npv_ring_push(struct npv_ring *r, const void *desc, uint64_t cookie);
/*
 * Ring the doorbell once for every slot claimed since the last submit
 * (batching). Returns how many descriptors it made visible (0: nothing to do).
 */
NPV_API int npv_ring_submit(struct npv_ring *r);

/*
 * Collect what the device finished, without waiting: up to max completions
 * into cpl, oldest first. Returns how many, or -NPV_EDEVFAULT when the
 * status block holds an impossible head (then the ring recovers as above
 * and the following calls return the failed jobs).
 */
NPV_API int npv_ring_poll(struct npv_ring *r, struct npv_cpl *cpl, unsigned max);
/*
 * Wait until at least min completions (1 <= min <= max) are collected into
 * cpl, or timeout_ns passes. Returns how many (>= min), -ETIMEDOUT (the ring
 * recovered as above; jobs failed by it are returned by the next calls),
 * -NPV_EDEVFAULT, -EINVAL (IRQ mode without an irq; min > max; min more than
 * the jobs in flight), or an error of the interrupt wait. In POLL and HYBRID
 * modes timeout_ns counts from the wait's first clock reading, taken after a
 * few empty polls (a completion already there, or arriving within them, costs
 * no clock read).
 */
NPV_API int npv_ring_wait(struct npv_ring *r, enum npv_ring_wait_mode mode, unsigned min,
                          uint64_t timeout_ns, struct npv_cpl *cpl, unsigned max);

/*
 * Fail every job in flight with -ECANCELED, call the reset callback, and
 * make the ring usable again. Also how a dead ring is brought back.
 */
NPV_API int npv_ring_reset(struct npv_ring *r);

struct npv_ring_stats {
    uint64_t submitted;  /* descriptors made visible */
    uint64_t doorbells;  /* doorbell writes */
    uint64_t completed;  /* jobs finished by the device */
    uint64_t dev_errors; /* of which with the device's error word */
    uint64_t timeouts;
    uint64_t faults; /* impossible heads */
    uint64_t resets; /* reset callback calls (including failed ones) */
    uint64_t irq_sleeps;
};
NPV_API void npv_ring_stats(const struct npv_ring *r, struct npv_ring_stats *st);
NPV_API uint32_t npv_ring_entries(const struct npv_ring *r);
/* How many jobs may be in flight at once: entries, or entries - 1 with a slot doorbell or head. */
NPV_API uint32_t npv_ring_capacity(const struct npv_ring *r);
/* Jobs claimed and not yet finished. */
NPV_API uint32_t npv_ring_in_flight(const struct npv_ring *r);
/* Whether a failed reset left the ring dead. */
NPV_API int npv_ring_dead(const struct npv_ring *r);

#ifdef __cplusplus
}
#endif

#endif

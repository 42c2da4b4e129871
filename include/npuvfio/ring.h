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
 * Indexes: the producer index (what the doorbell announces) and the
 * device's completed head count descriptors since the device was (re)started.
 * The device writes its completed head either as a free-running count modulo
 * 2^32 (NPV_RING_HEAD_COUNT) or masked to the ring size (NPV_RING_HEAD_SLOT,
 * Edge TPU); the doorbell takes the free-running index (NPV_RING_DB_INDEX) or
 * the slot (NPV_RING_DB_SLOT, Edge TPU). The slot of index i is
 * i & (entries - 1). With a free-running head and index doorbell a full ring
 * holds `entries` descriptors; with a slot doorbell or a slot head one slot
 * stays free (entries - 1 in flight), so that a full ring and an empty one
 * differ to the device. npv_ring_capacity() says which.
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
 *            so an indexed error word and any result data the device wrote
 *            before the head are read after it. The head is then
 *            range-checked. An error word without an index (fatal, or per
 *            job without error_index) is read on every collect, and when it
 *            is non-zero the head is read again after it (acquire fence,
 *            then an acquire load): see "Device contract".
 *   non-coherent DMA (arm64 without an IOMMU that snoops): when the config
 *            names the npv_dma of the ring and of the status block, the
 *            engine cleans the descriptors before the doorbell and
 *            invalidates the status block before reading it. The engine
 *            never leaves a CPU-written line of the status block dirty while
 *            the device may write it: the block is zeroed and cleaned to the
 *            point of coherency before the device is enabled (at
 *            npv_ring_new, and before every reset callback), and an error
 *            word the engine clears is cleaned at once. Otherwise the next
 *            clean+invalidate (EL0 has no invalidate-only) could write the
 *            CPU's stale zero over the device's first completion.
 *            For the same reason the status block may not share a cache
 *            line with the descriptors: npv_ring_new refuses a config whose
 *            status block lies within NPV_RING_CACHE_GRANULE bytes (rounded
 *            to that granule) of the descriptor ring.
 *
 * Device contract: what a device (or a model of one) must do so that a host
 * on another core can tell every job's fate from the status block alone. The
 * engine relies on this and on nothing else. (Model choice: no public source
 * gives the order of the Edge TPU's status block writes; this is the order
 * under which no read the host makes can be misattributed. The test
 * ring_device_on_another_core drives the engine with a device thread that
 * keeps it.)
 *   - The completed head covers jobs the device finished; it is written
 *     with release, after the results of the jobs it covers.
 *   - Error word WITH error_index (NPV_RING_ERROR_PER_JOB): the word and the
 *     index are written before the head that covers the failed job. The
 *     index names the job; an index outside the jobs a head newly covers is
 *     ignored (stale, or of a job a later head covers).
 *   - Error word WITHOUT an index (NPV_RING_ERROR_FATAL, and
 *     NPV_RING_ERROR_PER_JOB without error_index): the word names the first
 *     job the head does NOT cover. The device writes the head over every job
 *     it finished before the failed one, then the word (with release), then
 *     raises its completion interrupt as it does for a head, and writes no
 *     head after the word: a fatal word until the device is reset, a
 *     per-job word until the host has cleared it (the engine stores 0 there
 *     once it has charged the word to that job; the device then writes the
 *     head past the failed job and goes on). Because a word is never
 *     followed by a head, the engine, on a non-zero word, reads the head
 *     again and completes what it covers before it charges the word: a head
 *     written between the engine's first head read and the word is never
 *     mistaken for the failed job, whichever core the device runs on. A
 *     per-job word while every announced job is covered names nothing: a
 *     device fault (-NPV_EDEVFAULT).
 *   - Reset: when the reset callback returns, nothing the device wrote
 *     before it stopped is still on its way, and the restarted device writes
 *     nothing to the status block before the next doorbell. A status write
 *     that raced the reset (made between the engine zeroing the block and
 *     the callback stopping the device) is harmless: the engine zeroes and
 *     cleans the block again after the callback returns, so nothing written
 *     before the reset is read against the restarted indexes.
 *
 * Values the device writes are untrusted: a completed head whose distance
 * from the last one seen exceeds what the doorbell announced (or, masked,
 * a head outside the ring) is a device fault, reported as -NPV_EDEVFAULT
 * with the value logged, and never used as an index. An error index outside
 * the newly completed range is ignored as stale.
 *
 * Deadlines: every job has one, given when its slot is claimed (npv_ring_next:
 * the config's job_timeout_ns, by default NPV_RING_DEFAULT_JOB_TIMEOUT_NS;
 * npv_ring_next_timed: the job's own). A claim reads no clock (a vDSO clock
 * read costs 20-60 ns, a fair share of a polled round trip): the timeout
 * counts from the engine's next clock reading after the claim, which a
 * caller that polls or waits gets within NPV_RING_CLOCK_EVERY polls (an
 * interrupt wait reads the clock at once). A job that completes before any
 * clock reading never needed its deadline; a caller that claims and then
 * does not look at the ring for a while extends its jobs' deadlines by that
 * while, which delays only a report nobody was there to receive.
 *
 * A wait's timeout is not a job's deadline: a wait that runs out of time
 * returns what completed (possibly nothing) and changes nothing; the caller
 * may do other work and wait again.
 * When a job's own deadline has passed, npv_ring_poll and npv_ring_wait
 * alike (whichever notices first: poll reads the vDSO clock once every
 * NPV_RING_CLOCK_EVERY calls, a wait at least as often while it spins, and
 * an interrupt wait sleeps no longer than the earliest deadline)
 *   1. fail every job in flight whose deadline passed with -ETIMEDOUT and the
 *      other jobs in flight with -ECANCELED,
 *   2. zero and clean the status block, call the config's reset callback,
 *      which resets the device and programs its ring again (both indexes
 *      restart at 0), and zero and clean the block again,
 *   3. return those failures as completions (struct npv_cpl.status), oldest
 *      first, from this call and the following ones.
 * A deadline is checked against the jobs still in flight: a job the device
 * completed in time is never failed, however late it is reaped.
 *
 * Device faults recover the same way:
 *   - an impossible completed head: the oldest job in flight fails with
 *     -NPV_EDEVFAULT, the others with -ECANCELED, the device is reset, and
 *     the call that found it returns -NPV_EDEVFAULT (the failed jobs come
 *     back from the following calls);
 *   - a non-zero sticky fatal word (NPV_RING_ERROR_FATAL): the jobs the head
 *     covers (read again after the word) complete as usual, the oldest job
 *     still in flight (the first the head does not cover) fails with -EIO
 *     and dev_error = the word, the others with -ECANCELED, the device is
 *     reset, and the failures are returned as completions;
 *   - a per-job word without an index while no announced job is left
 *     uncovered: as an impossible head.
 * If the reset callback fails the ring is dead: submissions return -EIO
 * until npv_ring_reset() succeeds. Completions already decided are still
 * reaped from a dead ring.
 *
 * In flight: a job is in flight from its claim (npv_ring_next) until it is
 * finished, whether or not a submit has announced it yet. Claimed but
 * unsubmitted jobs count against npv_ring_capacity() and in
 * npv_ring_in_flight(), have deadlines, and are failed with -ECANCELED by a
 * reset like the others.
 *
 * The reset callback runs on the caller's thread, inside whichever call
 * recovers: npv_ring_poll, npv_ring_wait or npv_ring_reset.
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
/*
 * The names the table's counters carry in lib/stats (stats.h): its device
 * (e.g. "rknpu fdab0000.npu") and queue (e.g. "core0"); NULL keeps one.
 * Other characters than [A-Za-z0-9-_.:/] become '_'. Default: device
 * "unnamed", queue "queueN".
 */
NPV_API void npv_inflight_set_name(struct npv_inflight *t, const char *device, const char *queue);
/* Count a device reset the table's owner made (stats.h "resets"; the ring counts its own). */
NPV_API void npv_inflight_count_reset(struct npv_inflight *t);
/* Jobs added and not yet finished / finished and not yet reaped. */
NPV_API uint32_t npv_inflight_unfinished(const struct npv_inflight *t);
NPV_API uint32_t npv_inflight_unreaped(const struct npv_inflight *t);
/* Sequence numbers: the oldest unfinished job and the next to be added. */
NPV_API uint32_t npv_inflight_done(const struct npv_inflight *t);
NPV_API uint32_t npv_inflight_tail(const struct npv_inflight *t);
/*
 * The earliest deadline among unfinished jobs, 0 if none has one. O(1): the
 * table keeps it as jobs are added and finished (O(1) amortised each).
 */
NPV_API uint64_t npv_inflight_next_deadline(const struct npv_inflight *t);
/*
 * The deadline service of the ring, for register-driven devices: if an
 * unfinished job's deadline is at or before now_ns (CLOCK_MONOTONIC ns),
 * finish every unfinished job, those whose own deadline passed with
 * -ETIMEDOUT and the others with -ECANCELED, and return how many were
 * failed; the caller then resets its device. 0 when none expired, in O(1):
 * call it whenever a clock reading is at hand.
 */
NPV_API uint32_t npv_inflight_expire(struct npv_inflight *t, uint64_t now_ns);

/* ---- ring ---- */

struct npv_ring;

#define NPV_RING_NO_FIELD UINT32_MAX

/*
 * A job's deadline when the config leaves job_timeout_ns 0: 1 s after its
 * claim (counted from the engine's next clock reading; see "Deadlines").
 */
#define NPV_RING_DEFAULT_JOB_TIMEOUT_NS 1000000000ull
/* npv_ring_poll reads the clock once per this many calls (deadlines armed). */
#define NPV_RING_CLOCK_EVERY 16u
/*
 * The status block may not share a granule of this size with the
 * descriptors. 128 bytes: the largest data-cache line and cache writeback
 * granule (CTR_EL0.CWG) of the arm64 cores that carry NPUs and of Apple's;
 * 64 on x86. A fixed value keeps a config valid or invalid independent of
 * the CPU it happens to run on.
 */
#define NPV_RING_CACHE_GRANULE 128u

/* What the doorbell register takes. */
enum npv_ring_db_format {
    NPV_RING_DB_INDEX = 0, /* the free-running producer index (truncated to db_width) */
    NPV_RING_DB_SLOT,      /* the producer index modulo entries */
};

/* How the device writes its completed head. */
enum npv_ring_head_format {
    NPV_RING_HEAD_COUNT = 0, /* free-running count since (re)start, mod 2^32 */
    NPV_RING_HEAD_SLOT,      /* masked to the ring size (Edge TPU); one slot stays free */
};

/* What a non-zero error word means (0 always means "no error"). */
enum npv_ring_error_format {
    /*
     * A job's failure code (see "Device contract" above). With error_index
     * the index names the job, and word and index are written before the
     * head that covers it. Without it the word names the first job the head
     * does not cover: the device writes the head over the jobs before it,
     * then the word, and waits; the engine charges the word to that job,
     * then zeroes the word (and cleans it, on non-coherent DMA), and only
     * then does the device write the head past the failed job. So a repeated
     * code is a new failure, never success, and no second failure can be
     * written over the first. An error index is refused with
     * NPV_RING_HEAD_SLOT: a masked index left over from an earlier lap would
     * name a later job.
     */
    NPV_RING_ERROR_PER_JOB = 0,
    /*
     * A sticky fatal word (Edge TPU status block fatal_error): non-zero faults
     * the ring until the device is reset (see "Device faults" above). It
     * names the first job the head does not cover; the device writes the
     * head over what it finished first, and no head after the word. No
     * error_index.
     */
    NPV_RING_ERROR_FATAL,
};

enum npv_ring_wait_mode {
    NPV_RING_WAIT_POLL = 0, /* spin on the status block until the deadline */
    NPV_RING_WAIT_IRQ,      /* sleep on the interrupt's eventfd (io_uring) */
    NPV_RING_WAIT_HYBRID,   /* spin up to spin_ns, then sleep */
};

/*
 * Byte offsets in the status block of the device's u32 words. Each is a
 * multiple of 4 with the word inside status_size (the block itself starts
 * 4-byte aligned); offset 0 is a valid offset. NPV_RING_NO_FIELD: the device
 * has no such word.
 */
struct npv_ring_status_fields {
    uint32_t head;        /* the completed head (required) */
    uint32_t error;       /* the error word (a value of 0: no error), or NPV_RING_NO_FIELD */
    uint32_t error_index; /* the index of the failed descriptor, or NPV_RING_NO_FIELD */
};

struct npv_ring_config {
    uint32_t entries;   /* power of two, 2..65536 */
    uint32_t desc_size; /* bytes per descriptor, as the device reads them; multiple of 4 */
    /* Ring memory: entries * desc_size bytes at desc_vaddr (device address desc_iova). */
    void *desc_vaddr;
    npv_iova_t desc_iova;
    /*
     * The status block, status_size bytes, 4-byte aligned, and where the
     * device's words are in it. It may not share an NPV_RING_CACHE_GRANULE
     * (128-byte granule) with the descriptors (npv_ring_new refuses it) nor
     * with the interrupt-wanted word (npv_ring_set_irq_wanted refuses it);
     * on non-coherent DMA nothing else the CPU writes may share its granules
     * either (the engine cannot see the neighbours: give the block its own
     * 128-byte-aligned granules, as npv_dma_alloc's page alignment does).
     */
    void *status_vaddr;
    npv_iova_t status_iova;
    uint32_t status_size;
    struct npv_ring_status_fields fields;
    enum npv_ring_head_format head_format;
    enum npv_ring_error_format error_format;
    /*
     * Optional: the buffers behind desc_vaddr and status_vaddr, for cache
     * maintenance when DMA is not coherent (arm64). NULL: coherent.
     */
    struct npv_dma *desc_dma;
    struct npv_dma *status_dma;
    /*
     * The doorbell: a register of db_width (4 or 8) bytes at db_off in db_bar:
     * a device's BAR (npv_bar_map), or memory a device played by a thread of
     * this process reads (npv_bar_wrap, bar.h), as the ring tests' device does.
     */
    const struct npv_bar *db_bar;
    uint64_t db_off;
    unsigned db_width;
    enum npv_ring_db_format db_format;
    /* Interrupt waits: vector irq_vec of irq. NULL: only polling. */
    struct npv_irq *irq;
    uint32_t irq_vec;
    /* Hybrid waits spin this long before sleeping; 0 = 20 us. */
    uint64_t spin_ns;
    /*
     * Each job's deadline, relative to its claim: 0 = NPV_RING_DEFAULT_JOB_TIMEOUT_NS,
     * UINT64_MAX = none (then only the caller's own bookkeeping notices a hung
     * device).
     */
    uint64_t job_timeout_ns;
    /*
     * Required. Reset the device and program its ring again so that both
     * indexes restart at 0 (e.g. npv_dev_reset, then write ring base, size,
     * status base and enable). Called on the caller's thread, inside the
     * npv_ring_poll or npv_ring_wait that found a job's deadline passed or a
     * device fault, and by npv_ring_reset; always with the status block
     * already zeroed and cleaned to the point of coherency. The callback
     * must stop the device before it enables it again and must not touch
     * the status block itself; when it returns, no write the device made
     * before the stop may still be on its way, and the restarted device may
     * write nothing to the block before the next doorbell (the engine zeroes
     * and cleans it again then: see "Device contract"). Returns 0 or a
     * negative errno.
     */
    int (*reset)(void *arg);
    void *reset_arg;
};

/*
 * Create a ring over memory the driver allocated and mapped. npv_ring_new
 * zeroes the status block and cleans it to the point of coherency, so the
 * device is best enabled after it returns; it may be enabled before if it
 * writes nothing to the status block until the first doorbell (indexes at
 * 0). -EINVAL for a bad config (the reason is logged), -ENOMEM.
 */
NPV_API int npv_ring_new(struct npv_ctx *ctx, const struct npv_ring_config *cfg,
                         struct npv_ring **out);
/* The jobs still in flight are forgotten. NULL is a no-op. */
NPV_API void npv_ring_free(struct npv_ring *r);

/*
 * Claim the next descriptor slot for a job with this cookie and point *desc at
 * it (desc_size bytes, contents undefined); the job's deadline is the ring's
 * job_timeout_ns (see "Deadlines" above). The device sees it at the next npv_ring_submit.
 * -EAGAIN when npv_ring_capacity() jobs are claimed and not yet reaped (reap
 * completions first), -EIO when the ring is dead.
 */
NPV_API int npv_ring_next(struct npv_ring *r, uint64_t cookie, void **desc);
/*
 * As npv_ring_next, with this job's own deadline: timeout_ns (0 = the
 * config's job_timeout_ns, which is NPV_RING_DEFAULT_JOB_TIMEOUT_NS when the
 * config left it 0 and none when it is UINT64_MAX; UINT64_MAX = none),
 * counted from the engine's next clock reading (see "Deadlines" above).
 */
NPV_API int npv_ring_next_timed(struct npv_ring *r, uint64_t cookie, uint64_t timeout_ns,
                                void **desc);
/* Copy desc_size bytes from desc into the next slot: npv_ring_next + memcpy. */
NPV_API int npv_ring_push(struct npv_ring *r, const void *desc, uint64_t cookie);
/*
 * Announce every slot claimed since the last submit with ONE doorbell write
 * (batching: the producer index after the last of them). Returns how many
 * descriptors it made visible (0: nothing to do, and no doorbell write).
 */
NPV_API int npv_ring_submit(struct npv_ring *r);

/*
 * Collect what the device finished, without waiting: up to max completions
 * into cpl, oldest first, including jobs failed by their deadline or a fatal
 * error word. Returns how many, or -NPV_EDEVFAULT when the status block holds
 * an impossible head (then the ring recovers as above and the following
 * calls return the failed jobs).
 */
NPV_API int npv_ring_poll(struct npv_ring *r, struct npv_cpl *cpl, unsigned max);
/*
 * Wait until at least min completions (1 <= min <= max) are collected into
 * cpl, or timeout_ns passes. Returns how many were collected: >= min, or
 * fewer (possibly 0) when timeout_ns passed first; a wait's timeout fails no
 * job and resets nothing. Jobs whose own deadline passed during the wait are
 * returned failed (see "Deadlines" above) and count towards min. Also
 * -NPV_EDEVFAULT, -EINVAL (IRQ mode without an irq; min > max; min more than
 * the jobs in flight), or an error of the interrupt wait. In POLL and HYBRID
 * modes timeout_ns counts from the wait's first clock reading, taken after a
 * few empty polls (a completion already there, or arriving within them, costs
 * no clock read). In IRQ and HYBRID modes an interrupt left over from a job
 * already collected (its eventfd count not yet read) never ends a wait: the
 * count is drained before sleeping and the status block read again.
 */
NPV_API int npv_ring_wait(struct npv_ring *r, enum npv_ring_wait_mode mode, unsigned min,
                          uint64_t timeout_ns, struct npv_cpl *cpl, unsigned max);

/*
 * Interrupt suppression, as virtio's event suppression: word is a u32 in
 * memory the device reads before it raises a completion interrupt, and the
 * device raises none while the word is 0. The engine stores 1 there only
 * while an IRQ or HYBRID wait is about to sleep or sleeps, and 0 again when
 * the wait returns, so a caller that polls, or a hybrid wait that finds its
 * completions while it spins, costs the device no interrupt. Ordering: the
 * engine stores 1, issues a full barrier, and reads the status block again
 * before it sleeps; the device writes the completed head (or an error word
 * without index, which also wakes a waiter) with release, issues a full
 * barrier, then reads the word. Either the device sees 1 or the engine sees
 * the new head or word, so a completion is never slept through.
 * dma: the buffer behind word, for cache maintenance on non-coherent DMA
 * (NULL: coherent). The word may not share an NPV_RING_CACHE_GRANULE with the
 * status block (the CPU writes it, the device writes the block). NULL word:
 * off (the device must then interrupt unconditionally again). Call between
 * waits. 0, or -EINVAL (misaligned, or in the status block's granule).
 */
NPV_API int npv_ring_set_irq_wanted(struct npv_ring *r, uint32_t *word, struct npv_dma *dma);

/*
 * A completion fd for an event loop (epoll, poll, io_uring POLL_ADD), for a
 * ring with an interrupt (the config's irq): wait for EPOLLIN on it, then
 * call npv_ring_reap_fd. It is readable while completions wait: the
 * device's completion interrupt makes it readable, and npv_ring_reap_fd
 * drains it, collects and reaps up to max, and makes it readable again when
 * it leaves completions unreaped (level-triggered: a loop that reaps fewer
 * than are waiting is woken again). The first call also sets the
 * interrupt-wanted word (npv_ring_set_irq_wanted) to 1 for good, since the
 * loop sleeps where the engine cannot see it; a device without that word
 * must be asked to interrupt per job (testdev: NPV_TESTDEV_DESC_IRQ).
 * A hung device raises nothing: give epoll a timeout no longer than the
 * jobs' budget and call npv_ring_reap_fd when it expires too (it reads the
 * clock and fails the jobs whose deadline passed, see "Deadlines"). Jobs
 * reaped with npv_ring_poll or npv_ring_wait in between may leave the fd
 * readable with nothing to reap once (npv_ring_reap_fd then returns 0);
 * npv_ring_poll itself is unchanged and makes no system call.
 * Returns the fd (owned by the ring's irq), or -EINVAL without an irq.
 * npv_ring_reap_fd: the number reaped (possibly 0), -EINVAL, -NPV_EDEVFAULT
 * as npv_ring_poll, or the errno of the eventfd read or write. Same
 * thread-safety as the ring: one thread at a time.
 */
NPV_API int npv_ring_completion_fd(struct npv_ring *r);
NPV_API int npv_ring_reap_fd(struct npv_ring *r, struct npv_cpl *cpl, unsigned max);

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
    uint64_t timeouts;   /* recoveries because a job's deadline passed */
    uint64_t faults;     /* impossible heads and fatal error words */
    uint64_t resets;     /* reset callback calls (including failed ones) */
    uint64_t irq_sleeps; /* blocking waits on the interrupt's eventfd (wake-ups) */
};
NPV_API void npv_ring_stats(const struct npv_ring *r, struct npv_ring_stats *st);
/* The names of the ring's counters in lib/stats (stats.h): npv_inflight_set_name. */
NPV_API void npv_ring_set_name(struct npv_ring *r, const char *device, const char *queue);
NPV_API uint32_t npv_ring_entries(const struct npv_ring *r);
/* How many jobs may be claimed and not yet reaped: entries, or entries - 1 with a slot format. */
NPV_API uint32_t npv_ring_capacity(const struct npv_ring *r);
/* Jobs claimed and not yet finished, submitted or not. */
NPV_API uint32_t npv_ring_in_flight(const struct npv_ring *r);
/* Whether a failed reset left the ring dead. */
NPV_API int npv_ring_dead(const struct npv_ring *r);

#ifdef __cplusplus
}
#endif

#endif

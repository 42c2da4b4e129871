/* SPDX-License-Identifier: MIT */
/*
 * The Rockchip RK3588 NPU (RKNPU) driver: three cores driven through their
 * program controllers (PC mode: the core fetches a register-command list by
 * DMA and runs it), up to 16 IOMMU domains of 4 GiB each, jobs with a
 * deadline, and a matmul helper that builds the register commands of an int8
 * or fp16 matmul (a 1x1 convolution) in the hardware's native layouts.
 *
 * Built on npv_dev, npv_domain, npv_dma, npv_bar and npv_inflight only: the
 * same driver runs on the real NPU bound to vfio-platform and on the model
 * (a PCI-shaped stand-in) over vfio-user.
 *
 * Domains: the NPU addresses memory with 32-bit IOVAs (its IOMMU's two-level
 * table spans exactly 4 GiB), so one address space holds at most 4 GiB. The
 * driver keeps up to NPV_RKNPU_MAX_DOMAINS domains, each its own npv_domain
 * with the aperture [0, 4 GiB); a buffer lives in the domain named at
 * npv_rknpu_mem_create and a job runs in the domain it names. A domain is
 * created on first use and freed when its last buffer and its last job are
 * gone. The three cores sit behind one IOMMU: the device is attached to one
 * domain at a time, so jobs of different domains never run at once; a job
 * of another domain waits until the running jobs of the current one finish,
 * then the device is switched (skipped when unchanged), and no new job of
 * the current domain starts while one of another domain waits.
 *
 * What a switch costs depends on the backend (npv_dev_attach): iommufd
 * replaces the device's page table in one call, flat in the number of
 * mappings (~17 us in the VM suite); legacy type1 has no replace and
 * replays every mapping of the target domain -- each unmapped (unpinned)
 * from the old container and mapped (pinned) again, ~11 us per mapping in
 * the VM suite, so a domain of GiBs in 4 KiB pages switched per job costs
 * seconds (hugepage-backed buffers cut the count); vfio-user replays the
 * mappings to the server (0.1-0.2 ms each). bench/npuvfio-rknpu-switch-cost
 * prints them side by side.
 *
 * Jobs: a job is one or more tasks (register-command lists). The driver
 * copies the tasks into command memory of the job's domain, chains them and
 * starts them on the cores of the job's core_mask. Every job has a deadline
 * from its start (hang detection); a core that does not finish its part in
 * time is soft-reset, the job fails with -ETIMEDOUT and the jobs queued
 * behind it proceed. A job may also carry a budget from its submission
 * (npv_rknpu_submit_within, the serving deadline, queueing included).
 *
 * Caller memory: npv_rknpu_mem_wrap maps an npv_dma the caller made
 * (npv_dma_wrap of its own tensors or of a file mapping) into a domain, as
 * npv_rknpu_mem_create does with the driver's own memory.
 *
 * Laid-out jobs (an owner running other processes' drivers, npuvfio
 * serve): npv_rknpu_domain_claim makes a domain with no command memory of
 * the driver's, npv_rknpu_mem_wrap_at places the client's memory at the
 * client's own IOVAs, and npv_rknpu_submit_laid_out runs a register-command
 * list the client laid out there, trailers and all, as the vendor's
 * RKNPU_SUBMIT does; the job then queues, switches domains, completes and
 * times out like any other.
 *
 * Non-coherent hosts (the RK3588's NPU does not snoop the CPU caches): the
 * caller cleans what the CPU wrote before a submit and invalidates what the
 * NPU wrote before reading it, npv_rknpu_mem_sync_for_device / _for_cpu
 * (below); no-ops where DMA is coherent.
 *
 * Thread-safety: one npv_rknpu (with its buffers and jobs) is used by one
 * thread at a time, npv_rknpu_mem_wrap / _unwrap and npv_rknpu_submit_within
 * included; different npv_rknpu are independent. The accessors of a
 * buffer (npv_rknpu_mem_vaddr, _iova, _size) are lock-free and may be called
 * from any thread while the buffer lives. Many threads share one NPU
 * through an npv_share (npuvfio/share.h, docs/threads.md): a lock held only
 * across npv_rknpu_submit[_within] and npv_rknpu_poll, completions routed to
 * each submitting thread; one lock for the three cores. Or a thread per
 * core with no lock at all: npv_rknpu_queue_open (below) gives each core a
 * queue of its own, used by one thread, while the device-wide calls are
 * refused (docs/threads.md).
 */
#ifndef NPUVFIO_RKNPU_H
#define NPUVFIO_RKNPU_H

#include <stdbool.h>
#include <npuvfio/common.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/ring.h>
#include <npuvfio/share.h>

#ifdef __cplusplus
extern "C" {
#endif

struct npv_rknpu;
struct npv_rknpu_mem;

#define NPV_RKNPU_NUM_CORES   3u
#define NPV_RKNPU_MAX_DOMAINS 16u
/* The IOVA space of one domain: the NPU's 32-bit device addresses. */
#define NPV_RKNPU_DOMAIN_SIZE (1ull << 32)

/* How npv_rknpu_wait learns that a core finished. */
enum npv_rknpu_completion {
    NPV_RKNPU_POLL = 0, /* read the cores' status in a loop (short naps after a while) */
    /*
     * Sleep on the cores' interrupts between looks (MSI-X vector c on the
     * PCI-shaped model, platform IRQ index c, the core's line, on the SoC),
     * never past the earliest job deadline.
     */
    NPV_RKNPU_IRQ = 1,
    /*
     * NPV_RKNPU_IRQ, or npv_rknpu_open fails (the error of the interrupt
     * set-up, logged with the reason) instead of falling back to polling.
     * NPV_RKNPU_IRQ falls back with a warning: on the RK3588 the NPU's line
     * is shared with its IOMMU and vfio-platform requests it unshared.
     */
    NPV_RKNPU_IRQ_ONLY = 2,
};

struct npv_rknpu_config {
    uint32_t queue_depth;      /* jobs queued or running at once, power of two, 1..1024; 0 = 64 */
    uint32_t max_job_words;    /* register-command words of one job, trailers included; 0 = 4096 */
    uint64_t job_timeout_ns;   /* a job's deadline when its description gives none; 0 = 1 s */
    uint64_t reset_timeout_ns; /* one soft reset of a core; 0 = 100 ms */
    enum npv_rknpu_completion completion;
};

/*
 * Find the three cores (one 192 KiB region, or three 64 KiB regions in
 * device-tree order), check their version registers, mask and clear their
 * interrupts. The device's current domain is left as it is; the driver
 * attaches its own domains as jobs need them. cfg may be NULL. -ENODEV when
 * the cores read all-ones or no core window is found, -EPROTO for an unknown
 * version, -EINVAL for a bad config, -ENOMEM.
 */
NPV_API int npv_rknpu_open(struct npv_dev *dev, const struct npv_rknpu_config *cfg,
                           struct npv_rknpu **out);
/*
 * Stop the cores and free everything the driver holds. Queued and running
 * jobs are forgotten; buffers must be destroyed first (a buffer still alive
 * is reported in the log and keeps its domain). NULL is a no-op.
 */
NPV_API void npv_rknpu_close(struct npv_rknpu *npu);
NPV_API struct npv_dev *npv_rknpu_dev(const struct npv_rknpu *npu);
/* The cores found at open (3 on RK3588). */
NPV_API unsigned npv_rknpu_num_cores(const struct npv_rknpu *npu);

/* npv_rknpu_mem_create flags */
enum {
    /*
     * Fault no page in: only pages the CPU or the device touch cost RAM
     * (NPV_DMA_SPARSE). For address spaces larger than what is used, e.g.
     * weights spread over several domains; over a kernel IOMMU the map pins
     * every page anyway.
     */
    NPV_RKNPU_MEM_SPARSE = 1u << 0,
};

/*
 * A buffer of size bytes (rounded up to 4 KiB) in domain domain_id
 * (0..NPV_RKNPU_MAX_DOMAINS-1), mapped read-write for the NPU. The domain is
 * created if it is the first use of domain_id. The buffer holds a reference
 * on its domain until npv_rknpu_mem_destroy. Errors: -EINVAL (size 0, bad
 * id or flags), -ENOSPC (the domain's 4 GiB have no room for it, including
 * any size above 4 GiB), -ENOMEM, or the error of creating the domain or
 * mapping the buffer. On failure nothing is left allocated and a domain the
 * call created is gone again.
 */
NPV_API int npv_rknpu_mem_create(struct npv_rknpu *npu, uint64_t size, uint32_t domain_id,
                                 unsigned flags, struct npv_rknpu_mem **out);
/*
 * Caller memory as a buffer of domain domain_id: dma (npv_dma_wrap of a
 * server's own tensors or a file mapping, or an npv_dma_alloc buffer) is
 * mapped read-write into the domain's 4 GiB IOVA space; npv_rknpu_mem_iova
 * gives its address there, _vaddr the caller's pointer. The same map on
 * every transport: a kernel IOMMU pins the pages (RLIMIT_MEMLOCK,
 * npv_dma_map); a vfio-user device reaches the memory through the buffer's
 * file, so memory without one (anonymous, MAP_PRIVATE) is -NPV_ENOTSHARED
 * there. dma stays the caller's: it must outlive the wrapper and not be
 * freed before npv_rknpu_mem_unwrap. Errors as npv_rknpu_mem_create, and
 * npv_dma_map's (-EEXIST: already in that domain).
 */
NPV_API int npv_rknpu_mem_wrap(struct npv_rknpu *npu, struct npv_dma *dma, uint32_t domain_id,
                               struct npv_rknpu_mem **out);
/*
 * Unmap a wrapped buffer from its domain and free the wrapper; the caller's
 * memory and npv_dma stay. -EBUSY while any job of the buffer's domain is
 * queued or running (finished ones count no more, reaped or not; the driver cannot tell which
 * buffers a job's register commands name): wait for them, nothing changed.
 * -EINVAL for a buffer from npv_rknpu_mem_create; npv_dma_unmap's error
 * (the mapping is then kept and the call may be retried).
 */
NPV_API int npv_rknpu_mem_unwrap(struct npv_rknpu_mem *mem);
/*
 * A domain whose address layout the caller owns (an owner serving another
 * process, npuvfio serve): created empty, with no command memory of the
 * driver's in it, so every IOVA of [NPV_DOMAIN_IOVA_ZERO_GUARD, 4 GiB) is the
 * caller's to place buffers at (npv_rknpu_mem_wrap_at). Jobs of it are
 * submitted laid out (npv_rknpu_submit_laid_out); npv_rknpu_submit of it is
 * -EOPNOTSUPP (no command memory). The claim holds the domain like a buffer
 * does until npv_rknpu_domain_release. -EINVAL (bad id), -EEXIST (the domain
 * exists), -ENOMEM.
 *
 * The domain is freed after its release, its last buffer and its last job,
 * whichever is last; until then it takes laid-out jobs only (and buffers of
 * npv_rknpu_mem_create / _wrap, placed by its allocator), and
 * npv_rknpu_queue_open of it is -EOPNOTSUPP: queues take no laid-out jobs.
 * It is counted in npv_rknpu_counters' domains_live, and a job of it
 * switches the device to it like any other.
 */
NPV_API int npv_rknpu_domain_claim(struct npv_rknpu *npu, uint32_t domain_id);
/*
 * Drop the claim; -EBUSY while a job of the domain is queued or running, -ENOENT if not claimed.
 * -EINVAL for a bad id. Buffers still in the domain keep it (and their
 * mappings) until they are unwrapped or destroyed.
 */
NPV_API int npv_rknpu_domain_release(struct npv_rknpu *npu, uint32_t domain_id);
/*
 * npv_rknpu_mem_wrap at a given IOVA (page aligned, the whole range inside
 * [NPV_DOMAIN_IOVA_ZERO_GUARD, 4 GiB)): -EINVAL (misaligned, outside),
 * -EEXIST (overlaps a mapping of the domain), else as npv_rknpu_mem_wrap.
 * Undone with npv_rknpu_mem_unwrap.
 *
 * Page: 4 KiB (the IOMMU's). Any domain takes it: a claimed one, or one of
 * the driver's, where its command memory is a mapping like the others
 * (-EEXIST on overlap). A range the IOMMU reserves (the kernel's reserved
 * regions) is -EINVAL too; dma already in the domain is -EEXIST.
 */
NPV_API int npv_rknpu_mem_wrap_at(struct npv_rknpu *npu, struct npv_dma *dma, uint32_t domain_id,
                                  npv_iova_t iova, struct npv_rknpu_mem **out);
/*
 * Unmap and free; the domain's reference is dropped. No job using it may be
 * queued. A wrapped buffer is unwrapped (npv_rknpu_mem_unwrap): when that is
 * refused it is logged and the buffer stays. NULL is a no-op.
 */
NPV_API void npv_rknpu_mem_destroy(struct npv_rknpu_mem *mem);
NPV_API void *npv_rknpu_mem_vaddr(const struct npv_rknpu_mem *mem);
NPV_API npv_iova_t npv_rknpu_mem_iova(const struct npv_rknpu_mem *mem);
NPV_API uint64_t npv_rknpu_mem_size(const struct npv_rknpu_mem *mem);
NPV_API uint32_t npv_rknpu_mem_domain(const struct npv_rknpu_mem *mem);

/*
 * Cache maintenance of a buffer, for hosts whose DMA does not snoop the CPU
 * caches. The RK3588's NPU is such a master: the vendor driver gives user
 * space RKNPU_MEM_SYNC (rknpu_gem_sync_ioctl / rknpu_mem_sync_ioctl:
 * RKNPU_MEM_SYNC_TO_DEVICE, _FROM_DEVICE over an offset and a size) and
 * mainline rocket DRM_IOCTL_ROCKET_FINI_BO / PREP_BO (rocket_gem.c:
 * dma_sync_sgtable_for_device / _for_cpu). These are the same two
 * directions on [off, off + len) of the buffer, as two calls like
 * npv_dma_sync_for_device / _for_cpu underneath (the direction is the
 * moment: before a submit, after a completion; one call with a flag would
 * only add a branch).
 *
 * The rule: after the CPU writes anything the NPU will read (inputs,
 * weights, bias; and any fill of an output buffer, which a later
 * invalidate would otherwise write back over the NPU's result), call
 * npv_rknpu_mem_sync_for_device on those bytes before npv_rknpu_submit;
 * after the job's completion and before the CPU reads what the NPU wrote,
 * call npv_rknpu_mem_sync_for_cpu on those bytes. The driver syncs its own
 * command memory (the laid-out register-command lists); it cannot sync the
 * buffers a job names, since it does not parse register commands for
 * addresses. A wrapped buffer (npv_rknpu_mem_wrap) may equally be synced
 * with npv_dma_sync_for_device / _for_cpu on the caller's npv_dma: the
 * same call.
 *
 * No-ops, costing a look at the buffer's mappings, while every domain the
 * buffer is mapped in is cache coherent (VFIO_DMA_CC_IOMMU, or vfio-user:
 * the device model shares the host's memory); DC CVAC / DC CIVAC by line
 * on an arm64 host otherwise (npv_dma_sync_for_device(3)). 0, -EINVAL for
 * a NULL buffer, -ERANGE when [off, off + len) is not inside the buffer
 * (npv_rknpu_mem_size; nothing is synced then: the vendor 0.9.x ioctl does
 * not check the range, the refusal is a model choice). Lock-free: from any
 * thread while the buffer lives and its npv_dma is not being mapped or
 * unmapped (npv_rknpu_mem_wrap / _unwrap, npv_dma_map of a wrapped one).
 */
NPV_API int npv_rknpu_mem_sync_for_device(struct npv_rknpu_mem *mem, uint64_t off, uint64_t len);
NPV_API int npv_rknpu_mem_sync_for_cpu(struct npv_rknpu_mem *mem, uint64_t off, uint64_t len);

/*
 * One task: a register-command list without its 4-word trailer (the driver
 * appends it, chaining the tasks of a core), and the blocks the task's
 * final "operation enable" command starts.
 */
struct npv_rknpu_task {
    const uint64_t *regcmd;
    uint32_t regcmd_count; /* words; at least 1 */
    uint32_t enable_mask;  /* NPV_RKNPU_ENABLE_* ; 0 = CNA | CORE | DPU */
};

/* Blocks a task enables (the GLOBAL OPERATION_ENABLE layout). */
enum {
    NPV_RKNPU_ENABLE_CNA = 1u << 0,
    NPV_RKNPU_ENABLE_CORE = 1u << 2,
    NPV_RKNPU_ENABLE_DPU = 1u << 3,
    NPV_RKNPU_ENABLE_DPU_RDMA = 1u << 4,
    NPV_RKNPU_ENABLE_PPU = 1u << 5,
    NPV_RKNPU_ENABLE_PPU_RDMA = 1u << 6,
};

struct npv_rknpu_job {
    const struct npv_rknpu_task *tasks;
    uint32_t nr_tasks; /* 1..4095 */
    /*
     * 0x1, 0x2, 0x4: every task on that core. 0: the driver chooses the core
     * with the least queued work. 0x3, 0x7: the tasks are split across those
     * cores in order (task i on the (i mod n)-th core of the mask, each
     * core's share chained and run in parallel). Other masks are -EINVAL.
     */
    uint32_t core_mask;
    uint32_t domain_id; /* the domain every address in the tasks belongs to */
    /*
     * The job's start-relative deadline (hang detection): how long it may
     * run once started on its cores (a job queued behind a stalled one is
     * not charged for the wait); 0: the config's. The submit-relative one
     * (a serving budget, queueing included) is npv_rknpu_submit_within's.
     */
    uint64_t timeout_ns;
    uint64_t cookie; /* returned in the job's completion */
};

/*
 * Lay the job's tasks out in command memory of its domain and queue it on
 * its cores; it starts at once if its cores are idle and its domain is the
 * device's (or nothing runs: the device is then switched). No system call,
 * lock or allocation when the domain is current and a core is free: the
 * command memory is allocated with the domain. Errors: -EINVAL (bad mask,
 * no tasks, an empty task), -E2BIG (more words than max_job_words), -ENOENT
 * (the domain has no buffer: nothing the job names can be in it),
 * -EOPNOTSUPP (a claimed domain: npv_rknpu_submit_laid_out), -EAGAIN
 * (queue_depth jobs unreaped), -EIO (a core could not be reset: the NPU is
 * dead, npv_rknpu_reset may revive it).
 */
NPV_API int npv_rknpu_submit(struct npv_rknpu *npu, const struct npv_rknpu_job *job);
/*
 * npv_rknpu_submit with a serving budget: the job must complete within
 * budget_ns (> 0, else -EINVAL) of this call, time queued included, besides
 * its start-relative timeout_ns. Past its budget it fails with -ETIMEDOUT:
 * still queued, it is dropped where it waits and no core or other job is
 * touched; already running, its cores are soft-reset as for a stall (the
 * only way to stop a run), which fails nothing else where a core resets
 * alone (the model's reset lines) and fails the other cores' running jobs
 * (-EIO) where only a whole-device reset exists. Budgets are served by
 * npv_rknpu_poll / _wait, so a job fails at the first poll after its
 * budget; npv_rknpu_wait sleeps no later than the earliest budget.
 */
NPV_API int npv_rknpu_submit_within(struct npv_rknpu *npu, const struct npv_rknpu_job *job,
                                    uint64_t budget_ns);
/* A job whose register-command list already lies in its domain's memory. */
struct npv_rknpu_laid_out_job {
    npv_iova_t regcmd_iova; /* the first task's list: 16-byte aligned, below 4 GiB */
    uint32_t amount;        /* its PC REGISTER_AMOUNTS, as the list's own chaining expects */
    uint32_t nr_tasks;      /* 1..4095: tasks the list chains through its trailers */
    uint32_t done_mask;     /* INTERRUPT bits whose rise ends the last task (non-zero) */
    uint32_t core_mask;     /* 0 (the least busy core), 0x1, 0x2 or 0x4 */
    uint32_t domain_id;
    uint64_t timeout_ns; /* from its start; 0: the config's */
    uint64_t cookie;
};
/*
 * Queue a laid-out job: one core's part, started with the PC registers as
 * npv_rknpu_submit's are (rknpu_core_start), in domain_id (which must exist:
 * -ENOENT), waiting like any job for its core and its domain's turn. Completes
 * through npv_rknpu_poll / _wait like npv_rknpu_submit's jobs, with the same
 * statuses; -EIO carries the interrupt status in dev_error. Errors: -EINVAL
 * (bad mask, nr_tasks, done_mask 0, misaligned or >= 4 GiB regcmd_iova),
 * -EAGAIN (queue full), -EIO (dead). Same thread-safety as npv_rknpu_submit.
 *
 * This is the vendor driver's RKNPU_SUBMIT: the lists and their trailers
 * are the submitter's, read by the core as they lie; the driver copies,
 * checks and syncs nothing of them (the submitter cleans its caches on a
 * non-coherent host). The value fields are taken as the PC registers take
 * them: amount keeps its low 16 bits; the DMA error bits in done_mask (a
 * driver unmasks them beside the done bits) and bits that do not exist are
 * ignored, so a done_mask of only those is -EINVAL too; a regcmd_iova of 0
 * (the guard page) is -EINVAL. Any existing domain takes laid-out jobs, a
 * claimed one (npv_rknpu_domain_claim) or one of the driver's. -EBUSY while
 * queues are open: queue mode (npv_rknpu_queue_open) takes no laid-out jobs.
 */
NPV_API int npv_rknpu_submit_laid_out(struct npv_rknpu *npu,
                                      const struct npv_rknpu_laid_out_job *job);
/*
 * Look at the cores once: finish what they completed, fail what passed its
 * deadline (soft-resetting that core), start queued jobs. Returns how many
 * completions were written to cpl (up to max), oldest first per core. A job's
 * status: 0, -EIO (the core reported a DMA error: dev_error holds the
 * interrupt status), -ETIMEDOUT, -ECANCELED (failed with another part of it,
 * or by a reset), -NPV_EDEVFAULT (an impossible status value). Never blocks.
 */
NPV_API int npv_rknpu_poll(struct npv_rknpu *npu, struct npv_cpl *cpl, unsigned max);
/*
 * The driver as an npv_share serves it to many threads (npuvfio/share.h,
 * docs/threads.md): npv_share_new(npv_rknpu_share_ops(), npu, &share); a
 * request is a struct npv_rknpu_request, queued with npv_rknpu_submit
 * (budget_ns 0) or npv_rknpu_submit_within (job->cookie is replaced by the
 * share's; the caller's comes back in the ticket); completions from
 * npv_rknpu_poll.
 */
struct npv_rknpu_request {
    const struct npv_rknpu_job *job;
    uint64_t budget_ns; /* 0: none beyond the job's start-relative timeout */
};
NPV_API const struct npv_share_ops *npv_rknpu_share_ops(void);
/*
 * Poll until at least min (1..max) completions are collected or timeout_ns
 * passes (then fewer, possibly 0, and nothing is failed: wait again). Jobs'
 * own deadlines are served while waiting, so a wait never outlasts a stalled
 * core by more than the job's deadline.
 */
NPV_API int npv_rknpu_wait(struct npv_rknpu *npu, unsigned min, uint64_t timeout_ns,
                           struct npv_cpl *cpl, unsigned max);
/* Submit one job and wait for it (nothing else may be in flight): 0 or its status. */
NPV_API int npv_rknpu_run(struct npv_rknpu *npu, const struct npv_rknpu_job *job);
/* Fail every queued and running job with -ECANCELED and soft-reset every core. */
NPV_API int npv_rknpu_reset(struct npv_rknpu *npu);

struct npv_rknpu_counters {
    uint32_t domains_live;    /* domains that exist now */
    uint32_t mems_live;       /* buffers that exist now */
    uint64_t mem_bytes;       /* their total size */
    uint64_t domain_switches; /* attaches of the device to another domain */
    uint64_t jobs;            /* completed, whatever their status */
    uint64_t timeouts;        /* jobs failed with -ETIMEDOUT */
    uint64_t resets;          /* core soft resets that succeeded */
    uint64_t reset_retries;   /* soft resets that failed and were retried */
};
NPV_API void npv_rknpu_counters(const struct npv_rknpu *npu, struct npv_rknpu_counters *out);

/* ---- a queue per core: one thread per core, no lock ---- */

struct npv_rknpu_queue;

/*
 * Give core `core` a queue of its own, for one thread that submits to and
 * polls it with no lock, no system call (on a mapped window) and nothing
 * another queue touches: its own job slots (queue_depth / 3 of them, the
 * command memory partitioned per core), its own core's registers, its own
 * counters, its own recovery.
 *
 * Queue mode is exclusive: while any queue is open the device-wide calls
 * (npv_rknpu_submit[_within], _poll, _wait, _run, _reset) return -EBUSY,
 * and a queue opens only when no device-wide job is queued, running or
 * unreaped (else -EBUSY).
 *
 * Domains: the queue's jobs run in domain_id (which must have a buffer).
 * The device has one IOMMU attachment for the three cores: queues of one
 * domain run at once; queues of different domains take turns. A queue
 * whose domain is not attached claims the switch (no queue starts a job
 * meanwhile), and at its polls, once every core's running job has ended
 * (each queue's own poll sees its core end), attaches the device to its
 * domain; it gives up after its job's timeout_ns, failing the job with
 * -ETIMEDOUT (a queue whose thread stopped polling would hold the switch
 * forever). While queues are open, wrapped buffers of their domains cannot
 * be unwrapped (-EBUSY).
 *
 * Errors: -EINVAL (NULL, a core index at or above npv_rknpu_num_cores, a
 * bad domain id), -EBUSY (the core has a queue, or device-wide jobs are in
 * flight), -ENOENT (the domain has no buffer), -EOPNOTSUPP (a claimed
 * domain, npv_rknpu_domain_claim: laid-out jobs only), -ENOSPC (queue_depth below
 * 3: no slot per core), -EIO (the NPU is dead), -ENOMEM.
 *
 * Thread-safety: open and close are control calls, made by the thread that
 * owns the npv_rknpu and not concurrently with its other calls (open the
 * queues, then hand each to its thread; join the threads, then close).
 */
NPV_API int npv_rknpu_queue_open(struct npv_rknpu *npu, unsigned core, uint32_t domain_id,
                                 struct npv_rknpu_queue **out);
/*
 * Close the queue: a job still running on its core is stopped by a soft
 * reset of that core; unreaped completions are dropped. Its counters are
 * added to the device's (npv_rknpu_counters). NULL is a no-op.
 */
NPV_API void npv_rknpu_queue_close(struct npv_rknpu_queue *q);
NPV_API unsigned npv_rknpu_queue_core(const struct npv_rknpu_queue *q);
/*
 * npv_rknpu_submit on the queue's core: core_mask must be 0 or the core's
 * own bit (multi-core jobs stay on the device-wide path: -EINVAL), domain_id
 * the queue's (-EXDEV). Jobs run in submission order, one at a time on the
 * core. -EAGAIN when the queue's slots hold unreaped jobs; -EIO when the
 * core could not be reset (the queue is dead until closed) or is out of
 * service (no reset on this transport); other errors as npv_rknpu_submit.
 */
NPV_API int npv_rknpu_queue_submit(struct npv_rknpu_queue *q, const struct npv_rknpu_job *job);
/*
 * With a serving budget (> 0), as npv_rknpu_submit_within: a job still
 * queued past it fails with -ETIMEDOUT without running when it reaches the
 * core (completions stay in order), a running one at the first poll past it
 * (its core is soft-reset, no other core is touched).
 */
NPV_API int npv_rknpu_queue_submit_within(struct npv_rknpu_queue *q,
                                          const struct npv_rknpu_job *job, uint64_t budget_ns);
/*
 * Look at the queue's core once: finish its running job, fail it past its
 * deadline (soft-resetting this core alone; on a transport whose only reset
 * is the whole device's, the other queues find their running jobs failed
 * with -EIO at their next poll), start the next. Writes up to max
 * completions, in submission order, and returns how many. Statuses as
 * npv_rknpu_poll. Never blocks.
 */
NPV_API int npv_rknpu_queue_poll(struct npv_rknpu_queue *q, struct npv_cpl *cpl, unsigned max);
/*
 * Poll the queue until at least min (1..max) completions are collected or
 * timeout_ns passes (then fewer, possibly 0: wait again). With
 * NPV_RKNPU_IRQ it sleeps on its own core's interrupt (the core's MSI-X
 * vector or platform line, no other queue's), never past the running job's
 * deadline; otherwise, and while a domain switch is pending, in short naps.
 */
NPV_API int npv_rknpu_queue_wait(struct npv_rknpu_queue *q, unsigned min, uint64_t timeout_ns,
                                 struct npv_cpl *cpl, unsigned max);

struct npv_rknpu_queue_counters {
    uint64_t submitted;       /* jobs accepted */
    uint64_t jobs;            /* completed, whatever their status */
    uint64_t errors;          /* completed with a status other than 0 */
    uint64_t timeouts;        /* of those, -ETIMEDOUT */
    uint64_t resets;          /* soft resets of this core that succeeded */
    uint64_t reset_retries;   /* soft resets that failed and were retried */
    uint64_t domain_switches; /* attaches of the device to this queue's domain */
};
/* The queue's own counters, from the queue's thread (or after it stopped). */
NPV_API void npv_rknpu_queue_counters(const struct npv_rknpu_queue *q,
                                      struct npv_rknpu_queue_counters *out);

/* ---- matmul ---- */

enum npv_rknpu_dtype {
    NPV_RKNPU_INT8 = 0, /* int8 x int8 -> int32, exact */
    NPV_RKNPU_FP16 = 1, /* fp16 x fp16 -> fp32 */
};

/*
 * C[M][N] = A[M][K] x B[K][N] (+ bias[N]) (then max(0, .) with relu), as a
 * 1x1 direct convolution: the feature map is A (height M, width 1, K
 * channels), the N kernels are B's columns. Buffers hold the native layouts
 * (npv_rknpu_matmul_a_index, _b_index and _c_index below give each element's
 * place, for packing A and B and reading C):
 *   A int8 [K/16][M][16], fp16 [K/8][M][8];
 *   B int8 [N/32][K/32][32][32], fp16 [N/16][K/32][16][32];
 *   C int32 / fp32 [N/4][M][4];
 *   bias int32 / fp32 [N].
 * Limits (one task, the convolution buffer of one core): M a multiple of 4,
 * 4..544; K a multiple of 32, 32..4096; N a multiple of 32 (int8) or 16
 * (fp16), up to 4096.
 */
struct npv_rknpu_matmul {
    enum npv_rknpu_dtype dtype;
    uint32_t m, k, n;
    npv_iova_t a, b, c;
    npv_iova_t bias; /* 0: none */
    bool relu;
};

/* Bytes of A, B, C and bias in their native layouts. -EINVAL for shapes outside the limits. */
struct npv_rknpu_matmul_sizes {
    uint64_t a, b, c, bias;
};
NPV_API int npv_rknpu_matmul_sizes(const struct npv_rknpu_matmul *mm,
                                   struct npv_rknpu_matmul_sizes *out);
/*
 * Write the matmul's register commands (without the trailer) to regcmd,
 * which has room for max words, and describe the task in *task (regcmd,
 * count, enable mask; may be NULL). Returns the number of words, -EINVAL for
 * a shape outside the limits or an address not 16-byte aligned or at or
 * above 4 GiB, -ENOSPC when max is too small (NPV_RKNPU_MATMUL_MAX_WORDS
 * always suffices).
 */
#define NPV_RKNPU_MATMUL_MAX_WORDS 128u
NPV_API int npv_rknpu_matmul_task(const struct npv_rknpu_matmul *mm, uint64_t *regcmd, uint32_t max,
                                  struct npv_rknpu_task *task);

/*
 * Element offsets (not bytes) in the native layouts, for packing A and B and
 * reading C: A[row][col] (row < M, col < K), B[row][col] (row < K, col < N),
 * C[row][col] (row < M, col < N).
 */
NPV_API uint64_t npv_rknpu_matmul_a_index(enum npv_rknpu_dtype dt, uint32_t m, uint32_t k,
                                          uint32_t row, uint32_t col);
NPV_API uint64_t npv_rknpu_matmul_b_index(enum npv_rknpu_dtype dt, uint32_t k, uint32_t n,
                                          uint32_t row, uint32_t col);
NPV_API uint64_t npv_rknpu_matmul_c_index(uint32_t m, uint32_t n, uint32_t row, uint32_t col);

#ifdef __cplusplus
}
#endif

#endif

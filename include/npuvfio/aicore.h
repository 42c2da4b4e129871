/* SPDX-License-Identifier: MIT */
/*
 * The AICore-class device driver (devices/aicore/regs.h): the host plays the
 * on-chip scheduler. It launches a run, handshakes with every present,
 * powered sub-core, dispatches fp32 tasks (vector add, matmul) through each
 * sub-core's dispatch register, polls its status register for ACK and FIN
 * with a deadline per task, and reads the run's epoch-stamped result record.
 *
 * Built on npv_dev, npv_domain, npv_dma and npv_bar only: the same driver
 * runs on a device bound to vfio-pci and on the model over vfio-user.
 *
 * Register-address tables: the device finds each sub-core's Ctrl window (and,
 * with PMU on, its Pmu window) through tables of one 8-byte entry per
 * physical sub-core in device memory. They are device constants: a context
 * builds each once, uploads it on first use and keeps it until close, with a
 * committed flag apart from its address (a failed upload whose rollback free
 * also failed leaves the block owned but uncommitted; the next use reuses it).
 * A reset need not keep device memory: after one, each table is uploaded
 * again before the next launch. An uncommitted table is never given to the
 * device. Where the Pmu registers are in the Ctrl window the Ctrl table
 * serves as the Pmu table.
 *
 * Pipeline: two slots. A run executes in one while the next is prepared in
 * the other; the device executes one run at a time (LAUNCH resets every
 * sub-core's dispatch register).
 *
 * Thread-safety: an npv_aicore and every run of it are used by one thread at
 * a time (the caller serialises all calls on one context, npv_aicore_mem_map
 * and _unmap included). Different contexts are independent. Many threads
 * share one device through an npv_share (npuvfio/share.h, docs/threads.md)
 * over a queue of the two slots (prepare into a free slot, launch when idle;
 * poll the active run, release it, launch the next), the share's lock held
 * only across those non-blocking calls. That lock is inherent, not a
 * stopgap: the device executes one run at a time on every sub-core, so a
 * second thread has nothing to run in parallel (docs/threads.md).
 *
 * Serving: operands may live in caller memory (npv_aicore_mem_map), and a
 * run may carry a budget from its preparation (npv_aicore_prepare_within)
 * besides the per-task deadline from dispatch (task_timeout_ns).
 *
 * Non-coherent hosts: the driver syncs its own DMA memory (table images,
 * handshake records, payloads, the result record). Operands are the
 * caller's npv_dma: npv_dma_sync_for_device on inputs, and on any fill of an
 * output, before npv_aicore_launch; npv_dma_sync_for_cpu on outputs after
 * the run finished, before reading them (npuvfio/dma.h; no-ops where DMA is
 * coherent).
 */
#ifndef NPUVFIO_AICORE_H
#define NPUVFIO_AICORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <npuvfio/common.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/share.h>

#ifdef __cplusplus
extern "C" {
#endif

struct npv_aicore;
struct npv_aicore_run;

#define NPV_AICORE_SLOTS      2u   /* pipeline slots */
#define NPV_AICORE_MAX_CORES  256u /* physical sub-cores the driver supports */
#define NPV_AICORE_PMU_EVENTS 8u   /* counters read per sub-core */
#define NPV_AICORE_NO_DEP     UINT32_MAX

/*
 * Device memory: alloc, free and host-to-device copy, as a table of functions
 * a caller (a test) may wrap, for example to make a free fail. The defaults
 * are npv_aicore_default_mem_ops(); arg is the table's own.
 */
struct npv_aicore_mem_ops {
    int (*alloc)(struct npv_aicore *ac, void *arg, size_t len, uint64_t *dev_addr);
    int (*free)(struct npv_aicore *ac, void *arg, uint64_t dev_addr);
    /* Copy len bytes from src (an IOVA in the device's domain) to dev_addr. */
    int (*copy_h2d)(struct npv_aicore *ac, void *arg, uint64_t dev_addr, npv_iova_t src,
                    size_t len);
    void *arg;
};

struct npv_aicore_config {
    /*
     * The start-relative deadline (hang detection): a task's, from its
     * dispatch; 0 = 1 s. The device's watchdog gets half of it. The
     * submit-relative one (a serving budget) is npv_aicore_prepare_within's.
     */
    uint64_t task_timeout_ns;
    uint64_t handshake_timeout_ns; /* every sub-core ready and idle; 0 = 1 s */
    uint64_t poll_timeout_ns;      /* register polls (copy engine, reset, exit); 0 = 1 s */
    uint32_t max_tasks;            /* per run; 0 = 1024 */
    const struct npv_aicore_mem_ops *mem_ops; /* NULL = npv_aicore_default_mem_ops() */
};

struct npv_aicore_topology {
    uint32_t clusters, aic_per_cluster, aiv_per_cluster;
    uint32_t nr_cores;  /* physical sub-cores: clusters * (aic + aiv) per cluster */
    uint32_t nr_usable; /* present and powered */
    uint32_t pmu_counters;
    bool pmu_aliased; /* Pmu windows inside the Ctrl windows (the newer part) */
    uint64_t device_memory;
    /* Bitmaps by physical id: bit i of word i / 64. */
    uint64_t present[NPV_AICORE_MAX_CORES / 64];
    uint64_t powered[NPV_AICORE_MAX_CORES / 64];
};

enum npv_aicore_core_type {
    NPV_AICORE_AIC = 0, /* cube: matmul */
    NPV_AICORE_AIV = 1, /* vector: vector add */
};

/*
 * Physical sub-core ids, as a task names its core (npv_aicore_task.core) and
 * the topology's bitmaps index them: the device numbers the cubes first, the
 * AIC of cluster c is id c; the two AIVs of cluster c follow all the cubes,
 * ids clusters + 2c and clusters + 2c + 1.
 */
#define NPV_AICORE_AIV_PER_CLUSTER 2u
static inline uint32_t npv_aicore_phys_aic(uint32_t clusters, uint32_t cluster)
{
    (void)clusters;
    return cluster;
}
static inline uint32_t npv_aicore_phys_aiv(uint32_t clusters, uint32_t cluster, uint32_t j)
{
    return clusters + NPV_AICORE_AIV_PER_CLUSTER * cluster + j;
}
static inline enum npv_aicore_core_type npv_aicore_core_type(uint32_t clusters, uint32_t phys)
{
    return phys < clusters ? NPV_AICORE_AIC : NPV_AICORE_AIV;
}
/* Whether a task may name phys: present (not fused off) and powered. */
static inline bool npv_aicore_core_usable(const struct npv_aicore_topology *t, uint32_t phys)
{
    return phys < NPV_AICORE_MAX_CORES &&
           (((t->present[phys / 64] & t->powered[phys / 64]) >> (phys % 64)) & 1u) != 0;
}

enum npv_aicore_op {
    NPV_AICORE_OP_VADD = 1,   /* c[i] = a[i] + b[i], i < n */
    NPV_AICORE_OP_MATMUL = 2, /* c[m x n] = a[m x k] * b[k x n], row-major, k ascending */
};

/* The kernels' limits: VADD n in 1..NPV_AICORE_VADD_MAX_N, MATMUL m, n, k each
 * in 1..NPV_AICORE_MATMUL_MAX. */
#define NPV_AICORE_VADD_MAX_N (1u << 20)
#define NPV_AICORE_MATMUL_MAX 512u

/* One fp32 task; operands are IOVAs of DMA memory mapped into the device's domain. */
struct npv_aicore_task {
    uint32_t op;      /* npv_aicore_op */
    uint32_t core;    /* physical sub-core id; it must be present and powered */
    uint32_t m, n, k; /* VADD uses n only */
    uint32_t dep;     /* index of a task that must finish first, or NPV_AICORE_NO_DEP */
    npv_iova_t a, b, c;
};

struct npv_aicore_run_desc {
    const struct npv_aicore_task *tasks; /* tasks on one core run in this order */
    uint32_t nr_tasks;
    bool pmu; /* count events for this run */
    uint32_t pmu_events[NPV_AICORE_PMU_EVENTS];
};

/* What a run carries to the device (the same two table addresses for every run of a context). */
struct npv_aicore_run_info {
    unsigned slot;
    uint64_t epoch;                 /* 0 until launched */
    uint64_t ctrl_table, pmu_table; /* device addresses; pmu_table 0 when PMU is off */
};

struct npv_aicore_result {
    uint64_t epoch;
    int status;       /* 0, or the run's error (negative errno) */
    uint32_t verdict; /* the device's (regs.h), from an epoch-matching record */
    int32_t code;     /* the device's error code */
    uint32_t tasks_done;
    uint32_t nr_cores; /* sub-cores that took part */
    uint64_t elapsed_ns;
};

struct npv_aicore_core_pmu {
    uint32_t core; /* physical id */
    uint32_t events[NPV_AICORE_PMU_EVENTS];
    uint64_t counters[NPV_AICORE_PMU_EVENTS];
    uint64_t total_cycles;
};

struct npv_aicore_counters {
    uint64_t ctrl_uploads, pmu_uploads; /* H2D copies of each table */
    uint64_t ctrl_commits, pmu_commits;
    uint64_t runs, resets, timeouts;
    uint64_t device_blocks; /* device-memory blocks the context owns now */
};

/* The device-memory functions the driver uses unless configured otherwise. */
NPV_API const struct npv_aicore_mem_ops *npv_aicore_default_mem_ops(void);

/*
 * Reset the device, read its topology, allocate the slots' DMA memory. dev
 * must be attached to a domain. -EINVAL, -ENOMEM, -ENODEV (reads all-ones or
 * is not an AICore device), -EPROTO (a topology the driver cannot hold),
 * -ETIMEDOUT (reset never completes).
 */
NPV_API int npv_aicore_open(struct npv_dev *dev, const struct npv_aicore_config *cfg,
                            struct npv_aicore **out);
/* Stop any run, free the tables (address-keyed) and everything else. NULL is a no-op. */
NPV_API void npv_aicore_close(struct npv_aicore *ac);
NPV_API struct npv_dev *npv_aicore_dev(const struct npv_aicore *ac);
NPV_API void npv_aicore_topology(const struct npv_aicore *ac, struct npv_aicore_topology *out);
NPV_API void npv_aicore_counters(const struct npv_aicore *ac, struct npv_aicore_counters *out);
/*
 * Fail the active run (-ECANCELED), reset the device (a reset that does not
 * complete is tried three times). 0, -ETIMEDOUT (the device is then dead
 * until a later reset succeeds), -ENODEV.
 */
NPV_API int npv_aicore_reset(struct npv_aicore *ac);

/*
 * Prepare a run in slot (0 or 1): check the graph, make sure the Ctrl table
 * (and with d->pmu the Pmu table) is committed, fill the slot's memory. At
 * most one prepared run exists, and a second run is admitted only while the
 * first is active (launched) or finished. Errors: -EINVAL (slot, graph: op,
 * sizes, dependency not earlier), -ENXIO (a task on an absent or powered-off
 * core), -EBUSY (slot taken, or another run prepared and not launched),
 * -E2BIG (more than max_tasks), the table upload's error, the reset's error
 * when a failed run left the device to reset, -EIO once the device is dead
 * (no reset completed); nothing is prepared then.
 */
NPV_API int npv_aicore_prepare(struct npv_aicore *ac, unsigned slot,
                               const struct npv_aicore_run_desc *d, struct npv_aicore_run **out);
/*
 * npv_aicore_prepare with a serving budget: the run must finish within
 * budget_ns (> 0, else -EINVAL) of this call, the wait for the other slot
 * included, besides the per-task deadlines (task_timeout_ns). Past it the
 * run fails with -ETIMEDOUT: npv_aicore_launch of it returns -ETIMEDOUT and
 * finishes it unlaunched (the device untouched, the other slot's run goes
 * on); once launched, npv_aicore_poll / _wait end it (the first poll after
 * the budget) and, as for a missed task deadline, the device is reset
 * before its next use -- the only way to take a run back from it.
 */
NPV_API int npv_aicore_prepare_within(struct npv_aicore *ac, unsigned slot,
                                      const struct npv_aicore_run_desc *d, uint64_t budget_ns,
                                      struct npv_aicore_run **out);
/*
 * Start a prepared run: reset a poisoned device first, upload the tables
 * again when a reset dropped them, stamp a new epoch, LAUNCH. -EBUSY while
 * the other slot's run is active, -EINVAL when run is not prepared, -ESTALE
 * when PRESENT or POWER_ON changed since it was prepared (reset and prepare
 * again), -EIO when the device refuses, a table upload's error.
 */
NPV_API int npv_aicore_launch(struct npv_aicore_run *run);
/*
 * Drive an active run without blocking: handshake, dispatch, ACK/FIN. 0 when
 * it finished exact, -EINPROGRESS while running, else its error: -ETIMEDOUT
 * (a task's or the handshake's deadline, or the run's budget from
 * npv_aicore_prepare_within, passed; the device is poisoned and reset before
 * its next use), -EIO (device fault), -EPROTO (the device wrote
 * something impossible: a bad physical id, a status out of order, a result
 * record that does not add up).
 */
NPV_API int npv_aicore_poll(struct npv_aicore_run *run);
/* npv_aicore_poll until finished or timeout_ns passes (-EINPROGRESS: nothing failed). */
NPV_API int npv_aicore_wait(struct npv_aicore_run *run, uint64_t timeout_ns);
NPV_API void npv_aicore_run_info(const struct npv_aicore_run *run, struct npv_aicore_run_info *out);
/* A finished run's result; -EINPROGRESS before. */
NPV_API int npv_aicore_result(const struct npv_aicore_run *run, struct npv_aicore_result *out);
/* A finished PMU run's per-core counters: how many (<= max) were written. */
NPV_API int npv_aicore_pmu(const struct npv_aicore_run *run, struct npv_aicore_core_pmu *out,
                           size_t max);
/* Free the slot: a prepared or finished run. -EBUSY for an active run. */
NPV_API int npv_aicore_release(struct npv_aicore_run *run);

/*
 * Many threads on one device (npuvfio/share.h, docs/threads.md): the two
 * slots as one queue, for npv_share_new(npv_aicore_share_ops(), queue, ..).
 * A request is a struct npv_aicore_request: prepared (npv_aicore_prepare, or
 * _within with a budget) in a free slot and launched when nothing runs; a
 * look drives the active run, hands back every finished one (its status:
 * npv_aicore_poll's, or the launch's error) and releases its slot, so the
 * result record and PMU counters are not kept: check outputs in memory.
 * Full (-EAGAIN) while both slots are taken. The queue holds no lock: only
 * the share calls it. npv_aicore_queue_free releases what is left (resetting
 * the device when a run is still active). -EINVAL, -ENOMEM.
 */
struct npv_aicore_request {
    const struct npv_aicore_run_desc *desc; /* read during the submit only */
    uint64_t budget_ns;                     /* 0: none beyond the tasks' deadlines */
};
struct npv_aicore_queue;
NPV_API int npv_aicore_queue_new(struct npv_aicore *ac, struct npv_aicore_queue **out);
NPV_API void npv_aicore_queue_free(struct npv_aicore_queue *q);
NPV_API const struct npv_share_ops *npv_aicore_share_ops(void);

/*
 * Caller memory for task operands: map dma (npv_dma_wrap of a server's own
 * tensors or a file mapping, or an npv_dma_alloc buffer) into the device's
 * domain with prot (NPV_DMA_READ for inputs, NPV_DMA_RW for outputs); *iova
 * is what a task's a, b, c name. The same map on every transport: a kernel
 * IOMMU pins the pages (RLIMIT_MEMLOCK); a vfio-user device reaches the
 * memory through the buffer's file, so memory without one is
 * -NPV_ENOTSHARED. Errors as npv_dma_map (-EEXIST: mapped already).
 */
NPV_API int npv_aicore_mem_map(struct npv_aicore *ac, struct npv_dma *dma, unsigned prot,
                               npv_iova_t *iova);
/*
 * Unmap dma from the device's domain; the memory and the npv_dma stay the
 * caller's. -EBUSY while a prepared or active run has an operand in it, or a
 * failed run that left the device to reset (npv_aicore_reset, or the next
 * launch, resets it) had one; nothing changed then. -ENOENT when not mapped;
 * npv_dma_unmap's error otherwise.
 */
NPV_API int npv_aicore_mem_unmap(struct npv_aicore *ac, struct npv_dma *dma);

#ifdef __cplusplus
}
#endif

#endif

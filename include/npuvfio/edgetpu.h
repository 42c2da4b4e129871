/* SPDX-License-Identifier: MIT */
/*
 * The Coral Edge TPU (Apex, PCIe 1ac1:089a) driver: bring-up and reset of the
 * chip, its device MMU, executables in our instruction format
 * (npuvfio/edgetpu_insn.h), and inference requests on its instruction queue.
 *
 * Built on npv_dev, npv_domain, npv_dma, npv_bar, npv_irq and npv_ring only:
 * the same driver runs on hardware bound to vfio-pci and on the model over
 * vfio-user.
 *
 * Memory: the chip reaches host memory only through its page table, and the
 * page table holds only IOVAs of the device's domain (never host physical or
 * virtual addresses). The queue, its status block and the level-1 page tables
 * must lie below 4 GiB of IOVA (the chip's 32-bit limit for them): open the
 * device in a domain whose aperture ends below 4 GiB, or open fails with
 * -ERANGE.
 *
 * Thread-safety: one npv_edgetpu is used by one thread at a time (no lock
 * on its paths). Many threads share one chip through an npv_share
 * (npuvfio/share.h): a multi-producer claim of the one queue, submits
 * serialised by a lock held only across npv_edgetpu_submit[_within] and
 * npv_edgetpu_wait(min 1, timeout 0), completions routed to each submitting
 * thread's ticket (docs/threads.md: cost and rules).
 */
#ifndef NPUVFIO_EDGETPU_H
#define NPUVFIO_EDGETPU_H

#include <stdbool.h>
#include <npuvfio/common.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/ring.h>
#include <npuvfio/share.h>

#ifdef __cplusplus
extern "C" {
#endif

struct npv_edgetpu;
struct npv_edgetpu_executable;

/*
 * The completion rule, the chip's in every mode (libedgetpu
 * single_queue_dma_scheduler.cc and mmio_driver.cc; the project's
 * docs/hardware-sources.md): a request is finished when BOTH its status block says the queue
 * consumed its instruction chunk AND SC_HOST_0's counter (sc_host_int_count
 * field 0) counted it, the program's last step after its outputs drained.
 * The status block alone only says the chunk was read: the outputs may not
 * be written yet. An executable must therefore end by raising SC_HOST_0, as
 * compiled Edge TPU programs do; one that does not fails by its deadline.
 * Every wait also watches the chip's fatal errors (vector 12 and
 * hib_error_status, as libedgetpu's fatal handler).
 */
enum npv_edgetpu_completion {
    /*
     * Spin on the status block and read sc_host_int_count: no system call,
     * one 8-byte MMIO read per request (more while a request runs), plus
     * hib_error_status and the fatal status every 32 empty looks.
     */
    NPV_EDGETPU_POLL = 0,
    /* Sleep on vectors 0 (status block), 4 (SC_HOST_0) and 12 (fatal), acknowledging each. */
    NPV_EDGETPU_IRQ,
    /*
     * Sleep on SC_HOST_0 (vector 4) and the fatal vector only: the status
     * block, written before SC_HOST_0, is then read, not slept on.
     */
    NPV_EDGETPU_IRQ_SC_HOST,
};

/*
 * Deliberate driver bugs, so tests can show the model exposes them. Never set
 * outside tests.
 */
enum {
    /* Ring the doorbell, wait until the chip fetched, then write the descriptor. */
    NPV_EDGETPU_HOOK_DESC_AFTER_DOORBELL = 1u << 0,
    /* Queue and status-block base registers get their IOVAs instead of their device VAs. */
    NPV_EDGETPU_HOOK_HOST_ADDR_QUEUE = 1u << 1,
    /* 64-bit user-HIB registers (doorbell, queue registers) written as two 32-bit halves. */
    NPV_EDGETPU_HOOK_SPLIT_64 = 1u << 2,
    /* Finish a request on its status block alone (without SC_HOST_0). */
    NPV_EDGETPU_HOOK_STATUS_BLOCK_ONLY = 1u << 3,
    /* Never acknowledge an interrupt. */
    NPV_EDGETPU_HOOK_NO_ACK = 1u << 4,
    /* Enable MSI-X once, before the GCB reset at open, and never after a reset. */
    NPV_EDGETPU_HOOK_MSIX_ONCE = 1u << 5,
    /* Watch only the status block's fatal word, not vector 12 / hib_error_status. */
    NPV_EDGETPU_HOOK_NO_FATAL_WATCH = 1u << 6,
    /* Leave the page table as the chip holds it at open and after a reset. */
    NPV_EDGETPU_HOOK_KEEP_PAGE_TABLE = 1u << 7,
    /* Compiled models: every input and output address linked one page off. */
    NPV_EDGETPU_HOOK_PKG_WRONG_ADDR = 1u << 8,
    /* Compiled models: the parameter-caching executable never run. */
    NPV_EDGETPU_HOOK_PKG_NO_CACHING = 1u << 9,
    /* Compiled models: parameters cached once per binding, never again after a reset or
     * after another token displaced them. */
    NPV_EDGETPU_HOOK_PKG_CACHE_ONCE = 1u << 10,
    /* Compiled models: one bit of the linked chunk outside every field flipped. */
    NPV_EDGETPU_HOOK_PKG_FLIP_BIT = 1u << 11,
};

struct npv_edgetpu_config {
    uint32_t queue_entries;      /* power of two, 4..256; 0 = 256 (libedgetpu's size) */
    uint32_t simple_entries;     /* page-table partition; 0 = 6144 (libedgetpu's) */
    uint32_t max_instr_bytes;    /* per request, multiple of 64, <= 65536; 0 = 4096 */
    uint64_t request_timeout_ns; /* 0 = 1 s */
    /* every register poll at open, reset, close; 0 = 12 s (gasket's 120 x 100 ms) */
    uint64_t poll_timeout_ns;
    enum npv_edgetpu_completion completion;
    unsigned test_hooks; /* NPV_EDGETPU_HOOK_* */
};

/* What the chip reported at its last error (read before the reset that cleared it). */
struct npv_edgetpu_error {
    uint64_t hib_error_status;       /* EDGETPU_HIB_ERR_* bits */
    uint64_t hib_first_error_status; /* the first of them */
    uint64_t page_fault_address;     /* device VA of a faulting access */
    uint64_t scalar_core_error;      /* Error_ScalarCore */
    uint32_t fatal_word;             /* the status block's fatal_error */
};

/*
 * Bring the chip out of reset and ready: GCB reset exit with a deadline on
 * every poll, MSI-X (13 vectors) and INTVECCTL, page-table partition, the
 * queue and status block in DMA memory, run controls, interrupts. dev must be
 * attached to a domain. -ENODEV when the chip reads all-ones, -ETIMEDOUT when
 * a status bit never follows, -ERANGE (see above), -EPROTO when the chip is
 * not what it says (descriptor size, error status at open).
 * -EOPNOTSUPP when a page of 64-bit registers is trapped through a kernel
 * whose vfio-pci splits 8-byte accesses (npv_bar_whole64(3)): a torn
 * register write would be a wrong value on the chip.
 */
NPV_API int npv_edgetpu_open(struct npv_dev *dev, const struct npv_edgetpu_config *cfg,
                             struct npv_edgetpu **out);
/* The device the driver was opened on. */
NPV_API struct npv_dev *npv_edgetpu_dev(const struct npv_edgetpu *tpu);
/*
 * Pause DMA, halt the cores, disable the queue, unmap and free everything.
 * Requests in flight are forgotten. Executables must be unloaded first. NULL
 * is a no-op.
 */
NPV_API void npv_edgetpu_close(struct npv_edgetpu *tpu);
/* Fail what is in flight (-ECANCELED), reset the chip and program it again. */
NPV_API int npv_edgetpu_reset(struct npv_edgetpu *tpu);
/* The error the chip reported last (zeroes if none since open). */
NPV_API void npv_edgetpu_last_error(const struct npv_edgetpu *tpu, struct npv_edgetpu_error *err);
/*
 * The hardware's name of bit `bit` of hib_error_status ("inbound_page_fault",
 * "axi_slave_b_error", ...), or NULL for a bit without one.
 */
NPV_API const char *npv_edgetpu_hib_error_name(unsigned bit);

/*
 * Map len bytes at off of dma (already mapped into the device's domain) into
 * the chip's extended address space. *device_va keeps the byte offset within
 * the page. -ENOENT when dma is not mapped into the domain, -ENOSPC.
 */
NPV_API int npv_edgetpu_map(struct npv_edgetpu *tpu, struct npv_dma *dma, size_t off, size_t len,
                            uint64_t *device_va);
/* Undo npv_edgetpu_map of the same range. -EINVAL for a range that is not mapped. */
NPV_API int npv_edgetpu_unmap(struct npv_edgetpu *tpu, uint64_t device_va, size_t len);

/* Which address an instruction field receives (libedgetpu's field_offset meta). */
enum npv_edgetpu_base {
    NPV_EDGETPU_BASE_OUTPUT = 0,
    NPV_EDGETPU_BASE_INPUT = 1,
    NPV_EDGETPU_BASE_PARAMETER = 2,
    NPV_EDGETPU_BASE_SCRATCH = 3,
};
enum npv_edgetpu_half {
    NPV_EDGETPU_LOWER_32BIT = 0,
    NPV_EDGETPU_UPPER_32BIT = 1,
};

/* A 32-bit immediate to patch: bits [bit_offset, +32) get half of (base's VA + offset). */
struct npv_edgetpu_field {
    uint32_t bit_offset;
    uint8_t base;  /* npv_edgetpu_base */
    uint8_t index; /* which input or output */
    uint8_t half;  /* npv_edgetpu_half */
    uint8_t reserved;
    uint32_t offset; /* bytes into that buffer */
};

struct npv_edgetpu_executable_desc {
    const void *instructions; /* one chunk, a multiple of 64 bytes, <= max_instr_bytes */
    uint32_t instructions_size;
    const struct npv_edgetpu_field *fields;
    uint32_t nr_fields;
    const void *parameters; /* copied to DMA memory and mapped once */
    size_t parameters_size;
    size_t scratch_size; /* per request in flight */
    uint32_t nr_inputs, nr_outputs;
};

/* Validate the fields, copy and map parameters, map scratch. -EINVAL, -ENOMEM, -ENOSPC. */
NPV_API int npv_edgetpu_load(struct npv_edgetpu *tpu, const struct npv_edgetpu_executable_desc *d,
                             struct npv_edgetpu_executable **out);
/* NULL is a no-op. No request of it may be in flight. */
NPV_API void npv_edgetpu_unload(struct npv_edgetpu_executable *exe);

/*
 * Queue one request: copy the instructions into the slot's buffer, patch them
 * with the device VAs (from npv_edgetpu_map) of the inputs and outputs, write
 * the descriptor, ring the doorbell. -EAGAIN when the queue is full, -EIO
 * when the chip needs npv_edgetpu_reset, -ENODEV when it is gone.
 */
NPV_API int npv_edgetpu_submit(struct npv_edgetpu *tpu, const struct npv_edgetpu_executable *exe,
                               const uint64_t *input_va, const uint64_t *output_va,
                               uint64_t cookie);
/*
 * npv_edgetpu_submit with this request's own deadline: budget_ns (> 0, else
 * -EINVAL; UINT64_MAX = none) from this call, queueing included, instead of
 * cfg->request_timeout_ns. Past it the request fails with -ETIMEDOUT.
 * Requests that finished before it complete as usual. The chip has one
 * in-order queue and no way to drop or stop one request in it, so a request
 * past its budget that the chip has not finished costs a chip reset, which
 * fails every other request the chip had not finished (queued behind it, or
 * running before it) with -ECANCELED (resubmit them). A
 * request's budget is served at the first npv_edgetpu_wait look after it
 * passed (the ring reads the clock every few polled looks; an interrupt
 * wait sleeps no later than the oldest request's deadline).
 */
NPV_API int npv_edgetpu_submit_within(struct npv_edgetpu *tpu,
                                      const struct npv_edgetpu_executable *exe,
                                      const uint64_t *input_va, const uint64_t *output_va,
                                      uint64_t cookie, uint64_t budget_ns);
/*
 * The driver as an npv_share serves it to many threads (npuvfio/share.h,
 * docs/threads.md): npv_share_new(npv_edgetpu_share_ops(), tpu, &share); a
 * request is a struct npv_edgetpu_request, queued with npv_edgetpu_submit
 * (budget_ns 0) or npv_edgetpu_submit_within; completions from
 * npv_edgetpu_wait(min 1, timeout 0), one look that never sleeps.
 */
struct npv_edgetpu_request {
    const struct npv_edgetpu_executable *exe;
    const uint64_t *input_va, *output_va; /* as npv_edgetpu_submit's */
    uint64_t budget_ns;                   /* 0: cfg->request_timeout_ns */
};
NPV_API const struct npv_share_ops *npv_edgetpu_share_ops(void);

/*
 * Non-coherent hosts (arm64 boards whose PCIe does not snoop, e.g. the
 * Raspberry Pi CM4): the driver cleans the instruction chunk, the parameters
 * and its page tables for the device, and its queue memory through the ring.
 * Inputs and outputs are the caller's: call npv_dma_sync_for_device on each
 * input buffer after writing it, and on each output buffer the CPU wrote
 * since its last sync (a fill, say), before npv_edgetpu_submit/run; and
 * npv_dma_sync_for_cpu on each output buffer after its request completed and
 * before reading it (all no-ops on coherent hosts). The output's clean is
 * not optional: on arm64 npv_dma_sync_for_cpu is a clean+invalidate (user
 * space has no invalidate alone), so a line the CPU left dirty is written
 * back over what the chip wrote.
 */

/*
 * Collect at least min (1..max) finished requests, waiting up to timeout_ns
 * in the configured completion mode. Returns how many; fewer than min,
 * possibly 0, when timeout_ns passed first: then nothing is failed or reset
 * (wait again). A request that failed has status -EIO (chip error:
 * npv_edgetpu_last_error), -ETIMEDOUT (its own deadline,
 * cfg->request_timeout_ns, passed: the chip was reset), -ECANCELED or
 * -NPV_EDEVFAULT.
 */
NPV_API int npv_edgetpu_wait(struct npv_edgetpu *tpu, unsigned min, uint64_t timeout_ns,
                             struct npv_cpl *cpl, unsigned max);
/*
 * Submit one request and wait for it (nothing else may be in flight): 0, or
 * its failure (-EIO, -ETIMEDOUT after a reset, -NPV_EDEVFAULT, -ENODEV).
 */
NPV_API int npv_edgetpu_run(struct npv_edgetpu *tpu, const struct npv_edgetpu_executable *exe,
                            const uint64_t *input_va, const uint64_t *output_va);

/* IOVAs the chip was given for its queue memory (for tests of the 32-bit limit). */
struct npv_edgetpu_layout {
    npv_iova_t ring_iova, status_block_iova;
    uint64_t ring_va, status_block_va; /* device VAs (simple) */
    uint32_t nr_l1_tables;
    npv_iova_t l1_iova_max; /* highest IOVA of a level-1 table, 0 if none */
};
NPV_API void npv_edgetpu_layout(const struct npv_edgetpu *tpu, struct npv_edgetpu_layout *out);

#ifdef __cplusplus
}
#endif

#endif

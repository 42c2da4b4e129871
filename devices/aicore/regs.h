/* SPDX-License-Identifier: MIT */
/*
 * The AICore-class stand-in: a device shaped like an Ascend a2a3 AICore
 * complex (clusters of 1 AIC + 2 AIV sub-cores, per-sub-core Ctrl and Pmu
 * register windows, the DMB/COND dispatch handshake), with the host playing
 * the on-chip scheduler (AICPU). Shared by the driver (devices/aicore/driver*.c)
 * and the model (devices/aicore/model*.c). Register names and the Ctrl/Pmu
 * offsets are the a2a3 part's (hw-native-sys/simpler:
 * src/a2a3/platform/include/common/platform_config.h,
 * src/a2a3/platform/onboard/host/host_regs.cpp, docs/dfx/pmu-profiling.md);
 * what the hardware does not expose over PCI (global registers, the copy
 * engine, LAUNCH, the records' exact layout) is ours and documented here and
 * in devices/aicore/README.md.
 *
 * This is NOT shipping hardware: the PCI ids below are in the experimental
 * vendor range the test device uses (0x1234), never Huawei's 0x19e5.
 *
 * BARs (all 32-bit memory BARs, non-prefetchable; no interrupts: the
 * handshake is polled):
 *   BAR0  4 KiB   global registers, 64 bits wide, 8-byte accesses only; trapped
 *   BAR1  4 KiB   the model's test port (not on hardware), 64-bit, 8-byte only; trapped
 *   BAR2  1 MiB   Ctrl windows, one per physical sub-core, AICORE_WINDOW_STRIDE apart
 *   BAR3  1 MiB   Pmu windows, same indexing (nothing answers when Pmu is aliased into Ctrl)
 * BAR0 holds the edges (RESET, LAUNCH, COPY_GO) and stays trapped. The
 * windows hold levels the sub-core polls (DMB, FAST_PATH) and values it
 * writes (COND, CTRL): none of them is an edge-triggered doorbell (our
 * reading of simpler's handshake: the sub-core spins on DMB in
 * aicore_executor.cpp, the AICPU polls COND in scheduler_completion.cpp
 * SchedulerContext::check_running_cores_for_completion), so the model
 * offers BAR2 and BAR3 as shared memory (sparse mmap) its worker polls, and
 * re-publishes what the sub-core owns (COND, CTRL, PHYS_ID): a client store
 * there is undone and counted as a bad access. On a model built with trapped windows
 * (npv_aicore_model_config.trapped_windows) every window access is a message
 * the model sees with its width: that is the mode in which the Pmu counters
 * clear on read, as the part's do (see AICORE_PMU_CNT).
 * Ctrl and Pmu registers are 32 bits wide: a 4-byte access to one, or an
 * 8-byte access at an 8-aligned offset, which is two registers low first.
 * On trapped windows any other width or alignment gets an error reply and
 * sets AICORE_ERR_BAD_ACCESS. Holes read 0; a write to a hole or to a
 * read-only register is dropped and sets AICORE_ERR_BAD_ACCESS (no error
 * reply); on mapped windows the model finds such a store on its next pass
 * (for the registers it owns and DMB / FAST_PATH values it refuses).
 *
 * Physical sub-core ids follow the a2a3 table order: AIC of cluster c is
 * id c, the AIVs of cluster c are ids clusters + 2c and clusters + 2c + 1.
 * A sub-core's Ctrl window is at BAR2 + id * AICORE_WINDOW_STRIDE, its Pmu
 * window at BAR3 + id * AICORE_WINDOW_STRIDE.
 */
#ifndef NPV_AICORE_REGS_H
#define NPV_AICORE_REGS_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <npuvfio/aicore.h> /* physical ids and kernel limits, which users need too */

/* ---- PCI identity (experimental range, see above) ---- */
#define AICORE_PCI_VENDOR 0x1234u
#define AICORE_PCI_DEVICE 0x4e41u
#define AICORE_PCI_CLASS  0x120000u /* processing accelerator */

#define AICORE_BAR_GLOBAL    0u
#define AICORE_BAR_TESTPORT  1u
#define AICORE_BAR_CTRL      2u
#define AICORE_BAR_PMU       3u
#define AICORE_GLOBAL_SIZE   0x1000u
#define AICORE_TESTPORT_SIZE 0x1000u
#define AICORE_CTRL_BAR_SIZE 0x100000u
#define AICORE_PMU_BAR_SIZE  0x100000u

/* ---- topology limits and defaults ---- */
#define AICORE_MAX_CLUSTERS         32u
#define AICORE_AIC_PER_CLUSTER      1u
#define AICORE_AIV_PER_CLUSTER      NPV_AICORE_AIV_PER_CLUSTER
#define AICORE_SUBCORES_PER_CLUSTER 3u
#define AICORE_MAX_SUBCORES         (AICORE_MAX_CLUSTERS * AICORE_SUBCORES_PER_CLUSTER)
#define AICORE_DEFAULT_CLUSTERS     24u
/*
 * The default part is partial-good like a2a3 silicon: one cluster is fused
 * off (its three sub-cores are clear in PRESENT). A middle cluster, so an
 * off-by-one at either end of the table cannot hide it.
 */
#define AICORE_DEFAULT_ABSENT_CLUSTER 13u
#define AICORE_PMU_COUNTERS           8u
#define AICORE_WINDOW_STRIDE          0x2000u /* covers the Pmu selectors at 0x1280..0x129c */

static_assert(AICORE_MAX_SUBCORES * AICORE_WINDOW_STRIDE <= AICORE_CTRL_BAR_SIZE,
              "every Ctrl window fits BAR2");

/* Core types, as the ready record and the payload checks name them. */
#define AICORE_CORE_TYPE_AIC 1u /* cube: matmul */
#define AICORE_CORE_TYPE_AIV 2u /* vector: vector add */

/* Physical ids: npv_aicore_phys_aic / npv_aicore_phys_aiv (npuvfio/aicore.h). */
static inline uint32_t aicore_core_type(uint32_t clusters, uint32_t phys)
{
    return npv_aicore_core_type(clusters, phys) == NPV_AICORE_AIC ? AICORE_CORE_TYPE_AIC
                                                                  : AICORE_CORE_TYPE_AIV;
}

/* ---- BAR0: global registers (64-bit, 8-byte accesses) ---- */
#define AICORE_REG_ID      0x000u /* RO: AICORE_ID_VALUE */
#define AICORE_REG_VERSION 0x008u /* RO: AICORE_VERSION_VALUE (major << 16 | minor) */
#define AICORE_REG_CAPS    0x010u /* RO: AICORE_CAPS_* fields */
#define AICORE_REG_WINDOW_STRIDE                                                                   \
    0x018u                            /* RO: bytes between windows (AICORE_WINDOW_STRIDE)          \
                                       */
#define AICORE_REG_PRESENT_LO  0x020u /* RO: bit i = physical sub-core i exists (partial-good) */
#define AICORE_REG_PRESENT_HI  0x028u /* RO: ids 64..127 */
#define AICORE_REG_POWER_ON_LO 0x030u /* RO: bit i = sub-core i is powered */
#define AICORE_REG_POWER_ON_HI 0x038u
#define AICORE_REG_SYS_CNT     0x040u /* RO: free-running system counter */
#define AICORE_REG_SYS_CNT_HZ  0x048u /* RO: its frequency (50 MHz, as a2a3) */
/*
 * RO: the device address of Ctrl / Pmu window 0. Register tables hold device
 * addresses of windows, entry for physical id i = base + i * stride (the
 * part's tables hold the register addresses the AICPU maps).
 */
#define AICORE_REG_CTRL_REG_BASE 0x050u
#define AICORE_REG_PMU_REG_BASE  0x058u /* == CTRL_REG_BASE when Pmu is aliased into Ctrl */
#define AICORE_REG_DEVMEM_BASE   0x060u /* RO: device address of device memory ("GM") */
#define AICORE_REG_DEVMEM_SIZE   0x068u /* RO: its size in bytes */
/*
 * RW: per-task watchdog in microseconds, 0 = off; RESET restores
 * AICORE_OP_TIMEOUT_DEFAULT_US. A task still running this long after its ACK
 * freezes its sub-core (WATCHDOG). The model runs a kernel to its end in one
 * step, so only an injected HANG outlives it.
 */
#define AICORE_REG_OP_TIMEOUT    0x070u
#define AICORE_REG_GLOBAL_ERR    0x078u /* RO: AICORE_ERR_* bits, sticky until RESET */
#define AICORE_REG_STATUS        0x080u /* RO: AICORE_STATUS_* */
#define AICORE_REG_RESET         0x088u /* WO: AICORE_RESET_VALUE */
#define AICORE_REG_LAUNCH        0x090u /* WO: AICORE_LAUNCH_VALUE starts a run */
#define AICORE_REG_LAUNCH_STATUS 0x098u /* RO: enum aicore_launch_status of the last LAUNCH */
#define AICORE_REG_FAULT_CORE    0x0a0u /* RO: physical id + 1 of the first faulting core, 0 none */
#define AICORE_REG_LAUNCHES      0x0a8u /* RO: accepted LAUNCHes since RESET */

/* The run's parameters, written before LAUNCH (RW; latched by LAUNCH). */
#define AICORE_REG_RUN_CTRL_TABLE    0x0c0u /* device address of the Ctrl table, != 0 */
#define AICORE_REG_RUN_PMU_TABLE     0x0c8u /* device address of the Pmu table, 0 = PMU off */
#define AICORE_REG_RUN_WORKERS       0x0d0u /* host IOVA of the handshake records */
#define AICORE_REG_RUN_WORKERS_COUNT 0x0d8u /* records there, >= the launched sub-cores */
#define AICORE_REG_RUN_RESULT        0x0e0u /* host IOVA of struct aicore_result */
#define AICORE_REG_RUN_EPOCH         0x0e8u /* != 0, stamped into the result record */

/* The copy engine: the only way between host memory and device memory. */
#define AICORE_REG_COPY_HOST_IOVA 0x100u /* RW */
#define AICORE_REG_COPY_DEV_ADDR  0x108u /* RW: device address inside device memory */
#define AICORE_REG_COPY_LEN       0x110u /* RW: bytes, 1..AICORE_COPY_MAX_LEN */
#define AICORE_REG_COPY_DIR       0x118u /* RW: AICORE_COPY_H2D or AICORE_COPY_D2H */
#define AICORE_REG_COPY_GO        0x120u /* WO: AICORE_COPY_GO_VALUE */
#define AICORE_REG_COPY_STATUS    0x128u /* RO: enum aicore_copy_status */
#define AICORE_REG_COPY_DONE      0x130u /* RO: copies finished (DONE or ERROR) since RESET */

#define AICORE_ID_VALUE      0x4e50a1c0u
#define AICORE_VERSION_VALUE 0x00010000u

/* CAPS fields. */
#define AICORE_CAPS_CLUSTERS(c)        ((uint32_t)((c)&0xffu))
#define AICORE_CAPS_AIC_PER_CLUSTER(c) ((uint32_t)(((c) >> 8) & 0xfu))
#define AICORE_CAPS_AIV_PER_CLUSTER(c) ((uint32_t)(((c) >> 12) & 0xfu))
#define AICORE_CAPS_PMU_COUNTERS(c)    ((uint32_t)(((c) >> 16) & 0xffu))
#define AICORE_CAPS_PMU_IN_CTRL        (1ull << 32) /* Pmu registers live in the Ctrl window */
#define AICORE_CAPS_MAKE(clusters, aic, aiv, pmu)                                                  \
    ((uint64_t)(clusters) | (uint64_t)(aic) << 8 | (uint64_t)(aiv) << 12 | (uint64_t)(pmu) << 16)

#define AICORE_SYS_CNT_HZ            50000000ull
#define AICORE_CTRL_REG_BASE         0x4000000000ull /* the model's values; drivers read the registers */
#define AICORE_PMU_REG_BASE          0x4000100000ull
#define AICORE_DEVMEM_BASE           0x100000000ull
#define AICORE_DEVMEM_SIZE_DEFAULT   (64ull << 20)
#define AICORE_OP_TIMEOUT_DEFAULT_US 2000000ull

#define AICORE_RESET_VALUE   1u
#define AICORE_LAUNCH_VALUE  1u
#define AICORE_COPY_GO_VALUE 1u
#define AICORE_COPY_H2D      0u
#define AICORE_COPY_D2H      1u
#define AICORE_COPY_MAX_LEN  (16ull << 20)

/*
 * GLOBAL_ERR bits, sticky until RESET. The FATAL ones poison the device: from
 * then on every dispatch is ignored and LAUNCH is refused until RESET.
 */
#define AICORE_ERR_WATCHDOG          (1ull << 0) /* FATAL: a task ran past OP_TIMEOUT */
#define AICORE_ERR_DMA_FAULT         (1ull << 1) /* FATAL: a sub-core's DMA hit an unmapped IOVA */
#define AICORE_ERR_BAD_PAYLOAD       (1ull << 2) /* FATAL: malformed payload (see below) */
#define AICORE_ERR_DISPATCH_ABSENT   (1ull << 3) /* DMB write to an absent/powered-off window */
#define AICORE_ERR_DISPATCH_POISONED (1ull << 4) /* DMB write while poisoned, ignored */
#define AICORE_ERR_WINDOW_CLOSED     (1ull << 5) /* DMB write while FAST_PATH is not OPEN, ignored */
#define AICORE_ERR_LAUNCH_REFUSED    (1ull << 6) /* see LAUNCH_STATUS */
#define AICORE_ERR_COPY              (1ull << 7) /* a copy ended in ERROR */
#define AICORE_ERR_BAD_ACCESS        (1ull << 8) /* bad width/alignment, write to RO, bad value */
#define AICORE_ERR_FATAL_MASK        (AICORE_ERR_WATCHDOG | AICORE_ERR_DMA_FAULT | AICORE_ERR_BAD_PAYLOAD)

#define AICORE_STATUS_RUNNING   (1ull << 0) /* a run was launched and its result is not written */
#define AICORE_STATUS_POISONED  (1ull << 1) /* a FATAL error: RESET before anything else */
#define AICORE_STATUS_COPY_BUSY (1ull << 2)

enum aicore_launch_status {
    AICORE_LAUNCH_NONE = 0,
    AICORE_LAUNCH_ACCEPTED = 1,
    AICORE_LAUNCH_REFUSED_POISONED = 2,
    AICORE_LAUNCH_REFUSED_BUSY = 3,      /* the previous run has not written its result */
    AICORE_LAUNCH_REFUSED_BAD_PARAM = 4, /* zero table/workers/result/epoch, too few workers */
};

enum aicore_copy_status {
    AICORE_COPY_IDLE = 0,
    AICORE_COPY_BUSY = 1, /* parameter writes and GO are refused (BAD_ACCESS) */
    AICORE_COPY_DONE = 2,
    AICORE_COPY_ERROR = 3, /* unmapped IOVA, range outside device memory, bad length/dir */
};

/* ---- BAR2: the Ctrl window of one sub-core (32-bit registers) ---- */
/*
 * RO for the host: the sub-core's own CTRL SPR (simpler platform_config.h
 * REG_SPR_CTRL_OFFSET, "bit0 = PMU enable"): the sub-core sets bit 0 around a
 * task's kernel on a run with PMU on and clears it at FIN, so its counters see
 * the task and not its polling (aicore_executor.cpp, PMU begin/end).
 */
#define AICORE_CTRL_CTRL      0x000u
#define AICORE_CTRL_CTRL_PMU  0x1u
#define AICORE_CTRL_PHYS_ID   0x008u /* RO: this window's physical id */
#define AICORE_CTRL_FAST_PATH 0x018u /* RW: FAST_PATH_ENABLE, AICORE_FAST_PATH_* */
#define AICORE_CTRL_DMB       0x0a0u /* RW: DATA_MAIN_BASE low word: dispatch (AICORE_DMB_*) */
#define AICORE_CTRL_DMB_HIGH  0x0a4u /* RW: early-dispatch doorbell word, stored, not acted on */
#define AICORE_CTRL_COND      0x4c8u /* RO: status the sub-core writes (AICORE_COND_*) */

#define AICORE_FAST_PATH_OPEN  0xeu /* DMB writes reach the sub-core */
#define AICORE_FAST_PATH_CLOSE 0xfu /* reset value: DMB writes are ignored (WINDOW_CLOSED) */

/*
 * DMB values (host -> sub-core). Anything else in 1..AICORE_TOKEN_MAX is a task
 * token. A sub-core acts on a DMB value when it differs from the last one it
 * acted on, and only between tasks: a token written while a task runs is
 * picked up when it finishes (the payload's second slot makes that safe); a
 * token overwritten before the sub-core saw it is lost, as on the part.
 * The first non-zero value opens the window: COND = IDLE, the sub-core reads
 * its record's task pointer (a token there is also dispatched). EXIT is
 * honoured in a closed window too, so the host can retire a sub-core it gave
 * no work (one whose ready record it rejected). Values above AICORE_TOKEN_MAX
 * other than IDLE and EXIT are ignored with BAD_ACCESS. Every DMB write needs
 * FAST_PATH = OPEN, a present and powered window and an unpoisoned device.
 */
#define AICORE_DMB_CLOSED 0x00000000u /* reset value after LAUNCH */
#define AICORE_DMB_IDLE   0x7ffffffdu /* opens the window (the handshake's ack) */
#define AICORE_DMB_EXIT   0x7ffffff0u /* the sub-core leaves: COND = EXITED */
#define AICORE_TOKEN_MAX  0x7fffffefu

/* COND values (sub-core -> host): bit 31 = FIN, bits 0..30 the task id. */
#define AICORE_COND_FIN_BIT  0x80000000u
#define AICORE_COND_ID_MASK  0x7fffffffu
#define AICORE_COND_RESET    0x00000000u /* after LAUNCH, before the window is opened */
#define AICORE_COND_IDLE     0xffffffffu /* FIN | 0x7fffffff: window seen open */
#define AICORE_COND_EXITED   0xfffffffeu /* FIN | 0x7ffffffe */
#define AICORE_COND_ACK(tok) ((uint32_t)(tok)&AICORE_COND_ID_MASK)
#define AICORE_COND_FIN(tok) (((uint32_t)(tok)&AICORE_COND_ID_MASK) | AICORE_COND_FIN_BIT)

/*
 * ---- BAR3 (or the Ctrl window when aliased): the Pmu window (32-bit registers) ----
 * The counters (CNT0..7, CNT_TOTAL) clear when read, as the part's do: simpler
 * (pmu_collector_aicpu.cpp, pmu_start) "clears counters by reading them once"
 * and then reads them after each task without subtracting anything. Ours do
 * so on trapped windows. On mapped windows (the model's default) a load from
 * the mapping never reaches the model, so there the counters keep counting
 * until written or RESET: the one place ours differs from the part, because a
 * register whose read has a side effect cannot be shared memory. A driver
 * that is right on both reads each counter once to clear it (the part), then
 * once more for its baseline (0 on the part, the running count on a mapped
 * model), and subtracts that baseline from what it reads after the run.
 */
#define AICORE_PMU_CTRL_0       0x200u /* RW: bit 0 = count enable (the part's enable value is 0x7) */
#define AICORE_PMU_CNT(i)       (0x210u + 8u * (i)) /* RW: counter i, 32 bits, wraps, clears on read */
#define AICORE_PMU_CNT_TOTAL_LO 0x250u              /* RW: cycles counted, 64 bits in two words */
#define AICORE_PMU_CNT_TOTAL_HI 0x254u
#define AICORE_PMU_START_CYC_LO 0x2a0u /* RW: first counted cycle (inclusive) */
#define AICORE_PMU_START_CYC_HI 0x2a4u
#define AICORE_PMU_STOP_CYC_LO  0x2a8u /* RW: last counted cycle (inclusive) */
#define AICORE_PMU_STOP_CYC_HI  0x2acu
#define AICORE_PMU_EVT_IDX(i)   (0x1280u + 4u * (i)) /* RW: event id counted by counter i */

#define AICORE_PMU_CTRL_ENABLE 0x1u
#define AICORE_PMU_CTRL_ENABLE_PART                                                                \
    0x7u /* global | user | sample, what the part's AICPU writes                                   \
          */

static_assert(AICORE_PMU_EVT_IDX(AICORE_PMU_COUNTERS - 1) + 4u <= AICORE_WINDOW_STRIDE,
              "the Pmu selectors fit one window");
static_assert(AICORE_CTRL_COND + 4u <= AICORE_PMU_EVT_IDX(0) &&
                  AICORE_CTRL_DMB_HIGH < AICORE_PMU_CTRL_0,
              "Ctrl and Pmu offsets do not collide, so Pmu can be aliased into Ctrl");

/*
 * Deterministic PMU counting. Each sub-core has a virtual cycle clock that
 * advances only while it runs a task, by exactly the task's declared work
 * (payload.work_cycles); it restarts at 0 on RESET. A task spanning cycles
 * [c0, c0 + work) counts the n cycles of that span inside [START_CYC,
 * STOP_CYC], and only when CTRL_0 bit 0 is set and the sub-core's own CTRL
 * bit 0 is set around the task, which it does on a run with PMU on (a Pmu
 * table was given): CNT_TOTAL += n, CNT(i) += aicore_pmu_event_count(
 * EVT_IDX(i), n) (32-bit, wrapping). CTRL_0 may therefore stay enabled
 * between runs, as simpler leaves it from pmu_start to pmu_stop: a run
 * without PMU never opens the per-task gate.
 */
static inline uint64_t aicore_pmu_event_count(uint32_t event, uint64_t cycles)
{
    if (event == 0)
        return 0;
    return cycles * ((event % 8u) + 1u) / 8u;
}

/* ---- host-memory records the device reads and writes ---- */

/*
 * Handshake ("ready") record, one per launched sub-core in the workers array
 * (64-byte aligned, 64 bytes apart), laid out as simpler's Handshake
 * (runtime.h of tensormap_and_ringbuffer): aicpu_ready@0 (a legacy field the
 * current handshake leaves unused; the device neither reads nor writes it),
 * aicore_done@4, task@8, core_type@16, physical_core_id@20 (older simpler
 * versions had task_status@16 and control@20 there; one version adds
 * report_epoch@24, a run's commit marker, which ours carries in the result
 * record's epoch instead, so 24..63 stay reserved here). Launched
 * sub-cores (present and powered at LAUNCH) are ranked AICs by physical id
 * first, then AIVs by physical id; the sub-core of rank r owns record r. It
 * writes core_type and physical_core_id, then done = r + 1 (a separate,
 * later DMA write). The host writes task (IOVA of this sub-core's two payload
 * slots) before it opens the window; the sub-core reads task once, when it
 * sees a non-zero DMB. Opening the window is the host's acknowledgement: the
 * host may write a token right after DMB = IDLE without waiting for COND =
 * IDLE (scheduler_cold_path.cpp, "no second round-trip").
 */
struct aicore_handshake {
    uint32_t aicpu_ready;      /* unused by the handshake: neither side acts on it */
    uint32_t done;             /* 0 = not ready, else rank + 1; host clears before LAUNCH */
    uint64_t task;             /* host writes: IOVA of struct aicore_task_payload[2] */
    uint32_t core_type;        /* AICORE_CORE_TYPE_* */
    uint32_t physical_core_id; /* untrusted: range-check before indexing anything */
    uint64_t reserved[5];
};
static_assert(sizeof(struct aicore_handshake) == 64, "a handshake record is one cache line");
static_assert(offsetof(struct aicore_handshake, done) == 4, "handshake layout is device ABI");
static_assert(offsetof(struct aicore_handshake, task) == 8, "handshake layout");
static_assert(offsetof(struct aicore_handshake, core_type) == 16, "handshake layout");
static_assert(offsetof(struct aicore_handshake, physical_core_id) == 20, "handshake layout");

/*
 * One task payload slot; a sub-core has two (double-buffered, at task +
 * (token & 1) * 64) so one can run while the next is filled. On DMB = token
 * the sub-core writes COND = ACK(token), reads slot [token & 1], runs it, and
 * writes COND = FIN(token). Operands are fp32 in host memory (IOVAs):
 *   AICORE_KERNEL_VADD (AIV only): c[i] = a[i] + b[i], i < n; m = k = 0
 *   AICORE_KERNEL_MATMUL (AIC only): c[m][n] = sum over p < k, in order p =
 *     0, 1, ..., of a[m][p] * b[p][n], row-major, accumulated in fp32 from
 *     0.0f with a separate multiply and add (no fused multiply-add)
 * Malformed (BAD_PAYLOAD, the sub-core faults): token != the dispatched
 * token, an unknown kernel, a kernel on the wrong core type, a zero or
 * out-of-limit dimension, a nonzero reserved field, a zero operand IOVA.
 * An unmapped operand is a DMA_FAULT. Both poison the device.
 */
#define AICORE_KERNEL_VADD   1u
#define AICORE_KERNEL_MATMUL 2u
#define AICORE_VADD_MAX_N    NPV_AICORE_VADD_MAX_N
#define AICORE_MATMUL_MAX    NPV_AICORE_MATMUL_MAX /* each of m, n, k */

struct aicore_task_payload {
    uint32_t token;       /* the DMB value that dispatched this slot */
    uint32_t kernel;      /* AICORE_KERNEL_* */
    uint32_t m, n, k;     /* shape, see above */
    uint32_t work_cycles; /* declared work: advances the PMU cycle clock */
    uint64_t a, b, c;     /* host IOVAs of the fp32 operands and the result */
    uint64_t reserved[2]; /* must be 0 */
};
static_assert(sizeof(struct aicore_task_payload) == 64, "a payload slot is 64 bytes");
static_assert(offsetof(struct aicore_task_payload, kernel) == 4, "payload layout is device ABI");
static_assert(offsetof(struct aicore_task_payload, m) == 8, "payload layout");
static_assert(offsetof(struct aicore_task_payload, work_cycles) == 20, "payload layout");
static_assert(offsetof(struct aicore_task_payload, a) == 24, "payload layout");
static_assert(offsetof(struct aicore_task_payload, c) == 40, "payload layout");
#define AICORE_PAYLOAD_SLOTS 2u

/*
 * The result record, written by DMA when every launched sub-core has reached
 * EXITED (verdict OK) or when a FATAL error ends the run (verdict ERROR).
 * Everything else first, then epoch in a separate, last write: a record whose
 * epoch is not this run's is stale, not a result. A run that never ends (a
 * sub-core that cannot find its DMB) writes no record.
 */
#define AICORE_VERDICT_NONE  0u
#define AICORE_VERDICT_OK    1u
#define AICORE_VERDICT_ERROR 2u

struct aicore_result {
    uint64_t epoch;         /* RUN_EPOCH, written last */
    uint32_t verdict;       /* AICORE_VERDICT_* */
    uint32_t fault_core;    /* physical id + 1 of the faulting sub-core, 0 none */
    uint64_t error;         /* GLOBAL_ERR when the record was written */
    uint32_t tasks_done;    /* tasks that wrote FIN in this run */
    uint32_t cores_exited;  /* sub-cores that reached EXITED */
    uint64_t start_sys_cnt; /* SYS_CNT at LAUNCH */
    uint64_t end_sys_cnt;   /* SYS_CNT when the record was written */
    uint64_t reserved[2];
};
static_assert(sizeof(struct aicore_result) == 64, "the result record is 64 bytes");
static_assert(offsetof(struct aicore_result, verdict) == 8, "result layout is device ABI");
static_assert(offsetof(struct aicore_result, error) == 16, "result layout");
static_assert(offsetof(struct aicore_result, tasks_done) == 24, "result layout");
static_assert(offsetof(struct aicore_result, start_sys_cnt) == 32, "result layout");
static_assert(offsetof(struct aicore_result, end_sys_cnt) == 40, "result layout");

/*
 * Register tables in device memory: one 8-byte entry per physical sub-core
 * (clusters * 3 entries), indexed by physical id. On LAUNCH each launched
 * sub-core reads its Ctrl entry (and its Pmu entry when PMU is on); an entry
 * that is not its own window's address (CTRL_REG_BASE / PMU_REG_BASE + id *
 * stride), or a table outside device memory, leaves the sub-core unable to
 * find its DMB: it never writes its ready record and the run never ends.
 */
#define AICORE_TABLE_ENTRY_SIZE 8u

/*
 * ---- BAR1: the model's test port (not on hardware; 64-bit, 8-byte accesses). Unlike
 * the device's registers, a bad value or a write to a read-only port register gets an error
 * reply (-EINVAL, or -EBUSY for topology under a running run). ----
 */
#define AICORE_TP_ID                  0x000u /* RO: AICORE_TP_ID_VALUE */
#define AICORE_TP_FAULT               0x008u /* WO: enum aicore_fault, armed for TP_FAULT_CORE */
#define AICORE_TP_FAULT_CORE          0x010u /* RW: physical id the next TP_FAULT write targets */
#define AICORE_TP_FAULT_ARG           0x018u /* RW: DELAY_ACK: microseconds */
#define AICORE_TP_PRESENT_LO          0x020u /* RW: PRESENT; writes refused (-EBUSY) while RUNNING */
#define AICORE_TP_PRESENT_HI          0x028u
#define AICORE_TP_POWER_ON_LO         0x030u /* RW: POWER_ON; same rule */
#define AICORE_TP_POWER_ON_HI         0x038u
#define AICORE_TP_PMU_ALIAS           0x040u /* RW: 1 = Pmu inside the Ctrl window (the newer part) */
#define AICORE_TP_COPY_QUERY_ADDR     0x048u /* RW: a device address */
#define AICORE_TP_COPY_QUERY_COUNT    0x050u /* RO: H2D copies whose destination was that address */
#define AICORE_TP_COPIES_H2D          0x058u /* RO */
#define AICORE_TP_COPIES_D2H          0x060u /* RO */
#define AICORE_TP_CTRL_TABLE_READS    0x068u /* RO: LAUNCHes that read a Ctrl table */
#define AICORE_TP_CTRL_TABLE_LAST     0x070u /* RO: its address at the last one */
#define AICORE_TP_CTRL_TABLE_DISTINCT 0x078u /* RO: distinct Ctrl table addresses seen */
#define AICORE_TP_PMU_TABLE_READS     0x080u /* RO: LAUNCHes with PMU on */
#define AICORE_TP_PMU_TABLE_LAST      0x088u
#define AICORE_TP_PMU_TABLE_DISTINCT  0x090u
#define AICORE_TP_TABLE_MISMATCHES    0x098u /* RO: sub-cores that found a wrong or zero entry */
#define AICORE_TP_BAD_ACCESSES        0x0a0u /* RO: accesses answered with an error */
#define AICORE_TP_COUNTERS_CLEAR      0x0a8u /* WO: 1 zeroes every counter here */
#define AICORE_TP_DISPATCHES          0x0b0u /* RO: DMB token writes that reached a sub-core */
#define AICORE_TP_COPIES_FAILED       0x0b8u /* RO: copies that ended in ERROR */
/*
 * RO: trapped COND reads of a sub-core whose window is open (DMB = IDLE) and
 * which got no token yet in this run: a round trip the handshake does not
 * need, as opening the window is the acknowledgement. Mapped reads are not seen.
 */
#define AICORE_TP_IDLE_POLLS 0x0c0u
/*
 * RO: trapped reads of the Pmu counters (CNT0..7 and CNT_TOTAL's two words),
 * one per 32-bit register read: what collecting a run's counts costs (a PMU
 * collection reads only the counters the run enabled). Mapped reads are not seen.
 */
#define AICORE_TP_PMU_COUNTER_READS 0x0c8u
#define AICORE_TP_TASKS(phys)       (0x400u + 8u * (phys)) /* RO: tasks FINished per sub-core */

#define AICORE_TP_ID_VALUE 0x4e50a1cfu

static_assert(AICORE_TP_TASKS(AICORE_MAX_SUBCORES) <= AICORE_TESTPORT_SIZE,
              "per-core counters fit the test port");

/* One-shot faults, each armed for TP_FAULT_CORE (FAIL_COPY: the next copy). */
enum aicore_fault {
    AICORE_FAULT_NONE = 0,        /* disarm everything */
    AICORE_FAULT_HANG = 1,        /* the core's next task never finishes: watchdog */
    AICORE_FAULT_DROP_FIN = 2,    /* the next task runs but COND stays ACK */
    AICORE_FAULT_DELAY_ACK = 3,   /* the next task's ACK comes TP_FAULT_ARG us late */
    AICORE_FAULT_BAD_PHYS_ID = 4, /* the next ready record says AICORE_BAD_PHYS_ID(id) */
    AICORE_FAULT_FAIL_COPY = 5,   /* the next copy ends in ERROR, nothing copied */
    AICORE_FAULT_STUCK_EXIT = 6,  /* the core ignores its next EXIT: COND never reads EXITED */
    AICORE_FAULT_RESET_STUCK = 7, /* device: the next RESET never completes (STATUS RUNNING) */
    AICORE_FAULT_RESET_DEAD = 8,  /* device: no RESET completes until FAULT_NONE */
};

/* Out of range for any topology (ids are < AICORE_MAX_SUBCORES), as get_coreid() & 0xfff. */
#define AICORE_BAD_PHYS_ID(id) (0x800u | (uint32_t)(id))

#endif

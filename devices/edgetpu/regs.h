/* SPDX-License-Identifier: MIT */
/*
 * Coral Edge TPU PCIe ("Apex", libedgetpu's "Beagle"), 1ac1:089a: the BAR2
 * register map, the structures the chip reads and writes in host memory, and
 * the instruction format our model executes. Shared by the driver
 * (devices/edgetpu/driver*.c) and the model (devices/edgetpu/model*.c).
 * Names and offsets are the hardware's: google/gasket-driver src/apex_driver.c
 * (enum apex_bar2_regs, the BAR2 layout, the mappable regions) and
 * google-coral/libedgetpu driver/config/beagle/beagle_csr_offsets.h and
 * driver/config/beagle_csr_helper.h (the CSR offsets and fields); each
 * public source is listed in docs/hardware-sources.md.
 *
 * BAR2, 1 MiB, every CSR 64 bits wide and accessed with one 64-bit load or
 * store (the chip rejects split accesses: a 32-bit host that splits them gets
 * HIB errors), except the SCU registers, which are 32 bits wide:
 *   0x1A000 SCU (reset, clock gate, RAM shutdown)       kernel only, trapped
 *   0x40000 tile CSRs                                    user window, mmapped
 *   0x44000 scalar core CSRs                             user window, mmapped
 *   0x46000 kernel HIB (page table config, INTVECCTL, MSI-X PBA/table, init flags)
 *   0x48000 user HIB (queues, interrupts, errors)        user window, mmapped
 *   0x4A000 idleRegister
 *   0x50000 device page table, 8192 x 8-byte slots
 *
 * BAR0 (16 KiB) is unused by every driver and its contents are unknown; our
 * model puts its test port there (EDGETPU_MODEL_*), which hardware lacks.
 */
#ifndef NPV_EDGETPU_REGS_H
#define NPV_EDGETPU_REGS_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <npuvfio/edgetpu_insn.h>

#define EDGETPU_PCI_VENDOR 0x1ac1
#define EDGETPU_PCI_DEVICE 0x089a
/* The chip reports class 0x0000ff; gasket rewrites it, vfio-pci does not care. */
#define EDGETPU_PCI_CLASS 0x0000ff

#define EDGETPU_BAR_INDEX    2u
#define EDGETPU_BAR2_SIZE    0x100000u
#define EDGETPU_BAR0_SIZE    0x4000u
#define EDGETPU_MSIX_VECTORS 13u
#define EDGETPU_PAGE_SIZE    4096u
#define EDGETPU_PAGE_SHIFT   12u
#define EDGETPU_WINDOW_SIZE  0x1000u

/* ---- SCU (32-bit registers) ---- */
#define EDGETPU_SCU_CTRL_0 0x1a30cu
#define EDGETPU_SCU_CTRL_2 0x1a314u
#define EDGETPU_SCU_CTRL_3 0x1a318u
#define EDGETPU_SCU_CTR_6  0x1a32cu

/* scu_ctrl_2 */
#define EDGETPU_SCU2_RG_RST_GCB_SHIFT 2u /* [3:2]: 1 = force reset, 2 = force not-reset */
#define EDGETPU_SCU2_RG_RST_GCB_MASK  (3u << 2)
#define EDGETPU_SCU2_RG_GATED_GCB_SHIFT                                                            \
    18u /* [19:18]: 0 = HW-controlled, 1 = gated, 2 = no gating */
#define EDGETPU_SCU2_RG_GATED_GCB_MASK  (3u << 18)
#define EDGETPU_RST_GCB_FORCE_RESET     1u
#define EDGETPU_RST_GCB_FORCE_NOT_RESET 2u

/* scu_ctrl_3 */
#define EDGETPU_SCU3_RESET_VALUE            0x80050410u /* the GCB comes up in reset */
#define EDGETPU_SCU3_CUR_RST_GCB            (1u << 4)   /* RO */
#define EDGETPU_SCU3_CUR_GCB_SRAM_SD        (1u << 6)   /* RO */
#define EDGETPU_SCU3_CUR_PWR_STATE_MASK     (3u << 8)   /* RO */
#define EDGETPU_SCU3_RG_FORCE_RAM_SD_SHIFT  14u
#define EDGETPU_SCU3_RG_FORCE_RAM_SD_MASK   (3u << 14)
#define EDGETPU_SCU3_RG_FORCE_SLEEP_MASK    (3u << 22)
#define EDGETPU_SCU3_RG_PWR_STATE_OVR_SHIFT 26u
#define EDGETPU_SCU3_RG_PWR_STATE_OVR_MASK  (3u << 26)
#define EDGETPU_SCU3_RO_MASK                                                                       \
    (EDGETPU_SCU3_CUR_RST_GCB | EDGETPU_SCU3_CUR_GCB_SRAM_SD | EDGETPU_SCU3_CUR_PWR_STATE_MASK)

/* ---- tile window (mmapped to user space) ---- */
#define EDGETPU_TILE_WINDOW              0x40000u
#define EDGETPU_TILE_DEEP_SLEEP          0x40020u
#define EDGETPU_TILE_OP_RUN_CONTROL      0x400c0u
#define EDGETPU_TILE_WIDE_TO_NARROW      0x40110u
#define EDGETPU_TILE_NARROW_TO_WIDE      0x40150u
#define EDGETPU_TILE_RING_BUS_CONSUMER_0 0x40190u
#define EDGETPU_TILE_RING_BUS_CONSUMER_1 0x401d0u
#define EDGETPU_TILE_RING_BUS_PRODUCER   0x40210u
#define EDGETPU_TILE_MESH_BUS_0          0x40250u
#define EDGETPU_TILE_MESH_BUS_1          0x40298u
#define EDGETPU_TILE_MESH_BUS_2          0x402e0u
#define EDGETPU_TILE_MESH_BUS_3          0x40328u
#define EDGETPU_TILE_ERROR               0x40370u

/* ---- scalar core window (mmapped to user space) ---- */
#define EDGETPU_SC_WINDOW                    0x44000u
#define EDGETPU_SC_SCALAR_CORE_RUN_CONTROL   0x44018u
#define EDGETPU_SC_EXECUTE_CONTROL           0x44038u
#define EDGETPU_SC_AV_DATA_POP_RUN_CONTROL   0x44158u
#define EDGETPU_SC_AV_DATA_POP_RUN_STATUS    0x44168u
#define EDGETPU_SC_PARAMETER_POP_RUN_CONTROL 0x44198u
#define EDGETPU_SC_PARAMETER_POP_RUN_STATUS  0x441a8u
#define EDGETPU_SC_INFEED_RUN_CONTROL        0x441d8u
#define EDGETPU_SC_INFEED_RUN_STATUS         0x441e0u
#define EDGETPU_SC_OUTFEED_RUN_CONTROL       0x44218u
#define EDGETPU_SC_OUTFEED_RUN_STATUS        0x44220u
#define EDGETPU_SC_SCALAR_CORE_RUN_STATUS    0x44258u
#define EDGETPU_SC_ERROR_SCALAR_CORE         0x44260u

/* Run controls and statuses (hardware_structures.h). */
#define EDGETPU_RUN_CONTROL_IDLE   0u
#define EDGETPU_RUN_CONTROL_RUN    1u
#define EDGETPU_RUN_CONTROL_HALT   2u
#define EDGETPU_RUN_STATUS_IDLE    0u
#define EDGETPU_RUN_STATUS_RUN     1u
#define EDGETPU_RUN_STATUS_HALTING 3u
#define EDGETPU_RUN_STATUS_HALTED  4u

/* Error_ScalarCore bits, ours (the hardware's layout is not public). */
#define EDGETPU_SC_ERROR_BAD_INSTRUCTION (1u << 0)

/* ---- kernel HIB (trapped) ---- */
#define EDGETPU_KHIB_PAGE                        0x46000u
#define EDGETPU_KHIB_PAGE_TABLE_SIZE             0x46000u /* RO: 8192 */
#define EDGETPU_KHIB_EXTENDED_TABLE              0x46008u /* first extended slot */
#define EDGETPU_KHIB_TRANSLATION_ENABLE          0x46010u
#define EDGETPU_KHIB_INSTR_QUEUE_INTVECCTL       0x46018u
#define EDGETPU_KHIB_INPUT_ACTV_QUEUE_INTVECCTL  0x46020u
#define EDGETPU_KHIB_PARAM_QUEUE_INTVECCTL       0x46028u
#define EDGETPU_KHIB_OUTPUT_ACTV_QUEUE_INTVECCTL 0x46030u
#define EDGETPU_KHIB_SC_HOST_INTVECCTL           0x46038u /* four 7-bit fields at 0/7/14/21 */
#define EDGETPU_KHIB_TOP_LEVEL_INTVECCTL         0x46040u /* same packing */
#define EDGETPU_KHIB_FATAL_ERR_INTVECCTL         0x46048u
#define EDGETPU_KHIB_DMA_PAUSE                   0x46050u
#define EDGETPU_KHIB_DMA_PAUSE_MASK              0x46058u
#define EDGETPU_KHIB_STATUS_BLOCK_DELAY          0x46060u
#define EDGETPU_KHIB_MSIX_PBA                    0x46068u
#define EDGETPU_KHIB_MSIX_PBA_1                  0x46070u
#define EDGETPU_KHIB_PAGE_TABLE_INIT             0x46078u /* non-zero once the RAM is initialised */
#define EDGETPU_KHIB_MSIX_TABLE_INIT             0x46080u
#define EDGETPU_KHIB_MSIX_TABLE                  0x46800u

#define EDGETPU_INTVECCTL_FIELD_BITS 7u
#define EDGETPU_INTVECCTL_FIELD_MASK 0x7fu

/* ---- user HIB (mmapped to user space) ---- */
#define EDGETPU_UHIB_WINDOW 0x48000u

/* The instruction queue (one of four queues with the same register set). */
#define EDGETPU_IQ_CONTROL           0x48568u
#define EDGETPU_IQ_STATUS            0x48570u
#define EDGETPU_IQ_DESCRIPTOR_SIZE   0x48578u /* RO: 16 */
#define EDGETPU_IQ_MINIMUM_SIZE      0x48580u
#define EDGETPU_IQ_MAXIMUM_SIZE      0x48588u
#define EDGETPU_IQ_BASE              0x48590u /* device VA of the ring */
#define EDGETPU_IQ_STATUS_BLOCK_BASE 0x48598u /* device VA of the status block */
#define EDGETPU_IQ_SIZE              0x485a0u /* entries */
#define EDGETPU_IQ_TAIL              0x485a8u /* doorbell: masked slot index */
#define EDGETPU_IQ_FETCHED_HEAD      0x485b0u /* RO */
#define EDGETPU_IQ_COMPLETED_HEAD    0x485b8u /* RO */
#define EDGETPU_IQ_INT_CONTROL       0x485c0u
#define EDGETPU_IQ_INT_STATUS        0x485c8u /* host writes 0 to clear */

#define EDGETPU_IQ_CONTROL_ENABLE         (1u << 0)
#define EDGETPU_IQ_CONTROL_SC_DESC_SELECT (1u << 1)
#define EDGETPU_IQ_CONTROL_SB_WR_ENABLE   (1u << 2)

#define EDGETPU_SC_HOST_INT_CONTROL        0x486a0u /* bit n enables SC_HOST_n */
#define EDGETPU_SC_HOST_INT_STATUS         0x486a8u /* write 0 to a bit to clear it */
#define EDGETPU_TOP_LEVEL_INT_CONTROL      0x486b0u
#define EDGETPU_TOP_LEVEL_INT_STATUS       0x486b8u
#define EDGETPU_FATAL_ERR_INT_CONTROL      0x486c0u
#define EDGETPU_FATAL_ERR_INT_STATUS       0x486c8u
#define EDGETPU_SC_HOST_INT_COUNT          0x486d0u /* four 16-bit wrapping counters at 0/16/32/48 */
#define EDGETPU_UHIB_DMA_PAUSE             0x486d8u /* write 1 to pause all DMA */
#define EDGETPU_UHIB_DMA_PAUSED            0x486e0u /* reads 1 once paused */
#define EDGETPU_STATUS_BLOCK_UPDATE        0x486e8u
#define EDGETPU_HIB_ERROR_STATUS           0x486f0u /* EDGETPU_HIB_ERR_*, sticky until GCB reset */
#define EDGETPU_HIB_ERROR_MASK             0x486f8u
#define EDGETPU_HIB_FIRST_ERROR_STATUS     0x48700u
#define EDGETPU_HIB_FIRST_ERROR_TIMESTAMP  0x48708u
#define EDGETPU_HIB_INJECT_ERROR           0x48710u
#define EDGETPU_PAGE_FAULT_ADDRESS         0x48738u
#define EDGETPU_WIRE_INT_PENDING_BIT_ARRAY 0x48778u
#define EDGETPU_WIRE_INT_MASK_ARRAY        0x48780u
#define EDGETPU_TILECONFIG0                0x48788u /* [6:0] tile select, 0x7f broadcasts */
#define EDGETPU_TILECONFIG1                0x48790u
#define EDGETPU_DMA_BURST_LIMITER          0x487a8u

#define EDGETPU_TILECONFIG_BROADCAST 0x7fu

/* hib_error_status / mask / first_error / inject bits. */
#define EDGETPU_HIB_ERR_INBOUND_PAGE_FAULT      (1u << 0)
#define EDGETPU_HIB_ERR_EXTENDED_PAGE_FAULT     (1u << 1)
#define EDGETPU_HIB_ERR_CSR_PARITY              (1u << 2)
#define EDGETPU_HIB_ERR_AXI_SLAVE_B             (1u << 3)
#define EDGETPU_HIB_ERR_AXI_SLAVE_R             (1u << 4)
#define EDGETPU_HIB_ERR_IQ_BAD_CONFIGURATION    (1u << 5)
#define EDGETPU_HIB_ERR_IQ_INVALID              (1u << 9)
#define EDGETPU_HIB_ERR_LENGTH_0_DMA            (1u << 13)
#define EDGETPU_HIB_ERR_VIRT_TABLE_RDATA_UNCORR (1u << 14)

/* What a CSR of a clock-gated or in-reset block reads (libedgetpu's marker). */
#define EDGETPU_DEADFEED 0xdeadfeeddeadfeedull

/* ---- idle generator ---- */
#define EDGETPU_IDLE_REGISTER       0x4a000u
#define EDGETPU_IDLE_REGISTER_RESET 0x9000u

/* ---- MSI-X vectors = interrupt sources (gasket/libedgetpu DW_INTERRUPT_*) ---- */
enum edgetpu_vector {
    EDGETPU_VEC_INSTR_QUEUE = 0,
    EDGETPU_VEC_INPUT_ACTV_QUEUE = 1,
    EDGETPU_VEC_PARAM_QUEUE = 2,
    EDGETPU_VEC_OUTPUT_ACTV_QUEUE = 3,
    EDGETPU_VEC_SC_HOST_0 = 4,
    EDGETPU_VEC_SC_HOST_1 = 5,
    EDGETPU_VEC_SC_HOST_2 = 6,
    EDGETPU_VEC_SC_HOST_3 = 7,
    EDGETPU_VEC_TOP_LEVEL_0 = 8,
    EDGETPU_VEC_TOP_LEVEL_3 = 11,
    EDGETPU_VEC_FATAL_ERR = 12,
};

/* ---- device page table and device virtual addresses ---- */
#define EDGETPU_PAGE_TABLE         0x50000u
#define EDGETPU_PAGE_TABLE_ENTRIES 8192u
#define EDGETPU_PTE_VALID          1ull
#define EDGETPU_PTE_ADDR_MASK      (~0xfffull)
/* Level-1 (second-level) tables: one host page of 512 u64 entries, same format. */
#define EDGETPU_L1_ENTRIES 512u

/* Simple VA: bit63 = 0, [24:12] slot (< extended_table), [11:0] offset. */
#define EDGETPU_VA_EXTENDED     (1ull << 63)
#define EDGETPU_SIMPLE_SLOT(va) (((va) >> 12) & 0x1fffu)
#define EDGETPU_SIMPLE_VA_LIMIT (1ull << 25)
/* Extended VA: bit63 = 1, [33:21] level-0 index (slot = extended_table + idx), [20:12] level-1
 * index. */
#define EDGETPU_EXT_L0_INDEX(va)  (((va) >> 21) & 0x1fffu)
#define EDGETPU_EXT_L1_INDEX(va)  (((va) >> 12) & 0x1ffu)
#define EDGETPU_EXT_VA_LIMIT_BITS 34u
#define EDGETPU_EXT_SPAN_PER_SLOT (1ull << 21)

/* ---- the instruction queue's structures in host memory ---- */
#define EDGETPU_IQ_DESC_SIZE_VALUE 16u

struct edgetpu_desc {
    uint64_t address;       /* device VA of an instruction chunk */
    uint32_t size_in_bytes; /* 0 is a length_0_dma error */
    uint32_t reserved;
};
static_assert(sizeof(struct edgetpu_desc) == 16, "HostQueueDescriptor is 16 bytes");
static_assert(offsetof(struct edgetpu_desc, address) == 0, "descriptor layout is device ABI");
static_assert(offsetof(struct edgetpu_desc, size_in_bytes) == 8, "descriptor layout is device ABI");

/*
 * Written by the device. completed_head_pointer is the ring index (masked to
 * the ring size) up to which descriptors are consumed; fatal_error is non-zero
 * once the queue hit a fatal error (sticky until reset).
 */
struct edgetpu_status_block {
    uint32_t completed_head_pointer;
    uint32_t fatal_error;
    uint64_t reserved;
};
static_assert(sizeof(struct edgetpu_status_block) == 16, "HostQueueStatusBlock is 16 bytes");
static_assert(offsetof(struct edgetpu_status_block, fatal_error) == 4, "status block layout");

/* The instruction format our model executes is public: <npuvfio/edgetpu_insn.h>. */

/* ---- the model's test port in BAR0 (not on hardware), trapped, 64-bit registers ---- */
#define EDGETPU_MODEL_ID    0x0000u /* RO: EDGETPU_MODEL_ID_VALUE */
#define EDGETPU_MODEL_FAULT 0x0008u /* WO: EDGETPU_FAULT_*, armed for the next descriptor */
#define EDGETPU_MODEL_BAD_PTE_COUNT                                                                \
    0x0010u                                 /* RO: page-table writes that were not a client IOVA   \
                                             */
#define EDGETPU_MODEL_BAD_PTE_VALUE 0x0018u /* RO: the last such value */
#define EDGETPU_MODEL_SPLIT_ACCESSES                                                               \
    0x0020u /* RO: rejected partial accesses to 64-bit registers                                   \
             */
#define EDGETPU_MODEL_LATE_SB_US                                                                   \
    0x0028u /* RW: status block written this long after the interrupt */
#define EDGETPU_MODEL_HIGH_DMA_COUNT                                                               \
    0x0030u /* RO: queue/status/L1 accesses refused at >= 4 GiB                                    \
             */

/*
 * RW: how long a program runs after its chunk was consumed (status block
 * written) before its outputs and SC_HOST_0 (model choice, default
 * EDGETPU_MODEL_EXEC_US_DEFAULT; at most 1 s).
 */
#define EDGETPU_MODEL_EXEC_US         0x0038u
#define EDGETPU_MODEL_EXEC_US_DEFAULT 50u
/* What every page-table slot holds at the model's power-on: valid, to a page no client maps. */
#define EDGETPU_MODEL_STALE_PTE 0xdeadb001ull
/* RO: interrupts not raised because their status bit was already set (not acknowledged). */
#define EDGETPU_MODEL_UNACKED_IRQS 0x0048u
/* RO: GCB reset exits (each drops the MSI-X enable and vector table). */
#define EDGETPU_MODEL_GCB_RESETS 0x0050u

/*
 * Compiled-model packages the model was given (model_pkg.h): counters the
 * tests read. Caching runs, all tokens; execution-only / stand-alone runs
 * checked and their outputs written with the data-path pattern; chunks
 * refused and the last reason (enum edgetpu_pkg_why); caching runs that
 * displaced another token's parameters; RW token selector and the caching
 * runs of that token; packages loaded.
 */
#define EDGETPU_MODEL_PKG_CACHING_RUNS 0x0058u
#define EDGETPU_MODEL_PKG_RUNS         0x0060u
#define EDGETPU_MODEL_PKG_REJECTS      0x0068u
#define EDGETPU_MODEL_PKG_REJECT_WHY   0x0070u
#define EDGETPU_MODEL_PKG_DISPLACED    0x0078u
#define EDGETPU_MODEL_PKG_TOKEN        0x0080u
#define EDGETPU_MODEL_PKG_TOKEN_RUNS   0x0088u
#define EDGETPU_MODEL_PKG_COUNT        0x0090u
/* The largest chunk the model fetches when it has packages (model choice). */
#define EDGETPU_MODEL_PKG_CHUNK_MAX (16u << 20)

#define EDGETPU_MODEL_ID_VALUE 0x4e50e790u

enum edgetpu_fault {
    EDGETPU_FAULT_NONE = 0,
    EDGETPU_FAULT_HANG = 1,        /* the next descriptor is never consumed until reset */
    EDGETPU_FAULT_LATE_STATUS = 2, /* status blocks from now on: late (EDGETPU_MODEL_LATE_SB_US) */
    EDGETPU_FAULT_WILD_HEAD = 3,   /* the next status block names a head beyond the tail */
    EDGETPU_FAULT_AXI_ERROR = 4,   /* the next output write gets an AXI slave B error */
    EDGETPU_FAULT_PAGE_FAULT = 5,  /* the next output goes to an unmapped device VA */
    EDGETPU_FAULT_DEVICE_GONE = 6, /* every read returns all-ones, nothing runs, for good */
    EDGETPU_FAULT_FAIL_RESET = 7,  /* the next GCB reset exit does not happen: it stays held */
};

/* Where EDGETPU_FAULT_PAGE_FAULT sends the output: an extended VA nobody maps. */
#define EDGETPU_WILD_DEVICE_VA 0x80000000fff00000ull

#endif

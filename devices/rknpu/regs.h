/* SPDX-License-Identifier: MIT */
/*
 * Rockchip RK3588 NPU ("RKNPU"): the per-core register map, the
 * register-command (regcmd) stream the program controller (PC) fetches, the
 * task struct the driver keeps in memory, the sub-block registers a 1x1
 * convolution (our matmul) needs, the native data layouts, and the PCI
 * stand-in our model presents. Shared by the driver (devices/rknpu/driver*.c)
 * and the model (devices/rknpu/model*.c). Offsets and fields are the
 * hardware's: mainline rocket (drivers/accel/rocket/rocket_registers.h and
 * rocket_job.c), the vendor rknpu driver (RKNPU_OFFSET_* in
 * drivers/rknpu/include/rknpu_ioctl.h, drivers/rknpu/rknpu_job.c), Mesa's
 * rocket (src/gallium/drivers/rocket/registers.xml and rkt_regcmd.c) and
 * mtx512/rk3588-npu (include/npu_hw.h, src/npu_matmul.c); the list is in
 * docs/hardware-sources.md. Where those sources leave a point open, the
 * choice made here says "[model choice]".
 *
 * The real NPU is a platform device (three 64 KiB windows at 0xfdab0000,
 * 0xfdac0000, 0xfdad0000, one interrupt line per core, no PCI ids). The model
 * is a PCI-shaped stand-in:
 *   BAR0, 256 KiB, every access trapped, 32-bit accesses only:
 *     0x00000 core 0 window (64 KiB, the hardware's per-core layout below)
 *     0x10000 core 1 window
 *     0x20000 core 2 window
 *     0x30000 MSI-X table, 0x38000 MSI-X PBA (the framework's)
 *   BAR2, 4 KiB, trapped: the model's test port (RKNPU_TP_*), not on hardware.
 *   MSI-X vector c = core c's interrupt line (GIC SPI 110 + c on the SoC).
 * Under vfio-platform (the vendor's DT node: three "reg" entries) core c is
 * instead region c at offset 0 and its line is IRQ index c, level-triggered
 * and shared with the core's IOMMU; register offsets inside a window are the
 * same on both.
 */
#ifndef NPV_RKNPU_REGS_H
#define NPV_RKNPU_REGS_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the PCI stand-in ---- */
/*
 * 0x1234 is the unassigned vendor id QEMU's emulated devices use (our testdev
 * is 1234:4e50); 0x4e52 ("NR") is ours. No shipping RKNPU has PCI ids at all,
 * so nothing real can be mistaken for this function.
 */
#define RKNPU_PCI_VENDOR 0x1234u
#define RKNPU_PCI_DEVICE 0x4e52u
#define RKNPU_PCI_CLASS  0x120000u /* processing accelerator */

#define RKNPU_NUM_CORES         3u
#define RKNPU_CORE_WINDOW_SIZE  0x10000u
#define RKNPU_BAR_INDEX         0u
#define RKNPU_BAR0_SIZE         0x40000u
#define RKNPU_CORE_BASE(core)   ((uint32_t)(core)*RKNPU_CORE_WINDOW_SIZE)
#define RKNPU_MSIX_TABLE        0x30000u
#define RKNPU_MSIX_PBA          0x38000u
#define RKNPU_MSIX_VECTORS      RKNPU_NUM_CORES
#define RKNPU_MSIX_VECTOR(core) ((uint32_t)(core))
#define RKNPU_TP_BAR_INDEX      2u
#define RKNPU_TP_BAR_SIZE       0x1000u

/* ---- per-core window: sub-block offsets (Mesa registers.xml domains) ---- */
#define RKNPU_BLK_PC       0x0000u
#define RKNPU_BLK_CNA      0x1000u
#define RKNPU_BLK_CMAC     0x2000u /* unnamed in the sources; NVDLA CMAC [inferred] */
#define RKNPU_BLK_CORE     0x3000u
#define RKNPU_BLK_DPU      0x4000u
#define RKNPU_BLK_DPU_RDMA 0x5000u
#define RKNPU_BLK_PPU      0x6000u
#define RKNPU_BLK_PPU_RDMA 0x7000u
#define RKNPU_BLK_GLOBAL   0xf000u
#define RKNPU_BLK_SIZE     0x1000u

/* Every sub-block starts with these three (offsets inside the block). */
#define RKNPU_S_STATUS           0x0u
#define RKNPU_S_POINTER          0x4u
#define RKNPU_S_OPERATION_ENABLE 0x8u

#define RKNPU_S_POINTER_POINTER         (1u << 0)
#define RKNPU_S_POINTER_POINTER_PP_EN   (1u << 1)
#define RKNPU_S_POINTER_EXECUTER_PP_EN  (1u << 2)
#define RKNPU_S_POINTER_POINTER_PP_MODE (1u << 3)
#define RKNPU_S_POINTER_EXECUTER        (1u << 16)
/* What both drivers write to CNA/CORE S_POINTER before a run (+ 0x10000000 * core). */
#define RKNPU_S_POINTER_PP_DEFAULT 0xeu

/* ---- PC (program controller) registers ---- */
#define RKNPU_PC_VERSION              0x00u /* RO */
#define RKNPU_PC_VERSION_NUM          0x04u /* RO, low 16 bits meaningful */
#define RKNPU_PC_OPERATION_ENABLE     0x08u /* bit0: start (0->1 edge; a 1-then-0 pulse works too) */
#define RKNPU_PC_BASE_ADDRESS         0x10u /* [31:4] regcmd IOVA; bit0 PC_SEL */
#define RKNPU_PC_REGISTER_AMOUNTS     0x14u /* [15:0] (regcmd words + 1) / 2 - 1 */
#define RKNPU_PC_INTERRUPT_MASK       0x20u
#define RKNPU_PC_INTERRUPT_CLEAR      0x24u /* write 1 to clear (RAW and masked status) */
#define RKNPU_PC_INTERRUPT_STATUS     0x28u /* RO: RAW & MASK */
#define RKNPU_PC_INTERRUPT_RAW_STATUS 0x2cu /* RO */
#define RKNPU_PC_TASK_CON             0x30u
#define RKNPU_PC_TASK_DMA_BASE_ADDR   0x34u /* [31:4]; meaning unknown, drivers write 0 */
#define RKNPU_PC_TASK_STATUS          0x3cu /* RO: [11:0] tasks completed in this run */

/* "FIRE": what all three RK3588 cores report in PC_VERSION (rocket prints VERSION + NUM). */
#define RKNPU_VERSION_VALUE     0x46495245u
#define RKNPU_VERSION_NUM_VALUE 0u

#define RKNPU_PC_OP_EN                 (1u << 0)
#define RKNPU_PC_BASE_ADDRESS_MASK     0xfffffff0u
#define RKNPU_PC_SEL                   (1u << 0) /* "slave mode": no fetch */
#define RKNPU_PC_REGISTER_AMOUNTS_MASK 0xffffu

#define RKNPU_TASK_CON_TASK_NUMBER_MASK 0xfffu
#define RKNPU_TASK_CON_TASK_PP_EN       (1u << 12)
#define RKNPU_TASK_CON_TASK_COUNT_CLEAR (1u << 13)
#define RKNPU_TASK_CON_RESERVED14       (1u << 14) /* "reserved" in the TRM, always set by drivers */
#define RKNPU_TASK_STATUS_COUNT_MASK    0xfffu
/* Vendor: at most this many tasks per hardware run (TASK_NUMBER is 12 bits). */
#define RKNPU_MAX_TASKS_PER_RUN 4095u

/* Interrupt bits: MASK, CLEAR, STATUS and RAW_STATUS share the layout. _0/_1: ping-pong group. */
#define RKNPU_INT_CNA_FEATURE_0   (1u << 0)
#define RKNPU_INT_CNA_FEATURE_1   (1u << 1)
#define RKNPU_INT_CNA_WEIGHT_0    (1u << 2)
#define RKNPU_INT_CNA_WEIGHT_1    (1u << 3)
#define RKNPU_INT_CNA_CSC_0       (1u << 4)
#define RKNPU_INT_CNA_CSC_1       (1u << 5)
#define RKNPU_INT_CORE_0          (1u << 6)
#define RKNPU_INT_CORE_1          (1u << 7)
#define RKNPU_INT_DPU_0           (1u << 8)
#define RKNPU_INT_DPU_1           (1u << 9)
#define RKNPU_INT_PPU_0           (1u << 10)
#define RKNPU_INT_PPU_1           (1u << 11)
#define RKNPU_INT_DMA_READ_ERROR  (1u << 12)
#define RKNPU_INT_DMA_WRITE_ERROR (1u << 13)
#define RKNPU_INT_DPU_DONE        (RKNPU_INT_DPU_0 | RKNPU_INT_DPU_1)
#define RKNPU_INT_PPU_DONE        (RKNPU_INT_PPU_0 | RKNPU_INT_PPU_1)
#define RKNPU_INT_DMA_ERROR       (RKNPU_INT_DMA_READ_ERROR | RKNPU_INT_DMA_WRITE_ERROR)
#define RKNPU_INT_CLEAR_ALL       0x1ffffu /* what both drivers write to INTERRUPT_CLEAR */
#define RKNPU_INT_VALID_MASK      0x3fffu  /* the bits that exist */

/* ---- GLOBAL block ---- */
/* Block-enable mask; the same layout is the value of the regcmd "execute" word. */
#define RKNPU_GLOBAL_OPERATION_ENABLE 0xf008u
#define RKNPU_ENABLE_CNA              (1u << 0)
#define RKNPU_ENABLE_CORE             (1u << 2)
#define RKNPU_ENABLE_DPU              (1u << 3)
#define RKNPU_ENABLE_DPU_RDMA         (1u << 4)
#define RKNPU_ENABLE_PPU              (1u << 5)
#define RKNPU_ENABLE_PPU_RDMA         (1u << 6)
#define RKNPU_ENABLE_ALL              0x7fu

/*
 * Per-core soft reset [model choice]. On the SoC a core is reset by asserting
 * its CRU lines SRST_A_RKNNx and SRST_H_RKNNx (outside the NPU window; the
 * vendor and rocket drivers assert both, wait 10 us, deassert); there is no
 * register-level reset in the window. The stand-in places the two lines here
 * so the PCI-shaped model can reset one core:
 *   write [1:0] = the lines asserted (1) or released (0);
 *   while either line is asserted the core is held in reset: a running task
 *   stops without completing, PC and sub-block state return to reset values,
 *   DMA stops, interrupt status is cleared;
 *   [31] RO PRESENT: reads 1, so a driver can tell the stand-in's register
 *   from an unused offset (0) -- it reads it only on the PCI stand-in, never
 *   on a platform device, where the offset is the SoC's and unknown;
 *   [8] RO IN_RESET: the core has not come out of reset. After releasing both
 *   lines it reads 0 unless the reset failed (RKNPU_FAULT_RESET_FAILS_ONCE:
 *   the core stays in reset, every other register of the window reads 0 and
 *   ignores writes, until the lines are asserted and released again).
 */
#define RKNPU_GLOBAL_SOFT_RESET   0xf100u
#define RKNPU_SOFT_RESET_SRST_A   (1u << 0)
#define RKNPU_SOFT_RESET_SRST_H   (1u << 1)
#define RKNPU_SOFT_RESET_LINES    (RKNPU_SOFT_RESET_SRST_A | RKNPU_SOFT_RESET_SRST_H)
#define RKNPU_SOFT_RESET_IN_RESET (1u << 8)
#define RKNPU_SOFT_RESET_PRESENT  (1u << 31)

/* ---- register-command words ---- */
/*
 * A task's program is an array of little-endian 64-bit words in device memory:
 *   [63:48] target, [47:16] 32-bit value, [15:0] register offset in the core
 *   window (the full offset, e.g. 0x1070 for CNA FEATURE_DATA_ADDR).
 * Target = block id | RKNPU_TGT_WRITE. A write's offset must lie in the block
 * its target names (the model treats anything else as a config error).
 * Target 0 (a zero word) is padding. The last four words of every task are the
 * trailer: [PC BASE_ADDRESS = next task's regcmd IOVA; a zero word in the
 * last task] [PC REGISTER_AMOUNTS = next task's amount; 0 in the last]
 * [RKNPU_TGT_BARRIER] [RKNPU_TGT_OP_EN, value = block-enable mask, reg =
 * PC_OPERATION_ENABLE] (mtx512 gen_matmul_task ops[104..107]; Mesa
 * fill_first_regcmd and compile_operation). The op-enable word starts the
 * task's computation.
 */
#define RKNPU_TGT_WRITE    0x0001u
#define RKNPU_TGT_BARRIER  0x0040u /* "must be set before op_en" (TRM via Mesa) */
#define RKNPU_TGT_OP_EN    0x0080u
#define RKNPU_TGT_PC       0x0100u
#define RKNPU_TGT_CNA      0x0200u
#define RKNPU_TGT_CMAC     0x0400u
#define RKNPU_TGT_CORE     0x0800u
#define RKNPU_TGT_DPU      0x1000u
#define RKNPU_TGT_DPU_RDMA 0x2000u
#define RKNPU_TGT_PPU      0x4000u
#define RKNPU_TGT_PPU_RDMA 0x8000u

#define RKNPU_TRAILER_WORDS 4u /* vendor RKNPU_PC_DATA_EXTRA_AMOUNT */

static inline uint64_t rknpu_regcmd(uint16_t target, uint32_t value, uint16_t reg)
{
    return ((uint64_t)target << 48) | ((uint64_t)value << 16) | (uint64_t)reg;
}
/* A register write to block `block` (RKNPU_TGT_CNA ...). */
static inline uint64_t rknpu_regcmd_write(uint16_t block, uint16_t reg, uint32_t value)
{
    return rknpu_regcmd((uint16_t)(block | RKNPU_TGT_WRITE), value, reg);
}
static inline uint16_t rknpu_regcmd_target(uint64_t word)
{
    return (uint16_t)(word >> 48);
}
static inline uint32_t rknpu_regcmd_value(uint64_t word)
{
    return (uint32_t)(word >> 16);
}
static inline uint16_t rknpu_regcmd_reg(uint64_t word)
{
    return (uint16_t)word;
}
/*
 * PC REGISTER_AMOUNTS for a list of `words` 64-bit words, trailer included:
 * the PC fetches (amount + 1) * 2 words (RK3588 pc_data_amount_scale = 2).
 * [model choice, unverified] The amount in a trailer's PC REGISTER_AMOUNTS
 * write uses the same unit: Mesa's ALIGN((n - 4) / 2, 2) there is never
 * followed by the PC under rocket (one task per run), and the vendor's
 * chains come from its closed runtime (devices/rknpu/README.md).
 */
static inline uint32_t rknpu_regcmd_amount(uint32_t words)
{
    return (words + 1u) / 2u - 1u;
}
static inline uint32_t rknpu_regcmd_fetch_words(uint32_t amount)
{
    return ((amount & RKNPU_PC_REGISTER_AMOUNTS_MASK) + 1u) * 2u;
}
/* Each task's list starts 64-byte aligned (Mesa); the PC needs 16 (BASE_ADDRESS[3:0] ignored). */
#define RKNPU_REGCMD_ALIGN 64u

/*
 * ---- the task struct the driver keeps in memory (vendor struct rknpu_task) ----
 * Packed, 40 bytes, an array of them per submit. Only int_mask, regcfg_amount
 * and regcmd_addr are inputs (the hardware never reads this struct: the driver
 * programs the PC from it); int_status is the driver's write-back.
 */
struct rknpu_task {
    uint32_t flags;
    uint32_t op_idx;
    uint32_t enable_mask;   /* RKNPU_ENABLE_*, as in the task's op-enable word */
    uint32_t int_mask;      /* completion bits to wait for, e.g. RKNPU_INT_DPU_DONE */
    uint32_t int_clear;     /* RKNPU_INT_CLEAR_ALL */
    uint32_t int_status;    /* written back when the task completes */
    uint32_t regcfg_amount; /* regcmd words without the 4-word trailer */
    uint32_t regcfg_offset; /* byte offset of this task's list in the regcmd buffer */
    uint64_t regcmd_addr;   /* IOVA of this task's list (32-bit device address space) */
} __attribute__((packed));
static_assert(sizeof(struct rknpu_task) == 40, "vendor rknpu_task is 40 packed bytes");
static_assert(offsetof(struct rknpu_task, int_mask) == 12, "rknpu_task layout");
static_assert(offsetof(struct rknpu_task, int_status) == 20, "rknpu_task layout");
static_assert(offsetof(struct rknpu_task, regcfg_amount) == 24, "rknpu_task layout");
static_assert(offsetof(struct rknpu_task, regcmd_addr) == 32, "rknpu_task layout");

/* ---- CNA (convolution DMA / feature + weight fetch) ---- */
#define RKNPU_CNA_S_POINTER 0x1004u
#define RKNPU_CNA_CONV_CON1                                                                        \
    0x100cu /* [3:0] CONV_MODE, [6:4] IN_PRECISION, [9:7] PROC_PRECISION                           \
             */
#define RKNPU_CNA_CONV_CON2         0x1010u /* [23:16] KERNEL_GROUP, [13:4] FEATURE_GRAINS */
#define RKNPU_CNA_CONV_CON3         0x1014u /* [5:3] Y stride, [2:0] X stride */
#define RKNPU_CNA_DATA_SIZE0        0x1020u /* [26:16] WIDTH, [10:0] HEIGHT */
#define RKNPU_CNA_DATA_SIZE1        0x1024u /* [29:16] CHANNEL_REAL - 1, [15:0] CHANNEL */
#define RKNPU_CNA_DATA_SIZE2        0x1028u /* [10:0] DATAOUT_WIDTH */
#define RKNPU_CNA_DATA_SIZE3        0x102cu /* [17:0] DATAOUT_ATOMICS */
#define RKNPU_CNA_WEIGHT_SIZE0      0x1030u /* total weight bytes */
#define RKNPU_CNA_WEIGHT_SIZE1      0x1034u /* [18:0] bytes per kernel */
#define RKNPU_CNA_WEIGHT_SIZE2      0x1038u /* [28:24] W, [20:16] H, [13:0] KERNELS */
#define RKNPU_CNA_CBUF_CON0         0x1040u /* [7:4] weight banks, [3:0] data banks */
#define RKNPU_CNA_CBUF_CON1         0x1044u /* [12:0] data entries */
#define RKNPU_CNA_CVT_CON0          0x104cu /* bit3 DATA_SIGN, bit1 CVT_TYPE, bit0 CVT_BYPASS */
#define RKNPU_CNA_CVT_CON1          0x1050u /* [31:16] CVT_SCALE0 */
#define RKNPU_CNA_CVT_CON2          0x1054u
#define RKNPU_CNA_CVT_CON3          0x1058u
#define RKNPU_CNA_CVT_CON4          0x105cu
#define RKNPU_CNA_FC_CON0           0x1060u
#define RKNPU_CNA_FC_CON1           0x1064u
#define RKNPU_CNA_PAD_CON0          0x1068u
#define RKNPU_CNA_FEATURE_DATA_ADDR 0x1070u /* IOVA of A */
#define RKNPU_CNA_FC_CON2           0x1074u
#define RKNPU_CNA_DMA_CON0          0x1078u /* [19:16] weight burst, [3:0] data burst */
#define RKNPU_CNA_DMA_CON1          0x107cu /* [27:0] line stride */
#define RKNPU_CNA_DMA_CON2          0x1080u /* [27:0] surface stride */
#define RKNPU_CNA_FC_DATA_SIZE0     0x1084u /* [26:16] DMA width, [10:0] DMA height */
#define RKNPU_CNA_FC_DATA_SIZE1     0x1088u /* [15:0] DMA channel */
#define RKNPU_CNA_DCOMP_CTRL        0x1100u
#define RKNPU_CNA_DCOMP_REGNUM      0x1104u
#define RKNPU_CNA_DCOMP_ADDR0       0x1110u /* IOVA of B (weights) */
#define RKNPU_CNA_DCOMP_AMOUNT0     0x1140u /* ..AMOUNT15 at 0x117c */
#define RKNPU_CNA_CVT_CON5          0x1180u
#define RKNPU_CNA_PAD_CON1          0x1184u

#define RKNPU_CBUF_CON0_WEIGHT_BANK_SHIFT 4u
#define RKNPU_CBUF_CON0_BANK_MASK         0xfu
#define RKNPU_CBUF_CON1_ENTRIES_MASK      0x1fffu
/* CVT_CON0 bits (mtx512 gen_matmul_task: data_sign << 3 | cvt_type << 1 | cvt_bypass). */
#define RKNPU_CVT_CON0_DATA_SIGN  (1u << 3)
#define RKNPU_CVT_CON0_CVT_TYPE   (1u << 1)
#define RKNPU_CVT_CON0_CVT_BYPASS (1u << 0)
/* What every source writes for a matmul / non-ARGB convolution (mtx512, Mesa): 0xb. */
#define RKNPU_CVT_CON0_MATMUL                                                                      \
    (RKNPU_CVT_CON0_DATA_SIGN | RKNPU_CVT_CON0_CVT_TYPE | RKNPU_CVT_CON0_CVT_BYPASS)
#define RKNPU_DMA_STRIDE_MASK 0xfffffffu

#define RKNPU_CONV_MODE_MASK            0xfu
#define RKNPU_CONV_MODE_DIRECT          0u
#define RKNPU_CONV_CON1_IN_PREC_SHIFT   4u
#define RKNPU_CONV_CON1_PROC_PREC_SHIFT 7u
#define RKNPU_DATA_SIZE0_WIDTH_SHIFT    16u
#define RKNPU_DATA_SIZE0_FIELD_MASK     0x7ffu
#define RKNPU_DATA_SIZE1_REAL_SHIFT     16u
#define RKNPU_DATA_SIZE1_REAL_MASK      0x3fffu
#define RKNPU_DATA_SIZE1_CHANNEL_MASK   0xffffu
#define RKNPU_WEIGHT_SIZE1_MASK         0x7ffffu
#define RKNPU_WEIGHT_SIZE2_W_SHIFT      24u
#define RKNPU_WEIGHT_SIZE2_H_SHIFT      16u
#define RKNPU_WEIGHT_SIZE2_WH_MASK      0x1fu
#define RKNPU_WEIGHT_SIZE2_KERNELS_MASK 0x3fffu

/* Precision codes (CNA CONV_CON1, CORE MISC_CFG, DPU DATA_FORMAT). */
#define RKNPU_PREC_INT8  0u
#define RKNPU_PREC_FP16  2u
#define RKNPU_PREC_INT32 4u
#define RKNPU_PREC_FP32  5u
#define RKNPU_PREC_MASK  0x7u

/* ---- CORE (MAC array) ---- */
#define RKNPU_CORE_S_POINTER       0x3004u
#define RKNPU_CORE_MISC_CFG        0x3010u /* [10:8] PROC_PRECISION, bit0 QD_EN */
#define RKNPU_CORE_DATAOUT_SIZE_0  0x3014u /* [31:16] HEIGHT - 1, [15:0] WIDTH - 1 */
#define RKNPU_CORE_DATAOUT_SIZE_1  0x3018u /* [15:0] CHANNEL - 1 */
#define RKNPU_CORE_CLIP_TRUNCATE   0x301cu
#define RKNPU_CORE_3030            0x3030u /* undocumented; mtx512 and Mesa write 0 */
#define RKNPU_CORE_MISC_PREC_SHIFT 8u

/* ---- DPU (NVDLA SDP: bias/scale, BN, element-wise, output convert, write DMA) ---- */
#define RKNPU_DPU_S_POINTER 0x4004u
#define RKNPU_DPU_FEATURE_MODE_CFG                                                                 \
    0x400cu /* [8:5] burst, [4:3] conv mode, [2:1] OUTPUT_MODE, bit0 flying */
#define RKNPU_DPU_DATA_FORMAT          0x4010u /* [31:29] OUT_PREC, [28:26] IN_PREC, [2:0] PROC_PREC */
#define RKNPU_DPU_OFFSET_PEND          0x4014u
#define RKNPU_DPU_DST_BASE_ADDR        0x4020u /* IOVA of C */
#define RKNPU_DPU_DST_SURF_STRIDE      0x4024u /* [31:4] */
#define RKNPU_DPU_DATA_CUBE_WIDTH      0x4030u /* [12:0] WIDTH - 1 */
#define RKNPU_DPU_DATA_CUBE_HEIGHT     0x4034u /* [12:0] HEIGHT - 1 */
#define RKNPU_DPU_DATA_CUBE_NOTCH_ADDR 0x4038u
#define RKNPU_DPU_DATA_CUBE_CHANNEL    0x403cu /* [28:16] ORIG_CHANNEL - 1, [12:0] CHANNEL - 1 */
#define RKNPU_DPU_BS_CFG               0x4040u
#define RKNPU_DPU_BS_ALU_CFG           0x4044u /* register operand when BS_ALU_SRC = 0 */
#define RKNPU_DPU_BS_MUL_CFG           0x4048u
#define RKNPU_DPU_BS_RELUX_CMP_VALUE   0x404cu
#define RKNPU_DPU_BS_OW_CFG            0x4050u /* [10:8][7:5][4:2] SIZE_E_2..0, bit1 OD_BYPASS */
#define RKNPU_DPU_BS_OW_OP             0x4054u
#define RKNPU_DPU_WDMA_SIZE_0          0x4058u /* [12:0] CHANNEL_WDMA */
#define RKNPU_DPU_WDMA_SIZE_1          0x405cu /* [28:16] HEIGHT_WDMA, [12:0] WIDTH_WDMA */
#define RKNPU_DPU_BN_CFG               0x4060u
#define RKNPU_DPU_BN_ALU_CFG           0x4064u
#define RKNPU_DPU_BN_MUL_CFG           0x4068u
#define RKNPU_DPU_BN_RELUX_CMP_VALUE   0x406cu
#define RKNPU_DPU_EW_CFG               0x4070u
#define RKNPU_DPU_EW_CVT_OFFSET_VALUE  0x4074u
#define RKNPU_DPU_EW_CVT_SCALE_VALUE   0x4078u
#define RKNPU_DPU_EW_RELUX_CMP_VALUE   0x407cu
#define RKNPU_DPU_OUT_CVT_OFFSET       0x4080u
#define RKNPU_DPU_OUT_CVT_SCALE        0x4084u /* [15:0] scale, bit16 FP32TOFP16_EN */
#define RKNPU_DPU_OUT_CVT_SHIFT        0x4088u
#define RKNPU_DPU_EW_OP_VALUE_0        0x4090u /* ..EW_OP_VALUE_7 at 0x40ac */
#define RKNPU_DPU_SURFACE_ADD          0x40c0u /* [31:4] SURF_ADD */
#define RKNPU_DPU_40C4                 0x40c4u /* undocumented; mtx512 and Mesa write 0 */
#define RKNPU_DPU_LUT_ACCESS_CFG       0x4100u /* LUT registers up to LUT_LO_SLOPE_SHIFT 0x412c */

#define RKNPU_DPU_FMC_OUTPUT_MODE_SHIFT 1u
#define RKNPU_DPU_FMC_OUTPUT_MODE_MASK  0x3u
#define RKNPU_DPU_OUTPUT_MODE_MEMORY    2u /* what matmul streams use */
#define RKNPU_DPU_OUT_PREC_SHIFT        29u
#define RKNPU_DPU_IN_PREC_SHIFT         26u
#define RKNPU_DPU_DATA_CUBE_FIELD_MASK  0x1fffu

/* BS/BN CFG bits (NVDLA SDP X1/X2 layout). */
#define RKNPU_DPU_BS_BYPASS         (1u << 0)
#define RKNPU_DPU_BS_ALU_BYPASS     (1u << 1)
#define RKNPU_DPU_BS_MUL_BYPASS     (1u << 4)
#define RKNPU_DPU_BS_RELU_BYPASS    (1u << 6)
#define RKNPU_DPU_BS_ALU_SRC_MEM    (1u << 8) /* operand per channel from DPU_RDMA BS_BASE_ADDR */
#define RKNPU_DPU_BS_ALU_ALGO_SHIFT 16u
#define RKNPU_DPU_BS_ALU_ALGO_MASK  0xfu
#define RKNPU_DPU_ALU_ALGO_ADD      2u /* NVDLA: 0 max, 1 min, 2 sum */
#define RKNPU_DPU_BN_BYPASS         (1u << 0)
#define RKNPU_DPU_EW_BYPASS         (1u << 0)
/* EW_CFG (mtx512 gen_matmul_task): relu_bypass << 9 | op_cvt_bypass << 8 | lut_bypass << 7 |
 * op_bypass << 1 | bypass: every element-wise stage bypassed, 0x383 (Mesa the same). */
#define RKNPU_DPU_EW_CFG_ALL_BYPASS (1u << 9 | 1u << 8 | 1u << 7 | 1u << 1 | RKNPU_DPU_EW_BYPASS)
#define RKNPU_DPU_BS_OW_OD_BYPASS   (1u << 1)
/* BS_OW_CFG with SIZE_E_0..2 = e and OD_BYPASS (mtx512 gen_matmul_task ops[67]). */
static inline uint32_t rknpu_bs_ow_cfg(uint32_t size_e)
{
    return (size_e & 7u) << 8 | (size_e & 7u) << 5 | (size_e & 7u) << 2 | RKNPU_DPU_BS_OW_OD_BYPASS;
}

/* ---- DPU_RDMA (operand fetch for the DPU stages) ---- */
#define RKNPU_DPU_RDMA_S_POINTER    0x5004u
#define RKNPU_DPU_RDMA_BRDMA_CFG    0x501cu /* [4:1] BRDMA_DATA_USE */
#define RKNPU_DPU_RDMA_BS_BASE_ADDR 0x5020u /* IOVA of the per-channel bias */

/*
 * ---- matmul as a 1x1 direct convolution: what the model executes ----
 * C[M][N] = A[M][K] x B[K][N] (+ bias[N]) (ReLU), configured as:
 *   CNA CONV_CON1: CONV_MODE 0, IN = PROC precision = int8 or fp16;
 *   CNA DATA_SIZE0: WIDTH 1, HEIGHT M; DATA_SIZE1: CHANNEL K, CHANNEL_REAL K - 1;
 *   CNA WEIGHT_SIZE2: W = H = 1, KERNELS N; WEIGHT_SIZE1 = K * esize;
 *   WEIGHT_SIZE0 = N * K * esize;
 *   CNA FEATURE_DATA_ADDR = A, DCOMP_ADDR0 = B;
 *   CORE MISC_CFG precision = CNA's; DATAOUT_SIZE_0 = (M - 1) << 16 | 0;
 *   DATAOUT_SIZE_1 = N - 1;
 *   DPU FEATURE_MODE_CFG OUTPUT_MODE 2; DATA_FORMAT IN = PROC = CNA's,
 *   OUT = int32 (int8 in) or fp32 (fp16 in); DST_BASE_ADDR = C;
 *   DATA_CUBE_WIDTH 0, HEIGHT M - 1, CHANNEL (N - 1) in both fields;
 *   BS_CFG: BS_BYPASS set = no bias, no ReLU. Otherwise
 *     bias: BS_ALU_BYPASS clear, BS_ALU_SRC_MEM, ALGO ADD, bias at
 *           DPU_RDMA BS_BASE_ADDR (DPU_RDMA enabled in the op-enable mask);
 *     ReLU: BS_RELU_BYPASS clear;
 *     BS_MUL_BYPASS must be set (scaling is not modelled); BN_CFG and EW_CFG
 *     must have their BYPASS bits set.
 *   op-enable mask: CNA | CORE | DPU, plus DPU_RDMA when bias comes from memory.
 * The model reads, and checks against each other, every register the
 * silicon-run example mtx512/rk3588-npu (gen_matmul_task) writes; a task
 * whose own list leaves one unwritten is a config error [model choice].
 * Besides the sizes above (each must agree with the others):
 *   CNA CBUF_CON0: data banks hold M*K*esize, weight banks one kernel, <= 12;
 *   CNA CBUF_CON1 DATA_ENTRIES = ceil(K * esize / 64) (mtx512);
 *   CNA CVT_CON0: CVT_BYPASS and CVT_TYPE set; DATA_SIGN clear reads int8 A
 *     as unsigned (wrong products, not an error); fp16 needs DATA_SIGN;
 *   CNA CONV_CON3 strides 1, PAD_CON0 0, FC_CON0 skip 0, DCOMP_CTRL 0,
 *     DATA_SIZE2 1, DATA_SIZE3 M, FC_DATA_SIZE0 1 << 16 | M, FC_DATA_SIZE1 K;
 *   CORE CLIP_TRUNCATE 0 (truncation not modelled);
 *   DPU FEATURE_MODE_CFG conv mode 0, not flying; WDMA_SIZE_0/1 the cube;
 *   DPU BS_OW_CFG exactly rknpu_bs_ow_cfg(7) int8 / (3) fp16, OUT_CVT
 *     offset 0 scale 1 shift 0, SURFACE_ADD M*8 int8 / M*4 fp16 in [31:4]
 *     (mtx512's values; their meaning is not public: anything else refused);
 *   DPU_RDMA BRDMA_CFG DATA_USE 1 with a bias.
 * Limits [model choice]: 1 <= M <= 2047 (HEIGHT is 11 bits), K a multiple of
 * 32 up to RKNPU_MM_MAX_K, N a multiple of 32 (int8) / 16 (fp16) up to
 * RKNPU_MM_MAX_N (RKNN-MM's RK3588 alignment). Anything else is a config
 * error (RKNPU_TP_CONFIG_ERRORS), never a silent zero.
 *
 * CNA feature-map strides [inferred; model choice]: mtx512 gen_matmul_* and
 * Mesa rkt_task.c fill_task write LINE_STRIDE = width * 4 and SURF_STRIDE =
 * LINE_STRIDE * (height / 4 - 1): for width 1, 4 and M - 4. Read in 16-byte
 * atoms (one line of a width-1 map: c2 channels), that is a step of four
 * lines per LINE_STRIDE and a surface of (LINE_STRIDE + SURF_STRIDE) = M
 * atoms, i.e. the dense [K/c2][M][c2] layout below. The model reads A[m][k] at
 *   A + (k/c2) * (DMA_CON1 + DMA_CON2) * 16 + (m/4) * DMA_CON1 * 16
 *     + (m%4) * 16 + (k%c2) * esize
 * and writes C's surface s at C + s * DST_SURF_STRIDE (the register's value:
 * M << 4 = M * 16 bytes), so other strides read or write elsewhere.
 *
 * Native layouts (vendor RKNN-MM "native" = the NC1HWC2 / tiled forms the
 * CNA and DPU DMA; element indices, esize = 1 int8, 2 fp16, 4 int32/fp32;
 * A and C as the strides above place them):
 *   A int8 [K/16][M][16]:  A[m][k] at A + ((k/16)*M + m)*16 + k%16
 *   A fp16 [K/8][M][8]:    A[m][k] at A + 2*(((k/8)*M + m)*8 + k%8)
 *   B int8 [N/32][K/32][32][32]:
 *                          B[k][n] at B + ((n/32)*(K/32) + k/32)*1024 + (n%32)*32 + k%32
 *   B fp16 [N/16][K/32][16][32]:
 *                          B[k][n] at B + 2*(((n/16)*(K/32) + k/32)*512 + (n%16)*32 + k%32)
 *   C int32/fp32 [N/4][M][4]: C[m][n] at C + 4*(((n/4)*M + m)*4 + n%4)
 *   bias [model choice]: N contiguous little-endian int32 (int8 path) or
 *                          fp32 (fp16 path) at DPU_RDMA BS_BASE_ADDR.
 * Arithmetic: int8 x int8 summed in int32 (wrapping two's complement),
 * + bias, then ReLU: bit-exact. fp16 x fp16 products summed in fp32 in k order
 * (+ bias, ReLU); compare with a tolerance.
 */
#define RKNPU_MM_MAX_M        2047u
#define RKNPU_MM_MAX_K        8192u
#define RKNPU_MM_MAX_N        8192u
#define RKNPU_MM_K_ALIGN      32u
#define RKNPU_MM_N_ALIGN_INT8 32u
#define RKNPU_MM_N_ALIGN_FP16 16u
#define RKNPU_MM_ENABLE       (RKNPU_ENABLE_CNA | RKNPU_ENABLE_CORE | RKNPU_ENABLE_DPU)
#define RKNPU_MM_ENABLE_BIAS  (RKNPU_MM_ENABLE | RKNPU_ENABLE_DPU_RDMA)

static inline uint64_t rknpu_a_index(uint32_t m, uint32_t k, uint32_t M, uint32_t c2)
{
    return ((uint64_t)(k / c2) * M + m) * c2 + k % c2;
}
static inline uint64_t rknpu_a_index_int8(uint32_t m, uint32_t k, uint32_t M)
{
    return rknpu_a_index(m, k, M, 16u);
}
static inline uint64_t rknpu_a_index_fp16(uint32_t m, uint32_t k, uint32_t M)
{
    return rknpu_a_index(m, k, M, 8u);
}
static inline uint64_t rknpu_b_index_int8(uint32_t k, uint32_t n, uint32_t K)
{
    return ((uint64_t)(n / 32u) * (K / 32u) + k / 32u) * 1024u + (n % 32u) * 32u + k % 32u;
}
static inline uint64_t rknpu_b_index_fp16(uint32_t k, uint32_t n, uint32_t K)
{
    return ((uint64_t)(n / 16u) * (K / 32u) + k / 32u) * 512u + (n % 16u) * 32u + k % 32u;
}
static inline uint64_t rknpu_c_index(uint32_t m, uint32_t n, uint32_t M)
{
    return ((uint64_t)(n / 4u) * M + m) * 4u + n % 4u;
}

/*
 * ---- how the model completes a run [model choice where the hw doc is open] ----
 * OPERATION_ENABLE 0->1 with BASE_ADDRESS != 0 and PC_SEL clear starts a run of
 * TASK_CON.TASK_NUMBER tasks (0 is a config error); TASK_COUNT_CLEAR zeroes
 * TASK_STATUS first. Task i fetches regcmd_fetch_words(amount) words from its
 * address (task 0: BASE_ADDRESS/REGISTER_AMOUNTS; task i+1: the values task
 * i's trailer wrote to PC BASE_ADDRESS/REGISTER_AMOUNTS), applies the writes,
 * executes at the op-enable word, then TASK_STATUS += 1. The trailer's
 * writes land in the PC's own BASE_ADDRESS / REGISTER_AMOUNTS, so after a run
 * REGISTER_AMOUNTS holds the last trailer's 0 and BASE_ADDRESS the last link
 * written: a driver programs both before every run, as both drivers do. A
 * chain shorter than TASK_NUMBER refetches from that stale address with
 * amount 0 (two words, no op-enable): a config error. After the last task
 * RAW_STATUS gets DPU_g (g = 0, or the run's last ping-pong group, which
 * alternates per task from 0 when TASK_PP_EN) and the core's MSI-X vector
 * fires if RAW & MASK != 0. A DMA the client has not mapped (or not mapped
 * writable) ends the run: DMA_READ_ERROR / DMA_WRITE_ERROR in RAW_STATUS,
 * no DPU bit, vector when unmasked -- so a driver wants
 * MASK = RKNPU_INT_DPU_DONE | RKNPU_INT_DMA_ERROR to learn of it.
 * A config error ends the run with no status bit at all (the core looks
 * stalled; the test port counts it).
 */

/* ---- the model's test port, BAR2 (not on hardware), 32-bit registers ---- */
#define RKNPU_TP_ID 0x000u /* RO: RKNPU_TP_ID_VALUE */
#define RKNPU_TP_TASK_DELAY_US                                                                     \
    0x004u /* RW: the model sleeps this long per task (timeout tests)                              \
            */
/* RW: nonzero makes every core's GLOBAL_SOFT_RESET absent (reads 0, ignores writes), as on
 * the SoC: the register-level reset is the stand-in's, not the hardware's. */
#define RKNPU_TP_SOFT_RESET_ABSENT 0x008u
/* RW: what every core's PC_VERSION_NUM reads (RKNPU_VERSION_NUM_VALUE after start; RK3576
 * parts report a nonzero one, which rocket_core_init adds to PC_VERSION). */
#define RKNPU_TP_VERSION_NUM 0x00cu
#define RKNPU_TP_CORE(core)  (0x100u + (uint32_t)(core)*0x40u)
/* Offsets inside RKNPU_TP_CORE(core). */
#define RKNPU_TP_FAULT          0x00u /* RW: enum rknpu_fault, armed for the next run / reset */
#define RKNPU_TP_TASKS_EXECUTED 0x04u /* RO: tasks completed since the model started */
#define RKNPU_TP_DMA_FAULTS     0x08u /* RO: DMA read/write errors */
#define RKNPU_TP_RESETS         0x0cu /* RO: soft resets completed (lines released) */
#define RKNPU_TP_CONFIG_ERRORS  0x10u /* RO: runs ended by a bad regcmd or unsupported config */
#define RKNPU_TP_FAULT_IOVA     0x14u /* RO: IOVA (low 32 bits) of the last DMA error */
#define RKNPU_TP_BAD_WORD_LO    0x18u /* RO: the last regcmd word that was a config error */
#define RKNPU_TP_BAD_WORD_HI    0x1cu
#define RKNPU_TP_STATE          0x20u /* RO: enum rknpu_core_state */
#define RKNPU_TP_RUNS           0x24u /* RO: runs started by OPERATION_ENABLE */
#define RKNPU_TP_RESET_FAILURES 0x28u /* RO: resets that left the core in reset */

#define RKNPU_TP_ID_VALUE 0x4e52e588u

enum rknpu_fault {
    RKNPU_FAULT_NONE = 0,
    RKNPU_FAULT_STALL = 1, /* the next run never completes: no status, no vector, until reset */
    /* the next run computes, then fires the vector with PPU_0 instead of DPU_g in RAW_STATUS
     * (INTERRUPT_STATUS shows it only where PPU_0 is unmasked): a done the driver must not
     * take for one */
    RKNPU_FAULT_WRONG_STATUS = 2,
    RKNPU_FAULT_DMA_ERROR = 3,        /* the next run's first output write fails: DMA_WRITE_ERROR */
    RKNPU_FAULT_RESET_FAILS_ONCE = 4, /* the next reset leaves the core in reset once */
};

enum rknpu_core_state {
    RKNPU_CORE_IDLE = 0,
    RKNPU_CORE_RUNNING = 1,
    RKNPU_CORE_STALLED = 2, /* a stall fault or a config error: only a reset helps */
    RKNPU_CORE_IN_RESET = 3,
};

#endif

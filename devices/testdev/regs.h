/* SPDX-License-Identifier: MIT */
/*
 * The generic test device: a small DMA engine with a descriptor ring, a
 * doorbell in a mapped page, a status block written back by DMA, and MSI-X.
 * It has no hardware: its model (devices/testdev/model.c) is the device, and
 * the ring engine's tests and the ring bench drive it over vfio-user.
 *
 * BAR0, 16 KiB:
 *   page 0 (0x0000) control registers, trapped: every access is a
 *          REGION_READ/WRITE message, so a 64-bit access must arrive as one.
 *   page 1 (0x1000) the doorbell page, offered as a sparse mmap area: the
 *          driver's doorbell write is a plain store, the model polls it.
 *   page 2 (0x2000) MSI-X table, trapped.
 *   page 3 (0x3000) MSI-X PBA, trapped.
 *
 * Queue pairs (model choice, no public source: a test device shaped as
 * NVMe-style multi-queue engines are): TESTDEV_REG_QUEUES says how many
 * rings the engine serves (4). Queue q has a register window of its own at
 * TESTDEV_QUEUE_WINDOW * q in page 0, with the per-queue registers below at
 * the same offsets as queue 0's, and a doorbell of its own at
 * TESTDEV_DOORBELL(q), TESTDEV_DOORBELL_STRIDE bytes apart, so no two
 * queues' doorbells share a cache line (or a register). Queue 0's window is
 * today's registers, unchanged; the device-wide registers (ID, DESC_SIZE,
 * SCRATCH64, LAST_WIDTH, QUEUES) exist only there and read 0 in the other
 * windows. Each queue has its own ring, status block, CTRL (its RESET resets
 * that queue only), STATUS, fault state, injected faults and MSI-X vector q.
 * The engine gives every enabled queue one turn per pass (what its doorbell
 * announced at that moment), round robin. A function-level reset of the
 * device (VFIO DEVICE_RESET) resets every queue.
 */
#ifndef NPV_TESTDEV_REGS_H
#define NPV_TESTDEV_REGS_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

/*
 * What users of the device need (PCI ids, the descriptor, opcodes, error
 * words, fault kinds) is public, in <npuvfio/testdev.h>; this file adds the
 * registers and the status block, which only the driver and the model touch.
 */
#include <npuvfio/testdev.h>

#define TESTDEV_BAR0_SIZE    0x4000u
#define TESTDEV_QUEUES       4u             /* model choice: queue pairs (TESTDEV_REG_QUEUES) */
#define TESTDEV_MSIX_VECTORS TESTDEV_QUEUES /* vector q: queue q's completions */

/* Page 0: control registers. Per queue (in queue q's window): CTRL, STATUS, RING_BASE,
 * RING_ENTRIES, STATUS_BASE, FAULT_INJECT, FAULT_IOVA, IRQ_WANTED. Device-wide (window 0):
 * the others. */
#define TESTDEV_REG_ID           0x000u /* RO: TESTDEV_ID_VALUE */
#define TESTDEV_REG_CTRL         0x004u /* RW: TESTDEV_CTRL_* */
#define TESTDEV_REG_STATUS       0x008u /* RO: TESTDEV_STATUS_* */
#define TESTDEV_REG_DESC_SIZE    0x00cu /* RO: sizeof(struct npv_testdev_desc) */
#define TESTDEV_REG_RING_BASE    0x010u /* RW 64: IOVA of the descriptor ring */
#define TESTDEV_REG_RING_ENTRIES 0x018u /* RW: power of two, 2..65536 */
#define TESTDEV_REG_STATUS_BASE  0x020u /* RW 64: IOVA of struct testdev_status */
#define TESTDEV_REG_FAULT_INJECT                                                                   \
    0x030u /* WO: enum npv_testdev_fault, armed for the next descriptor */
#define TESTDEV_REG_FAULT_IOVA 0x038u /* RO 64: IOVA of the last refused DMA */
#define TESTDEV_REG_SCRATCH64  0x040u /* RW 64: plain storage */
#define TESTDEV_REG_LAST_WIDTH 0x048u /* RO: width in bytes of the last SCRATCH64 access */
/*
 * RW 64: IOVA of a u32 the device reads before each completion interrupt; it
 * raises none while the word is 0 (event suppression, as virtio's). 0: the
 * device always interrupts. Takes effect at once; cleared by CTRL.RESET.
 */
#define TESTDEV_REG_IRQ_WANTED 0x050u
/* RO: how many queue pairs the device has (TESTDEV_QUEUES); 0 on a single-ring device. */
#define TESTDEV_REG_QUEUES 0x058u

/* Queue q's register window: queue 0's is page 0's start (the registers above). */
#define TESTDEV_QUEUE_WINDOW 0x100u
#define TESTDEV_QREG(q, reg) ((uint64_t)(q)*TESTDEV_QUEUE_WINDOW + (reg))

#define TESTDEV_ID_VALUE 0x4e500001u

#define TESTDEV_CTRL_ENABLE (1u << 0) /* start fetching descriptors */
#define TESTDEV_CTRL_RESET  (1u << 1) /* self-clearing: stop, forget this queue's ring state */
#define TESTDEV_CTRL_IRQ_ENABLE                                                                    \
    (1u << 2) /* raise MSI-X vector q on queue q's descriptors with IRQ */

#define TESTDEV_STATUS_RUNNING (1u << 0)
#define TESTDEV_STATUS_FAULT                                                                       \
    (1u << 1) /* stopped: a failed descriptor (a refused DMA: see                                  \
                  FAULT_IOVA), a bad ring size, a failed reset */

/* Page 1: the doorbells. The driver writes its queue's free-running producer index. */
#define TESTDEV_DOORBELL_PAGE   0x1000u
#define TESTDEV_REG_DOORBELL    0x1000u /* queue 0's */
#define TESTDEV_DOORBELL_STRIDE 0x100u  /* above any cache line or granule */
#define TESTDEV_DOORBELL(q)     (TESTDEV_REG_DOORBELL + (uint64_t)(q)*TESTDEV_DOORBELL_STRIDE)
static_assert(TESTDEV_QUEUES * TESTDEV_DOORBELL_STRIDE <= 0x1000u, "doorbells fit their page");
static_assert(TESTDEV_QUEUES * TESTDEV_QUEUE_WINDOW <= 0x1000u, "windows fit page 0");

#define TESTDEV_MSIX_TABLE_OFFSET 0x2000u
#define TESTDEV_MSIX_PBA_OFFSET   0x3000u

/*
 * The status block, written by the device with a release store of
 * completed_head last. completed_head is free-running: the number of
 * descriptors completed since enable, modulo 2^32.
 */
struct testdev_status {
    uint32_t completed_head;
    uint32_t error;       /* enum npv_testdev_error of the descriptor error_index names */
    uint32_t error_index; /* free-running index of the failed descriptor */
    uint32_t reserved;
    uint64_t fault_iova;
    uint8_t pad[40];
};
static_assert(sizeof(struct testdev_status) == 64, "status block is one cache line");
static_assert(offsetof(struct testdev_status, fault_iova) == 16, "status layout is device ABI");

#endif

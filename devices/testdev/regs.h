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
#define TESTDEV_MSIX_VECTORS 2u

/* Page 0: control registers. */
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

#define TESTDEV_ID_VALUE 0x4e500001u

#define TESTDEV_CTRL_ENABLE     (1u << 0) /* start fetching descriptors */
#define TESTDEV_CTRL_RESET      (1u << 1) /* self-clearing: stop, forget ring state */
#define TESTDEV_CTRL_IRQ_ENABLE (1u << 2) /* raise MSI-X vector 0 on descriptors with IRQ */

#define TESTDEV_STATUS_RUNNING (1u << 0)
#define TESTDEV_STATUS_FAULT                                                                       \
    (1u << 1) /* stopped: a failed descriptor (a refused DMA: see                                  \
                  FAULT_IOVA), a bad ring size, a failed reset */

/* Page 1: the doorbell. The driver writes the free-running producer index. */
#define TESTDEV_DOORBELL_PAGE 0x1000u
#define TESTDEV_REG_DOORBELL  0x1000u

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

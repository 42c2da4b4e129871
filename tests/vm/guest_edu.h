/* SPDX-License-Identifier: MIT */
/*
 * QEMU's edu device (docs/specs/edu.rst in QEMU), as the guest tests drive it,
 * and the guest-side helpers they share: the DMA engine, the guest kernel log
 * (where the IOMMU reports blocked DMA), and counts of our fds and mappings.
 */
#ifndef NPV_GUEST_EDU_H
#define NPV_GUEST_EDU_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <npuvfio/bar.h>
#include <npuvfio/dma.h>
#include <npuvfio/domain.h>

#define EDU_VENDOR 0x1234
#define EDU_DEVICE 0x11e8

#define EDU_ID         0x00 /* 0xRRrr00ed: low byte 0xed */
#define EDU_LIVENESS   0x04 /* reads back the inverse of what was written */
#define EDU_IRQ_STATUS 0x24
#define EDU_IRQ_RAISE  0x60 /* written value is ORed into IRQ_STATUS, raises the IRQ */
#define EDU_IRQ_ACK    0x64 /* written bits are cleared from IRQ_STATUS */
#define EDU_DMA_SRC    0x80
#define EDU_DMA_DST    0x88
#define EDU_DMA_COUNT  0x90
#define EDU_DMA_CMD    0x98

#define EDU_DMA_CMD_START  0x1
#define EDU_DMA_CMD_TO_RAM 0x2 /* direction: edu buffer -> RAM */

/*
 * The engine moves data between RAM and a 4 KiB buffer inside edu at device
 * address 0x40000; a transfer outside that buffer stops QEMU, so every
 * transfer is checked against it first.
 */
#define EDU_BUF      0x40000u
#define EDU_BUF_SIZE 4096u

/*
 * edu masks every DMA address to 28 bits (QEMU's dma_mask default), so an
 * IOVA at or above 256 MiB would silently hit a different address.
 */
#define EDU_DMA_LAST 0x0fffffffull

/* Move len bytes: RAM (iova) -> edu buffer + buf_off, or back when to_ram. */
int edu_dma(const struct npv_bar *bar, npv_iova_t iova, uint32_t buf_off, uint32_t len,
            bool to_ram);

/*
 * Fill len bytes of src at soff with a pattern made from seed, let edu copy
 * them RAM -> its buffer -> RAM(dst at doff), both addressed through dom,
 * and compare. 0 when the data arrived; -ENOENT when a buffer is not mapped
 * in dom, -EIO when the data differs, else edu_dma's error.
 */
int edu_round_trip(const struct npv_bar *bar, struct npv_domain *dom, struct npv_dma *src,
                   size_t soff, struct npv_dma *dst, size_t doff, uint32_t len, uint8_t seed);

/* How many lines of the guest kernel log mention "fault addr 0x<iova>". */
int klog_fault_count(npv_iova_t iova);
/* Wait (bounded) until that count exceeds before; returns the new count. */
int klog_wait_fault(npv_iova_t iova, int before);

/* Entries of /proc/self/fd and lines of /proc/self/maps; -1 when unreadable. */
int count_fds(void);
int count_maps(void);

uint64_t now_ns(void);

#endif

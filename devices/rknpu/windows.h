/* SPDX-License-Identifier: MIT */
/*
 * Which pages of a core's 64 KiB window the driver may touch, and how it
 * reaches them. In the vendor device tree (rk3588s.dtsi of Rockchip's
 * kernel) each NPU core's "reg" window is 64 KiB and contains that core's
 * own IOMMU ("rknpu_mmu") at +0x9000 (and the second instance at +0xa000 for
 * core 0): a process that mapped the whole window could reprogram its IOMMU
 * and reach any memory. Mainline splits them (rocket's node, the IOMMU's own
 * node), but a board on the vendor tree hands vfio-platform the whole window.
 * So on a platform device the driver maps nothing: every register access is
 * a trapped read/write of the region (vfio-platform supports 4-byte
 * pread/pwrite on MMIO regions), and an access to the IOMMU pages is refused
 * before it reaches the kernel. On the PCI-shaped model there is no IOMMU in
 * the window and BAR0 is mapped as usual.
 */
#ifndef NPV_RKNPU_WINDOWS_H
#define NPV_RKNPU_WINDOWS_H

#include <stdbool.h>
#include <stdint.h>

/* The IOMMU's pages inside a core window of the vendor tree: [0x9000, 0xb000). */
#define RKNPU_IOMMU_PAGES_START 0x9000u
#define RKNPU_IOMMU_PAGES_END   0xb000u

enum rknpu_window_access {
    RKNPU_WINDOW_MAPPED,  /* npv_bar_map of the region (the model's BAR0) */
    RKNPU_WINDOW_TRAPPED, /* nothing mapped: npv_dev_region_read/write of the NPU pages only */
};

/* How the driver reaches a core window of a platform device or of the PCI stand-in. */
static inline enum rknpu_window_access rknpu_window_access(bool platform)
{
    return platform ? RKNPU_WINDOW_TRAPPED : RKNPU_WINDOW_MAPPED;
}

/* May the driver access offset off (inside a core's window) of a platform region? */
static inline bool rknpu_window_reg_allowed(uint32_t off)
{
    uint32_t in_window = off % 0x10000u;
    return (in_window & 3u) == 0 &&
           (in_window < RKNPU_IOMMU_PAGES_START || in_window >= RKNPU_IOMMU_PAGES_END);
}

#endif

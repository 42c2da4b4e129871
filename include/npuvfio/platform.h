/* SPDX-License-Identifier: MIT */
/*
 * Platform devices as sysfs shows them (SYSFS/bus/platform/devices/NAME):
 * a device of a system-on-chip, named by the kernel after its device-tree
 * node ("fdab0000.npu" for the node npu@fdab0000), with MMIO resources and
 * interrupt lines instead of BARs and MSI-X. Binding moves it to
 * vfio-platform through driver_override and drivers_probe, as for PCI.
 *
 * Opened (npv_dev_open_platform in dev.h), a platform device has the same
 * npv_dev / npv_bar / npv_irq API as a PCI function, with these indexes:
 * - region i is the device's i-th MMIO resource, in the order of its
 *   device-tree `reg` entries (npv_bar_map(dev, i, ...)); a region whose
 *   start or size is not page-aligned cannot be mmapped and is reached
 *   through reads and writes;
 * - IRQ index i is its i-th interrupt (device-tree order), one vector each,
 *   npv_irq_enable(dev, NPV_IRQ_PLATFORM(i), 1, ...). There is no MSI. A
 *   level-triggered line is reported MASKABLE|AUTOMASKED: the kernel masks
 *   it when it fires and it stays masked until npv_irq_unmask();
 * - there is no config space, bus mastering or No Snoop (npv_dev_config_*
 *   return -ENOTSUP); reset exists only where the kernel has a vfio-platform
 *   reset module for the device's compatible string (NPV_DEV_FLAG_RESET),
 *   else npv_dev_reset() runs the device's reset hook.
 *
 * Thread-safety: the calls keep no state; concurrent binds of one device
 * race as they would from a shell.
 */
#ifndef NPUVFIO_PLATFORM_H
#define NPUVFIO_PLATFORM_H

#include <stdbool.h>
#include <npuvfio/common.h>
#include <npuvfio/ctx.h>
#include <npuvfio/pci.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Longest platform device name accepted, with its NUL. */
#define NPV_PLATFORM_NAME_LEN 128
/* Room for a node's compatible strings, joined by single spaces. */
#define NPV_PLATFORM_COMPAT_LEN 256

struct npv_platform_dev {
    char name[NPV_PLATFORM_NAME_LEN];
    /*
     * The compatible strings of its device-tree node (of_node/compatible),
     * most specific first, joined by one space; "" without a device-tree
     * node (an ACPI-enumerated device).
     */
    char compatible[NPV_PLATFORM_COMPAT_LEN];
    char driver[NPV_PCI_DRIVER_LEN]; /* "" when unbound */
    int iommu_group;                 /* -1 without an IOMMU group */
    bool vfio_bound;                 /* driver is vfio-platform */
};

/*
 * Whether name can only be a platform device name (a sysfs directory entry:
 * not empty, no '/', not "." or "..", shorter than NPV_PLATFORM_NAME_LEN).
 */
NPV_API bool npv_platform_name_valid(const char *name);

/* Read one device. -EINVAL malformed name, -ENODEV no such device. */
NPV_API int npv_platform_dev_read(struct npv_ctx *ctx, const char *name,
                                  struct npv_platform_dev *dev);

/*
 * Every platform device, sorted by name, in a malloc'd array (*out, free()
 * it) of *count entries. A machine without bus/platform (a fake tree made for
 * PCI only) has none: 0 and *count = 0.
 */
NPV_API int npv_platform_list(struct npv_ctx *ctx, struct npv_platform_dev **out, size_t *count);

/* One member of an IOMMU group, whatever its bus. */
struct npv_group_member {
    char name[NPV_PLATFORM_NAME_LEN];
    char driver[NPV_PCI_DRIVER_LEN]; /* "" when unbound */
};

/*
 * Whether VFIO would let user space use name's group: every other member is
 * unbound or on a driver VFIO tolerates (a vfio driver, pci-stub,
 * pcieport). Returns 1 viable, 0 not (the blockers written to blockers, up
 * to max, and counted in *nblockers), -ENOENT without an IOMMU group.
 */
NPV_API int npv_platform_group_viable(struct npv_ctx *ctx, const char *name,
                                      struct npv_group_member *blockers, size_t max,
                                      size_t *nblockers);

/*
 * Bind name to vfio-platform, and undo it, as npv_pci_bind_vfio_state and
 * npv_pci_unbind_vfio_state do for PCI (same state directory, one file per
 * device named by its name): write vfio-platform to driver_override, unbind
 * the current driver, write name to bus/platform/drivers_probe, and wait
 * (bounded) for the driver link. Refused with -NPV_ENOTVIABLE while another
 * group member is on a host driver, -ENOENT without an IOMMU group or
 * without the vfio-platform driver.
 *
 * vfio-platform takes a device only when the kernel has a reset module for
 * its compatible string, or when it was loaded with reset_required=0; the
 * RK3588 NPU has none, so the bind waits out its deadline and reports that.
 */
NPV_API int npv_platform_bind_vfio_state(struct npv_ctx *ctx, const char *name,
                                         const char *state_dir);
NPV_API int npv_platform_unbind_vfio_state(struct npv_ctx *ctx, const char *name,
                                           const char *state_dir);

/* An NPU we know by a device-tree compatible string. */
struct npv_platform_npu {
    const char *compatible; /* "rockchip,rk3588-rknpu" */
    const char *family;     /* the driver family: "rknpu" */
    const char *model;      /* for people: "Rockchip RK3588 NPU (vendor node, 3 cores)" */
};

/* The NPU dev is, by the first of its compatible strings we know; NULL for none. */
NPV_API const struct npv_platform_npu *npv_platform_known_npu(const struct npv_platform_dev *dev);

#ifdef __cplusplus
}
#endif

#endif

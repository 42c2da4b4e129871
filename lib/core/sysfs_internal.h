/* SPDX-License-Identifier: MIT */
/*
 * sysfs as every bus shows it: attributes (one value per file, one store per
 * write), a device's driver and IOMMU group links under bus/BUS/devices, and
 * the members of an IOMMU group. PCI and platform discovery build on these.
 */
#ifndef NPV_SYSFS_INTERNAL_H
#define NPV_SYSFS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctx_internal.h"

#define NPV_SYSFS_PATH_MAX 4096

/*
 * Read a sysfs attribute into buf (NUL-terminated, trailing newline removed).
 * Reads until EOF so a file that is not a real sysfs attribute still works.
 * Returns the length or a negative errno.
 */
int npv_sysfs_read_str(const char *path, char *buf, size_t len);
/* Read an unsigned number in any base strtoull accepts ("0x8086", "42"). */
int npv_sysfs_read_u64(const char *path, uint64_t *out);
/* Read a signed decimal ("-1" for numa_node). */
int npv_sysfs_read_long(const char *path, long *out);
/*
 * Write text to an attribute as one write(), the way the kernel expects a
 * sysfs store. The file must exist: sysfs never creates attributes.
 */
int npv_sysfs_write_str(const char *path, const char *text);
/* The last path component of a symlink's target ("vfio-pci" of ".../drivers/vfio-pci"). */
int npv_sysfs_link_name(const char *path, char *buf, size_t len);

/* Whether bus/BUS/devices/NAME is a directory (a device of that bus). */
bool npv_sysfs_dev_exists(struct npv_ctx *ctx, const char *bus, const char *name);
/* The driver of bus/BUS/devices/NAME ("" when unbound). */
int npv_sysfs_dev_driver(struct npv_ctx *ctx, const char *bus, const char *name, char *buf,
                         size_t len);
/* The IOMMU group number of bus/BUS/devices/NAME, -1 without one. */
int npv_sysfs_dev_group(struct npv_ctx *ctx, const char *bus, const char *name);

/* A member of an IOMMU group that keeps VFIO from using it. */
struct npv_group_blocker {
    char name[128];
    char driver[64];
};

/*
 * The members of IOMMU group `group` other than self that sit on a driver
 * VFIO does not tolerate (npv_pci_driver_vfio_tolerated), whatever their bus:
 * up to max written to out, all of them counted in *n. -errno when the
 * group's devices/ directory cannot be read.
 */
int npv_iommu_group_blockers(struct npv_ctx *ctx, int group, const char *self,
                             struct npv_group_blocker *out, size_t max, size_t *n);

/*
 * Whether VFIO tolerates a group member bound to driver (see
 * iommu_group.c for the kernel rule this follows), and whether a driver is
 * one of VFIO's own.
 */
bool npv_pci_driver_vfio_tolerated(const char *driver);
bool npv_pci_driver_is_vfio(const char *driver);

#endif

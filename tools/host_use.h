/* SPDX-License-Identifier: MIT */
/*
 * Whether the host is using a device that bind would take away from it: a
 * network interface that is up, a block device that is mounted, held (LVM,
 * RAID, dm-crypt) or swapped on, a DRM or accel node some process has open.
 * The device's sysfs directory is walked for child devices by their
 * subsystem link, so NVMe namespaces, SCSI disks behind an HBA and their
 * partitions are found wherever the kernel puts them.
 */
#ifndef NPV_HOST_USE_H
#define NPV_HOST_USE_H

#include <stdbool.h>
#include <stddef.h>

#include "cli.h"

#define HOST_USE_MAX    8
#define HOST_USE_REASON 256

struct host_use {
    char reasons[HOST_USE_MAX][HOST_USE_REASON]; /* "eth0 is up", ... */
    size_t n;                                    /* reasons found (those past MAX are counted) */
    size_t unreadable_procs; /* processes whose open files could not be read (not root) */
};

/*
 * Check bus's device name (under the sysfs root; /proc is cli->proc_root).
 * Returns 0 with the findings in *use, negative errno when the device's
 * directory cannot be read.
 */
int host_use_check(struct npv_cli *cli, const char *bus, const char *name, struct host_use *use);

/*
 * Why VFIO cannot take a device without an IOMMU group, root cause first:
 * no IOMMU registered at all (class/iommu empty) or one that does not
 * cover the device. Writes nothing and returns false when the device has a
 * group or VFIO's no-IOMMU mode is on (vfio makes the group at bind time).
 */
bool host_no_iommu_reason(struct npv_cli *cli, const char *bus, const char *name, char *buf,
                          size_t len);

#endif

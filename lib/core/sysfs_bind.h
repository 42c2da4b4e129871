/* SPDX-License-Identifier: MIT */
/*
 * Moving a device of a sysfs bus to its VFIO driver and back: driver_override,
 * the old driver's unbind, drivers_probe, and a state file remembering the
 * previous driver. The PCI bus (vfio-pci) and the platform bus
 * (vfio-platform) work alike; each brings its own viability check.
 */
#ifndef NPV_SYSFS_BIND_H
#define NPV_SYSFS_BIND_H

#include "sysfs_internal.h"

struct npv_bind_bus {
    const char *bus;         /* "pci": everything lives under SYSFS/bus/pci */
    const char *vfio_driver; /* "vfio-pci" */
    /* Said when the device has no IOMMU group: where an IOMMU is switched on for this bus. */
    const char *no_group_hint;
    /* Called when the VFIO driver did not take the device, to log what may be why; may be NULL. */
    void (*explain_refusal)(struct npv_ctx *ctx, const char *name);
};

/*
 * name must exist (the caller resolved it). state_dir NULL or "" means
 * $NPUVFIO_STATE_DIR, else /run/npuvfio. See npv_pci_bind_vfio_state.
 */
int npv_sysfs_bind_vfio(struct npv_ctx *ctx, const struct npv_bind_bus *bus, const char *name,
                        const char *state_dir);
int npv_sysfs_unbind_vfio(struct npv_ctx *ctx, const struct npv_bind_bus *bus, const char *name,
                          const char *state_dir);

#endif

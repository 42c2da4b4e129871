/* SPDX-License-Identifier: MIT */
/* Small sysfs helpers shared by the PCI discovery, binding and hugepage modules. */
#ifndef NPV_PCI_INTERNAL_H
#define NPV_PCI_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <npuvfio/pci.h>

#include "ctx_internal.h"
#include "sysfs_internal.h"

/* The function's driver name ("" when unbound) by canonical address. */
int npv_pci_read_driver(struct npv_ctx *ctx, const char *addr, char *buf, size_t len);
/* The function's IOMMU group number, -1 without one. */
int npv_pci_read_group(struct npv_ctx *ctx, const char *addr);
/* Parse and canonicalise, logging a malformed address. */
int npv_pci_canon(struct npv_ctx *ctx, const char *text, char *canon, size_t len);
/* Whether the function exists under bus/pci/devices. */
bool npv_pci_exists(struct npv_ctx *ctx, const char *canon);
/*
 * Canonicalise addr into canon (NPV_PCI_ADDR_LEN bytes) and check that the
 * function exists, logging why not: -EINVAL malformed, -ENODEV absent.
 */
int npv_pci_resolve(struct npv_ctx *ctx, const char *addr, char *canon);
/*
 * Read every PCI function named by an entry of the sysfs directory path
 * (bus/pci/devices, or a group's devices/), sorted by address, into a
 * malloc'd array. Other entries are skipped, as is a function that vanishes
 * while it is read.
 */
int npv_pci_read_dir(struct npv_ctx *ctx, const char *path, struct npv_pci_func **out,
                     size_t *count);

/*
 * NUMA locality lookup. With the real "/sys" root it asks hwloc (one topology
 * load per npv_pci_numa, on first use); under any other root it reads the
 * function's numa_node file, since hwloc only ever looks at the real machine.
 */
struct npv_pci_numa {
    void *topology; /* hwloc_topology_t, loaded lazily */
    bool tried;
};
int npv_pci_numa_node(struct npv_ctx *ctx, struct npv_pci_numa *numa, const struct npv_pci_addr *a,
                      const char *canon);
void npv_pci_numa_fini(struct npv_pci_numa *numa);

/* npv_pci_func_read with a shared NUMA lookup, for callers that read many functions. */
int npv_pci_func_read_numa(struct npv_ctx *ctx, const char *addr, struct npv_pci_func *func,
                           struct npv_pci_numa *numa);

#endif

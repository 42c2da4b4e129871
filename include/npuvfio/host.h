/* SPDX-License-Identifier: MIT */
/*
 * What this machine offers npuvfio: the VFIO interfaces the kernel exposes,
 * IOMMU groups, hugepage pools, the locked-memory limit and the CPU/NUMA
 * layout. Read once per call; nothing is cached.
 *
 * Thread-safety: keeps no state.
 */
#ifndef NPUVFIO_HOST_H
#define NPUVFIO_HOST_H

#include <stdbool.h>
#include <npuvfio/common.h>
#include <npuvfio/ctx.h>

#ifdef __cplusplus
extern "C" {
#endif

struct npv_host_pool {
    uint64_t page_size; /* bytes */
    bool present;       /* the kernel has a pool of this size */
    uint64_t nr, free;
};

struct npv_host_info {
    bool iommufd_built;   /* this library was built with iommufd support */
    bool vfio_container;  /* /dev/vfio/vfio exists (legacy backend usable) */
    bool iommufd_dev;     /* /dev/iommu exists (iommufd backend usable) */
    bool vfio_pci_loaded; /* SYSFS/bus/pci/drivers/vfio-pci exists */
    int iommu_groups;     /* entries in SYSFS/kernel/iommu_groups; 0 = no IOMMU in use */
    struct npv_host_pool hugepages[2]; /* 2 MiB and 1 GiB */
    uint64_t memlock_limit;  /* RLIMIT_MEMLOCK soft limit in bytes; UINT64_MAX = unlimited */
    bool cap_ipc_lock;       /* the process may lock memory past the limit */
    int cpus;                /* processing units (hwloc) */
    int numa_nodes;          /* NUMA nodes (hwloc); 1 on a machine without NUMA */
    char kernel_release[65]; /* uname -r */
};

/* Returns 0 or a negative errno (only when hwloc cannot load the topology). */
NPV_API int npv_host_probe(struct npv_ctx *ctx, struct npv_host_info *info);

#ifdef __cplusplus
}
#endif

#endif

/* SPDX-License-Identifier: MIT */
/* What the machine offers: VFIO device nodes, IOMMU groups, hugepages, memlock, CPUs. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <hwloc.h>
#include <sys/resource.h>
#include <sys/utsname.h>

#include <npuvfio/host.h>
#include <npuvfio/hugepages.h>

#include "ctx_internal.h"
#include "memlock.h"
#include "pci_internal.h"
#include "npv_config.h"

static int count_dir_entries(const char *path)
{
    DIR *d = opendir(path);
    if (d == NULL)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

static bool sysfs_exists(struct npv_ctx *ctx, const char *rel)
{
    char path[NPV_SYSFS_PATH_MAX];
    return npv_sysfs_path(ctx, path, sizeof(path), "%s", rel) == 0 && access(path, F_OK) == 0;
}

static void probe_pool(struct npv_ctx *ctx, uint64_t page_size, struct npv_host_pool *pool)
{
    struct npv_hugepages hp;
    pool->page_size = page_size;
    pool->present = npv_hugepages_read(ctx, page_size, -1, &hp) == 0;
    pool->nr = pool->present ? hp.nr : 0;
    pool->free = pool->present ? hp.free : 0;
}

static int probe_topology(struct npv_ctx *ctx, struct npv_host_info *info)
{
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) < 0)
        return -ENOMEM;
    if (hwloc_topology_load(topo) < 0) {
        int ret = errno ? -errno : -EIO;
        npv_err(ctx, "hwloc: cannot load the machine topology: %s", npv_strerror(ret));
        hwloc_topology_destroy(topo);
        return ret;
    }
    info->cpus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    int nodes = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    info->numa_nodes = nodes > 0 ? nodes : 1;
    hwloc_topology_destroy(topo);
    return 0;
}

int npv_host_probe(struct npv_ctx *ctx, struct npv_host_info *info)
{
    memset(info, 0, sizeof(*info));
    info->iommufd_built = NPV_HAVE_IOMMUFD;
    info->vfio_container = access("/dev/vfio/vfio", F_OK) == 0;
    info->iommufd_dev = access("/dev/iommu", F_OK) == 0;
    info->vfio_pci_loaded = sysfs_exists(ctx, "bus/pci/drivers/vfio-pci");

    char path[NPV_SYSFS_PATH_MAX];
    if (npv_sysfs_path(ctx, path, sizeof(path), "kernel/iommu_groups") == 0)
        info->iommu_groups = count_dir_entries(path);

    probe_pool(ctx, NPV_HUGEPAGE_2M, &info->hugepages[0]);
    probe_pool(ctx, NPV_HUGEPAGE_1G, &info->hugepages[1]);

    struct rlimit rl;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0)
        info->memlock_limit = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
    info->cap_ipc_lock = npv_process_has_cap_ipc_lock();

    struct utsname u;
    if (uname(&u) == 0)
        snprintf(info->kernel_release, sizeof(info->kernel_release), "%s", u.release);
    return probe_topology(ctx, info);
}

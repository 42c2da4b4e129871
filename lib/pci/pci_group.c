/* SPDX-License-Identifier: MIT */
/* IOMMU groups: their members, and whether VFIO would hand the group to user space. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pci_internal.h"

/* Canonicalise addr and find its group's devices/ directory in sysfs. */
static int group_dir(struct npv_ctx *ctx, const char *addr, char *canon, char *path, size_t len,
                     int *group)
{
    int ret = npv_pci_resolve(ctx, addr, canon);
    if (ret < 0)
        return ret;
    *group = npv_pci_read_group(ctx, canon);
    if (*group < 0) {
        npv_debug(ctx, "%s: no IOMMU group", canon);
        return -ENOENT;
    }
    return npv_sysfs_path(ctx, path, len, "kernel/iommu_groups/%d/devices", *group);
}

int npv_pci_group_members(struct npv_ctx *ctx, const char *addr, struct npv_pci_func **out,
                          size_t *count)
{
    if (ctx == NULL || addr == NULL || out == NULL || count == NULL)
        return -EINVAL;
    char canon[NPV_PCI_ADDR_LEN], path[NPV_SYSFS_PATH_MAX];
    int group;
    int ret = group_dir(ctx, addr, canon, path, sizeof(path), &group);
    if (ret < 0)
        return ret;
    /* Non-PCI members (platform devices) have no npv_pci_func; the viability check sees them. */
    return npv_pci_read_dir(ctx, path, out, count);
}

#define GROUP_SCAN_MAX 64

int npv_pci_group_viable(struct npv_ctx *ctx, const char *addr, struct npv_pci_func *blockers,
                         size_t max, size_t *nblockers)
{
    if (ctx == NULL || addr == NULL || (max > 0 && blockers == NULL))
        return -EINVAL;
    char canon[NPV_PCI_ADDR_LEN], path[NPV_SYSFS_PATH_MAX];
    int group;
    int ret = group_dir(ctx, addr, canon, path, sizeof(path), &group);
    if (ret < 0)
        return ret;
    struct npv_group_blocker found[GROUP_SCAN_MAX];
    size_t n = 0;
    ret = npv_iommu_group_blockers(ctx, group, canon, found, GROUP_SCAN_MAX, &n);
    if (ret < 0)
        return ret;
    struct npv_pci_numa numa = {0};
    for (size_t i = 0; i < n && i < max && i < GROUP_SCAN_MAX; i++) {
        struct npv_pci_func *b = &blockers[i];
        if (npv_pci_func_read_numa(ctx, found[i].name, b, &numa) == 0)
            continue;
        memset(b, 0, sizeof(*b));
        /* A non-PCI member's name may be longer than an address: keep its head. */
        snprintf(b->addr, sizeof(b->addr), "%.*s", (int)sizeof(b->addr) - 1, found[i].name);
        memcpy(b->driver, found[i].driver, sizeof(b->driver));
        b->iommu_group = group;
        b->numa_node = -1;
    }
    npv_pci_numa_fini(&numa);
    if (nblockers != NULL)
        *nblockers = n;
    return n == 0;
}

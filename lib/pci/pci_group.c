/* SPDX-License-Identifier: MIT */
/* IOMMU groups: their members, and whether VFIO would hand the group to user space. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pci_internal.h"

bool npv_pci_driver_is_vfio(const char *driver)
{
    /*
     * vfio-pci and its variant drivers (mlx5_vfio_pci, hisi_acc_vfio_pci,
     * pds_vfio_pci, ...) all register the function as a VFIO device.
     */
    return strcmp(driver, "vfio-pci") == 0 || strstr(driver, "vfio") != NULL;
}

/*
 * The kernel's rule, since Linux 5.19 ("vfio: Set DMA ownership for VFIO
 * devices", 70693f470848): user space may own a group only when every device
 * in it is driverless or bound to a driver with driver_managed_dma set. Those
 * are the VFIO drivers themselves, pci-stub ("PCI: pci_stub: Set
 * driver_managed_dma", 18c7a349d072) and the PCIe port driver pcieport
 * ("PCI: portdrv: Set driver_managed_dma", c7d469849747). Older kernels
 * tolerated any driver on a bridge; 5.19 dropped that on purpose, so a bridge
 * on another driver (shpchp, say) blocks the group here too.
 */
bool npv_pci_driver_vfio_tolerated(const char *driver)
{
    return driver[0] == '\0' || npv_pci_driver_is_vfio(driver) || strcmp(driver, "pci-stub") == 0 ||
           strcmp(driver, "pcieport") == 0;
}

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
    DIR *dir = opendir(path);
    if (dir == NULL)
        return -errno;
    struct npv_pci_numa numa = {0};
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(dir)) != NULL) {
        if (de->d_name[0] == '.' || strcmp(de->d_name, canon) == 0)
            continue;
        /* Read the driver through the group's own link so non-PCI members count too. */
        char link[NPV_SYSFS_PATH_MAX], driver[NPV_PCI_DRIVER_LEN];
        if (snprintf(link, sizeof(link), "%s/%s/driver", path, de->d_name) >= (int)sizeof(link))
            continue;
        ret = npv_sysfs_link_name(link, driver, sizeof(driver));
        if (ret == -ENOENT)
            driver[0] = '\0';
        else if (ret < 0)
            continue;
        if (npv_pci_driver_vfio_tolerated(driver))
            continue;
        if (n < max) {
            struct npv_pci_func *b = &blockers[n];
            if (npv_pci_func_read_numa(ctx, de->d_name, b, &numa) < 0) {
                memset(b, 0, sizeof(*b));
                /* A non-PCI member's name may be longer than an address: keep its head. */
                snprintf(b->addr, sizeof(b->addr), "%.*s", (int)sizeof(b->addr) - 1, de->d_name);
                memcpy(b->driver, driver, sizeof(b->driver));
                b->iommu_group = group;
                b->numa_node = -1;
            }
        }
        n++;
    }
    closedir(dir);
    npv_pci_numa_fini(&numa);
    if (nblockers != NULL)
        *nblockers = n;
    return n == 0;
}

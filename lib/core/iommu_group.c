/* SPDX-License-Identifier: MIT */
/* IOMMU groups: which members keep VFIO from handing a group to user space, on any bus. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sysfs_internal.h"

bool npv_pci_driver_is_vfio(const char *driver)
{
    /*
     * vfio-pci and its variant drivers (mlx5_vfio_pci, hisi_acc_vfio_pci,
     * pds_vfio_pci, ...), vfio-platform and vfio-amba all register the
     * device as a VFIO device.
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
 * on another driver (shpchp, say) blocks the group here too. The rule is the
 * same for a group's platform devices.
 */
bool npv_pci_driver_vfio_tolerated(const char *driver)
{
    return driver[0] == '\0' || npv_pci_driver_is_vfio(driver) || strcmp(driver, "pci-stub") == 0 ||
           strcmp(driver, "pcieport") == 0;
}

int npv_iommu_group_blockers(struct npv_ctx *ctx, int group, const char *self,
                             struct npv_group_blocker *out, size_t max, size_t *n)
{
    char path[NPV_SYSFS_PATH_MAX];
    int ret = npv_sysfs_path(ctx, path, sizeof(path), "kernel/iommu_groups/%d/devices", group);
    if (ret < 0)
        return ret;
    DIR *dir = opendir(path);
    if (dir == NULL)
        return -errno;
    size_t count = 0;
    struct dirent *de;
    while ((de = readdir(dir)) != NULL) {
        if (de->d_name[0] == '.' || strcmp(de->d_name, self) == 0)
            continue;
        /* The driver through the group's own link: members of every bus count. */
        char link[NPV_SYSFS_PATH_MAX + 300], driver[sizeof(out->driver)];
        if (snprintf(link, sizeof(link), "%s/%s/driver", path, de->d_name) >= (int)sizeof(link))
            continue;
        ret = npv_sysfs_link_name(link, driver, sizeof(driver));
        if (ret == -ENOENT)
            driver[0] = '\0';
        else if (ret < 0)
            continue;
        if (npv_pci_driver_vfio_tolerated(driver))
            continue;
        if (count < max) {
            /* A name longer than the slot keeps its head: it is for messages. */
            snprintf(out[count].name, sizeof(out[count].name), "%.*s",
                     (int)sizeof(out[count].name) - 1, de->d_name);
            memcpy(out[count].driver, driver, sizeof(driver));
        }
        count++;
    }
    closedir(dir);
    *n = count;
    return 0;
}

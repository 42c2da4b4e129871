/* SPDX-License-Identifier: MIT */
/*
 * Opening a PCI function through kernel VFIO: which of the two kernel
 * interfaces to use, and the checks both share.
 *
 * iommufd is preferred when the build, the kernel (/dev/iommu) and the device
 * (a vfio-dev cdev, CONFIG_VFIO_DEVICE_CDEV) all have it: it moves a device
 * between domains with one call and lets two functions of one IOMMU group be
 * open at once. The legacy type1v2 container works on every VFIO kernel.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <npuvfio/pci.h>
#include "ctx_internal.h"
#include "npv_config.h"
#include "vfio_device_internal.h"

#define NPV_MAX_BLOCKERS 8

int npv_vfio_check_viable(struct npv_ctx *ctx, const char *bdf)
{
    struct npv_pci_func blockers[NPV_MAX_BLOCKERS];
    size_t n = 0;

    int ret = npv_pci_group_viable(ctx, bdf, blockers, NPV_MAX_BLOCKERS, &n);
    if (ret < 0) {
        npv_debug(ctx, "%s: group viability unknown from sysfs (%s); the kernel decides", bdf,
                  npv_strerror(ret));
        return 0;
    }
    if (ret == 1)
        return 0;
    /* One line: callers such as the CLI report the last error line as the reason. */
    char list[NPV_MAX_BLOCKERS * (NPV_PCI_ADDR_LEN + NPV_PCI_DRIVER_LEN + 8)] = "";
    size_t off = 0;
    for (size_t i = 0; i < n && i < NPV_MAX_BLOCKERS && off < sizeof(list); i++) {
        int w = snprintf(list + off, sizeof(list) - off, "%s%s (driver %s)", i ? ", " : "",
                         blockers[i].addr, blockers[i].driver[0] ? blockers[i].driver : "?");
        if (w < 0)
            break;
        off += (size_t)w;
    }
    npv_err(ctx,
            "%s: its IOMMU group is not viable: %s%s on a host driver; bind %s to vfio-pci or "
            "unbind %s",
            bdf, list, n > NPV_MAX_BLOCKERS ? ", ..." : "", n == 1 ? "it" : "them",
            n == 1 ? "it" : "them");
    return -NPV_ENOTVIABLE;
}

static bool iommufd_usable(struct npv_ctx *ctx, const char *bdf)
{
    char cdev[64];
    return NPV_HAVE_IOMMUFD && access("/dev/iommu", F_OK) == 0 &&
           npv_vfio_cdev_name(ctx, bdf, cdev, sizeof(cdev)) == 0;
}

/* The function exists and sits on a VFIO driver (vfio-pci or a vendor variant of it). */
static int check_function(struct npv_ctx *ctx, const char *bdf)
{
    struct npv_pci_func func;
    int ret = npv_pci_func_read(ctx, bdf, &func);
    if (ret == -ENODEV || ret == -ENOENT) {
        npv_err(ctx, "%s: no such PCI function", bdf);
        return -ENODEV;
    }
    if (ret < 0) {
        npv_err(ctx, "%s: %s", bdf, npv_strerror(ret));
        return ret;
    }
    if (!func.vfio_bound && strstr(func.driver, "vfio") == NULL) {
        if (func.driver[0] == '\0')
            npv_err(ctx, "%s: not bound to any driver; bind it to vfio-pci first", bdf);
        else
            npv_err(ctx, "%s: bound to %s, not vfio-pci; bind it to vfio-pci first", bdf,
                    func.driver);
        return -ENODEV;
    }
    return 0;
}

int npv_dev_open_pci(struct npv_ctx *ctx, const char *bdf, struct npv_domain *dom,
                     const struct npv_dev_opts *opts, struct npv_dev **out)
{
    struct npv_pci_addr addr;
    char name[NPV_PCI_ADDR_LEN];
    struct npv_dev *dev = NULL;
    int ret;

    if (out != NULL)
        *out = NULL;
    if (ctx == NULL || bdf == NULL || dom == NULL || out == NULL)
        return -EINVAL;
    if (npv_pci_addr_parse(bdf, &addr) < 0) {
        npv_err(ctx, "\"%s\": not a PCI address (DDDD:BB:DD.F)", bdf);
        return -EINVAL;
    }
    npv_pci_addr_format(&addr, name, sizeof(name));
    ret = check_function(ctx, name);
    if (ret < 0)
        return ret;

    switch (npv_ctx_iommu_backend(ctx)) {
    case NPV_IOMMU_LEGACY:
        ret = npv_vfio_legacy_open(ctx, name, opts, &dev);
        break;
    case NPV_IOMMU_IOMMUFD:
        ret = npv_vfio_iommufd_open(ctx, name, opts, &dev);
        break;
    case NPV_IOMMU_AUTO:
    default:
        if (iommufd_usable(ctx, name)) {
            npv_debug(ctx, "%s: opening through iommufd", name);
            ret = npv_vfio_iommufd_open(ctx, name, opts, &dev);
        } else {
            npv_debug(ctx, "%s: opening through the legacy type1v2 container", name);
            ret = npv_vfio_legacy_open(ctx, name, opts, &dev);
        }
        break;
    }
    if (ret < 0)
        return ret;
    return npv_dev_finish_open_or_close(dev, dom, out);
}

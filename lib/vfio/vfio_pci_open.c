/* SPDX-License-Identifier: MIT */
/* Opening a PCI function bound to vfio-pci (or a vendor variant of it) through kernel VFIO. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <npuvfio/pci.h>
#include "ctx_internal.h"
#include "sysfs_internal.h"
#include "vfio_device_internal.h"

int npv_vfio_check_viable(struct npv_ctx *ctx, const char *bdf)
{
    struct npv_vfio_target t = {.bus = "pci", .vfio_driver = "vfio-pci"};
    snprintf(t.name, sizeof(t.name), "%s", bdf);
    t.iommu_group = npv_sysfs_dev_group(ctx, "pci", bdf);
    return npv_vfio_check_viable_target(ctx, &t);
}

int npv_vfio_cdev_name(struct npv_ctx *ctx, const char *bdf, char *buf, size_t len)
{
    return npv_vfio_cdev_name_on(ctx, "pci", bdf, buf, len);
}

/* The function exists and sits on a VFIO driver (vfio-pci or a vendor variant of it). */
static int read_function(struct npv_ctx *ctx, const char *bdf, struct npv_pci_func *func)
{
    int ret = npv_pci_func_read(ctx, bdf, func);
    if (ret == -ENODEV || ret == -ENOENT) {
        npv_err(ctx, "%s: no such PCI function", bdf);
        return -ENODEV;
    }
    if (ret < 0) {
        npv_err(ctx, "%s: %s", bdf, npv_strerror(ret));
        return ret;
    }
    if (!func->vfio_bound && strstr(func->driver, "vfio") == NULL) {
        if (func->driver[0] == '\0')
            npv_err(ctx, "%s: not bound to any driver; bind it to vfio-pci first", bdf);
        else
            npv_err(ctx, "%s: bound to %s, not vfio-pci; bind it to vfio-pci first", bdf,
                    func->driver);
        return -ENODEV;
    }
    return 0;
}

int npv_dev_open_pci(struct npv_ctx *ctx, const char *bdf, struct npv_domain *dom,
                     const struct npv_dev_opts *opts, struct npv_dev **out)
{
    struct npv_pci_addr addr;
    struct npv_pci_func func;
    char name[NPV_PCI_ADDR_LEN];

    if (out != NULL)
        *out = NULL;
    if (ctx == NULL || bdf == NULL || dom == NULL || out == NULL)
        return -EINVAL;
    if (npv_pci_addr_parse(bdf, &addr) < 0) {
        npv_err(ctx, "\"%s\": not a PCI address (DDDD:BB:DD.F)", bdf);
        return -EINVAL;
    }
    npv_pci_addr_format(&addr, name, sizeof(name));
    int ret = read_function(ctx, name, &func);
    if (ret < 0)
        return ret;
    struct npv_vfio_target t = {
        .bus = "pci",
        .vfio_driver = "vfio-pci",
        .iommu_group = func.iommu_group,
    };
    snprintf(t.name, sizeof(t.name), "%s", name);
    return npv_vfio_open_target(ctx, &t, dom, opts, out);
}

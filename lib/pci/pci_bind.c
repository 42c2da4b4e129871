/* SPDX-License-Identifier: MIT */
/* Moving a PCI function to vfio-pci and back (the mechanism is sysfs_bind.c's). */
#include <errno.h>
#include <stdio.h>

#include "pci_internal.h"
#include "sysfs_bind.h"

#define MAX_BLOCKERS 8

static int check_viable(struct npv_ctx *ctx, const char *canon)
{
    struct npv_pci_func blockers[MAX_BLOCKERS];
    size_t n = 0;
    int ret = npv_pci_group_viable(ctx, canon, blockers, MAX_BLOCKERS, &n);
    if (ret == -ENOENT) {
        npv_err(ctx,
                "%s: no IOMMU group, so vfio-pci cannot take it (is the IOMMU on: "
                "intel_iommu=on / amd_iommu=on?)",
                canon);
        return ret;
    }
    if (ret < 0) {
        npv_err(ctx, "%s: cannot check the IOMMU group: %s", canon, npv_strerror(ret));
        return ret;
    }
    if (ret == 1)
        return 0;
    char list[512] = "";
    size_t off = 0;
    for (size_t i = 0; i < n && i < MAX_BLOCKERS && off < sizeof(list); i++) {
        int w = snprintf(list + off, sizeof(list) - off, "%s%s (%s)", i ? ", " : "",
                         blockers[i].addr, blockers[i].driver);
        if (w < 0)
            break;
        off += (size_t)w;
    }
    npv_err(ctx,
            "%s: IOMMU group %d is not viable: %s%s still on a host driver; unbind %s or bind "
            "%s to vfio-pci too",
            canon, npv_pci_read_group(ctx, canon), list, n > MAX_BLOCKERS ? ", ..." : "",
            n == 1 ? "it" : "them", n == 1 ? "it" : "them");
    return -NPV_ENOTVIABLE;
}

static const struct npv_bind_bus pci_bus = {
    .bus = "pci",
    .vfio_driver = "vfio-pci",
    .check_viable = check_viable,
};

int npv_pci_bind_vfio_state(struct npv_ctx *ctx, const char *addr, const char *state_dir)
{
    if (ctx == NULL || addr == NULL)
        return -EINVAL;
    char canon[NPV_PCI_ADDR_LEN];
    int ret = npv_pci_resolve(ctx, addr, canon);
    if (ret < 0)
        return ret;
    return npv_sysfs_bind_vfio(ctx, &pci_bus, canon, state_dir);
}

int npv_pci_unbind_vfio_state(struct npv_ctx *ctx, const char *addr, const char *state_dir)
{
    if (ctx == NULL || addr == NULL)
        return -EINVAL;
    char canon[NPV_PCI_ADDR_LEN];
    int ret = npv_pci_resolve(ctx, addr, canon);
    if (ret < 0)
        return ret;
    return npv_sysfs_unbind_vfio(ctx, &pci_bus, canon, state_dir);
}

int npv_pci_bind_vfio(struct npv_ctx *ctx, const char *addr)
{
    return npv_pci_bind_vfio_state(ctx, addr, NULL);
}

int npv_pci_unbind_vfio(struct npv_ctx *ctx, const char *addr)
{
    return npv_pci_unbind_vfio_state(ctx, addr, NULL);
}

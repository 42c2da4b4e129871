/* SPDX-License-Identifier: MIT */
/* Moving a PCI function to vfio-pci and back (the mechanism is sysfs_bind.c's). */
#include <errno.h>

#include "pci_internal.h"
#include "sysfs_bind.h"

static const struct npv_bind_bus pci_bus = {
    .bus = "pci",
    .vfio_driver = "vfio-pci",
    .no_group_hint = "is the IOMMU on: intel_iommu=on / amd_iommu=on?",
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

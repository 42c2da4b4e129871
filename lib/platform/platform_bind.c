/* SPDX-License-Identifier: MIT */
/* Moving a platform device to vfio-platform and back (the mechanism is sysfs_bind.c's). */
#include <errno.h>
#include <string.h>

#include "platform_internal.h"
#include "sysfs_bind.h"

/*
 * vfio-platform's probe fails unless the kernel has a reset module for the
 * device's first compatible string (vfio-reset:COMPAT) or the module was
 * loaded with reset_required=0; no reset module exists for Rockchip's NPU.
 * The probe's own message goes to the kernel log only, so say it here.
 */
static void explain_refusal(struct npv_ctx *ctx, const char *name)
{
    char path[NPV_SYSFS_PATH_MAX], required[8] = "";
    if (npv_sysfs_path(ctx, path, sizeof(path), "module/vfio_platform/parameters/reset_required") <
            0 ||
        npv_sysfs_read_str(path, required, sizeof(required)) < 0 || strcmp(required, "N") == 0)
        return;
    struct npv_platform_dev dev;
    const char *compat = "";
    if (npv_platform_dev_read(ctx, name, &dev) == 0) {
        dev.compatible[strcspn(dev.compatible, " ")] = '\0';
        compat = dev.compatible;
    }
    npv_err(ctx,
            "%s: vfio-platform requires a reset module for \"%s\" (vfio-reset:%s) and the kernel "
            "has none: load vfio-platform with reset_required=0 (modprobe vfio-platform "
            "reset_required=0); the device then has no VFIO reset",
            name, compat, compat);
}

static const struct npv_bind_bus platform_bus = {
    .bus = "platform",
    .vfio_driver = "vfio-platform",
    .no_group_hint = "is its IOMMU enabled in the device tree, and the IOMMU's driver loaded?",
    .explain_refusal = explain_refusal,
};

int npv_platform_bind_vfio_state(struct npv_ctx *ctx, const char *name, const char *state_dir)
{
    if (ctx == NULL)
        return -EINVAL;
    int ret = npv_platform_resolve(ctx, name);
    if (ret < 0)
        return ret;
    return npv_sysfs_bind_vfio(ctx, &platform_bus, name, state_dir);
}

int npv_platform_unbind_vfio_state(struct npv_ctx *ctx, const char *name, const char *state_dir)
{
    if (ctx == NULL)
        return -EINVAL;
    int ret = npv_platform_resolve(ctx, name);
    if (ret < 0)
        return ret;
    return npv_sysfs_unbind_vfio(ctx, &platform_bus, name, state_dir);
}

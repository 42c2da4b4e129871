/* SPDX-License-Identifier: MIT */
/*
 * Opening a device through kernel VFIO, whatever its bus: which of the two
 * kernel interfaces to use, and the viability check both share.
 *
 * iommufd is preferred when the build, the kernel (/dev/iommu) and the device
 * (a vfio-dev cdev, CONFIG_VFIO_DEVICE_CDEV) all have it: it moves a device
 * between domains with one call and lets two devices of one IOMMU group be
 * open at once. The legacy type1v2 container works on every VFIO kernel.
 */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "ctx_internal.h"
#include "npv_config.h"
#include "sysfs_internal.h"
#include "vfio_device_internal.h"

#define NPV_MAX_BLOCKERS 8

void npv_vfio_node_open_error(struct npv_ctx *ctx, const char *who, const char *path, int err)
{
    const char *sep = who != NULL ? ": " : "";
    who = who != NULL ? who : "";
    if (err != -EACCES && err != -EPERM) {
        npv_err(ctx, "%s%s%s: %s", who, sep, path, npv_strerror(err));
        return;
    }
    /*
     * The kernel makes /dev/vfio/N, /dev/vfio/devices/vfioN and /dev/iommu
     * root's, mode 0600; a non-root user needs the node's group (model
     * choice: the rule we ship, packaging/udev/70-npuvfio.rules, gives them
     * to group npuvfio, mode 0660; /dev/vfio/vfio is 0666 already).
     */
    npv_err(ctx,
            "%s%s%s: %s: uid %u may not open it; give this user the node's group (udev rule "
            "packaging/udev/70-npuvfio.rules: GROUP=\"npuvfio\", MODE=\"0660\"; then "
            "usermod -aG npuvfio USER) or run as root",
            who, sep, path, npv_strerror(err), (unsigned)geteuid());
}

int npv_vfio_check_viable_target(struct npv_ctx *ctx, const struct npv_vfio_target *t)
{
    struct npv_group_blocker blockers[NPV_MAX_BLOCKERS];
    size_t n = 0;

    if (t->iommu_group < 0)
        return 0;
    int ret =
        npv_iommu_group_blockers(ctx, t->iommu_group, t->name, blockers, NPV_MAX_BLOCKERS, &n);
    if (ret < 0) {
        npv_debug(ctx, "%s: group viability unknown from sysfs (%s); the kernel decides", t->name,
                  npv_strerror(ret));
        return 0;
    }
    if (n == 0)
        return 0;
    /* One line: callers such as the CLI report the last error line as the reason. */
    char list[NPV_MAX_BLOCKERS * (sizeof(blockers[0].name) + sizeof(blockers[0].driver) + 12)] = "";
    size_t off = 0;
    for (size_t i = 0; i < n && i < NPV_MAX_BLOCKERS && off < sizeof(list); i++) {
        int w = snprintf(list + off, sizeof(list) - off, "%s%s (driver %s)", i ? ", " : "",
                         blockers[i].name, blockers[i].driver[0] ? blockers[i].driver : "?");
        if (w < 0)
            break;
        off += (size_t)w;
    }
    npv_err(ctx,
            "%s: its IOMMU group is not viable: %s%s on a host driver; bind %s to %s or "
            "unbind %s",
            t->name, list, n > NPV_MAX_BLOCKERS ? ", ..." : "", n == 1 ? "it" : "them",
            t->vfio_driver, n == 1 ? "it" : "them");
    return -NPV_ENOTVIABLE;
}

static bool iommufd_usable(struct npv_ctx *ctx, const struct npv_vfio_target *t)
{
    char cdev[64];
    return NPV_HAVE_IOMMUFD && access("/dev/iommu", F_OK) == 0 &&
           npv_vfio_cdev_name_on(ctx, t->bus, t->name, cdev, sizeof(cdev)) == 0;
}

int npv_vfio_open_target(struct npv_ctx *ctx, const struct npv_vfio_target *t,
                         struct npv_domain *dom, const struct npv_dev_opts *opts,
                         struct npv_dev **out)
{
    struct npv_dev *dev = NULL;
    int ret;

    switch (npv_ctx_iommu_backend(ctx)) {
    case NPV_IOMMU_LEGACY:
        ret = npv_vfio_legacy_open(ctx, t, opts, &dev);
        break;
    case NPV_IOMMU_IOMMUFD:
        ret = npv_vfio_iommufd_open(ctx, t, opts, &dev);
        break;
    case NPV_IOMMU_AUTO:
    default:
        if (iommufd_usable(ctx, t)) {
            npv_debug(ctx, "%s: opening through iommufd", t->name);
            ret = npv_vfio_iommufd_open(ctx, t, opts, &dev);
        } else {
            npv_debug(ctx, "%s: opening through the legacy type1v2 container", t->name);
            ret = npv_vfio_legacy_open(ctx, t, opts, &dev);
        }
        break;
    }
    if (ret < 0)
        return ret;
    return npv_dev_finish_open_or_close(dev, dom, out);
}

/* SPDX-License-Identifier: MIT */
/*
 * Opening a platform device bound to vfio-platform through kernel VFIO. The
 * transports are the PCI ones: a platform device has an IOMMU group (legacy
 * container) and, on Linux 6.6+ with CONFIG_VFIO_DEVICE_CDEV, a cdev under
 * bus/platform/devices/NAME/vfio-dev (iommufd). VFIO reports it with
 * VFIO_DEVICE_FLAGS_PLATFORM: its regions are its MMIO resources and its
 * IRQs its interrupt lines, so npv_dev_finish_open does none of the PCI
 * set-up (config space, bus mastering, No Snoop).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <npuvfio/platform.h>
#include "ctx_internal.h"
#include "vfio_device_internal.h"

/* The device exists and sits on vfio-platform (or vfio-amba, the same core). */
static int read_device(struct npv_ctx *ctx, const char *name, struct npv_platform_dev *pd)
{
    int ret = npv_platform_dev_read(ctx, name, pd);
    if (ret == -ENODEV || ret == -ENOENT) {
        npv_err(ctx, "%s: no such platform device", name);
        return -ENODEV;
    }
    if (ret < 0) {
        npv_err(ctx, "%s: %s", name, npv_strerror(ret));
        return ret;
    }
    if (!pd->vfio_bound && strstr(pd->driver, "vfio") == NULL) {
        if (pd->driver[0] == '\0')
            npv_err(ctx, "%s: not bound to any driver; bind it to vfio-platform first", name);
        else
            npv_err(ctx, "%s: bound to %s, not vfio-platform; bind it to vfio-platform first", name,
                    pd->driver);
        return -ENODEV;
    }
    if (pd->iommu_group < 0) {
        npv_err(ctx, "%s: no IOMMU group (is the device's IOMMU enabled in the device tree?)",
                name);
        return -ENODEV;
    }
    return 0;
}

int npv_dev_open_platform(struct npv_ctx *ctx, const char *name, struct npv_domain *dom,
                          const struct npv_dev_opts *opts, struct npv_dev **out)
{
    struct npv_platform_dev pd;

    if (out != NULL)
        *out = NULL;
    if (ctx == NULL || name == NULL || dom == NULL || out == NULL)
        return -EINVAL;
    if (!npv_platform_name_valid(name)) {
        npv_err(ctx, "\"%s\": not a platform device name", name);
        return -EINVAL;
    }
    int ret = read_device(ctx, name, &pd);
    if (ret < 0)
        return ret;
    struct npv_vfio_target t = {
        .bus = "platform",
        .vfio_driver = "vfio-platform",
        .iommu_group = pd.iommu_group,
    };
    _Static_assert(sizeof(t.name) >= sizeof(pd.name), "platform names fit a target");
    memcpy(t.name, pd.name, sizeof(pd.name));
    return npv_vfio_open_target(ctx, &t, dom, opts, out);
}

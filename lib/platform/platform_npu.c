/* SPDX-License-Identifier: MIT */
/* The NPUs we know on the platform bus, by device-tree compatible string. */
#include <stddef.h>
#include <string.h>

#include <npuvfio/platform.h>

/*
 * From ../shared/hw/rknpu.md: the vendor BSP's rknpu driver binds one node
 * for the whole NPU (npu@fdab0000, three 64 KiB `reg` windows, one per
 * core); mainline's accel/rocket driver binds one node per core
 * (rknn-core). Both are the same hardware. The vendor driver's other
 * compatibles (rk3568, rk3562, rk3576, rv1106) are other NPU generations
 * whose register streams differ; devices/rknpu drives RK3588 only, so they
 * are not listed.
 */
static const struct npv_platform_npu known[] = {
    {"rockchip,rk3588-rknpu", "rknpu", "Rockchip RK3588 NPU"},
    {"rockchip,rk3588-rknn-core", "rknpu", "Rockchip RK3588 NPU core"},
};

const struct npv_platform_npu *npv_platform_known_npu(const struct npv_platform_dev *dev)
{
    if (dev == NULL)
        return NULL;
    /* Most specific first, as the device tree orders them and drivers match them. */
    const char *p = dev->compatible;
    while (*p != '\0') {
        size_t len = strcspn(p, " ");
        for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
            if (strlen(known[i].compatible) == len && strncmp(known[i].compatible, p, len) == 0)
                return &known[i];
        p += len;
        while (*p == ' ')
            p++;
    }
    return NULL;
}

/* SPDX-License-Identifier: MIT */
/* The NPUs we know on the platform bus, by device-tree compatible string. */
#include <stddef.h>
#include <string.h>

#include <npuvfio/platform.h>

/*
 * The vendor BSP's rknpu driver binds one node for the whole NPU
 * (rknpu_of_match in drivers/rknpu/rknpu_drv.c; the BSP's rk3588s.dtsi has
 * npu@fdab0000 with three 64 KiB `reg` windows, one per core); mainline's
 * accel/rocket driver binds one node per core (dt_match in
 * drivers/accel/rocket/rocket_drv.c; the binding is
 * Documentation/devicetree/bindings/npu/rockchip,rk3588-rknn-core.yaml).
 * Both are the same hardware. The other compatibles in rknpu_of_match
 * (rockchip,rknpu, rk3568, rk3562, rk3576, rv1106) are other NPU generations
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

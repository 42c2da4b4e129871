/* SPDX-License-Identifier: MIT */
/* A device of any bus as sysfs shows it: bus/BUS/devices/NAME, its driver and IOMMU group links. */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "sysfs_internal.h"

bool npv_sysfs_dev_exists(struct npv_ctx *ctx, const char *bus, const char *name)
{
    char path[NPV_SYSFS_PATH_MAX];
    struct stat st;
    if (npv_sysfs_path(ctx, path, sizeof(path), "bus/%s/devices/%s", bus, name) < 0)
        return false;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int npv_sysfs_dev_driver(struct npv_ctx *ctx, const char *bus, const char *name, char *buf,
                         size_t len)
{
    char path[NPV_SYSFS_PATH_MAX];
    int ret = npv_sysfs_path(ctx, path, sizeof(path), "bus/%s/devices/%s/driver", bus, name);
    if (ret < 0)
        return ret;
    ret = npv_sysfs_link_name(path, buf, len);
    if (ret == -ENOENT) {
        buf[0] = '\0';
        return 0;
    }
    return ret < 0 ? ret : 0;
}

int npv_sysfs_dev_group(struct npv_ctx *ctx, const char *bus, const char *name)
{
    char path[NPV_SYSFS_PATH_MAX], group[32];
    if (npv_sysfs_path(ctx, path, sizeof(path), "bus/%s/devices/%s/iommu_group", bus, name) < 0)
        return -1;
    if (npv_sysfs_link_name(path, group, sizeof(group)) < 0)
        return -1;
    char *end;
    long g = strtol(group, &end, 10);
    return (*end == '\0' && g >= 0 && g <= INT32_MAX) ? (int)g : -1;
}

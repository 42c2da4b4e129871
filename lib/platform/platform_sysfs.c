/* SPDX-License-Identifier: MIT */
/* Platform devices as sysfs shows them under bus/platform/devices. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "failpoint_internal.h"
#include "platform_internal.h"

bool npv_platform_name_valid(const char *name)
{
    if (name == NULL || name[0] == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return false;
    size_t len = strnlen(name, NPV_PLATFORM_NAME_LEN);
    return len < NPV_PLATFORM_NAME_LEN && strchr(name, '/') == NULL;
}

int npv_platform_resolve(struct npv_ctx *ctx, const char *name)
{
    if (!npv_platform_name_valid(name)) {
        npv_err(ctx, "\"%s\": not a platform device name", name ? name : "(null)");
        return -EINVAL;
    }
    if (!npv_sysfs_dev_exists(ctx, "platform", name)) {
        npv_err(ctx, "%s: no such platform device under %s/bus/platform/devices", name,
                npv_ctx_sysfs_root(ctx));
        return -ENODEV;
    }
    return 0;
}

/*
 * of_node/compatible holds the strings back to back, each NUL-terminated
 * (the device tree's stringlist). They are joined by spaces here; a byte no
 * compatible string should hold (space, control) becomes '?', so the join
 * stays reversible and printable.
 */
static void read_compatible(struct npv_ctx *ctx, const char *name, char *buf, size_t len)
{
    char path[NPV_SYSFS_PATH_MAX];
    buf[0] = '\0';
    if (npv_sysfs_path(ctx, path, sizeof(path), "bus/platform/devices/%s/of_node/compatible",
                       name) < 0)
        return;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    size_t n = 0;
    ssize_t r;
    while (n < len - 1 && (r = read(fd, buf + n, len - 1 - n)) != 0) {
        if (r < 0) {
            if (errno == EINTR)
                continue;
            n = 0;
            break;
        }
        n += (size_t)r;
    }
    close(fd);
    while (n > 0 && (buf[n - 1] == '\0' || buf[n - 1] == '\n'))
        n--;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)buf[i];
        if (c == '\0')
            buf[i] = ' ';
        else if (c <= ' ' || c >= 0x7f)
            buf[i] = '?';
    }
    buf[n] = '\0';
}

int npv_platform_dev_read(struct npv_ctx *ctx, const char *name, struct npv_platform_dev *dev)
{
    if (ctx == NULL || dev == NULL)
        return -EINVAL;
    if (!npv_platform_name_valid(name))
        return -EINVAL;
    if (!npv_sysfs_dev_exists(ctx, "platform", name))
        return -ENODEV;
    memset(dev, 0, sizeof(*dev));
    memcpy(dev->name, name, strlen(name) + 1);
    read_compatible(ctx, name, dev->compatible, sizeof(dev->compatible));
    int ret = npv_sysfs_dev_driver(ctx, "platform", name, dev->driver, sizeof(dev->driver));
    if (ret < 0)
        return ret;
    dev->vfio_bound = strcmp(dev->driver, "vfio-platform") == 0;
    dev->iommu_group = npv_sysfs_dev_group(ctx, "platform", name);
    return 0;
}

static int cmp_dev(const void *a, const void *b)
{
    return strcmp(((const struct npv_platform_dev *)a)->name,
                  ((const struct npv_platform_dev *)b)->name);
}

int npv_platform_list(struct npv_ctx *ctx, struct npv_platform_dev **out, size_t *count)
{
    if (ctx == NULL || out == NULL || count == NULL)
        return -EINVAL;
    *out = NULL;
    *count = 0;
    char path[NPV_SYSFS_PATH_MAX];
    int ret = npv_sysfs_path(ctx, path, sizeof(path), "bus/platform/devices");
    if (ret < 0)
        return ret;
    DIR *dir = opendir(path);
    if (dir == NULL) {
        ret = -errno;
        if (ret == -ENOENT)
            return 0;
        npv_err(ctx, "%s: %s", path, npv_strerror(ret));
        return ret;
    }
    struct npv_platform_dev *devs = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(dir)) != NULL) {
        if (de->d_name[0] == '.' || !npv_platform_name_valid(de->d_name))
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 32;
            struct npv_platform_dev *nd = npv_fp_realloc(ctx, devs, ncap * sizeof(*nd));
            if (nd == NULL) {
                ret = -ENOMEM;
                goto err_free;
            }
            devs = nd;
            cap = ncap;
        }
        ret = npv_platform_dev_read(ctx, de->d_name, &devs[n]);
        /* A device removed while we read the directory is simply gone. */
        if (ret == -ENODEV)
            continue;
        if (ret < 0) {
            npv_err(ctx, "%s: cannot read platform device: %s", de->d_name, npv_strerror(ret));
            goto err_free;
        }
        n++;
    }
    closedir(dir);
    if (n > 1)
        qsort(devs, n, sizeof(*devs), cmp_dev);
    *out = devs;
    *count = n;
    return 0;

err_free:
    free(devs);
    closedir(dir);
    return ret;
}

int npv_platform_group_viable(struct npv_ctx *ctx, const char *name,
                              struct npv_group_member *blockers, size_t max, size_t *nblockers)
{
    if (ctx == NULL || (max > 0 && blockers == NULL))
        return -EINVAL;
    int ret = npv_platform_resolve(ctx, name);
    if (ret < 0)
        return ret;
    int group = npv_sysfs_dev_group(ctx, "platform", name);
    if (group < 0) {
        npv_debug(ctx, "%s: no IOMMU group", name);
        return -ENOENT;
    }
    struct npv_group_blocker found[64];
    size_t n = 0;
    ret = npv_iommu_group_blockers(ctx, group, name, found, 64, &n);
    if (ret < 0)
        return ret;
    for (size_t i = 0; i < n && i < max && i < 64; i++) {
        _Static_assert(sizeof(found[0].name) == sizeof(blockers[0].name), "name slots");
        _Static_assert(sizeof(found[0].driver) == sizeof(blockers[0].driver), "driver slots");
        memcpy(blockers[i].name, found[i].name, sizeof(blockers[i].name));
        memcpy(blockers[i].driver, found[i].driver, sizeof(blockers[i].driver));
    }
    if (nblockers != NULL)
        *nblockers = n;
    return n == 0;
}

/* SPDX-License-Identifier: MIT */
/* PCI functions as sysfs shows them under bus/pci/devices. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "failpoint_internal.h"
#include "pci_internal.h"

int npv_pci_canon(struct npv_ctx *ctx, const char *text, char *canon, size_t len)
{
    struct npv_pci_addr a;
    if (npv_pci_addr_parse(text, &a) < 0) {
        npv_err(ctx, "%s: malformed PCI address (expected DDDD:BB:DD.F)", text ? text : "(null)");
        return -EINVAL;
    }
    npv_pci_addr_format(&a, canon, len);
    return 0;
}

bool npv_pci_exists(struct npv_ctx *ctx, const char *canon)
{
    return npv_sysfs_dev_exists(ctx, "pci", canon);
}

int npv_pci_resolve(struct npv_ctx *ctx, const char *addr, char *canon)
{
    int ret = npv_pci_canon(ctx, addr, canon, NPV_PCI_ADDR_LEN);
    if (ret < 0)
        return ret;
    if (!npv_pci_exists(ctx, canon)) {
        npv_err(ctx, "%s: no such PCI function under %s/bus/pci/devices", canon,
                npv_ctx_sysfs_root(ctx));
        return -ENODEV;
    }
    return 0;
}

int npv_pci_read_driver(struct npv_ctx *ctx, const char *addr, char *buf, size_t len)
{
    return npv_sysfs_dev_driver(ctx, "pci", addr, buf, len);
}

static int read_id(struct npv_ctx *ctx, const char *addr, const char *attr, uint64_t max,
                   uint64_t *out)
{
    char path[NPV_SYSFS_PATH_MAX];
    int ret = npv_sysfs_path(ctx, path, sizeof(path), "bus/pci/devices/%s/%s", addr, attr);
    if (ret < 0)
        return ret;
    ret = npv_sysfs_read_u64(path, out);
    if (ret < 0) {
        npv_debug(ctx, "%s: cannot read %s: %s", addr, attr, npv_strerror(ret));
        return ret;
    }
    if (*out > max)
        return -ERANGE;
    return 0;
}

int npv_pci_read_group(struct npv_ctx *ctx, const char *addr)
{
    return npv_sysfs_dev_group(ctx, "pci", addr);
}

int npv_pci_func_read_numa(struct npv_ctx *ctx, const char *addr, struct npv_pci_func *func,
                           struct npv_pci_numa *numa)
{
    struct npv_pci_addr a;
    char canon[NPV_PCI_ADDR_LEN];
    if (npv_pci_addr_parse(addr, &a) < 0)
        return -EINVAL;
    npv_pci_addr_format(&a, canon, sizeof(canon));
    if (!npv_pci_exists(ctx, canon))
        return -ENODEV;

    memset(func, 0, sizeof(*func));
    memcpy(func->addr, canon, sizeof(canon));
    uint64_t v;
    /* vendor, device and class exist for every function; the subsystem ids may not. */
    int ret = read_id(ctx, canon, "vendor", 0xffff, &v);
    if (ret < 0)
        return ret;
    func->vendor = (uint16_t)v;
    ret = read_id(ctx, canon, "device", 0xffff, &v);
    if (ret < 0)
        return ret;
    func->device = (uint16_t)v;
    ret = read_id(ctx, canon, "class", 0xffffff, &v);
    if (ret < 0)
        return ret;
    func->class_code = (uint32_t)v;
    if (read_id(ctx, canon, "subsystem_vendor", 0xffff, &v) == 0)
        func->subsystem_vendor = (uint16_t)v;
    if (read_id(ctx, canon, "subsystem_device", 0xffff, &v) == 0)
        func->subsystem_device = (uint16_t)v;

    ret = npv_pci_read_driver(ctx, canon, func->driver, sizeof(func->driver));
    if (ret < 0)
        return ret;
    func->vfio_bound = strcmp(func->driver, "vfio-pci") == 0;
    func->iommu_group = npv_pci_read_group(ctx, canon);
    func->numa_node = npv_pci_numa_node(ctx, numa, &a, canon);
    return 0;
}

int npv_pci_func_read(struct npv_ctx *ctx, const char *addr, struct npv_pci_func *func)
{
    if (ctx == NULL || addr == NULL || func == NULL)
        return -EINVAL;
    struct npv_pci_numa numa = {0};
    int ret = npv_pci_func_read_numa(ctx, addr, func, &numa);
    npv_pci_numa_fini(&numa);
    return ret;
}

static int cmp_func(const void *pa, const void *pb)
{
    const struct npv_pci_func *fa = pa, *fb = pb;
    struct npv_pci_addr a, b;
    /* Every entry was parsed before it was read, so these cannot fail. */
    npv_pci_addr_parse(fa->addr, &a);
    npv_pci_addr_parse(fb->addr, &b);
    uint64_t ka = (uint64_t)a.domain << 16 | (uint64_t)a.bus << 8 | (uint64_t)a.dev << 3 | a.fn;
    uint64_t kb = (uint64_t)b.domain << 16 | (uint64_t)b.bus << 8 | (uint64_t)b.dev << 3 | b.fn;
    return ka < kb ? -1 : ka > kb;
}

int npv_pci_read_dir(struct npv_ctx *ctx, const char *path, struct npv_pci_func **out,
                     size_t *count)
{
    DIR *dir = opendir(path);
    if (dir == NULL) {
        int err = -errno;
        npv_err(ctx, "%s: %s", path, npv_strerror(err));
        return err;
    }
    struct npv_pci_numa numa = {0};
    struct npv_pci_func *funcs = NULL;
    size_t n = 0, cap = 0;
    int ret = 0;
    struct dirent *de;
    while ((de = readdir(dir)) != NULL) {
        /* Non-PCI entries (a group's platform devices) have no npv_pci_func. */
        struct npv_pci_addr a;
        if (npv_pci_addr_parse(de->d_name, &a) < 0)
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 32;
            struct npv_pci_func *nf = npv_fp_realloc(ctx, funcs, ncap * sizeof(*nf));
            if (nf == NULL) {
                ret = -ENOMEM;
                goto err_free;
            }
            funcs = nf;
            cap = ncap;
        }
        ret = npv_pci_func_read_numa(ctx, de->d_name, &funcs[n], &numa);
        /* A function removed while we read the directory is simply gone. */
        if (ret == -ENODEV)
            continue;
        if (ret < 0) {
            npv_err(ctx, "%s: cannot read PCI function: %s", de->d_name, npv_strerror(ret));
            goto err_free;
        }
        n++;
    }
    closedir(dir);
    npv_pci_numa_fini(&numa);
    if (n > 1)
        qsort(funcs, n, sizeof(*funcs), cmp_func);
    *out = funcs;
    *count = n;
    return 0;

err_free:
    free(funcs);
    npv_pci_numa_fini(&numa);
    closedir(dir);
    return ret;
}

int npv_pci_list(struct npv_ctx *ctx, struct npv_pci_func **out, size_t *count)
{
    if (ctx == NULL || out == NULL || count == NULL)
        return -EINVAL;
    char path[NPV_SYSFS_PATH_MAX];
    int ret = npv_sysfs_path(ctx, path, sizeof(path), "bus/pci/devices");
    if (ret < 0)
        return ret;
    return npv_pci_read_dir(ctx, path, out, count);
}

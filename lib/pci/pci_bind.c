/* SPDX-License-Identifier: MIT */
/*
 * Moving a PCI function to vfio-pci and back through sysfs: driver_override,
 * the old driver's unbind, and drivers_probe; the previous driver is
 * remembered in a state directory so unbind can return the function to it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "deadline.h"
#include "pci_internal.h"

/*
 * The kernel binds synchronously inside the sysfs write, so on real hardware
 * the first poll already sees the result; the deadline is for probe
 * functions that sleep (firmware loads) and for slow test machines.
 */
#define BIND_DEADLINE_NS (10ull * 1000000000ull)
#define BIND_POLL_NS     (2ull * 1000000ull)
#define MAX_BLOCKERS     8

/* Poll the driver link until it names want ("" = unbound) or the deadline passes. */
static int wait_driver(struct npv_ctx *ctx, const char *canon, const char *want, char *now,
                       size_t len)
{
    uint64_t deadline = npv_deadline_after(BIND_DEADLINE_NS);
    for (;;) {
        int ret = npv_pci_read_driver(ctx, canon, now, len);
        if (ret < 0)
            return ret;
        if (strcmp(now, want) == 0)
            return 0;
        if (npv_deadline_left(deadline) == 0)
            return -ETIMEDOUT;
        struct timespec ts = {0, (long)BIND_POLL_NS};
        nanosleep(&ts, NULL);
    }
}

static int dev_write(struct npv_ctx *ctx, const char *canon, const char *attr, const char *text)
{
    char path[NPV_SYSFS_PATH_MAX];
    int ret = npv_sysfs_path(ctx, path, sizeof(path), "bus/pci/devices/%s/%s", canon, attr);
    if (ret < 0)
        return ret;
    ret = npv_sysfs_write_str(path, text);
    if (ret < 0)
        npv_debug(ctx, "%s: write %s: %s", path, text, npv_strerror(ret));
    return ret;
}

static int bus_write(struct npv_ctx *ctx, const char *rel, const char *text)
{
    char path[NPV_SYSFS_PATH_MAX];
    int ret = npv_sysfs_path(ctx, path, sizeof(path), "bus/pci/%s", rel);
    if (ret < 0)
        return ret;
    ret = npv_sysfs_write_str(path, text);
    if (ret < 0)
        npv_debug(ctx, "%s: write %s: %s", path, text, npv_strerror(ret));
    return ret;
}

static int driver_bind(struct npv_ctx *ctx, const char *driver, const char *canon)
{
    char rel[NPV_PCI_DRIVER_LEN + 32];
    snprintf(rel, sizeof(rel), "drivers/%s/bind", driver);
    return bus_write(ctx, rel, canon);
}

/* An empty store clears driver_override, as `echo > driver_override` does. */
static int clear_override(struct npv_ctx *ctx, const char *canon)
{
    return dev_write(ctx, canon, "driver_override", "\n");
}

static const char *state_dir_or_default(const char *state_dir)
{
    if (state_dir != NULL && *state_dir != '\0')
        return state_dir;
    const char *env = getenv("NPUVFIO_STATE_DIR");
    return env != NULL && *env != '\0' ? env : "/run/npuvfio";
}

static int mkdir_p(const char *dir)
{
    char buf[NPV_SYSFS_PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", dir) >= (int)sizeof(buf))
        return -ENAMETOOLONG;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, 0755) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

static int state_path(const char *dir, const char *canon, char *buf, size_t len)
{
    return snprintf(buf, len, "%s/%s", dir, canon) >= (int)len ? -ENAMETOOLONG : 0;
}

/* Written to a temporary name and renamed, so a crash never leaves half a name. */
static int state_save(const char *dir, const char *canon, const char *driver)
{
    char path[NPV_SYSFS_PATH_MAX], tmp[NPV_SYSFS_PATH_MAX + 8];
    int ret = mkdir_p(dir);
    if (ret < 0)
        return ret;
    ret = state_path(dir, canon, path, sizeof(path));
    if (ret < 0)
        return ret;
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "we");
    if (f == NULL)
        return -errno;
    fprintf(f, "%s\n", driver);
    if (fclose(f) != 0) {
        ret = -errno;
        unlink(tmp);
        return ret;
    }
    if (rename(tmp, path) < 0) {
        ret = -errno;
        unlink(tmp);
        return ret;
    }
    return 0;
}

/* 1 and the driver ("" = was unbound) when remembered, 0 when not, negative errno. */
static int state_load(const char *dir, const char *canon, char *driver, size_t len)
{
    char path[NPV_SYSFS_PATH_MAX];
    int ret = state_path(dir, canon, path, sizeof(path));
    if (ret < 0)
        return ret;
    ret = npv_sysfs_read_str(path, driver, len);
    if (ret == -ENOENT)
        return 0;
    if (ret < 0)
        return ret;
    /* The file is ours, but a driver name is a path component below: keep it one. */
    if (strchr(driver, '/') != NULL || strcmp(driver, "..") == 0 || strcmp(driver, ".") == 0)
        return -EINVAL;
    return 1;
}

static void state_remove(const char *dir, const char *canon)
{
    char path[NPV_SYSFS_PATH_MAX];
    if (state_path(dir, canon, path, sizeof(path)) == 0)
        unlink(path);
}

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

int npv_pci_bind_vfio_state(struct npv_ctx *ctx, const char *addr, const char *state_dir)
{
    if (ctx == NULL || addr == NULL)
        return -EINVAL;
    char canon[NPV_PCI_ADDR_LEN], prev[NPV_PCI_DRIVER_LEN], now[NPV_PCI_DRIVER_LEN] = "";
    const char *dir = state_dir_or_default(state_dir);
    int ret = npv_pci_resolve(ctx, addr, canon);
    if (ret < 0)
        return ret;
    ret = npv_pci_read_driver(ctx, canon, prev, sizeof(prev));
    if (ret < 0)
        return ret;
    if (strcmp(prev, "vfio-pci") == 0) {
        npv_info(ctx, "%s: already bound to vfio-pci", canon);
        return 0;
    }
    char path[NPV_SYSFS_PATH_MAX];
    struct stat st;
    ret = npv_sysfs_path(ctx, path, sizeof(path), "bus/pci/drivers/vfio-pci");
    if (ret < 0)
        return ret;
    if (stat(path, &st) < 0) {
        npv_err(ctx, "%s: the vfio-pci driver is not loaded (modprobe vfio-pci)", canon);
        return -ENOENT;
    }
    ret = check_viable(ctx, canon);
    if (ret < 0)
        return ret;

    ret = state_save(dir, canon, prev);
    if (ret < 0) {
        npv_err(ctx, "%s: cannot remember the previous driver in %s: %s", canon, dir,
                npv_strerror(ret));
        return ret;
    }
    ret = dev_write(ctx, canon, "driver_override", "vfio-pci");
    if (ret < 0) {
        npv_err(ctx, "%s: cannot set driver_override: %s", canon, npv_strerror(ret));
        goto err_state;
    }
    if (prev[0] != '\0') {
        ret = dev_write(ctx, canon, "driver/unbind", canon);
        if (ret == 0)
            ret = wait_driver(ctx, canon, "", now, sizeof(now));
        if (ret < 0) {
            npv_err(ctx, "%s: cannot unbind from %s: %s", canon, prev, npv_strerror(ret));
            goto err_override;
        }
    }
    ret = bus_write(ctx, "drivers_probe", canon);
    if (ret == 0)
        ret = wait_driver(ctx, canon, "vfio-pci", now, sizeof(now));
    if (ret < 0) {
        npv_err(ctx, "%s: did not bind to vfio-pci (driver now: %s): %s", canon,
                now[0] ? now : "none", npv_strerror(ret));
        goto err_rebind;
    }
    npv_info(ctx, "%s: bound to vfio-pci (was %s)", canon, prev[0] ? prev : "unbound");
    return 0;

err_rebind:
    clear_override(ctx, canon);
    if (prev[0] != '\0' && npv_pci_read_driver(ctx, canon, now, sizeof(now)) == 0 && !now[0])
        driver_bind(ctx, prev, canon);
    goto err_state;
err_override:
    clear_override(ctx, canon);
err_state:
    state_remove(dir, canon);
    return ret;
}

int npv_pci_unbind_vfio_state(struct npv_ctx *ctx, const char *addr, const char *state_dir)
{
    if (ctx == NULL || addr == NULL)
        return -EINVAL;
    char canon[NPV_PCI_ADDR_LEN], cur[NPV_PCI_DRIVER_LEN], prev[NPV_PCI_DRIVER_LEN];
    char override[NPV_PCI_DRIVER_LEN] = "", now[NPV_PCI_DRIVER_LEN] = "", path[NPV_SYSFS_PATH_MAX];
    const char *dir = state_dir_or_default(state_dir);
    int ret = npv_pci_resolve(ctx, addr, canon);
    if (ret < 0)
        return ret;
    ret = npv_pci_read_driver(ctx, canon, cur, sizeof(cur));
    if (ret < 0)
        return ret;
    if (npv_sysfs_path(ctx, path, sizeof(path), "bus/pci/devices/%s/driver_override", canon) == 0)
        npv_sysfs_read_str(path, override, sizeof(override));
    int remembered = state_load(dir, canon, prev, sizeof(prev));
    if (remembered < 0) {
        npv_err(ctx, "%s: unreadable state file in %s: %s", canon, dir, npv_strerror(remembered));
        return remembered;
    }
    bool on_vfio = cur[0] != '\0' && npv_pci_driver_is_vfio(cur);
    if (!on_vfio && strcmp(override, "vfio-pci") != 0) {
        npv_info(ctx, "%s: not bound to vfio-pci (driver: %s); nothing to undo", canon,
                 cur[0] ? cur : "none");
        state_remove(dir, canon);
        return 0;
    }
    if (on_vfio) {
        ret = dev_write(ctx, canon, "driver/unbind", canon);
        if (ret == 0)
            ret = wait_driver(ctx, canon, "", now, sizeof(now));
        if (ret < 0) {
            npv_err(ctx, "%s: cannot unbind from %s: %s", canon, cur, npv_strerror(ret));
            return ret;
        }
    }
    ret = clear_override(ctx, canon);
    if (ret < 0) {
        npv_err(ctx, "%s: cannot clear driver_override: %s", canon, npv_strerror(ret));
        return ret;
    }
    if (remembered && prev[0] == '\0') {
        npv_info(ctx, "%s: left unbound, as it was before vfio-pci", canon);
    } else if (remembered) {
        ret = driver_bind(ctx, prev, canon);
        if (ret == 0)
            ret = wait_driver(ctx, canon, prev, now, sizeof(now));
        if (ret < 0) {
            npv_err(ctx, "%s: cannot return to %s (driver now: %s): %s", canon, prev,
                    now[0] ? now : "none", npv_strerror(ret));
            return ret;
        }
    } else {
        /* Nothing remembered: let the kernel's id tables choose, as at boot. */
        npv_info(ctx, "%s: no previous driver recorded in %s; asking drivers_probe", canon, dir);
        ret = bus_write(ctx, "drivers_probe", canon);
        if (ret < 0) {
            npv_err(ctx, "%s: drivers_probe: %s", canon, npv_strerror(ret));
            return ret;
        }
    }
    state_remove(dir, canon);
    return 0;
}

int npv_pci_bind_vfio(struct npv_ctx *ctx, const char *addr)
{
    return npv_pci_bind_vfio_state(ctx, addr, NULL);
}

int npv_pci_unbind_vfio(struct npv_ctx *ctx, const char *addr)
{
    return npv_pci_unbind_vfio_state(ctx, addr, NULL);
}

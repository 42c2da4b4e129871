/* SPDX-License-Identifier: MIT */
/*
 * Moving a device to its bus's VFIO driver and back through sysfs:
 * driver_override, the old driver's unbind, and drivers_probe; the previous
 * driver is remembered in a state directory so unbind can return the device
 * to it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "deadline.h"
#include "sysfs_bind.h"

#define DRIVER_LEN   64
#define MAX_BLOCKERS 8

/*
 * The kernel binds synchronously inside the sysfs write, so on real hardware
 * the first poll already sees the result; the deadline is for probe
 * functions that sleep (firmware loads) and for slow test machines.
 */
#define BIND_DEADLINE_NS (10ull * 1000000000ull)
#define BIND_POLL_NS     (2ull * 1000000ull)

/* Poll the driver link until it names want ("" = unbound) or the deadline passes. */
static int wait_driver(struct npv_ctx *ctx, const struct npv_bind_bus *bus, const char *canon,
                       const char *want, char *now, size_t len)
{
    uint64_t deadline = npv_deadline_after(BIND_DEADLINE_NS);
    for (;;) {
        int ret = npv_sysfs_dev_driver(ctx, bus->bus, canon, now, len);
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

static int dev_write(struct npv_ctx *ctx, const struct npv_bind_bus *bus, const char *canon,
                     const char *attr, const char *text)
{
    char path[NPV_SYSFS_PATH_MAX];
    int ret =
        npv_sysfs_path(ctx, path, sizeof(path), "bus/%s/devices/%s/%s", bus->bus, canon, attr);
    if (ret < 0)
        return ret;
    ret = npv_sysfs_write_str(path, text);
    if (ret < 0)
        npv_debug(ctx, "%s: write %s: %s", path, text, npv_strerror(ret));
    return ret;
}

static int bus_write(struct npv_ctx *ctx, const struct npv_bind_bus *bus, const char *rel,
                     const char *text)
{
    char path[NPV_SYSFS_PATH_MAX];
    int ret = npv_sysfs_path(ctx, path, sizeof(path), "bus/%s/%s", bus->bus, rel);
    if (ret < 0)
        return ret;
    ret = npv_sysfs_write_str(path, text);
    if (ret < 0)
        npv_debug(ctx, "%s: write %s: %s", path, text, npv_strerror(ret));
    return ret;
}

static int driver_bind(struct npv_ctx *ctx, const struct npv_bind_bus *bus, const char *driver,
                       const char *canon)
{
    char rel[DRIVER_LEN + 32];
    snprintf(rel, sizeof(rel), "drivers/%s/bind", driver);
    return bus_write(ctx, bus, rel, canon);
}

/* An empty store clears driver_override, as `echo > driver_override` does. */
static int clear_override(struct npv_ctx *ctx, const struct npv_bind_bus *bus, const char *canon)
{
    return dev_write(ctx, bus, canon, "driver_override", "\n");
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

/* vfio's enable_unsafe_noiommu_mode: VFIO without isolation, for machines with no IOMMU. */
static bool noiommu_mode(struct npv_ctx *ctx)
{
    char path[NPV_SYSFS_PATH_MAX], v[8] = "";
    if (npv_sysfs_path(ctx, path, sizeof(path),
                       "module/vfio/parameters/enable_unsafe_noiommu_mode") < 0)
        return false;
    return npv_sysfs_read_str(path, v, sizeof(v)) >= 0 && (v[0] == 'Y' || v[0] == '1');
}

/*
 * VFIO takes a device only while no other member of its IOMMU group is on a
 * host driver: refuse up front, naming them, rather than let the bind
 * succeed and every open fail.
 */
static int check_viable(struct npv_ctx *ctx, const struct npv_bind_bus *bus, const char *canon)
{
    int group = npv_sysfs_dev_group(ctx, bus->bus, canon);
    if (group < 0 && noiommu_mode(ctx))
        return 0; /* vfio makes a no-IOMMU group at bind time; there is nothing to share */
    if (group < 0) {
        npv_err(ctx, "%s: no IOMMU group, so %s cannot take it (%s)", canon, bus->vfio_driver,
                bus->no_group_hint);
        return -ENOENT;
    }
    struct npv_group_blocker blockers[MAX_BLOCKERS];
    size_t n = 0;
    int ret = npv_iommu_group_blockers(ctx, group, canon, blockers, MAX_BLOCKERS, &n);
    if (ret < 0) {
        npv_err(ctx, "%s: cannot check the IOMMU group: %s", canon, npv_strerror(ret));
        return ret;
    }
    if (n == 0)
        return 0;
    char list[MAX_BLOCKERS * (sizeof(blockers[0].name) + sizeof(blockers[0].driver) + 6)] = "";
    size_t off = 0;
    for (size_t i = 0; i < n && i < MAX_BLOCKERS && off < sizeof(list); i++) {
        int w = snprintf(list + off, sizeof(list) - off, "%s%s (%s)", i ? ", " : "",
                         blockers[i].name, blockers[i].driver);
        if (w < 0)
            break;
        off += (size_t)w;
    }
    npv_err(ctx,
            "%s: IOMMU group %d is not viable: %s%s still on a host driver; unbind %s or bind "
            "%s to %s too",
            canon, group, list, n > MAX_BLOCKERS ? ", ..." : "", n == 1 ? "it" : "them",
            n == 1 ? "it" : "them", bus->vfio_driver);
    return -NPV_ENOTVIABLE;
}

int npv_sysfs_bind_vfio(struct npv_ctx *ctx, const struct npv_bind_bus *bus, const char *canon,
                        const char *state_dir)
{
    char prev[DRIVER_LEN], now[DRIVER_LEN] = "";
    const char *dir = state_dir_or_default(state_dir);
    const char *vfio = bus->vfio_driver;
    int ret = npv_sysfs_dev_driver(ctx, bus->bus, canon, prev, sizeof(prev));
    if (ret < 0)
        return ret;
    if (strcmp(prev, vfio) == 0) {
        npv_info(ctx, "%s: already bound to %s", canon, vfio);
        return 0;
    }
    char path[NPV_SYSFS_PATH_MAX];
    struct stat st;
    ret = npv_sysfs_path(ctx, path, sizeof(path), "bus/%s/drivers/%s", bus->bus, vfio);
    if (ret < 0)
        return ret;
    /* The IOMMU first: without one, loading the vfio driver would not help. */
    ret = check_viable(ctx, bus, canon);
    if (ret < 0)
        return ret;
    if (stat(path, &st) < 0) {
        npv_err(ctx, "%s: the %s driver is not loaded (modprobe %s)", canon, vfio, vfio);
        return -ENOENT;
    }

    ret = state_save(dir, canon, prev);
    if (ret < 0) {
        npv_err(ctx, "%s: cannot remember the previous driver in %s: %s", canon, dir,
                npv_strerror(ret));
        return ret;
    }
    ret = dev_write(ctx, bus, canon, "driver_override", vfio);
    if (ret < 0) {
        npv_err(ctx, "%s: cannot set driver_override: %s", canon, npv_strerror(ret));
        goto err_state;
    }
    if (prev[0] != '\0') {
        ret = dev_write(ctx, bus, canon, "driver/unbind", canon);
        if (ret == 0)
            ret = wait_driver(ctx, bus, canon, "", now, sizeof(now));
        if (ret < 0) {
            npv_err(ctx, "%s: cannot unbind from %s: %s", canon, prev, npv_strerror(ret));
            goto err_override;
        }
    }
    ret = bus_write(ctx, bus, "drivers_probe", canon);
    if (ret == 0)
        ret = wait_driver(ctx, bus, canon, vfio, now, sizeof(now));
    if (ret < 0) {
        if (bus->explain_refusal != NULL)
            bus->explain_refusal(ctx, canon);
        npv_err(ctx, "%s: did not bind to %s (driver now: %s): %s", canon, vfio,
                now[0] ? now : "none", npv_strerror(ret));
        goto err_rebind;
    }
    npv_info(ctx, "%s: bound to %s (was %s)", canon, vfio, prev[0] ? prev : "unbound");
    return 0;

err_rebind:
    clear_override(ctx, bus, canon);
    /*
     * Back to the old driver, and wait until it has the device (a probe may
     * be asynchronous): the caller's next step must find the host as it was.
     */
    if (prev[0] != '\0' && npv_sysfs_dev_driver(ctx, bus->bus, canon, now, sizeof(now)) == 0 &&
        !now[0]) {
        int back = driver_bind(ctx, bus, prev, canon);
        if (back == 0)
            back = wait_driver(ctx, bus, canon, prev, now, sizeof(now));
        if (back < 0)
            npv_err(ctx, "%s: cannot return to %s (driver now: %s): %s", canon, prev,
                    now[0] ? now : "none", npv_strerror(back));
    }
    goto err_state;
err_override:
    clear_override(ctx, bus, canon);
err_state:
    state_remove(dir, canon);
    return ret;
}

int npv_sysfs_unbind_vfio(struct npv_ctx *ctx, const struct npv_bind_bus *bus, const char *canon,
                          const char *state_dir)
{
    char cur[DRIVER_LEN], prev[DRIVER_LEN];
    char override[DRIVER_LEN] = "", now[DRIVER_LEN] = "", path[NPV_SYSFS_PATH_MAX];
    const char *dir = state_dir_or_default(state_dir);
    const char *vfio = bus->vfio_driver;
    int ret = npv_sysfs_dev_driver(ctx, bus->bus, canon, cur, sizeof(cur));
    if (ret < 0)
        return ret;
    if (npv_sysfs_path(ctx, path, sizeof(path), "bus/%s/devices/%s/driver_override", bus->bus,
                       canon) == 0)
        npv_sysfs_read_str(path, override, sizeof(override));
    int remembered = state_load(dir, canon, prev, sizeof(prev));
    if (remembered < 0) {
        npv_err(ctx, "%s: unreadable state file in %s: %s", canon, dir, npv_strerror(remembered));
        return remembered;
    }
    bool on_vfio = cur[0] != '\0' && npv_pci_driver_is_vfio(cur);
    if (!on_vfio && strcmp(override, vfio) != 0) {
        npv_info(ctx, "%s: not bound to %s (driver: %s); nothing to undo", canon, vfio,
                 cur[0] ? cur : "none");
        state_remove(dir, canon);
        return 0;
    }
    if (on_vfio) {
        ret = dev_write(ctx, bus, canon, "driver/unbind", canon);
        if (ret == 0)
            ret = wait_driver(ctx, bus, canon, "", now, sizeof(now));
        if (ret < 0) {
            npv_err(ctx, "%s: cannot unbind from %s: %s", canon, cur, npv_strerror(ret));
            return ret;
        }
    }
    ret = clear_override(ctx, bus, canon);
    if (ret < 0) {
        npv_err(ctx, "%s: cannot clear driver_override: %s", canon, npv_strerror(ret));
        return ret;
    }
    if (remembered && prev[0] == '\0') {
        npv_info(ctx, "%s: left unbound, as it was before %s", canon, vfio);
    } else if (remembered) {
        ret = driver_bind(ctx, bus, prev, canon);
        if (ret == 0)
            ret = wait_driver(ctx, bus, canon, prev, now, sizeof(now));
        if (ret < 0) {
            npv_err(ctx, "%s: cannot return to %s (driver now: %s): %s", canon, prev,
                    now[0] ? now : "none", npv_strerror(ret));
            return ret;
        }
    } else {
        /* Nothing remembered: let the kernel's id tables choose, as at boot. */
        npv_info(ctx, "%s: no previous driver recorded in %s; asking drivers_probe", canon, dir);
        ret = bus_write(ctx, bus, "drivers_probe", canon);
        if (ret < 0) {
            npv_err(ctx, "%s: drivers_probe: %s", canon, npv_strerror(ret));
            return ret;
        }
    }
    state_remove(dir, canon);
    return 0;
}

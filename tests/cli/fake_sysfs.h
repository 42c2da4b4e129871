/* SPDX-License-Identifier: MIT */
/*
 * A fake sysfs tree with a fake kernel: a thread that services the files a
 * real kernel would (drivers_probe, drivers/X/bind, drivers/X/unbind, with
 * driver_override honoured) by moving the driver symlinks, and synchronous
 * hugepage pools (nr_hugepages is a FIFO the pool's thread answers, so the
 * value read back right after a write is the pool's verdict, as with the
 * kernel's synchronous allocation).
 */
#ifndef NPV_TEST_FAKE_SYSFS_H
#define NPV_TEST_FAKE_SYSFS_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FAKE_MAX_IDS   16
#define FAKE_MAX_POOLS 4

struct fake_pool {
    char dir[PATH_MAX];
    uint64_t capacity; /* pages the fake kernel can find */
    pthread_t thread;
    bool running;
    struct fake_sysfs *fs;
};

struct fake_sysfs {
    char root[PATH_MAX];
    char state_dir[PATH_MAX + 16];
    char proc[PATH_MAX + 8]; /* a fake /proc for --proc-root: mountinfo, meminfo, swaps, PID/fd */
    struct {
        uint16_t vendor, device;
        char driver[64];
    } ids[FAKE_MAX_IDS]; /* the drivers' id tables: who drivers_probe picks */
    size_t nids;
    struct {
        char compatible[64];
        char driver[64];
    } compats[FAKE_MAX_IDS]; /* the platform drivers' of_match tables */
    size_t ncompats;
    atomic_bool vfio_platform_reset_required; /* vfio-platform's probe fails while set */
    struct fake_pool pools[FAKE_MAX_POOLS];
    size_t npools;
    pthread_t kernel;
    bool kernel_running;
    atomic_bool stop;
};

/*
 * A fresh tree under $TMPDIR with bus/{pci,platform}/{devices,drivers,drivers_probe}
 * and kernel/iommu_groups.
 */
void fake_sysfs_init(struct fake_sysfs *fs);
/* Stop the fake kernel and pools, remove the tree and the state directory. */
void fake_sysfs_destroy(struct fake_sysfs *fs);

/* bus/pci/drivers/NAME with bind and unbind. */
void fake_add_driver(struct fake_sysfs *fs, const char *name);
/* NAME claims vendor:device when drivers_probe runs without an override. */
void fake_add_id(struct fake_sysfs *fs, uint16_t vendor, uint16_t device, const char *driver);
/*
 * A PCI function: driver NULL for unbound (the driver is added if missing),
 * group -1 for none, numa -1 for unknown.
 */
void fake_add_func(struct fake_sysfs *fs, const char *addr, uint16_t vendor, uint16_t device,
                   uint32_t class_code, const char *driver, int group, int numa);

/* bus/platform/drivers/NAME with bind and unbind. */
void fake_add_platform_driver(struct fake_sysfs *fs, const char *name);
/* NAME claims a platform device with this compatible string when drivers_probe runs without an
 * override. */
void fake_add_compat(struct fake_sysfs *fs, const char *compatible, const char *driver);
/*
 * A platform device under devices/platform with bus/platform/devices/NAME,
 * driver_override, and (compatible not NULL) an of_node whose compatible
 * file holds the NULL-terminated list of strings NUL-separated; driver NULL
 * for unbound, group -1 for none.
 */
void fake_add_platform(struct fake_sysfs *fs, const char *name, const char *const *compatible,
                       const char *driver, int group);
/*
 * module/vfio_platform/parameters/reset_required; while required, the fake
 * vfio-platform refuses every device (no reset module knows any).
 */
void fake_set_vfio_platform_reset_required(struct fake_sysfs *fs, bool required);

/*
 * A hugepage pool of size_kb pages (node -1: the machine-wide one). With
 * fifo, nr_hugepages is answered by a thread granting at most capacity;
 * without, plain files holding nr = free = capacity (read-only use).
 */
void fake_add_pool(struct fake_sysfs *fs, int node, unsigned size_kb, uint64_t capacity, bool fifo);

void fake_kernel_start(struct fake_sysfs *fs);

/*
 * Children a device's driver makes, with the subsystem link the kernel gives
 * them, under the device dev (a platform name or PCI address) at rel ("" for
 * directly below it, else e.g. "nvme/nvme0"):
 */
/* net/IFNAME with flags (IFF_UP when up) and operstate. */
void fake_add_net(struct fake_sysfs *fs, const char *dev, const char *ifname, bool up);
/* A block device or partition NAME with dev = majmin ("259:2"). */
void fake_add_block(struct fake_sysfs *fs, const char *dev, const char *rel, const char *name,
                    const char *majmin);
/* A DRM (subsystem "drm") or accel node NAME with a dev file. */
void fake_add_node(struct fake_sysfs *fs, const char *dev, const char *subsystem, const char *name);
/* The machine has no IOMMU: class/iommu emptied (init gives it dmar0). */
void fake_remove_iommu(struct fake_sysfs *fs);
/* A line in proc/self/mountinfo: majmin mounted on mountpoint from source. */
void fake_mount(struct fake_sysfs *fs, const char *majmin, const char *source,
                const char *mountpoint);
/* proc/PID with comm and fd/3 a link to path (/dev/dri/card0). */
void fake_open_file(struct fake_sysfs *fs, int pid, const char *comm, const char *path);
/* proc/meminfo with MemAvailable and Hugetlb (kB); init writes 8 GiB and 0. */
void fake_set_meminfo(struct fake_sysfs *fs, uint64_t available_kb, uint64_t hugetlb_kb);
/*
 * Every path of the tree and the state directory with its link target or
 * contents (FIFOs by name only), sorted: equal snapshots, nothing changed.
 * Returns a malloc'd string.
 */
char *fake_snapshot(struct fake_sysfs *fs);

/* The driver link's name, "" when unbound (a platform device of that name first, else PCI). */
void fake_driver_of(struct fake_sysfs *fs, const char *addr, char *buf, size_t len);
/* Wait (bounded, generous) until addr's driver is want; true when it is. */
bool fake_wait_driver(struct fake_sysfs *fs, const char *addr, const char *want);
/* Read a file of the tree (relative path) into buf; -errno on failure. */
int fake_read(struct fake_sysfs *fs, const char *rel, char *buf, size_t len);

#endif

/* SPDX-License-Identifier: MIT */
/* The fake sysfs tree and the fake kernel that services it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "fake_sysfs.h"

#define DEV_PARENT  "devices/pci0000:00"
#define PLAT_PARENT "devices/platform"

/* Where a bus keeps its devices' real directories. */
static const char *parent_of(const char *bus)
{
    return strcmp(bus, "platform") == 0 ? PLAT_PARENT : DEV_PARENT;
}

static void pathf(struct fake_sysfs *fs, char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/*
 * Used by the fake kernel's threads too, so no Check call here: a thread that
 * holds Check's lock when the test forks the CLI would deadlock the child.
 */
static void pathf(struct fake_sysfs *fs, char *buf, size_t len, const char *fmt, ...)
{
    int n = snprintf(buf, len, "%s/", fs->root);
    va_list ap;
    va_start(ap, fmt);
    int m = n < 0 || (size_t)n >= len ? -1 : vsnprintf(buf + n, len - (size_t)n, fmt, ap);
    va_end(ap);
    if (m < 0 || (size_t)m >= len - (size_t)n)
        abort();
}

static void mkdirs(const char *path)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        ck_assert_msg(mkdir(buf, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", buf,
                      strerror(errno));
        *p = '/';
    }
    ck_assert_msg(mkdir(buf, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", buf, strerror(errno));
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "we");
    ck_assert_msg(f != NULL, "fopen %s: %s", path, strerror(errno));
    fputs(text, f);
    ck_assert(fclose(f) == 0);
}

static void symlink_ok(const char *target, const char *link)
{
    ck_assert_msg(symlink(target, link) == 0, "symlink %s -> %s: %s", link, target,
                  strerror(errno));
}

void fake_sysfs_init(struct fake_sysfs *fs)
{
    memset(fs, 0, sizeof(*fs));
    const char *tmp = getenv("TMPDIR");
    snprintf(fs->root, sizeof(fs->root), "%s/npv-sysfs-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    ck_assert_msg(mkdtemp(fs->root) != NULL, "mkdtemp: %s", strerror(errno));
    /* The state directory lives outside the tree: it is npuvfio's, not the kernel's. */
    snprintf(fs->state_dir, sizeof(fs->state_dir), "%s.state", fs->root);
    char p[PATH_MAX];
    pathf(fs, p, sizeof(p), "bus/pci/devices");
    mkdirs(p);
    pathf(fs, p, sizeof(p), "bus/pci/drivers");
    mkdirs(p);
    pathf(fs, p, sizeof(p), "bus/pci/drivers_probe");
    write_file(p, "");
    pathf(fs, p, sizeof(p), "kernel/iommu_groups");
    mkdirs(p);
    pathf(fs, p, sizeof(p), DEV_PARENT);
    mkdirs(p);
    pathf(fs, p, sizeof(p), "bus/platform/devices");
    mkdirs(p);
    pathf(fs, p, sizeof(p), "bus/platform/drivers");
    mkdirs(p);
    pathf(fs, p, sizeof(p), "bus/platform/drivers_probe");
    write_file(p, "");
    pathf(fs, p, sizeof(p), PLAT_PARENT);
    mkdirs(p);
    pathf(fs, p, sizeof(p), "firmware/devicetree/base");
    mkdirs(p);
    /* An IOMMU is registered, as on a machine booted with it on. */
    pathf(fs, p, sizeof(p), "class/iommu/dmar0");
    mkdirs(p);
    snprintf(fs->proc, sizeof(fs->proc), "%s/proc", fs->root);
    pathf(fs, p, sizeof(p), "proc/self");
    mkdirs(p);
    pathf(fs, p, sizeof(p), "proc/self/mountinfo");
    write_file(p, "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n");
    pathf(fs, p, sizeof(p), "proc/swaps");
    write_file(p, "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n");
    fake_set_meminfo(fs, 8u << 20, 0);
    atomic_init(&fs->stop, false);
    atomic_init(&fs->vfio_platform_reset_required, false);
}

void fake_set_meminfo(struct fake_sysfs *fs, uint64_t available_kb, uint64_t hugetlb_kb)
{
    char p[PATH_MAX], text[256];
    snprintf(text, sizeof(text),
             "MemTotal:       %" PRIu64 " kB\nMemFree:        %" PRIu64
             " kB\nMemAvailable:   %" PRIu64 " kB\nHugetlb:        %" PRIu64 " kB\n",
             available_kb * 2, available_kb, available_kb, hugetlb_kb);
    pathf(fs, p, sizeof(p), "proc/meminfo");
    write_file(p, text);
}

void fake_remove_iommu(struct fake_sysfs *fs)
{
    char p[PATH_MAX];
    pathf(fs, p, sizeof(p), "class/iommu/dmar0");
    ck_assert(rmdir(p) == 0);
}

void fake_mount(struct fake_sysfs *fs, const char *majmin, const char *source,
                const char *mountpoint)
{
    char p[PATH_MAX];
    pathf(fs, p, sizeof(p), "proc/self/mountinfo");
    FILE *f = fopen(p, "ae");
    ck_assert(f != NULL);
    fprintf(f, "40 22 %s / %s rw,relatime shared:5 - ext4 %s rw\n", majmin, mountpoint, source);
    ck_assert(fclose(f) == 0);
}

void fake_open_file(struct fake_sysfs *fs, int pid, const char *comm, const char *path)
{
    char p[PATH_MAX];
    pathf(fs, p, sizeof(p), "proc/%d/fd", pid);
    mkdirs(p);
    pathf(fs, p, sizeof(p), "proc/%d/fd/3", pid);
    symlink_ok(path, p);
    pathf(fs, p, sizeof(p), "proc/%d/comm", pid);
    char line[64];
    snprintf(line, sizeof(line), "%s\n", comm);
    write_file(p, line);
}

static void add_bus_driver(struct fake_sysfs *fs, const char *bus, const char *name)
{
    char p[PATH_MAX];
    pathf(fs, p, sizeof(p), "bus/%s/drivers/%s", bus, name);
    struct stat st;
    if (stat(p, &st) == 0)
        return;
    mkdirs(p);
    pathf(fs, p, sizeof(p), "bus/%s/drivers/%s/bind", bus, name);
    write_file(p, "");
    pathf(fs, p, sizeof(p), "bus/%s/drivers/%s/unbind", bus, name);
    write_file(p, "");
}

void fake_add_driver(struct fake_sysfs *fs, const char *name)
{
    add_bus_driver(fs, "pci", name);
}

void fake_add_platform_driver(struct fake_sysfs *fs, const char *name)
{
    add_bus_driver(fs, "platform", name);
}

void fake_add_compat(struct fake_sysfs *fs, const char *compatible, const char *driver)
{
    ck_assert(fs->ncompats < FAKE_MAX_IDS);
    snprintf(fs->compats[fs->ncompats].compatible, sizeof(fs->compats[0].compatible), "%s",
             compatible);
    snprintf(fs->compats[fs->ncompats].driver, sizeof(fs->compats[0].driver), "%s", driver);
    fs->ncompats++;
    fake_add_platform_driver(fs, driver);
}

void fake_set_vfio_platform_reset_required(struct fake_sysfs *fs, bool required)
{
    char p[PATH_MAX];
    pathf(fs, p, sizeof(p), "module/vfio_platform/parameters");
    mkdirs(p);
    pathf(fs, p, sizeof(p), "module/vfio_platform/parameters/reset_required");
    write_file(p, required ? "Y\n" : "N\n");
    atomic_store(&fs->vfio_platform_reset_required, required);
}

void fake_add_id(struct fake_sysfs *fs, uint16_t vendor, uint16_t device, const char *driver)
{
    ck_assert(fs->nids < FAKE_MAX_IDS);
    fs->ids[fs->nids].vendor = vendor;
    fs->ids[fs->nids].device = device;
    snprintf(fs->ids[fs->nids].driver, sizeof(fs->ids[0].driver), "%s", driver);
    fs->nids++;
    fake_add_driver(fs, driver);
}

/* What the kernel does in really_probe / device_release_driver: both links at once. */
static void link_driver(struct fake_sysfs *fs, const char *bus, const char *addr,
                        const char *driver)
{
    char target[PATH_MAX], link[PATH_MAX];
    snprintf(target, sizeof(target), "../../../bus/%s/drivers/%s", bus, driver);
    pathf(fs, link, sizeof(link), "%s/%s/driver", parent_of(bus), addr);
    if (symlink(target, link) != 0)
        return;
    snprintf(target, sizeof(target), "../../../../%s/%s", parent_of(bus), addr);
    pathf(fs, link, sizeof(link), "bus/%s/drivers/%s/%s", bus, driver, addr);
    if (symlink(target, link) != 0)
        return;
}

static void unlink_driver(struct fake_sysfs *fs, const char *bus, const char *addr,
                          const char *driver)
{
    char link[PATH_MAX];
    pathf(fs, link, sizeof(link), "%s/%s/driver", parent_of(bus), addr);
    unlink(link);
    pathf(fs, link, sizeof(link), "bus/%s/drivers/%s/%s", bus, driver, addr);
    unlink(link);
}

void fake_add_func(struct fake_sysfs *fs, const char *addr, uint16_t vendor, uint16_t device,
                   uint32_t class_code, const char *driver, int group, int numa)
{
    char p[PATH_MAX];
    pathf(fs, p, sizeof(p), DEV_PARENT "/%s", addr);
    mkdirs(p);
    struct {
        const char *name;
        char value[32];
    } attrs[] = {
        {"vendor", ""},
        {"device", ""},
        {"class", ""},
        {"subsystem_vendor", ""},
        {"subsystem_device", ""},
        {"numa_node", ""},
        {"driver_override", "(null)\n"},
    };
    snprintf(attrs[0].value, sizeof(attrs[0].value), "0x%04x\n", vendor);
    snprintf(attrs[1].value, sizeof(attrs[1].value), "0x%04x\n", device);
    snprintf(attrs[2].value, sizeof(attrs[2].value), "0x%06x\n", class_code);
    snprintf(attrs[3].value, sizeof(attrs[3].value), "0x%04x\n", vendor);
    snprintf(attrs[4].value, sizeof(attrs[4].value), "0x%04x\n", device);
    snprintf(attrs[5].value, sizeof(attrs[5].value), "%d\n", numa);
    for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
        pathf(fs, p, sizeof(p), DEV_PARENT "/%s/%s", addr, attrs[i].name);
        write_file(p, attrs[i].value);
    }
    pathf(fs, p, sizeof(p), "bus/pci/devices/%s", addr);
    char target[PATH_MAX];
    snprintf(target, sizeof(target), "../../../" DEV_PARENT "/%s", addr);
    symlink_ok(target, p);
    if (group >= 0) {
        pathf(fs, p, sizeof(p), "kernel/iommu_groups/%d/devices", group);
        mkdirs(p);
        pathf(fs, p, sizeof(p), "kernel/iommu_groups/%d/devices/%s", group, addr);
        snprintf(target, sizeof(target), "../../../../" DEV_PARENT "/%s", addr);
        symlink_ok(target, p);
        pathf(fs, p, sizeof(p), DEV_PARENT "/%s/iommu_group", addr);
        snprintf(target, sizeof(target), "../../../kernel/iommu_groups/%d", group);
        symlink_ok(target, p);
    }
    if (driver != NULL) {
        fake_add_driver(fs, driver);
        link_driver(fs, "pci", addr, driver);
    }
}

void fake_add_platform(struct fake_sysfs *fs, const char *name, const char *const *compatible,
                       const char *driver, int group)
{
    char p[PATH_MAX], target[PATH_MAX];
    pathf(fs, p, sizeof(p), PLAT_PARENT "/%s", name);
    mkdirs(p);
    pathf(fs, p, sizeof(p), PLAT_PARENT "/%s/driver_override", name);
    write_file(p, "(null)\n");
    if (compatible != NULL) {
        /* The node's compatible property: NUL-terminated strings back to back. */
        pathf(fs, p, sizeof(p), "firmware/devicetree/base/%s", name);
        mkdirs(p);
        pathf(fs, p, sizeof(p), "firmware/devicetree/base/%s/compatible", name);
        FILE *f = fopen(p, "we");
        ck_assert_msg(f != NULL, "fopen %s: %s", p, strerror(errno));
        for (size_t i = 0; compatible[i] != NULL; i++)
            fwrite(compatible[i], 1, strlen(compatible[i]) + 1, f);
        ck_assert(fclose(f) == 0);
        pathf(fs, p, sizeof(p), PLAT_PARENT "/%s/of_node", name);
        snprintf(target, sizeof(target), "../../../firmware/devicetree/base/%s", name);
        symlink_ok(target, p);
    }
    pathf(fs, p, sizeof(p), "bus/platform/devices/%s", name);
    snprintf(target, sizeof(target), "../../../" PLAT_PARENT "/%s", name);
    symlink_ok(target, p);
    if (group >= 0) {
        pathf(fs, p, sizeof(p), "kernel/iommu_groups/%d/devices", group);
        mkdirs(p);
        pathf(fs, p, sizeof(p), "kernel/iommu_groups/%d/devices/%s", group, name);
        snprintf(target, sizeof(target), "../../../../" PLAT_PARENT "/%s", name);
        symlink_ok(target, p);
        pathf(fs, p, sizeof(p), PLAT_PARENT "/%s/iommu_group", name);
        snprintf(target, sizeof(target), "../../../kernel/iommu_groups/%d", group);
        symlink_ok(target, p);
    }
    if (driver != NULL) {
        fake_add_platform_driver(fs, driver);
        link_driver(fs, "platform", name, driver);
    }
}

static const char *bus_of(struct fake_sysfs *fs, const char *addr);

/* A child device of dev at rel/name with its subsystem link; its path into dir. */
static void add_child(struct fake_sysfs *fs, const char *dev, const char *rel, const char *name,
                      const char *subsystem, char *dir, size_t len)
{
    pathf(fs, dir, len, "%s/%s/%s%s%s", parent_of(bus_of(fs, dev)), dev, rel, rel[0] ? "/" : "",
          name);
    mkdirs(dir);
    char p[PATH_MAX + 16], target[64];
    snprintf(p, sizeof(p), "%s/subsystem", dir);
    snprintf(target, sizeof(target), "../../../../../class/%s", subsystem);
    symlink_ok(target, p);
}

void fake_add_net(struct fake_sysfs *fs, const char *dev, const char *ifname, bool up)
{
    char dir[PATH_MAX], p[PATH_MAX + 16];
    add_child(fs, dev, "net", ifname, "net", dir, sizeof(dir));
    snprintf(p, sizeof(p), "%s/flags", dir);
    write_file(p, up ? "0x1003\n" : "0x1002\n");
    snprintf(p, sizeof(p), "%s/operstate", dir);
    write_file(p, up ? "up\n" : "down\n");
}

void fake_add_block(struct fake_sysfs *fs, const char *dev, const char *rel, const char *name,
                    const char *majmin)
{
    char dir[PATH_MAX], p[PATH_MAX + 16], line[32];
    add_child(fs, dev, rel, name, "block", dir, sizeof(dir));
    snprintf(p, sizeof(p), "%s/dev", dir);
    snprintf(line, sizeof(line), "%s\n", majmin);
    write_file(p, line);
    snprintf(p, sizeof(p), "%s/holders", dir);
    mkdirs(p);
}

void fake_add_node(struct fake_sysfs *fs, const char *dev, const char *subsystem, const char *name)
{
    char dir[PATH_MAX], p[PATH_MAX + 16];
    add_child(fs, dev, subsystem, name, subsystem, dir, sizeof(dir));
    snprintf(p, sizeof(p), "%s/dev", dir);
    write_file(p, strcmp(subsystem, "drm") == 0 ? "226:0\n" : "261:0\n");
}

struct snap {
    char *buf;
    size_t len, cap;
};
static struct snap *snap_now;

static void snap_add(const char *text)
{
    size_t n = strlen(text);
    if (snap_now->len + n + 1 > snap_now->cap) {
        snap_now->cap = (snap_now->len + n + 1) * 2;
        snap_now->buf = realloc(snap_now->buf, snap_now->cap);
        ck_assert(snap_now->buf != NULL);
    }
    memcpy(snap_now->buf + snap_now->len, text, n + 1);
    snap_now->len += n;
}

static int snap_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)ftw;
    char line[PATH_MAX * 2 + 64];
    if (flag == FTW_SL) {
        char target[PATH_MAX];
        ssize_t n = readlink(path, target, sizeof(target) - 1);
        target[n < 0 ? 0 : n] = '\0';
        snprintf(line, sizeof(line), "%s -> %s\n", path, target);
        snap_add(line);
    } else if (S_ISREG(st->st_mode)) {
        snprintf(line, sizeof(line), "%s = ", path);
        snap_add(line);
        char content[4096] = "";
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            ssize_t n = read(fd, content, sizeof(content) - 1);
            content[n < 0 ? 0 : n] = '\0';
            close(fd);
        }
        snap_add(content);
        snap_add("\n");
    } else {
        snprintf(line, sizeof(line), "%s\n", path);
        snap_add(line);
    }
    return 0;
}

char *fake_snapshot(struct fake_sysfs *fs)
{
    struct snap s = {0};
    snap_now = &s;
    snap_add("");
    nftw(fs->root, snap_entry, 16, FTW_PHYS);
    snap_add("-- state --\n");
    nftw(fs->state_dir, snap_entry, 16, FTW_PHYS);
    snap_now = NULL;
    return s.buf;
}

int fake_read(struct fake_sysfs *fs, const char *rel, char *buf, size_t len)
{
    char p[PATH_MAX];
    pathf(fs, p, sizeof(p), "%s", rel);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, len - 1);
    int err = n < 0 ? -errno : 0;
    close(fd);
    if (n < 0)
        return err;
    buf[n] = '\0';
    return (int)n;
}

static void bus_driver_of(struct fake_sysfs *fs, const char *bus, const char *addr, char *buf,
                          size_t len)
{
    char p[PATH_MAX], target[PATH_MAX];
    pathf(fs, p, sizeof(p), "%s/%s/driver", parent_of(bus), addr);
    ssize_t n = readlink(p, target, sizeof(target) - 1);
    if (n < 0) {
        buf[0] = '\0';
        return;
    }
    target[n] = '\0';
    const char *s = strrchr(target, '/');
    /* A driver name that does not fit is no name any test waits for. */
    int w = snprintf(buf, len, "%s", s ? s + 1 : target);
    if (w < 0 || (size_t)w >= len)
        buf[0] = '\0';
}

/* Test devices' names never collide across buses: a platform device is looked for first. */
static const char *bus_of(struct fake_sysfs *fs, const char *addr)
{
    char p[PATH_MAX];
    struct stat st;
    if (strchr(addr, '/') != NULL)
        return "pci";
    pathf(fs, p, sizeof(p), PLAT_PARENT "/%s", addr);
    return stat(p, &st) == 0 ? "platform" : "pci";
}

void fake_driver_of(struct fake_sysfs *fs, const char *addr, char *buf, size_t len)
{
    bus_driver_of(fs, bus_of(fs, addr), addr, buf, len);
}

bool fake_wait_driver(struct fake_sysfs *fs, const char *addr, const char *want)
{
    char now[64];
    /* Generous: the machine is shared; the fake kernel normally answers in a few ms. */
    for (int i = 0; i < 30000; i++) {
        fake_driver_of(fs, addr, now, sizeof(now));
        if (strcmp(now, want) == 0)
            return true;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return false;
}

/* ---- the fake kernel ---- */

/* Take a command written to an attribute file: its text, and the file emptied again. */
static bool take_command(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, len - 1);
    if (n <= 0) {
        close(fd);
        return false;
    }
    buf[n] = '\0';
    if (ftruncate(fd, 0) != 0) {
        close(fd);
        return false;
    }
    close(fd);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    return n > 0;
}

static void read_override(struct fake_sysfs *fs, const char *bus, const char *addr, char *buf,
                          size_t len)
{
    char rel[PATH_MAX];
    snprintf(rel, sizeof(rel), "%s/%s/driver_override", parent_of(bus), addr);
    if (fake_read(fs, rel, buf, len) < 0)
        buf[0] = '\0';
    size_t n = strlen(buf);
    while (n > 0 && buf[n - 1] == '\n')
        buf[--n] = '\0';
    if (strcmp(buf, "(null)") == 0)
        buf[0] = '\0';
}

static bool device_exists(struct fake_sysfs *fs, const char *bus, const char *addr)
{
    char p[PATH_MAX];
    struct stat st;
    if (strchr(addr, '/') != NULL)
        return false;
    pathf(fs, p, sizeof(p), "%s/%s", parent_of(bus), addr);
    return stat(p, &st) == 0;
}

static const char *pci_id_driver(struct fake_sysfs *fs, const char *addr)
{
    char rel[PATH_MAX], v[32], d[32];
    snprintf(rel, sizeof(rel), DEV_PARENT "/%s/vendor", addr);
    if (fake_read(fs, rel, v, sizeof(v)) < 0)
        return NULL;
    snprintf(rel, sizeof(rel), DEV_PARENT "/%s/device", addr);
    if (fake_read(fs, rel, d, sizeof(d)) < 0)
        return NULL;
    unsigned long vendor = strtoul(v, NULL, 16), device = strtoul(d, NULL, 16);
    for (size_t i = 0; i < fs->nids; i++)
        if (fs->ids[i].vendor == vendor && fs->ids[i].device == device)
            return fs->ids[i].driver;
    return NULL;
}

/* of_match: the first of the node's compatible strings some driver lists. */
static const char *compat_driver(struct fake_sysfs *fs, const char *name)
{
    char p[PATH_MAX], buf[512];
    pathf(fs, p, sizeof(p), PLAT_PARENT "/%s/of_node/compatible", name);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    for (const char *c = buf; c < buf + n; c += strlen(c) + 1)
        for (size_t i = 0; i < fs->ncompats; i++)
            if (strcmp(fs->compats[i].compatible, c) == 0)
                return fs->compats[i].driver;
    return NULL;
}

static const char *id_driver(struct fake_sysfs *fs, const char *bus, const char *addr)
{
    return strcmp(bus, "platform") == 0 ? compat_driver(fs, addr) : pci_id_driver(fs, addr);
}

static bool driver_exists(struct fake_sysfs *fs, const char *bus, const char *driver)
{
    char p[PATH_MAX];
    struct stat st;
    pathf(fs, p, sizeof(p), "bus/%s/drivers/%s", bus, driver);
    return stat(p, &st) == 0;
}

/* driver_match_device: an override names the only driver that may bind; else the id tables. */
static bool driver_matches(struct fake_sysfs *fs, const char *bus, const char *addr,
                           const char *driver)
{
    char override[64];
    read_override(fs, bus, addr, override, sizeof(override));
    if (override[0] != '\0')
        return strcmp(override, driver) == 0;
    const char *id = id_driver(fs, bus, addr);
    return id != NULL && strcmp(id, driver) == 0;
}

/*
 * The driver's probe: vfio-platform fails it, as vfio_platform_probe does,
 * while reset_required is set and no reset module knows the device.
 */
static bool probe_accepts(struct fake_sysfs *fs, const char *bus, const char *driver)
{
    return !(strcmp(bus, "platform") == 0 && strcmp(driver, "vfio-platform") == 0 &&
             atomic_load(&fs->vfio_platform_reset_required));
}

static void do_probe(struct fake_sysfs *fs, const char *bus, const char *addr)
{
    char cur[64], override[64];
    if (!device_exists(fs, bus, addr))
        return;
    bus_driver_of(fs, bus, addr, cur, sizeof(cur));
    if (cur[0] != '\0')
        return;
    read_override(fs, bus, addr, override, sizeof(override));
    const char *drv = override[0] ? override : id_driver(fs, bus, addr);
    if (drv != NULL && driver_exists(fs, bus, drv) && probe_accepts(fs, bus, drv))
        link_driver(fs, bus, addr, drv);
}

static void do_bind(struct fake_sysfs *fs, const char *bus, const char *driver, const char *addr)
{
    char cur[64];
    if (!device_exists(fs, bus, addr))
        return;
    bus_driver_of(fs, bus, addr, cur, sizeof(cur));
    if (cur[0] == '\0' && driver_matches(fs, bus, addr, driver) && probe_accepts(fs, bus, driver))
        link_driver(fs, bus, addr, driver);
}

static void do_unbind(struct fake_sysfs *fs, const char *bus, const char *driver, const char *addr)
{
    char cur[64];
    if (!device_exists(fs, bus, addr))
        return;
    bus_driver_of(fs, bus, addr, cur, sizeof(cur));
    if (strcmp(cur, driver) == 0)
        unlink_driver(fs, bus, addr, driver);
}

static void service_bus(struct fake_sysfs *fs, const char *bus)
{
    char p[PATH_MAX], cmd[256];
    pathf(fs, p, sizeof(p), "bus/%s/drivers_probe", bus);
    if (take_command(p, cmd, sizeof(cmd)))
        do_probe(fs, bus, cmd);
    pathf(fs, p, sizeof(p), "bus/%s/drivers", bus);
    DIR *dir = opendir(p);
    if (dir == NULL)
        return;
    struct dirent *de;
    while ((de = readdir(dir)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        pathf(fs, p, sizeof(p), "bus/%s/drivers/%s/unbind", bus, de->d_name);
        if (take_command(p, cmd, sizeof(cmd)))
            do_unbind(fs, bus, de->d_name, cmd);
        pathf(fs, p, sizeof(p), "bus/%s/drivers/%s/bind", bus, de->d_name);
        if (take_command(p, cmd, sizeof(cmd)))
            do_bind(fs, bus, de->d_name, cmd);
    }
    closedir(dir);
}

static void *kernel_main(void *arg)
{
    struct fake_sysfs *fs = arg;
    while (!atomic_load(&fs->stop)) {
        service_bus(fs, "pci");
        service_bus(fs, "platform");
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

void fake_kernel_start(struct fake_sysfs *fs)
{
    ck_assert(pthread_create(&fs->kernel, NULL, kernel_main, fs) == 0);
    fs->kernel_running = true;
}

/* ---- hugepage pools ---- */

static void *pool_main(void *arg)
{
    struct fake_pool *pool = arg;
    char fifo[PATH_MAX + 16], free_path[PATH_MAX + 16], buf[64];
    snprintf(fifo, sizeof(fifo), "%s/nr_hugepages", pool->dir);
    snprintf(free_path, sizeof(free_path), "%s/free_hugepages", pool->dir);
    while (!atomic_load(&pool->fs->stop)) {
        /* The store: blocks until a writer comes, as the lib's write arrives. */
        int fd = open(fifo, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            break;
        size_t n = 0;
        ssize_t r;
        while (n < sizeof(buf) - 1 && (r = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0)
            n += (size_t)r;
        close(fd);
        if (atomic_load(&pool->fs->stop))
            break;
        buf[n] = '\0';
        uint64_t want = strtoull(buf, NULL, 10);
        uint64_t got = want < pool->capacity ? want : pool->capacity;
        snprintf(buf, sizeof(buf), "%" PRIu64 "\n", got);
        FILE *f = fopen(free_path, "we");
        if (f == NULL)
            break;
        fputs(buf, f);
        fclose(f);
        /* The show that follows: answered with what the pool now holds. */
        fd = open(fifo, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
            break;
        if (!atomic_load(&pool->fs->stop) && write(fd, buf, strlen(buf)) < 0) {
            close(fd);
            break;
        }
        close(fd);
    }
    return NULL;
}

void fake_add_pool(struct fake_sysfs *fs, int node, unsigned size_kb, uint64_t capacity, bool fifo)
{
    ck_assert(fs->npools < FAKE_MAX_POOLS);
    struct fake_pool *pool = &fs->pools[fs->npools++];
    pool->fs = fs;
    pool->capacity = capacity;
    if (node < 0)
        pathf(fs, pool->dir, sizeof(pool->dir), "kernel/mm/hugepages/hugepages-%ukB", size_kb);
    else
        pathf(fs, pool->dir, sizeof(pool->dir),
              "devices/system/node/node%d/hugepages/hugepages-%ukB", node, size_kb);
    mkdirs(pool->dir);
    char p[PATH_MAX + 16], v[32];
    snprintf(v, sizeof(v), "%" PRIu64 "\n", fifo ? 0 : capacity);
    snprintf(p, sizeof(p), "%s/free_hugepages", pool->dir);
    write_file(p, v);
    snprintf(p, sizeof(p), "%s/nr_hugepages", pool->dir);
    if (!fifo) {
        write_file(p, v);
        return;
    }
    ck_assert(mkfifo(p, 0600) == 0);
    ck_assert(pthread_create(&pool->thread, NULL, pool_main, pool) == 0);
    pool->running = true;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void fake_sysfs_destroy(struct fake_sysfs *fs)
{
    atomic_store(&fs->stop, true);
    if (fs->kernel_running)
        pthread_join(fs->kernel, NULL);
    for (size_t i = 0; i < fs->npools; i++) {
        struct fake_pool *pool = &fs->pools[i];
        if (!pool->running)
            continue;
        /*
         * O_RDWR on a FIFO never blocks and releases the pool's blocked open on
         * either side; closing it again ends the pool's read. Repeat until the
         * thread has seen the stop flag, wherever it was.
         */
        char p[PATH_MAX + 16];
        snprintf(p, sizeof(p), "%s/nr_hugepages", pool->dir);
        while (pthread_tryjoin_np(pool->thread, NULL) != 0) {
            int fd = open(p, O_RDWR | O_NONBLOCK | O_CLOEXEC);
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
            if (fd >= 0)
                close(fd);
        }
    }
    nftw(fs->root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    nftw(fs->state_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* SPDX-License-Identifier: MIT */
/* Is the host using a device: interfaces, block devices, DRM/accel nodes; is there an IOMMU. */
#include <ctype.h>
#include <stdarg.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host_use.h"

/* Child devices sit a few levels below the function (host/target/lun/block/sda/sda1). */
#define MAX_DEPTH  10
#define IFF_UP_BIT 0x1 /* linux/if.h IFF_UP: the administrative state `ip link set up` sets */

static void add_reason(struct host_use *use, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void add_reason(struct host_use *use, const char *fmt, ...)
{
    if (use->n < HOST_USE_MAX) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(use->reasons[use->n], HOST_USE_REASON, fmt, ap);
        va_end(ap);
    }
    use->n++;
}

/* dir/leaf into buf; false when it does not fit (no such path is worth reading). */
static bool join(char *buf, size_t len, const char *dir, const char *leaf)
{
    int n = snprintf(buf, len, "%s/%s", dir, leaf);
    return n >= 0 && (size_t)n < len;
}

/* The first line of a small file, newline removed; false when unreadable. */
static bool read_line(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return false;
    bool ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    if (ok)
        buf[strcspn(buf, "\n")] = '\0';
    return ok;
}

/* The last component of the subsystem link: net, block, drm, accel, ... */
static bool subsystem_of(const char *dir, char *buf, size_t len)
{
    char p[PATH_MAX], target[PATH_MAX];
    if (!join(p, sizeof(p), dir, "subsystem"))
        return false;
    ssize_t n = readlink(p, target, sizeof(target) - 1);
    if (n <= 0)
        return false;
    target[n] = '\0';
    const char *s = strrchr(target, '/');
    int w = snprintf(buf, len, "%s", s ? s + 1 : target);
    return w >= 0 && (size_t)w < len;
}

static void check_net(const char *dir, const char *ifname, struct host_use *use)
{
    char p[PATH_MAX], v[64];
    if (!join(p, sizeof(p), dir, "flags"))
        return;
    if (read_line(p, v, sizeof(v))) {
        if (strtoul(v, NULL, 16) & IFF_UP_BIT)
            add_reason(use, "%s is up", ifname);
        return;
    }
    if (!join(p, sizeof(p), dir, "operstate"))
        return;
    if (read_line(p, v, sizeof(v)) && strcmp(v, "up") == 0)
        add_reason(use, "%s is up", ifname);
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
    char *o = s;
    for (char *i = s; *i; i++) {
        if (i[0] == '\\' && isdigit((unsigned char)i[1]) && isdigit((unsigned char)i[2]) &&
            isdigit((unsigned char)i[3])) {
            *o++ = (char)((i[1] - '0') * 64 + (i[2] - '0') * 8 + (i[3] - '0'));
            i += 3;
        } else {
            *o++ = *i;
        }
    }
    *o = '\0';
}

/*
 * Where the block device is mounted: by major:minor (field 3), or by the
 * mount source /dev/NAME after the " - " separator (btrfs shows an anonymous
 * device number in field 3).
 */
static bool mounted_on(struct npv_cli *cli, const char *majmin, const char *name, char *where,
                       size_t len)
{
    char p[PATH_MAX], line[4096], devpath[PATH_MAX];
    snprintf(p, sizeof(p), "%s/self/mountinfo", cli->proc_root);
    snprintf(devpath, sizeof(devpath), "/dev/%s", name);
    FILE *f = fopen(p, "re");
    if (f == NULL)
        return false;
    bool found = false;
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        char *save = NULL, *fields[6] = {0};
        char *tok = strtok_r(line, " \n", &save);
        for (int i = 0; i < 5 && tok != NULL; i++, tok = strtok_r(NULL, " \n", &save))
            fields[i] = tok;
        if (fields[4] == NULL)
            continue;
        while (tok != NULL && strcmp(tok, "-") != 0)
            tok = strtok_r(NULL, " \n", &save);
        char *source = NULL;
        if (tok != NULL && strtok_r(NULL, " \n", &save) != NULL)
            source = strtok_r(NULL, " \n", &save);
        if (strcmp(fields[2], majmin) == 0 || (source != NULL && strcmp(source, devpath) == 0)) {
            unescape(fields[4]);
            snprintf(where, len, "%s", fields[4]);
            found = true;
        }
    }
    fclose(f);
    return found;
}

static bool swapped_on(struct npv_cli *cli, const char *name)
{
    char p[PATH_MAX], line[1024], devpath[PATH_MAX];
    snprintf(p, sizeof(p), "%s/swaps", cli->proc_root);
    snprintf(devpath, sizeof(devpath), "/dev/%s", name);
    FILE *f = fopen(p, "re");
    if (f == NULL)
        return false;
    bool found = false;
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        size_t n = strcspn(line, " \t\n");
        found = n == strlen(devpath) && strncmp(line, devpath, n) == 0;
    }
    fclose(f);
    return found;
}

static void check_block(struct npv_cli *cli, const char *dir, const char *name,
                        struct host_use *use)
{
    char p[PATH_MAX], majmin[32], where[PATH_MAX];
    if (!join(p, sizeof(p), dir, "dev"))
        return;
    if (!read_line(p, majmin, sizeof(majmin)))
        return;
    if (mounted_on(cli, majmin, name, where, sizeof(where)))
        add_reason(use, "%s is mounted on %s", name, where);
    if (swapped_on(cli, name))
        add_reason(use, "%s is in use as swap", name);
    if (!join(p, sizeof(p), dir, "holders"))
        return;
    DIR *d = opendir(p);
    if (d == NULL)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        add_reason(use, "%s is held by %s (device mapper, RAID or LVM)", name, de->d_name);
        break;
    }
    closedir(d);
}

/* Which processes hold node (/dev/dri/card0) open: every /proc/PID/fd link. */
static void check_node(struct npv_cli *cli, const char *node, struct host_use *use)
{
    DIR *procs = opendir(cli->proc_root);
    if (procs == NULL)
        return;
    long first_pid = -1;
    size_t holders = 0;
    struct dirent *pe;
    while ((pe = readdir(procs)) != NULL) {
        char *end;
        long pid = strtol(pe->d_name, &end, 10);
        if (*end != '\0' || pid <= 0)
            continue;
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s/fd", cli->proc_root, pe->d_name);
        DIR *fds = opendir(p);
        if (fds == NULL) {
            if (errno == EACCES || errno == EPERM)
                use->unreadable_procs++;
            continue;
        }
        struct dirent *fe;
        bool holds = false;
        while (!holds && (fe = readdir(fds)) != NULL) {
            char link[PATH_MAX], target[PATH_MAX];
            if (fe->d_name[0] == '.')
                continue;
            if (!join(link, sizeof(link), p, fe->d_name))
                continue;
            ssize_t n = readlink(link, target, sizeof(target) - 1);
            if (n <= 0)
                continue;
            target[n] = '\0';
            holds = strcmp(target, node) == 0;
        }
        closedir(fds);
        if (holds && holders++ == 0)
            first_pid = pid;
    }
    closedir(procs);
    if (holders == 0)
        return;
    char p[PATH_MAX], comm[64] = "?";
    snprintf(p, sizeof(p), "%s/%ld/comm", cli->proc_root, first_pid);
    read_line(p, comm, sizeof(comm));
    if (holders == 1)
        add_reason(use, "%s is open by pid %ld (%s)", node, first_pid, comm);
    else
        add_reason(use, "%s is open by pid %ld (%s) and %zu other processes", node, first_pid, comm,
                   holders - 1);
}

static void walk(struct npv_cli *cli, const char *dir, int depth, struct host_use *use)
{
    if (depth > MAX_DEPTH)
        return;
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char child[PATH_MAX];
        struct stat st;
        if (snprintf(child, sizeof(child), "%s/%s", dir, de->d_name) >= (int)sizeof(child))
            continue;
        /* Links (driver, subsystem, iommu_group, device) lead out of the device: not followed. */
        if (lstat(child, &st) < 0 || !S_ISDIR(st.st_mode))
            continue;
        char sub[64], p[PATH_MAX + 8];
        if (subsystem_of(child, sub, sizeof(sub))) {
            if (!join(p, sizeof(p), child, "dev"))
                continue;
            bool has_node = access(p, F_OK) == 0;
            char node[PATH_MAX];
            if (strcmp(sub, "net") == 0) {
                check_net(child, de->d_name, use);
            } else if (strcmp(sub, "block") == 0) {
                check_block(cli, child, de->d_name, use);
            } else if (has_node && strcmp(sub, "drm") == 0) {
                snprintf(node, sizeof(node), "/dev/dri/%s", de->d_name);
                check_node(cli, node, use);
            } else if (has_node && strcmp(sub, "accel") == 0) {
                snprintf(node, sizeof(node), "/dev/accel/%s", de->d_name);
                check_node(cli, node, use);
            }
        }
        walk(cli, child, depth + 1, use);
    }
    closedir(d);
}

int host_use_check(struct npv_cli *cli, const char *bus, const char *name, struct host_use *use)
{
    memset(use, 0, sizeof(*use));
    char dir[PATH_MAX], real[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/bus/%s/devices/%s", npv_ctx_sysfs_root(cli->ctx), bus, name);
    if (realpath(dir, real) == NULL)
        return -errno;
    walk(cli, real, 0, use);
    return 0;
}

static bool dir_empty(const char *path)
{
    DIR *d = opendir(path);
    if (d == NULL)
        return true;
    struct dirent *de;
    bool empty = true;
    while (empty && (de = readdir(d)) != NULL)
        empty = de->d_name[0] == '.';
    closedir(d);
    return empty;
}

bool host_no_iommu_reason(struct npv_cli *cli, const char *bus, const char *name, char *buf,
                          size_t len)
{
    const char *root = npv_ctx_sysfs_root(cli->ctx);
    char p[PATH_MAX], v[16];
    struct stat st;
    snprintf(p, sizeof(p), "%s/bus/%s/devices/%s/iommu_group", root, bus, name);
    if (stat(p, &st) == 0)
        return false;
    snprintf(p, sizeof(p), "%s/module/vfio/parameters/enable_unsafe_noiommu_mode", root);
    if (read_line(p, v, sizeof(v)) && (v[0] == 'Y' || v[0] == '1'))
        return false;
    bool pci = strcmp(bus, "pci") == 0;
    snprintf(p, sizeof(p), "%s/class/iommu", root);
    if (dir_empty(p))
        snprintf(buf, len,
                 "%s: no IOMMU group: this machine runs without an IOMMU (%s/class/iommu is "
                 "empty), so %s cannot take any device; %s",
                 name, root, pci ? "vfio-pci" : "vfio-platform",
                 pci ? "turn on VT-d/AMD-Vi in the firmware and boot with intel_iommu=on or "
                       "amd_iommu=on"
                     : "enable the IOMMU's device-tree node and load its driver");
    else
        snprintf(buf, len,
                 "%s: no IOMMU group: the IOMMU does not cover this device, so %s cannot take "
                 "it%s",
                 name, pci ? "vfio-pci" : "vfio-platform",
                 pci ? " (is the IOMMU on for it: intel_iommu=on / amd_iommu=on, or iommu=pt?)"
                     : " (is it listed under the IOMMU in the device tree?)");
    return true;
}

/* SPDX-License-Identifier: MIT */
/*
 * npuvfio bind / unbind: move a PCI function to vfio-pci, or a platform
 * device to vfio-platform, and back to its previous driver.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <npuvfio/pci.h>

#include "cli.h"
#include "host_use.h"
#include "platform_cli.h"

static const char *default_state_dir(void)
{
    const char *env = getenv("NPUVFIO_STATE_DIR");
    return env != NULL && *env != '\0' ? env : "/run/npuvfio";
}

struct bind_opts {
    const char *addr;
    const char *state_dir;
    bool force;
    bool dry_run;
};

static void help(const char *cmd)
{
    bool bind = strcmp(cmd, "bind") == 0;
    printf("Usage: npuvfio %s [--dry-run]%s [--state-dir DIR] DEVICE\n\n", cmd,
           bind ? " [--force]" : "");
    if (bind)
        printf("Bind the PCI function ADDR (DDDD:BB:DD.F) to vfio-pci: write vfio-pci to its\n"
               "driver_override, unbind it from its current driver, write ADDR to drivers_probe,\n"
               "and wait until its driver link names vfio-pci.\n"
               "\n"
               "Refused, with the reason, root cause first: when the machine has no IOMMU or\n"
               "the IOMMU does not cover the device (no IOMMU group; VFIO's no-IOMMU mode,\n"
               "vfio enable_unsafe_noiommu_mode=1, lifts this), when the host is using the\n"
               "device (below), when vfio-pci is not loaded, or when another function of its\n"
               "IOMMU group is still on a host driver (the group would not be viable: VFIO only\n"
               "accepts members that are unbound or on vfio, pci-stub or pcieport). The\n"
               "blocking functions and their drivers are named.\n"
               "\n"
               "In use means: a network interface of the device is up (\"eth0 is up\"), one of\n"
               "its block devices or partitions is mounted, swapped on or held by device\n"
               "mapper/RAID (\"nvme0n1p2 is mounted on /home\"), or a process has one of its\n"
               "DRM or accel nodes open (\"/dev/dri/card0 is open by pid 1234 (Xorg)\"; needs\n"
               "root to see other users' processes). Mounts, swaps and open files are read\n"
               "from /proc (--proc-root).\n"
               "\n"
               "DEVICE may also be a platform device by its sysfs name (fdab0000.npu): it is\n"
               "moved to vfio-platform the same way (driver_override, unbind,\n"
               "bus/platform/drivers_probe), with the same checks. vfio-platform takes a device\n"
               "only when the kernel has a reset module for its compatible string or\n"
               "vfio-platform was loaded with reset_required=0 (none exists for the RK3588\n"
               "NPU); the refusal says so.\n"
               "\n"
               "  --force       bind even though the host is using the device\n"
               "  --dry-run     run the checks, print what would change, change nothing\n");
    else
        printf("Return the PCI function ADDR from vfio-pci to the driver it had before\n"
               "'npuvfio bind': unbind it from vfio-pci, clear driver_override, and bind the\n"
               "remembered driver (left unbound if it was unbound). Without a record, the\n"
               "kernel picks the driver through drivers_probe. A function not on vfio-pci is\n"
               "left alone: the command says \"nothing changed\" and exits 0. A platform device\n"
               "(DEVICE a sysfs name such as fdab0000.npu) returns from vfio-platform the same\n"
               "way.\n"
               "\n"
               "  --dry-run     print what would change, change nothing\n");
    printf("\n"
           "The previous driver is remembered in a state directory, one file per device\n"
           "named by its address or name and holding the driver's name:\n"
           "  --state-dir DIR   (env NPUVFIO_STATE_DIR; default /run/npuvfio; now %s)\n"
           "\n"
           "Exit status: 0 done (or nothing to do), 1 refused or failed, 2 the command line\n"
           "was wrong (a malformed address included).\n",
           default_state_dir());
}

static int parse(struct npv_cli *cli, int argc, char **argv, struct bind_opts *o)
{
    bool bind = strcmp(cli->cmd, "bind") == 0;
    static const struct option bind_opts[] = {
        {"help", no_argument, NULL, 'h'},
        {"state-dir", required_argument, NULL, 's'},
        {"dry-run", no_argument, NULL, 'n'},
        {"force", no_argument, NULL, 'f'},
        {NULL, 0, NULL, 0},
    };
    /* unbind has nothing to force: the same table without the last entry. */
    static const struct option unbind_opts[] = {
        {"help", no_argument, NULL, 'h'},
        {"state-dir", required_argument, NULL, 's'},
        {"dry-run", no_argument, NULL, 'n'},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = cli_getopt(cli, argc, argv, ":h", bind ? bind_opts : unbind_opts)) != -1) {
        switch (c) {
        case 'h':
            help(cli->cmd);
            return -1;
        case 's':
            o->state_dir = optarg;
            break;
        case 'n':
            o->dry_run = true;
            break;
        case 'f':
            o->force = true;
            break;
        default:
            return CLI_USAGE;
        }
    }
    if (optind >= argc)
        return cli_usage(cli, "missing the device (a PCI address DDDD:BB:DD.F or a platform "
                              "device name)");
    if (optind + 1 < argc)
        return cli_usage(cli, "unexpected argument '%s'", argv[optind + 1]);
    o->addr = argv[optind];
    return CLI_OK;
}

/*
 * What must hold before anything is written, root cause first: an IOMMU
 * (without one no modprobe helps), then the host not using the device.
 */
static int bind_checks(struct npv_cli *cli, const char *bus, const char *name,
                       const struct bind_opts *o)
{
    char why[768];
    if (host_no_iommu_reason(cli, bus, name, why, sizeof(why))) {
        cli_error(cli, "%s", why);
        return CLI_FAILED;
    }
    struct host_use use;
    int ret = host_use_check(cli, bus, name, &use);
    if (ret < 0)
        return cli_fail(cli, name, ret);
    if (use.unreadable_procs > 0)
        fprintf(stderr,
                "npuvfio bind: note: %zu processes' open files could not be read (not root): "
                "an open DRM/accel node of theirs would not be seen\n",
                use.unreadable_procs);
    if (use.n == 0)
        return CLI_OK;
    char list[HOST_USE_MAX * (HOST_USE_REASON + 2) + 32] = "";
    size_t off = 0;
    for (size_t i = 0; i < use.n && i < HOST_USE_MAX; i++)
        off +=
            (size_t)snprintf(list + off, sizeof(list) - off, "%s%s", i ? "; " : "", use.reasons[i]);
    if (use.n > HOST_USE_MAX)
        snprintf(list + off, sizeof(list) - off, "; and %zu more", use.n - HOST_USE_MAX);
    if (!o->force) {
        cli_error(cli, "%s is in use by the host: %s (--force to bind anyway)", name, list);
        return CLI_FAILED;
    }
    fprintf(stderr, "npuvfio bind: %s is in use by the host, binding anyway (--force): %s\n", name,
            list);
    return CLI_OK;
}

/* bind --dry-run: the checks the library would make, then the writes it would do. */
static int bind_plan(struct npv_cli *cli, const char *bus, const char *name, const char *driver,
                     const struct bind_opts *o)
{
    const char *vfio = strcmp(bus, "pci") == 0 ? "vfio-pci" : "vfio-platform";
    const char *root = npv_ctx_sysfs_root(cli->ctx);
    char p[4096];
    struct stat st;
    snprintf(p, sizeof(p), "%s/bus/%s/drivers/%s", root, bus, vfio);
    if (stat(p, &st) < 0) {
        cli_error(cli, "%s: the %s driver is not loaded (modprobe %s)", name, vfio, vfio);
        return CLI_FAILED;
    }
    size_t nblock = 0;
    char first[NPV_PLATFORM_NAME_LEN + NPV_PCI_DRIVER_LEN + 4] = "";
    int viable;
    if (strcmp(bus, "pci") == 0) {
        struct npv_pci_func b[1];
        viable = npv_pci_group_viable(cli->ctx, name, b, 1, &nblock);
        if (viable == 0)
            snprintf(first, sizeof(first), "%s (%s)", b[0].addr, b[0].driver);
    } else {
        struct npv_group_member b[1];
        viable = npv_platform_group_viable(cli->ctx, name, b, 1, &nblock);
        if (viable == 0)
            snprintf(first, sizeof(first), "%s (%s)", b[0].name, b[0].driver);
    }
    /* No group was let through by bind_checks only in no-IOMMU mode: vfio makes one. */
    if (viable == 0) {
        cli_error(cli, "%s: IOMMU group is not viable: %s%s still on a host driver", name, first,
                  nblock > 1 ? " and others" : "");
        return CLI_FAILED;
    }
    const char *dir = o->state_dir ? o->state_dir : default_state_dir();
    printf("%s: would bind to %s (now %s); nothing changed (--dry-run):\n", name, vfio,
           driver[0] ? driver : "unbound");
    printf("  remember \"%s\" in %s/%s\n", driver, dir, name);
    printf("  write %s to %s/bus/%s/devices/%s/driver_override\n", vfio, root, bus, name);
    if (driver[0])
        printf("  write %s to %s/bus/%s/devices/%s/driver/unbind (leaves %s)\n", name, root, bus,
               name, driver);
    printf("  write %s to %s/bus/%s/drivers_probe\n", name, root, bus);
    return CLI_OK;
}

/* unbind --dry-run, and the test of whether unbind has anything to do. */
static bool on_vfio(const char *driver)
{
    return strcmp(driver, "vfio-pci") == 0 || strcmp(driver, "vfio-platform") == 0;
}

static int unbind_plan(struct npv_cli *cli, const char *bus, const char *name, const char *driver,
                       const struct bind_opts *o)
{
    const char *root = npv_ctx_sysfs_root(cli->ctx);
    const char *dir = o->state_dir ? o->state_dir : default_state_dir();
    char p[4096], prev[NPV_PCI_DRIVER_LEN] = "";
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *f = fopen(p, "re");
    bool remembered = f != NULL;
    if (f != NULL) {
        if (fgets(prev, sizeof(prev), f) != NULL)
            prev[strcspn(prev, "\n")] = '\0';
        fclose(f);
    }
    printf("%s: would return from %s to %s; nothing changed (--dry-run):\n", name, driver,
           !remembered ? "the driver the kernel picks (no record)"
           : prev[0]   ? prev
                       : "unbound (as before bind)");
    printf("  write %s to %s/bus/%s/devices/%s/driver/unbind\n", name, root, bus, name);
    printf("  clear %s/bus/%s/devices/%s/driver_override\n", root, bus, name);
    if (remembered && prev[0])
        printf("  write %s to %s/bus/%s/drivers/%s/bind\n", name, root, bus, prev);
    else if (!remembered)
        printf("  write %s to %s/bus/%s/drivers_probe\n", name, root, bus);
    if (remembered)
        printf("  remove %s\n", p);
    return CLI_OK;
}

/* The device's bus and current driver, whichever kind it is. */
struct bind_dev {
    const char *bus;
    char name[NPV_PLATFORM_NAME_LEN];
    char driver[NPV_PCI_DRIVER_LEN];
};

static int read_dev(struct npv_cli *cli, const char *text, struct bind_dev *d)
{
    enum cli_dev_kind kind;
    int ret = cli_resolve_device(cli, text, d->name, &kind);
    if (ret != CLI_OK)
        return ret;
    if (kind == CLI_DEV_PLATFORM) {
        struct npv_platform_dev pd;
        ret = npv_platform_dev_read(cli->ctx, d->name, &pd);
        if (ret < 0)
            return cli_fail(cli, d->name, ret);
        d->bus = "platform";
        memcpy(d->driver, pd.driver, sizeof(d->driver));
    } else {
        struct npv_pci_func f;
        ret = npv_pci_func_read(cli->ctx, d->name, &f);
        if (ret < 0)
            return cli_fail(cli, d->name, ret);
        d->bus = "pci";
        memcpy(d->driver, f.driver, sizeof(d->driver));
    }
    return CLI_OK;
}

int cmd_bind(struct npv_cli *cli, int argc, char **argv)
{
    struct bind_opts o = {0};
    struct bind_dev d;
    int ret = parse(cli, argc, argv, &o);
    if (ret != CLI_OK)
        return ret < 0 ? CLI_OK : ret;
    ret = read_dev(cli, o.addr, &d);
    if (ret != CLI_OK)
        return ret;
    bool pci = strcmp(d.bus, "pci") == 0;
    const char *vfio = pci ? "vfio-pci" : "vfio-platform";
    if (strcmp(d.driver, vfio) == 0) {
        printf("%s: already bound to %s\n", d.name, vfio);
        return CLI_OK;
    }
    ret = bind_checks(cli, d.bus, d.name, &o);
    if (ret != CLI_OK)
        return ret;
    if (o.dry_run)
        return bind_plan(cli, d.bus, d.name, d.driver, &o);
    ret = pci ? npv_pci_bind_vfio_state(cli->ctx, d.name, o.state_dir)
              : npv_platform_bind_vfio_state(cli->ctx, d.name, o.state_dir);
    if (ret < 0)
        return cli_fail(cli, d.name, ret);
    printf("%s: bound to %s (was %s)\n", d.name, vfio, d.driver[0] ? d.driver : "unbound");
    return CLI_OK;
}

int cmd_unbind(struct npv_cli *cli, int argc, char **argv)
{
    struct bind_opts o = {0};
    struct bind_dev d, after;
    int ret = parse(cli, argc, argv, &o);
    if (ret != CLI_OK)
        return ret < 0 ? CLI_OK : ret;
    ret = read_dev(cli, o.addr, &d);
    if (ret != CLI_OK)
        return ret;
    bool pci = strcmp(d.bus, "pci") == 0;
    const char *vfio = pci ? "vfio-pci" : "vfio-platform";
    if (o.dry_run) {
        if (!on_vfio(d.driver)) {
            printf("%s: not on %s (driver %s): nothing to change\n", d.name, vfio,
                   d.driver[0] ? d.driver : "none");
            return CLI_OK;
        }
        return unbind_plan(cli, d.bus, d.name, d.driver, &o);
    }
    /*
     * The library also clears a stale vfio driver_override on a device not on
     * vfio; whether the host saw a change is judged by the driver before and after.
     */
    ret = pci ? npv_pci_unbind_vfio_state(cli->ctx, d.name, o.state_dir)
              : npv_platform_unbind_vfio_state(cli->ctx, d.name, o.state_dir);
    if (ret < 0)
        return cli_fail(cli, d.name, ret);
    if (!on_vfio(d.driver)) {
        printf("%s: not on %s (driver %s): nothing changed\n", d.name, vfio,
               d.driver[0] ? d.driver : "none");
        return CLI_OK;
    }
    ret = read_dev(cli, d.name, &after);
    if (ret != CLI_OK)
        return ret;
    printf("%s: driver now %s\n", d.name, after.driver[0] ? after.driver : "none (unbound)");
    return CLI_OK;
}

/* SPDX-License-Identifier: MIT */
/*
 * npuvfio cdi: a Container Device Interface spec for devices bound to vfio,
 * so podman or containerd can pass them into a container
 * (podman run --device npuvfio.dev/npu=NAME).
 *
 * The fields are the CDI schema's (cncf-tags/container-device-interface,
 * schema/schema.json: cdiVersion, kind, devices[] with name and
 * containerEdits required; containerEdits.deviceNodes[] with path required).
 * Device names follow SPEC.md: alphanumerics with '-', '_', '.' between, so
 * a PCI address's colons become dashes (0000:01:00.0 -> 0000-01-00.0).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <npuvfio/pci.h>
#include <npuvfio/platform.h>

#include "cli.h"
#include "json_out.h"
#include "platform_cli.h"
#include "vfio_device_internal.h"

#define CDI_MAX_DEVICES 64
/*
 * Model choice: 0.6.0, the first version that allows everything used here
 * (device names starting with a digit since 0.5.0) and that podman 4.x and
 * containerd 1.7 read.
 */
#define CDI_VERSION "0.6.0"
#define CDI_KIND    "npuvfio.dev/npu"

enum cdi_backend { CDI_AUTO, CDI_LEGACY, CDI_IOMMUFD };

static void help(void)
{
    printf("Usage: npuvfio cdi [--backend auto|legacy|iommufd] [--output FILE] DEVICE...\n"
           "\n"
           "Write a Container Device Interface (CDI) spec, kind " CDI_KIND ", for the\n"
           "devices (PCI addresses DDDD:BB:DD.F or platform names), each already bound to\n"
           "vfio-pci or vfio-platform (npuvfio bind). Each becomes a CDI device named by its\n"
           "address with ':' as '-' (0000:01:00.0 -> 0000-01-00.0) holding its VFIO node;\n"
           "the spec's common edits hold the IOMMU node and NPUVFIO_IOMMU, so the library\n"
           "in the container picks the same backend:\n"
           "  legacy   /dev/vfio/N (the IOMMU group) and /dev/vfio/vfio (the container)\n"
           "  iommufd  /dev/vfio/devices/vfioN (the device's cdev) and /dev/iommu\n"
           "  auto     iommufd when /dev/iommu exists and every device has a cdev, else\n"
           "           legacy (the library's own choice)\n"
           "\n"
           "  --output FILE   write the spec to FILE (e.g. /etc/cdi/npuvfio.json) instead\n"
           "                  of standard output\n"
           "\n"
           "Then: podman run --device " CDI_KIND "=0000-01-00.0 --ulimit memlock=-1:-1 IMAGE\n"
           "(DMA mappings are charged to RLIMIT_MEMLOCK; see docs/hardware-runner.md).\n"
           "\n"
           "Exit status: 0 written, 1 a device is missing or not on a vfio driver, 2 the\n"
           "command line was wrong.\n");
}

struct cdi_dev {
    char name[NPV_PLATFORM_NAME_LEN];
    const char *bus;
    int group;
    char cdev[32]; /* "" without one */
};

/* The CDI name: the device's name with ':' as '-'. */
static void cdi_name(const char *name, char *buf, size_t len)
{
    size_t i = 0;
    for (; name[i] != '\0' && i + 1 < len; i++)
        buf[i] = name[i] == ':' ? '-' : name[i];
    buf[i] = '\0';
}

static int read_dev(struct npv_cli *cli, const char *text, struct cdi_dev *d)
{
    enum cli_dev_kind kind;
    int ret = cli_resolve_device(cli, text, d->name, &kind);
    if (ret != CLI_OK)
        return ret;
    const char *driver, *want;
    char drv[NPV_PCI_DRIVER_LEN];
    if (kind == CLI_DEV_PLATFORM) {
        struct npv_platform_dev pd;
        ret = npv_platform_dev_read(cli->ctx, d->name, &pd);
        if (ret < 0)
            return cli_fail(cli, d->name, ret);
        d->bus = "platform";
        d->group = pd.iommu_group;
        memcpy(drv, pd.driver, sizeof(drv));
        want = "vfio-platform";
    } else {
        struct npv_pci_func f;
        ret = npv_pci_func_read(cli->ctx, d->name, &f);
        if (ret < 0)
            return cli_fail(cli, d->name, ret);
        d->bus = "pci";
        d->group = f.iommu_group;
        memcpy(drv, f.driver, sizeof(drv));
        want = "vfio-pci";
    }
    driver = drv;
    if (strcmp(driver, want) != 0) {
        cli_error(cli, "%s is on %s, not %s: bind it first (npuvfio bind %s)", d->name,
                  driver[0] ? driver : "no driver", want, d->name);
        return CLI_FAILED;
    }
    if (d->group < 0) {
        cli_error(cli, "%s: no IOMMU group: a container cannot be given it safely", d->name);
        return CLI_FAILED;
    }
    if (npv_vfio_cdev_name_on(cli->ctx, d->bus, d->name, d->cdev, sizeof(d->cdev)) < 0)
        d->cdev[0] = '\0';
    return CLI_OK;
}

static void node(struct json_out *j, const char *path)
{
    json_begin_object(j);
    json_kv_string(j, "path", path);
    json_kv_string(j, "permissions", "rw");
    json_end_object(j);
}

static void write_spec(FILE *f, const struct cdi_dev *devs, size_t n, bool iommufd)
{
    struct json_out j;
    json_init(&j, f);
    json_begin_object(&j);
    json_kv_string(&j, "cdiVersion", CDI_VERSION);
    json_kv_string(&j, "kind", CDI_KIND);
    json_key(&j, "containerEdits");
    json_begin_object(&j);
    json_key(&j, "env");
    json_begin_array(&j);
    json_string(&j, iommufd ? "NPUVFIO_IOMMU=iommufd" : "NPUVFIO_IOMMU=legacy");
    json_end_array(&j);
    json_key(&j, "deviceNodes");
    json_begin_array(&j);
    node(&j, iommufd ? "/dev/iommu" : "/dev/vfio/vfio");
    json_end_array(&j);
    json_end_object(&j);
    json_key(&j, "devices");
    json_begin_array(&j);
    for (size_t i = 0; i < n; i++) {
        char name[NPV_PLATFORM_NAME_LEN], path[64];
        cdi_name(devs[i].name, name, sizeof(name));
        if (iommufd)
            snprintf(path, sizeof(path), "/dev/vfio/devices/%s", devs[i].cdev);
        else
            snprintf(path, sizeof(path), "/dev/vfio/%d", devs[i].group);
        json_begin_object(&j);
        json_kv_string(&j, "name", name);
        json_key(&j, "containerEdits");
        json_begin_object(&j);
        json_key(&j, "deviceNodes");
        json_begin_array(&j);
        node(&j, path);
        json_end_array(&j);
        json_end_object(&j);
        json_end_object(&j);
    }
    json_end_array(&j);
    json_end_object(&j);
    json_finish(&j);
}

int cmd_cdi(struct npv_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'},
        {"backend", required_argument, NULL, 'b'},
        {"output", required_argument, NULL, 'o'},
        {NULL, 0, NULL, 0},
    };
    enum cdi_backend backend = CDI_AUTO;
    const char *output = NULL;
    int c;
    while ((c = cli_getopt(cli, argc, argv, ":h", opts)) != -1) {
        switch (c) {
        case 'h':
            help();
            return CLI_OK;
        case 'b':
            if (strcmp(optarg, "auto") == 0)
                backend = CDI_AUTO;
            else if (strcmp(optarg, "legacy") == 0)
                backend = CDI_LEGACY;
            else if (strcmp(optarg, "iommufd") == 0)
                backend = CDI_IOMMUFD;
            else
                return cli_usage(cli, "--backend must be auto, legacy or iommufd, not '%s'",
                                 optarg);
            break;
        case 'o':
            output = optarg;
            break;
        default:
            return CLI_USAGE;
        }
    }
    if (optind >= argc)
        return cli_usage(cli, "missing the devices (PCI addresses or platform device names)");
    size_t n = (size_t)(argc - optind);
    if (n > CDI_MAX_DEVICES)
        return cli_usage(cli, "at most %d devices", CDI_MAX_DEVICES);
    struct cdi_dev devs[CDI_MAX_DEVICES];
    bool all_cdev = true;
    for (size_t i = 0; i < n; i++) {
        int ret = read_dev(cli, argv[optind + (int)i], &devs[i]);
        if (ret != CLI_OK)
            return ret;
        all_cdev = all_cdev && devs[i].cdev[0] != '\0';
    }
    /* The library's own rule (lib/vfio/vfio_open.c): iommufd when /dev/iommu and the cdevs are
     * there. */
    bool iommufd = backend == CDI_IOMMUFD ||
                   (backend == CDI_AUTO && all_cdev && access("/dev/iommu", F_OK) == 0);
    if (iommufd && !all_cdev) {
        for (size_t i = 0; i < n; i++)
            if (devs[i].cdev[0] == '\0') {
                cli_error(cli,
                          "%s has no VFIO device cdev (vfio-dev/ in sysfs; a kernel without "
                          "CONFIG_VFIO_DEVICE_CDEV): use --backend legacy",
                          devs[i].name);
                return CLI_FAILED;
            }
    }
    FILE *f = stdout;
    if (output != NULL) {
        f = fopen(output, "we");
        if (f == NULL) {
            cli_error(cli, "%s: %s", output, strerror(errno));
            return CLI_FAILED;
        }
    }
    write_spec(f, devs, n, iommufd);
    if (f != stdout && fclose(f) != 0) {
        cli_error(cli, "%s: %s", output, strerror(errno));
        return CLI_FAILED;
    }
    return CLI_OK;
}

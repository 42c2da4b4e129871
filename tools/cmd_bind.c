/* SPDX-License-Identifier: MIT */
/*
 * npuvfio bind / unbind: move a PCI function to vfio-pci, or a platform
 * device to vfio-platform, and back to its previous driver.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/pci.h>

#include "cli.h"
#include "platform_cli.h"

static const char *default_state_dir(void)
{
    const char *env = getenv("NPUVFIO_STATE_DIR");
    return env != NULL && *env != '\0' ? env : "/run/npuvfio";
}

static void help(const char *cmd)
{
    bool bind = strcmp(cmd, "bind") == 0;
    printf("Usage: npuvfio %s [--state-dir DIR] DEVICE\n\n", cmd);
    if (bind)
        printf("Bind the PCI function ADDR (DDDD:BB:DD.F) to vfio-pci: write vfio-pci to its\n"
               "driver_override, unbind it from its current driver, write ADDR to drivers_probe,\n"
               "and wait until its driver link names vfio-pci.\n"
               "\n"
               "Refused, with the reason, when ADDR is malformed or does not exist, when it has\n"
               "no IOMMU group, when vfio-pci is not loaded, or when another function of its\n"
               "IOMMU group is still on a host driver (the group would not be viable: VFIO only\n"
               "accepts members that are unbound or on vfio, pci-stub or pcieport). The\n"
               "blocking functions and their drivers are named.\n"
               "\n"
               "DEVICE may also be a platform device by its sysfs name (fdab0000.npu): it is\n"
               "moved to vfio-platform the same way (driver_override, unbind,\n"
               "bus/platform/drivers_probe). vfio-platform takes a device only when the kernel\n"
               "has a reset module for its compatible string or vfio-platform was loaded with\n"
               "reset_required=0 (none exists for the RK3588 NPU); the refusal says so.\n");
    else
        printf("Return the PCI function ADDR from vfio-pci to the driver it had before\n"
               "'npuvfio bind': unbind it from vfio-pci, clear driver_override, and bind the\n"
               "remembered driver (left unbound if it was unbound). Without a record, the\n"
               "kernel picks the driver through drivers_probe. A function not on vfio-pci is\n"
               "left alone. A platform device (DEVICE a sysfs name such as fdab0000.npu)\n"
               "returns from vfio-platform the same way.\n");
    printf("\n"
           "The previous driver is remembered in a state directory, one file per device\n"
           "named by its address or name and holding the driver's name:\n"
           "  --state-dir DIR   (env NPUVFIO_STATE_DIR; default /run/npuvfio; now %s)\n",
           default_state_dir());
}

static int parse(struct npv_cli *cli, int argc, char **argv, const char **addr,
                 const char **state_dir)
{
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'},
        {"state-dir", required_argument, NULL, 's'},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = cli_getopt(cli, argc, argv, ":h", opts)) != -1) {
        switch (c) {
        case 'h':
            help(cli->cmd);
            return -1;
        case 's':
            *state_dir = optarg;
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
    *addr = argv[optind];
    return CLI_OK;
}

static int bind_platform(struct npv_cli *cli, const char *name, const char *state_dir)
{
    struct npv_platform_dev before;
    int ret = npv_platform_dev_read(cli->ctx, name, &before);
    if (ret < 0)
        return cli_fail(cli, name, ret);
    if (before.vfio_bound) {
        printf("%s: already bound to vfio-platform\n", name);
        return CLI_OK;
    }
    ret = npv_platform_bind_vfio_state(cli->ctx, name, state_dir);
    if (ret < 0)
        return cli_fail(cli, name, ret);
    printf("%s: bound to vfio-platform (was %s)\n", name,
           before.driver[0] ? before.driver : "unbound");
    return CLI_OK;
}

static int unbind_platform(struct npv_cli *cli, const char *name, const char *state_dir)
{
    struct npv_platform_dev d;
    int ret = npv_platform_unbind_vfio_state(cli->ctx, name, state_dir);
    if (ret < 0)
        return cli_fail(cli, name, ret);
    ret = npv_platform_dev_read(cli->ctx, name, &d);
    if (ret < 0)
        return cli_fail(cli, name, ret);
    printf("%s: driver now %s\n", name, d.driver[0] ? d.driver : "none (unbound)");
    return CLI_OK;
}

int cmd_bind(struct npv_cli *cli, int argc, char **argv)
{
    const char *addr = NULL, *state_dir = NULL;
    char canon[NPV_PLATFORM_NAME_LEN];
    enum cli_dev_kind kind;
    int ret = parse(cli, argc, argv, &addr, &state_dir);
    if (ret != CLI_OK)
        return ret < 0 ? CLI_OK : ret;
    ret = cli_resolve_device(cli, addr, canon, &kind);
    if (ret != CLI_OK)
        return ret;
    if (kind == CLI_DEV_PLATFORM)
        return bind_platform(cli, canon, state_dir);
    struct npv_pci_func before;
    ret = npv_pci_func_read(cli->ctx, canon, &before);
    if (ret < 0)
        return cli_fail(cli, canon, ret);
    if (before.vfio_bound) {
        printf("%s: already bound to vfio-pci\n", canon);
        return CLI_OK;
    }
    ret = npv_pci_bind_vfio_state(cli->ctx, canon, state_dir);
    if (ret < 0)
        return cli_fail(cli, canon, ret);
    printf("%s: bound to vfio-pci (was %s)\n", canon, before.driver[0] ? before.driver : "unbound");
    return CLI_OK;
}

int cmd_unbind(struct npv_cli *cli, int argc, char **argv)
{
    const char *addr = NULL, *state_dir = NULL;
    char canon[NPV_PLATFORM_NAME_LEN];
    enum cli_dev_kind kind;
    int ret = parse(cli, argc, argv, &addr, &state_dir);
    if (ret != CLI_OK)
        return ret < 0 ? CLI_OK : ret;
    ret = cli_resolve_device(cli, addr, canon, &kind);
    if (ret != CLI_OK)
        return ret;
    if (kind == CLI_DEV_PLATFORM)
        return unbind_platform(cli, canon, state_dir);
    struct npv_pci_func f;
    ret = npv_pci_unbind_vfio_state(cli->ctx, canon, state_dir);
    if (ret < 0)
        return cli_fail(cli, canon, ret);
    ret = npv_pci_func_read(cli->ctx, canon, &f);
    if (ret < 0)
        return cli_fail(cli, canon, ret);
    printf("%s: driver now %s\n", canon, f.driver[0] ? f.driver : "none (unbound)");
    return CLI_OK;
}

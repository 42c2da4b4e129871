/* SPDX-License-Identifier: MIT */
/* npuvfio bind / unbind: move a function to vfio-pci and back to its previous driver. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/pci.h>

#include "cli.h"

static const char *default_state_dir(void)
{
    const char *env = getenv("NPUVFIO_STATE_DIR");
    return env != NULL && *env != '\0' ? env : "/run/npuvfio";
}

static void help(const char *cmd)
{
    bool bind = strcmp(cmd, "bind") == 0;
    printf("Usage: npuvfio %s [--state-dir DIR] ADDR\n\n", cmd);
    if (bind)
        printf("Bind the PCI function ADDR (DDDD:BB:DD.F) to vfio-pci: write vfio-pci to its\n"
               "driver_override, unbind it from its current driver, write ADDR to drivers_probe,\n"
               "and wait until its driver link names vfio-pci.\n"
               "\n"
               "Refused, with the reason, when ADDR is malformed or does not exist, when it has\n"
               "no IOMMU group, when vfio-pci is not loaded, or when another function of its\n"
               "IOMMU group is still on a host driver (the group would not be viable: VFIO only\n"
               "accepts members that are unbound or on vfio, pci-stub or pcieport). The\n"
               "blocking functions and their drivers are named.\n");
    else
        printf("Return the PCI function ADDR from vfio-pci to the driver it had before\n"
               "'npuvfio bind': unbind it from vfio-pci, clear driver_override, and bind the\n"
               "remembered driver (left unbound if it was unbound). Without a record, the\n"
               "kernel picks the driver through drivers_probe. A function not on vfio-pci is\n"
               "left alone.\n");
    printf("\n"
           "The previous driver is remembered in a state directory, one file per function\n"
           "named by its address and holding the driver's name:\n"
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
        return cli_usage(cli, "missing the PCI address (DDDD:BB:DD.F)");
    if (optind + 1 < argc)
        return cli_usage(cli, "unexpected argument '%s'", argv[optind + 1]);
    *addr = argv[optind];
    return CLI_OK;
}

int cmd_bind(struct npv_cli *cli, int argc, char **argv)
{
    const char *addr = NULL, *state_dir = NULL;
    char canon[NPV_PCI_ADDR_LEN];
    int ret = parse(cli, argc, argv, &addr, &state_dir);
    if (ret != CLI_OK)
        return ret < 0 ? CLI_OK : ret;
    ret = cli_pci_function(cli, addr, canon);
    if (ret != CLI_OK)
        return ret;
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
    char canon[NPV_PCI_ADDR_LEN];
    int ret = parse(cli, argc, argv, &addr, &state_dir);
    if (ret != CLI_OK)
        return ret < 0 ? CLI_OK : ret;
    ret = cli_pci_function(cli, addr, canon);
    if (ret != CLI_OK)
        return ret;
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

/* SPDX-License-Identifier: MIT */
/*
 * npuvfio list: every PCI function with its IOMMU group, driver and NUMA node,
 * then the platform devices VFIO could take.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include <npuvfio/pci.h>

#include "cli.h"
#include "json_out.h"
#include "platform_cli.h"

static void help(void)
{
    printf("Usage: npuvfio list [--json] [--npu]\n"
           "\n"
           "List the PCI functions under SYSFS/bus/pci/devices: address, vendor:device, class,\n"
           "bound driver, IOMMU group, NUMA node, whether vfio-pci has it, and the NPU family\n"
           "of the ones npuvfio knows (the PCI ids listed below). NUMA is the function's\n"
           "numa_node in sysfs; \"-\" where that is -1 (the kernel knows no affinity: one\n"
           "node, or firmware that does not say) and null in --json. With --npu and no NPU\n"
           "found, \"no NPUs found\" instead of an empty table.\n"
           "\n"
           "Then the platform devices under SYSFS/bus/platform/devices that VFIO could take\n"
           "(those in an IOMMU group), are on vfio-platform, or are a known NPU: sysfs name,\n"
           "driver, IOMMU group, whether vfio-platform has it, the NPU it is, and its\n"
           "device-tree compatible strings. NPUs are known by compatible string: rknpu for\n"
           "rockchip,rk3588-rknpu (the vendor node of the RK3588 NPU, fdab0000.npu) and\n"
           "rockchip,rk3588-rknn-core (mainline's node per NPU core).\n"
           "\n"
           "  --json   one JSON document: {\"functions\": [...], \"platform_devices\": [...]}\n"
           "  --npu    only the known NPUs\n"
           "\n"
           "Known NPUs on PCI:\n");
    cli_print_known_npus();
}

static void print_json(const struct npv_pci_func *f, size_t n, const struct platform_listing *pl,
                       bool npu_only)
{
    struct json_out j;
    json_init(&j, stdout);
    json_begin_object(&j);
    json_key(&j, "functions");
    json_begin_array(&j);
    for (size_t i = 0; i < n; i++) {
        const char *npu = cli_known_npu(f[i].vendor, f[i].device);
        if (npu_only && npu == NULL)
            continue;
        char v[8], d[8], cls[8];
        snprintf(v, sizeof(v), "%04x", f[i].vendor);
        snprintf(d, sizeof(d), "%04x", f[i].device);
        snprintf(cls, sizeof(cls), "%06x", f[i].class_code);
        json_begin_object(&j);
        json_kv_string(&j, "address", f[i].addr);
        json_kv_string(&j, "vendor", v);
        json_kv_string(&j, "device", d);
        json_kv_string(&j, "class", cls);
        json_kv_string(&j, "driver", f[i].driver[0] ? f[i].driver : NULL);
        json_key(&j, "iommu_group");
        if (f[i].iommu_group < 0)
            json_null(&j);
        else
            json_int(&j, f[i].iommu_group);
        json_key(&j, "numa_node");
        if (f[i].numa_node < 0)
            json_null(&j);
        else
            json_int(&j, f[i].numa_node);
        json_kv_bool(&j, "vfio_bound", f[i].vfio_bound);
        json_kv_string(&j, "npu", npu);
        json_end_object(&j);
    }
    json_end_array(&j);
    platform_listing_json(&j, pl, npu_only);
    json_end_object(&j);
    json_finish(&j);
}

/* Known NPUs among the PCI functions and the platform devices. */
static size_t count_npus(const struct npv_pci_func *f, size_t n, const struct platform_listing *pl)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += cli_known_npu(f[i].vendor, f[i].device) != NULL;
    for (size_t i = 0; i < pl->n; i++)
        k += npv_platform_known_npu(&pl->devs[i]) != NULL;
    return k;
}

static void print_table(const struct npv_pci_func *f, size_t n, bool npu_only)
{
    size_t pci_npus = 0;
    for (size_t i = 0; i < n; i++)
        pci_npus += cli_known_npu(f[i].vendor, f[i].device) != NULL;
    if (npu_only && pci_npus == 0)
        return; /* the platform devices may still have one; the caller says when none */
    printf("%-13s %-9s %-6s %-16s %-5s %-4s %-4s %s\n", "ADDRESS", "ID", "CLASS", "DRIVER", "GROUP",
           "NUMA", "VFIO", "NPU");
    for (size_t i = 0; i < n; i++) {
        const char *npu = cli_known_npu(f[i].vendor, f[i].device);
        if (npu_only && npu == NULL)
            continue;
        char group[16] = "-", node[16] = "-";
        if (f[i].iommu_group >= 0)
            snprintf(group, sizeof(group), "%d", f[i].iommu_group);
        if (f[i].numa_node >= 0)
            snprintf(node, sizeof(node), "%d", f[i].numa_node);
        printf("%-13s %04x:%04x %06x %-16s %-5s %-4s %-4s %s\n", f[i].addr, f[i].vendor,
               f[i].device, f[i].class_code, f[i].driver[0] ? f[i].driver : "-", group, node,
               f[i].vfio_bound ? "yes" : "no", npu ? npu : "");
    }
}

int cmd_list(struct npv_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'},
        {"json", no_argument, NULL, 'j'},
        {"npu", no_argument, NULL, 'n'},
        {NULL, 0, NULL, 0},
    };
    bool npu_only = false;
    int c;
    while ((c = cli_getopt(cli, argc, argv, ":h", opts)) != -1) {
        switch (c) {
        case 'h':
            help();
            return CLI_OK;
        case 'j':
            cli->json = true;
            break;
        case 'n':
            npu_only = true;
            break;
        default:
            return CLI_USAGE;
        }
    }
    if (optind < argc)
        return cli_usage(cli, "unexpected argument '%s'", argv[optind]);

    struct npv_pci_func *funcs;
    size_t n;
    int ret = npv_pci_list(cli->ctx, &funcs, &n);
    if (ret < 0)
        return cli_fail(cli, "bus/pci/devices", ret);
    struct platform_listing pl;
    ret = platform_listing_read(cli, &pl);
    if (ret < 0) {
        free(funcs);
        return cli_fail(cli, "bus/platform/devices", ret);
    }
    if (cli->json) {
        print_json(funcs, n, &pl, npu_only);
    } else if (npu_only && count_npus(funcs, n, &pl) == 0) {
        printf("no NPUs found\n");
    } else {
        print_table(funcs, n, npu_only);
        platform_listing_text(&pl, npu_only);
    }
    free(funcs);
    free(pl.devs);
    return CLI_OK;
}

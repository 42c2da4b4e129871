/* SPDX-License-Identifier: MIT */
/* npuvfio info: one function's identity, IOMMU group and viability, and what VFIO reports. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/pci.h>

#include "cli.h"
#include "info_vfio.h"
#include "platform_cli.h"
#include "json_out.h"

#define MAX_BLOCKERS 64

static void help(void)
{
    printf("Usage: npuvfio info [--json] [--open | --no-open] DEVICE\n"
           "\n"
           "Show DEVICE, a PCI function (DDDD:BB:DD.F) or a platform device by its sysfs\n"
           "name (fdab0000.npu): ids or device-tree compatible strings, driver, NUMA node,\n"
           "its IOMMU group's members and whether the group is viable for VFIO (every\n"
           "other member unbound or on vfio, pci-stub or pcieport), naming the members\n"
           "that block it. When DEVICE is bound to vfio-pci or vfio-platform, it is opened\n"
           "in a fresh IOVA domain and its backend, regions (size, flags, mmap areas; a\n"
           "platform device's are its MMIO resources reg0.. in device-tree order), IRQs\n"
           "(a platform device's interrupt lines irq0..), the domain's IOVA ranges and\n"
           "DMA coherency are shown too, and the device's identity read without a driver\n"
           "(nothing written): its kind, PCI revision ID and the version registers the\n"
           "public sources name (JSON: the \"device\" object, the last key).\n"
           "\n"
           "  --json      one JSON document\n"
           "  --open      the VFIO part is required: fail (exit 1) when DEVICE is not bound\n"
           "              to its VFIO driver or cannot be opened\n"
           "  --no-open   skip the VFIO part\n"
           "\n"
           "Without --open, a failed open is reported in the output (with its reason) and\n"
           "the exit status is still 0: the sysfs part, which was asked for, succeeded.\n");
}

static bool is_blocker(const struct npv_pci_func *b, size_t nb, const char *addr)
{
    for (size_t i = 0; i < nb && i < MAX_BLOCKERS; i++)
        if (strcmp(b[i].addr, addr) == 0)
            return true;
    return false;
}

struct group_view {
    struct npv_pci_func *members;
    size_t nmembers;
    struct npv_pci_func blockers[MAX_BLOCKERS];
    size_t nblockers;
    int viable; /* 1, 0, or negative errno */
};

static void json_func_id(struct json_out *j, const struct npv_pci_func *f)
{
    char v[8], d[8];
    snprintf(v, sizeof(v), "%04x", f->vendor);
    snprintf(d, sizeof(d), "%04x", f->device);
    json_kv_string(j, "address", f->addr);
    json_kv_string(j, "vendor", v);
    json_kv_string(j, "device", d);
    json_kv_string(j, "driver", f->driver[0] ? f->driver : NULL);
}

static void print_json_head(struct json_out *j, const struct npv_pci_func *f,
                            const struct group_view *g)
{
    char cls[8], sv[8], sd[8];
    snprintf(cls, sizeof(cls), "%06x", f->class_code);
    snprintf(sv, sizeof(sv), "%04x", f->subsystem_vendor);
    snprintf(sd, sizeof(sd), "%04x", f->subsystem_device);
    json_func_id(j, f);
    json_kv_string(j, "class", cls);
    json_kv_string(j, "subsystem_vendor", sv);
    json_kv_string(j, "subsystem_device", sd);
    json_kv_string(j, "npu", cli_known_npu(f->vendor, f->device));
    json_kv_bool(j, "vfio_bound", f->vfio_bound);
    json_key(j, "numa_node");
    if (f->numa_node < 0)
        json_null(j);
    else
        json_int(j, f->numa_node);
    json_key(j, "iommu_group");
    if (f->iommu_group < 0) {
        json_null(j);
        return;
    }
    json_begin_object(j);
    json_kv_int(j, "id", f->iommu_group);
    json_key(j, "viable");
    if (g->viable < 0)
        json_null(j);
    else
        json_bool(j, g->viable == 1);
    json_key(j, "members");
    json_begin_array(j);
    for (size_t i = 0; i < g->nmembers; i++) {
        json_begin_object(j);
        json_func_id(j, &g->members[i]);
        json_kv_bool(j, "blocks_vfio", is_blocker(g->blockers, g->nblockers, g->members[i].addr));
        json_end_object(j);
    }
    json_end_array(j);
    json_key(j, "blockers");
    json_begin_array(j);
    for (size_t i = 0; i < g->nblockers && i < MAX_BLOCKERS; i++) {
        json_begin_object(j);
        json_kv_string(j, "address", g->blockers[i].addr);
        json_kv_string(j, "driver", g->blockers[i].driver);
        json_end_object(j);
    }
    json_end_array(j);
    json_end_object(j);
}

static void print_text_head(const struct npv_pci_func *f, const struct group_view *g)
{
    const char *npu = cli_known_npu(f->vendor, f->device);
    printf("%s  %04x:%04x  class %06x%s%s\n", f->addr, f->vendor, f->device, f->class_code,
           npu ? "  npu: " : "", npu ? npu : "");
    printf("  driver:         %s\n", f->driver[0] ? f->driver : "none");
    printf("  subsystem:      %04x:%04x\n", f->subsystem_vendor, f->subsystem_device);
    if (f->numa_node >= 0)
        printf("  numa node:      %d\n", f->numa_node);
    else
        printf("  numa node:      unknown\n");
    if (f->iommu_group < 0) {
        printf("  iommu group:    none (IOMMU off? VFIO cannot take this function)\n");
        return;
    }
    printf("  iommu group:    %d\n", f->iommu_group);
    printf("  group members:\n");
    for (size_t i = 0; i < g->nmembers; i++) {
        const struct npv_pci_func *m = &g->members[i];
        bool blocks = is_blocker(g->blockers, g->nblockers, m->addr);
        printf("    %s  %04x:%04x  %-*s%s\n", m->addr, m->vendor, m->device, blocks ? 16 : 0,
               m->driver[0] ? m->driver : "none", blocks ? "  <- host driver, blocks VFIO" : "");
    }
    if (g->viable == 1) {
        printf("  viable:         yes\n");
    } else if (g->viable == 0) {
        printf("  viable:         no:");
        for (size_t i = 0; i < g->nblockers && i < MAX_BLOCKERS; i++)
            printf("%s %s (%s)", i ? "," : "", g->blockers[i].addr, g->blockers[i].driver);
        printf(" on a host driver\n");
    } else {
        printf("  viable:         unknown (%s)\n", npv_strerror(g->viable));
    }
}

int cmd_info(struct npv_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'},
        {"json", no_argument, NULL, 'j'},
        {"open", no_argument, NULL, 'o'},
        {"no-open", no_argument, NULL, 'O'},
        {NULL, 0, NULL, 0},
    };
    enum info_open_mode mode = INFO_OPEN_AUTO;
    int c;
    while ((c = cli_getopt(cli, argc, argv, ":h", opts)) != -1) {
        switch (c) {
        case 'h':
            help();
            return CLI_OK;
        case 'j':
            cli->json = true;
            break;
        case 'o':
            mode = INFO_OPEN_REQUIRED;
            break;
        case 'O':
            mode = INFO_OPEN_NEVER;
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

    char canon[NPV_PLATFORM_NAME_LEN];
    enum cli_dev_kind kind;
    int ret = cli_resolve_device(cli, argv[optind], canon, &kind);
    if (ret != CLI_OK)
        return ret;
    if (kind == CLI_DEV_PLATFORM)
        return platform_info(cli, canon, mode);
    struct npv_pci_func f;
    ret = npv_pci_func_read(cli->ctx, canon, &f);
    if (ret < 0)
        return cli_fail(cli, canon, ret);

    struct group_view g = {.viable = -ENOENT};
    if (f.iommu_group >= 0) {
        ret = npv_pci_group_members(cli->ctx, canon, &g.members, &g.nmembers);
        if (ret < 0)
            return cli_fail(cli, canon, ret);
        g.viable = npv_pci_group_viable(cli->ctx, canon, g.blockers, MAX_BLOCKERS, &g.nblockers);
        cli_clear_error(cli);
    }

    struct json_out j;
    if (cli->json) {
        json_init(&j, stdout);
        json_begin_object(&j);
        print_json_head(&j, &f, &g);
    } else {
        print_text_head(&f, &g);
    }

    struct info_device id;
    info_device_init_pci(&id, f.vendor, f.device);
    int status =
        info_vfio_finish(cli, canon, false, f.vfio_bound, mode, cli->json ? &j : NULL, &id);
    free(g.members);
    return status;
}

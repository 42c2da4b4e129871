/* SPDX-License-Identifier: MIT */
/* npuvfio status: what the library finds on this machine, then the PCI functions. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>

#include <npuvfio/host.h>

#include "cli.h"
#include "json_out.h"

static void help(void)
{
    printf("Usage: npuvfio status [--json]\n"
           "\n"
           "Show what npuvfio finds on this machine: the VFIO interfaces the kernel offers\n"
           "(/dev/vfio/vfio for the legacy backend, /dev/iommu for iommufd, the vfio-pci\n"
           "driver), IOMMU groups, hugepage pools, the locked-memory limit DMA pins count\n"
           "against, CPUs and NUMA nodes, which backends can run, then `npuvfio list`.\n"
           "\n"
           "  --json   one JSON document with the host facts (use `list --json` for functions)\n");
}

static const char *yes_no(bool v)
{
    return v ? "yes" : "no";
}

static void print_memlock(const struct npv_host_info *h)
{
    if (h->memlock_limit == UINT64_MAX)
        printf("  memlock    RLIMIT_MEMLOCK unlimited\n");
    else
        printf("  memlock    RLIMIT_MEMLOCK %" PRIu64 " KiB%s\n", h->memlock_limit >> 10,
               h->cap_ipc_lock ? " (CAP_IPC_LOCK held: DMA pins are not limited by it)"
                               : " (DMA buffers beyond it fail: raise it with ulimit -l)");
}

static void print_text(const struct npv_host_info *h)
{
    bool legacy = h->vfio_container && h->vfio_pci_loaded;
    bool iommufd = h->iommufd_built && h->iommufd_dev && h->vfio_pci_loaded;
    printf("npuvfio %s on Linux %s, %d CPUs, %d NUMA node%s\n", npv_version(), h->kernel_release,
           h->cpus, h->numa_nodes, h->numa_nodes == 1 ? "" : "s");
    printf("  library    iommufd support compiled in: %s\n", yes_no(h->iommufd_built));
    printf("  VFIO       /dev/vfio/vfio: %s, /dev/iommu: %s, vfio-pci driver loaded: %s\n",
           h->vfio_container ? "present" : "absent", h->iommufd_dev ? "present" : "absent",
           yes_no(h->vfio_pci_loaded));
    if (h->iommu_groups > 0)
        printf("  IOMMU      %d IOMMU groups\n", h->iommu_groups);
    else
        printf("  IOMMU      no IOMMU groups: the kernel has no IOMMU in use\n");
    printf("  hugepages ");
    for (int i = 0; i < 2; i++) {
        const struct npv_host_pool *p = &h->hugepages[i];
        const char *name = i == 0 ? "2M" : "1G";
        if (p->present)
            printf(" %s: %" PRIu64 " reserved, %" PRIu64 " free;", name, p->nr, p->free);
        else
            printf(" %s: no pool;", name);
    }
    printf("\n");
    print_memlock(h);
    printf("  backends   kernel legacy: %s; kernel iommufd: %s; vfio-user: available\n",
           legacy ? "available" : "unavailable", iommufd ? "available" : "unavailable");
    if (!legacy && !iommufd)
        printf("             no kernel VFIO here: drivers run against device models over "
               "vfio-user (`npuvfio sim`)\n");
}

void status_write_json(struct json_out *j, const struct npv_host_info *h)
{
    json_begin_object(j);
    json_kv_string(j, "version", npv_version());
    json_kv_string(j, "kernel", h->kernel_release);
    json_kv_bool(j, "iommufd_built", h->iommufd_built);
    json_kv_bool(j, "dev_vfio_vfio", h->vfio_container);
    json_kv_bool(j, "dev_iommu", h->iommufd_dev);
    json_kv_bool(j, "vfio_pci_loaded", h->vfio_pci_loaded);
    json_kv_int(j, "iommu_groups", h->iommu_groups);
    json_key(j, "hugepages");
    json_begin_array(j);
    for (int i = 0; i < 2; i++) {
        json_begin_object(j);
        json_kv_uint(j, "page_size", h->hugepages[i].page_size);
        json_kv_bool(j, "present", h->hugepages[i].present);
        json_kv_uint(j, "reserved", h->hugepages[i].nr);
        json_kv_uint(j, "free", h->hugepages[i].free);
        json_end_object(j);
    }
    json_end_array(j);
    json_key(j, "memlock_limit");
    if (h->memlock_limit == UINT64_MAX)
        json_null(j);
    else
        json_uint(j, h->memlock_limit);
    json_kv_bool(j, "cap_ipc_lock", h->cap_ipc_lock);
    json_kv_int(j, "cpus", h->cpus);
    json_kv_int(j, "numa_nodes", h->numa_nodes);
    json_end_object(j);
}

static void print_json(const struct npv_host_info *h)
{
    struct json_out j;
    json_init(&j, stdout);
    status_write_json(&j, h);
    json_finish(&j);
}

int cmd_status(struct npv_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'},
        {"json", no_argument, NULL, 'j'},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = cli_getopt(cli, argc, argv, ":h", opts)) != -1) {
        switch (c) {
        case 'h':
            help();
            return CLI_OK;
        case 'j':
            cli->json = true;
            break;
        default:
            return CLI_USAGE;
        }
    }
    if (optind < argc)
        return cli_usage(cli, "unexpected argument '%s'", argv[optind]);

    struct npv_host_info h;
    int ret = npv_host_probe(cli->ctx, &h);
    if (ret < 0)
        return cli_fail(cli, "host probe", ret);
    if (cli->json) {
        print_json(&h);
        return CLI_OK;
    }
    print_text(&h);
    printf("\nPCI functions:\n");
    fflush(stdout);
    char *list_argv[] = {"list", NULL};
    optind = 0;
    return cmd_list(cli, 1, list_argv);
}

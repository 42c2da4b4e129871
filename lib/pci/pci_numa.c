/* SPDX-License-Identifier: MIT */
/* NUMA locality of a PCI function: hwloc on the real machine, numa_node in a fake tree. */
#include <string.h>

#include <hwloc.h>

#include "pci_internal.h"

static hwloc_topology_t load_topology(struct npv_ctx *ctx)
{
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) < 0)
        return NULL;
    /* PCI objects are filtered out by default; locality needs them. */
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(topo) < 0) {
        npv_debug(ctx, "hwloc: cannot load the topology; using sysfs numa_node");
        hwloc_topology_destroy(topo);
        return NULL;
    }
    return topo;
}

static int sysfs_numa_node(struct npv_ctx *ctx, const char *canon)
{
    char path[NPV_SYSFS_PATH_MAX];
    long node;
    if (npv_sysfs_path(ctx, path, sizeof(path), "bus/pci/devices/%s/numa_node", canon) < 0)
        return -1;
    if (npv_sysfs_read_long(path, &node) < 0 || node < 0 || node > 65535)
        return -1;
    return (int)node;
}

int npv_pci_numa_node(struct npv_ctx *ctx, struct npv_pci_numa *numa, const struct npv_pci_addr *a,
                      const char *canon)
{
    /*
     * hwloc always describes the running machine, so it only answers for the
     * real "/sys"; a fake tree (tests, containers with a copied sysfs) is
     * answered from the function's own numa_node attribute.
     */
    if (strcmp(npv_ctx_sysfs_root(ctx), "/sys") != 0)
        return sysfs_numa_node(ctx, canon);
    if (!numa->tried) {
        numa->tried = true;
        numa->topology = load_topology(ctx);
    }
    hwloc_topology_t topo = numa->topology;
    if (topo == NULL || a->domain > 0xffff)
        return sysfs_numa_node(ctx, canon);
    hwloc_obj_t obj = hwloc_get_pcidev_by_busid(topo, a->domain, a->bus, a->dev, a->fn);
    if (obj == NULL)
        return sysfs_numa_node(ctx, canon);
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, obj);
    /* A function local to several nodes (or to none) has no single node. */
    if (anc == NULL || anc->nodeset == NULL || hwloc_bitmap_weight(anc->nodeset) != 1)
        return -1;
    return hwloc_bitmap_first(anc->nodeset);
}

void npv_pci_numa_fini(struct npv_pci_numa *numa)
{
    if (numa->topology != NULL)
        hwloc_topology_destroy((hwloc_topology_t)numa->topology);
    numa->topology = NULL;
    numa->tried = false;
}

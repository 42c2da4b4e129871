/* SPDX-License-Identifier: MIT */
/* NUMA locality of a PCI function: sysfs numa_node; hwloc only when the attribute is missing. */
#include <errno.h>
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

/*
 * The function's numa_node attribute (Documentation/ABI/testing/sysfs-bus-pci):
 * 0 and the node, or -1 in *node when the kernel knows no affinity; -ENOENT
 * when the attribute cannot be read.
 */
static int sysfs_numa_node(struct npv_ctx *ctx, const char *canon, int *node)
{
    char path[NPV_SYSFS_PATH_MAX];
    long v;
    if (npv_sysfs_path(ctx, path, sizeof(path), "bus/pci/devices/%s/numa_node", canon) < 0)
        return -ENOENT;
    if (npv_sysfs_read_long(path, &v) < 0)
        return -ENOENT;
    *node = v < 0 || v > 65535 ? -1 : (int)v;
    return 0;
}

int npv_pci_numa_node(struct npv_ctx *ctx, struct npv_pci_numa *numa, const struct npv_pci_addr *a,
                      const char *canon)
{
    /*
     * The kernel's own answer first, -1 included: it is what sysfs says, and
     * what `npuvfio list` shows ("-" for -1). hwloc, which would call every
     * device of a one-node machine local to node 0, only answers when the
     * attribute is missing, and only for the real "/sys" (it always
     * describes the running machine, not a fake tree).
     */
    int node;
    if (sysfs_numa_node(ctx, canon, &node) == 0)
        return node;
    if (strcmp(npv_ctx_sysfs_root(ctx), "/sys") != 0)
        return -1;
    if (!numa->tried) {
        numa->tried = true;
        numa->topology = load_topology(ctx);
    }
    hwloc_topology_t topo = numa->topology;
    if (topo == NULL || a->domain > 0xffff)
        return -1;
    hwloc_obj_t obj = hwloc_get_pcidev_by_busid(topo, a->domain, a->bus, a->dev, a->fn);
    if (obj == NULL)
        return -1;
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

/* SPDX-License-Identifier: MIT */
/*
 * NUMA placement of DMA memory through hwloc. A DMA buffer belongs on the
 * node nearest the device's PCIe root port: an access across the socket
 * interconnect costs every descriptor fetch and status write.
 *
 * The topology is loaded per placement and trimmed to NUMA nodes: placing
 * memory is an allocation-time cost, and the library keeps no global state
 * to cache a topology in.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hwloc.h>

#include "ctx_internal.h"
#include "numa.h"

int npv_numa_open(struct npv_ctx *ctx, struct hwloc_topology **out)
{
    hwloc_topology_t topo;
    int ret;
    errno = 0;
    if (hwloc_topology_init(&topo) < 0) {
        ret = errno != 0 ? -errno : -ENOMEM;
        goto err;
    }
    /* NUMA nodes are always kept; caches and cores are not needed and cost most of the load. */
    hwloc_topology_set_all_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
    if (hwloc_topology_load(topo) < 0) {
        ret = errno != 0 ? -errno : -EIO;
        hwloc_topology_destroy(topo);
        goto err;
    }
    *out = topo;
    return 0;
err:
    npv_err(ctx, "hwloc: loading the topology failed: %s", npv_strerror(ret));
    return ret;
}

void npv_numa_close(struct hwloc_topology *topo)
{
    if (topo != NULL)
        hwloc_topology_destroy(topo);
}

int npv_numa_bind(struct npv_ctx *ctx, struct hwloc_topology *topo, void *addr, size_t len,
                  int node)
{
    hwloc_obj_t obj = node >= 0 ? hwloc_get_numanode_obj_by_os_index(topo, (unsigned)node) : NULL;
    if (obj == NULL) {
        npv_err(ctx, "NUMA node %d does not exist", node);
        return -EINVAL;
    }
    errno = 0;
    if (hwloc_set_area_membind(topo, addr, len, obj->nodeset, HWLOC_MEMBIND_BIND,
                               HWLOC_MEMBIND_BYNODESET) < 0) {
        int ret = errno != 0 ? -errno : -EIO;
        npv_err(ctx, "binding DMA memory to NUMA node %d failed: %s", node, npv_strerror(ret));
        return ret;
    }
    return 0;
}

int npv_numa_node_of(struct hwloc_topology *topo, const void *addr, size_t len)
{
    int node = -1;
    hwloc_nodeset_t set = hwloc_bitmap_alloc();
    if (set != NULL &&
        hwloc_get_area_memlocation(topo, addr, len, set, HWLOC_MEMBIND_BYNODESET) == 0 &&
        hwloc_bitmap_weight(set) == 1)
        node = hwloc_bitmap_first(set); /* nodesets are indexed by OS node number */
    hwloc_bitmap_free(set);
    return node;
}

int npv_numa_single_node(struct npv_ctx *ctx)
{
    char path[4096], buf[64];
    if (npv_sysfs_path(ctx, path, sizeof(path), "devices/system/node/online") < 0)
        return -1;
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    int node = -1;
    if (fgets(buf, sizeof(buf), f) != NULL) {
        /* "0" is one node; "0-1" or "0,2" are several. */
        char *end = NULL;
        long v = strtol(buf, &end, 10);
        if (end != buf && (*end == '\n' || *end == '\0') && v >= 0 && v < 4096)
            node = (int)v;
    }
    fclose(f);
    return node;
}

/* SPDX-License-Identifier: MIT */
/* NUMA placement of host memory (hwloc). */
#ifndef NPV_NUMA_H
#define NPV_NUMA_H

#include <stddef.h>

struct npv_ctx;
struct hwloc_topology;

/* Load a topology trimmed to NUMA nodes. Logs and returns a negative errno on failure. */
int npv_numa_open(struct npv_ctx *ctx, struct hwloc_topology **out);
void npv_numa_close(struct hwloc_topology *topo);
/* Bind [addr, addr+len) to NUMA node `node` (OS index); call before the pages are faulted in. */
int npv_numa_bind(struct npv_ctx *ctx, struct hwloc_topology *topo, void *addr, size_t len,
                  int node);
/* The node (OS index) every page of [addr, addr+len) sits on, or -1 (spread, unknown). */
int npv_numa_node_of(struct hwloc_topology *topo, const void *addr, size_t len);
/* The machine's only NUMA node, read from sysfs, or -1 when it has several or sysfs says nothing.
 */
int npv_numa_single_node(struct npv_ctx *ctx);

#endif

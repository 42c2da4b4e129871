/* SPDX-License-Identifier: MIT */
/*
 * The kernel's hugepage pools, machine-wide or per NUMA node, as sysfs shows
 * them (kernel/mm/hugepages/hugepages-<kB>kB and
 * devices/system/node/node<N>/hugepages/hugepages-<kB>kB), read under the
 * context's sysfs root.
 *
 * Thread-safety: the calls keep no state; concurrent resizes of one pool race
 * as they would from a shell.
 */
#ifndef NPUVFIO_HUGEPAGES_H
#define NPUVFIO_HUGEPAGES_H

#include <npuvfio/common.h>
#include <npuvfio/ctx.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NPV_HUGEPAGE_2M (2ull << 20)
#define NPV_HUGEPAGE_1G (1ull << 30)

struct npv_hugepages {
    uint64_t page_size; /* bytes */
    int node;           /* -1: the machine-wide pool */
    uint64_t nr;        /* nr_hugepages: pages in the pool */
    uint64_t free;      /* free_hugepages: pages not in use */
};

/* Parse "2M", "2MB", "2048k", "2048kB", "1G", "1GB" (case-insensitive). -EINVAL otherwise. */
NPV_API int npv_hugepage_size_parse(const char *text, uint64_t *bytes);

/* Read a pool. -ENOENT when the kernel has no pool of that size (or no such node). */
NPV_API int npv_hugepages_read(struct npv_ctx *ctx, uint64_t page_size, int node,
                               struct npv_hugepages *out);

/*
 * Resize a pool to count pages and report what it holds afterwards in *out.
 * The kernel may give fewer pages than asked (fragmented or short memory):
 * then *out says how many and the call returns -ENOMEM. -ENOENT no such
 * pool, -EACCES/-EPERM not allowed.
 */
NPV_API int npv_hugepages_reserve(struct npv_ctx *ctx, uint64_t page_size, int node, uint64_t count,
                                  struct npv_hugepages *out);

#ifdef __cplusplus
}
#endif

#endif

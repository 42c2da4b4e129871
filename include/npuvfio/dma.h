/* SPDX-License-Identifier: MIT */
/*
 * npv_dma: DMA-able host memory.
 *
 * Backed by a memfd (hugetlb 2 MiB or 1 GiB pages when reserved, else 4 KiB
 * pages with one logged warning per context) so the same memory can be
 * shared with a vfio-user device by fd. Pre-faulted, locked against paging by
 * the IOMMU pin, placed on a NUMA node when asked. Mapped into one or more
 * domains, each at its own IOVA; freeing unmaps from all of them first.
 *
 * Thread-safety: alloc/map/unmap/free of one buffer are serialised by the
 * caller; different buffers are independent. Accessors are lock-free.
 */
#ifndef NPUVFIO_DMA_H
#define NPUVFIO_DMA_H

#include <npuvfio/common.h>
#include <npuvfio/ctx.h>
#include <npuvfio/domain.h>

#ifdef __cplusplus
extern "C" {
#endif

struct npv_dma;

enum npv_dma_page {
    NPV_DMA_PAGE_AUTO = 0, /* 2 MiB hugepages if reserved and size >= 1 MiB, else 4 KiB */
    NPV_DMA_PAGE_4K,
    NPV_DMA_PAGE_2M, /* falls back to 4 KiB with a warning when none are free */
    NPV_DMA_PAGE_1G, /* falls back to 2 MiB, then 4 KiB, with a warning */
};

/* Prot bits of a mapping, as the device sees it. */
enum {
    NPV_DMA_READ = 1u << 0,  /* device reads host memory */
    NPV_DMA_WRITE = 1u << 1, /* device writes host memory */
    NPV_DMA_RW = NPV_DMA_READ | NPV_DMA_WRITE,
};

struct npv_dma_opts {
    enum npv_dma_page page;
    int numa_node;         /* -1: no preference */
    unsigned require_page; /* nonzero: fail with -ENOMEM instead of falling back */
};

/* size is rounded up to the page size. opts may be NULL. */
NPV_API int npv_dma_alloc(struct npv_ctx *ctx, size_t size, const struct npv_dma_opts *opts,
                          struct npv_dma **out);
/* Unmap from every domain, then release the memory. NULL is a no-op. */
NPV_API void npv_dma_free(struct npv_dma *dma);

NPV_API void *npv_dma_vaddr(const struct npv_dma *dma);
NPV_API size_t npv_dma_size(const struct npv_dma *dma);
NPV_API size_t npv_dma_page_size(const struct npv_dma *dma);
/* The memfd behind the buffer (owned by the buffer). */
NPV_API int npv_dma_fd(const struct npv_dma *dma);
/* The NUMA node the pages sit on, or -1 when unknown. */
NPV_API int npv_dma_numa_node(const struct npv_dma *dma);

/*
 * Map the whole buffer into dom at an IOVA the domain's allocator chooses,
 * aligned to the buffer's page size. -ENOSPC when the domain has no room,
 * -EEXIST when already mapped there.
 */
NPV_API int npv_dma_map(struct npv_dma *dma, struct npv_domain *dom, unsigned prot,
                        npv_iova_t *iova);
/* Map at a fixed IOVA. -EBUSY if it overlaps, -ERANGE if outside the usable ranges. */
NPV_API int npv_dma_map_at(struct npv_dma *dma, struct npv_domain *dom, npv_iova_t iova,
                           unsigned prot);
NPV_API int npv_dma_unmap(struct npv_dma *dma, struct npv_domain *dom);
/* The buffer's IOVA in dom, or -ENOENT. */
NPV_API int npv_dma_iova(const struct npv_dma *dma, const struct npv_domain *dom, npv_iova_t *iova);

/*
 * Make CPU writes in [off, off+len) visible to the device / device writes
 * visible to the CPU. No-ops while every domain the buffer is mapped in is
 * coherent; cache clean / invalidate by address on arm64 otherwise.
 */
NPV_API void npv_dma_sync_for_device(struct npv_dma *dma, size_t off, size_t len);
NPV_API void npv_dma_sync_for_cpu(struct npv_dma *dma, size_t off, size_t len);

#ifdef __cplusplus
}
#endif

#endif

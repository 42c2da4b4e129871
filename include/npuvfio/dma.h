/* SPDX-License-Identifier: MIT */
/*
 * npv_dma: DMA-able host memory.
 *
 * Backed by a memfd (hugetlb 2 MiB or 1 GiB pages when reserved, else 4 KiB
 * pages with one logged warning per context) so the same memory can be
 * shared with a vfio-user device by fd. Pre-faulted (unless NPV_DMA_SPARSE),
 * placed on a NUMA node when asked. Or memory the caller already owns,
 * wrapped without a copy (npv_dma_wrap). Mapped into one or more domains,
 * each at its own IOVA; freeing unmaps from all of them first.
 *
 * Pinning and RLIMIT_MEMLOCK: nothing is pinned at allocation. A map into a
 * domain with a kernel device attached (type1 container or iommufd IOAS) pins
 * the buffer's pages, once per such IOMMU, and without CAP_IPC_LOCK the
 * kernel charges the pins to RLIMIT_MEMLOCK: such a map that would exceed it
 * is refused with -ENOMEM and a log line naming the limit that would do.
 * vfio-user connections pin nothing (the server maps the memory from its fd)
 * and are not limited by it.
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

/* npv_dma_opts.flags */
enum {
    /*
     * Fault no page in: only pages the CPU or a vfio-user device touches
     * cost RAM (for large address spaces used sparsely). 4 KiB pages only
     * (a hugetlb mapping reserves all its pages at mmap): with
     * NPV_DMA_PAGE_2M or _1G it is -EINVAL. Meant for vfio-user: a map
     * into a kernel IOMMU pins, which faults in and charges every page.
     */
    NPV_DMA_SPARSE = 1u << 0,
};

struct npv_dma_opts {
    enum npv_dma_page page;
    int numa_node;         /* -1: no preference */
    unsigned require_page; /* nonzero: fail with -ENOMEM instead of falling back */
    unsigned flags;        /* NPV_DMA_SPARSE */
};

/* size is rounded up to the page size. opts may be NULL. */
NPV_API int npv_dma_alloc(struct npv_ctx *ctx, size_t size, const struct npv_dma_opts *opts,
                          struct npv_dma **out);
/* npv_dma_wrap flags */
enum {
    /*
     * With fd -1: find the file behind a MAP_SHARED mapping at vaddr in
     * /proc/self/maps and use it. A memfd or unlinked file is reached only
     * through /proc/self/map_files (CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE);
     * a named file is reopened by path and kept only if its inode is the
     * mapping's. When none is found (anonymous or private memory, no
     * privilege) the buffer has no fd and a warning says why.
     */
    NPV_DMA_WRAP_FIND_FILE = 1u << 0,
};

/*
 * Memory the caller owns as a buffer, without a copy: a page-aligned heap
 * block, a file mapping, another allocator's hugepages. vaddr and len must
 * be 4 KiB aligned (-EINVAL and a log line otherwise: the IOMMU maps whole
 * pages and would show the device the neighbours). The memory must stay
 * mapped until npv_dma_free, which unmaps it from every domain and leaves
 * the memory itself to the caller. flags: 0 or NPV_DMA_WRAP_FIND_FILE.
 *
 * fd, fd_offset: the file mapped at vaddr and vaddr's offset in it (4 KiB
 * aligned), or fd -1 when there is none. The buffer keeps a duplicate of fd.
 * A named fd is checked against /proc/self/maps (when readable): -EINVAL
 * with a log line when the memory at vaddr is not that file (by inode) at
 * that offset, shared; -EFAULT when part of the range is not mapped.
 * A vfio-user server in another process reaches the memory only through that
 * file: a map of a buffer without fd into a domain with a vfio-user device
 * (or attaching one to a domain holding such a map) is -NPV_ENOTSHARED with
 * a log line saying why. Anonymous private memory (malloc, MAP_PRIVATE |
 * MAP_ANONYMOUS) has no file; a memfd, a MAP_SHARED file or a hugetlbfs file
 * does, so allocate shared tensors there to reach a vfio-user device.
 *
 * Hugetlb memory (a hugetlbfs file or memfd, anonymous MAP_HUGETLB) whose
 * vaddr and len are aligned to its huge page maps at an IOVA aligned alike,
 * so the IOMMU can use the large page; npv_dma_page_size tells which.
 * Kernel VFIO pins the pages at map time (RLIMIT_MEMLOCK as above). Since
 * Linux 6.5 the kernel refuses to pin a writable MAP_SHARED mapping of a
 * file on a filesystem that tracks dirty pages (ext4, xfs, ...): tmpfs,
 * memfd and hugetlbfs files work.
 */
NPV_API int npv_dma_wrap(struct npv_ctx *ctx, void *vaddr, size_t len, int fd, uint64_t fd_offset,
                         unsigned flags, struct npv_dma **out);
/*
 * Unmap from every domain, then release the memory (a wrapped buffer's memory
 * is the caller's and stays). A mapping whose unmap fails is left quarantined
 * in its domain (see npv_domain_quarantined). NULL is a no-op.
 */
NPV_API void npv_dma_free(struct npv_dma *dma);

NPV_API void *npv_dma_vaddr(const struct npv_dma *dma);
NPV_API size_t npv_dma_size(const struct npv_dma *dma);
NPV_API size_t npv_dma_page_size(const struct npv_dma *dma);
/* The file behind the buffer (owned by the buffer), or -1 for wrapped memory without one. */
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
/*
 * -ENOENT when not mapped in dom. When an IOMMU behind dom fails to unmap
 * (logged), its error is returned and the IOVA stays quarantined (see
 * npv_domain_quarantined): the buffer keeps the mapping, npv_dma_iova still
 * names it, and calling npv_dma_unmap again retries on the IOMMUs that still
 * hold it; 0 once they all let go, and the IOVA is free again.
 */
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

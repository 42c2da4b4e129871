/* SPDX-License-Identifier: MIT */
/*
 * npv_domain: one IOVA address space.
 *
 * A domain owns an IOVA allocator and the journal of what is mapped in it.
 * The IOMMU behind it depends on the devices attached: an iommufd IOAS shared
 * by the domain's iommufd devices, the type1 container of each legacy
 * device's group, or the mapping table of each vfio-user connection. Every
 * mapping made in the domain is pushed to all of them; a device attached
 * later gets the journal replayed.
 *
 * The usable IOVA space is the aperture given at creation (a device's DMA
 * limit, e.g. 32 bits) intersected with the ranges every attached IOMMU
 * allows, minus reserved ranges.
 *
 * IOVA 0 is never handed out: the first page (0 to
 * NPV_DOMAIN_IOVA_ZERO_GUARD - 1) is reserved from creation on, so a
 * device DMA to address 0 (a pointer the driver never set, or "no buffer" in
 * many NPU descriptor formats) faults instead of reaching a buffer. A map at
 * an IOVA in that page is -ERANGE.
 *
 * On iommufd a domain keeps its IOAS and pins until the domain is freed: the
 * IOAS is made when the first iommufd device attaches and stays, filled and
 * with its pages pinned, when the last one leaves or closes, so a device
 * switching back costs one replacing attach whatever the mapping count. The
 * last npv_domain_put destroys it (and releases the context's /dev/iommu when
 * nothing else holds it). Legacy containers and vfio-user connections follow
 * their device instead and are gone when it closes.
 *
 * Reference counted: npv_domain_new returns one reference; every device
 * attached to the domain and every DMA mapping in it hold one more, so the
 * domain may be put before the devices attached to it are closed (see
 * dev.h for the whole teardown order). The context must outlive it.
 *
 * Thread-safety: all calls are safe from many threads; the domain
 * serialises them with its own lock.
 */
#ifndef NPUVFIO_DOMAIN_H
#define NPUVFIO_DOMAIN_H

#include <stdbool.h>
#include <npuvfio/common.h>
#include <npuvfio/ctx.h>

#ifdef __cplusplus
extern "C" {
#endif

struct npv_domain;

/* The bytes from IOVA 0 that a domain never uses, whatever its aperture. */
#define NPV_DOMAIN_IOVA_ZERO_GUARD 4096ull

struct npv_domain_opts {
    /*
     * The device-side DMA window, inclusive. aperture_last == 0 means all 64
     * bits. aperture_start may be 0 (a device that can address from 0): the
     * domain still never allocates below NPV_DOMAIN_IOVA_ZERO_GUARD, so the
     * usable space starts there; npv_domain_iova_ranges shows it.
     */
    npv_iova_t aperture_start;
    npv_iova_t aperture_last;
};

/*
 * opts may be NULL (whole 64-bit space). Returns 0, -EINVAL (an inverted
 * aperture, or one that ends inside the guard page at 0) or -ENOMEM.
 */
NPV_API int npv_domain_new(struct npv_ctx *ctx, const struct npv_domain_opts *opts,
                           struct npv_domain **out);
NPV_API struct npv_domain *npv_domain_get(struct npv_domain *dom);
/* Drop a reference; the last one frees the domain. NULL is a no-op. */
NPV_API void npv_domain_put(struct npv_domain *dom);

/* Keep [start, last] out of allocation. -EBUSY if something is allocated there. */
NPV_API int npv_domain_reserve(struct npv_domain *dom, npv_iova_t start, npv_iova_t last);

/*
 * The ranges the allocator may use now. Writes up to max ranges and returns
 * how many there are in all (which may exceed max).
 */
NPV_API int npv_domain_iova_ranges(struct npv_domain *dom, struct npv_iova_range *out, size_t max);

/* Host address of iova, if it lies in a mapping. -ENOENT otherwise. O(log n). */
NPV_API int npv_domain_iova_to_vaddr(struct npv_domain *dom, npv_iova_t iova, void **vaddr);
/* IOVA of a host address, if it lies in a mapping. -ENOENT otherwise. O(log n). */
NPV_API int npv_domain_vaddr_to_iova(struct npv_domain *dom, const void *vaddr, npv_iova_t *iova);

/* Number of mappings in the journal (quarantined ranges not included). */
NPV_API size_t npv_domain_mapping_count(struct npv_domain *dom);

/*
 * The quarantine: when an IOMMU behind the domain fails to unmap a mapping
 * (npv_dma_unmap, or the undo of a map that failed in another IOMMU), the
 * error is logged and returned, and the IOVA range stays taken: it is never
 * handed out again while that IOMMU may still translate it. The mapping is
 * gone from the journal (no lookups, no replay into a device attached later).
 * A range leaves the quarantine when a retried npv_dma_unmap of the same
 * buffer succeeds in every IOMMU that still held it, when those IOMMUs leave
 * the domain (their device closes or moves to another domain), or with the
 * domain.
 *
 * Returns the number of quarantined ranges; *bytes (may be NULL) gets their
 * total length. 0 for NULL.
 */
NPV_API size_t npv_domain_quarantined(struct npv_domain *dom, uint64_t *bytes);

/*
 * Whether every IOMMU behind the domain enforces cache coherency
 * (VFIO_DMA_CC_IOMMU). 1 coherent, 0 not, -ENODATA while no kernel device is
 * attached (vfio-user connections share host memory, which is coherent).
 */
NPV_API int npv_domain_coherent(struct npv_domain *dom);

#ifdef __cplusplus
}
#endif

#endif

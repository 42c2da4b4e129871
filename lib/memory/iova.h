/* SPDX-License-Identifier: MIT */
/*
 * The IOVA allocator: one in user space for every backend. iommufd maps with
 * IOMMU_IOAS_MAP_FIXED_IOVA, type1 maps at the IOVA we give it and vfio-user
 * has no allocator at all, so the address choice has to be ours.
 *
 * Best fit over the usable ranges, aligned to the buffer's page size so an
 * IOMMU can use the same large page on its side; freeing coalesces with the
 * free neighbours. All lookups and updates are O(log n) in the number of
 * allocations and free holes (the best-fit search skips holes that are large
 * enough but cannot hold the size after alignment).
 *
 * Not thread-safe: the owning domain serialises.
 */
#ifndef NPV_IOVA_H
#define NPV_IOVA_H

#include <stdbool.h>
#include <npuvfio/common.h>

struct npv_ctx;

#include "avl.h"

struct npv_iova_space {
    /* Where allocation may happen: sorted, disjoint and never adjacent. */
    struct npv_iova_range *ranges;
    size_t nr_ranges;
    struct npv_avl used;          /* allocations by start */
    struct npv_avl free_by_start; /* holes by start, for coalescing */
    struct npv_avl free_by_size;  /* holes by (length, start), for best fit */
    /* Whose failpoints the allocator's own allocations count against (NULL: none). */
    struct npv_ctx *ctx;
};

/* An empty space: nothing can be allocated until ranges are set. */
void npv_iova_space_init(struct npv_iova_space *sp);
void npv_iova_space_fini(struct npv_iova_space *sp);

/*
 * Replace the usable ranges (any order, may overlap). -ERANGE when an
 * allocation would fall outside them, -ENOMEM; on failure nothing changed.
 */
int npv_iova_space_set_ranges(struct npv_iova_space *sp, const struct npv_iova_range *r, size_t n);
/* Whether every allocation lies inside the (normalised) ranges r. */
bool npv_iova_space_fits(const struct npv_iova_space *sp, const struct npv_iova_range *r, size_t n);
/* Whether an allocation overlaps [start, last]. */
bool npv_iova_space_overlaps(const struct npv_iova_space *sp, npv_iova_t start, npv_iova_t last);

/* align: a power of two. -EINVAL (size 0, bad align), -ENOSPC, -ENOMEM. */
int npv_iova_alloc(struct npv_iova_space *sp, uint64_t size, uint64_t align, npv_iova_t *iova);
/* -EINVAL (size 0 or wrap), -EBUSY (overlaps an allocation), -ERANGE (not usable), -ENOMEM. */
int npv_iova_alloc_at(struct npv_iova_space *sp, npv_iova_t iova, uint64_t size);
/* iova must be the start of an allocation; -ENOENT otherwise. Never fails otherwise. */
int npv_iova_free(struct npv_iova_space *sp, npv_iova_t iova);
size_t npv_iova_count(const struct npv_iova_space *sp);
/* The free holes in address order: writes up to max, returns how many there are. O(n). */
size_t npv_iova_holes(const struct npv_iova_space *sp, struct npv_iova_range *out, size_t max);

/*
 * Range sets. Inputs in any order, overlapping allowed; outputs sorted,
 * disjoint, adjacent ranges merged, in a malloc'd array (NULL when empty).
 */
/* Sort and merge in place; returns the new count. */
size_t npv_ranges_normalize(struct npv_iova_range *r, size_t n);
int npv_ranges_intersect(const struct npv_iova_range *a, size_t na, const struct npv_iova_range *b,
                         size_t nb, struct npv_iova_range **out, size_t *nout);
/* a minus b. */
int npv_ranges_subtract(const struct npv_iova_range *a, size_t na, const struct npv_iova_range *b,
                        size_t nb, struct npv_iova_range **out, size_t *nout);

#endif

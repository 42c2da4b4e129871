/* SPDX-License-Identifier: MIT */
/*
 * What transports see of a domain: its journal of mappings and the IOMMU
 * "sinks" the mappings are pushed to.
 *
 * A sink is one IOMMU that must hold the domain's mappings: an iommufd IOAS
 * (one per domain, shared by its iommufd devices), a type1 container (one
 * per legacy device's group) or a vfio-user connection's mapping table.
 */
#ifndef NPV_DOMAIN_INTERNAL_H
#define NPV_DOMAIN_INTERNAL_H

#include <stdbool.h>
#include <npuvfio/domain.h>

struct npv_mapping {
    npv_iova_t iova;
    uint64_t len;
    void *vaddr;
    int fd;             /* file behind vaddr, for vfio-user fd passing; -1: none */
    uint64_t fd_offset; /* offset of vaddr in fd */
    unsigned prot;      /* NPV_DMA_READ | NPV_DMA_WRITE */
};

struct npv_iommu_sink;

struct npv_iommu_sink_ops {
    const char *name;
    int (*map)(struct npv_iommu_sink *sink, const struct npv_mapping *m);
    int (*unmap)(struct npv_iommu_sink *sink, const struct npv_mapping *m);
    /*
     * NULL for a sink that follows a device (a type1 container, a vfio-user
     * connection): its owner removes and frees it. Set for a sink that lives
     * as long as its domain (an iommufd IOAS, so a device switching back finds
     * it filled): the domain calls release once, when it is freed, for such a
     * sink still in its list with users == 0. By then the sink is in no
     * domain and the journal is gone; mappings left in the sink are release's
     * to drop (destroying the IOAS drops them). Called without the domain's
     * lock. A sink its owner takes out with npv_domain_remove_sink is the
     * owner's again: the domain never releases it.
     */
    void (*release)(struct npv_iommu_sink *sink);
};

struct npv_iommu_sink {
    const struct npv_iommu_sink_ops *ops;
    void *priv;
    /*
     * The IOVA ranges this IOMMU accepts; NULL/0 means no limit. A copy made
     * and freed by domain.c only (npv_domain_set_sink_ranges,
     * npv_iommu_sink_fini), read under the lock of the domain the sink is in,
     * so a backend never frees an array a domain may be reading.
     */
    const struct npv_iova_range *ranges;
    size_t nr_ranges;
    /* 1 coherent, 0 not, -1 not a kernel IOMMU (host shared memory). */
    int coherent;
    /*
     * The IOMMU is in another process (a vfio-user server) and reaches host
     * memory only by mapping the file passed with each mapping: a mapping
     * without fd is refused with -NPV_ENOTSHARED before any sink sees it, and
     * such a sink cannot join a domain holding one.
     */
    bool shares_by_fd;
    /*
     * Owner's bookkeeping (e.g. iommufd devices attached to one IOAS); the
     * domain reads it only when it is freed (see release).
     */
    unsigned users;
    struct npv_iommu_sink *next; /* the domain's list; the domain owns the link */
};

/*
 * Add a sink: the domain's usable ranges are narrowed by the sink's ranges
 * (-ERANGE if an existing mapping falls outside them), then the journal is
 * replayed into it (-NPV_ENOTSHARED for a shares_by_fd sink while a mapping
 * has no fd). On failure every mapping it made is undone and the sink is
 * not added.
 */
int npv_domain_add_sink(struct npv_domain *dom, struct npv_iommu_sink *sink);
/*
 * Remove a sink; with unmap, the journal's mappings are removed from it first.
 * Quarantined mappings it held are its no more (it translates nothing for this
 * domain's devices now): those nothing else holds are released.
 */
void npv_domain_remove_sink(struct npv_domain *dom, struct npv_iommu_sink *sink, bool unmap);
/*
 * Remove a sink after unmapping the journal from it, all or nothing: when an
 * unmap fails, what was unmapped is mapped again, the sink stays in the
 * domain and the error is returned (a sink left holding part of a domain
 * would refuse the next replay of overlapping IOVAs with -EEXIST). 0 when
 * the sink was not in the domain.
 */
int npv_domain_leave_sink(struct npv_domain *dom, struct npv_iommu_sink *sink);
/* The first sink with these ops, or NULL (for sinks shared per domain, such as an IOAS). */
struct npv_iommu_sink *npv_domain_find_sink(struct npv_domain *dom,
                                            const struct npv_iommu_sink_ops *ops);
/*
 * Give sink the IOVA ranges its IOMMU accepts now (they narrow as devices
 * attach to an IOAS). The ranges are copied. With dom
 * NULL the sink must be in no domain (its owner alone sees it). Otherwise sink
 * must be in dom (-ENOENT): under dom's lock the new ranges are checked
 * against dom's mappings (-ERANGE when one would fall outside) and the
 * domain's usable space and the sink's ranges change together; on failure
 * neither changes. Ranges equal to the sink's current ones change nothing and
 * cost no walk of the mappings.
 */
int npv_domain_set_sink_ranges(struct npv_domain *dom, struct npv_iommu_sink *sink,
                               const struct npv_iova_range *ranges, size_t n);
/* Free the sink's copy of its ranges. The sink must be in no domain. Idempotent. */
void npv_iommu_sink_fini(struct npv_iommu_sink *sink);
struct npv_ctx *npv_domain_ctx(const struct npv_domain *dom);

/*
 * The journal, written by npv_dma. Sink ops run under the domain's lock and
 * must not call back into the domain.
 *
 * Map m into every sink and record it, at an IOVA the allocator chooses
 * (aligned to align, a power of two), written to m->iova. -ENOSPC when no room,
 * -EEXIST when m's host range overlaps a mapping of the domain,
 * -NPV_ENOTSHARED when m has no fd and a sink shares_by_fd, or a sink's
 * error; on failure the sinks that took the map are unmapped again and the
 * IOVA freed, unless one of those unmaps fails: that is logged and the IOVA
 * stays quarantined (see npv_domain_unmap) under the map's own error.
 */
int npv_domain_map(struct npv_domain *dom, struct npv_mapping *m, uint64_t align);
/* As npv_domain_map at m->iova: -EBUSY when it overlaps, -ERANGE when not usable. */
int npv_domain_map_at(struct npv_domain *dom, const struct npv_mapping *m);
/*
 * Remove the mapping starting at iova from every sink and the journal, and
 * free its IOVA. -ENOENT when there is none. When a sink fails to unmap it
 * (other than -ENOENT, which says the IOMMU maps nothing there) the error is
 * logged and returned, the mapping leaves the journal (no replay, no lookup)
 * but its IOVA stays taken: quarantined while that IOMMU may still translate
 * it. Called again with the same iova it retries the unmap on the sinks that
 * still hold it: 0 when they all let go (the IOVA is free again), else their
 * error and the range stays quarantined. -ENOMEM (nothing changed) when there
 * is no memory to record a quarantine.
 */
int npv_domain_unmap(struct npv_domain *dom, npv_iova_t iova);

#endif

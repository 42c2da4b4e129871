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
    int fd;             /* memfd behind vaddr, for vfio-user fd passing */
    uint64_t fd_offset; /* offset of vaddr in fd */
    unsigned prot;      /* NPV_DMA_READ | NPV_DMA_WRITE */
};

struct npv_iommu_sink;

struct npv_iommu_sink_ops {
    const char *name;
    int (*map)(struct npv_iommu_sink *sink, const struct npv_mapping *m);
    int (*unmap)(struct npv_iommu_sink *sink, const struct npv_mapping *m);
};

struct npv_iommu_sink {
    const struct npv_iommu_sink_ops *ops;
    void *priv;
    /* The IOVA ranges this IOMMU accepts; NULL/0 means no limit. Owned by the sink's owner. */
    const struct npv_iova_range *ranges;
    size_t nr_ranges;
    /* 1 coherent, 0 not, -1 not a kernel IOMMU (host shared memory). */
    int coherent;
    /* Owner's bookkeeping (e.g. iommufd devices sharing one IOAS). */
    unsigned users;
    struct npv_iommu_sink *next; /* the domain's list; the domain owns the link */
};

/*
 * Add a sink: the domain's usable ranges are narrowed by the sink's ranges
 * (-ERANGE if an existing mapping falls outside them), then the journal is
 * replayed into it. On failure every mapping it made is undone and the sink is
 * not added.
 */
int npv_domain_add_sink(struct npv_domain *dom, struct npv_iommu_sink *sink);
/* Remove a sink; with unmap, the journal's mappings are removed from it first. */
void npv_domain_remove_sink(struct npv_domain *dom, struct npv_iommu_sink *sink, bool unmap);
/* The first sink with these ops, or NULL (for sinks shared per domain, such as an IOAS). */
struct npv_iommu_sink *npv_domain_find_sink(struct npv_domain *dom,
                                            const struct npv_iommu_sink_ops *ops);
/* Re-read the sink's ranges after the sink's owner changed them (after an attach). */
int npv_domain_refresh_ranges(struct npv_domain *dom);
struct npv_ctx *npv_domain_ctx(const struct npv_domain *dom);

#endif

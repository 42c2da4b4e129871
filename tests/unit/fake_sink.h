/* SPDX-License-Identifier: MIT */
/* A recording IOMMU sink for domain and DMA tests: keeps what is mapped, fails on demand. */
#ifndef NPV_TEST_FAKE_SINK_H
#define NPV_TEST_FAKE_SINK_H

#include <stdbool.h>

#include "domain_internal.h"

#define FAKE_SINK_MAX 256

struct fake_sink {
    struct npv_iommu_sink sink;
    struct npv_mapping live[FAKE_SINK_MAX]; /* what is mapped now */
    size_t nr_live;
    unsigned map_calls;
    unsigned unmap_calls;
    unsigned fail_map_at; /* nonzero: the fail_map_at-th map call (1-based) fails */
    int fail_err;
    bool fail_unmaps;       /* every unmap fails (and leaves the mapping in place) */
    unsigned fail_unmap_at; /* nonzero: the fail_unmap_at-th unmap call (1-based) fails */
    unsigned release_calls; /* fake_sink_ops_owned only */
    size_t live_at_release; /* nr_live when release was last called */
};

extern const struct npv_iommu_sink_ops fake_sink_ops;
extern const struct npv_iommu_sink_ops fake_sink_ops_other;
/* With a release hook: a sink the domain owns (as an iommufd IOAS). Release counts and forgets. */
extern const struct npv_iommu_sink_ops fake_sink_ops_owned;

/* coherent: 1, 0 or -1 as in struct npv_iommu_sink. */
void fake_sink_init(struct fake_sink *f, int coherent);
/* Whether iova is mapped in the fake (at the start of a mapping). */
const struct npv_mapping *fake_sink_find(const struct fake_sink *f, npv_iova_t iova);

#endif

/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>

#include "fake_sink.h"

static int fake_map(struct npv_iommu_sink *sink, const struct npv_mapping *m)
{
    struct fake_sink *f = sink->priv;
    f->map_calls++;
    if (f->fail_map_at != 0 && f->map_calls == f->fail_map_at)
        return f->fail_err != 0 ? f->fail_err : -EIO;
    if (f->nr_live == FAKE_SINK_MAX)
        return -ENOSPC;
    /* An IOMMU refuses a second mapping over the same IOVA. */
    for (size_t i = 0; i < f->nr_live; i++)
        if (m->iova <= f->live[i].iova + (f->live[i].len - 1) &&
            f->live[i].iova <= m->iova + (m->len - 1))
            return -EEXIST;
    f->live[f->nr_live++] = *m;
    return 0;
}

static int fake_unmap(struct npv_iommu_sink *sink, const struct npv_mapping *m)
{
    struct fake_sink *f = sink->priv;
    f->unmap_calls++;
    if (f->fail_unmaps || (f->fail_unmap_at != 0 && f->unmap_calls == f->fail_unmap_at))
        return -EIO;
    for (size_t i = 0; i < f->nr_live; i++) {
        if (f->live[i].iova == m->iova && f->live[i].len == m->len) {
            f->live[i] = f->live[--f->nr_live];
            return 0;
        }
    }
    return -ENOENT;
}

const struct npv_iommu_sink_ops fake_sink_ops = {
    .name = "fake",
    .map = fake_map,
    .unmap = fake_unmap,
};

const struct npv_iommu_sink_ops fake_sink_ops_other = {
    .name = "fake-other",
    .map = fake_map,
    .unmap = fake_unmap,
};

static void fake_release(struct npv_iommu_sink *sink)
{
    struct fake_sink *f = sink->priv;
    f->release_calls++;
    f->live_at_release = f->nr_live;
    /* As destroying an IOAS drops its mappings in one go. */
    f->nr_live = 0;
    npv_iommu_sink_fini(sink);
}

const struct npv_iommu_sink_ops fake_sink_ops_owned = {
    .name = "fake-owned",
    .map = fake_map,
    .unmap = fake_unmap,
    .release = fake_release,
};

void fake_sink_init(struct fake_sink *f, int coherent)
{
    memset(f, 0, sizeof(*f));
    f->sink.ops = &fake_sink_ops;
    f->sink.priv = f;
    f->sink.coherent = coherent;
}

const struct npv_mapping *fake_sink_find(const struct fake_sink *f, npv_iova_t iova)
{
    for (size_t i = 0; i < f->nr_live; i++)
        if (f->live[i].iova == iova)
            return &f->live[i];
    return NULL;
}

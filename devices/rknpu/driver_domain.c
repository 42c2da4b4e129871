/* SPDX-License-Identifier: MIT */
/*
 * The sixteen IOVA domains and the buffers in them.
 *
 * Why several domains: the NPU's IOVAs are 32 bits (its IOMMU's two-level
 * table covers exactly 4 GiB), so more than 4 GiB of NPU-resident memory
 * needs more than one address space, switched under the device between jobs
 * (the vendor driver's iommu_domain_id: drivers/rknpu/rknpu_iommu.c
 * rknpu_iommu_domain_get_and_switch and rknpu_iommu_switch_domain, up to
 * RKNPU_MAX_IOMMU_DOMAIN_NUM domains of a 4 GiB DMA limit each). Each is
 * its own npv_domain with the aperture [0, 4 GiB), made on first use and
 * freed with its last reference (a buffer holds one, a job holds one until
 * it finishes), so a driver that forgets a reference shows it in
 * npv_rknpu_counters rather than wedging every later switch.
 */
#include <errno.h>
#include <stdlib.h>

#include <npuvfio/dev.h>
#include <npuvfio/failpoint.h>

#include "driver_internal.h"

/* with_cmd false: a claimed domain (npv_rknpu_domain_claim), no command memory of ours in it. */
static int domain_create(struct npv_rknpu *npu, struct rknpu_domain *d, bool with_cmd)
{
    const struct npv_domain_opts opts = {
        .aperture_start = 0,
        .aperture_last = NPV_RKNPU_DOMAIN_SIZE - 1,
    };
    int r = npv_domain_new(npu->ctx, &opts, &d->dom);
    if (r < 0)
        return r;
    if (!with_cmd) {
        npu->counters.domains_live++;
        return 0;
    }
    r = npv_dma_alloc(npu->ctx, npu->slot_bytes * npu->cfg.queue_depth, NULL, &d->cmd);
    if (r < 0)
        goto err_domain;
    r = npv_dma_map(d->cmd, d->dom, NPV_DMA_READ, &d->cmd_iova);
    if (r < 0)
        goto err_cmd;
    npu->counters.domains_live++;
    return 0;

err_cmd:
    npv_dma_free(d->cmd);
    d->cmd = NULL;
err_domain:
    npv_domain_put(d->dom);
    d->dom = NULL;
    return r;
}

static void domain_destroy(struct npv_rknpu *npu, struct rknpu_domain *d)
{
    npv_dma_free(d->cmd);
    /*
     * The device keeps its own reference on the domain it is attached to, so
     * the IOVA space lives on until the device moves elsewhere; the pointer
     * in npu->attached stays unique meanwhile.
     */
    npv_domain_put(d->dom);
    d->cmd = NULL;
    d->dom = NULL;
    d->cmd_iova = 0;
    d->claimed = false;
    npu->counters.domains_live--;
}

int rknpu_domain_get(struct npv_rknpu *npu, uint32_t id)
{
    if (id >= NPV_RKNPU_MAX_DOMAINS)
        return -EINVAL;
    struct rknpu_domain *d = &npu->domains[id];
    if (d->dom == NULL) {
        int r = domain_create(npu, d, true);
        if (r < 0) {
            npv_ctx_log(npu->ctx, NPV_LOG_ERROR, "rknpu: creating domain %u failed: %s", id,
                        npv_strerror(r));
            return r;
        }
    }
    d->refs++;
    return 0;
}

void rknpu_domain_put(struct npv_rknpu *npu, uint32_t id)
{
    if (id >= NPV_RKNPU_MAX_DOMAINS)
        return;
    struct rknpu_domain *d = &npu->domains[id];
    if (d->dom == NULL || d->refs == 0) {
        npv_ctx_log(npu->ctx, NPV_LOG_ERROR, "rknpu: unbalanced put of domain %u", id);
        return;
    }
    if (--d->refs == 0)
        domain_destroy(npu, d);
}

/*
 * One IOMMU serves all three cores, so the device is in one domain at a
 * time: the caller switches only while no core runs.
 */
int rknpu_domain_attach(struct npv_rknpu *npu, uint32_t id)
{
    struct rknpu_domain *d = &npu->domains[id];
    if (d->dom == npu->attached)
        return 0;
    int r = npv_dev_attach(npu->dev, d->dom);
    if (r < 0) {
        npv_ctx_log(npu->ctx, NPV_LOG_ERROR, "rknpu: switching the device to domain %u: %s", id,
                    npv_strerror(r));
        return r;
    }
    npu->attached = d->dom;
    npu->counters.domain_switches++;
    return 0;
}

void rknpu_domains_release(struct npv_rknpu *npu)
{
    for (uint32_t id = 0; id < NPV_RKNPU_MAX_DOMAINS; id++) {
        struct rknpu_domain *d = &npu->domains[id];
        if (d->dom == NULL)
            continue;
        npv_ctx_log(npu->ctx, NPV_LOG_WARN,
                    "rknpu: closing with %u references left on domain %u (buffers not "
                    "destroyed%s)",
                    d->refs, id, d->claimed ? ", its claim not released" : "");
        domain_destroy(npu, d);
        d->refs = 0;
    }
}

/*
 * A claimed domain is what the vendor driver's RKNPU_SUBMIT runs in: user
 * space lays its register-command lists out in its own GEM buffers, so the
 * kernel allocates no command memory (rknpu_job.c rknpu_job_subcore_commit_pc
 * writes the task's regcmd_addr into PC BASE_ADDRESS as given). Here the
 * caller (an owner serving another process's driver) places every buffer
 * itself, at the IOVAs its client chose, so nothing of ours may sit in the
 * address space. The claim is one reference, as a buffer's.
 */
int npv_rknpu_domain_claim(struct npv_rknpu *npu, uint32_t domain_id)
{
    if (npu == NULL || domain_id >= NPV_RKNPU_MAX_DOMAINS)
        return -EINVAL;
    struct rknpu_domain *d = &npu->domains[domain_id];
    if (d->dom != NULL)
        return -EEXIST;
    int r = npv_failpoint_check(npu->ctx, NPV_FAIL_ALLOC);
    if (r < 0)
        return r;
    r = domain_create(npu, d, false);
    if (r < 0) {
        npv_ctx_log(npu->ctx, NPV_LOG_ERROR, "rknpu: claiming domain %u failed: %s", domain_id,
                    npv_strerror(r));
        return r;
    }
    d->refs = 1;
    d->claimed = true;
    return 0;
}

/*
 * Jobs do not parse their lists for addresses, so a queued or running job
 * may use any mapping of its domain: the claim (and with it, once the last
 * buffer is gone, the address space) is kept until they end.
 */
int npv_rknpu_domain_release(struct npv_rknpu *npu, uint32_t domain_id)
{
    if (npu == NULL || domain_id >= NPV_RKNPU_MAX_DOMAINS)
        return -EINVAL;
    struct rknpu_domain *d = &npu->domains[domain_id];
    if (d->dom == NULL || !d->claimed)
        return -ENOENT;
    if (d->jobs != 0)
        return -EBUSY;
    d->claimed = false;
    rknpu_domain_put(npu, domain_id);
    return 0;
}

int npv_rknpu_mem_create(struct npv_rknpu *npu, uint64_t size, uint32_t domain_id, unsigned flags,
                         struct npv_rknpu_mem **out)
{
    if (npu == NULL || out == NULL || size == 0 || domain_id >= NPV_RKNPU_MAX_DOMAINS ||
        (flags & ~(unsigned)NPV_RKNPU_MEM_SPARSE) != 0)
        return -EINVAL;
    /* Refused before any memory is taken: a non-sparse buffer would fault it all in. */
    if (size > NPV_RKNPU_DOMAIN_SIZE - NPV_DOMAIN_IOVA_ZERO_GUARD)
        return -ENOSPC;

    int r = npv_failpoint_check(npu->ctx, NPV_FAIL_ALLOC);
    if (r < 0)
        return r;
    struct npv_rknpu_mem *mem = calloc(1, sizeof(*mem));
    if (mem == NULL)
        return -ENOMEM;
    r = rknpu_domain_get(npu, domain_id);
    if (r < 0)
        goto err_mem;
    struct npv_dma_opts opts = {.page = NPV_DMA_PAGE_4K, .numa_node = -1};
    if (flags & NPV_RKNPU_MEM_SPARSE)
        opts.flags = NPV_DMA_SPARSE;
    r = npv_dma_alloc(npu->ctx, (size_t)size, &opts, &mem->dma);
    if (r < 0)
        goto err_domain;
    r = npv_dma_map(mem->dma, npu->domains[domain_id].dom, NPV_DMA_RW, &mem->iova);
    if (r < 0)
        goto err_dma;
    mem->npu = npu;
    mem->size = npv_dma_size(mem->dma);
    mem->domain_id = domain_id;
    npu->counters.mems_live++;
    npu->counters.mem_bytes += mem->size;
    *out = mem;
    return 0;

err_dma:
    npv_dma_free(mem->dma);
err_domain:
    rknpu_domain_put(npu, domain_id);
err_mem:
    free(mem);
    return r;
}

/*
 * Caller memory: the buffer is mapped into the domain's IOVA space (the
 * NPU's 32-bit addresses, so below 4 GiB) like one of ours, through the same
 * npv_dma_map on every transport: a kernel IOMMU pins it, a vfio-user server
 * is sent the buffer's fd (fd-less memory is -NPV_ENOTSHARED there).
 */
static int wrap(struct npv_rknpu *npu, struct npv_dma *dma, uint32_t domain_id,
                const npv_iova_t *at, struct npv_rknpu_mem **out)
{
    if (npu == NULL || dma == NULL || out == NULL || domain_id >= NPV_RKNPU_MAX_DOMAINS)
        return -EINVAL;
    if (npv_dma_size(dma) > NPV_RKNPU_DOMAIN_SIZE - NPV_DOMAIN_IOVA_ZERO_GUARD)
        return -ENOSPC;
    /*
     * A fixed place: on a 4 KiB IOMMU page (the RK3588 IOMMU's page, and
     * npv_dma_map_at's rule), past the guard page at 0 and wholly inside the
     * 32-bit space the cores address.
     */
    if (at != NULL &&
        ((*at & (NPV_DOMAIN_IOVA_ZERO_GUARD - 1)) != 0 || *at < NPV_DOMAIN_IOVA_ZERO_GUARD ||
         npv_dma_size(dma) > NPV_RKNPU_DOMAIN_SIZE - *at))
        return -EINVAL;
    /*
     * The device is attached to this domain only when a job of it runs, and
     * the library refuses fd-less memory at that attach (dma.h, npv_dma_wrap):
     * refuse it here, where the caller can still do something about it, and
     * not as a failed job later.
     */
    if (npv_dma_fd(dma) < 0 && npv_dev_transport(npu->dev) == NPV_TRANSPORT_VFIO_USER) {
        npv_ctx_log(npu->ctx, NPV_LOG_ERROR,
                    "rknpu: caller memory %p has no file: the vfio-user server cannot reach it "
                    "(wrap a memfd, MAP_SHARED or hugetlbfs mapping with its fd)",
                    npv_dma_vaddr(dma));
        return -NPV_ENOTSHARED;
    }
    int r = npv_failpoint_check(npu->ctx, NPV_FAIL_ALLOC);
    if (r < 0)
        return r;
    struct npv_rknpu_mem *mem = calloc(1, sizeof(*mem));
    if (mem == NULL)
        return -ENOMEM;
    r = rknpu_domain_get(npu, domain_id);
    if (r < 0)
        goto err_mem;
    if (at != NULL) {
        mem->iova = *at;
        r = npv_dma_map_at(dma, npu->domains[domain_id].dom, *at, NPV_DMA_RW);
        /* npv_dma_map_at: -EBUSY overlaps a mapping, -ERANGE lies in a reserved range. */
        if (r == -EBUSY)
            r = -EEXIST;
        else if (r == -ERANGE)
            r = -EINVAL;
    } else {
        r = npv_dma_map(dma, npu->domains[domain_id].dom, NPV_DMA_RW, &mem->iova);
    }
    if (r < 0) {
        npv_ctx_log(npu->ctx, NPV_LOG_ERROR, "rknpu: mapping caller memory into domain %u: %s",
                    domain_id, npv_strerror(r));
        goto err_domain;
    }
    mem->npu = npu;
    mem->dma = dma;
    mem->wrapped = true;
    mem->size = npv_dma_size(dma);
    mem->domain_id = domain_id;
    npu->counters.mems_live++;
    npu->counters.mem_bytes += mem->size;
    *out = mem;
    return 0;

err_domain:
    rknpu_domain_put(npu, domain_id);
err_mem:
    free(mem);
    return r;
}

int npv_rknpu_mem_wrap(struct npv_rknpu *npu, struct npv_dma *dma, uint32_t domain_id,
                       struct npv_rknpu_mem **out)
{
    return wrap(npu, dma, domain_id, NULL, out);
}

int npv_rknpu_mem_wrap_at(struct npv_rknpu *npu, struct npv_dma *dma, uint32_t domain_id,
                          npv_iova_t iova, struct npv_rknpu_mem **out)
{
    return wrap(npu, dma, domain_id, &iova, out);
}

/*
 * The driver does not parse the jobs' register commands for addresses, so
 * any job queued or running in the buffer's domain may use it: while one is,
 * the mapping stays (a device DMA into an unmapped page would fault the job,
 * or reach memory the IOVA is given to next).
 */
int npv_rknpu_mem_unwrap(struct npv_rknpu_mem *mem)
{
    if (mem == NULL || !mem->wrapped)
        return -EINVAL;
    struct npv_rknpu *npu = mem->npu;
    if (npu->domains[mem->domain_id].jobs != 0)
        return -EBUSY;
    int r = npv_dma_unmap(mem->dma, npu->domains[mem->domain_id].dom);
    if (r < 0) {
        /* Quarantined in the domain (npv_dma_unmap): the buffer still names it, retry later. */
        npv_ctx_log(npu->ctx, NPV_LOG_ERROR, "rknpu: unmapping caller memory from domain %u: %s",
                    mem->domain_id, npv_strerror(r));
        return r;
    }
    npu->counters.mems_live--;
    npu->counters.mem_bytes -= mem->size;
    rknpu_domain_put(npu, mem->domain_id);
    free(mem);
    return 0;
}

void npv_rknpu_mem_destroy(struct npv_rknpu_mem *mem)
{
    if (mem == NULL)
        return;
    struct npv_rknpu *npu = mem->npu;
    if (mem->wrapped) {
        int r = npv_rknpu_mem_unwrap(mem);
        if (r < 0)
            npv_ctx_log(npu->ctx, NPV_LOG_ERROR,
                        "rknpu: caller memory in domain %u not unmapped (%s): kept mapped, "
                        "npv_rknpu_mem_unwrap it once its jobs are reaped",
                        mem->domain_id, npv_strerror(r));
        return;
    }
    npv_dma_free(mem->dma);
    npu->counters.mems_live--;
    npu->counters.mem_bytes -= mem->size;
    rknpu_domain_put(npu, mem->domain_id);
    free(mem);
}

void *npv_rknpu_mem_vaddr(const struct npv_rknpu_mem *mem)
{
    return npv_dma_vaddr(mem->dma);
}

npv_iova_t npv_rknpu_mem_iova(const struct npv_rknpu_mem *mem)
{
    return mem->iova;
}

uint64_t npv_rknpu_mem_size(const struct npv_rknpu_mem *mem)
{
    return mem->size;
}

uint32_t npv_rknpu_mem_domain(const struct npv_rknpu_mem *mem)
{
    return mem->domain_id;
}

/*
 * The vendor's RKNPU_MEM_SYNC (rknpu_gem_sync_ioctl: dma_sync_single_range_for_device
 * / _for_cpu over offset and size) and rocket's FINI_BO / PREP_BO (rocket_gem.c:
 * dma_sync_sgtable_for_device / _for_cpu) on the buffer's npv_dma: no-ops in
 * lib/memory while every domain it is mapped in is coherent. The range is checked
 * here (model choice): lib/memory clamps silently, a caller's wrong offset should
 * be an error, not a sync of less than was asked.
 */
static bool mem_range_ok(const struct npv_rknpu_mem *mem, uint64_t off, uint64_t len)
{
    return off <= mem->size && len <= mem->size - off;
}

int npv_rknpu_mem_sync_for_device(struct npv_rknpu_mem *mem, uint64_t off, uint64_t len)
{
    if (mem == NULL)
        return -EINVAL;
    if (!mem_range_ok(mem, off, len))
        return -ERANGE;
    npv_dma_sync_for_device(mem->dma, (size_t)off, (size_t)len);
    return 0;
}

int npv_rknpu_mem_sync_for_cpu(struct npv_rknpu_mem *mem, uint64_t off, uint64_t len)
{
    if (mem == NULL)
        return -EINVAL;
    if (!mem_range_ok(mem, off, len))
        return -ERANGE;
    npv_dma_sync_for_cpu(mem->dma, (size_t)off, (size_t)len);
    return 0;
}

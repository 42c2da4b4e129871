/* SPDX-License-Identifier: MIT */
/*
 * npv_domain: an IOVA allocator, a journal of mappings and the IOMMU sinks
 * the journal is pushed to.
 *
 * The domain has its own allocator rather than letting each IOMMU choose,
 * because a domain may sit behind several IOMMUs at once (one type1
 * container per legacy group, one vfio-user connection per model) and a
 * mapping must have the same IOVA in all of them: the device puts one
 * address on the bus whichever IOMMU translates it.
 *
 * Locking: dom->lock guards everything but the reference count. Sink ops
 * run under it; the log sink never does (ctx.h promises no library lock is
 * held), so messages are emitted after unlocking.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ctx_internal.h"
#include "domain_internal.h"
#include "failpoint_internal.h"
#include "iova.h"
#include "trace.h"

struct journal_entry {
    struct npv_avl_node by_iova;
    struct npv_avl_node by_vaddr;
    struct npv_mapping m;
};

/*
 * A mapping some IOMMU failed to unmap: it may still translate the IOVA, so
 * the IOVA stays taken in the allocator until every holder has let go (a
 * retried unmap succeeded, or the sink left the domain). Out of the journal:
 * it is neither replayed nor looked up. Rare, so a plain list.
 */
struct quarantine_entry {
    struct quarantine_entry *next;
    struct npv_mapping m;
    size_t nr_holders;
    struct npv_iommu_sink *holders[]; /* the sinks that may still translate m */
};

struct npv_domain {
    struct npv_ctx *ctx;
    atomic_ulong refs;
    pthread_mutex_t lock;
    struct npv_iova_range aperture;
    struct npv_iova_range *reserved;
    size_t nr_reserved;
    struct npv_iova_space iova;
    struct npv_avl by_iova;
    struct npv_avl by_vaddr;
    struct npv_iommu_sink *sinks;
    size_t nr_sinks;
    struct quarantine_entry *quarantine;
    /*
     * npv_domain_coherent()'s answer, recomputed under the lock whenever the
     * sink list changes: DMA sync asks it on every poll, which must not lock.
     */
    atomic_int coherent;
};

static int cmp_u64(uint64_t a, uint64_t b)
{
    return a < b ? -1 : a > b;
}

static struct journal_entry *entry_of_iova(const struct npv_avl_node *n)
{
    return n != NULL ? npv_container_of(n, struct journal_entry, by_iova) : NULL;
}

static struct journal_entry *entry_of_vaddr(const struct npv_avl_node *n)
{
    return n != NULL ? npv_container_of(n, struct journal_entry, by_vaddr) : NULL;
}

static uintptr_t entry_va(const struct journal_entry *e)
{
    return (uintptr_t)e->m.vaddr;
}

static int iova_cmp(const struct npv_avl_node *a, const struct npv_avl_node *b)
{
    return cmp_u64(entry_of_iova(a)->m.iova, entry_of_iova(b)->m.iova);
}

static int iova_key(const void *key, const struct npv_avl_node *n)
{
    return cmp_u64(*(const npv_iova_t *)key, entry_of_iova(n)->m.iova);
}

static int vaddr_cmp(const struct npv_avl_node *a, const struct npv_avl_node *b)
{
    return cmp_u64(entry_va(entry_of_vaddr(a)), entry_va(entry_of_vaddr(b)));
}

static int vaddr_key(const void *key, const struct npv_avl_node *n)
{
    return cmp_u64(*(const uintptr_t *)key, entry_va(entry_of_vaddr(n)));
}

/* The mapping holding iova, or NULL. */
static struct journal_entry *find_by_iova(const struct npv_domain *dom, npv_iova_t iova)
{
    struct journal_entry *e = entry_of_iova(npv_avl_find_le(&dom->by_iova, &iova, iova_key));
    if (e == NULL || iova - e->m.iova > e->m.len - 1)
        return NULL;
    return e;
}

/* The mapping whose host range holds va, or NULL. */
static struct journal_entry *find_by_vaddr(const struct npv_domain *dom, uintptr_t va)
{
    struct journal_entry *e = entry_of_vaddr(npv_avl_find_le(&dom->by_vaddr, &va, vaddr_key));
    if (e == NULL || va - entry_va(e) > e->m.len - 1)
        return NULL;
    return e;
}

static struct journal_entry *first_entry(const struct npv_domain *dom)
{
    return entry_of_iova(npv_avl_first(&dom->by_iova));
}

static struct journal_entry *next_entry(const struct npv_domain *dom, struct journal_entry *e)
{
    return entry_of_iova(npv_avl_next(&dom->by_iova, &e->by_iova));
}

/*
 * The usable ranges: the aperture, narrowed by the ranges of every sink (and
 * of extra), minus the reserved ranges. A sink's ranges are read through
 * sink_ranges so that a change can be checked before it is made.
 */
struct ranges_override {
    const struct npv_iommu_sink *sink; /* whose ranges are replaced, or NULL */
    const struct npv_iova_range *ranges;
    size_t n;
};

static int narrow(struct npv_iova_range **cur, size_t *ncur, const struct npv_iova_range *r,
                  size_t n)
{
    if (r == NULL || n == 0)
        return 0;
    struct npv_iova_range *next = NULL;
    size_t nnext = 0;
    int ret = npv_ranges_intersect(*cur, *ncur, r, n, &next, &nnext);
    if (ret < 0)
        return ret;
    free(*cur);
    *cur = next;
    *ncur = nnext;
    return 0;
}

static int narrow_by_sink(struct npv_iova_range **cur, size_t *ncur, const struct npv_iommu_sink *s,
                          const struct ranges_override *ov)
{
    if (ov != NULL && ov->sink == s)
        return narrow(cur, ncur, ov->ranges, ov->n);
    return narrow(cur, ncur, s->ranges, s->nr_ranges);
}

static int compute_usable(const struct npv_domain *dom, const struct npv_iommu_sink *extra,
                          const struct ranges_override *ov, struct npv_iova_range **out,
                          size_t *nout)
{
    struct npv_iova_range *cur = npv_fp_malloc(dom->ctx, sizeof(*cur));
    size_t ncur = 1;
    if (cur == NULL)
        return -ENOMEM;
    *cur = dom->aperture;
    int ret = 0;
    for (const struct npv_iommu_sink *s = dom->sinks; s != NULL && ret == 0; s = s->next)
        ret = narrow_by_sink(&cur, &ncur, s, ov);
    if (ret == 0 && extra != NULL)
        ret = narrow_by_sink(&cur, &ncur, extra, ov);
    if (ret == 0)
        ret = npv_ranges_subtract(cur, ncur, dom->reserved, dom->nr_reserved, out, nout);
    free(cur);
    return ret;
}

/* Recompute the usable space and give it to the allocator; all or nothing. */
static int apply_usable(struct npv_domain *dom, const struct ranges_override *ov)
{
    struct npv_iova_range *usable = NULL;
    size_t nusable = 0;
    int ret = compute_usable(dom, NULL, ov, &usable, &nusable);
    if (ret == 0)
        ret = npv_iova_space_set_ranges(&dom->iova, usable, nusable);
    free(usable);
    return ret;
}

/*
 * A device DMA to IOVA 0 is the classic sign of a driver bug (a pointer never
 * set), and several NPU descriptor formats read a zero address as "no
 * buffer". So the first page is never allocated: such a DMA then faults in
 * the IOMMU instead of landing in someone's buffer. A reserved range rather
 * than a narrower aperture, so npv_domain_iova_ranges shows it and a map at 0
 * is -ERANGE like any other unusable IOVA.
 */
static int keep_page_zero_out(struct npv_domain *dom)
{
    dom->reserved = npv_fp_malloc(dom->ctx, sizeof(*dom->reserved));
    if (dom->reserved == NULL)
        return -ENOMEM;
    dom->reserved[0] = (struct npv_iova_range){0, NPV_DOMAIN_IOVA_ZERO_GUARD - 1};
    dom->nr_reserved = 1;
    return apply_usable(dom, NULL);
}

int npv_domain_new(struct npv_ctx *ctx, const struct npv_domain_opts *opts, struct npv_domain **out)
{
    struct npv_iova_range ap = {0, UINT64_MAX};
    if (ctx == NULL || out == NULL)
        return -EINVAL;
    if (opts != NULL) {
        ap.start = opts->aperture_start;
        ap.last = opts->aperture_last != 0 ? opts->aperture_last : UINT64_MAX;
        if (ap.start > ap.last || ap.last < NPV_DOMAIN_IOVA_ZERO_GUARD)
            return -EINVAL;
    }
    struct npv_domain *dom = npv_fp_calloc(ctx, 1, sizeof(*dom));
    if (dom == NULL)
        return -ENOMEM;
    int ret = -pthread_mutex_init(&dom->lock, NULL);
    if (ret < 0)
        goto err_free;
    dom->ctx = ctx;
    atomic_init(&dom->refs, 1);
    atomic_init(&dom->coherent, -ENODATA);
    dom->aperture = ap;
    npv_iova_space_init(&dom->iova);
    dom->iova.ctx = ctx;
    npv_avl_init(&dom->by_iova, iova_cmp);
    npv_avl_init(&dom->by_vaddr, vaddr_cmp);
    ret = keep_page_zero_out(dom);
    if (ret < 0)
        goto err_lock;
    npv_live_add(ctx, NPV_LIVE_DOMAINS, 1);
    *out = dom;
    return 0;
err_lock:
    npv_iova_space_fini(&dom->iova);
    free(dom->reserved);
    pthread_mutex_destroy(&dom->lock);
err_free:
    free(dom);
    return ret;
}

struct npv_domain *npv_domain_get(struct npv_domain *dom)
{
    if (dom != NULL)
        atomic_fetch_add_explicit(&dom->refs, 1, memory_order_relaxed);
    return dom;
}

/*
 * Take the sinks out of the list: those the domain owns (a release hook, no
 * users) onto the returned list, the others (their owner's, left here by a
 * caller's bug) unlinked and counted in *stray.
 */
static struct npv_iommu_sink *take_sinks(struct npv_domain *dom, unsigned *stray)
{
    struct npv_iommu_sink *owned = NULL, *s;
    *stray = 0;
    while ((s = dom->sinks) != NULL) {
        dom->sinks = s->next;
        dom->nr_sinks--;
        s->next = NULL;
        if (s->ops->release != NULL && s->users == 0) {
            s->next = owned;
            owned = s;
        } else {
            (*stray)++;
        }
    }
    return owned;
}

static void domain_free(struct npv_domain *dom)
{
    unsigned stray;
    struct npv_iommu_sink *owned = take_sinks(dom, &stray);
    /* Devices and DMA buffers hold references: either left here is a caller's bug. */
    if (stray != 0)
        npv_err(dom->ctx, "domain freed with %u IOMMUs still attached", stray);
    if (dom->by_iova.count != 0)
        npv_err(dom->ctx, "domain freed with %zu mappings left", dom->by_iova.count);
    struct npv_avl_node *n;
    while ((n = dom->by_iova.root) != NULL) {
        struct journal_entry *e = entry_of_iova(n);
        npv_avl_remove(&dom->by_iova, &e->by_iova);
        npv_avl_remove(&dom->by_vaddr, &e->by_vaddr);
        free(e);
    }
    while (dom->quarantine != NULL) {
        struct quarantine_entry *q = dom->quarantine;
        dom->quarantine = q->next;
        free(q);
    }
    /* After the journal: a release drops whatever the sink still maps in one go. */
    while (owned != NULL) {
        struct npv_iommu_sink *s = owned;
        owned = s->next;
        s->next = NULL;
        s->ops->release(s);
    }
    npv_iova_space_fini(&dom->iova);
    free(dom->reserved);
    pthread_mutex_destroy(&dom->lock);
    npv_live_add(dom->ctx, NPV_LIVE_DOMAINS, -1);
    free(dom);
}

void npv_domain_put(struct npv_domain *dom)
{
    if (dom == NULL)
        return;
    if (atomic_fetch_sub_explicit(&dom->refs, 1, memory_order_acq_rel) == 1)
        domain_free(dom);
}

struct npv_ctx *npv_domain_ctx(const struct npv_domain *dom)
{
    return dom->ctx;
}

int npv_domain_reserve(struct npv_domain *dom, npv_iova_t start, npv_iova_t last)
{
    if (dom == NULL || start > last)
        return -EINVAL;
    pthread_mutex_lock(&dom->lock);
    int ret = -EBUSY;
    if (npv_iova_space_overlaps(&dom->iova, start, last))
        goto out;
    ret = -ENOMEM;
    struct npv_iova_range *r =
        npv_fp_realloc(dom->ctx, dom->reserved, (dom->nr_reserved + 1) * sizeof(*dom->reserved));
    if (r == NULL)
        goto out;
    dom->reserved = r;
    r[dom->nr_reserved++] = (struct npv_iova_range){start, last};
    ret = apply_usable(dom, NULL);
    if (ret < 0)
        dom->nr_reserved--;
out:
    pthread_mutex_unlock(&dom->lock);
    return ret;
}

int npv_domain_iova_ranges(struct npv_domain *dom, struct npv_iova_range *out, size_t max)
{
    if (dom == NULL || (out == NULL && max != 0))
        return -EINVAL;
    pthread_mutex_lock(&dom->lock);
    size_t n = dom->iova.nr_ranges;
    for (size_t i = 0; i < n && i < max; i++)
        out[i] = dom->iova.ranges[i];
    pthread_mutex_unlock(&dom->lock);
    return n > INT32_MAX ? INT32_MAX : (int)n;
}

int npv_domain_iova_to_vaddr(struct npv_domain *dom, npv_iova_t iova, void **vaddr)
{
    if (dom == NULL || vaddr == NULL)
        return -EINVAL;
    pthread_mutex_lock(&dom->lock);
    struct journal_entry *e = find_by_iova(dom, iova);
    if (e != NULL)
        *vaddr = (char *)e->m.vaddr + (iova - e->m.iova);
    pthread_mutex_unlock(&dom->lock);
    return e != NULL ? 0 : -ENOENT;
}

int npv_domain_vaddr_to_iova(struct npv_domain *dom, const void *vaddr, npv_iova_t *iova)
{
    if (dom == NULL || iova == NULL)
        return -EINVAL;
    pthread_mutex_lock(&dom->lock);
    struct journal_entry *e = find_by_vaddr(dom, (uintptr_t)vaddr);
    if (e != NULL)
        *iova = e->m.iova + ((uintptr_t)vaddr - entry_va(e));
    pthread_mutex_unlock(&dom->lock);
    return e != NULL ? 0 : -ENOENT;
}

size_t npv_domain_mapping_count(struct npv_domain *dom)
{
    if (dom == NULL)
        return 0;
    pthread_mutex_lock(&dom->lock);
    size_t n = dom->by_iova.count;
    pthread_mutex_unlock(&dom->lock);
    return n;
}

int npv_domain_coherent(struct npv_domain *dom)
{
    if (dom == NULL)
        return -EINVAL;
    return atomic_load_explicit(&dom->coherent, memory_order_acquire);
}

/* Called with the lock held, after every change of the sink list. */
static void update_coherent(struct npv_domain *dom)
{
    int ret = -ENODATA;
    for (const struct npv_iommu_sink *s = dom->sinks; s != NULL; s = s->next) {
        if (s->coherent < 0)
            continue;
        if (ret == -ENODATA)
            ret = 1;
        if (s->coherent == 0)
            ret = 0;
    }
    atomic_store_explicit(&dom->coherent, ret, memory_order_release);
}

/* ---- the quarantine ---- */

/* Room for every sink of the domain as a holder: taken before anything is unmapped. */
static struct quarantine_entry *quarantine_new(const struct npv_domain *dom,
                                               const struct npv_mapping *m)
{
    struct quarantine_entry *q =
        npv_fp_calloc(dom->ctx, 1, sizeof(*q) + dom->nr_sinks * sizeof(q->holders[0]));
    if (q != NULL)
        q->m = *m;
    return q;
}

/* Quarantine q when a sink still holds its mapping; otherwise free it and its IOVA. */
static bool quarantine_or_release(struct npv_domain *dom, struct quarantine_entry *q)
{
    if (q->nr_holders == 0) {
        npv_iova_free(&dom->iova, q->m.iova);
        free(q);
        return false;
    }
    q->next = dom->quarantine;
    dom->quarantine = q;
    return true;
}

/*
 * Unmap m from the sinks before stop (NULL: all). A sink whose unmap fails
 * becomes a holder in q; -ENOENT is the IOMMU saying it maps nothing there,
 * so that sink is no holder, though the error is still reported. First error.
 */
static int unmap_from_sinks(struct npv_domain *dom, const struct npv_mapping *m,
                            const struct npv_iommu_sink *stop, struct quarantine_entry *q,
                            const struct npv_iommu_sink_ops **failed_ops)
{
    int first_err = 0;
    for (struct npv_iommu_sink *s = dom->sinks; s != stop; s = s->next) {
        int ret = s->ops->unmap(s, m);
        if (ret == 0)
            continue;
        if (ret != -ENOENT)
            q->holders[q->nr_holders++] = s;
        if (first_err == 0) {
            first_err = ret < 0 ? ret : -EIO;
            *failed_ops = s->ops;
        }
    }
    return first_err;
}

/* Drop sink from every quarantined mapping; release those nothing holds now. Returns how many. */
static size_t quarantine_drop_holder(struct npv_domain *dom, const struct npv_iommu_sink *sink)
{
    size_t released = 0;
    struct quarantine_entry **pp = &dom->quarantine;
    while (*pp != NULL) {
        struct quarantine_entry *q = *pp;
        size_t kept = 0;
        for (size_t i = 0; i < q->nr_holders; i++)
            if (q->holders[i] != sink)
                q->holders[kept++] = q->holders[i];
        q->nr_holders = kept;
        if (kept != 0) {
            pp = &q->next;
            continue;
        }
        *pp = q->next;
        npv_iova_free(&dom->iova, q->m.iova);
        free(q);
        released++;
    }
    return released;
}

size_t npv_domain_quarantined(struct npv_domain *dom, uint64_t *bytes)
{
    size_t n = 0;
    uint64_t total = 0;
    if (dom != NULL) {
        pthread_mutex_lock(&dom->lock);
        for (const struct quarantine_entry *q = dom->quarantine; q != NULL; q = q->next) {
            n++;
            total += q->m.len;
        }
        pthread_mutex_unlock(&dom->lock);
    }
    if (bytes != NULL)
        *bytes = total;
    return n;
}

/* ---- sinks ---- */

static bool has_sink(const struct npv_domain *dom, const struct npv_iommu_sink *sink)
{
    for (const struct npv_iommu_sink *s = dom->sinks; s != NULL; s = s->next)
        if (s == sink)
            return true;
    return false;
}

/* Unmap the journal from sink, from the first entry up to (not including) stop. */
static int unmap_journal(struct npv_domain *dom, struct npv_iommu_sink *sink,
                         struct journal_entry *stop)
{
    int first_err = 0;
    for (struct journal_entry *e = first_entry(dom); e != NULL && e != stop;
         e = next_entry(dom, e)) {
        int ret = sink->ops->unmap(sink, &e->m);
        if (ret < 0 && first_err == 0)
            first_err = ret;
    }
    return first_err;
}

/* -NPV_ENOTSHARED when a mapping in the journal has no fd to pass. */
static int journal_without_fd(const struct npv_domain *dom)
{
    for (struct journal_entry *e = first_entry(dom); e != NULL; e = next_entry(dom, e))
        if (e->m.fd < 0)
            return -NPV_ENOTSHARED;
    return 0;
}

int npv_domain_add_sink(struct npv_domain *dom, struct npv_iommu_sink *sink)
{
    if (dom == NULL || sink == NULL || sink->ops == NULL || sink->ops->map == NULL ||
        sink->ops->unmap == NULL)
        return -EINVAL;
    struct npv_iova_range *usable = NULL;
    size_t nusable = 0;
    struct journal_entry *failed = NULL;
    int undo_err = 0;
    pthread_mutex_lock(&dom->lock);
    int ret = -EEXIST;
    if (has_sink(dom, sink))
        goto out;
    ret = compute_usable(dom, sink, NULL, &usable, &nusable);
    if (ret < 0)
        goto out;
    if (!npv_iova_space_fits(&dom->iova, usable, nusable)) {
        ret = -ERANGE;
        goto out;
    }
    ret = sink->shares_by_fd ? journal_without_fd(dom) : 0;
    if (ret < 0)
        goto out;
    for (struct journal_entry *e = first_entry(dom); e != NULL; e = next_entry(dom, e)) {
        ret = sink->ops->map(sink, &e->m);
        if (ret < 0) {
            failed = e;
            goto err_undo;
        }
    }
    ret = npv_iova_space_set_ranges(&dom->iova, usable, nusable);
    if (ret < 0)
        goto err_undo;
    sink->next = dom->sinks;
    dom->sinks = sink;
    dom->nr_sinks++;
    update_coherent(dom);
    goto out;
err_undo:
    undo_err = unmap_journal(dom, sink, failed);
out:
    pthread_mutex_unlock(&dom->lock);
    free(usable);
    if (ret == -ERANGE)
        npv_err(dom->ctx, "%s: its IOVA ranges leave out a mapping of the domain", sink->ops->name);
    else if (ret == -NPV_ENOTSHARED)
        npv_err(dom->ctx,
                "%s: the domain maps memory with no file behind it (anonymous private "
                "memory), which a device server in another process cannot reach: unmap it "
                "first or map it from a file",
                sink->ops->name);
    else if (ret < 0 && ret != -EEXIST)
        npv_err(dom->ctx, "%s: replaying the domain's mappings failed: %s", sink->ops->name,
                npv_strerror(ret));
    if (undo_err < 0)
        npv_err(dom->ctx, "%s: undoing the replay failed: %s", sink->ops->name,
                npv_strerror(undo_err));
    return ret;
}

/*
 * Unmap the journal from sink, all or nothing: on the first failure the
 * mappings already removed are mapped again and the error returned, so the
 * sink holds the whole journal or none of it. Under dom's lock.
 */
static int unmap_journal_all_or_none(struct npv_domain *dom, struct npv_iommu_sink *sink)
{
    for (struct journal_entry *e = first_entry(dom); e != NULL; e = next_entry(dom, e)) {
        int ret = sink->ops->unmap(sink, &e->m);
        if (ret == 0)
            continue;
        for (struct journal_entry *u = first_entry(dom); u != e; u = next_entry(dom, u)) {
            int r2 = sink->ops->map(sink, &u->m);
            if (r2 < 0)
                npv_err(dom->ctx, "%s: mapping again after a failed unmap: %s", sink->ops->name,
                        npv_strerror(r2));
        }
        return ret;
    }
    return 0;
}

int npv_domain_leave_sink(struct npv_domain *dom, struct npv_iommu_sink *sink)
{
    if (dom == NULL || sink == NULL)
        return -EINVAL;
    pthread_mutex_lock(&dom->lock);
    if (!has_sink(dom, sink)) {
        pthread_mutex_unlock(&dom->lock);
        return 0;
    }
    int ret = unmap_journal_all_or_none(dom, sink);
    pthread_mutex_unlock(&dom->lock);
    if (ret < 0) {
        npv_err(dom->ctx, "%s: unmapping the domain's mappings failed, it stays in the domain: %s",
                sink->ops->name, npv_strerror(ret));
        return ret;
    }
    npv_domain_remove_sink(dom, sink, false);
    return 0;
}

void npv_domain_remove_sink(struct npv_domain *dom, struct npv_iommu_sink *sink, bool unmap)
{
    if (dom == NULL || sink == NULL)
        return;
    int unmap_err = 0, range_err = 0;
    pthread_mutex_lock(&dom->lock);
    struct npv_iommu_sink **pp = &dom->sinks;
    while (*pp != NULL && *pp != sink)
        pp = &(*pp)->next;
    if (*pp == NULL) {
        pthread_mutex_unlock(&dom->lock);
        return;
    }
    *pp = sink->next;
    sink->next = NULL;
    dom->nr_sinks--;
    update_coherent(dom);
    if (unmap)
        unmap_err = unmap_journal(dom, sink, NULL);
    size_t released = quarantine_drop_holder(dom, sink);
    /* Widening cannot strand a mapping; on -ENOMEM the narrower ranges stay, which is safe. */
    range_err = apply_usable(dom, NULL);
    pthread_mutex_unlock(&dom->lock);
    if (unmap_err < 0)
        npv_err(dom->ctx, "%s: unmapping the domain's mappings failed: %s", sink->ops->name,
                npv_strerror(unmap_err));
    if (range_err < 0)
        npv_debug(dom->ctx, "domain keeps its narrower IOVA ranges: %s", npv_strerror(range_err));
    if (released != 0)
        npv_info(dom->ctx, "%s left the domain: %zu quarantined IOVA ranges released",
                 sink->ops->name, released);
}

struct npv_iommu_sink *npv_domain_find_sink(struct npv_domain *dom,
                                            const struct npv_iommu_sink_ops *ops)
{
    if (dom == NULL)
        return NULL;
    pthread_mutex_lock(&dom->lock);
    struct npv_iommu_sink *s = dom->sinks;
    while (s != NULL && s->ops != ops)
        s = s->next;
    pthread_mutex_unlock(&dom->lock);
    return s;
}

static int dup_ranges(const struct npv_iova_range *r, size_t n, struct npv_iova_range **out)
{
    *out = NULL;
    if (r == NULL || n == 0)
        return 0;
    if (n > SIZE_MAX / sizeof(*r))
        return -ENOMEM;
    *out = malloc(n * sizeof(*r));
    if (*out == NULL)
        return -ENOMEM;
    memcpy(*out, r, n * sizeof(*r));
    return 0;
}

static void swap_sink_ranges(struct npv_iommu_sink *sink, struct npv_iova_range *copy, size_t n)
{
    free((void *)sink->ranges);
    sink->ranges = copy;
    sink->nr_ranges = copy != NULL ? n : 0;
}

static bool same_ranges(const struct npv_iommu_sink *sink, const struct npv_iova_range *r, size_t n)
{
    return sink->nr_ranges == n && (n == 0 || memcmp(sink->ranges, r, n * sizeof(*r)) == 0);
}

int npv_domain_set_sink_ranges(struct npv_domain *dom, struct npv_iommu_sink *sink,
                               const struct npv_iova_range *ranges, size_t n)
{
    if (sink == NULL || (ranges == NULL && n != 0))
        return -EINVAL;
    struct npv_iova_range *copy = NULL;
    int ret = dup_ranges(ranges, n, &copy);
    if (ret < 0)
        return ret;
    if (dom == NULL) {
        swap_sink_ranges(sink, copy, n);
        return 0;
    }
    pthread_mutex_lock(&dom->lock);
    ret = -ENOENT;
    if (!has_sink(dom, sink))
        goto out;
    /*
     * Recomputing the usable space walks every mapping: an IOAS re-reports the
     * same ranges on each attach of a device switching back, and that must
     * not cost in proportion to the journal.
     */
    ret = 0;
    if (same_ranges(sink, copy, copy != NULL ? n : 0))
        goto out;
    const struct ranges_override ov = {sink, copy, copy != NULL ? n : 0};
    ret = apply_usable(dom, &ov);
    if (ret == 0) {
        swap_sink_ranges(sink, copy, n);
        copy = NULL;
    }
out:
    pthread_mutex_unlock(&dom->lock);
    free(copy);
    if (ret == -ERANGE)
        npv_err(dom->ctx, "%s: its new IOVA ranges leave out a mapping of the domain",
                sink->ops->name);
    return ret;
}

void npv_iommu_sink_fini(struct npv_iommu_sink *sink)
{
    if (sink != NULL)
        swap_sink_ranges(sink, NULL, 0);
}

/* ---- the journal ---- */

/* What went wrong under the lock, logged after it (the log sink never runs under it). */
struct sink_report {
    const struct npv_iommu_sink_ops *failed_ops; /* the first sink that failed */
    const struct npv_iommu_sink_ops *undo_ops;   /* the first sink whose unmap failed */
    int undo_err;
    bool quarantined;
    bool released; /* a quarantined mapping's retried unmap let it go */
};

/*
 * Push m to every sink; on a failure unmap it from those already done. A sink
 * that cannot undo its map becomes a holder in q.
 */
static int push_map(struct npv_domain *dom, const struct npv_mapping *m, struct quarantine_entry *q,
                    struct sink_report *rep)
{
    for (struct npv_iommu_sink *s = dom->sinks; s != NULL; s = s->next) {
        int ret = s->ops->map(s, m);
        if (ret == 0)
            continue;
        rep->failed_ops = s->ops;
        rep->undo_err = unmap_from_sinks(dom, m, s, q, &rep->undo_ops);
        return ret < 0 ? ret : -EIO;
    }
    return 0;
}

/* Whether a sink reaches memory only through an fd and m has none (the caller's anonymous memory).
 */
static const struct npv_iommu_sink *sink_needing_fd(const struct npv_domain *dom,
                                                    const struct npv_mapping *m)
{
    if (m->fd >= 0)
        return NULL;
    for (const struct npv_iommu_sink *s = dom->sinks; s != NULL; s = s->next)
        if (s->shares_by_fd)
            return s;
    return NULL;
}

static int map_locked(struct npv_domain *dom, struct npv_mapping *m, uint64_t align, bool fixed,
                      struct sink_report *rep)
{
    /* Host ranges in the journal are disjoint, so one translation back stays unique. */
    uintptr_t end = (uintptr_t)m->vaddr + (m->len - 1);
    struct journal_entry *below = entry_of_vaddr(npv_avl_find_le(&dom->by_vaddr, &end, vaddr_key));
    if (below != NULL && entry_va(below) + (below->m.len - 1) >= (uintptr_t)m->vaddr)
        return -EEXIST;
    const struct npv_iommu_sink *needs_fd = sink_needing_fd(dom, m);
    if (needs_fd != NULL) {
        rep->failed_ops = needs_fd->ops;
        return -NPV_ENOTSHARED;
    }
    struct journal_entry *e = npv_fp_calloc(dom->ctx, 1, sizeof(*e));
    if (e == NULL)
        return -ENOMEM;
    int ret = -ENOMEM;
    struct quarantine_entry *q = quarantine_new(dom, m);
    if (q == NULL)
        goto err_free;
    ret = fixed ? npv_iova_alloc_at(&dom->iova, m->iova, m->len)
                : npv_iova_alloc(&dom->iova, m->len, align, &m->iova);
    if (ret < 0)
        goto err_free;
    e->m = *m;
    q->m = *m;
    ret = push_map(dom, &e->m, q, rep);
    if (ret < 0)
        goto err_iova;
    free(q);
    npv_avl_insert(&dom->by_iova, &e->by_iova);
    npv_avl_insert(&dom->by_vaddr, &e->by_vaddr);
    return 0;
err_iova:
    rep->quarantined = quarantine_or_release(dom, q);
    q = NULL;
err_free:
    free(q);
    free(e);
    return ret;
}

static void log_unmap_failure(const struct npv_domain *dom, const struct npv_mapping *m,
                              const struct sink_report *rep, const char *what)
{
    npv_err(dom->ctx, "%s: %sunmapping IOVA 0x%llx (+0x%llx) failed: %s%s", rep->undo_ops->name,
            what, (unsigned long long)m->iova, (unsigned long long)m->len,
            npv_strerror(rep->undo_err),
            rep->quarantined ? "; the range stays reserved (quarantined) while the IOMMU may "
                               "still translate it"
                             : "");
}

static int map_common(struct npv_domain *dom, struct npv_mapping *m, uint64_t align, bool fixed)
{
    if (dom == NULL || m == NULL || m->len == 0 || m->vaddr == NULL ||
        (uintptr_t)m->vaddr > UINTPTR_MAX - (m->len - 1))
        return -EINVAL;
    struct sink_report rep = {0};
    pthread_mutex_lock(&dom->lock);
    int ret = map_locked(dom, m, align, fixed, &rep);
    pthread_mutex_unlock(&dom->lock);
    NPV_TRACE4(dma_map, dom, m->iova, m->len, ret);
    if (ret == -NPV_ENOTSHARED)
        npv_err(dom->ctx,
                "%s: memory at %p (+0x%llx) has no file behind it (anonymous private memory) "
                "and a device server in another process can reach memory only through a file: "
                "map memory from npv_dma_alloc, a memfd or a MAP_SHARED file, and name its fd",
                rep.failed_ops->name, m->vaddr, (unsigned long long)m->len);
    else if (rep.failed_ops != NULL)
        npv_err(dom->ctx, "%s: mapping IOVA 0x%llx (+0x%llx) failed: %s", rep.failed_ops->name,
                (unsigned long long)m->iova, (unsigned long long)m->len, npv_strerror(ret));
    if (rep.undo_ops != NULL)
        log_unmap_failure(dom, m, &rep, "undoing that map: ");
    return ret;
}

int npv_domain_map(struct npv_domain *dom, struct npv_mapping *m, uint64_t align)
{
    return map_common(dom, m, align, false);
}

int npv_domain_map_at(struct npv_domain *dom, const struct npv_mapping *m)
{
    struct npv_mapping copy;
    if (m == NULL)
        return -EINVAL;
    copy = *m;
    return map_common(dom, &copy, 1, true);
}

/* A retried unmap of a quarantined mapping, on the sinks that still hold it. */
static int retry_quarantined(struct npv_domain *dom, npv_iova_t iova, struct npv_mapping *m,
                             struct sink_report *rep)
{
    struct quarantine_entry **pp = &dom->quarantine;
    while (*pp != NULL && (*pp)->m.iova != iova)
        pp = &(*pp)->next;
    struct quarantine_entry *q = *pp;
    if (q == NULL)
        return -ENOENT;
    *m = q->m;
    int first_err = 0;
    size_t kept = 0;
    for (size_t i = 0; i < q->nr_holders; i++) {
        struct npv_iommu_sink *s = q->holders[i];
        int ret = s->ops->unmap(s, &q->m);
        if (ret == 0 || ret == -ENOENT)
            continue;
        q->holders[kept++] = s;
        if (first_err == 0) {
            first_err = ret < 0 ? ret : -EIO;
            rep->undo_ops = s->ops;
        }
    }
    q->nr_holders = kept;
    *pp = q->next;
    rep->undo_err = first_err;
    rep->quarantined = quarantine_or_release(dom, q);
    rep->released = !rep->quarantined;
    return first_err;
}

static int unmap_locked(struct npv_domain *dom, npv_iova_t iova, struct npv_mapping *m,
                        struct sink_report *rep)
{
    struct journal_entry *e = entry_of_iova(npv_avl_find_le(&dom->by_iova, &iova, iova_key));
    if (e == NULL || e->m.iova != iova)
        return retry_quarantined(dom, iova, m, rep);
    *m = e->m;
    /* Before anything is unmapped: a mapping no sink let go of must find its place. */
    struct quarantine_entry *q = quarantine_new(dom, &e->m);
    if (q == NULL)
        return -ENOMEM;
    rep->undo_err = unmap_from_sinks(dom, &e->m, NULL, q, &rep->undo_ops);
    npv_avl_remove(&dom->by_iova, &e->by_iova);
    npv_avl_remove(&dom->by_vaddr, &e->by_vaddr);
    free(e);
    rep->quarantined = quarantine_or_release(dom, q);
    return rep->undo_err;
}

int npv_domain_unmap(struct npv_domain *dom, npv_iova_t iova)
{
    if (dom == NULL)
        return -EINVAL;
    struct sink_report rep = {0};
    struct npv_mapping m = {0};
    pthread_mutex_lock(&dom->lock);
    int ret = unmap_locked(dom, iova, &m, &rep);
    pthread_mutex_unlock(&dom->lock);
    NPV_TRACE4(dma_unmap, dom, iova, m.len, ret);
    if (rep.undo_ops != NULL)
        log_unmap_failure(dom, &m, &rep, "");
    if (rep.released)
        npv_info(dom->ctx, "IOVA 0x%llx (+0x%llx): unmapped on retry, released from quarantine",
                 (unsigned long long)m.iova, (unsigned long long)m.len);
    return ret;
}

/* SPDX-License-Identifier: MIT */
/*
 * guest_shared_domain: one domain with two DMA-capable devices in it, the two
 * edus run-guest.sh puts behind separate root ports (separate IOMMU groups;
 * NPVTEST_EDU and NPVTEST_EDU2). On iommufd both devices attach to the
 * domain's one IOAS; on legacy each has its own type1 container and the
 * domain pushes every map and unmap into both.
 *
 * What it shows, in order (each step needs the one before):
 *   1. mappings made before any device are there for a device opened into
 *      the domain afterwards (replayed at open);
 *   2. a second open of an already open function is -EBUSY, leaks nothing,
 *      and the open device keeps working;
 *   3. the second edu joins the domain and does DMA through the same
 *      mappings; a map made with both attached reaches both, and an unmap
 *      with both attached blocks both (a write that arrived before the
 *      unmap does not arrive after it);
 *   4. the first edu moves to another domain and back while the second stays;
 *   5. the second device closes first: the first keeps its DMA and the
 *      domain still maps and unmaps; the second re-joins the domain, the
 *      first closes first, the second keeps its DMA;
 *   6. at the end no fd is left open.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <npuvfio/bar.h>
#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/domain.h>
#include "guest_edu.h"
#include "guest_tap.h"

#define SZ_4K 4096u
#define LEN   512u

static const struct npv_domain_opts edu_aperture = {.aperture_start = 0,
                                                    .aperture_last = EDU_DMA_LAST};

struct edu {
    const char *bdf;
    const char *name; /* "edu1" or "edu2" in verdicts */
    struct npv_dev *dev;
    struct npv_bar *bar;
};

struct run {
    struct tap t;
    struct npv_ctx *ctx;
    enum npv_transport transport;
    struct npv_domain *dom, *dom_b;
    struct npv_dma *a, *b, *c; /* a, b mapped before any device; c mapped with both attached */
    struct edu e1, e2;
};

static void log_to_console(void *user, enum npv_log_level level, const char *msg)
{
    (void)user;
    tap_diag("lib[%d]: %s", (int)level, msg);
}

static struct npv_dma *dma4k(struct run *r)
{
    struct npv_dma_opts o = {.page = NPV_DMA_PAGE_4K, .numa_node = -1};
    struct npv_dma *d = NULL;
    int rc = npv_dma_alloc(r->ctx, SZ_4K, &o, &d);
    if (rc < 0)
        tap_diag("npv_dma_alloc(4 KiB): %s", npv_strerror(rc));
    return d;
}

static bool open_edu(struct run *r, struct edu *e, const char *why)
{
    int rc = npv_dev_open_pci(r->ctx, e->bdf, r->dom, NULL, &e->dev);
    if (!tap_check(&r->t, rc == 0 && npv_dev_domain(e->dev) == r->dom,
                   "%s %s opens into the domain %s (%s)", e->name, e->bdf, why, npv_strerror(rc)))
        return false;
    tap_check(&r->t, npv_dev_transport(e->dev) == r->transport, "%s transport is %s", e->name,
              npv_transport_name(npv_dev_transport(e->dev)));
    rc = npv_bar_map(e->dev, NPV_PCI_BAR0_REGION, &e->bar);
    return tap_check(&r->t, rc == 0, "%s BAR0 mapped (%s)", e->name, npv_strerror(rc));
}

static void close_edu(struct edu *e)
{
    npv_bar_unmap(e->bar);
    e->bar = NULL;
    npv_dev_close(e->dev);
    e->dev = NULL;
}

/* edu copies src -> dst through dom; one verdict. */
static bool dma_ok(struct run *r, struct edu *e, struct npv_domain *dom, struct npv_dma *src,
                   struct npv_dma *dst, uint8_t seed, const char *what)
{
    int rc = edu_round_trip(e->bar, dom, src, 0, dst, 0, LEN, seed);
    return tap_check(&r->t, rc == 0, "%s: %s does DMA (%s)", what, e->name, npv_strerror(rc));
}

/*
 * edu writes 4 bytes of its buffer (loaded with 0xc3 by the caller) to iova,
 * over victim (filled with 0x5a). Mapped, the data must arrive; not mapped,
 * it must not. The same write arriving before the unmap and not after is the
 * evidence: the guest kernel's IOMMU fault lines are only a diagnostic here,
 * because dmar_fault rate-limits them (10 per 5 s, three spent per fault) and
 * guest_edu, run just before, spends them all.
 */
static bool dma_write(struct run *r, struct edu *e, npv_iova_t iova, struct npv_dma *victim,
                      bool mapped)
{
    uint8_t *v = npv_dma_vaddr(victim);
    memset(v, 0x5a, 4);
    npv_dma_sync_for_device(victim, 0, 4);
    int faults0 = klog_fault_count(iova);
    int rc = edu_dma(e->bar, iova, 0, 4, true);
    npv_dma_sync_for_cpu(victim, 0, 4);
    if (mapped)
        return tap_check(&r->t, rc == 0 && v[0] == 0xc3 && v[3] == 0xc3,
                         "%s's DMA write to the mapped IOVA 0x%" PRIx64 " arrives", e->name, iova);
    bool untouched = v[0] == 0x5a && v[3] == 0x5a;
    tap_diag("IOMMU fault lines for 0x%" PRIx64 ": %d -> %d", iova, faults0,
             klog_fault_count(iova));
    return tap_check(&r->t, rc == 0 && untouched,
                     "%s's DMA write to the unmapped IOVA 0x%" PRIx64 " is blocked: data %s",
                     e->name, iova, untouched ? "did not arrive" : "ARRIVED");
}

/* 1 */
static bool check_open_into_mapped_domain(struct run *r)
{
    struct tap *t = &r->t;
    int rc = npv_domain_new(r->ctx, &edu_aperture, &r->dom);
    if (!tap_check(t, rc == 0, "domain with edu's 28-bit aperture (%s)", npv_strerror(rc)))
        return false;
    r->a = dma4k(r);
    r->b = dma4k(r);
    r->c = dma4k(r);
    npv_iova_t ia = 0, ib = 0;
    rc = r->a && r->b && r->c ? npv_dma_map(r->a, r->dom, NPV_DMA_RW, &ia) : -ENOMEM;
    if (rc == 0)
        rc = npv_dma_map(r->b, r->dom, NPV_DMA_RW, &ib);
    if (!tap_check(t, rc == 0,
                   "two buffers mapped before any device: 0x%" PRIx64 ", 0x%" PRIx64 " (%s)", ia,
                   ib, npv_strerror(rc)))
        return false;
    return open_edu(r, &r->e1, "that already holds two mappings") &&
           dma_ok(r, &r->e1, r->dom, r->a, r->b, 1, "through mappings made before the open");
}

/* 2 */
static void check_second_open_busy(struct run *r)
{
    struct tap *t = &r->t;
    /* A first refusal may grow the allocator's own arenas (ASan maps a region per size class on
     * first use), which is not a leak; the second, identical one is the one measured. */
    struct npv_dev *warm = NULL;
    if (npv_dev_open_pci(r->ctx, r->e1.bdf, r->dom, NULL, &warm) == 0)
        npv_dev_close(warm);
    int fds0 = count_fds(), maps0 = count_maps();
    struct npv_dev *again = (struct npv_dev *)&again; /* any non-NULL value: open must clear it */
    int rc = npv_dev_open_pci(r->ctx, r->e1.bdf, r->dom, NULL, &again);
    tap_check(t, rc == -EBUSY && again == NULL,
              "a second open of %s (already open) is -EBUSY and hands out nothing: %d %s",
              r->e1.bdf, rc, npv_strerror(rc));
    int fds1 = count_fds(), maps1 = count_maps();
    tap_check(t, fds0 >= 0 && fds1 == fds0 && maps1 == maps0,
              "the refused open leaks nothing: fds %d -> %d, maps %d -> %d", fds0, fds1, maps0,
              maps1);
    dma_ok(r, &r->e1, r->dom, r->a, r->b, 2, "after the refused open");
}

/* 3 */
static bool check_two_devices(struct run *r)
{
    struct tap *t = &r->t;
    if (!open_edu(r, &r->e2, "next to edu1"))
        return false;
    dma_ok(r, &r->e2, r->dom, r->a, r->b, 3, "through mappings made before it joined");
    dma_ok(r, &r->e1, r->dom, r->b, r->a, 4, "with two devices in the domain");

    npv_iova_t ic = 0;
    int rc = npv_dma_map(r->c, r->dom, NPV_DMA_RW, &ic);
    if (!tap_check(t, rc == 0, "a map with both devices attached: IOVA 0x%" PRIx64 " (%s)", ic,
                   npv_strerror(rc)))
        return true;
    dma_ok(r, &r->e1, r->dom, r->c, r->a, 5, "from the new mapping");
    dma_ok(r, &r->e2, r->dom, r->c, r->b, 6, "from the new mapping");

    /* Load both edus' buffers with 0xc3 from c, so a write that gets through shows. */
    memset(npv_dma_vaddr(r->c), 0xc3, SZ_4K);
    npv_dma_sync_for_device(r->c, 0, SZ_4K);
    int r1 = edu_dma(r->e1.bar, ic, 0, 64, false);
    int r2 = edu_dma(r->e2.bar, ic, 0, 64, false);
    if (!tap_check(t, r1 == 0 && r2 == 0, "both edus read IOVA 0x%" PRIx64, ic))
        return true;
    dma_write(r, &r->e1, ic, r->c, true);
    dma_write(r, &r->e2, ic, r->c, true);
    rc = npv_dma_unmap(r->c, r->dom);
    if (tap_check(t, rc == 0, "unmap of IOVA 0x%" PRIx64 " with both devices attached (%s)", ic,
                  npv_strerror(rc))) {
        dma_write(r, &r->e1, ic, r->c, false);
        dma_write(r, &r->e2, ic, r->c, false);
    }
    return true;
}

/* 4 */
static void check_move_while_shared(struct run *r)
{
    struct tap *t = &r->t;
    struct npv_dma *x = dma4k(r), *y = dma4k(r);
    npv_iova_t ix = 0, iy = 0;
    int rc = npv_domain_new(r->ctx, &edu_aperture, &r->dom_b);
    if (rc == 0)
        rc = x && y ? npv_dma_map(x, r->dom_b, NPV_DMA_RW, &ix) : -ENOMEM;
    if (rc == 0)
        rc = npv_dma_map(y, r->dom_b, NPV_DMA_RW, &iy);
    if (!tap_check(t, rc == 0, "domain B with two buffers of its own (%s)", npv_strerror(rc)))
        goto out;
    rc = npv_dev_attach(r->e1.dev, r->dom_b);
    if (!tap_check(t, rc == 0 && npv_dev_domain(r->e1.dev) == r->dom_b,
                   "edu1 moves to B while edu2 stays in A (%s)", npv_strerror(rc)))
        goto out;
    dma_ok(r, &r->e1, r->dom_b, x, y, 7, "in B");
    dma_ok(r, &r->e2, r->dom, r->a, r->b, 8, "left alone in A");
    rc = npv_dev_attach(r->e1.dev, r->dom);
    if (tap_check(t, rc == 0 && npv_dev_domain(r->e1.dev) == r->dom,
                  "edu1 moves back to A, next to edu2 (%s)", npv_strerror(rc)))
        dma_ok(r, &r->e1, r->dom, r->a, r->b, 9, "back in A");
out:
    npv_dma_free(y);
    npv_dma_free(x);
    npv_domain_put(r->dom_b);
    r->dom_b = NULL;
}

/* 5 */
static void check_close_order(struct run *r)
{
    struct tap *t = &r->t;
    close_edu(&r->e2);
    dma_ok(r, &r->e1, r->dom, r->a, r->b, 10, "after edu2 (opened second) closed first");
    npv_iova_t ic = 0;
    int rc = npv_dma_map(r->c, r->dom, NPV_DMA_RW, &ic);
    if (tap_check(t, rc == 0, "a map after edu2 left: IOVA 0x%" PRIx64 " (%s)", ic,
                  npv_strerror(rc))) {
        dma_ok(r, &r->e1, r->dom, r->c, r->a, 11, "from the map made after edu2 left");
        rc = npv_dma_unmap(r->c, r->dom);
        tap_check(t, rc == 0, "an unmap after edu2 left (%s)", npv_strerror(rc));
    }
    tap_check(t, npv_domain_mapping_count(r->dom) == 2, "the domain holds its 2 mappings (%zu)",
              npv_domain_mapping_count(r->dom));

    if (!open_edu(r, &r->e2, "again, while edu1 is in it"))
        return;
    dma_ok(r, &r->e2, r->dom, r->b, r->a, 12, "after re-joining");
    close_edu(&r->e1);
    dma_ok(r, &r->e2, r->dom, r->a, r->b, 13, "after edu1 (opened first) closed first");
}

int main(void)
{
    const char *backend = getenv("NPVTEST_BACKEND");
    struct run r = {.t.prefix = backend ? backend : "?",
                    .e1 = {.bdf = getenv("NPVTEST_EDU"), .name = "edu1"},
                    .e2 = {.bdf = getenv("NPVTEST_EDU2"), .name = "edu2"}};
    if (!tap_check(&r.t, backend && r.e1.bdf && *r.e1.bdf && r.e2.bdf && *r.e2.bdf,
                   "NPVTEST_BACKEND, NPVTEST_EDU and NPVTEST_EDU2 set (two edus: %s, %s)",
                   r.e1.bdf ? r.e1.bdf : "-", r.e2.bdf ? r.e2.bdf : "-"))
        return tap_done(&r.t);
    bool iommufd = strcmp(backend, "iommufd") == 0;
    r.transport = iommufd ? NPV_TRANSPORT_IOMMUFD : NPV_TRANSPORT_LEGACY;

    int fds0 = count_fds(), maps0 = count_maps();
    int rc = npv_ctx_new(&r.ctx);
    if (!tap_check(&r.t, rc == 0, "npv_ctx_new (%s)", npv_strerror(rc)))
        return tap_done(&r.t);
    npv_ctx_set_log_sink(r.ctx, log_to_console, NULL);
    npv_ctx_set_iommu_backend(r.ctx, iommufd ? NPV_IOMMU_IOMMUFD : NPV_IOMMU_LEGACY);

    if (check_open_into_mapped_domain(&r)) {
        check_second_open_busy(&r);
        if (check_two_devices(&r)) {
            check_move_while_shared(&r);
            check_close_order(&r);
        }
    }
    close_edu(&r.e2);
    close_edu(&r.e1);
    npv_dma_free(r.c);
    npv_dma_free(r.b);
    npv_dma_free(r.a);
    npv_domain_put(r.dom);
    npv_ctx_free(r.ctx);
    /* Only fds are compared over the whole run: the first use of an allocator size class may
     * map memory that stays (an ASan build does), so maps are compared in step 2 only. */
    int fds1 = count_fds();
    tap_check(&r.t, fds0 >= 0 && fds1 == fds0, "no fd left at the end: %d -> %d", fds0, fds1);
    tap_diag("whole run: maps %d -> %d", maps0, count_maps());
    return tap_done(&r.t);
}

/* SPDX-License-Identifier: MIT */
/*
 * guest_switch_cost: what npv_dev_attach (a domain switch) costs on the
 * backend under test, with 1, 64 and 512 mappings of 4 KiB buffers in the
 * target domain. Legacy removes the old domain's mappings from the device's
 * type1 container and replays the new domain's journal into it; iommufd moves
 * the device with one replacing VFIO_DEVICE_ATTACH_IOMMUFD_PT onto the target
 * domain's IOAS, which is made and filled from the journal on the domain's
 * first visit and stays with the domain after that.
 *
 * The timed switches start once both domains have been visited: the first
 * visit of the second domain is reported on its own (first_us), then 20
 * switches A<->B give median/min/max, printed as diagnostic lines. Under TCG
 * the numbers are slow and noisy, so nothing is asserted on them: the checks
 * are that every switch completes and edu's DMA works after the last one.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <npuvfio/bar.h>
#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/domain.h>
#include "guest_edu.h"
#include "guest_tap.h"

#define SZ_4K    4096u
#define SWITCHES 20
#define MAX_MAPS 512

static const struct npv_domain_opts edu_aperture = {.aperture_start = 0,
                                                    .aperture_last = EDU_DMA_LAST};

struct cost {
    unsigned maps;
    bool ok;
    uint64_t first_ns; /* the first visit of domain B, from A */
    uint64_t median_ns, min_ns, max_ns;
};

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/*
 * Every buffer of a 4 KiB page is mapped into both domains, so each switch
 * lands in a domain of n mappings. One file descriptor per buffer (its memfd):
 * 2 x 512 stays under the default limit, but raise it anyway.
 */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* edu copies RAM(src) -> its buffer -> RAM(dst), both through the attached domain. */
static bool dma_works(struct tap *t, struct npv_dev *dev, struct npv_bar *bar, struct npv_dma *src,
                      struct npv_dma *dst, unsigned n)
{
    struct npv_domain *dom = npv_dev_domain(dev);
    npv_iova_t si = 0, di = 0;
    if (npv_dma_iova(src, dom, &si) < 0 || npv_dma_iova(dst, dom, &di) < 0)
        return tap_check(t, false, "%u maps: buffers not mapped in the attached domain", n);
    /* With one buffer, source and destination are its two halves. */
    uint32_t len = src == dst ? SZ_4K / 2 : SZ_4K;
    uint32_t doff = src == dst ? SZ_4K / 2 : 0;
    uint8_t *s = npv_dma_vaddr(src), *d = (uint8_t *)npv_dma_vaddr(dst) + doff;
    for (uint32_t i = 0; i < len; i++)
        s[i] = (uint8_t)(n + i * 7);
    memset(d, 0, len);
    npv_dma_sync_for_device(src, 0, len);
    npv_dma_sync_for_device(dst, doff, len);
    int r1 = edu_dma(bar, si, 0, len, false);
    int r2 = edu_dma(bar, di + doff, 0, len, true);
    npv_dma_sync_for_cpu(dst, doff, len);
    return tap_check(t, r1 == 0 && r2 == 0 && memcmp(s, d, len) == 0,
                     "%u maps: edu DMA through the domain attached last works (IOVA 0x%" PRIx64
                     " -> 0x%" PRIx64 ")",
                     n, si, di + doff);
}

static void measure(struct tap *t, struct npv_ctx *ctx, struct npv_dev *dev, struct npv_bar *bar,
                    struct npv_domain *home, unsigned n, struct cost *c)
{
    struct npv_domain *dom[2] = {NULL, NULL};
    struct npv_dma *bufs[MAX_MAPS] = {NULL};
    unsigned made = 0;
    uint64_t ns[SWITCHES];
    c->maps = n;
    c->ok = false;

    int rc = npv_domain_new(ctx, &edu_aperture, &dom[0]);
    if (rc == 0)
        rc = npv_domain_new(ctx, &edu_aperture, &dom[1]);
    struct npv_dma_opts o = {.page = NPV_DMA_PAGE_4K, .numa_node = -1, .require_page = 1};
    for (; rc == 0 && made < n; made++) {
        rc = npv_dma_alloc(ctx, SZ_4K, &o, &bufs[made]);
        npv_iova_t iova;
        if (rc == 0)
            rc = npv_dma_map(bufs[made], dom[0], NPV_DMA_RW, &iova);
        if (rc == 0)
            rc = npv_dma_map(bufs[made], dom[1], NPV_DMA_RW, &iova);
    }
    if (!tap_check(t, rc == 0, "%u maps: two domains with %u 4 KiB buffers mapped in each (%s)", n,
                   n, npv_strerror(rc)))
        goto out;
    /* Both domains visited before the timed switches; B's first visit is timed on its own. */
    rc = npv_dev_attach(dev, dom[0]);
    if (rc == 0) {
        uint64_t t0 = now_ns();
        rc = npv_dev_attach(dev, dom[1]);
        c->first_ns = now_ns() - t0;
    }
    if (rc == 0)
        rc = npv_dev_attach(dev, dom[0]);
    unsigned done = 0;
    for (; rc == 0 && done < SWITCHES; done++) {
        struct npv_domain *to = dom[(done + 1) % 2];
        uint64_t t0 = now_ns();
        rc = npv_dev_attach(dev, to);
        ns[done] = now_ns() - t0;
        if (rc == 0 && npv_dev_domain(dev) != to)
            rc = -EPROTO;
    }
    if (!tap_check(t, rc == 0, "%u maps: %u of %u switches A<->B completed (%s)", n, done, SWITCHES,
                   npv_strerror(rc)))
        goto out;
    qsort(ns, SWITCHES, sizeof(ns[0]), cmp_u64);
    c->median_ns = (ns[SWITCHES / 2 - 1] + ns[SWITCHES / 2]) / 2;
    c->min_ns = ns[0];
    c->max_ns = ns[SWITCHES - 1];
    c->ok = dma_works(t, dev, bar, bufs[0], bufs[n - 1], n);
out:
    /* Leave the measured domains before they go, so the next size starts alike. */
    rc = npv_dev_attach(dev, home);
    tap_check(t, rc == 0, "%u maps: back to the home domain (%s)", n, npv_strerror(rc));
    for (unsigned i = 0; i < made; i++)
        npv_dma_free(bufs[i]);
    npv_domain_put(dom[1]);
    npv_domain_put(dom[0]);
}

int main(void)
{
    const char *backend = getenv("NPVTEST_BACKEND");
    const char *bdf = getenv("NPVTEST_EDU");
    struct tap t = {.prefix = backend ? backend : "?"};
    static const unsigned sizes[] = {1, 64, 512};
    struct cost costs[3] = {{0}};
    struct npv_ctx *ctx = NULL;
    struct npv_domain *home = NULL;
    struct npv_dev *dev = NULL;
    struct npv_bar *bar = NULL;

    if (!tap_check(&t, backend && bdf && *bdf, "NPVTEST_BACKEND and NPVTEST_EDU set"))
        return tap_done(&t);
    raise_nofile();
    bool iommufd = strcmp(backend, "iommufd") == 0;
    int rc = npv_ctx_new(&ctx);
    if (!tap_check(&t, rc == 0, "npv_ctx_new (%s)", npv_strerror(rc)))
        return tap_done(&t);
    npv_ctx_set_iommu_backend(ctx, iommufd ? NPV_IOMMU_IOMMUFD : NPV_IOMMU_LEGACY);
    rc = npv_domain_new(ctx, &edu_aperture, &home);
    if (rc == 0)
        rc = npv_dev_open_pci(ctx, bdf, home, NULL, &dev);
    if (rc == 0)
        rc = npv_bar_map(dev, NPV_PCI_BAR0_REGION, &bar);
    if (tap_check(&t, rc == 0, "edu %s open on %s, BAR0 mapped (%s)", bdf, backend,
                  npv_strerror(rc))) {
        for (size_t i = 0; i < 3; i++)
            measure(&t, ctx, dev, bar, home, sizes[i], &costs[i]);
    }

    tap_diag("domain switch cost: npv_dev_attach A<->B on %s, %d switches per row after both "
             "domains were visited once (first_us: B's first visit), TCG guest",
             backend, SWITCHES);
    tap_diag("%-8s %8s %12s %12s %12s %12s %14s", "backend", "mappings", "first_us", "median_us",
             "min_us", "max_us", "median_us/map");
    for (size_t i = 0; i < 3; i++) {
        const struct cost *c = &costs[i];
        if (!c->ok) {
            tap_diag("%-8s %8u %12s", backend, sizes[i], "failed");
            continue;
        }
        tap_diag("%-8s %8u %12.1f %12.1f %12.1f %12.1f %14.2f", backend, c->maps,
                 (double)c->first_ns / 1e3, (double)c->median_ns / 1e3, (double)c->min_ns / 1e3,
                 (double)c->max_ns / 1e3, (double)c->median_ns / 1e3 / c->maps);
    }

    npv_bar_unmap(bar);
    npv_dev_close(dev);
    npv_domain_put(home);
    npv_ctx_free(ctx);
    return tap_done(&t);
}

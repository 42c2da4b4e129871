/* SPDX-License-Identifier: MIT */
/*
 * guest_edu: the library against the real kernel VFIO uAPI, driving QEMU's
 * edu device behind an emulated VT-d, through the public API only. The
 * backend (legacy or iommufd) comes from NPVTEST_BACKEND, the device address
 * from NPVTEST_EDU (both set by the guest's /init).
 *
 * What it shows, in order (each step needs the one before):
 *   1. open by address, regions and IRQs read, BAR0 mapped, config written;
 *   2. DMA round trips at IOVAs our allocator picks inside edu's 28-bit mask,
 *      from 4 KiB and from 2 MiB hugepage memory;
 *   3. DMA to an IOVA that is not mapped is blocked and the IOMMU reports it;
 *   4. MSI to an eventfd, waited for through io_uring with a deadline;
 *   5. moving the device between two domains (on iommufd a switch back to a
 *      domain that has its IOAS maps nothing), and closing it: the domains'
 *      IOAS and /dev/iommu go with the last domain;
 *   6. reset, close and re-open leak no fd and no mapping.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <npuvfio/bar.h>
#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/domain.h>
#include <npuvfio/irq.h>
#include "guest_edu.h"
#include "guest_tap.h"

#define SZ_4K      4096u
#define SZ_2M      (2u << 20)
#define NS_PER_SEC 1000000000ull

/* PCI config space (PCI Local Bus spec 3.0, 6.2) */
#define PCI_COMMAND              0x04
#define PCI_COMMAND_MEMORY       0x2
#define PCI_COMMAND_MASTER       0x4
#define PCI_CACHE_LINE_SIZE      0x0c
#define PCI_COMMAND_INTX_DISABLE 0x400

struct run {
    struct tap t;
    struct npv_ctx *ctx;
    const char *bdf;
    enum npv_iommu_backend backend;
    enum npv_transport transport;
    struct npv_domain *dom_a, *dom_b;
    struct npv_dev *dev;
    struct npv_bar *bar;
    /* While counting: lines of the library's debug log naming iommufd calls. */
    bool counting;
    enum npv_log_level saved_level;
    int attach_lines, detach_lines, ioas_alloc_lines, ioas_map_lines, ioas_destroy_lines,
        iommu_close_lines;
    int fds_start;
};

static const struct npv_domain_opts edu_aperture = {.aperture_start = 0,
                                                    .aperture_last = EDU_DMA_LAST};

static void log_to_console(void *user, enum npv_log_level level, const char *msg)
{
    struct run *r = user;
    if (r->counting) {
        r->attach_lines += strstr(msg, "VFIO_DEVICE_ATTACH_IOMMUFD_PT") != NULL;
        r->detach_lines += strstr(msg, "VFIO_DEVICE_DETACH_IOMMUFD_PT") != NULL;
        r->ioas_alloc_lines += strstr(msg, "IOMMU_IOAS_ALLOC") != NULL;
        r->ioas_map_lines += strstr(msg, "IOMMU_IOAS_MAP") != NULL;
        r->ioas_destroy_lines += strstr(msg, "IOMMU_DESTROY ioas") != NULL;
        r->iommu_close_lines += strstr(msg, "/dev/iommu closed") != NULL;
    }
    tap_diag("lib[%d]: %s", (int)level, msg);
}

/* The library names each iommufd call in its debug log: count the lines from here on. */
static void count_start(struct run *r)
{
    r->saved_level = npv_ctx_log_level(r->ctx);
    npv_ctx_set_log_level(r->ctx, NPV_LOG_DEBUG);
    r->attach_lines = r->detach_lines = r->ioas_alloc_lines = r->ioas_map_lines = 0;
    r->ioas_destroy_lines = r->iommu_close_lines = 0;
    r->counting = true;
}

static void count_stop(struct run *r)
{
    r->counting = false;
    npv_ctx_set_log_level(r->ctx, r->saved_level);
}

static void fill(void *p, size_t len, uint8_t seed)
{
    uint8_t *b = p;
    for (size_t i = 0; i < len; i++)
        b[i] = (uint8_t)(seed + i * 13 + (i >> 8));
}

static bool in_aperture(npv_iova_t iova, size_t len)
{
    return len > 0 && iova <= EDU_DMA_LAST && len - 1 <= EDU_DMA_LAST - iova;
}

static struct npv_dma *dma_new(struct run *r, size_t size, enum npv_dma_page page)
{
    struct npv_dma_opts o = {.page = page, .numa_node = -1, .require_page = 1};
    struct npv_dma *d = NULL;
    int rc = npv_dma_alloc(r->ctx, size, &o, &d);
    if (rc < 0) {
        tap_diag("npv_dma_alloc(%zu, page %d): %s", size, (int)page, npv_strerror(rc));
        return NULL;
    }
    return d;
}

/* 1 */
static bool check_open(struct run *r)
{
    struct tap *t = &r->t;
    int rc = npv_domain_new(r->ctx, &edu_aperture, &r->dom_a);
    if (!tap_check(t, rc == 0, "domain A with edu's 28-bit aperture (%s)", npv_strerror(rc)))
        return false;
    rc = npv_dev_open_pci(r->ctx, r->bdf, r->dom_a, NULL, &r->dev);
    if (!tap_check(t, rc == 0, "npv_dev_open_pci(%s) (%s)", r->bdf, npv_strerror(rc)))
        return false;
    tap_check(t, npv_dev_transport(r->dev) == r->transport, "transport is %s (want %s)",
              npv_transport_name(npv_dev_transport(r->dev)), npv_transport_name(r->transport));
    tap_check(t, npv_dev_domain(r->dev) == r->dom_a, "device attached to domain A");
    /* dev.h: edu has no PRI, and 6.12 takes no fault queue on a kernel-managed HWPT. */
    struct npv_dev_fault faults[4];
    tap_check(t,
              npv_dev_fault_fd(r->dev) == -EOPNOTSUPP &&
                  npv_dev_read_faults(r->dev, faults, 4) == -EOPNOTSUPP,
              "IOMMU faults of a device without PRI are not visible: -EOPNOTSUPP");

    struct npv_dev_info di = {0};
    rc = npv_dev_info(r->dev, &di);
    tap_check(t,
              rc == 0 && (di.flags & NPV_DEV_FLAG_PCI) && di.num_regions > NPV_PCI_CONFIG_REGION &&
                  di.vendor_id == EDU_VENDOR && di.device_id == EDU_DEVICE,
              "device info: %04x:%04x flags 0x%x, %u regions, %u irqs (%s)", di.vendor_id,
              di.device_id, di.flags, di.num_regions, di.num_irqs, npv_strerror(rc));

    struct npv_region_info ri = {0};
    rc = npv_dev_region_info(r->dev, NPV_PCI_BAR0_REGION, &ri);
    tap_check(t,
              rc == 0 && ri.size == (1u << 20) && (ri.flags & NPV_REGION_MMAP) &&
                  ri.nr_mmap_areas >= 1,
              "BAR0 region: %" PRIu64 " bytes, flags 0x%x, %u mmap areas (%s)", ri.size, ri.flags,
              ri.nr_mmap_areas, npv_strerror(rc));
    struct npv_region_info ci = {0};
    rc = npv_dev_region_info(r->dev, NPV_PCI_CONFIG_REGION, &ci);
    tap_check(t, rc == 0 && ci.size >= 256 && (ci.flags & NPV_REGION_WRITE),
              "config region: %" PRIu64 " bytes, flags 0x%x (%s)", ci.size, ci.flags,
              npv_strerror(rc));
    struct npv_irq_info ii = {0};
    rc = npv_dev_irq_info(r->dev, NPV_IRQ_MSI, &ii);
    tap_check(t, rc == 0 && ii.count == 1 && (ii.flags & NPV_IRQ_INFO_EVENTFD),
              "MSI irq info: %u vector(s), flags 0x%x (%s)", ii.count, ii.flags, npv_strerror(rc));

    rc = npv_bar_map(r->dev, NPV_PCI_BAR0_REGION, &r->bar);
    if (!tap_check(t, rc == 0, "npv_bar_map(BAR0) (%s)", npv_strerror(rc)))
        return false;
    tap_check(t, npv_bar_is_direct(r->bar, 0, SZ_4K) == 1, "BAR0 registers are mmapped");
    uint32_t id = npv_bar_read32(r->bar, EDU_ID);
    tap_check(t, (id & 0xff) == 0xed, "edu ID register 0x%08x ends in 0xed", id);
    npv_bar_write32(r->bar, EDU_LIVENESS, 0x12345678u);
    uint32_t live = npv_bar_read32(r->bar, EDU_LIVENESS);
    tap_check(t, live == ~0x12345678u, "liveness register inverts a write: 0x%08x", live);
    uint64_t id64 = 0;
    rc = npv_dev_region_read(r->dev, NPV_PCI_BAR0_REGION, EDU_ID, &id64, 4);
    tap_check(t, rc == 0 && (uint32_t)id64 == id, "ID through the transport (pread): 0x%08x (%s)",
              (uint32_t)id64, npv_strerror(rc));

    uint16_t cmd = 0;
    rc = npv_dev_config_read(r->dev, PCI_COMMAND, &cmd, sizeof(cmd));
    tap_check(t, rc == 0 && (cmd & PCI_COMMAND_MASTER),
              "open enabled bus mastering: COMMAND 0x%04x (%s)", cmd, npv_strerror(rc));
    /* Cache Line Size is a plain read/write register on edu and VFIO passes it through. */
    uint8_t cls = 0x10, back = 0;
    int wrc = npv_dev_config_write(r->dev, PCI_CACHE_LINE_SIZE, &cls, 1);
    rc = npv_dev_config_read(r->dev, PCI_CACHE_LINE_SIZE, &back, 1);
    tap_check(t, wrc == 0 && rc == 0 && back == cls,
              "config write: Cache Line Size 0x%02x reads back 0x%02x (%s)", cls, back,
              npv_strerror(wrc ? wrc : rc));
    uint16_t cmd2 = (uint16_t)(cmd | PCI_COMMAND_INTX_DISABLE), cmd_back = 0;
    wrc = npv_dev_config_write(r->dev, PCI_COMMAND, &cmd2, sizeof(cmd2));
    rc = npv_dev_config_read(r->dev, PCI_COMMAND, &cmd_back, sizeof(cmd_back));
    tap_check(t, wrc == 0 && rc == 0 && (cmd_back & PCI_COMMAND_INTX_DISABLE),
              "config write: COMMAND INTx-disable sticks (0x%04x) (%s)", cmd_back,
              npv_strerror(wrc ? wrc : rc));
    npv_dev_config_write(r->dev, PCI_COMMAND, &cmd, sizeof(cmd));
    return true;
}

/* RAM(src + off) -> edu -> RAM(dst + off2) and compare; both buffers mapped in the device's domain.
 */
static bool round_trip(struct run *r, struct npv_dma *src, size_t soff, struct npv_dma *dst,
                       size_t doff, uint32_t len, uint8_t seed, const char *what)
{
    npv_iova_t si = 0, di = 0;
    struct npv_domain *dom = npv_dev_domain(r->dev);
    if (npv_dma_iova(src, dom, &si) < 0 || npv_dma_iova(dst, dom, &di) < 0)
        return tap_check(&r->t, false, "%s: buffers not mapped in the attached domain", what);
    uint8_t *s = (uint8_t *)npv_dma_vaddr(src) + soff;
    uint8_t *d = (uint8_t *)npv_dma_vaddr(dst) + doff;
    fill(s, len, seed);
    memset(d, 0, len);
    npv_dma_sync_for_device(src, soff, len);
    npv_dma_sync_for_device(dst, doff, len);
    int r1 = edu_dma(r->bar, si + soff, 0, len, false);
    int r2 = edu_dma(r->bar, di + doff, 0, len, true);
    npv_dma_sync_for_cpu(dst, doff, len);
    bool same = memcmp(s, d, len) == 0;
    return tap_check(&r->t, r1 == 0 && r2 == 0 && same,
                     "%s: %u bytes IOVA 0x%" PRIx64 " -> edu -> IOVA 0x%" PRIx64 ", data %s%s",
                     what, len, si + soff, di + doff, same ? "matches" : "DIFFERS",
                     r1 || r2 ? " (edu DMA timed out)" : "");
}

static bool map_checked(struct run *r, struct npv_dma *d, struct npv_domain *dom, npv_iova_t *iova,
                        const char *what)
{
    int rc = npv_dma_map(d, dom, NPV_DMA_RW, iova);
    size_t align = npv_dma_page_size(d);
    return tap_check(&r->t,
                     rc == 0 && in_aperture(*iova, npv_dma_size(d)) && align &&
                         (*iova & (align - 1)) == 0,
                     "%s: %zu bytes mapped at allocator IOVA 0x%" PRIx64
                     ", %zu-aligned, inside [0, 0x%llx] (%s)",
                     what, npv_dma_size(d), *iova, align, EDU_DMA_LAST, npv_strerror(rc));
}

/* 2 */
static void check_dma(struct run *r)
{
    struct tap *t = &r->t;
    struct npv_dma *src = dma_new(r, SZ_4K, NPV_DMA_PAGE_4K);
    struct npv_dma *dst = dma_new(r, SZ_4K, NPV_DMA_PAGE_4K);
    struct npv_dma *huge = dma_new(r, SZ_2M, NPV_DMA_PAGE_2M);
    npv_iova_t a = 0, b = 0, h = 0;
    bool small_mapped = tap_check(t, src && dst, "4 KiB DMA buffers allocated") &&
                        map_checked(r, src, r->dom_a, &a, "4 KiB src") &&
                        map_checked(r, dst, r->dom_a, &b, "4 KiB dst");
    if (small_mapped)
        round_trip(r, src, 0, dst, 0, SZ_4K, 1, "4 KiB pages");

    if (tap_check(t, huge && npv_dma_page_size(huge) == SZ_2M,
                  "2 MiB buffer on a 2 MiB hugepage (page size %zu)",
                  huge ? npv_dma_page_size(huge) : 0) &&
        map_checked(r, huge, r->dom_a, &h, "2 MiB hugepage")) {
        /* Both ends in one hugepage, far apart, so the IOMMU's 2 MiB entry is walked. */
        round_trip(r, huge, 0, huge, SZ_2M - SZ_4K, SZ_4K, 2, "2 MiB page, first -> last 4 KiB");
        round_trip(r, huge, (1u << 20) + 3 * SZ_4K, huge, 5 * SZ_4K, 1024, 3,
                   "2 MiB page, middle -> start");
        if (small_mapped)
            round_trip(r, huge, 7 * SZ_4K, src, 0, SZ_4K, 4, "2 MiB page -> 4 KiB page");
    }

    struct npv_iova_range ranges[16];
    int n = npv_domain_iova_ranges(r->dom_a, ranges, 16);
    bool inside = n > 0 && n <= 16;
    for (int i = 0; inside && i < n; i++)
        inside = ranges[i].start <= ranges[i].last && ranges[i].last <= EDU_DMA_LAST;
    tap_check(t, inside, "domain's usable IOVA ranges (%d) all lie inside the aperture", n);
    for (int i = 0; i < n && i < 16; i++)
        tap_diag("usable range 0x%" PRIx64 "-0x%" PRIx64, ranges[i].start, ranges[i].last);

    npv_dma_free(huge);
    npv_dma_free(dst);
    npv_dma_free(src);
}

/*
 * edu writes 4 bytes of its buffer (which the caller made differ from
 * victim) to iova: 4 bytes give one fault line, and the log is rate-limited.
 * True when the data did not reach victim and the guest kernel logged the
 * IOMMU fault for that address.
 */
static bool dma_blocked(struct run *r, npv_iova_t iova, const uint8_t *victim, const char *what)
{
    uint8_t before[4];
    memcpy(before, victim, 4);
    int faults0 = klog_fault_count(iova);
    int rc = edu_dma(r->bar, iova, 0, 4, true);
    int faults1 = klog_wait_fault(iova, faults0);
    bool untouched = memcmp(before, victim, 4) == 0;
    return tap_check(&r->t, rc == 0 && untouched && faults0 >= 0 && faults1 > faults0,
                     "%s: DMA to IOVA 0x%" PRIx64 " blocked: data %s, IOMMU fault lines %d -> %d",
                     what, iova, untouched ? "did not arrive" : "ARRIVED", faults0, faults1);
}

/* 3 */
static void check_blocked(struct run *r)
{
    struct tap *t = &r->t;
    struct npv_dma *src = dma_new(r, SZ_4K, NPV_DMA_PAGE_4K);
    struct npv_dma *victim = dma_new(r, SZ_4K, NPV_DMA_PAGE_4K);
    npv_iova_t si = 0, vi = 0;
    if (!tap_check(t, src && victim, "buffers for the blocked-DMA test") ||
        !map_checked(r, src, r->dom_a, &si, "source") ||
        !map_checked(r, victim, r->dom_a, &vi, "victim"))
        goto out;
    /* Load edu's buffer with 0xc3 so any write that gets through is visible. */
    uint8_t *s = npv_dma_vaddr(src), *v = npv_dma_vaddr(victim);
    memset(s, 0xc3, SZ_4K);
    memset(v, 0x5a, SZ_4K);
    int r1 = edu_dma(r->bar, si, 0, 64, false);
    int r2 = edu_dma(r->bar, vi, 0, 4, true);
    tap_check(t, r1 == 0 && r2 == 0 && v[0] == 0xc3 && v[3] == 0xc3,
              "DMA to the mapped IOVA 0x%" PRIx64 " arrives", vi);
    /* Unmapped: the same IOVA must now be refused by the IOMMU. */
    memset(v, 0xa5, SZ_4K);
    int rc = npv_dma_unmap(victim, r->dom_a);
    void *va = NULL;
    tap_check(t, rc == 0 && npv_domain_iova_to_vaddr(r->dom_a, vi, &va) == -ENOENT,
              "npv_dma_unmap removes IOVA 0x%" PRIx64 " from the domain (%s)", vi,
              npv_strerror(rc));
    dma_blocked(r, vi, v, "after unmap");
    /* An IOVA nothing was ever mapped at, near the top of the aperture. */
    npv_iova_t never = EDU_DMA_LAST + 1 - 16 * SZ_4K;
    if (tap_check(t, npv_domain_iova_to_vaddr(r->dom_a, never, &va) == -ENOENT,
                  "IOVA 0x%" PRIx64 " is not mapped in domain A", never))
        dma_blocked(r, never, v, "never mapped");
out:
    npv_dma_free(victim);
    npv_dma_free(src);
}

/* 4 */
static void check_msi(struct run *r)
{
    struct tap *t = &r->t;
    struct npv_irq *irq = NULL;
    int rc = npv_irq_enable(r->dev, NPV_IRQ_MSI, 1, &irq);
    if (!tap_check(t, rc == 0 && npv_irq_count(irq) == 1 && npv_irq_fd(irq, 0) >= 0,
                   "npv_irq_enable(MSI, 1 vector) (%s)", npv_strerror(rc)))
        return;

    npv_bar_write32(r->bar, EDU_IRQ_RAISE, 0x1);
    int64_t n = npv_irq_wait(irq, 0, 5 * NS_PER_SEC);
    uint32_t status = npv_bar_read32(r->bar, EDU_IRQ_STATUS);
    tap_check(t, n >= 1 && (status & 0x1),
              "MSI raised by a write to 0x60 arrives: wait=%" PRId64 ", IRQ_STATUS 0x%x", n,
              status);
    npv_bar_write32(r->bar, EDU_IRQ_ACK, status);

    uint64_t t0 = now_ns();
    n = npv_irq_wait(irq, 0, NS_PER_SEC / 5);
    uint64_t waited = now_ns() - t0;
    tap_check(t, n == -ETIMEDOUT && waited >= NS_PER_SEC / 10,
              "a wait with no interrupt returns -ETIMEDOUT at its deadline (%" PRId64
              " after %" PRIu64 " ms)",
              n, waited / 1000000);

    struct npv_irq_waitset *ws = NULL;
    rc = npv_irq_waitset_new(r->ctx, 4, &ws);
    if (tap_check(t, rc == 0, "npv_irq_waitset_new (%s)", npv_strerror(rc))) {
        rc = npv_irq_waitset_add(ws, irq, 0, 0xed);
        tap_check(t, rc == 0, "npv_irq_waitset_add (%s)", npv_strerror(rc));
        npv_bar_write32(r->bar, EDU_IRQ_RAISE, 0x2);
        uint64_t cookies[4] = {0};
        rc = npv_irq_waitset_wait(ws, 5 * NS_PER_SEC, cookies, 4);
        tap_check(t, rc == 1 && cookies[0] == 0xed,
                  "waitset reports the MSI by its cookie (rc=%d cookie=0x%" PRIx64 ")", rc,
                  cookies[0]);
        npv_bar_write32(r->bar, EDU_IRQ_ACK, npv_bar_read32(r->bar, EDU_IRQ_STATUS));
        t0 = now_ns();
        rc = npv_irq_waitset_wait(ws, NS_PER_SEC / 5, cookies, 4);
        waited = now_ns() - t0;
        tap_check(t, rc == -ETIMEDOUT && waited >= NS_PER_SEC / 10,
                  "an idle waitset returns -ETIMEDOUT at its deadline (%d after %" PRIu64 " ms)",
                  rc, waited / 1000000);
        npv_irq_waitset_free(ws);
    }
    npv_irq_disable(irq);
}

/*
 * With the device on A, B has no device: a buffer mapped into B now must
 * still reach B's IOAS (it stays with its domain), and moving back to B is
 * one attach that maps nothing, after which edu reaches both of B's buffers.
 */
static void switch_back_to_b(struct run *r, struct npv_dma *in_b)
{
    struct tap *t = &r->t;
    struct npv_dma *late = dma_new(r, SZ_4K, NPV_DMA_PAGE_4K);
    npv_iova_t il = 0;
    if (!tap_check(t, late != NULL, "a buffer for B while the device is on A") ||
        !map_checked(r, late, r->dom_b, &il, "mapped into B with no device on B")) {
        npv_dma_free(late);
        return;
    }
    count_start(r);
    int rc = npv_dev_attach(r->dev, r->dom_b);
    count_stop(r);
    tap_check(t, rc == 0 && npv_dev_domain(r->dev) == r->dom_b, "npv_dev_attach to B again (%s)",
              npv_strerror(rc));
    if (r->transport == NPV_TRANSPORT_IOMMUFD)
        tap_check(t, r->attach_lines == 1 && r->ioas_alloc_lines == 0 && r->ioas_map_lines == 0,
                  "back to B, whose IOAS exists: %d ATTACH_IOMMUFD_PT, %d IOAS_ALLOC, "
                  "%d IOAS_MAP",
                  r->attach_lines, r->ioas_alloc_lines, r->ioas_map_lines);
    if (rc == 0)
        round_trip(r, in_b, 0, late, 0, SZ_4K, 8,
                   "back on B, the buffer mapped before -> the one mapped while away");
    npv_dma_free(late);
}

/* 5 */
static void check_two_domains(struct run *r)
{
    struct tap *t = &r->t;
    int rc = npv_domain_new(r->ctx, &edu_aperture, &r->dom_b);
    if (!tap_check(t, rc == 0, "domain B (%s)", npv_strerror(rc)))
        return;
    struct npv_dma *in_a = dma_new(r, SZ_4K, NPV_DMA_PAGE_4K);
    struct npv_dma *in_b = dma_new(r, SZ_4K, NPV_DMA_PAGE_4K);
    struct npv_dma *src_a = dma_new(r, SZ_4K, NPV_DMA_PAGE_4K);
    npv_iova_t ia = 0, ib = 0, sa = 0;
    if (!tap_check(t, in_a && in_b && src_a, "buffers for the two-domain test"))
        goto out;
    if (!map_checked(r, in_a, r->dom_a, &ia, "buffer in A only") ||
        !map_checked(r, src_a, r->dom_a, &sa, "source in A only"))
        goto out;
    /* Keep A's IOVA out of B so "unreachable" cannot be B's mapping answering. */
    rc = npv_domain_reserve(r->dom_b, ia, ia + SZ_4K - 1);
    tap_check(t, rc == 0, "reserve A's IOVA 0x%" PRIx64 " in B (%s)", ia, npv_strerror(rc));
    if (!map_checked(r, in_b, r->dom_b, &ib, "buffer in B only"))
        goto out;
    tap_check(t, ib != ia, "B's buffer got IOVA 0x%" PRIx64 ", not A's 0x%" PRIx64, ib, ia);

    round_trip(r, src_a, 0, in_a, 0, 256, 5, "attached to A, buffer in A");

    count_start(r);
    rc = npv_dev_attach(r->dev, r->dom_b);
    count_stop(r);
    if (!tap_check(t, rc == 0 && npv_dev_domain(r->dev) == r->dom_b,
                   "npv_dev_attach moves the device from A to B (%s)", npv_strerror(rc)))
        goto out;
    /* iommufd moves a device with one ATTACH_IOMMUFD_PT that replaces the old one. */
    if (r->transport == NPV_TRANSPORT_IOMMUFD)
        tap_check(t, r->attach_lines == 1 && r->detach_lines == 0,
                  "the move is a single replace: %d ATTACH_IOMMUFD_PT, %d DETACH_IOMMUFD_PT "
                  "in the debug log",
                  r->attach_lines, r->detach_lines);
    uint8_t *va = npv_dma_vaddr(in_a);
    memset(va, 0x3c, SZ_4K);
    /* edu's buffer still holds the last round trip's data, which differs from 0x3c. */
    dma_blocked(r, ia, va, "attached to B, IOVA mapped only in A");
    uint8_t *vb = npv_dma_vaddr(in_b);
    memset(vb, 0, SZ_4K);
    int r2 = edu_dma(r->bar, ib, 0, 256, true);
    npv_dma_sync_for_cpu(in_b, 0, 256);
    /* What edu holds is what the last successful round trip put there (seed 5). */
    uint8_t want[256];
    fill(want, sizeof(want), 5);
    tap_check(t, r2 == 0 && memcmp(vb, want, 256) == 0,
              "attached to B, DMA to B's IOVA 0x%" PRIx64 " arrives", ib);

    count_start(r);
    rc = npv_dev_attach(r->dev, r->dom_a);
    count_stop(r);
    tap_check(t, rc == 0 && npv_dev_domain(r->dev) == r->dom_a, "npv_dev_attach back to A (%s)",
              npv_strerror(rc));
    if (r->transport == NPV_TRANSPORT_IOMMUFD)
        tap_check(t, r->attach_lines == 1 && r->ioas_alloc_lines == 0 && r->ioas_map_lines == 0,
                  "back to A, whose IOAS exists: %d ATTACH_IOMMUFD_PT, %d IOAS_ALLOC, "
                  "%d IOAS_MAP",
                  r->attach_lines, r->ioas_alloc_lines, r->ioas_map_lines);
    if (rc == 0)
        round_trip(r, src_a, 0, in_a, 0, 256, 6, "back on A, buffer in A");
    if (rc == 0)
        switch_back_to_b(r, in_b);
out:
    npv_dma_free(src_a);
    npv_dma_free(in_b);
    npv_dma_free(in_a);
}

/*
 * Close the device, then put the domains. On iommufd the domains' IOAS (and
 * the /dev/iommu they hold) outlive the device and go with the last domain:
 * the fd count is back to where the run started only then.
 */
static void teardown(struct run *r)
{
    struct tap *t = &r->t;
    bool iommufd = r->transport == NPV_TRANSPORT_IOMMUFD;
    bool had_dev = r->dev != NULL;
    npv_bar_unmap(r->bar);
    r->bar = NULL;
    count_start(r);
    npv_dev_close(r->dev);
    r->dev = NULL;
    int fds_closed = count_fds();
    int destroyed_at_close = r->ioas_destroy_lines, closed_at_close = r->iommu_close_lines;
    npv_domain_put(r->dom_b);
    npv_domain_put(r->dom_a);
    count_stop(r);
    bool both = r->dom_a != NULL && r->dom_b != NULL;
    r->dom_a = r->dom_b = NULL;
    int fds_end = count_fds();
    if (!had_dev || !both)
        return;
    if (iommufd) {
        tap_check(t,
                  destroyed_at_close == 0 && closed_at_close == 0 && fds_closed == r->fds_start + 1,
                  "device closed, domains alive: their IOAS and /dev/iommu stay (%d IOAS "
                  "destroyed, fds %d -> %d)",
                  destroyed_at_close, r->fds_start, fds_closed);
        tap_check(t, r->ioas_destroy_lines == 2 && r->iommu_close_lines == 1,
                  "both domains put: %d IOAS destroyed, /dev/iommu closed %d time(s)",
                  r->ioas_destroy_lines, r->iommu_close_lines);
    }
    tap_check(t, r->fds_start >= 0 && fds_end == r->fds_start,
              "device closed and both domains put: fds back to the start (%d -> %d)", r->fds_start,
              fds_end);
}

static int reset_hook_calls;

static int count_reset(struct npv_dev *dev, void *arg)
{
    (void)dev;
    (void)arg;
    reset_hook_calls++;
    return 0;
}

/*
 * One full life: open, map, reset, DMA, MSI, close. The DMA and MSI come after
 * the reset, so they show VFIO restored bus mastering and the MSI routing.
 * Returns true when every step worked.
 */
static bool life_cycle(struct run *r, bool report)
{
    struct npv_domain *dom = NULL;
    struct npv_dev *dev = NULL;
    struct npv_bar *bar = NULL;
    struct npv_dma *d4 = NULL, *d2 = NULL;
    struct npv_irq *irq = NULL;
    npv_iova_t i4 = 0, i2 = 0;
    bool ok = npv_domain_new(r->ctx, &edu_aperture, &dom) == 0 &&
              npv_dev_open_pci(r->ctx, r->bdf, dom, NULL, &dev) == 0 &&
              npv_bar_map(dev, NPV_PCI_BAR0_REGION, &bar) == 0;
    if (ok) {
        d4 = dma_new(r, SZ_4K, NPV_DMA_PAGE_4K);
        d2 = dma_new(r, SZ_2M, NPV_DMA_PAGE_2M);
        ok = d4 && d2 && npv_dma_map(d4, dom, NPV_DMA_RW, &i4) == 0 &&
             npv_dma_map(d2, dom, NPV_DMA_RW, &i2) == 0 &&
             npv_irq_enable(dev, NPV_IRQ_MSI, 1, &irq) == 0;
    }
    if (ok && report) {
        struct npv_dev_info di = {0};
        npv_dev_info(dev, &di);
        int before = reset_hook_calls;
        npv_dev_set_reset_hook(dev, count_reset, NULL);
        int rc = npv_dev_reset(dev);
        /* run-guest.sh puts edu alone behind a root port, so VFIO can reset its bus. */
        tap_check(&r->t, (di.flags & NPV_DEV_FLAG_RESET) && rc == 0 && reset_hook_calls == before,
                  "npv_dev_reset uses VFIO_DEVICE_RESET, not the hook (flags 0x%x, hook calls "
                  "%d) (%s)",
                  di.flags, reset_hook_calls - before, npv_strerror(rc));
        uint32_t id = npv_bar_read32(bar, EDU_ID);
        tap_check(&r->t, (id & 0xff) == 0xed, "BAR0 still answers after the reset (ID 0x%08x)", id);
    }
    if (ok) {
        fill(npv_dma_vaddr(d4), 64, 7);
        ok = edu_dma(bar, i4, 0, 64, false) == 0 && edu_dma(bar, i2, 0, 64, true) == 0 &&
             memcmp(npv_dma_vaddr(d4), npv_dma_vaddr(d2), 64) == 0;
        npv_bar_write32(bar, EDU_IRQ_RAISE, 0x4);
        ok = ok && npv_irq_wait(irq, 0, 5 * NS_PER_SEC) >= 1;
        npv_bar_write32(bar, EDU_IRQ_ACK, 0x4);
    }
    npv_irq_disable(irq);
    npv_dma_free(d2);
    npv_dma_free(d4);
    npv_bar_unmap(bar);
    npv_dev_close(dev);
    npv_domain_put(dom);
    return ok;
}

/* 6 */
static void check_reopen(struct run *r)
{
    struct tap *t = &r->t;
    int fds0 = count_fds(), maps0 = count_maps();
    bool ok1 = life_cycle(r, true);
    int fds1 = count_fds(), maps1 = count_maps();
    bool ok2 = life_cycle(r, false);
    int fds2 = count_fds(), maps2 = count_maps();
    tap_check(t, ok1 && ok2,
              "two more open/map/reset/DMA/MSI/close cycles work (DMA and MSI after the reset)");
    tap_check(t, fds0 >= 0 && fds1 == fds0 && fds2 == fds0,
              "no fd leaked: /proc/self/fd %d -> %d -> %d", fds0, fds1, fds2);
    tap_check(t, maps0 >= 0 && maps1 == maps0 && maps2 == maps0,
              "no mapping leaked: /proc/self/maps %d -> %d -> %d lines", maps0, maps1, maps2);
}

int main(void)
{
    const char *backend = getenv("NPVTEST_BACKEND");
    struct run r = {.t.prefix = backend ? backend : "?", .bdf = getenv("NPVTEST_EDU")};
    if (!tap_check(&r.t, backend && r.bdf && *r.bdf, "NPVTEST_BACKEND and NPVTEST_EDU set"))
        return tap_done(&r.t);
    bool iommufd = strcmp(backend, "iommufd") == 0;
    r.backend = iommufd ? NPV_IOMMU_IOMMUFD : NPV_IOMMU_LEGACY;
    r.transport = iommufd ? NPV_TRANSPORT_IOMMUFD : NPV_TRANSPORT_LEGACY;

    int fds_start = count_fds(), maps_start = count_maps();
    r.fds_start = fds_start;
    int rc = npv_ctx_new(&r.ctx);
    if (!tap_check(&r.t, rc == 0, "npv_ctx_new (%s)", npv_strerror(rc)))
        return tap_done(&r.t);
    npv_ctx_set_log_sink(r.ctx, log_to_console, &r);
    npv_ctx_set_iommu_backend(r.ctx, r.backend);

    if (check_open(&r)) {
        check_dma(&r);
        check_blocked(&r);
        check_msi(&r);
        check_two_domains(&r);
    }
    teardown(&r);
    check_reopen(&r);
    npv_ctx_free(r.ctx);
    tap_diag("whole run: fds %d -> %d, maps %d -> %d", fds_start, count_fds(), maps_start,
             count_maps());
    return tap_done(&r.t);
}

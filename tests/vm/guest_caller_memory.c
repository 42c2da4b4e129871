/* SPDX-License-Identifier: MIT */
/*
 * guest_caller_memory: memory the program already owns, wrapped with
 * npv_dma_wrap and mapped into a domain without a copy, is reached by edu's
 * DMA engine through the real IOMMU (type1 or iommufd pins it at map time):
 * a page-aligned heap buffer (anonymous private memory: fine for a kernel
 * IOMMU, which pins the pages themselves) and a MAP_SHARED file on tmpfs
 * (/tmp) mapped at a file offset. edu copies heap -> file; the data is then
 * read from the file with pread. After unmap and free the memory is still the
 * program's, nothing is quarantined and no fd is left.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <npuvfio/bar.h>
#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/domain.h>
#include "guest_edu.h"
#include "guest_tap.h"

#define SZ_4K 4096u

static const struct npv_domain_opts edu_aperture = {.aperture_start = 0,
                                                    .aperture_last = EDU_DMA_LAST};

static void log_diag(void *user, enum npv_log_level level, const char *msg)
{
    (void)user;
    tap_diag("lib[%d]: %s", (int)level, msg);
}

int main(void)
{
    const char *backend = getenv("NPVTEST_BACKEND");
    const char *edu = getenv("NPVTEST_EDU");
    struct tap t = {.prefix = backend ? backend : "?"};
    struct npv_ctx *ctx = NULL;
    struct npv_domain *dom = NULL;
    struct npv_dev *dev = NULL;
    struct npv_bar *bar = NULL;
    struct npv_dma *heap_dma = NULL, *file_dma = NULL;
    uint8_t *heap = NULL, *file_map = MAP_FAILED;
    int fd = -1;

    if (!tap_check(&t, backend && edu && *edu, "NPVTEST_BACKEND and NPVTEST_EDU set (%s)",
                   edu ? edu : "-"))
        return tap_done(&t);
    int fds0 = count_fds();
    int rc = npv_ctx_new(&ctx);
    if (!tap_check(&t, rc == 0, "npv_ctx_new (%s)", npv_strerror(rc)))
        return tap_done(&t);
    npv_ctx_set_log_sink(ctx, log_diag, NULL);
    npv_ctx_set_iommu_backend(ctx, strcmp(backend, "iommufd") == 0 ? NPV_IOMMU_IOMMUFD
                                                                   : NPV_IOMMU_LEGACY);
    rc = npv_domain_new(ctx, &edu_aperture, &dom);
    if (rc == 0)
        rc = npv_dev_open_pci(ctx, edu, dom, NULL, &dev);
    if (rc == 0)
        rc = npv_bar_map(dev, NPV_PCI_BAR0_REGION, &bar);
    if (!tap_check(&t, rc == 0, "edu open in a domain, BAR0 mapped (%s)", npv_strerror(rc)))
        goto out;

    heap = aligned_alloc(SZ_4K, 2 * SZ_4K);
    rc = heap ? npv_dma_wrap(ctx, heap, 2 * SZ_4K, -1, 0, 0, &heap_dma) : -ENOMEM;
    npv_iova_t heap_iova = 0;
    rc = rc ? rc : npv_dma_map(heap_dma, dom, NPV_DMA_RW, &heap_iova);
    if (!tap_check(&t, rc == 0, "a page-aligned heap buffer wrapped and mapped at IOVA %#llx (%s)",
                   (unsigned long long)heap_iova, npv_strerror(rc)))
        goto out;
    rc = edu_round_trip(bar, dom, heap_dma, 0, heap_dma, SZ_4K, SZ_4K, 11);
    tap_check(&t, rc == 0, "edu DMA from the heap buffer's first page to its second (%s)",
              npv_strerror(rc));

    fd = open("/tmp/npv-caller-memory", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0 && ftruncate(fd, 4 * SZ_4K) == 0)
        file_map = mmap(NULL, 4 * SZ_4K, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    /* Pages 1 and 2 of the file: a wrap at a file offset. */
    rc = file_map != MAP_FAILED
             ? npv_dma_wrap(ctx, file_map + SZ_4K, 2 * SZ_4K, fd, SZ_4K, 0, &file_dma)
             : -errno;
    npv_iova_t file_iova = 0;
    rc = rc ? rc : npv_dma_map(file_dma, dom, NPV_DMA_RW, &file_iova);
    if (!tap_check(&t, rc == 0, "a MAP_SHARED tmpfs file wrapped at offset 4 KiB and mapped (%s)",
                   npv_strerror(rc)))
        goto out;
    rc = edu_round_trip(bar, dom, heap_dma, 0, file_dma, SZ_4K, SZ_4K, 23);
    tap_check(&t, rc == 0, "edu DMA from the heap buffer into the file mapping (%s)",
              npv_strerror(rc));
    uint8_t back[SZ_4K];
    ssize_t got = pread(fd, back, sizeof(back), 2 * SZ_4K);
    tap_check(&t, got == (ssize_t)sizeof(back) && memcmp(back, heap, SZ_4K) == 0,
              "the file holds what edu wrote, read back with pread at 8 KiB");

    rc = npv_dma_unmap(file_dma, dom);
    int rc2 = npv_dma_unmap(heap_dma, dom);
    uint64_t qbytes = 1;
    size_t q = npv_domain_quarantined(dom, &qbytes);
    tap_check(&t,
              rc == 0 && rc2 == 0 && npv_domain_mapping_count(dom) == 0 && q == 0 && qbytes == 0,
              "both unmapped, nothing quarantined (%s, %s, %zu ranges)", npv_strerror(rc),
              npv_strerror(rc2), q);
    npv_dma_free(file_dma);
    npv_dma_free(heap_dma);
    file_dma = heap_dma = NULL;
    heap[0] ^= 0xff;
    file_map[0] = 1;
    tap_check(&t, true, "the memory is still the program's after npv_dma_free");
out:
    npv_dma_free(file_dma);
    npv_dma_free(heap_dma);
    if (file_map != MAP_FAILED)
        munmap(file_map, 4 * SZ_4K);
    if (fd >= 0) {
        close(fd);
        unlink("/tmp/npv-caller-memory");
    }
    free(heap);
    npv_bar_unmap(bar);
    npv_dev_close(dev);
    npv_domain_put(dom);
    npv_ctx_free(ctx);
    int fds1 = count_fds();
    tap_check(&t, fds0 >= 0 && fds1 == fds0, "no fd left at the end: %d -> %d", fds0, fds1);
    return tap_done(&t);
}

/* SPDX-License-Identifier: MIT */
/*
 * Caller memory without a copy: the device reads and writes memory the
 * program already owns (a tensor it allocated itself), wrapped with
 * npv_dma_wrap instead of copied into an npv_dma_alloc buffer.
 *
 *   npuvfio sim --device testdev --socket /tmp/testdev.sock &
 *   caller_memory /tmp/testdev.sock
 *
 *   cc caller_memory.c $(pkg-config --cflags --libs npuvfio-testdev)
 *
 * Which memory can be wrapped depends on who does the DMA. Behind kernel VFIO
 * the IOMMU pins the pages, so any page-aligned memory works, malloc'd or
 * not. Behind vfio-user the "device" is another process: it can reach only
 * memory it can mmap itself, i.e. memory backed by a file it is handed (a
 * memfd, a shared file, hugetlbfs). This program shows both: a page-aligned
 * heap buffer is refused on the vfio-user device with -NPV_ENOTSHARED, and a
 * memfd mapping works.
 */
#define _GNU_SOURCE /* memfd_create */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/domain.h>
#include <npuvfio/ring.h>
#include <npuvfio/testdev.h>

#define PAGE       4096u /* the IOMMU maps whole pages: wrapped memory is page-aligned */
#define LEN        (2u * PAGE)
#define TIMEOUT_NS (5ull * 1000000000ull)

static int fail(const char *what, int err)
{
    fprintf(stderr, "caller_memory: %s: %s\n", what, npv_strerror(err));
    return 1;
}

/* A heap buffer has no file behind it: fine for kernel VFIO, refused here. */
static int show_heap_refused(struct npv_ctx *ctx, struct npv_domain *dom)
{
    void *heap = aligned_alloc(PAGE, PAGE);
    if (heap == NULL)
        return fail("aligned_alloc", -ENOMEM);
    struct npv_dma *dma;
    int r = npv_dma_wrap(ctx, heap, PAGE, -1, 0, 0, &dma);
    if (r == 0) {
        r = npv_dma_map(dma, dom, NPV_DMA_RW, NULL);
        npv_dma_free(dma); /* the memory stays ours: freed below */
    }
    free(heap);
    if (r != -NPV_ENOTSHARED) {
        fprintf(stderr, "caller_memory: a heap buffer on a vfio-user device gave %s, not %s\n",
                npv_strerror(r), npv_strerror(-NPV_ENOTSHARED));
        return 1;
    }
    printf("caller_memory: heap buffer refused on vfio-user as expected (%s)\n", npv_strerror(r));
    return 0;
}

/* COPY the first page of the caller's mapping to its second page. */
static int copy_and_check(struct npv_testdev *td, struct npv_dma *dma, uint8_t *mem,
                          npv_iova_t iova)
{
    for (unsigned i = 0; i < PAGE; i++)
        mem[i] = (uint8_t)(i * 7u + 3u);
    memset(mem + PAGE, 0, PAGE);
    /* On a non-coherent device the CPU's writes must reach memory first. */
    npv_dma_sync_for_device(dma, 0, LEN);
    struct npv_testdev_desc job = npv_testdev_copy(iova + PAGE, iova, PAGE, 0);
    int r = npv_ring_push(npv_testdev_ring(td), &job, 1);
    if (r < 0)
        return fail("queueing the copy", r);
    npv_ring_submit(npv_testdev_ring(td));
    struct npv_cpl done;
    r = npv_testdev_wait(td, NPV_RING_WAIT_POLL, 1, TIMEOUT_NS, &done);
    if (r <= 0)
        return fail("waiting for the copy", r < 0 ? r : -ETIMEDOUT);
    if (done.status != 0)
        return fail("the copy", done.status);
    npv_dma_sync_for_cpu(dma, PAGE, PAGE);
    if (memcmp(mem, mem + PAGE, PAGE) != 0) {
        fprintf(stderr, "caller_memory: the copy differs from its source\n");
        return 1;
    }
    printf("caller_memory: the device copied %u bytes within the caller's memfd mapping\n", PAGE);
    return 0;
}

static int with_device(struct npv_ctx *ctx, struct npv_domain *dom, struct npv_testdev *td)
{
    if (show_heap_refused(ctx, dom) != 0)
        return 1;
    /* The caller's memory: a memfd the program could equally hand to others. */
    int fd = memfd_create("tensor", MFD_CLOEXEC);
    if (fd < 0)
        return fail("memfd_create", -errno);
    uint8_t *mem = MAP_FAILED;
    if (ftruncate(fd, LEN) == 0)
        mem = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mem == MAP_FAILED) {
        close(fd);
        return fail("mapping the memfd", -errno);
    }
    struct npv_dma *dma;
    npv_iova_t iova;
    /* The buffer keeps its own duplicate of fd, which the server maps. */
    int r = npv_dma_wrap(ctx, mem, LEN, fd, 0, 0, &dma);
    int ret = 1;
    if (r < 0) {
        ret = fail("wrapping the memfd", r);
    } else {
        r = npv_dma_map(dma, dom, NPV_DMA_RW, &iova);
        ret = r < 0 ? fail("mapping it into the domain", r) : copy_and_check(td, dma, mem, iova);
        /* Unmaps from the domain; the memory itself is ours to release. */
        npv_dma_free(dma);
    }
    munmap(mem, LEN);
    close(fd);
    return ret;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: caller_memory SOCKET (a testdev model: npuvfio sim)\n");
        return 2;
    }
    struct npv_ctx *ctx = NULL;
    struct npv_domain *dom = NULL;
    struct npv_dev *dev = NULL;
    struct npv_testdev *td = NULL;
    int r = npv_ctx_new(&ctx);
    if (r == 0)
        r = npv_domain_new(ctx, NULL, &dom);
    if (r == 0)
        r = npv_dev_open_vfio_user(ctx, argv[1], dom, NULL, &dev);
    if (r == 0)
        r = npv_testdev_open(dev, NULL, &td);
    int ret = r < 0 ? fail("opening the device", r) : with_device(ctx, dom, td);
    npv_testdev_close(td);
    npv_dev_close(dev);
    npv_domain_put(dom);
    npv_ctx_free(ctx);
    return ret;
}

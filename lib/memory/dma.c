/* SPDX-License-Identifier: MIT */
/*
 * npv_dma: DMA memory in a memfd, or memory the caller owns, mapped into
 * domains.
 *
 * A memfd rather than anonymous memory: a vfio-user server maps the client's
 * DMA memory from an fd passed in DMA_MAP, and kernel IOMMUs do not care.
 * Hugetlb pages when there are some: a 2 MiB page lets the IOMMU map the
 * buffer with one IOTLB entry per 2 MiB instead of 512.
 *
 * Nothing here is pinned: the kernel IOMMU pins at map time, and that is
 * where RLIMIT_MEMLOCK is checked (lib/vfio/vfio_dma_ioctl.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/memfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <npuvfio/dma.h>

#include "stats_internal.h"
#include "ctx_internal.h"
#include "domain_internal.h"
#include "failpoint_internal.h"
#include "numa.h"
#include "vma_file.h"

/* Linux 5.14; older C libraries do not name it, older kernels answer EINVAL. */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define SZ_4K (4096ul)
#define SZ_1M (1ul << 20)
#define SZ_2M (2ul << 20)
#define SZ_1G (1ul << 30)

struct dma_mapping {
    struct npv_domain *dom; /* holds a reference: the domain outlives the mapping */
    npv_iova_t iova;
};

struct npv_dma {
    struct npv_ctx *ctx;
    void *vaddr;
    size_t size;
    size_t page_size;
    int fd;             /* ours: the memfd, or a duplicate of the caller's fd; -1 none */
    uint64_t fd_offset; /* of vaddr in fd */
    bool wrapped;       /* the caller's memory: never unmapped by us */
    int numa_node;
    /*
     * The hugepage size asked for when none was free and 4 KiB pages were
     * taken instead; 0 otherwise. Warned about when the buffer is mapped
     * into a kernel IOMMU, where small pages cost IOTLB entries and pins.
     */
    size_t wanted_page;
    struct dma_mapping *maps;
    size_t nr_maps;
};

/* ---- backing memory ---- */

static int prefault(void *addr, size_t len, size_t page)
{
    /*
     * MADV_POPULATE_WRITE (Linux 5.14) faults in with one call and reports a
     * node out of hugepages as an error instead of SIGBUS on first touch.
     */
    if (madvise(addr, len, MADV_POPULATE_WRITE) == 0)
        return 0;
    if (errno != EINVAL)
        return -errno;
    for (size_t off = 0; off < len; off += page)
        ((volatile char *)addr)[off] = 0;
    return 0;
}

/*
 * A memfd of rounded bytes in pages of `page`, mapped shared and faulted in
 * (on node when node >= 0), unless sparse: then only a touch faults a page
 * in. On failure nothing is left behind.
 */
static int make_backing(struct npv_dma *dma, size_t size, size_t page, int node, bool sparse)
{
    unsigned flags = MFD_CLOEXEC;
    if (page == SZ_2M)
        flags |= MFD_HUGETLB | MFD_HUGE_2MB;
    else if (page == SZ_1G)
        flags |= MFD_HUGETLB | MFD_HUGE_1GB;
    if (size > SIZE_MAX - (page - 1))
        return -ENOMEM;
    size_t rounded = (size + page - 1) & ~(page - 1);
    struct hwloc_topology *topo = NULL;
    int ret;

    int fd = npv_fp_memfd_create(dma->ctx, "npuvfio-dma", flags);
    if (fd < 0)
        return -errno;
    if (ftruncate(fd, (off_t)rounded) != 0) {
        ret = -errno;
        goto err_close;
    }
    /*
     * A shared hugetlb mapping reserves its pages at mmap time, so a lack of
     * hugepages shows here as -ENOMEM rather than as SIGBUS on first touch.
     */
    int mflags = MAP_SHARED | (node < 0 && !sparse ? MAP_POPULATE : 0);
    void *va = npv_fp_mmap(dma->ctx, NULL, rounded, PROT_READ | PROT_WRITE, mflags, fd, 0);
    if (va == MAP_FAILED) {
        ret = -errno;
        goto err_close;
    }
    if (node >= 0) {
        ret = npv_numa_open(dma->ctx, &topo);
        if (ret < 0)
            goto err_unmap;
        /* The policy only steers pages faulted after it is set: bind first, then touch. */
        ret = npv_numa_bind(dma->ctx, topo, va, rounded, node);
        if (ret < 0)
            goto err_topo;
        ret = sparse ? 0 : prefault(va, rounded, page);
        if (ret < 0)
            goto err_topo;
        /* Sparse: no page is there yet to ask; the bind places every later one. */
        dma->numa_node = sparse ? node : npv_numa_node_of(topo, va, rounded);
        npv_numa_close(topo);
    } else {
        dma->numa_node = npv_numa_single_node(dma->ctx);
    }
    dma->fd = fd;
    dma->vaddr = va;
    dma->size = rounded;
    dma->page_size = page;
    return 0;
err_topo:
    npv_numa_close(topo);
err_unmap:
    munmap(va, rounded);
err_close:
    close(fd);
    return ret;
}

/*
 * One warning per context: a process allocating many buffers hears it once.
 * Only for a mapping into a kernel IOMMU: a vfio-user server (another
 * process) has no IOTLB and pins nothing, so there the small pages cost
 * nothing worth a warning.
 */
static void warn_small_pages(struct npv_ctx *ctx, size_t wanted)
{
    pthread_mutex_lock(&ctx->lock);
    bool first = !ctx->warned_small_pages;
    ctx->warned_small_pages = true;
    pthread_mutex_unlock(&ctx->lock);
    if (first)
        npv_warn(ctx,
                 "no free %zu MiB hugepages: DMA memory mapped into the IOMMU uses 4 KiB pages "
                 "(more IOTLB misses, more pins); reserve some with: npuvfio hugepages 64",
                 wanted >> 20);
}

static int alloc_backing(struct npv_dma *dma, size_t size, const struct npv_dma_opts *o)
{
    size_t page = SZ_4K;
    bool sparse = (o->flags & NPV_DMA_SPARSE) != 0;
    switch (o->page) {
    case NPV_DMA_PAGE_AUTO:
        /*
         * Below 1 MiB a 2 MiB page would mostly be waste. Sparse memory takes
         * 4 KiB pages: a hugetlb mapping reserves its whole pool share at mmap.
         */
        page = size >= SZ_1M && !sparse ? SZ_2M : SZ_4K;
        break;
    case NPV_DMA_PAGE_4K:
        break;
    case NPV_DMA_PAGE_2M:
        page = SZ_2M;
        break;
    case NPV_DMA_PAGE_1G:
        page = SZ_1G;
        break;
    }
    int ret = make_backing(dma, size, page, o->numa_node, sparse);
    if (ret == 0 || page == SZ_4K)
        return ret;
    if (o->require_page) {
        npv_err(dma->ctx, "no free %zu MiB hugepages for a DMA buffer: %s", page >> 20,
                npv_strerror(ret));
        return -ENOMEM;
    }
    if (page == SZ_1G) {
        npv_warn(dma->ctx, "no free 1 GiB hugepages (%s): trying 2 MiB pages", npv_strerror(ret));
        page = SZ_2M;
        ret = make_backing(dma, size, page, o->numa_node, sparse);
        if (ret == 0)
            return 0;
    }
    npv_debug(dma->ctx, "%zu MiB hugepages: %s: taking 4 KiB pages", page >> 20, npv_strerror(ret));
    ret = make_backing(dma, size, SZ_4K, o->numa_node, sparse);
    if (ret == 0)
        dma->wanted_page = page;
    return ret;
}

int npv_dma_alloc(struct npv_ctx *ctx, size_t size, const struct npv_dma_opts *opts,
                  struct npv_dma **out)
{
    struct npv_dma_opts o = {.page = NPV_DMA_PAGE_AUTO, .numa_node = -1};
    if (opts != NULL)
        o = *opts;
    if (ctx == NULL || out == NULL || size == 0 || o.numa_node < -1 ||
        (unsigned)o.page > NPV_DMA_PAGE_1G || (o.flags & ~(unsigned)NPV_DMA_SPARSE) != 0)
        return -EINVAL;
    /* A hugetlb mapping reserves every page at mmap: it cannot be sparse. */
    if ((o.flags & NPV_DMA_SPARSE) && o.page != NPV_DMA_PAGE_AUTO && o.page != NPV_DMA_PAGE_4K)
        return -EINVAL;
    if (size > SIZE_MAX - (SZ_4K - 1))
        return -ENOMEM;
    struct npv_dma *dma = npv_fp_calloc(ctx, 1, sizeof(*dma));
    if (dma == NULL)
        return -ENOMEM;
    dma->ctx = ctx;
    dma->fd = -1;
    dma->numa_node = -1;
    int ret = alloc_backing(dma, size, &o);
    if (ret < 0) {
        free(dma);
        return ret;
    }
    npv_live_add(ctx, NPV_LIVE_DMA_BUFFERS, 1);
    npv_live_add(ctx, NPV_LIVE_DMA_BYTES, (int64_t)dma->size);
    *out = dma;
    return 0;
}

/* ---- the caller's memory ---- */

/*
 * The IOMMU page the caller's memory allows: hugetlb memory (a hugetlbfs
 * file, a hugetlb memfd, anonymous MAP_HUGETLB) maps in its huge pages when
 * the range is aligned to them, so the IOVA is aligned alike.
 */
static size_t wrapped_page_size(int fd, const void *vaddr, size_t len, uint64_t fd_offset)
{
    size_t page = 0;
    struct statfs st;
    if (fd >= 0 && fstatfs(fd, &st) == 0 && st.f_type == (typeof(st.f_type))HUGETLBFS_MAGIC &&
        st.f_bsize > 0)
        page = (size_t)st.f_bsize;
    /*
     * smaps walks the page tables of every mapping before ours: asked only
     * when the range could sit on huge pages at all.
     */
    else if (fd < 0 && (((uintptr_t)vaddr | len) & (SZ_2M - 1)) == 0)
        page = npv_vma_page_size((uintptr_t)vaddr);
    if (page <= SZ_4K || (page & (page - 1)) != 0 ||
        (((uintptr_t)vaddr | len | (fd >= 0 ? fd_offset : 0)) & (page - 1)) != 0)
        return SZ_4K;
    return page;
}

/*
 * A caller's fd must be the file mapped at vaddr, at fd_offset: a server
 * would otherwise see other bytes than the CPU does, silently. Compared by
 * inode (the device number /proc/self/maps shows differs from fstat's on
 * btrfs), and skipped when /proc cannot be read.
 */
static int check_callers_file(struct npv_ctx *ctx, void *vaddr, size_t len, int fd,
                              uint64_t fd_offset)
{
    struct npv_vma_file vf;
    int ret = npv_vma_file_of((uintptr_t)vaddr, len, &vf);
    if (ret == -ENOENT) {
        npv_err(ctx, "caller memory %p (+0x%zx) is not all mapped", vaddr, len);
        return -EFAULT;
    }
    if (ret == -EXDEV) {
        npv_err(ctx,
                "caller memory %p (+0x%zx) spans mappings of different files (or of one "
                "file out of order): no single fd and offset describe it",
                vaddr, len);
        return -EINVAL;
    }
    if (ret < 0) {
        npv_debug(ctx, "/proc/self/maps: %s: fd %d not checked", npv_strerror(ret), fd);
        return 0;
    }
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -errno;
    if (vf.ino == 0 || !vf.shared || (uint64_t)st.st_ino != vf.ino || vf.offset != fd_offset) {
        npv_err(ctx,
                "fd %d at offset 0x%llx is not the memory at %p: that is %s%s at offset 0x%llx "
                "(inode %llu, fd's inode %llu); a device server would see other bytes",
                fd, (unsigned long long)fd_offset, vaddr, vf.shared ? "shared " : "private ",
                vf.ino != 0 ? vf.path : "anonymous memory", (unsigned long long)vf.offset,
                (unsigned long long)vf.ino, (unsigned long long)st.st_ino);
        return -EINVAL;
    }
    return 0;
}

/* The file behind a MAP_SHARED mapping at vaddr, if one can be had; -1 otherwise (logged). */
static int find_file(struct npv_ctx *ctx, void *vaddr, size_t len, uint64_t *fd_offset)
{
    struct npv_vma_file vf;
    int ret = npv_vma_file_of((uintptr_t)vaddr, len, &vf);
    const char *why = NULL;
    if (ret == -ENOENT)
        return -EFAULT;
    if (ret < 0)
        why = ret == -EXDEV ? "it spans mappings of different files" : npv_strerror(ret);
    else if (vf.ino == 0 || !vf.shared)
        why = vf.ino == 0 ? "anonymous memory" : "a private (copy-on-write) file mapping";
    if (why == NULL) {
        ret = npv_vma_file_open(&vf, vf.writable);
        if (ret >= 0) {
            *fd_offset = vf.offset;
            return ret;
        }
        why = vf.deleted ? "its file has no name to reopen (a memfd or unlinked file: name "
                           "its fd, or grant CAP_CHECKPOINT_RESTORE)"
                         : "its file could not be reopened by path";
    }
    npv_warn(ctx,
             "caller memory %p (+0x%zx): no file found (%s): a vfio-user device cannot "
             "reach it",
             vaddr, len, why);
    return -1;
}

int npv_dma_wrap(struct npv_ctx *ctx, void *vaddr, size_t len, int fd, uint64_t fd_offset,
                 unsigned flags, struct npv_dma **out)
{
    if (ctx == NULL || out == NULL || vaddr == NULL || len == 0 ||
        (flags & ~(unsigned)NPV_DMA_WRAP_FIND_FILE) != 0 ||
        (uintptr_t)vaddr > UINTPTR_MAX - (len - 1) || fd < -1)
        return -EINVAL;
    /*
     * The IOMMU maps whole pages: a buffer that began or ended inside one
     * would show the device whatever else lives in that page.
     */
    if (((uintptr_t)vaddr | len) & (SZ_4K - 1) || (fd >= 0 && (fd_offset & (SZ_4K - 1)) != 0)) {
        npv_err(ctx,
                "caller memory %p (+0x%zx, file offset 0x%llx) is not 4 KiB aligned: the "
                "IOMMU maps whole pages and would show the device the neighbours",
                vaddr, len, (unsigned long long)fd_offset);
        return -EINVAL;
    }
    int own_fd = -1;
    if (fd >= 0) {
        int ret = check_callers_file(ctx, vaddr, len, fd, fd_offset);
        if (ret < 0)
            return ret;
        /* Our own descriptor: the caller may close theirs while the buffer lives. */
        own_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (own_fd < 0)
            return -errno;
    } else if (flags & NPV_DMA_WRAP_FIND_FILE) {
        fd_offset = 0;
        own_fd = find_file(ctx, vaddr, len, &fd_offset);
        if (own_fd == -EFAULT) {
            npv_err(ctx, "caller memory %p (+0x%zx) is not all mapped", vaddr, len);
            return -EFAULT;
        }
    }
    struct npv_dma *dma = npv_fp_calloc(ctx, 1, sizeof(*dma));
    if (dma == NULL) {
        if (own_fd >= 0)
            close(own_fd);
        return -ENOMEM;
    }
    dma->ctx = ctx;
    dma->vaddr = vaddr;
    dma->size = len;
    dma->wrapped = true;
    dma->fd = own_fd;
    dma->fd_offset = own_fd >= 0 ? fd_offset : 0;
    dma->page_size = wrapped_page_size(dma->fd, vaddr, len, dma->fd_offset);
    dma->numa_node = npv_numa_single_node(ctx);
    npv_live_add(ctx, NPV_LIVE_DMA_BUFFERS, 1);
    npv_live_add(ctx, NPV_LIVE_DMA_BYTES, (int64_t)dma->size);
    *out = dma;
    return 0;
}

void npv_dma_free(struct npv_dma *dma)
{
    if (dma == NULL)
        return;
    /*
     * One attempt each: a mapping whose unmap fails stays quarantined in its
     * domain (logged there), which keeps the IOVA from being handed out.
     */
    while (dma->nr_maps > 0) {
        struct dma_mapping *m = &dma->maps[dma->nr_maps - 1];
        npv_domain_unmap(m->dom, m->iova);
        npv_domain_put(m->dom);
        dma->nr_maps--;
    }
    free(dma->maps);
    if (!dma->wrapped)
        munmap(dma->vaddr, dma->size);
    if (dma->fd >= 0)
        close(dma->fd);
    npv_live_add(dma->ctx, NPV_LIVE_DMA_BUFFERS, -1);
    npv_live_add(dma->ctx, NPV_LIVE_DMA_BYTES, -(int64_t)dma->size);
    free(dma);
}

void *npv_dma_vaddr(const struct npv_dma *dma)
{
    return dma->vaddr;
}

size_t npv_dma_size(const struct npv_dma *dma)
{
    return dma->size;
}

size_t npv_dma_page_size(const struct npv_dma *dma)
{
    return dma->page_size;
}

int npv_dma_fd(const struct npv_dma *dma)
{
    return dma->fd;
}

int npv_dma_numa_node(const struct npv_dma *dma)
{
    return dma->numa_node;
}

/* ---- mappings ---- */

static struct dma_mapping *find_mapping(const struct npv_dma *dma, const struct npv_domain *dom)
{
    for (size_t i = 0; i < dma->nr_maps; i++)
        if (dma->maps[i].dom == dom)
            return &dma->maps[i];
    return NULL;
}

static int map_common(struct npv_dma *dma, struct npv_domain *dom, unsigned prot, bool fixed,
                      npv_iova_t *iova)
{
    if (dma == NULL || dom == NULL || prot == 0 || (prot & ~(unsigned)NPV_DMA_RW) != 0)
        return -EINVAL;
    /* The smallest IOMMU page is 4 KiB: a fixed IOVA must sit on one. */
    if (fixed && (*iova & (SZ_4K - 1)) != 0)
        return -EINVAL;
    if (find_mapping(dma, dom) != NULL)
        return -EEXIST;
    struct dma_mapping *maps =
        npv_fp_realloc(dma->ctx, dma->maps, (dma->nr_maps + 1) * sizeof(*maps));
    if (maps == NULL)
        return -ENOMEM;
    dma->maps = maps;
    struct npv_mapping m = {
        .iova = fixed ? *iova : 0,
        .len = dma->size,
        .vaddr = dma->vaddr,
        .fd = dma->fd,
        .fd_offset = dma->fd_offset,
        .prot = prot,
    };
    int ret = fixed ? npv_domain_map_at(dom, &m) : npv_domain_map(dom, &m, dma->page_size);
    if (ret < 0)
        return ret;
    maps[dma->nr_maps++] = (struct dma_mapping){npv_domain_get(dom), m.iova};
    *iova = m.iova;
    /* A kernel IOMMU holds the domain when its coherence is known (domain.c, update_coherent). */
    if (dma->wanted_page != 0 && npv_domain_coherent(dom) >= 0)
        warn_small_pages(dma->ctx, dma->wanted_page);
    return 0;
}

int npv_dma_map(struct npv_dma *dma, struct npv_domain *dom, unsigned prot, npv_iova_t *iova)
{
    npv_iova_t tmp = 0;
    int ret = map_common(dma, dom, prot, false, &tmp);
    if (ret == 0)
        npv_stats_ctx_dma_map(dma->ctx, dma->size);
    if (ret == 0 && iova != NULL)
        *iova = tmp;
    return ret;
}

int npv_dma_map_at(struct npv_dma *dma, struct npv_domain *dom, npv_iova_t iova, unsigned prot)
{
    int ret = map_common(dma, dom, prot, true, &iova);
    if (ret == 0)
        npv_stats_ctx_dma_map(dma->ctx, dma->size);
    return ret;
}

int npv_dma_unmap(struct npv_dma *dma, struct npv_domain *dom)
{
    if (dma == NULL || dom == NULL)
        return -EINVAL;
    struct dma_mapping *m = find_mapping(dma, dom);
    if (m == NULL)
        return -ENOENT;
    int ret = npv_domain_unmap(dom, m->iova);
    /*
     * A sink's failure (logged by domain.c) leaves the IOVA quarantined: the
     * buffer keeps the mapping so that a retry reaches the same range.
     */
    if (ret < 0 && ret != -ENOENT)
        return ret;
    *m = dma->maps[--dma->nr_maps];
    npv_domain_put(dom);
    return 0;
}

int npv_dma_iova(const struct npv_dma *dma, const struct npv_domain *dom, npv_iova_t *iova)
{
    if (dma == NULL || dom == NULL || iova == NULL)
        return -EINVAL;
    const struct dma_mapping *m = find_mapping(dma, dom);
    if (m == NULL)
        return -ENOENT;
    *iova = m->iova;
    return 0;
}

/* ---- cache maintenance ---- */

static bool needs_sync(const struct npv_dma *dma)
{
    for (size_t i = 0; i < dma->nr_maps; i++)
        if (npv_domain_coherent(dma->maps[i].dom) == 0)
            return true;
    return false;
}

#if defined(__aarch64__)
/* CTR_EL0.DminLine: log2 of the smallest D-cache line in 4-byte words. EL0 may read it. */
static size_t dcache_line(void)
{
    uint64_t ctr;
    __asm__ volatile("mrs %0, ctr_el0" : "=r"(ctr));
    return (size_t)4 << ((ctr >> 16) & 0xf);
}

/*
 * By virtual address to the point of coherency. EL0 may clean (DC CVAC) and
 * clean+invalidate (DC CIVAC) but not invalidate alone, so the CPU-side sync
 * uses CIVAC. The DSB makes the maintenance complete before the doorbell or
 * before the CPU reads the buffer.
 */
static void dcache_maintain(void *addr, size_t len, bool invalidate)
{
    size_t line = dcache_line();
    uintptr_t p = (uintptr_t)addr & ~(uintptr_t)(line - 1);
    uintptr_t end = (uintptr_t)addr + len;
    for (; p < end; p += line) {
        if (invalidate)
            __asm__ volatile("dc civac, %0" : : "r"(p) : "memory");
        else
            __asm__ volatile("dc cvac, %0" : : "r"(p) : "memory");
    }
    __asm__ volatile("dsb sy" : : : "memory");
}
#endif

static bool clamp(const struct npv_dma *dma, size_t off, size_t *len)
{
    if (dma == NULL || off >= dma->size || *len == 0)
        return false;
    if (*len > dma->size - off)
        *len = dma->size - off;
    return true;
}

void npv_dma_sync_for_device(struct npv_dma *dma, size_t off, size_t len)
{
    if (!clamp(dma, off, &len) || !needs_sync(dma))
        return;
#if defined(__aarch64__)
    dcache_maintain((char *)dma->vaddr + off, len, false);
#else
    /*
     * x86 DMA snoops the caches; a non-coherent domain there means no-snoop
     * TLPs, which dev.c turns off at the device.
     */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

void npv_dma_sync_for_cpu(struct npv_dma *dma, size_t off, size_t len)
{
    if (!clamp(dma, off, &len) || !needs_sync(dma))
        return;
#if defined(__aarch64__)
    dcache_maintain((char *)dma->vaddr + off, len, true);
#else
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

/* SPDX-License-Identifier: MIT */
/*
 * npv_bar: a mapped BAR (or any region) of a device.
 *
 * The region's address range is reserved in our address space; the areas
 * the transport lets us mmap (the whole BAR, or the sparse areas around an
 * MSI-X table, or a vfio-user server's shared pages) are mapped there, and
 * every other page is reached through the transport (pread/pwrite or
 * REGION_READ/WRITE messages). The accessors below pick the way per page.
 *
 * Ordering the accessors give:
 * - npv_bar_readN / npv_bar_writeN: one access of exactly N bits (a 64-bit
 *   access is a single instruction on a mapped page and a single 8-byte
 *   message on a trapped one). Accesses to the same BAR are seen by the
 *   device in program order (uncached device memory: x86 UC, arm64 Device-nGnRE).
 *   On a page that is host memory served by a device thread or process
 *   (vfio-user, npv_bar_wrap) a full fence after each store keeps that
 *   promise: a store is seen before any later load of the same thread, so
 *   "acknowledge, then check for new work" loses no event. They do NOT
 *   order earlier stores to DMA memory.
 * - npv_bar_write32_release / npv_bar_write64_release: first make every
 *   earlier store to DMA memory visible to the device, then write. This is
 *   the doorbell write: on x86 a compiler barrier suffices (stores are not
 *   reordered with other stores, UC writes drain the write buffer); on arm64
 *   it is `dmb oshst` before the store.
 *
 * A read of a trapped page that fails returns all ones, as a PCI read of a
 * dead device does; npv_bar_read() reports the error instead.
 *
 * Posted writes: a write to a trapped page may return before the device
 * carried it out (vfio-user with "write_multiple", see npv_dev_flush); its
 * failure is reported by the next synchronous call. A trapped read, and any
 * mapped access while posted writes are outstanding, first waits for them:
 * accesses to one BAR still reach the device in program order.
 *
 * Thread-safety: accessors are lock-free; map/unmap are not concurrent with them.
 */
#ifndef NPUVFIO_BAR_H
#define NPUVFIO_BAR_H

#include <npuvfio/common.h>
#include <npuvfio/dev.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NPV_BAR_PAGE_SHIFT 12

/* npv_bar.direct[page]: how a page is reached. */
enum {
    NPV_BAR_TRAPPED = 0,
    /* Device memory (a vfio-pci BAR, uncached): the CPU keeps MMIO accesses in program order. */
    NPV_BAR_DIRECT_DEVICE = 1,
    /*
     * Host memory a device thread or process serves (vfio-user's shared
     * areas, npv_bar_wrap): cacheable, where a store may pass a later load
     * (x86 store buffer, arm64). A full fence follows each store so that an
     * acknowledge is seen by the device before the read that checks for
     * new work, as on PCIe.
     */
    NPV_BAR_DIRECT_SHARED = 2,
};

/* Read-only for users; the fields exist so the accessors can be inline. */
struct npv_bar {
    volatile uint8_t *base; /* start of the reserved range */
    uint64_t size;          /* region size */
    const uint8_t *direct;  /* per 4 KiB page: NPV_BAR_TRAPPED or NPV_BAR_DIRECT_* */
    struct npv_dev *dev;
    uint32_t index;
    /* Both NULL in a bar not from npv_bar_map (a test's fake): nothing posted, nothing counted. */
    const uint32_t *posted; /* nonzero: posted writes outstanding on dev */
    uint64_t *mapped_count; /* dev's [0] mapped reads, [1] mapped writes (npv_dev_stats) */
};

/* Relaxed load and store, not a locked add: exact from one thread, cheap on the hot path. */
static inline void npv_bar__count(const struct npv_bar *bar, int i)
{
    uint64_t *c = bar->mapped_count;
    if (c != NULL)
        __atomic_store_n(&c[i], __atomic_load_n(&c[i], __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

/* Wait until the posted writes outstanding on bar's device were carried out. */
NPV_API void npv_bar__order(const struct npv_bar *bar);

/* -EINVAL for a region that is not readable, -ENOMEM. */
NPV_API int npv_bar_map(struct npv_dev *dev, uint32_t index, struct npv_bar **out);
/*
 * Wrap size bytes of the caller's memory at mem (8-byte aligned) as a BAR:
 * every page direct, the accessors are plain loads and stores to it. For a
 * device played by a thread of the same process (a test, a model): the ring
 * engine's doorbell (npv_ring_config.db_bar) then lands in memory the caller
 * reads. The memory stays the caller's and must outlive the BAR;
 * npv_bar_unmap releases only the wrapper. dev is NULL and index UINT32_MAX.
 * -EINVAL (NULL, size 0, misaligned), -ENOMEM. A misaligned checked access
 * (npv_bar_read/npv_bar_write) to a wrapped BAR returns -EINVAL.
 */
NPV_API int npv_bar_wrap(void *mem, uint64_t size, struct npv_bar **out);
/* NULL is a no-op. */
NPV_API void npv_bar_unmap(struct npv_bar *bar);

/* Checked access of width 1, 2, 4 or 8 bytes. -ERANGE outside the BAR, -EINVAL bad width. */
NPV_API int npv_bar_read(const struct npv_bar *bar, uint64_t off, unsigned width, uint64_t *val);
NPV_API int npv_bar_write(const struct npv_bar *bar, uint64_t off, unsigned width, uint64_t val);
/* Whether [off, off+len) is reached by plain loads and stores (mmapped). */
NPV_API int npv_bar_is_direct(const struct npv_bar *bar, uint64_t off, uint64_t len);
/*
 * Whether an aligned 8-byte access at off reaches the device as ONE access:
 * 1 when mapped, or trapped through vfio-user (a message carries the whole
 * access), or through a kernel whose vfio-pci does 8-byte region accesses
 * (Linux 6.14 on x86, 6.10 elsewhere; NPUVFIO_VFIO_RW64=whole|split
 * overrides); 0 when the kernel would split it into two 4-byte accesses.
 * -EINVAL for a misaligned off or NULL bar, -ERANGE outside the BAR.
 */
NPV_API int npv_bar_whole64(const struct npv_bar *bar, uint64_t off);

static inline void npv_dma_wmb(void)
{
#if defined(__aarch64__)
    __asm__ __volatile__("dmb oshst" ::: "memory");
#else
    __asm__ __volatile__("" ::: "memory");
#endif
}

static inline int npv_bar__direct(const struct npv_bar *bar, uint64_t off, unsigned width)
{
    return off <= bar->size && width <= bar->size - off && (off & (width - 1)) == 0 &&
           bar->direct[off >> NPV_BAR_PAGE_SHIFT];
}

/* After a store to a NPV_BAR_DIRECT_SHARED page: no later load passes it. */
static inline void npv_bar__after_store(const struct npv_bar *bar, uint64_t off)
{
    if (bar->direct[off >> NPV_BAR_PAGE_SHIFT] == NPV_BAR_DIRECT_SHARED)
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* A mapped access after posted writes waits for them, as a trapped one does. */
static inline void npv_bar__ordered(const struct npv_bar *bar)
{
    if (bar->posted != NULL && __atomic_load_n(bar->posted, __ATOMIC_ACQUIRE) != 0)
        npv_bar__order(bar);
}

#define NPV_BAR_ACCESSORS(bits)                                                                    \
    static inline uint##bits##_t npv_bar_read##bits(const struct npv_bar *bar, uint64_t off)       \
    {                                                                                              \
        if (npv_bar__direct(bar, off, (bits) / 8)) {                                               \
            npv_bar__ordered(bar);                                                                 \
            npv_bar__count(bar, 0);                                                                \
            return *(volatile uint##bits##_t *)(bar->base + off);                                  \
        }                                                                                          \
        uint64_t v;                                                                                \
        if (npv_bar_read(bar, off, (bits) / 8, &v) < 0)                                            \
            return (uint##bits##_t) ~(uint##bits##_t)0;                                            \
        return (uint##bits##_t)v;                                                                  \
    }                                                                                              \
    static inline void npv_bar_write##bits(const struct npv_bar *bar, uint64_t off,                \
                                           uint##bits##_t val)                                     \
    {                                                                                              \
        if (npv_bar__direct(bar, off, (bits) / 8)) {                                               \
            npv_bar__ordered(bar);                                                                 \
            npv_bar__count(bar, 1);                                                                \
            *(volatile uint##bits##_t *)(bar->base + off) = val;                                   \
            npv_bar__after_store(bar, off);                                                        \
        } else                                                                                     \
            (void)npv_bar_write(bar, off, (bits) / 8, val);                                        \
    }

NPV_BAR_ACCESSORS(8)
NPV_BAR_ACCESSORS(16)
NPV_BAR_ACCESSORS(32)
NPV_BAR_ACCESSORS(64)
#undef NPV_BAR_ACCESSORS

/*
 * ThreadSanitizer does not model fences: in its builds a direct doorbell is a
 * release store (the same instruction on x86), so a device thread that reads
 * the doorbell with acquire is seen to be ordered after the descriptors.
 */
#if defined(__SANITIZE_THREAD__)
#define NPV_BAR__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NPV_BAR__TSAN 1
#endif
#endif

static inline void npv_bar_write32_release(const struct npv_bar *bar, uint64_t off, uint32_t val)
{
#ifdef NPV_BAR__TSAN
    if (npv_bar__direct(bar, off, 4)) {
        npv_bar__ordered(bar);
        npv_bar__count(bar, 1);
        __atomic_store_n((volatile uint32_t *)(bar->base + off), val, __ATOMIC_RELEASE);
        npv_bar__after_store(bar, off);
        return;
    }
#endif
    npv_dma_wmb();
    npv_bar_write32(bar, off, val);
}

static inline void npv_bar_write64_release(const struct npv_bar *bar, uint64_t off, uint64_t val)
{
#ifdef NPV_BAR__TSAN
    if (npv_bar__direct(bar, off, 8)) {
        npv_bar__ordered(bar);
        npv_bar__count(bar, 1);
        __atomic_store_n((volatile uint64_t *)(bar->base + off), val, __ATOMIC_RELEASE);
        npv_bar__after_store(bar, off);
        return;
    }
#endif
    npv_dma_wmb();
    npv_bar_write64(bar, off, val);
}

#ifdef __cplusplus
}
#endif

#endif

/* SPDX-License-Identifier: MIT */
/*
 * A non-coherent device's view of host memory, made observable on a coherent
 * build machine (the rknpu_noncoherent and aicore_noncoherent suites). A
 * suite compiles dma_shadow.c in and links with
 *   -Wl,--wrap=npv_dma_alloc -Wl,--wrap=npv_dma_free
 *   -Wl,--wrap=npv_dma_sync_for_device -Wl,--wrap=npv_dma_sync_for_cpu
 * (the libraries are linked statically, so --wrap redirects every call from
 * the drivers' objects).
 *
 * While watching, every npv_dma allocated gets a shadow: its "device view",
 * zero at allocation (fresh memory, as the device sees it) and copied from
 * memory at every sync_for_device, as a non-coherent device would see the
 * memory once a clean reached the point of coherency.
 *
 * Device writes: dma_shadow_device_wrote, called by the suite when the
 * device is known to have written a range (a run's end), makes the device's
 * bytes the range's device view and puts the CPU's cached bytes back in
 * memory until a sync_for_cpu covers them (then the device's bytes return)
 * or a sync_for_device does (the CPU's bytes are then what the device sees):
 * a read without an invalidate sees stale bytes.
 *
 * Single-threaded: the suite's driver runs on the test's thread and the
 * device model in a child process.
 */
#ifndef NPV_TEST_DMA_SHADOW_H
#define NPV_TEST_DMA_SHADOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <npuvfio/dma.h>
#include <npuvfio/domain.h>

struct dma_shadow {
    struct npv_dma *dma;
    size_t size;
    uint8_t *view;  /* the device's view of each byte */
    uint8_t *dev;   /* what the device wrote, where `stale` is set */
    uint8_t *stale; /* 1: the CPU still sees its cached byte, not the device's */
};

/* Shadow buffers allocated from now on (or stop), and clear the failure note. */
void dma_shadow_watch(bool on);
/*
 * Called after each sync_for_cpu a shadowed buffer gets (the suite's own
 * bookkeeping of invalidates), and before a shadowed buffer is freed; NULL
 * for none.
 */
void dma_shadow_set_hooks(void (*on_cpu_sync)(struct npv_dma *dma, size_t off, size_t len),
                          void (*on_free)(struct dma_shadow *s));

struct dma_shadow *dma_shadow_of(const struct npv_dma *dma);
/* The shadow holding [iova, iova + len) of dom, and the range's offset in it; NULL if none. */
struct dma_shadow *dma_shadow_at(struct npv_domain *dom, uint64_t iova, uint64_t len, size_t *off);
uint8_t *dma_shadow_mem(const struct dma_shadow *s);
/* The device's view of [off, off + len) equals memory (what the CPU wrote). */
bool dma_shadow_device_sees(const struct dma_shadow *s, size_t off, size_t len);
/* The device wrote [off, off + len): its view; memory back to cpu_cached until invalidated. */
void dma_shadow_device_wrote(struct dma_shadow *s, size_t off, size_t len,
                             const uint8_t *cpu_cached);
/* The device wrote [off, off + len) of a region the driver reads only after invalidating. */
void dma_shadow_device_owns(struct dma_shadow *s, size_t off, size_t len);

/* The first failure noted since dma_shadow_watch(true): "" when none. */
void dma_shadow_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *dma_shadow_failure(void);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * A seam for tests: the ring's cache maintenance made observable. The order
 * of "zero and clean the status block" against "the reset callback enables
 * the device" decides whether a non-coherent device's first completion
 * survives; on x86 the maintenance compiles to nothing, so without this seam
 * no test on the build machine could see that order.
 */
#ifndef NPV_RING_INTERNAL_H
#define NPV_RING_INTERNAL_H

#include <stddef.h>

#include <npuvfio/ring.h>

struct npv_ring_sync_hook {
    /* Called instead of npv_dma_sync_for_device / npv_dma_sync_for_cpu. */
    void (*for_device)(void *arg, struct npv_dma *dma, size_t off, size_t len);
    void (*for_cpu)(void *arg, struct npv_dma *dma, size_t off, size_t len);
    void *arg;
};

/* Route the ring's cache maintenance through hook (NULL: the real calls). */
void npv_ring_set_sync_hook(struct npv_ring *r, const struct npv_ring_sync_hook *hook);

#endif

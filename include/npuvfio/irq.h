/* SPDX-License-Identifier: MIT */
/*
 * npv_irq: a device's interrupt vectors delivered to eventfds, and waits on
 * many vectors of many devices with one deadline (through io_uring).
 *
 * Thread-safety: one npv_irq is used by one thread at a time; a waitset
 * likewise. Different objects are independent.
 */
#ifndef NPUVFIO_IRQ_H
#define NPUVFIO_IRQ_H

#include <npuvfio/common.h>
#include <npuvfio/dev.h>

#ifdef __cplusplus
extern "C" {
#endif

/* VFIO's PCI IRQ indexes. */
enum npv_irq_type {
    NPV_IRQ_INTX = 0,
    NPV_IRQ_MSI = 1,
    NPV_IRQ_MSIX = 2,
    NPV_IRQ_ERR = 3,
    NPV_IRQ_REQ = 4,
};

/*
 * A platform device's IRQ index n: its n-th interrupt line (device-tree
 * order), one vector. A level-triggered line comes back masked after each
 * interrupt (VFIO's AUTOMASKED): npv_irq_unmask() once the device's status
 * is cleared, or the next interrupt never arrives.
 */
#define NPV_IRQ_PLATFORM(n) ((enum npv_irq_type)(n))

struct npv_irq;

/*
 * Route vectors [0, nvec) of type to new eventfds (SET_IRQS, ACTION_TRIGGER).
 * -EINVAL when the device has fewer vectors.
 */
NPV_API int npv_irq_enable(struct npv_dev *dev, enum npv_irq_type type, uint32_t nvec,
                           struct npv_irq **out);
/* Disable the vectors at the device and close the eventfds. NULL is a no-op. */
NPV_API void npv_irq_disable(struct npv_irq *irq);

NPV_API uint32_t npv_irq_count(const struct npv_irq *irq);
NPV_API int npv_irq_fd(const struct npv_irq *irq, uint32_t vec);
NPV_API int npv_irq_mask(struct npv_irq *irq, uint32_t vec);
NPV_API int npv_irq_unmask(struct npv_irq *irq, uint32_t vec);

/*
 * Wait up to timeout_ns for vector vec. Returns the number of interrupts
 * counted since the last wait (>= 1), or -ETIMEDOUT.
 */
NPV_API int64_t npv_irq_wait(struct npv_irq *irq, uint32_t vec, uint64_t timeout_ns);

/* A set of vectors, possibly of many devices, waited on together. */
struct npv_irq_waitset;

NPV_API int npv_irq_waitset_new(struct npv_ctx *ctx, unsigned max_entries,
                                struct npv_irq_waitset **out);
NPV_API void npv_irq_waitset_free(struct npv_irq_waitset *ws);
/* Add vector vec of irq; cookie is what a wait reports when it fires. */
NPV_API int npv_irq_waitset_add(struct npv_irq_waitset *ws, struct npv_irq *irq, uint32_t vec,
                                uint64_t cookie);
/*
 * Wait until at least one vector fired or timeout_ns passed. Writes up to max
 * cookies of fired vectors (their counters are consumed) and returns how
 * many, or -ETIMEDOUT.
 */
NPV_API int npv_irq_waitset_wait(struct npv_irq_waitset *ws, uint64_t timeout_ns, uint64_t *cookies,
                                 unsigned max);

#ifdef __cplusplus
}
#endif

#endif

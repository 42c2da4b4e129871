/* SPDX-License-Identifier: MIT */
/* Eventfd helpers shared by the vector waits (irq.c) and the wait sets (irq_waitset.c). */
#ifndef NPV_IRQ_INTERNAL_H
#define NPV_IRQ_INTERNAL_H

#include <stdint.h>

#include <npuvfio/irq.h>

/* Read and reset a non-blocking eventfd's counter: the count, -EAGAIN when zero, or -errno. */
int64_t npv_eventfd_consume(int fd);
/* Wait up to timeout_ns for the counter to become nonzero and consume it; -ETIMEDOUT. */
int64_t npv_eventfd_wait(int fd, uint64_t timeout_ns);

/* The device an npv_irq belongs to. */
struct npv_dev *npv_irq_dev(const struct npv_irq *irq);

/* Add a plain eventfd to a wait set (what npv_irq_waitset_add does with a vector's fd). */
int npv_irq_waitset_add_fd(struct npv_irq_waitset *ws, int fd, uint64_t cookie);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * An npv_irq without a device: one MSI-X vector routed to an eventfd by a
 * transport that accepts SET_IRQS and does nothing else. The fake devices
 * write that eventfd as a device raises its MSI.
 */
#ifndef NPV_TEST_FAKE_IRQ_H
#define NPV_TEST_FAKE_IRQ_H

#include <npuvfio/irq.h>

struct fake_irq {
    struct npv_dev *dev;
    struct npv_irq *irq;
};

/* 0 or a negative errno. */
int fake_irq_open(struct npv_ctx *ctx, struct fake_irq *f);
void fake_irq_close(struct fake_irq *f);

#endif

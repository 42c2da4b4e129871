/* SPDX-License-Identifier: MIT */
/*
 * Sleeping on the cores' interrupts (NPV_RKNPU_IRQ). Each core has one line:
 * on the SoC a level-triggered GIC line per core, which vfio-platform hands
 * out as IRQ index c and masks after every interrupt until it is unmasked
 * (the core's status must be cleared first, or the line fires again at
 * once); on the PCI-shaped model, MSI-X vector c. The interrupt only wakes
 * the waiter: completion is always decided from the status registers, so a
 * lost or spurious interrupt costs a look, never a wrong result.
 */
#include <errno.h>
#include <npuvfio/dev.h>
#include <npuvfio/irq.h>

#include "driver_internal.h"

int rknpu_irq_init(struct npv_rknpu *npu)
{
    if (npu->cfg.completion == NPV_RKNPU_POLL)
        return 0;
    struct npv_dev_info info;
    int r = npv_dev_info(npu->dev, &info);
    if (r < 0)
        return r;
    npu->irq_level = (info.flags & NPV_DEV_FLAG_PLATFORM) != 0;
    if (npu->irq_level) {
        for (unsigned c = 0; c < npu->nr_cores && r == 0; c++) {
            r = npv_irq_enable(npu->dev, NPV_IRQ_PLATFORM(c), 1, &npu->irqs[c]);
            npu->cores[c].irq = npu->irqs[c];
            npu->cores[c].irq_vec = 0;
        }
    } else {
        r = npv_irq_enable(npu->dev, NPV_IRQ_MSIX, npu->nr_cores, &npu->irqs[0]);
        for (unsigned c = 0; c < npu->nr_cores && r == 0; c++) {
            npu->cores[c].irq = npu->irqs[0];
            npu->cores[c].irq_vec = c;
        }
    }
    if (r == 0)
        r = npv_irq_waitset_new(npu->ctx, npu->nr_cores, &npu->waitset);
    for (unsigned c = 0; c < npu->nr_cores && r == 0; c++)
        r = npv_irq_waitset_add(npu->waitset, npu->cores[c].irq, npu->cores[c].irq_vec, c);
    if (r < 0)
        rknpu_irq_fini(npu);
    return r;
}

void rknpu_irq_fini(struct npv_rknpu *npu)
{
    npv_irq_waitset_free(npu->waitset);
    npu->waitset = NULL;
    for (unsigned c = 0; c < NPV_RKNPU_NUM_CORES; c++) {
        npv_irq_disable(npu->irqs[c]);
        npu->irqs[c] = NULL;
        npu->cores[c].irq = NULL;
    }
}

/* The earliest deadline of a running part, 0 when none runs. */
static uint64_t next_deadline(const struct npv_rknpu *npu)
{
    uint64_t first = 0;
    for (unsigned c = 0; c < npu->nr_cores; c++) {
        uint64_t d = npv_inflight_next_deadline(npu->cores[c].inflight);
        if (d != 0 && (first == 0 || d < first))
            first = d;
    }
    return first;
}

void rknpu_irq_sleep(struct npv_rknpu *npu, uint64_t until_ns)
{
    uint64_t now = rknpu_now_ns();
    uint64_t first = next_deadline(npu);
    if (first != 0 && first < until_ns)
        until_ns = first;
    /* A queued job's budget passes without any interrupt: the next poll fails it. */
    first = rknpu_next_budget(npu);
    if (first != 0 && first < until_ns)
        until_ns = first;
    if (until_ns <= now)
        return;
    uint64_t fired[NPV_RKNPU_NUM_CORES];
    int n = npv_irq_waitset_wait(npu->waitset, until_ns - now, fired, NPV_RKNPU_NUM_CORES);
    /* A level line stays masked until its core's status is cleared: the next poll does that. */
    for (int i = 0; npu->irq_level && i < n; i++)
        npu->cores[fired[i]].irq_pending_unmask = true;
}

void rknpu_irq_rearm(struct npv_rknpu *npu)
{
    for (unsigned c = 0; c < npu->nr_cores; c++)
        if (npu->cores[c].irq_pending_unmask) {
            npu->cores[c].irq_pending_unmask = false;
            npv_irq_unmask(npu->cores[c].irq, npu->cores[c].irq_vec);
        }
}

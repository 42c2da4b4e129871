/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>

#include "dev_internal.h"
#include "fake_irq.h"

static int f_get_info(struct npv_dev *dev, struct npv_dev_info *info)
{
    (void)dev;
    memset(info, 0, sizeof(*info));
    info->num_irqs = NPV_IRQ_MSIX + 1;
    return 0;
}

static int f_irq_info(struct npv_dev *dev, uint32_t index, struct npv_irq_info *info)
{
    (void)dev;
    info->index = index;
    info->flags = NPV_IRQ_INFO_EVENTFD;
    info->count = index == NPV_IRQ_MSIX ? 1 : 0;
    return 0;
}

static int f_set_irqs(struct npv_dev *dev, uint32_t index, uint32_t flags, uint32_t start,
                      uint32_t count, const int32_t *fds)
{
    (void)dev;
    (void)index;
    (void)flags;
    (void)start;
    (void)count;
    (void)fds;
    return 0;
}

static void f_close(struct npv_dev *dev)
{
    (void)dev;
}

static const struct npv_dev_ops fake_irq_ops = {
    .get_info = f_get_info,
    .irq_info = f_irq_info,
    .set_irqs = f_set_irqs,
    .close = f_close,
};

int fake_irq_open(struct npv_ctx *ctx, struct fake_irq *f)
{
    f->irq = NULL;
    f->dev = npv_dev_alloc(ctx, &fake_irq_ops, NPV_TRANSPORT_VFIO_USER, "fake-irq", NULL);
    if (f->dev == NULL)
        return -ENOMEM;
    int rc = npv_irq_enable(f->dev, NPV_IRQ_MSIX, 1, &f->irq);
    if (rc < 0) {
        npv_dev_close(f->dev);
        f->dev = NULL;
    }
    return rc;
}

void fake_irq_close(struct fake_irq *f)
{
    npv_irq_disable(f->irq);
    npv_dev_close(f->dev);
    f->irq = NULL;
    f->dev = NULL;
}

/* SPDX-License-Identifier: MIT */
/*
 * npv_irq: interrupt vectors routed to eventfds (VFIO_DEVICE_SET_IRQS or its
 * vfio-user message), and bounded waits on them.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <npuvfio/irq.h>

#include "ctx_internal.h"
#include "deadline.h"
#include "dev_internal.h"
#include "failpoint_internal.h"
#include "irq_internal.h"

struct npv_irq {
    struct npv_dev *dev;
    enum npv_irq_type type;
    uint32_t nvec;
    int fds[];
};

int64_t npv_eventfd_consume(int fd)
{
    uint64_t v;
    for (;;) {
        ssize_t n = read(fd, &v, sizeof(v));
        if (n == (ssize_t)sizeof(v))
            return v > INT64_MAX ? INT64_MAX : (int64_t)v;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        return -EIO;
    }
}

static int set_irqs(struct npv_dev *dev, uint32_t index, uint32_t flags, uint32_t start,
                    uint32_t count, const int32_t *fds)
{
    pthread_mutex_lock(&dev->lock);
    int ret = dev->ops->set_irqs(dev, index, flags, start, count, fds);
    pthread_mutex_unlock(&dev->lock);
    return ret;
}

int npv_irq_enable(struct npv_dev *dev, enum npv_irq_type type, uint32_t nvec, struct npv_irq **out)
{
    if (dev == NULL || out == NULL || nvec == 0 || nvec > 2048)
        return -EINVAL;
    struct npv_irq_info info;
    int ret = npv_dev_irq_info(dev, (uint32_t)type, &info);
    if (ret < 0)
        return ret;
    if (info.count < nvec || !(info.flags & NPV_IRQ_INFO_EVENTFD))
        return -EINVAL;
    struct npv_irq *irq = npv_fp_calloc(dev->ctx, 1, sizeof(*irq) + nvec * sizeof(int));
    if (irq == NULL)
        return -ENOMEM;
    irq->dev = dev;
    irq->type = type;
    uint32_t made = 0;
    for (; made < nvec; made++) {
        irq->fds[made] = npv_fp_eventfd(dev->ctx, 0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (irq->fds[made] < 0) {
            ret = -errno;
            goto err_close;
        }
    }
    irq->nvec = nvec;
    ret = set_irqs(dev, (uint32_t)type, NPV_IRQ_SET_DATA_EVENTFD | NPV_IRQ_SET_ACTION_TRIGGER, 0,
                   nvec, irq->fds);
    if (ret < 0) {
        npv_err(dev->ctx, "%s: route %u vectors of IRQ index %u to eventfds: %s", dev->name, nvec,
                (unsigned)type, npv_strerror(ret));
        goto err_close;
    }
    *out = irq;
    return 0;

err_close:
    while (made > 0)
        close(irq->fds[--made]);
    free(irq);
    return ret;
}

void npv_irq_disable(struct npv_irq *irq)
{
    if (irq == NULL)
        return;
    int ret = set_irqs(irq->dev, (uint32_t)irq->type,
                       NPV_IRQ_SET_DATA_NONE | NPV_IRQ_SET_ACTION_TRIGGER, 0, 0, NULL);
    if (ret < 0)
        npv_debug(irq->dev->ctx, "%s: disable IRQ index %u: %s", irq->dev->name,
                  (unsigned)irq->type, npv_strerror(ret));
    for (uint32_t i = 0; i < irq->nvec; i++)
        close(irq->fds[i]);
    free(irq);
}

uint32_t npv_irq_count(const struct npv_irq *irq)
{
    return irq->nvec;
}

int npv_irq_fd(const struct npv_irq *irq, uint32_t vec)
{
    if (irq == NULL || vec >= irq->nvec)
        return -EINVAL;
    return irq->fds[vec];
}

int npv_irq_mask(struct npv_irq *irq, uint32_t vec)
{
    if (irq == NULL || vec >= irq->nvec)
        return -EINVAL;
    return set_irqs(irq->dev, (uint32_t)irq->type, NPV_IRQ_SET_DATA_NONE | NPV_IRQ_SET_ACTION_MASK,
                    vec, 1, NULL);
}

int npv_irq_unmask(struct npv_irq *irq, uint32_t vec)
{
    if (irq == NULL || vec >= irq->nvec)
        return -EINVAL;
    return set_irqs(irq->dev, (uint32_t)irq->type,
                    NPV_IRQ_SET_DATA_NONE | NPV_IRQ_SET_ACTION_UNMASK, vec, 1, NULL);
}

int64_t npv_eventfd_wait(int fd, uint64_t timeout_ns)
{
    uint64_t deadline = npv_deadline_after(timeout_ns);
    for (;;) {
        int64_t n = npv_eventfd_consume(fd);
        if (n != -EAGAIN)
            return n;
        uint64_t left = npv_deadline_left(deadline);
        if (left == 0)
            return -ETIMEDOUT;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        struct timespec ts;
        npv_ns_to_timespec(left, &ts);
        if (ppoll(&pfd, 1, &ts, NULL) < 0 && errno != EINTR)
            return -errno;
    }
}

struct npv_dev *npv_irq_dev(const struct npv_irq *irq)
{
    return irq->dev;
}

int64_t npv_irq_wait(struct npv_irq *irq, uint32_t vec, uint64_t timeout_ns)
{
    if (irq == NULL || vec >= irq->nvec)
        return -EINVAL;
    /* Writes held back in a batch would never reach the device we wait for. */
    npv_dev_kick(irq->dev);
    return npv_eventfd_wait(irq->fds[vec], timeout_ns);
}

/* SPDX-License-Identifier: MIT */
/*
 * A wait set: many interrupt vectors, of many devices, waited on by one
 * thread with one deadline. One io_uring holds a one-shot POLL_ADD per
 * vector that is not known to have fired; a wait reaps completions with
 * io_uring_wait_cqe_timeout and reads only the eventfds that fired, so an
 * idle vector costs nothing per wait. Without io_uring (seccomp, old kernel)
 * the same semantics come from ppoll over all vectors.
 */
#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/irq.h>

#include "ctx_internal.h"
#include "deadline.h"
#include "dev_internal.h"
#include "failpoint_internal.h"
#include "irq_internal.h"

struct ws_entry {
    struct npv_dev *dev; /* NULL for a plain eventfd */
    int fd;
    uint64_t cookie;
    bool armed; /* a POLL_ADD for it is in the ring */
    bool ready; /* its poll completed; the counter is not consumed yet */
    bool broken;
};

struct npv_irq_waitset {
    struct npv_ctx *ctx;
    struct io_uring ring;
    bool have_ring;
    unsigned max, n;
    struct ws_entry *e;
    struct pollfd *pfds; /* the ppoll fallback */
};

int npv_irq_waitset_new(struct npv_ctx *ctx, unsigned max_entries, struct npv_irq_waitset **out)
{
    if (out == NULL || max_entries == 0 || max_entries > 4096)
        return -EINVAL;
    struct npv_irq_waitset *ws = npv_fp_calloc(ctx, 1, sizeof(*ws));
    if (ws == NULL)
        return -ENOMEM;
    ws->ctx = ctx;
    ws->max = max_entries;
    ws->e = npv_fp_calloc(ctx, max_entries, sizeof(*ws->e));
    ws->pfds = npv_fp_calloc(ctx, max_entries, sizeof(*ws->pfds));
    if (ws->e == NULL || ws->pfds == NULL) {
        free(ws->e);
        free(ws->pfds);
        free(ws);
        return -ENOMEM;
    }
    /* One SQE per vector, plus the timeout SQE liburing adds on kernels without EXT_ARG. */
    int ret = npv_fp_uring_result(ctx);
    if (ret == 0)
        ret = io_uring_queue_init(max_entries + 1, &ws->ring, 0);
    if (ret == 0) {
        ws->have_ring = true;
    } else {
        npv_info(ctx, "irq wait set: io_uring unavailable (%s); using ppoll", npv_strerror(ret));
    }
    *out = ws;
    return 0;
}

void npv_irq_waitset_free(struct npv_irq_waitset *ws)
{
    if (ws == NULL)
        return;
    /* Tearing the ring down cancels the polls still armed; the eventfds stay the npv_irq's. */
    if (ws->have_ring)
        io_uring_queue_exit(&ws->ring);
    free(ws->e);
    free(ws->pfds);
    free(ws);
}

int npv_irq_waitset_add(struct npv_irq_waitset *ws, struct npv_irq *irq, uint32_t vec,
                        uint64_t cookie)
{
    if (ws == NULL || irq == NULL)
        return -EINVAL;
    int fd = npv_irq_fd(irq, vec);
    if (fd < 0)
        return fd;
    int ret = npv_irq_waitset_add_fd(ws, fd, cookie);
    if (ret == 0)
        ws->e[ws->n - 1].dev = npv_irq_dev(irq);
    return ret;
}

int npv_irq_waitset_add_fd(struct npv_irq_waitset *ws, int fd, uint64_t cookie)
{
    if (ws == NULL || fd < 0)
        return -EINVAL;
    if (ws->n == ws->max)
        return -ENOSPC;
    ws->e[ws->n] = (struct ws_entry){.fd = fd, .cookie = cookie};
    ws->n++;
    return 0;
}

/* Consume the counters of ready entries into cookies, up to max. */
static unsigned harvest(struct npv_irq_waitset *ws, uint64_t *cookies, unsigned max)
{
    unsigned got = 0;
    for (unsigned i = 0; i < ws->n && got < max; i++) {
        struct ws_entry *e = &ws->e[i];
        if (!e->ready)
            continue;
        e->ready = false;
        int64_t c = npv_eventfd_consume(e->fd);
        if (c > 0)
            cookies[got++] = e->cookie;
        else if (c != -EAGAIN) {
            npv_warn(ws->ctx, "irq wait set: eventfd %d: %s; dropped", e->fd, npv_strerror((int)c));
            e->broken = true;
        }
    }
    return got;
}

static void arm_polls(struct npv_irq_waitset *ws)
{
    for (unsigned i = 0; i < ws->n; i++) {
        struct ws_entry *e = &ws->e[i];
        if (e->armed || e->ready || e->broken)
            continue;
        struct io_uring_sqe *sqe = io_uring_get_sqe(&ws->ring);
        if (sqe == NULL)
            break;
        io_uring_prep_poll_add(sqe, e->fd, POLLIN);
        io_uring_sqe_set_data64(sqe, i);
        e->armed = true;
    }
}

static void reap(struct npv_irq_waitset *ws)
{
    struct io_uring_cqe *cqe;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&ws->ring, head, cqe)
    {
        seen++;
        uint64_t i = io_uring_cqe_get_data64(cqe);
        if (i >= ws->n)
            continue;
        ws->e[i].armed = false;
        if (cqe->res < 0) {
            npv_warn(ws->ctx, "irq wait set: poll of eventfd %d: %s; dropped", ws->e[i].fd,
                     npv_strerror(cqe->res));
            ws->e[i].broken = true;
        } else {
            ws->e[i].ready = true;
        }
    }
    io_uring_cq_advance(&ws->ring, seen);
}

static int wait_ring(struct npv_irq_waitset *ws, uint64_t deadline, uint64_t *cookies, unsigned max)
{
    for (;;) {
        unsigned got = harvest(ws, cookies, max);
        if (got > 0)
            return (int)got;
        arm_polls(ws);
        int ret = io_uring_submit(&ws->ring);
        if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY)
            return ret;
        uint64_t left = npv_deadline_left(deadline);
        if (left == 0)
            return -ETIMEDOUT;
        struct __kernel_timespec ts = {.tv_sec = (long long)(left / 1000000000ull),
                                       .tv_nsec = (long long)(left % 1000000000ull)};
        struct io_uring_cqe *cqe;
        ret = io_uring_wait_cqe_timeout(&ws->ring, &cqe, &ts);
        if (ret < 0 && ret != -ETIME && ret != -EINTR)
            return ret;
        reap(ws);
    }
}

static int wait_ppoll(struct npv_irq_waitset *ws, uint64_t deadline, uint64_t *cookies,
                      unsigned max)
{
    for (;;) {
        unsigned got = harvest(ws, cookies, max);
        if (got > 0)
            return (int)got;
        for (unsigned i = 0; i < ws->n; i++)
            ws->pfds[i] =
                (struct pollfd){.fd = ws->e[i].broken ? -1 : ws->e[i].fd, .events = POLLIN};
        uint64_t left = npv_deadline_left(deadline);
        if (left == 0)
            return -ETIMEDOUT;
        struct timespec ts;
        npv_ns_to_timespec(left, &ts);
        int n = ppoll(ws->pfds, ws->n, &ts, NULL);
        if (n < 0 && errno != EINTR)
            return -errno;
        for (unsigned i = 0; n > 0 && i < ws->n; i++)
            if (ws->pfds[i].revents & POLLIN)
                ws->e[i].ready = true;
    }
}

int npv_irq_waitset_wait(struct npv_irq_waitset *ws, uint64_t timeout_ns, uint64_t *cookies,
                         unsigned max)
{
    if (ws == NULL || cookies == NULL || max == 0)
        return -EINVAL;
    if (ws->n == 0)
        return -ENOENT;
    uint64_t deadline = npv_deadline_after(timeout_ns);
    /* Writes held back in a batch would never reach the devices we wait for. */
    for (unsigned i = 0; i < ws->n; i++)
        npv_dev_kick(ws->e[i].dev);
    if (ws->have_ring)
        return wait_ring(ws, deadline, cookies, max);
    return wait_ppoll(ws, deadline, cookies, max);
}

/* SPDX-License-Identifier: MIT */
/*
 * The job table's layout and its per-job operations, inline: the ring engine
 * claims and reaps one entry per descriptor on its hot path, where a call
 * per descriptor is a measurable share of a ring round trip. The public
 * npv_inflight_* functions (ring_inflight.c) are these same operations.
 *
 * Three free-running sequence numbers split the jobs:
 *   [head, done)  finished, waiting to be reaped
 *   [done, tail)  in flight
 * tail - head <= capacity, so a slot (seq & mask) is reused only after its
 * job was reaped.
 */
#ifndef NPV_RING_INFLIGHT_H
#define NPV_RING_INFLIGHT_H

#include <errno.h>
#include <stdint.h>

#include <npuvfio/ring.h>

struct npv_inflight_slot {
    uint64_t cookie;
    uint64_t deadline_ns;
    int32_t status;
    uint32_t dev_error;
};

struct npv_inflight {
    struct npv_ctx *ctx;
    uint32_t mask;
    uint32_t head, done, tail;
    struct npv_inflight_slot *slots;
};

static inline int inflight_add(struct npv_inflight *t, uint64_t cookie, uint64_t deadline_ns,
                               uint32_t *seq)
{
    if (t->tail - t->head > t->mask)
        return -EAGAIN;
    struct npv_inflight_slot *s = &t->slots[t->tail & t->mask];
    s->cookie = cookie;
    s->deadline_ns = deadline_ns;
    s->status = 0;
    s->dev_error = 0;
    *seq = t->tail++;
    return 0;
}

static inline int inflight_complete(struct npv_inflight *t, uint32_t end)
{
    if (end - t->done > t->tail - t->done)
        return -NPV_EDEVFAULT;
    t->done = end;
    return 0;
}

static inline unsigned inflight_reap(struct npv_inflight *t, struct npv_cpl *cpl, unsigned max)
{
    uint32_t avail = t->done - t->head;
    unsigned n = avail < max ? (unsigned)avail : max;
    for (unsigned i = 0; i < n; i++) {
        const struct npv_inflight_slot *s = &t->slots[(t->head + i) & t->mask];
        cpl[i].cookie = s->cookie;
        cpl[i].status = s->status;
        cpl[i].dev_error = s->dev_error;
    }
    t->head += n;
    return n;
}

static inline uint32_t inflight_unfinished(const struct npv_inflight *t)
{
    return t->tail - t->done;
}

static inline uint32_t inflight_unreaped(const struct npv_inflight *t)
{
    return t->done - t->head;
}

#endif

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
 *
 * Deadlines: jobs finish in order but their deadlines need not be in order (a
 * job may carry its own timeout), so the earliest deadline among the jobs in
 * flight is kept by a monotonic queue over the window [done, tail): dl_seq
 * holds sequence numbers of jobs with a deadline, oldest first, with strictly
 * increasing deadlines (a newer job with an earlier or equal deadline removes
 * the older ones from its back: they can never be the earliest while it is in
 * flight, and they finish before it). Each job enters and leaves the queue at
 * most once, so add and complete stay O(1) amortised and the earliest
 * deadline is the front, O(1).
 *
 * The ring claims jobs without reading the clock (a vDSO clock read costs
 * 20-60 ns, a fair share of a polled round trip): inflight_add_relative
 * keeps the job's timeout, relative, and the next clock reading turns the
 * timeouts of [stamp_from, tail) into deadlines (inflight_stamp). A table
 * uses either absolute adds (npv_inflight_add) or relative ones, not both.
 */
#ifndef NPV_RING_INFLIGHT_H
#define NPV_RING_INFLIGHT_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include <npuvfio/ring.h>

#include "stats_internal.h"
#include "trace.h"

struct npv_inflight_slot {
    uint64_t cookie;
    uint64_t deadline_ns;
    int32_t status;
    uint32_t dev_error;
    uint64_t t0_ns; /* when its doorbell rang (stats latency on), else 0 */
};

struct npv_inflight {
    struct npv_ctx *ctx;
    uint32_t mask;
    uint32_t head, done, tail;
    struct npv_inflight_slot *slots;
    uint32_t *dl_seq;          /* capacity entries */
    uint32_t dl_head, dl_tail; /* free-running positions in dl_seq */
    /* Jobs [stamp_from, tail) hold a relative timeout in deadline_ns, not yet a deadline. */
    uint32_t stamp_from;
    /* Counters read by lib/stats (stats.h): written here by the table's owner only. */
    struct npv_stats_queue stats;
};

static inline uint64_t inflight_deadline_of(const struct npv_inflight *t, uint32_t pos)
{
    return t->slots[t->dl_seq[pos & t->mask] & t->mask].deadline_ns;
}

static inline void inflight_push_deadline(struct npv_inflight *t, uint32_t seq,
                                          uint64_t deadline_ns)
{
    while (t->dl_tail != t->dl_head && inflight_deadline_of(t, t->dl_tail - 1) >= deadline_ns)
        t->dl_tail--;
    t->dl_seq[t->dl_tail++ & t->mask] = seq;
}

static inline struct npv_inflight_slot *inflight_claim(struct npv_inflight *t, uint64_t cookie,
                                                       uint64_t deadline_ns)
{
    struct npv_inflight_slot *s = &t->slots[t->tail & t->mask];
    s->cookie = cookie;
    s->deadline_ns = deadline_ns;
    s->status = 0;
    s->dev_error = 0;
    s->t0_ns = 0;
    npv_stat_add(&t->stats.requests, 1);
    return s;
}

/* deadline_ns: absolute, 0 for none. */
static inline int inflight_add(struct npv_inflight *t, uint64_t cookie, uint64_t deadline_ns,
                               uint32_t *seq)
{
    if (t->tail - t->head > t->mask)
        return -EAGAIN;
    inflight_claim(t, cookie, deadline_ns);
    if (deadline_ns != 0)
        inflight_push_deadline(t, t->tail, deadline_ns);
    *seq = t->tail++;
    t->stamp_from = t->tail;
    return 0;
}

/* timeout_ns: relative to the next inflight_stamp, 0 for none. */
static inline int inflight_add_relative(struct npv_inflight *t, uint64_t cookie,
                                        uint64_t timeout_ns, uint32_t *seq)
{
    if (t->tail - t->head > t->mask)
        return -EAGAIN;
    inflight_claim(t, cookie, timeout_ns);
    *seq = t->tail++;
    return 0;
}

/* Whether unfinished jobs wait for a clock reading to get their deadline. */
static inline bool inflight_unstamped(const struct npv_inflight *t)
{
    return t->stamp_from != t->tail;
}

/* Turn the pending relative timeouts into deadlines from now_ns. */
void inflight_stamp(struct npv_inflight *t, uint64_t now_ns);

/* Drop the deadlines of jobs before `end` from the front of the queue. */
static inline void inflight_drop_deadlines(struct npv_inflight *t, uint32_t end)
{
    /* seq - end wraps to at least tail - end exactly for the jobs before end. */
    while (t->dl_head != t->dl_tail && t->dl_seq[t->dl_head & t->mask] - end >= t->tail - end)
        t->dl_head++;
}

static inline int inflight_complete(struct npv_inflight *t, uint32_t end)
{
    if (end - t->done > t->tail - t->done)
        return -NPV_EDEVFAULT;
    /* A job that finished before any clock reading never gets a deadline. */
    if (t->stamp_from - t->done < end - t->done)
        t->stamp_from = end;
    t->done = end;
    inflight_drop_deadlines(t, end);
    return 0;
}

/*
 * Latency of the jobs [from, end) the device just finished, against now_ns:
 * jobs without a doorbell time (latency off, or claimed before it was
 * rung) are not measured.
 */
static inline void inflight_measure(struct npv_inflight *t, uint32_t from, uint32_t end,
                                    uint64_t now_ns)
{
    for (uint32_t seq = from; seq != end; seq++) {
        uint64_t t0 = t->slots[seq & t->mask].t0_ns;
        if (t0 != 0 && now_ns >= t0)
            npv_stats_latency(&t->stats, now_ns - t0);
    }
}

/* The earliest deadline among unfinished jobs, 0 if none has one. */
static inline uint64_t inflight_next_deadline(const struct npv_inflight *t)
{
    return t->dl_head != t->dl_tail ? inflight_deadline_of(t, t->dl_head) : 0;
}

/*
 * Finish every unfinished job: the oldest with first_status and
 * first_dev_error, the others with others_status. Returns how many.
 */
uint32_t inflight_fail_all(struct npv_inflight *t, int32_t first_status, uint32_t first_dev_error,
                           int32_t others_status);
/*
 * If the earliest deadline is at or before now_ns, finish every unfinished
 * job: those whose own deadline passed with -ETIMEDOUT, the others with
 * -ECANCELED. Returns how many were failed (0: none expired, O(1)).
 */
uint32_t inflight_expire(struct npv_inflight *t, uint64_t now_ns);

static inline unsigned inflight_reap(struct npv_inflight *t, struct npv_cpl *cpl, unsigned max)
{
    uint32_t avail = t->done - t->head;
    unsigned n = avail < max ? (unsigned)avail : max;
    for (unsigned i = 0; i < n; i++) {
        const struct npv_inflight_slot *s = &t->slots[(t->head + i) & t->mask];
        cpl[i].cookie = s->cookie;
        cpl[i].status = s->status;
        cpl[i].dev_error = s->dev_error;
        npv_stats_completion(&t->stats, s->status);
        NPV_TRACE3(completion, s->cookie, s->status, s->dev_error);
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

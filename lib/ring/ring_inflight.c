/* SPDX-License-Identifier: MIT */
/*
 * Bookkeeping of jobs in flight: cookies, deadlines, statuses, in-order
 * completion and the fan-out of a failure. Shared by ring-shaped and
 * register-driven devices.
 *
 * The table's layout and per-job operations are in ring_inflight.h.
 */
#include <stdlib.h>

#include "ctx_internal.h"
#include "deadline.h"
#include "failpoint_internal.h"
#include "ring_inflight.h"

int npv_inflight_new(struct npv_ctx *ctx, uint32_t capacity, struct npv_inflight **out)
{
    if (out == NULL || capacity == 0 || capacity > (1u << 24) || (capacity & (capacity - 1)))
        return -EINVAL;
    struct npv_inflight *t = npv_fp_calloc(ctx, 1, sizeof(*t));
    if (t == NULL)
        return -ENOMEM;
    t->slots = npv_fp_calloc(ctx, capacity, sizeof(*t->slots));
    if (t->slots == NULL)
        goto err_table;
    t->dl_seq = npv_fp_calloc(ctx, capacity, sizeof(*t->dl_seq));
    if (t->dl_seq == NULL)
        goto err_slots;
    t->ctx = ctx;
    t->mask = capacity - 1;
    npv_stats_queue_register(ctx, &t->stats);
    *out = t;
    return 0;

err_slots:
    free(t->slots);
err_table:
    free(t);
    return -ENOMEM;
}

void npv_inflight_free(struct npv_inflight *t)
{
    if (t == NULL)
        return;
    npv_stats_queue_unregister(&t->stats);
    free(t->dl_seq);
    free(t->slots);
    free(t);
}

int npv_inflight_add(struct npv_inflight *t, uint64_t cookie, uint64_t deadline_ns, uint32_t *seq)
{
    uint32_t s;
    int rc = inflight_add(t, cookie, deadline_ns, &s);
    if (rc == 0 && t->stats.latency)
        t->slots[s & t->mask].t0_ns = npv_now_ns();
    if (rc == 0 && seq != NULL)
        *seq = s;
    return rc;
}

int npv_inflight_complete(struct npv_inflight *t, uint32_t end)
{
    uint32_t from = t->done;
    int rc = inflight_complete(t, end);
    if (rc == 0 && t->stats.latency && from != end)
        inflight_measure(t, from, end, npv_now_ns());
    return rc;
}

void npv_inflight_set_name(struct npv_inflight *t, const char *device, const char *queue)
{
    npv_stats_queue_name(&t->stats, device, queue);
}

void npv_inflight_count_reset(struct npv_inflight *t)
{
    npv_stat_add(&t->stats.resets, 1);
}

int npv_inflight_set_status(struct npv_inflight *t, uint32_t seq, int32_t status,
                            uint32_t dev_error)
{
    if (seq - t->done >= t->tail - t->done)
        return -ERANGE;
    struct npv_inflight_slot *s = &t->slots[seq & t->mask];
    s->status = status;
    s->dev_error = dev_error;
    return 0;
}

uint32_t inflight_fail_all(struct npv_inflight *t, int32_t first_status, uint32_t first_dev_error,
                           int32_t others_status)
{
    uint32_t n = t->tail - t->done;
    for (uint32_t i = 0; i < n; i++) {
        struct npv_inflight_slot *s = &t->slots[(t->done + i) & t->mask];
        s->status = i == 0 ? first_status : others_status;
        s->dev_error = i == 0 ? first_dev_error : 0;
    }
    t->done = t->tail;
    t->dl_head = t->dl_tail;
    t->stamp_from = t->tail;
    return n;
}

void inflight_stamp(struct npv_inflight *t, uint64_t now_ns)
{
    for (uint32_t seq = t->stamp_from; seq != t->tail; seq++) {
        struct npv_inflight_slot *s = &t->slots[seq & t->mask];
        if (s->deadline_ns == 0)
            continue;
        s->deadline_ns =
            s->deadline_ns > UINT64_MAX - now_ns ? UINT64_MAX : now_ns + s->deadline_ns;
        inflight_push_deadline(t, seq, s->deadline_ns);
    }
    t->stamp_from = t->tail;
}

uint32_t inflight_expire(struct npv_inflight *t, uint64_t now_ns)
{
    uint64_t first = inflight_next_deadline(t);
    if (first == 0 || first > now_ns)
        return 0;
    uint32_t n = t->tail - t->done;
    for (uint32_t i = 0; i < n; i++) {
        struct npv_inflight_slot *s = &t->slots[(t->done + i) & t->mask];
        s->status = s->deadline_ns != 0 && s->deadline_ns <= now_ns ? -ETIMEDOUT : -ECANCELED;
        s->dev_error = 0;
    }
    t->done = t->tail;
    t->dl_head = t->dl_tail;
    t->stamp_from = t->tail;
    return n;
}

uint32_t npv_inflight_fail_all(struct npv_inflight *t, int32_t first_status, int32_t others_status)
{
    return inflight_fail_all(t, first_status, 0, others_status);
}

uint32_t npv_inflight_expire(struct npv_inflight *t, uint64_t now_ns)
{
    return inflight_expire(t, now_ns);
}

unsigned npv_inflight_reap(struct npv_inflight *t, struct npv_cpl *cpl, unsigned max)
{
    return inflight_reap(t, cpl, max);
}

uint32_t npv_inflight_unfinished(const struct npv_inflight *t)
{
    return inflight_unfinished(t);
}

uint32_t npv_inflight_unreaped(const struct npv_inflight *t)
{
    return inflight_unreaped(t);
}

uint32_t npv_inflight_done(const struct npv_inflight *t)
{
    return t->done;
}

uint32_t npv_inflight_tail(const struct npv_inflight *t)
{
    return t->tail;
}

uint64_t npv_inflight_next_deadline(const struct npv_inflight *t)
{
    return inflight_next_deadline(t);
}

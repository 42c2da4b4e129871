/* SPDX-License-Identifier: MIT */
/*
 * Many threads on one AICore device (npuvfio/share.h): the two pipeline
 * slots as one queue an npv_share serves. Submit prepares a run in a free
 * slot and launches it when nothing runs; poll drives the active run, hands
 * back every finished one (releasing its slot) and launches the prepared
 * one. Model choice (no public source: the device's one-run-at-a-time rule
 * is aicore.h's): requests complete in launch order, as the device runs them.
 */
#include <errno.h>
#include <stdlib.h>

#include "driver_internal.h"

struct npv_aicore_queue {
    struct npv_aicore *ac;
    struct npv_aicore_run *run[NPV_AICORE_SLOTS];
    uint64_t cookie[NPV_AICORE_SLOTS];
    bool launched[NPV_AICORE_SLOTS];
    int failed[NPV_AICORE_SLOTS]; /* a launch's error, handed back by the next poll */
};

int npv_aicore_queue_new(struct npv_aicore *ac, struct npv_aicore_queue **out)
{
    if (ac == NULL || out == NULL)
        return -EINVAL;
    struct npv_aicore_queue *q = calloc(1, sizeof(*q));
    if (q == NULL)
        return -ENOMEM;
    q->ac = ac;
    *out = q;
    return 0;
}

void npv_aicore_queue_free(struct npv_aicore_queue *q)
{
    if (q == NULL)
        return;
    for (unsigned s = 0; s < NPV_AICORE_SLOTS; s++) {
        if (q->run[s] == NULL)
            continue;
        /* An active run cannot be released: the reset fails it (-ECANCELED) first. */
        if (q->launched[s] && npv_aicore_release(q->run[s]) == -EBUSY)
            (void)npv_aicore_reset(q->ac);
        (void)npv_aicore_release(q->run[s]);
    }
    free(q);
}

static bool active(const struct npv_aicore_queue *q)
{
    for (unsigned s = 0; s < NPV_AICORE_SLOTS; s++)
        if (q->run[s] != NULL && q->launched[s])
            return true;
    return false;
}

/* Launch the prepared run when nothing runs (the device runs one at a time: aicore.h). */
static void launch_next(struct npv_aicore_queue *q)
{
    if (active(q))
        return;
    for (unsigned s = 0; s < NPV_AICORE_SLOTS; s++) {
        if (q->run[s] == NULL || q->launched[s] || q->failed[s] != 0)
            continue;
        int r = npv_aicore_launch(q->run[s]);
        if (r == -EBUSY)
            return;
        if (r < 0)
            q->failed[s] = r; /* -ETIMEDOUT past its budget, unlaunched, among others */
        else
            q->launched[s] = true;
        return;
    }
}

static int share_submit(void *drv, const void *req, uint64_t cookie)
{
    struct npv_aicore_queue *q = drv;
    const struct npv_aicore_request *rq = req;
    for (unsigned s = 0; s < NPV_AICORE_SLOTS; s++) {
        if (q->run[s] != NULL)
            continue;
        int r = rq->budget_ns != 0
                    ? npv_aicore_prepare_within(q->ac, s, rq->desc, rq->budget_ns, &q->run[s])
                    : npv_aicore_prepare(q->ac, s, rq->desc, &q->run[s]);
        if (r < 0) {
            q->run[s] = NULL;
            /* -EBUSY: the other slot's run is prepared and not launched yet: full for now */
            return r == -EBUSY ? -EAGAIN : r;
        }
        q->cookie[s] = cookie;
        q->launched[s] = false;
        q->failed[s] = 0;
        launch_next(q);
        return 0;
    }
    return -EAGAIN;
}

static int share_poll(void *drv, struct npv_cpl *cpl, unsigned max)
{
    struct npv_aicore_queue *q = drv;
    unsigned got = 0;
    for (unsigned s = 0; s < NPV_AICORE_SLOTS && got < max; s++) {
        if (q->run[s] == NULL)
            continue;
        int r = q->failed[s];
        if (r == 0) {
            if (!q->launched[s])
                continue;
            r = npv_aicore_poll(q->run[s]);
            if (r == -EINPROGRESS)
                continue;
        }
        int rr = npv_aicore_release(q->run[s]);
        q->run[s] = NULL;
        cpl[got++] = (struct npv_cpl){.cookie = q->cookie[s], .status = r != 0 ? r : rr};
    }
    launch_next(q);
    return (int)got;
}

const struct npv_share_ops *npv_aicore_share_ops(void)
{
    static const struct npv_share_ops ops = {.submit = share_submit, .poll = share_poll};
    return &ops;
}

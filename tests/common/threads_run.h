/* SPDX-License-Identifier: MIT */
/*
 * The threads acceptance runs (issue 24 item 1), shared by every device's
 * suite: THREADS_N worker threads submit to and reap from one device through
 * one npv_share, each with `depth` requests of its own in flight; every
 * completion must carry the cookie of the request its ticket holds, status
 * 0 and an output the device's check calls exact; nothing may complete twice
 * or go missing (the share's counters and a final look at the device).
 *
 * Requests per thread: the suite's default, or NPUVFIO_THREADS_REQUESTS (the
 * acceptance's 100000).
 */
#ifndef NPV_TEST_THREADS_RUN_H
#define NPV_TEST_THREADS_RUN_H

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/share.h>

#include "npv_test.h"

#define THREADS_N     4u
#define THREADS_DEPTH 8u

struct threads_run {
    struct npv_share *share;
    const struct npv_share_ops *ops; /* for the final look */
    void *drv;
    void *dev; /* the suite's own state */
    unsigned depth;
    uint64_t requests; /* per thread */
    size_t req_size;
    uint64_t wait_ns; /* one request's wait before the run fails */
    /* Build request i of thread th in slot (buffers of its own) into req. */
    void (*prepare)(void *dev, unsigned th, unsigned slot, uint64_t i, void *req);
    /* Whether request i of thread th in slot produced exactly the expected output. */
    bool (*check)(void *dev, unsigned th, unsigned slot, uint64_t i);
    /* results */
    uint64_t done, wrong, failed, misrouted, timed_out;
    int first_status;
};

struct threads_worker {
    struct threads_run *run;
    unsigned th;
};

static inline uint64_t threads_requests(uint64_t dflt)
{
    const char *e = getenv("NPUVFIO_THREADS_REQUESTS");
    if (e != NULL && *e != '\0') {
        uint64_t v = strtoull(e, NULL, 0);
        if (v > 0)
            return v;
    }
    return npv_test_volume(dflt);
}

static inline void threads_add(uint64_t *c, uint64_t n)
{
    __atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

static inline int threads_submit(struct threads_run *run, unsigned th, unsigned slot, uint64_t i,
                                 void *req, struct npv_share_ticket *t)
{
    run->prepare(run->dev, th, slot, i, req);
    for (;;) {
        int r = npv_share_submit(run->share, req, i, t);
        if (r != -EAGAIN)
            return r;
        sched_yield(); /* others hold the queue: their waits reap it */
    }
}

static void *threads_worker_main(void *arg)
{
    struct threads_worker *w = arg;
    struct threads_run *run = w->run;
    unsigned depth = run->depth;
    struct npv_share_ticket t[THREADS_DEPTH];
    uint64_t which[THREADS_DEPTH];
    bool busy[THREADS_DEPTH] = {false};
    unsigned char req[THREADS_DEPTH][256];
    uint64_t next = 0, done = 0;
    ck_assert(depth <= THREADS_DEPTH && run->req_size <= sizeof(req[0]));
    for (unsigned s = 0; s < depth && next < run->requests; s++, next++) {
        which[s] = next;
        busy[s] = true;
        int r = threads_submit(run, w->th, s, next, req[s], &t[s]);
        ck_assert_msg(r == 0, "thread %u: submit: %s", w->th, npv_strerror(r));
    }
    unsigned s = 0;
    while (done < run->requests) {
        int r = npv_share_wait(run->share, &t[s], run->wait_ns);
        if (r == 0) {
            threads_add(&run->timed_out, 1);
            return NULL;
        }
        ck_assert_msg(r == 1, "thread %u: wait: %s", w->th, npv_strerror(r));
        done++;
        if (t[s].cpl.cookie != which[s])
            threads_add(&run->misrouted, 1);
        else if (t[s].cpl.status != 0) {
            if (__atomic_fetch_add(&run->failed, 1, __ATOMIC_RELAXED) == 0)
                run->first_status = t[s].cpl.status;
        } else if (!run->check(run->dev, w->th, s, which[s]))
            threads_add(&run->wrong, 1);
        if (next < run->requests) {
            which[s] = next;
            r = threads_submit(run, w->th, s, next, req[s], &t[s]);
            ck_assert_msg(r == 0, "thread %u: submit: %s", w->th, npv_strerror(r));
            next++;
        } else
            busy[s] = false;
        for (unsigned k = 0; k < depth && done < run->requests; k++) {
            s = (s + 1) % depth;
            if (busy[s])
                break;
        }
    }
    threads_add(&run->done, done);
    return NULL;
}

/* Run THREADS_N workers to the end; fail the test on any lost, duplicated or wrong completion. */
static inline void threads_run_all(struct threads_run *run)
{
    ck_assert_int_eq(npv_share_new(run->ops, run->drv, &run->share), 0);
    pthread_t tid[THREADS_N];
    struct threads_worker w[THREADS_N];
    for (unsigned i = 0; i < THREADS_N; i++) {
        w[i] = (struct threads_worker){.run = run, .th = i};
        ck_assert_int_eq(pthread_create(&tid[i], NULL, threads_worker_main, &w[i]), 0);
    }
    for (unsigned i = 0; i < THREADS_N; i++)
        pthread_join(tid[i], NULL);
    struct npv_share_counters c;
    npv_share_counters(run->share, &c);
    uint64_t total = run->requests * THREADS_N;
    ck_assert_msg(run->timed_out == 0, "%llu threads found a request never completing",
                  (unsigned long long)run->timed_out);
    ck_assert_msg(run->misrouted == 0, "%llu completions reached the wrong ticket",
                  (unsigned long long)run->misrouted);
    ck_assert_msg(run->failed == 0, "%llu requests failed, the first with %s",
                  (unsigned long long)run->failed, npv_strerror(run->first_status));
    ck_assert_msg(run->wrong == 0, "%llu outputs differ from the reference",
                  (unsigned long long)run->wrong);
    ck_assert_uint_eq(run->done, total);
    ck_assert_uint_eq(c.submitted, total);
    ck_assert_uint_eq(c.completed, total);
    /* Nothing left to come: a duplicate would show here. */
    struct npv_cpl extra[4];
    ck_assert_int_eq(run->ops->poll(run->drv, extra, 4), 0);
    npv_share_free(run->share);
    run->share = NULL;
}

#endif

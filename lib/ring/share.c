/* SPDX-License-Identifier: MIT */
/*
 * A shared queue in front of a one-thread-at-a-time driver (npuvfio/share.h):
 * submits under a short lock, completions reaped by whichever waiter gets
 * the lock and routed to the ticket each names. Model choice (no public
 * source): a combining reaper rather than a reaper thread, so a single
 * thread pays no hand-off between cores and a polled path makes no system
 * call.
 *
 * A waiter that keeps missing the try-lock sleeps on a futex until the lock
 * is let go, rather than yielding in a loop: the holder may be asleep inside
 * the driver (a trapped register read over vfio-user waits for its reply),
 * and threads yielding to each other on the holder's CPU delay its wake-up
 * on every such read (measured: RKNPU through the share, 4 threads on one
 * CPU, 0.81-0.84 of one thread's rate yielding, 0.95-1.02 sleeping).
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <npuvfio/share.h>

#include "deadline.h"

#define POLL_BATCH 32u
/* Longest futex sleep of a waiter: a lost wake-up costs at most this. */
#define SLEEP_MAX_NS 200000u

struct npv_share {
    pthread_mutex_t lock;
    const struct npv_share_ops *ops;
    void *drv;
    uint64_t submitted, completed, polls, contended; /* written under lock, read atomically */
    /* Waiters asleep on lock_gen; the holder bumps lock_gen and wakes them as it lets go. */
    uint32_t lock_gen, sleepers;
};

int npv_share_new(const struct npv_share_ops *ops, void *drv, struct npv_share **out)
{
    if (ops == NULL || ops->submit == NULL || ops->poll == NULL || out == NULL)
        return -EINVAL;
    struct npv_share *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    int r = pthread_mutex_init(&s->lock, NULL);
    if (r != 0) {
        free(s);
        return -r;
    }
    s->ops = ops;
    s->drv = drv;
    *out = s;
    return 0;
}

void npv_share_free(struct npv_share *s)
{
    if (s == NULL)
        return;
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static void bump(uint64_t *c, uint64_t n)
{
    __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

/* Whom the holder wakes as it lets go (share_unlock). */
enum wake {
    WAKE_NONE, /* it will look again at once: a woken waiter would only compete */
    WAKE_ONE,  /* it leaves the share (its submit made, its ticket done): one takes over */
    WAKE_ALL,  /* it routed completions: their owners may be asleep */
};

/* Wake as told. Nobody asleep (one thread alone): a load, no system call. */
static void share_wake(struct npv_share *s, enum wake wake)
{
    if (wake == WAKE_NONE || __atomic_load_n(&s->sleepers, __ATOMIC_SEQ_CST) == 0)
        return;
    __atomic_add_fetch(&s->lock_gen, 1u, __ATOMIC_SEQ_CST);
    (void)syscall(SYS_futex, &s->lock_gen, FUTEX_WAKE_PRIVATE, wake == WAKE_ALL ? INT_MAX : 1, NULL,
                  NULL, 0);
}

static void share_unlock(struct npv_share *s, enum wake wake)
{
    pthread_mutex_unlock(&s->lock);
    share_wake(s, wake);
}

/*
 * The lock is taken and t pending: sleep until the holder lets go (or
 * SLEEP_MAX_NS, or until_ns, whichever is first). The sleeper counts itself
 * before it looks again, so a holder letting go after that look sees it and
 * bumps lock_gen, which the futex compares: no wake-up is lost.
 */
static void share_sleep(struct npv_share *s, const struct npv_share_ticket *t, uint64_t until_ns)
{
    uint32_t gen = __atomic_load_n(&s->lock_gen, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&s->sleepers, 1u, __ATOMIC_SEQ_CST);
    uint64_t now = npv_now_ns();
    if (!npv_share_done(t) && now < until_ns) {
        uint64_t ns = until_ns - now < SLEEP_MAX_NS ? until_ns - now : SLEEP_MAX_NS;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)ns};
        /* Free already? It was let go before we counted ourselves: look again, no sleep. */
        if (pthread_mutex_trylock(&s->lock) == 0)
            pthread_mutex_unlock(&s->lock);
        else
            (void)syscall(SYS_futex, &s->lock_gen, FUTEX_WAIT_PRIVATE, gen, &ts, NULL, 0);
    }
    __atomic_sub_fetch(&s->sleepers, 1u, __ATOMIC_SEQ_CST);
}

/* One look at the device, with the lock held: route what finished. How many, or errno. */
static int poll_locked(struct npv_share *s)
{
    struct npv_cpl c[POLL_BATCH];
    int n = s->ops->poll(s->drv, c, POLL_BATCH);
    bump(&s->polls, 1);
    if (n <= 0)
        return n;
    for (int i = 0; i < n; i++) {
        /* The cookie is the ticket: host memory the driver kept, not a device value. */
        struct npv_share_ticket *t = (struct npv_share_ticket *)(uintptr_t)c[i].cookie;
        t->cpl = c[i];
        t->cpl.cookie = t->cookie;
        __atomic_store_n(&t->done, 1u, __ATOMIC_RELEASE);
    }
    bump(&s->completed, (uint64_t)n);
    return n;
}

int npv_share_submit(struct npv_share *s, const void *req, uint64_t cookie,
                     struct npv_share_ticket *t)
{
    if (s == NULL || t == NULL)
        return -EINVAL;
    t->cookie = cookie;
    t->reserved = 0;
    __atomic_store_n(&t->done, 0u, __ATOMIC_RELAXED);
    uint64_t me = (uint64_t)(uintptr_t)t;
    pthread_mutex_lock(&s->lock);
    int r = s->ops->submit(s->drv, req, me);
    if (r == -EAGAIN && poll_locked(s) > 0)
        r = s->ops->submit(s->drv, req, me);
    if (r == 0)
        bump(&s->submitted, 1);
    share_unlock(s, WAKE_ONE);
    return r;
}

int npv_share_done(const struct npv_share_ticket *t)
{
    return __atomic_load_n(&t->done, __ATOMIC_ACQUIRE) != 0;
}

int npv_share_wait(struct npv_share *s, struct npv_share_ticket *t, uint64_t timeout_ns)
{
    if (s == NULL || t == NULL)
        return -EINVAL;
    uint64_t deadline = 0;
    unsigned looks = 0, missed = 0;
    for (;;) {
        if (npv_share_done(t))
            return 1;
        if (pthread_mutex_trylock(&s->lock) == 0) {
            int r = npv_share_done(t) ? 0 : poll_locked(s);
            enum wake wake = WAKE_NONE;
            if (r > 0)
                wake = WAKE_ALL;
            else if (r < 0 || npv_share_done(t))
                wake = WAKE_ONE;
            share_unlock(s, wake);
            if (npv_share_done(t))
                return 1;
            if (r < 0)
                return r;
            /*
             * Completions routed to other threads, none to us: let their
             * owners run and refill the device (threads outnumbering the
             * CPUs otherwise spin out their time slices while it drains).
             * One thread alone never routes for another: no system call.
             */
            if (r > 0)
                sched_yield();
        } else {
            bump(&s->contended, 1); /* racy count from many threads: a statistic only */
            /* A single look never sleeps; a wait sleeps no later than its deadline. */
            if (timeout_ns != 0 && ++missed % NPV_SHARE_YIELD_EVERY == 0) {
                uint64_t now = npv_now_ns();
                if (deadline == 0)
                    deadline = timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
                share_sleep(s, t, deadline);
            }
        }
        /* The clock (vDSO) is read every 16 looks, and at once for a single look. */
        if (timeout_ns == 0)
            return 0;
        if (looks++ % 16 == 0) {
            uint64_t now = npv_now_ns();
            if (deadline == 0)
                deadline = timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
            else if (now >= deadline) {
                share_wake(s, WAKE_ONE); /* leaving: a sleeper takes over the polling */
                return npv_share_done(t);
            }
        }
    }
}

void npv_share_counters(const struct npv_share *s, struct npv_share_counters *out)
{
    out->submitted = __atomic_load_n(&s->submitted, __ATOMIC_RELAXED);
    out->completed = __atomic_load_n(&s->completed, __ATOMIC_RELAXED);
    out->polls = __atomic_load_n(&s->polls, __ATOMIC_RELAXED);
    out->contended = __atomic_load_n(&s->contended, __ATOMIC_RELAXED);
}

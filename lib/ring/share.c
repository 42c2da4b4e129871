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
 *
 * A sleeper is woken only when it has something to do: its own ticket is
 * done (the router wakes that ticket's futex), or nobody else is awake to
 * poll (share_leave). Waking every sleeper whenever anything completed, and
 * a 200 us bound on each sleep, woke the RKNPU's sleepers two or three times
 * per look at the device (0.4-0.9 ms of trapped reads) for nothing: 5.3-5.7
 * context switches per completion on the submitting CPU with 4 threads
 * against 2.2 with one, each delaying the holder's next register reply.
 * docs/threads.md has the counts.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <npuvfio/share.h>

#include "deadline.h"

#define POLL_BATCH 32u
/*
 * Longest futex sleep of a waiter. Every wake-up a sleeper needs is sent
 * (its ticket's, or the one that hands it the polling), so this only bounds
 * what a wake-up lost to a bug would cost. It is longer than one look at a
 * device whose poll is a chain of trapped register reads (the RKNPU's: 0.4-0.7
 * ms over vfio-user here): a shorter bound woke every sleeper two or three
 * times per look for nothing (model choice).
 */
#define SLEEP_MAX_NS 2000000u

/* t->done: 0 pending; TICKET_ASLEEP pending with its owner asleep on it; 1 done. */
#define TICKET_ASLEEP 2u

struct npv_share {
    pthread_mutex_t lock;
    const struct npv_share_ops *ops;
    void *drv;
    uint64_t submitted, completed, polls, contended; /* written under lock, read atomically */
    /*
     * Waiters asleep (sleepers) and waiters awake that missed the lock at
     * least once in this wait (spinners): they will take the lock or see it
     * taken. A thread that lets go of the lock and will not look at the
     * device again at once wakes one sleeper only when nobody spins
     * (share_leave). lock_gen is the futex those sleepers wait on.
     */
    uint32_t lock_gen, sleepers, spinners;
    /*
     * The waiter that let go of the lock last meaning to look again at once
     * (its ticket's address), or 0: it is awake and polls, so a leaver need
     * not wake anyone for it. Written under the lock, cleared by that waiter
     * as it goes to sleep.
     */
    uintptr_t looper;
    /* Sleepers use FUTEX_WAITV (below); cleared when the kernel refuses it. */
    int waitv;
};

/*
 * FUTEX_WAITV (Linux 5.16): one sleep on the ticket and on lock_gen at once.
 * Built only where both the system call number and the uapi's struct are
 * known (FUTEX_32 came with it); otherwise, and on a kernel that says
 * ENOSYS, a sleeper waits on lock_gen alone.
 */
#if defined(SYS_futex_waitv) && defined(FUTEX_32)
#define NPV_SHARE_WAITV 1
#else
#define NPV_SHARE_WAITV 0
#endif

static bool have_waitv(struct npv_share *s)
{
    return __atomic_load_n(&s->waitv, __ATOMIC_RELAXED) != 0;
}

/*
 * NPUVFIO_SHARE_WAITV=0 keeps a share on the older protocol (sleepers on
 * lock_gen alone, routers wake them all): for a seccomp policy that kills on
 * futex_waitv rather than refusing it, and for the tests of that protocol.
 */
static int waitv_wanted(void)
{
    const char *env = getenv("NPUVFIO_SHARE_WAITV");
    return NPV_SHARE_WAITV && !(env != NULL && strcmp(env, "0") == 0);
}

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
    s->waitv = waitv_wanted();
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

/* Wake n sleepers on lock_gen. */
static void wake_gen(struct npv_share *s, int n)
{
    __atomic_add_fetch(&s->lock_gen, 1u, __ATOMIC_SEQ_CST);
    (void)syscall(SYS_futex, &s->lock_gen, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/*
 * The lock was let go by a thread that will not look at the device again at
 * once (a submit made, a wait ending): somebody must go on polling for the
 * sleepers. A waiter that spins will (it takes the lock, or sees it taken by
 * a thread with the same duty); with none, one sleeper is woken. One thread
 * alone finds nobody asleep: two loads, no system call.
 */
static void share_leave(struct npv_share *s)
{
    if (__atomic_load_n(&s->sleepers, __ATOMIC_SEQ_CST) != 0 &&
        __atomic_load_n(&s->spinners, __ATOMIC_SEQ_CST) == 0 &&
        __atomic_load_n(&s->looper, __ATOMIC_SEQ_CST) == 0)
        wake_gen(s, 1);
}

/*
 * Sleep at most ns while t->done is TICKET_ASLEEP and lock_gen is gen: on
 * both words at once (FUTEX_WAITV), or, on a kernel without it, on lock_gen
 * alone (the routers then wake every sleeper, poll_locked).
 */
static void sleep_on(struct npv_share *s, struct npv_share_ticket *t, uint32_t gen, uint64_t ns)
{
#if NPV_SHARE_WAITV
    if (have_waitv(s)) {
        struct futex_waitv w[2] = {
            {.val = TICKET_ASLEEP,
             .uaddr = (uintptr_t)&t->done,
             .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG},
            {.val = gen, .uaddr = (uintptr_t)&s->lock_gen, .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG}};
        struct timespec until; /* futex_waitv takes an absolute time */
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += (long)ns;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec += until.tv_nsec / 1000000000L;
            until.tv_nsec %= 1000000000L;
        }
        /* The index of the word that woke it, or -1 (a timeout, a changed word, ENOSYS). */
        if (syscall(SYS_futex_waitv, w, 2u, 0u, &until, CLOCK_MONOTONIC) >= 0 || errno == EAGAIN ||
            errno == ETIMEDOUT || errno == EINTR)
            return;
        /*
         * ENOSYS (before Linux 5.16) or a seccomp policy's EPERM: the older
         * protocol from now on, or every sleep would return at once.
         */
        __atomic_store_n(&s->waitv, 0, __ATOMIC_RELAXED);
    }
#else
    (void)t;
#endif
    struct timespec rel = {.tv_sec = (time_t)(ns / 1000000000u),
                           .tv_nsec = (long)(ns % 1000000000u)};
    (void)syscall(SYS_futex, &s->lock_gen, FUTEX_WAIT_PRIVATE, gen, &rel, NULL, 0);
}

/*
 * t pending and the lock taken by another thread: sleep until t is done (its
 * router wakes it, poll_locked), until a thread letting go hands it the
 * polling (share_leave), or SLEEP_MAX_NS, or until_ns, whichever is first.
 * The caller counts as a spinner; asleep it counts as a sleeper instead. It
 * counts itself a sleeper and marks t before it looks at t and at the lock
 * again, so a router or a leaver after that look sees it (and the futex
 * compares t->done and lock_gen): no wake-up is lost.
 */
static void share_sleep(struct npv_share *s, struct npv_share_ticket *t, uint64_t until_ns)
{
    uint32_t gen = __atomic_load_n(&s->lock_gen, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&s->sleepers, 1u, __ATOMIC_SEQ_CST);
    __atomic_sub_fetch(&s->spinners, 1u, __ATOMIC_SEQ_CST);
    uintptr_t me = (uintptr_t)t;
    (void)__atomic_compare_exchange_n(&s->looper, &me, 0, false, __ATOMIC_SEQ_CST,
                                      __ATOMIC_SEQ_CST);
    uint32_t pending = 0;
    bool marked = __atomic_compare_exchange_n(&t->done, &pending, TICKET_ASLEEP, false,
                                              __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    uint64_t now = npv_now_ns();
    if (marked && now < until_ns) {
        uint64_t ns = until_ns - now < SLEEP_MAX_NS ? until_ns - now : SLEEP_MAX_NS;
        /* Free already? It was let go before we counted ourselves: look again, no sleep. */
        if (pthread_mutex_trylock(&s->lock) == 0)
            pthread_mutex_unlock(&s->lock);
        else
            sleep_on(s, t, gen, ns);
    }
    /* Awake: unmark t unless its router marked it done meanwhile. */
    pending = TICKET_ASLEEP;
    (void)__atomic_compare_exchange_n(&t->done, &pending, 0u, false, __ATOMIC_SEQ_CST,
                                      __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&s->spinners, 1u, __ATOMIC_SEQ_CST);
    __atomic_sub_fetch(&s->sleepers, 1u, __ATOMIC_SEQ_CST);
}

/*
 * One look at the device, with the lock held: route what finished, waking
 * the owners asleep on their tickets. How many, or errno.
 */
static int poll_locked(struct npv_share *s)
{
    struct npv_cpl c[POLL_BATCH];
    int n = s->ops->poll(s->drv, c, POLL_BATCH);
    bump(&s->polls, 1);
    if (n <= 0)
        return n;
    bool asleep = false;
    for (int i = 0; i < n; i++) {
        /* The cookie is the ticket: host memory the driver kept, not a device value. */
        struct npv_share_ticket *t = (struct npv_share_ticket *)(uintptr_t)c[i].cookie;
        t->cpl = c[i];
        t->cpl.cookie = t->cookie;
        /*
         * Done, and whether its owner sleeps on it. The exchange is the last
         * touch of t: once done, its owner may reuse or free it. Waking the
         * futex at its address after that reads nothing there.
         */
        if (__atomic_exchange_n(&t->done, 1u, __ATOMIC_SEQ_CST) == TICKET_ASLEEP) {
            if (have_waitv(s))
                (void)syscall(SYS_futex, &t->done, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
            else
                asleep = true;
        }
    }
    /* Without FUTEX_WAITV the owners sleep on lock_gen only: wake them all. */
    if (asleep)
        wake_gen(s, INT_MAX);
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
    pthread_mutex_unlock(&s->lock);
    share_leave(s);
    return r;
}

int npv_share_done(const struct npv_share_ticket *t)
{
    return __atomic_load_n(&t->done, __ATOMIC_ACQUIRE) == 1u;
}

/* Leaving a wait: no longer a spinner nor the looper; somebody must poll for the sleepers. */
static int wait_leave(struct npv_share *s, struct npv_share_ticket *t, bool spinner, int ret)
{
    uintptr_t me = (uintptr_t)t;
    if (__atomic_load_n(&s->looper, __ATOMIC_RELAXED) == me)
        (void)__atomic_compare_exchange_n(&s->looper, &me, 0, false, __ATOMIC_SEQ_CST,
                                          __ATOMIC_SEQ_CST);
    if (spinner)
        __atomic_sub_fetch(&s->spinners, 1u, __ATOMIC_SEQ_CST);
    share_leave(s);
    return ret;
}

int npv_share_wait(struct npv_share *s, struct npv_share_ticket *t, uint64_t timeout_ns)
{
    if (s == NULL || t == NULL)
        return -EINVAL;
    uint64_t deadline = 0;
    unsigned looks = 0, missed = 0;
    bool spinner = false; /* counted in s->spinners: missed the lock in this wait */
    for (;;) {
        if (npv_share_done(t))
            return wait_leave(s, t, spinner, 1);
        if (pthread_mutex_trylock(&s->lock) == 0) {
            int r = npv_share_done(t) ? 0 : poll_locked(s);
            /*
             * Looking again at once (a wait, not a single look), or leaving.
             * Stored under the lock: whoever takes it next sees it; a
             * sleeper's exchange (share_sleep) and a leaver's load order
             * themselves.
             */
            bool again = r >= 0 && timeout_ns != 0 && !npv_share_done(t);
            __atomic_store_n(&s->looper, again ? (uintptr_t)t : 0, __ATOMIC_RELEASE);
            pthread_mutex_unlock(&s->lock);
            if (npv_share_done(t))
                return wait_leave(s, t, spinner, 1);
            if (r < 0)
                return wait_leave(s, t, spinner, r);
            /*
             * Completions routed to other threads, none to us: let their
             * owners run and refill the device (threads outnumbering the
             * CPUs otherwise spin out their time slices while it drains).
             * Yielding only when an owner was asleep (and now woken) did
             * worse on the Edge TPU (4 threads: 1.24-1.44 of one thread's
             * rate against 1.42-1.53, alternating runs): owners that spin
             * need the CPU too.
             */
            if (r > 0)
                sched_yield();
        } else {
            bump(&s->contended, 1); /* racy count from many threads: a statistic only */
            if (!spinner) {
                spinner = true;
                __atomic_add_fetch(&s->spinners, 1u, __ATOMIC_SEQ_CST);
            }
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
            return wait_leave(s, t, spinner, npv_share_done(t));
        if (looks++ % 16 == 0) {
            uint64_t now = npv_now_ns();
            if (deadline == 0)
                deadline = timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
            else if (now >= deadline)
                return wait_leave(s, t, spinner, npv_share_done(t));
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

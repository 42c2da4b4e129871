/* SPDX-License-Identifier: MIT */
/*
 * Many threads on one device: a shared queue in front of a driver whose
 * submit and poll calls are one-thread-at-a-time (every driver of this
 * library), so that N worker threads submit to and reap from one device
 * without a lock of their own around it.
 *
 * Shape (a combining reaper, as a multi-producer queue with completions
 * routed back): each request carries a ticket the submitting thread owns.
 * npv_share_submit takes the share's lock, calls the driver's submit with
 * the ticket as the cookie, and lets go. npv_share_wait looks at its ticket;
 * while it is not done, the thread that gets the lock (a try-lock: nobody
 * queues behind a poller) calls the driver's poll once, without waiting,
 * stores every completion it got into the ticket it names (whichever thread
 * owns it) with a release store, and lets go. So the lock is held only
 * across non-blocking driver calls (a submit, one look at the device), never
 * across a device wait; a thread that fails the try-lock spins on its own
 * ticket and yields the CPU now and then.
 *
 * Cost: one uncontended lock and unlock per submit and per poll (an atomic
 * exchange and a store, ~20-40 ns on x86-64, and a load or three to see
 * that no waiter sleeps), one atomic exchange per completion (its ticket's
 * done word, which also says whether its owner sleeps): no system call from one thread, so a polled
 * single-thread path stays syscall-free. With several threads, a thread that finds the lock taken
 * NPV_SHARE_YIELD_EVERY times with its ticket not done sleeps on a futex (never past its wait's
 * timeout) until one of two things: its ticket is done (the thread that routed it wakes it, and
 * only it), or it is handed the polling (a thread letting go of the lock that will not look again,
 * a submit made or a wait ending, wakes one sleeper when no other waiter is awake to poll). So a
 * holder asleep in the driver (a trapped register read waiting for its reply) gets its CPU back at
 * once, and sleepers are not woken for other threads' completions nor for nothing (Linux 5.16's
 * FUTEX_WAITV sleeps on the ticket and the lock at once; on an older kernel, under a seccomp policy
 * that refuses it, or with NPUVFIO_SHARE_WAITV=0 in the environment at npv_share_new, a router
 * wakes every sleeper). A poller that routed only other threads' completions yields once, so their
 * owners run, and a blocked submit may sleep on the lock's futex.
 *
 * Deadlines and recovery stay the driver's: a job past its deadline is
 * failed by the driver's poll (and the device reset where the driver must),
 * and its completion reaches its ticket like any other. npv_share_wait's
 * timeout is not a job's deadline: it returns with the ticket still pending.
 *
 * Thread-safety: npv_share_submit, npv_share_wait and npv_share_done may be
 * called from any number of threads at once on one share. A ticket belongs to
 * the thread that submitted it until it is done (npv_share_wait returned
 * 1): only that thread waits on it. The driver must not be used directly
 * (outside the share) while the share lives. npv_share_new and
 * npv_share_free are not concurrent with anything on the same share.
 */
#ifndef NPUVFIO_SHARE_H
#define NPUVFIO_SHARE_H

#include <stdint.h>
#include <npuvfio/common.h>
#include <npuvfio/ring.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Failed try-locks of a pending ticket's thread before it sleeps until the lock is let go. */
#define NPV_SHARE_YIELD_EVERY 4u

/* The driver behind a share: both calls are made with the share's lock held. */
struct npv_share_ops {
    /*
     * Queue one request (req as given to npv_share_submit) whose completion
     * carries cookie. 0, -EAGAIN when the device's queue is full, or the
     * driver's errno.
     */
    int (*submit)(void *drv, const void *req, uint64_t cookie);
    /* Collect up to max finished requests without waiting: how many, or a negative errno. */
    int (*poll)(void *drv, struct npv_cpl *cpl, unsigned max);
};

/* One request's completion; owned by the submitting thread (do not touch while pending). */
struct npv_share_ticket {
    uint32_t done; /* the share's (also says whether the owner sleeps): read with npv_share_done */
    uint32_t reserved;
    uint64_t cookie;    /* the caller's, returned in cpl.cookie */
    struct npv_cpl cpl; /* valid once done */
};

struct npv_share;

/* ops and drv outlive the share. -EINVAL (ops without submit or poll), -ENOMEM. */
NPV_API int npv_share_new(const struct npv_share_ops *ops, void *drv, struct npv_share **out);
/* Requests still pending are forgotten (their tickets never complete). NULL is a no-op. */
NPV_API void npv_share_free(struct npv_share *s);

/*
 * Submit req through the driver; t (the caller's memory, alive until done)
 * receives the completion, cpl.cookie = cookie. When the driver's queue is
 * full, one poll is made (routing what finished) and the submit tried once
 * more: -EAGAIN if still full (wait on an earlier ticket, then retry).
 * Otherwise the driver's errno (nothing was queued, t stays unused).
 */
NPV_API int npv_share_submit(struct npv_share *s, const void *req, uint64_t cookie,
                             struct npv_share_ticket *t);
/*
 * Wait until t is done, at most timeout_ns (0: look once), helping reap for
 * every thread meanwhile. 1: done, t->cpl says how the request ended; 0: the
 * timeout passed first (t still pending, wait again); or a negative errno the
 * driver's poll returned (t still pending; the driver's rules on recovery
 * apply).
 */
NPV_API int npv_share_wait(struct npv_share *s, struct npv_share_ticket *t, uint64_t timeout_ns);
/* 1 when t is done (an acquire load: its cpl may be read), else 0. Never polls the device. */
NPV_API int npv_share_done(const struct npv_share_ticket *t);

/* Counters since npv_share_new (each loaded atomically; the set is not a snapshot). */
struct npv_share_counters {
    uint64_t submitted; /* requests the driver accepted */
    uint64_t completed; /* completions routed to tickets */
    uint64_t polls;     /* driver polls made */
    uint64_t contended; /* try-locks that found the lock taken */
};
NPV_API void npv_share_counters(const struct npv_share *s, struct npv_share_counters *out);

#ifdef __cplusplus
}
#endif

#endif

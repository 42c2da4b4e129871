/* SPDX-License-Identifier: MIT */
/*
 * What a model's workers spent computing: the CPU time a worker thread
 * spends on a job's own work (a descriptor's copy, a chunk's instructions, a
 * matmul task, a kernel task) and how many it did. CPU time of the worker
 * thread (CLOCK_THREAD_CPUTIME_ID), not wall time: the bench pins every
 * thread of a model to one CPU, so the RKNPU's three core threads take turns,
 * and wall time would count one core's task while another core ran. It is a measurement of
 * the model, a CPU standing in for the chip, not of any chip: no register
 * carries it, and a driver never sees it. The bench reads it beside the
 * host's latency, so a device row can show what is left for the driver and
 * the transport.
 *
 * The counter may live in memory shared with another process (the bench's
 * model child writes it, the bench reads it), so it holds plain atomics and
 * no pointer.
 */
#ifndef NPV_DEVICES_MODEL_COMPUTE_H
#define NPV_DEVICES_MODEL_COMPUTE_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

struct npv_model_compute {
    _Atomic uint64_t ns;   /* worker time spent computing */
    _Atomic uint64_t jobs; /* units of work counted in ns (each model says which unit) */
};

static inline uint64_t npv_model_compute_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* When a unit of work starts: 0 when nobody counts (c NULL), so a model not measured reads no
 * clock. */
static inline uint64_t npv_model_compute_start(const struct npv_model_compute *c)
{
    return c != NULL ? npv_model_compute_now() : 0;
}

/*
 * One unit of work that took the thread's CPU time since start, plus extra_ns
 * the model gives the unit without spending it (a modelled execution time);
 * c NULL: nobody counts.
 */
static inline void npv_model_compute_add_n(struct npv_model_compute *c, uint64_t start,
                                           uint64_t extra_ns, uint64_t units)
{
    if (c == NULL || units == 0)
        return;
    atomic_fetch_add_explicit(&c->ns, npv_model_compute_now() - start + extra_ns,
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&c->jobs, units, memory_order_relaxed);
}

static inline void npv_model_compute_add(struct npv_model_compute *c, uint64_t start,
                                         uint64_t extra_ns)
{
    npv_model_compute_add_n(c, start, extra_ns, 1);
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The peers that bound a ring round trip on this machine: one cache line
 * bounced between the two cores (the physical limit of any shared-memory
 * doorbell + status block), eventfd ping-pong (what one sleep and wake
 * costs), and io_uring NOPs (the cheapest kernel submission path).
 */
#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "bench.h"

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* ---- one cache line, there and back ---- */

struct cl_shared {
    _Alignas(64) uint64_t line;
    _Alignas(64) int stop;
    int cpu;
};

static void *cl_echo(void *arg)
{
    struct cl_shared *s = arg;
    bench_pin(s->cpu, false);
    uint64_t expect = 1;
    for (;;) {
        while (__atomic_load_n(&s->line, __ATOMIC_ACQUIRE) != expect) {
            if (__atomic_load_n(&s->stop, __ATOMIC_RELAXED))
                return NULL;
            relax();
        }
        __atomic_store_n(&s->line, expect + 1, __ATOMIC_RELEASE);
        expect += 2;
    }
}

int peer_cacheline(const struct bench_opts *o, const struct bench_cpus *c, struct lat *out)
{
    struct cl_shared *s = aligned_alloc(64, sizeof(*s));
    struct samples smp;
    pthread_t t;
    if (s == NULL)
        return -ENOMEM;
    memset(s, 0, sizeof(*s));
    s->cpu = c->dev;
    int rc = samples_init(&smp, 4u << 20);
    if (rc < 0)
        goto err_free;
    bench_pin(c->sub, false);
    rc = -pthread_create(&t, NULL, cl_echo, s);
    if (rc < 0)
        goto err_samples;
    uint64_t v = 1, start = bench_now(), measure_from = start + o->warmup_ns;
    uint64_t end = measure_from + o->point_ns;
    for (uint64_t t0 = start; t0 < end; v += 2) {
        __atomic_store_n(&s->line, v, __ATOMIC_RELEASE);
        while (__atomic_load_n(&s->line, __ATOMIC_ACQUIRE) != v + 1)
            relax();
        uint64_t t1 = bench_now();
        if (t0 >= measure_from)
            samples_add(&smp, t1 - t0);
        t0 = t1;
    }
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELAXED);
    pthread_join(t, NULL);
    lat_compute(&smp, out);
    rc = 0;
err_samples:
    samples_free(&smp);
err_free:
    free(s);
    return rc;
}

/* ---- eventfd ping-pong: each side sleeps in read(2) ---- */

#define EFD_STOP 1000000u

struct efd_shared {
    int ping, pong, cpu;
};

static void *efd_echo(void *arg)
{
    struct efd_shared *s = arg;
    bench_pin(s->cpu, false);
    for (;;) {
        uint64_t v;
        if (read(s->ping, &v, sizeof(v)) != sizeof(v) || v >= EFD_STOP)
            return NULL;
        v = 1;
        if (write(s->pong, &v, sizeof(v)) != sizeof(v))
            return NULL;
    }
}

int peer_eventfd(const struct bench_opts *o, const struct bench_cpus *c, struct lat *out)
{
    struct efd_shared s = {.cpu = c->dev};
    struct samples smp;
    pthread_t t;
    int rc = samples_init(&smp, 1u << 20);
    if (rc < 0)
        return rc;
    s.ping = eventfd(0, EFD_CLOEXEC);
    s.pong = eventfd(0, EFD_CLOEXEC);
    if (s.ping < 0 || s.pong < 0) {
        rc = -errno;
        goto err_fds;
    }
    bench_pin(c->sub, false);
    rc = -pthread_create(&t, NULL, efd_echo, &s);
    if (rc < 0)
        goto err_fds;
    uint64_t start = bench_now(), measure_from = start + o->warmup_ns;
    uint64_t end = measure_from + o->point_ns;
    for (uint64_t t0 = start; t0 < end;) {
        uint64_t v = 1;
        if (write(s.ping, &v, sizeof(v)) != sizeof(v) || read(s.pong, &v, sizeof(v)) != sizeof(v)) {
            rc = -EIO;
            break;
        }
        uint64_t t1 = bench_now();
        if (t0 >= measure_from)
            samples_add(&smp, t1 - t0);
        t0 = t1;
    }
    uint64_t stop = EFD_STOP;
    if (write(s.ping, &stop, sizeof(stop)) != sizeof(stop))
        rc = -EIO;
    pthread_join(t, NULL);
    lat_compute(&smp, out);
err_fds:
    if (s.ping >= 0)
        close(s.ping);
    if (s.pong >= 0)
        close(s.pong);
    samples_free(&smp);
    return rc;
}

/* ---- io_uring NOP submit + reap, in batches ---- */

static int uring_batch(struct io_uring *ring, unsigned batch)
{
    for (unsigned i = 0; i < batch; i++) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
        if (sqe == NULL)
            return -EBUSY;
        io_uring_prep_nop(sqe);
    }
    int rc = io_uring_submit_and_wait(ring, batch);
    if (rc < 0)
        return rc;
    unsigned seen = 0, head;
    struct io_uring_cqe *cqe;
    io_uring_for_each_cqe(ring, head, cqe)
    {
        seen++;
    }
    io_uring_cq_advance(ring, seen);
    return (int)seen;
}

int peer_uring_nop(const struct bench_opts *o, const struct bench_cpus *c, unsigned batch,
                   double *rate)
{
    struct io_uring ring;
    int rc = io_uring_queue_init(64, &ring, 0);
    if (rc < 0)
        return rc;
    bench_pin(c->sub, false);
    uint64_t start = bench_now(), measure_from = start + o->warmup_ns;
    uint64_t end = measure_from + o->point_ns, ops = 0, t = start, t_first = 0;
    while (t < end) {
        rc = uring_batch(&ring, batch);
        if (rc < 0)
            break;
        t = bench_now();
        if (t >= measure_from) {
            if (t_first == 0)
                t_first = t;
            else
                ops += (uint64_t)rc;
        }
    }
    io_uring_queue_exit(&ring);
    if (rc < 0)
        return rc;
    *rate = t > t_first && t_first != 0 ? (double)ops * 1e9 / (double)(t - t_first) : 0;
    return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * DPDK's rte_ring, single producer / single consumer, moving 16-byte
 * descriptors in bursts of 32 between the two cores: the best-known
 * shared-memory queue, as a throughput bar for the ring engine. Used without
 * the EAL: the ring is sized with rte_ring_get_memsize_elem() and
 * initialised with rte_ring_init() on cache-line-aligned memory.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#if NPV_BENCH_HAVE_DPDK
#include <rte_ring.h>
#include <rte_ring_elem.h>

#define RR_ENTRIES 1024u
#define RR_BURST   32u

struct rr_desc {
    uint64_t a, b;
};
_Static_assert(sizeof(struct rr_desc) == 16, "16-byte descriptors");

struct rr_shared {
    struct rte_ring *ring;
    int cpu;
    _Alignas(64) int stop;
};

static void *rr_producer(void *arg)
{
    struct rr_shared *s = arg;
    struct rr_desc burst[RR_BURST];
    uint64_t seq = 0;
    bench_pin(s->cpu, false);
    while (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED)) {
        for (unsigned i = 0; i < RR_BURST; i++)
            burst[i] = (struct rr_desc){seq + i, ~(seq + i)};
        seq += rte_ring_sp_enqueue_burst_elem(s->ring, burst, sizeof(burst[0]), RR_BURST, NULL);
    }
    return NULL;
}

int peer_rte_ring(const struct bench_opts *o, const struct bench_cpus *c, double *rate)
{
    ssize_t sz = rte_ring_get_memsize_elem(sizeof(struct rr_desc), RR_ENTRIES);
    if (sz < 0)
        return (int)sz;
    struct rr_shared s = {.cpu = c->sub};
    s.ring = aligned_alloc(64, ((size_t)sz + 63) & ~(size_t)63);
    if (s.ring == NULL)
        return -ENOMEM;
    int rc = rte_ring_init(s.ring, "npv_bench", RR_ENTRIES, RING_F_SP_ENQ | RING_F_SC_DEQ);
    if (rc < 0)
        goto out;
    pthread_t t;
    rc = -pthread_create(&t, NULL, rr_producer, &s);
    if (rc < 0)
        goto out;
    /* The consumer counts: it is the side that proves an element crossed. */
    bench_pin(c->dev, false);
    struct rr_desc burst[RR_BURST];
    uint64_t got = 0, bad = 0, expect = 0;
    uint64_t start = bench_now(), measure_from = start + o->warmup_ns, t_first = 0, now = start;
    uint64_t end = measure_from + o->point_ns;
    while (now < end) {
        unsigned n =
            rte_ring_sc_dequeue_burst_elem(s.ring, burst, sizeof(burst[0]), RR_BURST, NULL);
        for (unsigned i = 0; i < n; i++)
            bad += burst[i].a != expect++;
        now = bench_now();
        if (now >= measure_from) {
            if (t_first == 0)
                t_first = now;
            else
                got += n;
        }
    }
    __atomic_store_n(&s.stop, 1, __ATOMIC_RELAXED);
    pthread_join(t, NULL);
    bench_pin(c->sub, false);
    *rate = now > t_first ? (double)got * 1e9 / (double)(now - t_first) : 0;
    rc = bad == 0 ? 0 : -EIO;
out:
    free(s.ring);
    return rc;
}
#else
int peer_rte_ring(const struct bench_opts *o, const struct bench_cpus *c, double *rate)
{
    (void)o;
    (void)c;
    *rate = 0;
    return -ENOTSUP;
}
#endif

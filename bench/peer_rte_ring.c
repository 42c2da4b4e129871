/* SPDX-License-Identifier: MIT */
/*
 * DPDK's rte_ring between the two cores, used without the EAL (each ring
 * sized with rte_ring_get_memsize_elem() and initialised with
 * rte_ring_init() on cache-line-aligned memory), twice:
 *  - the bound: SPSC, 16-byte elements one way in bursts of 32, no
 *    completion; the best-known shared-memory queue at its fastest;
 *  - the same work as ours: what a user would build instead of the ring
 *    engine, requests one way and completions back through two rings.
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

/* ---- the same work as ours: requests and completions through two rings ---- */

#define SW_ENTRIES   512u /* at least twice the deepest queue, as our ring */
#define SW_MAX_DESC  256u
#define SW_OP_NOP    0u
#define SW_CPL_OK    0
#define SW_CPL_BADOP (-22)

/* A request's head, as the testdev descriptor's: opcode, flags, then the payload. */
struct sw_req_head {
    uint32_t opcode;
    uint32_t flags;
    uint64_t cookie;
};

/* A completion, as struct npv_cpl: the request's cookie and a status. */
struct sw_cpl {
    uint64_t cookie;
    int32_t status;
    uint32_t dev_error;
};
_Static_assert(sizeof(struct sw_cpl) == 16, "16-byte completions");

struct sw_shared {
    struct rte_ring *req, *cpl;
    unsigned desc_size;
    uint8_t *worker_reqs;       /* SW_ENTRIES requests */
    struct sw_cpl *worker_cpls; /* SW_ENTRIES completions */
    int cpu;
    _Alignas(64) int stop;
};

static struct rte_ring *sw_ring_new(const char *name, unsigned esize)
{
    ssize_t sz = rte_ring_get_memsize_elem(esize, SW_ENTRIES);
    if (sz < 0)
        return NULL;
    struct rte_ring *r = aligned_alloc(64, ((size_t)sz + 63) & ~(size_t)63);
    if (r != NULL && rte_ring_init(r, name, SW_ENTRIES, RING_F_SP_ENQ | RING_F_SC_DEQ) < 0) {
        free(r);
        r = NULL;
    }
    return r;
}

/*
 * The worker, on the device core: take every request there is (as our model's
 * poller works everything up to the doorbell), look at each, and send the
 * completions back in one burst.
 */
static void *sw_worker(void *arg)
{
    struct sw_shared *s = arg;
    uint8_t *reqs = s->worker_reqs;
    struct sw_cpl *cpls = s->worker_cpls;
    bench_pin(s->cpu, false);
    while (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED)) {
        unsigned n = rte_ring_sc_dequeue_burst_elem(s->req, reqs, s->desc_size, SW_ENTRIES, NULL);
        if (n == 0) {
            rte_pause();
            continue;
        }
        for (unsigned i = 0; i < n; i++) {
            struct sw_req_head h;
            memcpy(&h, reqs + (size_t)i * s->desc_size, sizeof(h));
            cpls[i] = (struct sw_cpl){.cookie = h.cookie,
                                      .status = h.opcode == SW_OP_NOP ? SW_CPL_OK : SW_CPL_BADOP};
        }
        for (unsigned sent = 0; sent < n;)
            sent += rte_ring_sp_enqueue_burst_elem(s->cpl, cpls + sent, sizeof(cpls[0]), n - sent,
                                                   NULL);
    }
    return NULL;
}

/* Queue n requests (the ring has room: at most qd are ever out). */
static void sw_submit(struct sw_shared *s, uint8_t *buf, unsigned n, uint64_t *cookie)
{
    for (unsigned i = 0; i < n; i++) {
        struct sw_req_head h = {.opcode = SW_OP_NOP, .cookie = (*cookie)++};
        memcpy(buf + (size_t)i * s->desc_size, &h, sizeof(h));
    }
    for (unsigned sent = 0; sent < n;)
        sent += rte_ring_sp_enqueue_burst_elem(s->req, buf + (size_t)sent * s->desc_size,
                                               s->desc_size, n - sent, NULL);
}

int peer_same_work(const struct bench_opts *o, const struct bench_cpus *c, unsigned qd,
                   double *rate)
{
    if (o->desc_size < sizeof(struct sw_req_head) || o->desc_size > SW_MAX_DESC ||
        o->desc_size % 4 != 0 || qd == 0 || qd > SW_ENTRIES / 2)
        return -EINVAL;
    struct sw_shared s = {.desc_size = o->desc_size, .cpu = c->dev};
    uint8_t *buf = calloc(SW_ENTRIES, o->desc_size);
    struct sw_cpl cpls[32];
    int rc = -ENOMEM;
    s.req = sw_ring_new("npv_sw_req", o->desc_size);
    s.cpl = sw_ring_new("npv_sw_cpl", sizeof(struct sw_cpl));
    s.worker_reqs = calloc(SW_ENTRIES, o->desc_size);
    s.worker_cpls = calloc(SW_ENTRIES, sizeof(struct sw_cpl));
    if (buf == NULL || s.req == NULL || s.cpl == NULL || s.worker_reqs == NULL ||
        s.worker_cpls == NULL)
        goto out;
    pthread_t t;
    rc = -pthread_create(&t, NULL, sw_worker, &s);
    if (rc < 0)
        goto out;
    bench_pin(c->sub, false);
    unsigned batch = bench_batch(qd);
    uint64_t cookie = 0, expect = 0, bad = 0, done = 0, t_first = 0;
    sw_submit(&s, buf, qd, &cookie);
    uint64_t start = bench_now(), measure_from = start + o->warmup_ns, now = start;
    uint64_t end = measure_from + o->point_ns;
    /* Reap exactly `batch` completions, then refill as many: as ours does at this depth. */
    while (now < end) {
        unsigned got = 0;
        while (got < batch)
            got += rte_ring_sc_dequeue_burst_elem(s.cpl, cpls + got, sizeof(cpls[0]), batch - got,
                                                  NULL);
        for (unsigned i = 0; i < got; i++)
            bad += cpls[i].cookie != expect++ || cpls[i].status != SW_CPL_OK;
        now = bench_now();
        if (now >= measure_from) {
            if (t_first == 0)
                t_first = now;
            else
                done += got;
        }
        sw_submit(&s, buf, got, &cookie);
    }
    __atomic_store_n(&s.stop, 1, __ATOMIC_RELAXED);
    pthread_join(t, NULL);
    *rate = now > t_first && t_first != 0 ? (double)done * 1e9 / (double)(now - t_first) : 0;
    rc = bad == 0 ? 0 : -EIO;
out:
    free(s.req);
    free(s.cpl);
    free(s.worker_reqs);
    free(s.worker_cpls);
    free(buf);
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

int peer_same_work(const struct bench_opts *o, const struct bench_cpus *c, unsigned qd,
                   double *rate)
{
    (void)o;
    (void)c;
    (void)qd;
    *rate = 0;
    return -ENOTSUP;
}
#endif

/* SPDX-License-Identifier: MIT */
/*
 * The ring engine against the generic test device's model, over vfio-user.
 * The model runs in a child process pinned to the "device" core (its poller
 * spins on the doorbell page, which is shared memory); the submitter is
 * pinned to the other core. The ring and status block live in one DMA buffer
 * of the page size under test, shared with the model by fd.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <npuvfio/hugepages.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/domain.h>
#include <npuvfio/ring.h>
#include <npuvfio/testdev.h>

#include "bench.h"
#include "registry.h"

#define RING_ENTRIES 256u
#define WAIT_NS      (5ull * 1000000000ull) /* a wait never near this on a healthy run */

struct ours {
    const struct bench_opts *o;
    const struct bench_cpus *c;
    struct bench_model model;
    struct npv_ctx *ctx;
    struct npv_domain *dom;
    struct npv_dev *dev;
    struct npv_testdev *td;
    struct npv_ring *ring;
};

int ours_open(const struct bench_opts *o, const struct bench_cpus *c, struct ours **out)
{
    struct ours *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return -ENOMEM;
    t->o = o;
    t->c = c;
    int rc = bench_model_start(npv_device_find("testdev"), c, false, &t->model);
    if (rc < 0) {
        fprintf(stderr, "npuvfio-bench: cannot start the testdev model: %s\n", npv_strerror(rc));
        goto err;
    }
    bench_pin(c->sub, false);
    rc = bench_ctx_new(&t->ctx);
    if (rc == 0)
        rc = npv_domain_new(t->ctx, NULL, &t->dom);
    if (rc == 0)
        rc = npv_dev_open_vfio_user(t->ctx, t->model.path, t->dom, NULL, &t->dev);
    if (rc < 0) {
        fprintf(stderr, "npuvfio-bench: cannot open the testdev model over vfio-user: %s\n",
                npv_strerror(rc));
        goto err;
    }
    *out = t;
    return 0;
err:
    ours_close(t);
    return rc;
}

void ours_close(struct ours *t)
{
    if (t == NULL)
        return;
    npv_dev_close(t->dev);
    npv_domain_put(t->dom);
    npv_ctx_free(t->ctx);
    bench_model_stop(&t->model);
    free(t);
}

static void ring_teardown(struct ours *t)
{
    npv_testdev_close(t->td);
    t->td = NULL;
    t->ring = NULL;
}

/* The driver's ring in memory of the page size under test; MSI-X for the irq and hybrid rows. */
static int ring_setup(struct ours *t, enum npv_dma_page page, size_t *page_size)
{
    struct npv_dma_opts mem = {.page = page, .numa_node = -1, .require_page = 1};
    struct npv_testdev_config cfg = {.entries = RING_ENTRIES, .mem = &mem, .irq = true};
    int rc = npv_testdev_open(t->dev, &cfg, &t->td);
    if (rc < 0)
        return rc;
    t->ring = npv_testdev_ring(t->td);
    /* A wait that finds its completions while it spins costs the model no interrupt. */
    rc = npv_testdev_irq_on_sleep_only(t->td, true);
    if (rc < 0) {
        ring_teardown(t);
        return rc;
    }
    *page_size = npv_dma_page_size(npv_testdev_ring_memory(t->td));
    return 0;
}

static inline int push_nop(struct ours *t, uint64_t cookie, bool irq)
{
    void *slot;
    int rc = npv_ring_next(t->ring, cookie, &slot);
    if (rc < 0)
        return rc;
    *(struct npv_testdev_desc *)slot = npv_testdev_nop(irq ? NPV_TESTDEV_DESC_IRQ : 0);
    return 0;
}

/* One submit + wait, QD1. Returns 0 or a negative errno. */
static inline int round_trip(struct ours *t, enum npv_ring_wait_mode mode, uint64_t cookie)
{
    struct npv_cpl cpl;
    int rc = push_nop(t, cookie, mode != NPV_RING_WAIT_POLL);
    if (rc < 0)
        return rc;
    npv_ring_submit(t->ring);
    rc = npv_ring_wait(t->ring, mode, 1, WAIT_NS, &cpl, 1);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return -ETIMEDOUT; /* the wait ran out; on a healthy run it never does */
    if (cpl.cookie != cookie || cpl.status != 0)
        return -EIO;
    return 0;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t irq_sleeps(const struct ours *t)
{
    struct npv_ring_stats st;
    npv_ring_stats(t->ring, &st);
    return st.irq_sleeps;
}

/* Counters a point reads before and after its measured part. */
struct cost_mark {
    uint64_t cpu_ns, sleeps;
};

static void cost_mark(const struct ours *t, struct cost_mark *m)
{
    m->cpu_ns = thread_cpu_ns();
    m->sleeps = irq_sleeps(t);
}

static void cost_add(const struct ours *t, const struct cost_mark *from, uint64_t jobs,
                     struct per_job *out)
{
    struct cost_mark to;
    cost_mark(t, &to);
    /* No job in the point: nothing measured (NAN), never a 0. */
    series_add(&out->wakeups, jobs ? (double)(to.sleeps - from->sleeps) / (double)jobs : NAN);
    series_add(&out->cpu_ns, jobs ? (double)(to.cpu_ns - from->cpu_ns) / (double)jobs : NAN);
}

static int run_rtt(struct ours *t, enum npv_ring_wait_mode mode, struct ours_mem *m)
{
    struct samples smp;
    int rc = samples_init(&smp, 4u << 20);
    if (rc < 0)
        return rc;
    uint64_t start = bench_now(), measure_from = start + t->o->warmup_ns;
    uint64_t end = measure_from + t->o->point_ns, cookie = 0, jobs = 0;
    struct cost_mark mark = {0};
    for (uint64_t t0 = start; t0 < end;) {
        if (jobs == 0 && t0 >= measure_from)
            cost_mark(t, &mark);
        rc = round_trip(t, mode, cookie++);
        if (rc < 0)
            break;
        uint64_t t1 = bench_now();
        if (t0 >= measure_from) {
            samples_add(&smp, t1 - t0);
            jobs++;
        }
        t0 = t1;
    }
    cost_add(t, &mark, jobs, &m->rtt_cost[mode]);
    lat_compute(&smp, &m->rtt[mode]);
    /* No round trip finished in the point: nothing measured (NAN), never a 0. */
    series_add(&m->rtt_p50[mode], smp.n != 0 ? m->rtt[mode].p50 : NAN);
    samples_free(&smp);
    return rc;
}

/*
 * Claim n descriptors and ring the doorbell once. In irq and hybrid modes
 * the descriptor that ends each reap batch asks for an interrupt (cookies
 * count from 0 and the submitter reaps exactly `batch` at a time, so that is
 * every batch-th one): one interrupt, and at most one wake-up, per batch.
 */
static int refill(struct ours *t, unsigned n, unsigned batch, bool irq, uint64_t *cookie)
{
    for (unsigned i = 0; i < n; i++) {
        uint64_t c = (*cookie)++;
        int rc = push_nop(t, c, irq && (c + 1) % batch == 0);
        if (rc < 0)
            return rc;
    }
    npv_ring_submit(t->ring);
    return 0;
}

static int run_rate(struct ours *t, enum npv_ring_wait_mode mode, unsigned qd, double *rate,
                    struct per_job *cost)
{
    struct npv_cpl cpl[RING_ENTRIES];
    bool irq = mode != NPV_RING_WAIT_POLL;
    unsigned batch = bench_batch(qd);
    uint64_t cookie = 0, done = 0, t_first = 0;
    struct cost_mark mark = {0};
    int rc = refill(t, qd, batch, irq, &cookie);
    uint64_t start = bench_now(), measure_from = start + t->o->warmup_ns, now = start;
    uint64_t end = measure_from + t->o->point_ns;
    /*
     * Reap exactly `batch` (half the queue depth, at most 32: the peers'
     * burst) and refill as many: one doorbell and at most one interrupt
     * per batch, as a pipelined submitter at this depth would run.
     */
    while (rc == 0 && now < end) {
        int got = npv_ring_wait(t->ring, mode, batch, WAIT_NS, cpl, batch);
        if (got < 0 || (unsigned)got < batch) {
            rc = got < 0 ? got : -ETIMEDOUT;
            break;
        }
        for (int i = 0; i < got; i++)
            if (cpl[i].status != 0)
                rc = -EIO;
        now = bench_now();
        if (now >= measure_from) {
            if (t_first == 0) {
                t_first = now;
                cost_mark(t, &mark);
            } else {
                done += (uint64_t)got;
            }
        }
        if (rc == 0)
            rc = refill(t, (unsigned)got, batch, irq, &cookie);
    }
    if (t_first != 0)
        cost_add(t, &mark, done, cost);
    /* Drain, so the next point starts empty. */
    for (uint64_t give_up = bench_now() + WAIT_NS; rc == 0;) {
        int got = npv_ring_poll(t->ring, cpl, RING_ENTRIES);
        if (got < 0)
            rc = got;
        else if (got == 0 && npv_ring_in_flight(t->ring) == 0)
            break;
        else if (got == 0 && bench_now() > give_up)
            rc = -ETIMEDOUT;
    }
    *rate = now > t_first && t_first != 0 ? (double)done * 1e9 / (double)(now - t_first) : 0;
    return rc;
}

static int run_mem(struct ours *t, struct ours_mem *m)
{
    const struct bench_opts *o = t->o;
    struct lat cl;
    int rc = peer_cacheline(o, t->c, &cl);
    if (rc < 0) {
        fprintf(stderr, "npuvfio-bench: cache-line peer next to ours: %s\n", npv_strerror(rc));
        return rc;
    }
    series_add(&m->cacheline_adjacent_p50, cl.n != 0 ? cl.p50 : NAN);
    bench_progress(o, "peer cache line, %zu KiB slot: p50 %.0f ns", m->page_size >> 10, cl.p50);
    for (int mode = 0; mode < BENCH_MODES; mode++) {
        if (!o->mode_on[mode])
            continue;
        rc = run_rtt(t, (enum npv_ring_wait_mode)mode, m);
        if (rc < 0) {
            fprintf(stderr, "npuvfio-bench: %s QD1 round trips: %s\n", bench_mode_names[mode],
                    npv_strerror(rc));
            return rc;
        }
        bench_progress(o, "ours %s QD1 round trips, %zu KiB: p50 %.0f ns", bench_mode_names[mode],
                       m->page_size >> 10, m->rtt[mode].p50);
        for (unsigned q = 0; q < o->nqd; q++) {
            double rate;
            rc =
                run_rate(t, (enum npv_ring_wait_mode)mode, o->qd[q], &rate, &m->rate_cost[mode][q]);
            if (rc < 0) {
                fprintf(stderr, "npuvfio-bench: %s at QD %u: %s\n", bench_mode_names[mode],
                        o->qd[q], npv_strerror(rc));
                return rc;
            }
            /* 0: no job finished in the point, nothing measured (NAN). */
            series_add(&m->rate[mode][q], rate > 0 ? rate : NAN);
            bench_progress(o, "ours %s QD%u, %zu KiB: %.2f M descriptors/s", bench_mode_names[mode],
                           o->qd[q], m->page_size >> 10, rate / 1e6);
        }
    }
    return 0;
}

/* ---- system calls per round trip ---- */

struct sc_job {
    struct ours *t;
    enum npv_ring_wait_mode mode;
    uint64_t n, done, syscalls;
    int last_nr;
    int rc;
};

static void sc_loop(void *arg, const uint64_t *counter, const int *last_nr)
{
    struct sc_job *j = arg;
    uint64_t before = __atomic_load_n(counter, __ATOMIC_ACQUIRE);
    for (j->done = 0; j->done < j->n; j->done++) {
        j->rc = round_trip(j->t, j->mode, j->done);
        if (j->rc < 0)
            break;
    }
    j->syscalls = __atomic_load_n(counter, __ATOMIC_ACQUIRE) - before;
    j->last_nr = j->syscalls != 0 ? __atomic_load_n(last_nr, __ATOMIC_RELAXED) : -1;
}

static int count_syscalls(struct ours *t, struct ours_results *r)
{
    /* Warm the path first so first-touch page faults are not in the window (they are not calls). */
    for (uint64_t i = 0; i < 1000; i++) {
        int rc = round_trip(t, NPV_RING_WAIT_POLL, i);
        if (rc < 0)
            return rc;
    }
    struct sc_job j = {.t = t, .mode = NPV_RING_WAIT_POLL, .n = t->o->quick ? 20000 : 200000};
    int rc = syscount_run(sc_loop, &j);
    if (rc < 0)
        return rc;
    if (j.rc < 0)
        return j.rc;
    r->sys_poll = j.syscalls;
    r->rt_poll = j.done;
    r->last_nr_poll = j.last_nr;
    struct sc_job ji = {.t = t, .mode = NPV_RING_WAIT_IRQ, .n = t->o->quick ? 200 : 2000};
    rc = syscount_run(sc_loop, &ji);
    if (rc < 0)
        return rc;
    if (ji.rc < 0)
        return ji.rc;
    r->sys_irq = ji.syscalls;
    r->rt_irq = ji.done;
    return 0;
}

int ours_rep(struct ours *t, int m, struct ours_results *r)
{
    static const enum npv_dma_page pages[BENCH_MEMS] = {NPV_DMA_PAGE_2M, NPV_DMA_PAGE_4K};
    struct ours_mem *mem = &r->mem[m];
    /* Hugepages absent: said once, in the first repetition; the 4 KiB rows still run. */
    if (pages[m] == NPV_DMA_PAGE_2M && mem->skipped != NULL)
        return 0;
    struct npv_hugepages pool;
    if (pages[m] == NPV_DMA_PAGE_2M &&
        (npv_hugepages_read(t->ctx, 2u << 20, -1, &pool) < 0 || pool.free == 0)) {
        mem->skipped = "no free 2 MiB hugepage (reserve some: npuvfio hugepages 64)";
        fprintf(stderr, "npuvfio-bench: %s\n", mem->skipped);
        return 0;
    }
    bench_pin(t->c->sub, false);
    int rc = ring_setup(t, pages[m], &mem->page_size);
    if (rc < 0) {
        mem->skipped = pages[m] == NPV_DMA_PAGE_2M
                           ? "no free 2 MiB hugepage (reserve some: npuvfio hugepages 64)"
                           : "cannot allocate 4 KiB DMA memory";
        fprintf(stderr, "npuvfio-bench: %s: %s\n", mem->skipped, npv_strerror(rc));
        /* Without hugepages the 4 KiB rows still run. */
        return pages[m] == NPV_DMA_PAGE_2M ? 0 : rc;
    }
    rc = run_mem(t, mem);
    if (rc == 0 && r->syscount_rc == -ENODATA) {
        r->syscount_rc = count_syscalls(t, r);
        if (r->syscount_rc < 0)
            fprintf(stderr, "npuvfio-bench: counting system calls: %s\n",
                    npv_strerror(r->syscount_rc));
    }
    ring_teardown(t);
    if (rc == 0)
        mem->ran = true;
    return rc;
}

/* ---- open loop (--rate) ---- */

int ours_max_rate(struct ours *t, double *rate)
{
    size_t ps;
    bench_pin(t->c->sub, false);
    int rc = ring_setup(t, NPV_DMA_PAGE_4K, &ps);
    if (rc < 0)
        return rc;
    struct per_job cost = {0};
    rc = run_rate(t, NPV_RING_WAIT_POLL, 256, rate, &cost);
    ring_teardown(t);
    return rc;
}

/* When request k is due: start + k / rate, in ns. */
static inline uint64_t due_ns(uint64_t start, double period_ns, uint64_t k)
{
    return start + (uint64_t)((double)k * period_ns);
}

int ours_open_loop(struct ours *t, double rate, uint64_t count, struct open_point *out)
{
    memset(out, 0, sizeof(*out));
    out->rate = rate;
    if (!(rate > 0) || count == 0 || count > BENCH_MAX_COUNT)
        return -EINVAL;
    struct samples smp;
    int rc = samples_init(&smp, count);
    if (rc < 0)
        return rc;
    size_t ps;
    bench_pin(t->c->sub, false);
    rc = ring_setup(t, NPV_DMA_PAGE_4K, &ps);
    if (rc < 0) {
        samples_free(&smp);
        return rc;
    }
    double period_ns = 1e9 / rate;
    /* The schedule is fixed before the first request: a late start is latency too. */
    uint64_t start = bench_now() + 1000000u, sent = 0, done = 0, last = start, full_at = UINT64_MAX;
    uint64_t give_up = due_ns(start, period_ns, count) + WAIT_NS;
    struct npv_cpl cpl[32];
    while (rc == 0 && done < count) {
        uint64_t now = bench_now();
        if (now > give_up) {
            rc = -ETIMEDOUT;
            break;
        }
        /* Every request now due goes in, behind one doorbell, while the ring has room. */
        unsigned pushed = 0;
        while (sent < count && due_ns(start, period_ns, sent) <= now) {
            rc = push_nop(t, sent, false);
            if (rc == -EAGAIN) { /* full: the request waits, and its latency counts it */
                rc = 0;
                if (sent != full_at) {
                    out->full++;
                    full_at = sent;
                }
                break;
            }
            if (rc < 0)
                break;
            sent++;
            pushed++;
        }
        if (pushed > 0)
            npv_ring_submit(t->ring);
        int got = npv_ring_poll(t->ring, cpl, 32);
        if (got < 0) {
            rc = got;
            break;
        }
        if (got == 0)
            continue;
        last = bench_now();
        for (int i = 0; i < got; i++) {
            if (cpl[i].status != 0 || cpl[i].cookie >= sent) {
                rc = -EIO;
                break;
            }
            samples_add(&smp, last - due_ns(start, period_ns, cpl[i].cookie));
            done++;
        }
    }
    /* Drain what is left after a failure, so the ring closes empty. */
    for (uint64_t until = bench_now() + WAIT_NS;
         rc < 0 && npv_ring_in_flight(t->ring) != 0 && bench_now() < until;)
        (void)npv_ring_poll(t->ring, cpl, 32);
    ring_teardown(t);
    out->count = done;
    out->achieved = last > start ? (double)done * 1e9 / (double)(last - start) : NAN;
    lat_compute(&smp, &out->lat);
    samples_free(&smp);
    return rc;
}

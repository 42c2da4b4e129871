/* SPDX-License-Identifier: MIT */
/* The threaded sample (threaded.h): each device's requests behind an npv_share. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <npuvfio/aicore.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/domain.h>
#include <npuvfio/edgetpu.h>
#include <npuvfio/rknpu.h>
#include <npuvfio/testdev.h>

#include "aicore/sample.h"
#include "edgetpu/sample.h"
#include "rknpu/sample.h"
#include "threaded.h"

#define TD_BYTES 64u

struct threaded_sample {
    const struct npv_share_ops *ops;
    void *drv;     /* what ops are called with */
    void *dev_drv; /* the driver */
    unsigned slots;
    void (*prepare)(struct threaded_sample *ts, unsigned slot, uint64_t i, void *req);
    bool (*check)(struct threaded_sample *ts, unsigned slot, uint64_t i);
    void (*close)(struct threaded_sample *ts);
    /* testdev */
    struct npv_dma *td_buf;
    npv_iova_t td_iova;
    struct npv_domain *td_dom;
    /* edgetpu */
    struct edgetpu_sample et;
    struct npv_edgetpu_executable *et_exe;
    struct npv_dma **et_in, **et_out;
    uint64_t *et_in_va, *et_out_va;
    /* rknpu */
    struct rknpu_sample_mm **rk;
    struct npv_rknpu_job *rk_job; /* per slot: what its request points to */
    /* aicore: the two slots as one queue (npv_aicore_share_ops) */
    struct aicore_sample_graph *ag;
    struct npv_aicore_queue *ac_q;
};

/* ---- testdev: COPY jobs on its ring (npv_testdev_share_ops) ---- */

static uint8_t td_byte(uint64_t i, unsigned slot, unsigned j)
{
    return (uint8_t)(i * 131u + j * 7u + slot * 17u + 1u);
}

static void td_prepare(struct threaded_sample *ts, unsigned slot, uint64_t i, void *req)
{
    uint8_t *src = (uint8_t *)npv_dma_vaddr(ts->td_buf) + 2u * slot * TD_BYTES;
    for (unsigned j = 0; j < TD_BYTES; j++)
        src[j] = td_byte(i, slot, j);
    memset(src + TD_BYTES, 0, TD_BYTES);
    npv_iova_t s = ts->td_iova + 2u * slot * TD_BYTES;
    struct npv_testdev_desc d = npv_testdev_copy(s + TD_BYTES, s, TD_BYTES, 0);
    memcpy(req, &d, sizeof(d));
}

static bool td_check(struct threaded_sample *ts, unsigned slot, uint64_t i)
{
    const uint8_t *dst = (uint8_t *)npv_dma_vaddr(ts->td_buf) + (2u * slot + 1u) * TD_BYTES;
    for (unsigned j = 0; j < TD_BYTES; j++)
        if (dst[j] != td_byte(i, slot, j))
            return false;
    return true;
}

static void td_close(struct threaded_sample *ts)
{
    if (ts->td_buf != NULL) {
        npv_dma_unmap(ts->td_buf, ts->td_dom);
        npv_dma_free(ts->td_buf);
    }
}

static int td_open(struct threaded_sample *ts)
{
    struct npv_dev *dev = npv_testdev_dev(ts->dev_drv);
    ts->td_dom = npv_dev_domain(dev);
    ts->ops = npv_testdev_share_ops();
    ts->drv = ts->dev_drv;
    ts->prepare = td_prepare;
    ts->check = td_check;
    ts->close = td_close;
    int r = npv_dma_alloc(npv_dev_ctx(dev), 2u * ts->slots * TD_BYTES, NULL, &ts->td_buf);
    if (r == 0)
        r = npv_dma_map(ts->td_buf, ts->td_dom, NPV_DMA_RW, &ts->td_iova);
    return r;
}

/* ---- Edge TPU: the sample network on its one queue (npv_edgetpu_share_ops) ---- */

static void et_prepare(struct threaded_sample *ts, unsigned slot, uint64_t i, void *req)
{
    edgetpu_sample_input((uint32_t)(i * ts->slots + slot), npv_dma_vaddr(ts->et_in[slot]));
    memset(npv_dma_vaddr(ts->et_out[slot]), 0xcc, EDGETPU_SAMPLE_OUTPUT_BYTES);
    struct npv_edgetpu_request q = {
        .exe = ts->et_exe, .input_va = &ts->et_in_va[slot], .output_va = &ts->et_out_va[slot]};
    memcpy(req, &q, sizeof(q));
}

static bool et_check(struct threaded_sample *ts, unsigned slot, uint64_t i)
{
    int8_t x[EDGETPU_SAMPLE_INPUT_BYTES], want[EDGETPU_SAMPLE_OUTPUT_BYTES];
    edgetpu_sample_input((uint32_t)(i * ts->slots + slot), x);
    edgetpu_sample_reference(&ts->et, x, want);
    return memcmp(npv_dma_vaddr(ts->et_out[slot]), want, sizeof(want)) == 0;
}

static void et_close(struct threaded_sample *ts)
{
    struct npv_domain *dom = npv_dev_domain(npv_edgetpu_dev(ts->dev_drv));
    for (unsigned k = 0; ts->et_in != NULL && k < ts->slots; k++) {
        if (ts->et_in_va[k] != 0)
            npv_edgetpu_unmap(ts->dev_drv, ts->et_in_va[k], EDGETPU_SAMPLE_INPUT_BYTES);
        if (ts->et_out_va[k] != 0)
            npv_edgetpu_unmap(ts->dev_drv, ts->et_out_va[k], EDGETPU_SAMPLE_OUTPUT_BYTES);
        if (ts->et_in[k] != NULL) {
            npv_dma_unmap(ts->et_in[k], dom);
            npv_dma_free(ts->et_in[k]);
        }
        if (ts->et_out[k] != NULL) {
            npv_dma_unmap(ts->et_out[k], dom);
            npv_dma_free(ts->et_out[k]);
        }
    }
    npv_edgetpu_unload(ts->et_exe);
    free(ts->et_in);
    free(ts->et_out);
    free(ts->et_in_va);
    free(ts->et_out_va);
}

static int et_map(struct threaded_sample *ts, struct npv_dma **dma, size_t len, uint64_t *va)
{
    struct npv_dev *dev = npv_edgetpu_dev(ts->dev_drv);
    int r = npv_dma_alloc(npv_dev_ctx(dev), 4096, NULL, dma);
    if (r == 0)
        r = npv_dma_map(*dma, npv_dev_domain(dev), NPV_DMA_RW, NULL);
    if (r == 0)
        r = npv_edgetpu_map(ts->dev_drv, *dma, 0, len, va);
    return r;
}

static int et_open(struct threaded_sample *ts)
{
    ts->ops = npv_edgetpu_share_ops();
    ts->drv = ts->dev_drv;
    ts->prepare = et_prepare;
    ts->check = et_check;
    ts->close = et_close;
    ts->et_in = calloc(ts->slots, sizeof(*ts->et_in));
    ts->et_out = calloc(ts->slots, sizeof(*ts->et_out));
    ts->et_in_va = calloc(ts->slots, sizeof(*ts->et_in_va));
    ts->et_out_va = calloc(ts->slots, sizeof(*ts->et_out_va));
    if (ts->et_in == NULL || ts->et_out == NULL || ts->et_in_va == NULL || ts->et_out_va == NULL)
        return -ENOMEM;
    edgetpu_sample_init(&ts->et, 7);
    int r = npv_edgetpu_load(ts->dev_drv, &ts->et.desc, &ts->et_exe);
    for (unsigned k = 0; r == 0 && k < ts->slots; k++) {
        r = et_map(ts, &ts->et_in[k], EDGETPU_SAMPLE_INPUT_BYTES, &ts->et_in_va[k]);
        if (r == 0)
            r = et_map(ts, &ts->et_out[k], EDGETPU_SAMPLE_OUTPUT_BYTES, &ts->et_out_va[k]);
    }
    return r;
}

/* ---- RKNPU: int8 matmuls, the driver choosing the core (npv_rknpu_share_ops) ---- */

static const struct rknpu_sample_shape RK_SHAPE = {
    .dtype = NPV_RKNPU_INT8, .m = 4, .k = 32, .n = 32, .bias = true, .relu = true};

static void rk_prepare(struct threaded_sample *ts, unsigned slot, uint64_t i, void *req)
{
    rknpu_sample_mm_poison(ts->rk[slot]);
    ts->rk_job[slot] = (struct npv_rknpu_job){
        .tasks = &ts->rk[slot]->task, .nr_tasks = 1, .domain_id = 0, .cookie = i};
    struct npv_rknpu_request q = {.job = &ts->rk_job[slot]};
    memcpy(req, &q, sizeof(q));
}

static bool rk_check(struct threaded_sample *ts, unsigned slot, uint64_t i)
{
    (void)i;
    return rknpu_sample_mm_check(ts->rk[slot]) == 0;
}

static void rk_close(struct threaded_sample *ts)
{
    for (unsigned k = 0; ts->rk != NULL && k < ts->slots; k++)
        rknpu_sample_mm_free(ts->rk[k]);
    free(ts->rk);
    free(ts->rk_job);
}

static int rk_open(struct threaded_sample *ts)
{
    ts->ops = npv_rknpu_share_ops();
    ts->drv = ts->dev_drv;
    ts->prepare = rk_prepare;
    ts->check = rk_check;
    ts->close = rk_close;
    ts->rk = calloc(ts->slots, sizeof(*ts->rk));
    ts->rk_job = calloc(ts->slots, sizeof(*ts->rk_job));
    if (ts->rk == NULL || ts->rk_job == NULL)
        return -ENOMEM;
    int r = 0;
    for (unsigned k = 0; r == 0 && k < ts->slots; k++)
        r = rknpu_sample_mm_new(ts->dev_drv, &RK_SHAPE, 0, 0, 900 + k, &ts->rk[k]);
    return r;
}

/* ---- AICore: the sample graph through its two slots (npv_aicore_share_ops) ---- */

static void ac_prepare(struct threaded_sample *ts, unsigned slot, uint64_t i, void *req)
{
    aicore_sample_fill(&ts->ag[slot], (uint32_t)(i * ts->slots + slot + 1));
    struct npv_aicore_request q = {.desc = &ts->ag[slot].desc};
    memcpy(req, &q, sizeof(q));
}

static bool ac_check(struct threaded_sample *ts, unsigned slot, uint64_t i)
{
    (void)i;
    return aicore_sample_check(&ts->ag[slot]) == 0;
}

static void ac_close(struct threaded_sample *ts)
{
    npv_aicore_queue_free(ts->ac_q);
    for (unsigned k = 0; ts->ag != NULL && k < ts->slots; k++)
        if (ts->ag[k].dma != NULL)
            aicore_sample_free(ts->dev_drv, &ts->ag[k]);
    free(ts->ag);
}

static int ac_open(struct threaded_sample *ts)
{
    ts->ops = npv_aicore_share_ops();
    int r = npv_aicore_queue_new(ts->dev_drv, &ts->ac_q);
    if (r < 0)
        return r;
    ts->drv = ts->ac_q;
    ts->prepare = ac_prepare;
    ts->check = ac_check;
    ts->close = ac_close;
    ts->ag = calloc(ts->slots, sizeof(*ts->ag));
    if (ts->ag == NULL)
        return -ENOMEM;
    for (unsigned k = 0; r == 0 && k < ts->slots; k++)
        r = aicore_sample_build(ts->dev_drv, false, &ts->ag[k]);
    return r;
}

/* ---- common ---- */

int threaded_sample_open(const char *name, void *drv, unsigned slots, struct threaded_sample **out)
{
    static const struct {
        const char *name;
        int (*open)(struct threaded_sample *ts);
    } devs[] = {
        {"testdev", td_open}, {"edgetpu", et_open}, {"rknpu", rk_open}, {"aicore", ac_open}};
    for (size_t d = 0; d < sizeof(devs) / sizeof(devs[0]); d++) {
        if (strcmp(name, devs[d].name) != 0)
            continue;
        struct threaded_sample *ts = calloc(1, sizeof(*ts));
        if (ts == NULL)
            return -ENOMEM;
        ts->dev_drv = drv;
        ts->slots = slots;
        int r = devs[d].open(ts);
        if (r < 0) {
            threaded_sample_close(ts);
            return r;
        }
        *out = ts;
        return 0;
    }
    return -ENOTSUP;
}

void threaded_sample_close(struct threaded_sample *ts)
{
    if (ts == NULL)
        return;
    if (ts->close != NULL)
        ts->close(ts);
    free(ts);
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

#define MAX_DEPTH 32u

struct worker {
    struct threaded_sample *ts;
    struct npv_share *share;
    unsigned first_slot, depth;
    unsigned rounds; /* buffer sets per request in flight (slot_of) */
    uint64_t until;
    uint64_t done, wrong;
    int err;
    /* Here, not on the thread's stack: another thread may still route into them after an error. */
    struct npv_share_ticket t[MAX_DEPTH];
    unsigned char req[MAX_DEPTH][THREADED_REQ_MAX];
    uint64_t which[MAX_DEPTH];
    bool live[MAX_DEPTH];
};

/*
 * The buffer set of request i in flight entry s. Every measurement cycles
 * over all the sample's sets, whatever the thread count: one thread with
 * depth d in flight takes rounds = slots / d sets per entry in turn, N
 * threads slots / (N d) each, so one thread and N threads move the same
 * data through the caches and the rows compare sharing, not working sets
 * (with a set per entry, four threads touched four times one thread's data).
 * Sets of entries in flight together differ by their entry.
 */
static unsigned slot_of(unsigned first_slot, unsigned depth, unsigned rounds, unsigned s,
                        uint64_t i)
{
    return first_slot + s + depth * (unsigned)((i / depth) % rounds);
}

static int worker_submit(struct worker *w, unsigned s, uint64_t i)
{
    w->which[s] = i;
    w->ts->prepare(w->ts, slot_of(w->first_slot, w->depth, w->rounds, s, i), i, w->req[s]);
    int r;
    while ((r = npv_share_submit(w->share, w->req[s], i, &w->t[s])) == -EAGAIN)
        sched_yield();
    return r;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    uint64_t next = 0;
    unsigned busy = 0;
    for (unsigned s = 0; s < w->depth; s++) {
        int r = worker_submit(w, s, next);
        if (r < 0) {
            w->err = r;
            break;
        }
        w->live[s] = true;
        next++;
        busy++;
    }
    unsigned s = 0;
    while (busy > 0) {
        while (!w->live[s])
            s = (s + 1) % w->depth;
        int r = npv_share_wait(w->share, &w->t[s], 30000000000ull);
        if (r != 1) {
            w->err = r < 0 ? r : -ETIMEDOUT;
            return NULL;
        }
        w->done++;
        if (w->t[s].cpl.status != 0 || w->t[s].cpl.cookie != w->which[s] ||
            !w->ts->check(w->ts, slot_of(w->first_slot, w->depth, w->rounds, s, w->which[s]),
                          w->which[s]))
            w->wrong++;
        if (w->err == 0 && now_ns() < w->until) {
            r = worker_submit(w, s, next);
            if (r == 0) {
                next++;
                s = (s + 1) % w->depth;
                continue;
            }
            w->err = r;
        }
        w->live[s] = false;
        busy--;
        s = (s + 1) % w->depth;
    }
    return NULL;
}

int threaded_sample_measure(struct threaded_sample *ts, unsigned nthreads, unsigned depth,
                            uint64_t duration_ns, double *per_s, uint64_t *wrong)
{
    if (nthreads == 0 || depth == 0 || depth > MAX_DEPTH || nthreads * depth > ts->slots ||
        nthreads > 64)
        return -EINVAL;
    struct npv_share *share;
    int r = npv_share_new(ts->ops, ts->drv, &share);
    if (r < 0)
        return r;
    pthread_t tid[64];
    struct worker *w = calloc(nthreads, sizeof(*w));
    if (w == NULL) {
        npv_share_free(share);
        return -ENOMEM;
    }
    uint64_t start = now_ns();
    unsigned started = 0;
    for (unsigned i = 0; i < nthreads; i++) {
        w[i].ts = ts;
        w[i].share = share;
        w[i].first_slot = i * depth * (ts->slots / (nthreads * depth));
        w[i].depth = depth;
        w[i].rounds = ts->slots / (nthreads * depth);
        w[i].until = start + duration_ns;
        if (pthread_create(&tid[i], NULL, worker_main, &w[i]) != 0) {
            r = -EAGAIN;
            break;
        }
        started++;
    }
    uint64_t done = 0, bad = 0;
    for (unsigned i = 0; i < started; i++) {
        pthread_join(tid[i], NULL);
        done += w[i].done;
        bad += w[i].wrong;
        if (r == 0 && w[i].err != 0)
            r = w[i].err;
    }
    uint64_t took = now_ns() - start;
    npv_share_free(share);
    free(w);
    *per_s = took > 0 ? (double)done * 1e9 / (double)took : 0;
    *wrong = bad;
    return r;
}

/* ---- testdev: a ring per thread, no share ---- */

struct qworker {
    struct threaded_sample *ts;
    struct npv_ring *ring;       /* testdev */
    struct npv_rknpu_queue *rkq; /* rknpu: a core's queue instead of a ring */
    unsigned first_slot, depth;
    unsigned rounds; /* buffer sets per entry in flight, as the share's workers (slot_of) */
    uint64_t until;
    uint64_t done, in_window, wrong;
    int err;
};

/* In order: jobs in flight are consecutive, so i mod (depth * rounds) keeps their sets apart. */
static unsigned qslot_of(const struct qworker *w, uint64_t i)
{
    return w->first_slot + (unsigned)(i % ((uint64_t)w->depth * w->rounds));
}

static int qworker_push(struct qworker *w, uint64_t i)
{
    unsigned char req[THREADED_REQ_MAX];
    w->ts->prepare(w->ts, qslot_of(w, i), i, req);
    if (w->rkq != NULL) {
        struct npv_rknpu_request q;
        memcpy(&q, req, sizeof(q));
        return npv_rknpu_queue_submit(w->rkq, q.job);
    }
    return npv_ring_push(w->ring, req, i);
}

/*
 * Empty looks at a thread's own queue before it yields. Its jobs are in
 * flight, so its completions are near: a thread that gives the CPU away
 * after a few looks turns every batch into a context switch, about as long
 * as a testdev batch (4 threads on one CPU, rings row: 0.85-0.88 of one
 * thread's rate yielding every 4 looks, 0.94 every 64, 0.93-0.97 every 512
 * or never). The scheduler still ends a spinning thread's slice.
 */
#define QWORKER_YIELD_EVERY 256u

/* At least one completion of the thread's own queue, polling (no sleep), within 30 s. */
static int qworker_wait(struct qworker *w, struct npv_cpl *cpl)
{
    uint64_t deadline = now_ns() + 30000000000ull;
    for (unsigned looks = 1;; looks++) {
        int n = w->rkq != NULL ? npv_rknpu_queue_poll(w->rkq, cpl, w->depth)
                               : npv_ring_poll(w->ring, cpl, w->depth);
        if (n != 0 || now_ns() >= deadline)
            return n;
        if (looks % QWORKER_YIELD_EVERY == 0)
            sched_yield();
    }
}

/* Keep depth jobs in flight on the thread's own ring; in order, so job i's set is qslot_of(i). */
static void *qworker_main(void *arg)
{
    struct qworker *w = arg;
    uint64_t next = 0, reaped = 0;
    bool more = true;
    struct npv_cpl cpl[MAX_DEPTH];
    while (more || reaped < next) {
        while (more && next - reaped < w->depth) {
            int r = qworker_push(w, next);
            if (r < 0) {
                w->err = r;
                more = false;
                break;
            }
            next++;
        }
        if (w->rkq == NULL)
            npv_ring_submit(w->ring);
        if (reaped == next)
            break;
        int n = qworker_wait(w, cpl);
        if (n <= 0) {
            w->err = n < 0 ? n : -ETIMEDOUT;
            return NULL;
        }
        for (int k = 0; k < n; k++, reaped++) {
            w->done++;
            if (cpl[k].status != 0 || cpl[k].cookie != reaped ||
                !w->ts->check(w->ts, qslot_of(w, reaped), reaped))
                w->wrong++;
        }
        if (more) {
            if (now_ns() < w->until)
                w->in_window += (uint64_t)n;
            else
                more = false;
        }
    }
    return NULL;
}

int threaded_sample_measure_queues(struct threaded_sample *ts, unsigned nthreads, unsigned depth,
                                   uint64_t duration_ns, double *per_s, uint64_t *wrong)
{
    bool rk = ts->prepare == rk_prepare;
    if (ts->prepare != td_prepare && !rk)
        return -ENOTSUP;
    if (nthreads == 0 || depth == 0 || depth > MAX_DEPTH || nthreads * depth > ts->slots ||
        nthreads > 64)
        return -EINVAL;
    if (nthreads > (rk ? npv_rknpu_num_cores(ts->dev_drv) : npv_testdev_queues(ts->dev_drv)))
        return -ERANGE;
    struct npv_testdev_queue *q[64] = {NULL};
    struct npv_rknpu_queue *rq[NPV_RKNPU_NUM_CORES] = {NULL};
    struct qworker *w = calloc(nthreads, sizeof(*w));
    if (w == NULL)
        return -ENOMEM;
    int r = 0;
    for (unsigned i = rk ? 0 : 1; r == 0 && i < nthreads; i++)
        r = rk ? npv_rknpu_queue_open(ts->dev_drv, i, 0, &rq[i])
               : npv_testdev_queue_open(ts->dev_drv, i, NULL, &q[i]);
    pthread_t tid[64];
    unsigned started = 0;
    uint64_t start = now_ns();
    for (unsigned i = 0; r == 0 && i < nthreads; i++) {
        w[i] = (struct qworker){.ts = ts,
                                .ring = rk       ? NULL
                                        : i == 0 ? npv_testdev_ring(ts->dev_drv)
                                                 : npv_testdev_queue_ring(q[i]),
                                .rkq = rk ? rq[i] : NULL,
                                .first_slot = i * depth * (ts->slots / (nthreads * depth)),
                                .depth = depth,
                                .rounds = ts->slots / (nthreads * depth),
                                .until = start + duration_ns};
        if (pthread_create(&tid[i], NULL, qworker_main, &w[i]) != 0) {
            r = -EAGAIN;
            break;
        }
        started++;
    }
    uint64_t done = 0, bad = 0;
    for (unsigned i = 0; i < started; i++) {
        pthread_join(tid[i], NULL);
        done += w[i].in_window;
        bad += w[i].wrong;
        if (r == 0 && w[i].err != 0)
            r = w[i].err;
    }
    for (unsigned i = 1; i < nthreads; i++)
        npv_testdev_queue_close(q[i]);
    for (unsigned i = 0; i < NPV_RKNPU_NUM_CORES; i++)
        npv_rknpu_queue_close(rq[i]);
    free(w);
    /*
     * Completions reaped inside the window over its length: the drain after
     * it is left out, as is the wait for the last of N threads sharing one
     * CPU to notice the end (on a loaded CPU, tens of ms of a 200 ms point).
     */
    *per_s = (double)done * 1e9 / (double)duration_ns;
    *wrong = bad;
    return r;
}

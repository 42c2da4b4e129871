/* SPDX-License-Identifier: MIT */
/*
 * A queue per core: one thread per core submits to and polls its core with
 * no lock. Each core's program controller is a queue of its own in hardware
 * (its own PC registers, task counter and interrupt status: rocket's
 * rocket_job_hw_submit in drivers/accel/rocket/rocket_job.c and the vendor's
 * rknpu_job_subcore_commit_pc in drivers/rknpu/rknpu_job.c program one
 * core's window each), so what the driver shared between cores is split
 * here:
 *
 *  - job table: each queue has its own in-order ring of jobs and its own
 *    queue_depth / 3 slots of the domain's command memory (slots
 *    [core * n, core * n + n), so no two queues write the same bytes);
 *  - jobs spanning cores: refused on a queue (core_mask 0 or the core's bit);
 *  - domain switching: each queue runs in one domain, named at its open;
 *    queues of different domains take turns on the device's one IOMMU
 *    attachment through npu->qsw (below): no lock on the fast path, only
 *    atomics on cache lines of the queue's own plus two read-mostly words;
 *  - recovery: a stalled core is soft-reset alone where the transport can
 *    (the model's reset lines); where only the whole device resets, the
 *    resetting queue bumps npu->reset_epoch and every other queue fails its
 *    running job at its next poll;
 *  - counters: per queue, added to the device's at close.
 *
 * The queue reads the npv_rknpu only where nothing writes it while queues
 * are open (config, reset kind, the core's window), and writes only its own
 * core's rknpu_core.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <npuvfio/dev.h>
#include <npuvfio/irq.h>
#include <npuvfio/ring.h>

#include <npuvfio/failpoint.h>

#include "driver_internal.h"

struct rknpu_qjob {
    uint64_t cookie;
    uint64_t timeout_ns; /* from its start on the core */
    uint64_t budget_at;  /* CLOCK_MONOTONIC ns, 0: none */
    uint64_t deadline;   /* while running: the earlier of start + timeout and budget_at */
    uint64_t epoch;      /* npu->reset_epoch when it started */
    struct rknpu_part part;
    int32_t status;
    uint32_t dev_error;
    uint32_t stats_seq; /* its record in the queue's stats table */
};

struct npv_rknpu_queue {
    struct npv_rknpu *npu;
    unsigned core;
    uint32_t domain_id;
    uint32_t depth;
    struct rknpu_qjob *jobs; /* [depth], ring */
    /* Free-running: [head, done) finished, [done, tail) queued, done running if `running`. */
    uint64_t head, done, tail; /* 64-bit: a depth of 21 does not divide 2^32 */
    bool running;
    bool dead; /* the core could not be reset */
    uint64_t epoch_seen;
    struct npv_domain *dom; /* of domain_id, held by the queue */
    uint64_t switch_since;  /* when this queue took the switch (owner), for its bound */
    /* This queue's share of the domain's command memory, from cmd_off of cmd_dma. */
    struct npv_dma *cmd_dma;
    uint64_t cmd_off;
    uint8_t *cmd;
    npv_iova_t cmd_iova;
    uint64_t slot_bytes;
    struct npv_rknpu_queue_counters counters;
    /*
     * The queue in lib/stats (stats.h): device "rknpu:<device name>", queue
     * "queue<core>"; written by the queue's own thread only, as its jobs.
     */
    struct npv_inflight *stats;
};

static uint64_t epoch_load(const struct npv_rknpu *npu)
{
    return __atomic_load_n(&npu->reset_epoch, __ATOMIC_ACQUIRE);
}

/*
 * The domain switch between queues. The device has one IOMMU attachment for
 * the three cores (rknpu.h), so a job starts only while its domain is the
 * attached one, and the attachment changes only while no core runs.
 *
 * Starting (every queue, no lock): when the queue's domain is attached and
 * no queue owns a switch, publish running = 1 on the core's own line, then
 * look again (sequentially consistent: either this queue sees the owner's
 * claim, or the owner sees running = 1) and back out if a switch began.
 * Switching (the queue whose domain is not attached, when its core is
 * idle): claim `owner` (one switch at a time; while it is held no queue
 * starts a job, so the switch is never starved by the current domain's
 * jobs), wait until every core's running count is 0 (each queue's own poll
 * clears its count when its job ends), attach, publish the new domain,
 * release `owner`. The wait is not a blocking one: the owner looks at the
 * counts at each of its polls; it gives up after its job's timeout_ns (a
 * queue whose thread stopped polling would hold it forever), failing the
 * job with -ETIMEDOUT.
 */
static void switch_release(struct npv_rknpu_queue *q)
{
    uint32_t me = q->core + 1;
    if (__atomic_load_n(&q->npu->qsw.owner, __ATOMIC_RELAXED) == me)
        __atomic_store_n(&q->npu->qsw.owner, 0, __ATOMIC_SEQ_CST);
}

static void running_set(struct npv_rknpu_queue *q, uint32_t v)
{
    __atomic_store_n(&q->npu->qsw.core[q->core].running, v, __ATOMIC_SEQ_CST);
}

/* 1: the job may start (running published), 0: not yet (look again at the next poll), < 0: fail it.
 */
static int domain_enter(struct npv_rknpu_queue *q, const struct rknpu_qjob *j, uint64_t now)
{
    struct npv_rknpu *npu = q->npu;
    uint32_t me = q->core + 1;
    if (__atomic_load_n(&npu->qsw.attached, __ATOMIC_SEQ_CST) == q->dom &&
        __atomic_load_n(&npu->qsw.owner, __ATOMIC_SEQ_CST) == 0) {
        running_set(q, 1);
        if (__atomic_load_n(&npu->qsw.owner, __ATOMIC_SEQ_CST) == 0 &&
            __atomic_load_n(&npu->qsw.attached, __ATOMIC_SEQ_CST) == q->dom)
            return 1;
        running_set(q, 0); /* a switch began between the looks */
        return 0;
    }
    uint32_t own = __atomic_load_n(&npu->qsw.owner, __ATOMIC_SEQ_CST);
    if (own == 0) {
        if (!__atomic_compare_exchange_n(&npu->qsw.owner, &own, me, false, __ATOMIC_SEQ_CST,
                                         __ATOMIC_SEQ_CST))
            return 0;
        q->switch_since = now;
        own = me;
    }
    if (own != me)
        return 0; /* another queue switches first */
    for (unsigned c = 0; c < npu->nr_cores; c++)
        if (__atomic_load_n(&npu->qsw.core[c].running, __ATOMIC_SEQ_CST) != 0) {
            if (now - q->switch_since < j->timeout_ns)
                return 0;
            switch_release(q);
            return -ETIMEDOUT; /* a core did not drain: its thread stopped polling */
        }
    if (__atomic_load_n(&npu->qsw.attached, __ATOMIC_SEQ_CST) != q->dom) {
        int r = npv_dev_attach(npu->dev, q->dom);
        if (r < 0) {
            npv_ctx_log(npu->ctx, NPV_LOG_ERROR,
                        "rknpu: queue %u switching the device to domain %u: %s", q->core,
                        q->domain_id, npv_strerror(r));
            switch_release(q);
            return r;
        }
        __atomic_store_n(&npu->qsw.attached, q->dom, __ATOMIC_SEQ_CST);
        q->counters.domain_switches++;
    }
    running_set(q, 1);
    switch_release(q);
    return 1;
}

int npv_rknpu_queue_open(struct npv_rknpu *npu, unsigned core, uint32_t domain_id,
                         struct npv_rknpu_queue **out)
{
    if (npu == NULL || out == NULL || core >= npu->nr_cores || domain_id >= NPV_RKNPU_MAX_DOMAINS)
        return -EINVAL;
    if (npu->queues[core] != NULL)
        return -EBUSY;
    if (npu->nr_free != npu->cfg.queue_depth)
        return -EBUSY; /* device-wide jobs queued, running or unreaped */
    if (npu->dead)
        return -EIO;
    struct rknpu_domain *d = &npu->domains[domain_id];
    if (d->dom == NULL)
        return -ENOENT;
    if (d->cmd == NULL)
        return -EOPNOTSUPP; /* claimed: laid-out jobs only, which queues do not take */
    uint32_t depth = npu->cfg.queue_depth / NPV_RKNPU_NUM_CORES;
    if (depth == 0)
        return -ENOSPC;
    int r = npv_failpoint_check(npu->ctx, NPV_FAIL_ALLOC);
    if (r < 0)
        return r;
    struct npv_rknpu_queue *q = calloc(1, sizeof(*q));
    if (q == NULL)
        return -ENOMEM;
    q->jobs = calloc(depth, sizeof(*q->jobs));
    if (q->jobs == NULL) {
        r = -ENOMEM;
        goto err_free;
    }
    /* A record per job the queue holds: the depth rounded up to a power of two. */
    uint32_t cap = 1;
    while (cap < depth)
        cap <<= 1;
    r = npv_inflight_new(npu->ctx, cap, &q->stats);
    if (r < 0)
        goto err_free;
    char name[64], qname[16];
    snprintf(name, sizeof(name), "rknpu:%s", npv_dev_name(npu->dev));
    snprintf(qname, sizeof(qname), "queue%u", core);
    npv_inflight_set_name(q->stats, name, qname);
    if (npu->queues_open == 0) {
        /* The switch state starts from the driver's attachment. */
        npu->qsw.attached = npu->attached;
        npu->qsw.owner = 0;
    }
    npu->qsw.core[core].running = 0;
    q->npu = npu;
    q->dom = d->dom;
    q->core = core;
    q->domain_id = domain_id;
    q->depth = depth;
    q->slot_bytes = npu->slot_bytes;
    q->cmd_dma = d->cmd;
    q->cmd_off = (uint64_t)core * depth * npu->slot_bytes;
    q->cmd = (uint8_t *)npv_dma_vaddr(d->cmd) + q->cmd_off;
    q->cmd_iova = d->cmd_iova + q->cmd_off;
    q->epoch_seen = epoch_load(npu);
    /* The queue holds its domain (and keeps its wrapped buffers mapped) until closed. */
    d->refs++;
    d->jobs++;
    npu->queues[core] = q;
    npu->queues_open++;
    *out = q;
    return 0;
err_free:
    npv_inflight_free(q->stats);
    free(q->jobs);
    free(q);
    return r;
}

/*
 * A stalled or failed core: soft-reset it alone (retried, then the queue is
 * dead), or take it out of service where nothing can reset it. A reset of
 * the whole device tells the other queues through the epoch.
 */
static void queue_recover(struct npv_rknpu_queue *q)
{
    struct npv_rknpu *npu = q->npu;
    if (npu->reset_kind == RKNPU_RESET_NONE) {
        if (!npu->cores[q->core].out_of_service)
            npv_ctx_log(npu->ctx, NPV_LOG_ERROR,
                        "rknpu: core %u stalled and %s cannot reset it: its queue fails every "
                        "job with -EIO until the NPU is recovered (see npv_rknpu_reset)",
                        q->core, npv_dev_name(npu->dev));
        npu->cores[q->core].out_of_service = true;
        return;
    }
    for (int attempt = 1; attempt <= RESET_ATTEMPTS; attempt++) {
        int r = rknpu_core_reset(npu, q->core);
        if (r == 0) {
            q->counters.resets++;
            npv_inflight_count_reset(q->stats);
            if (npu->reset_kind == RKNPU_RESET_DEVICE)
                q->epoch_seen = __atomic_add_fetch(&npu->reset_epoch, 1, __ATOMIC_ACQ_REL);
            return;
        }
        q->counters.reset_retries++;
        npv_ctx_log(npu->ctx, NPV_LOG_WARN,
                    "rknpu: soft reset of core %u failed (%s), attempt %d of %d", q->core,
                    npv_strerror(r), attempt, RESET_ATTEMPTS);
    }
    npv_ctx_log(npu->ctx, NPV_LOG_ERROR, "rknpu: core %u cannot be reset: its queue is dead",
                q->core);
    q->dead = true;
}

static void job_end(struct npv_rknpu_queue *q, struct rknpu_qjob *j, int32_t status,
                    uint32_t dev_error)
{
    j->status = status;
    j->dev_error = dev_error;
    q->counters.jobs++;
    if (status != 0)
        q->counters.errors++;
    if (status == -ETIMEDOUT)
        q->counters.timeouts++;
    /* Jobs end in order on their one core: the stats records finish as they were added. */
    if (status != 0)
        (void)npv_inflight_set_status(q->stats, j->stats_seq, status, dev_error);
    (void)npv_inflight_complete(q->stats, j->stats_seq + 1);
    q->done++;
}

/* Start queued jobs until one runs; those that cannot start fail in order. */
static void start_next(struct npv_rknpu_queue *q)
{
    struct npv_rknpu *npu = q->npu;
    while (!q->running && q->done != q->tail) {
        struct rknpu_qjob *j = &q->jobs[q->done % q->depth];
        uint64_t now = rknpu_now_ns();
        if (q->dead || npu->cores[q->core].out_of_service) {
            switch_release(q);
            job_end(q, j, -EIO, 0);
            continue;
        }
        if (j->budget_at != 0 && j->budget_at <= now) {
            switch_release(q);
            job_end(q, j, -ETIMEDOUT, 0); /* never started: no core to reset */
            continue;
        }
        int e = domain_enter(q, j, now);
        if (e == 0)
            return;
        if (e < 0) {
            job_end(q, j, e, 0);
            continue;
        }
        j->deadline = now + j->timeout_ns;
        if (j->budget_at != 0 && j->budget_at < j->deadline)
            j->deadline = j->budget_at;
        j->epoch = epoch_load(npu);
        int r = rknpu_core_start(npu, q->core, j->part.first_iova, j->part.first_amount,
                                 j->part.nr_tasks, j->part.done_mask);
        if (r < 0) {
            running_set(q, 0);
            job_end(q, j, r, 0);
            continue;
        }
        q->running = true;
    }
}

static int queue_submit(struct npv_rknpu_queue *q, const struct npv_rknpu_job *job,
                        uint64_t budget_ns)
{
    if (q == NULL || job == NULL || job->tasks == NULL || job->nr_tasks == 0 ||
        job->nr_tasks > RKNPU_MAX_TASKS_PER_RUN)
        return -EINVAL;
    /* A job spanning cores belongs to no core's queue: the device-wide path runs those. */
    if (job->core_mask != 0 && job->core_mask != 1u << q->core)
        return -EINVAL;
    if (job->domain_id != q->domain_id)
        return -EXDEV;
    uint64_t words = 0;
    for (uint32_t t = 0; t < job->nr_tasks; t++) {
        if (job->tasks[t].regcmd == NULL || job->tasks[t].regcmd_count == 0)
            return -EINVAL;
        words += rknpu_task_words(job->tasks[t].regcmd_count);
    }
    struct npv_rknpu *npu = q->npu;
    if (words > npu->cfg.max_job_words)
        return -E2BIG;
    if (q->dead || npu->cores[q->core].out_of_service)
        return -EIO;
    if (q->tail - q->head == q->depth)
        return -EAGAIN;

    uint32_t slot = (uint32_t)(q->tail % q->depth);
    struct rknpu_qjob *j = &q->jobs[slot];
    memset(j, 0, sizeof(*j));
    j->cookie = job->cookie;
    /* Cannot be full: the table holds at least depth records, and the queue at most depth. */
    (void)npv_inflight_add(q->stats, job->cookie, 0, &j->stats_seq);
    j->timeout_ns = job->timeout_ns != 0 ? job->timeout_ns : npu->cfg.job_timeout_ns;
    if (budget_ns != 0) {
        uint64_t now = rknpu_now_ns();
        j->budget_at = budget_ns > UINT64_MAX - now ? UINT64_MAX : now + budget_ns;
    }
    uint64_t off = (uint64_t)slot * q->slot_bytes;
    uint32_t cursor = 0;
    j->part.core = (uint8_t)q->core;
    rknpu_lay_out_part(npu, job, 0, 1, (uint64_t *)(q->cmd + off), q->cmd_iova + off, &cursor,
                       &j->part);
    npv_dma_sync_for_device(q->cmd_dma, (size_t)(q->cmd_off + off), (size_t)cursor * 8u);
    q->tail++;
    q->counters.submitted++;
    start_next(q);
    return 0;
}

int npv_rknpu_queue_submit(struct npv_rknpu_queue *q, const struct npv_rknpu_job *job)
{
    return queue_submit(q, job, 0);
}

int npv_rknpu_queue_submit_within(struct npv_rknpu_queue *q, const struct npv_rknpu_job *job,
                                  uint64_t budget_ns)
{
    if (budget_ns == 0)
        return -EINVAL;
    return queue_submit(q, job, budget_ns);
}

/* The running job: finished, failed, past its deadline, or killed by another queue's reset. */
static void check_running(struct npv_rknpu_queue *q)
{
    struct npv_rknpu *npu = q->npu;
    struct rknpu_qjob *j = &q->jobs[q->done % q->depth];
    uint64_t epoch = epoch_load(npu);
    if (epoch != q->epoch_seen) {
        q->epoch_seen = epoch;
        if (j->epoch != epoch) { /* it may have been running when the device reset */
            q->running = false;
            running_set(q, 0);
            job_end(q, j, -EIO, 0);
            return;
        }
    }
    uint32_t status = 0;
    bool need_reset = false, stalled = false;
    int32_t result;
    int r = rknpu_core_check(npu, q->core, j->part.nr_tasks, j->part.done_mask, &status);
    if (r == 1) {
        result = 0;
        status = 0;
    } else if (r < 0) {
        result = r;
        need_reset = true;
    } else if (rknpu_now_ns() >= j->deadline) {
        result = -ETIMEDOUT;
        status = 0;
        need_reset = stalled = true;
    } else {
        return;
    }
    /* As check_core (driver_job.c): an error status without a reset is over once cleared. */
    if (need_reset && !stalled && npu->reset_kind == RKNPU_RESET_NONE) {
        need_reset = false;
        (void)rknpu_reg_write(npu, q->core, RKNPU_PC_INTERRUPT_CLEAR, RKNPU_INT_CLEAR_ALL);
    }
    if (need_reset)
        queue_recover(q);
    /* The core is idle (finished, or reset): a switch may proceed. */
    q->running = false;
    running_set(q, 0);
    job_end(q, j, result, status);
}

int npv_rknpu_queue_poll(struct npv_rknpu_queue *q, struct npv_cpl *cpl, unsigned max)
{
    if (q == NULL || (cpl == NULL && max != 0))
        return -EINVAL;
    if (q->running)
        check_running(q);
    /* A level line (platform) stays masked after it fired until its status is cleared: now. */
    struct rknpu_core *core = &q->npu->cores[q->core];
    if (core->irq_pending_unmask) {
        core->irq_pending_unmask = false;
        npv_irq_unmask(core->irq, core->irq_vec);
    }
    start_next(q);
    unsigned got = 0;
    while (got < max && q->head != q->done) {
        const struct rknpu_qjob *j = &q->jobs[q->head % q->depth];
        cpl[got++] =
            (struct npv_cpl){.cookie = j->cookie, .status = j->status, .dev_error = j->dev_error};
        q->head++;
    }
    /* The same completions out of the stats table (counted there by class as they leave). */
    for (unsigned k = 0; k < got; k++) {
        struct npv_cpl one;
        (void)npv_inflight_reap(q->stats, &one, 1);
    }
    return (int)got;
}

/*
 * Sleep on the core's own interrupt (NPV_RKNPU_IRQ: MSI-X vector c on the
 * model, the core's platform line on the SoC), never past until_ns or the
 * running job's deadline; without a running job (waiting for a domain
 * switch, which the polls serve) or without interrupts, a short nap.
 */
static void queue_sleep(struct npv_rknpu_queue *q, uint64_t until_ns)
{
    struct rknpu_core *core = &q->npu->cores[q->core];
    uint64_t now = rknpu_now_ns();
    if (core->irq == NULL || !q->running) {
        struct timespec nap = {.tv_sec = 0, .tv_nsec = 20000};
        nanosleep(&nap, NULL);
        return;
    }
    uint64_t deadline = q->jobs[q->done % q->depth].deadline;
    if (deadline < until_ns)
        until_ns = deadline;
    if (until_ns <= now)
        return;
    if (npv_irq_wait(core->irq, core->irq_vec, until_ns - now) > 0 && q->npu->irq_level)
        core->irq_pending_unmask = true;
}

int npv_rknpu_queue_wait(struct npv_rknpu_queue *q, unsigned min, uint64_t timeout_ns,
                         struct npv_cpl *cpl, unsigned max)
{
    if (q == NULL || cpl == NULL || min == 0 || min > max)
        return -EINVAL;
    uint64_t deadline = rknpu_now_ns() + timeout_ns;
    unsigned got = 0;
    for (unsigned spins = 0;; spins++) {
        int r = npv_rknpu_queue_poll(q, cpl + got, max - got);
        if (r < 0)
            return r;
        got += (unsigned)r;
        if (got >= min || rknpu_now_ns() >= deadline)
            return (int)got;
        /* Spin briefly for short jobs, then sleep (as npv_rknpu_wait). */
        if (spins >= 64)
            queue_sleep(q, deadline);
    }
}

unsigned npv_rknpu_queue_core(const struct npv_rknpu_queue *q)
{
    return q->core;
}

void npv_rknpu_queue_counters(const struct npv_rknpu_queue *q, struct npv_rknpu_queue_counters *out)
{
    *out = q->counters;
}

void npv_rknpu_queue_close(struct npv_rknpu_queue *q)
{
    if (q == NULL)
        return;
    struct npv_rknpu *npu = q->npu;
    /* A run left on the core would block the next user of it: stop it. */
    if (q->running && npu->reset_kind != RKNPU_RESET_NONE)
        queue_recover(q);
    running_set(q, 0);
    switch_release(q);
    npu->counters.domain_switches += q->counters.domain_switches;
    npu->counters.jobs += q->counters.jobs;
    npu->counters.timeouts += q->counters.timeouts;
    npu->counters.resets += q->counters.resets;
    npu->counters.reset_retries += q->counters.reset_retries;
    if (q->dead)
        npu->dead = true;
    npu->domains[q->domain_id].jobs--;
    rknpu_domain_put(npu, q->domain_id);
    npu->queues[q->core] = NULL;
    npu->queues_open--;
    /* Queue mode over: the device-wide path goes on from the queues' attachment. */
    if (npu->queues_open == 0)
        npu->attached = npu->qsw.attached;
    npv_inflight_free(q->stats);
    free(q->jobs);
    free(q);
}

void rknpu_queues_close_all(struct npv_rknpu *npu)
{
    for (unsigned c = 0; c < NPV_RKNPU_NUM_CORES; c++)
        npv_rknpu_queue_close(npu->queues[c]);
}

/* SPDX-License-Identifier: MIT */
/*
 * Jobs: laying tasks out in command memory, the per-core queues, the domain
 * switch between jobs, completion and deadlines.
 *
 * A core's program controller runs one chain of tasks at a time and reports
 * only "this chain is done" (task counter and DPU interrupt bits), so each
 * core has at most one part of a job running; the rest wait in the pending
 * list, in submission order. A job is pinned to the cores it was laid out
 * for: the chain's trailers hold the IOVAs of the next task in that core's
 * share. The running part is what the core's npv_inflight tracks, so a
 * deadline that passes fails that part alone and the queue behind it goes
 * on after the core's soft reset.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <npuvfio/failpoint.h>
#include <npuvfio/ring.h>

#include "driver_internal.h"
#include "status_decode.h"

static const uint32_t WORDS_ALIGN = RKNPU_REGCMD_ALIGN / 8u;

uint64_t rknpu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int rknpu_jobs_init(struct npv_rknpu *npu)
{
    uint32_t n = npu->cfg.queue_depth;
    int fr = npv_failpoint_check(npu->ctx, NPV_FAIL_ALLOC);
    if (fr < 0)
        return fr;
    npu->jobs = calloc(n, sizeof(*npu->jobs));
    npu->free_jobs = calloc(n, sizeof(uint32_t));
    npu->pending = calloc(n, sizeof(uint32_t));
    npu->done = calloc(n, sizeof(uint32_t));
    if (npu->jobs == NULL || npu->free_jobs == NULL || npu->pending == NULL || npu->done == NULL)
        goto err;
    for (uint32_t i = 0; i < n; i++)
        npu->free_jobs[i] = n - 1 - i;
    npu->nr_free = n;
    for (unsigned c = 0; c < npu->nr_cores; c++) {
        npu->cores[c].running = RKNPU_NO_JOB;
        /* One part runs per core; its completion is reaped at once. */
        int r = npv_inflight_new(npu->ctx, 2, &npu->cores[c].inflight);
        if (r < 0) {
            rknpu_jobs_fini(npu);
            return r;
        }
        /* Its counters in lib/stats (stats.h): device "rknpu:<device name>", queue "core<c>". */
        char name[64], qname[16];
        snprintf(name, sizeof(name), "rknpu:%s", npv_dev_name(npu->dev));
        snprintf(qname, sizeof(qname), "core%u", c);
        npv_inflight_set_name(npu->cores[c].inflight, name, qname);
    }
    return 0;
err:
    rknpu_jobs_fini(npu);
    return -ENOMEM;
}

void rknpu_jobs_fini(struct npv_rknpu *npu)
{
    for (unsigned c = 0; c < npu->nr_cores; c++) {
        npv_inflight_free(npu->cores[c].inflight);
        npu->cores[c].inflight = NULL;
    }
    /* Jobs not finished still hold their domain: give it back. */
    if (npu->jobs != NULL)
        for (uint32_t i = 0; i < npu->cfg.queue_depth; i++)
            if (npu->jobs[i].state == RKNPU_JOB_QUEUED || npu->jobs[i].state == RKNPU_JOB_RUNNING) {
                npu->domains[npu->jobs[i].domain_id].jobs--;
                rknpu_domain_put(npu, npu->jobs[i].domain_id);
            }
    free(npu->jobs);
    free(npu->free_jobs);
    free(npu->pending);
    free(npu->done);
    npu->jobs = NULL;
    npu->free_jobs = npu->pending = npu->done = NULL;
}

static int mask_cores(const struct npv_rknpu *npu, uint32_t mask, uint8_t *cores)
{
    switch (mask) {
    case 0: {
        /* The core with the least work queued or running, as the vendor's AUTO does. */
        unsigned best = 0, best_load = UINT32_MAX;
        for (unsigned c = 0; c < npu->nr_cores; c++) {
            if (npu->cores[c].out_of_service)
                continue;
            unsigned load = npu->cores[c].queued + (npu->cores[c].running != RKNPU_NO_JOB);
            if (load < best_load) {
                best = c;
                best_load = load;
            }
        }
        if (best_load == UINT32_MAX)
            return -EIO; /* every core out of service */
        cores[0] = (uint8_t)best;
        return 1;
    }
    case 0x1:
    case 0x2:
    case 0x4:
    case 0x3:
    case 0x7: {
        int n = 0;
        for (unsigned c = 0; c < NPV_RKNPU_NUM_CORES; c++)
            if (mask & (1u << c)) {
                if (c >= npu->nr_cores)
                    return -EINVAL;
                if (npu->cores[c].out_of_service)
                    return -EIO; /* stalled, no reset on this transport (logged) */
                cores[n++] = (uint8_t)c;
            }
        return n;
    }
    default:
        /* 0x5 and 0x6 pass the vendor's range check and are then never started. */
        return -EINVAL;
    }
}

uint32_t rknpu_task_words(uint32_t regcmd_count)
{
    uint32_t w = regcmd_count + RKNPU_TRAILER_WORDS;
    return (w + WORDS_ALIGN - 1) & ~(WORDS_ALIGN - 1);
}

/*
 * Lay part p's tasks (job tasks p, p + n, p + 2n, ...) out from word *cursor
 * of the slot; each task's trailer points the core at the next one.
 */
void rknpu_lay_out_part(struct npv_rknpu *npu, const struct npv_rknpu_job *job, unsigned p,
                        unsigned n, uint64_t *slot, npv_iova_t slot_iova, uint32_t *cursor,
                        struct rknpu_part *part)
{
    uint32_t at = *cursor;
    uint64_t *prev_trailer = NULL;
    part->nr_tasks = 0;
    for (uint32_t t = p; t < job->nr_tasks; t += n) {
        const struct npv_rknpu_task *task = &job->tasks[t];
        npv_iova_t iova = slot_iova + (uint64_t)at * 8u;
        uint32_t amount = rknpu_regcmd_amount(task->regcmd_count + RKNPU_TRAILER_WORDS);
        memcpy(&slot[at], task->regcmd, (size_t)task->regcmd_count * 8u);
        uint64_t *trailer = &slot[at + task->regcmd_count];
        uint32_t words = rknpu_task_words(task->regcmd_count);
        memset(trailer, 0, (size_t)(words - task->regcmd_count) * 8u);
        if (prev_trailer == NULL) {
            part->first_iova = iova;
            part->first_amount = amount;
        } else {
            rknpu_regcmd_chain(prev_trailer, iova, amount);
        }
        uint32_t enable = task->enable_mask != 0 ? task->enable_mask : RKNPU_MM_ENABLE;
        rknpu_regcmd_trailer(trailer, enable);
        part->done_mask = rknpu_done_mask(enable); /* the last task's, in the end */
        prev_trailer = trailer;
        part->nr_tasks++;
        at += words;
    }
    (void)npu;
    *cursor = at;
}

static void push_done(struct npv_rknpu *npu, uint32_t idx)
{
    uint32_t n = npu->cfg.queue_depth;
    npu->done[(npu->done_head + npu->nr_done) % n] = idx;
    npu->nr_done++;
}

static void job_finish_if_done(struct npv_rknpu *npu, uint32_t idx)
{
    struct rknpu_job *job = &npu->jobs[idx];
    if (job->parts_left != 0)
        return;
    job->state = RKNPU_JOB_DONE;
    npu->counters.jobs++;
    if (job->status == -ETIMEDOUT)
        npu->counters.timeouts++;
    npu->domains[job->domain_id].jobs--;
    rknpu_domain_put(npu, job->domain_id);
    push_done(npu, idx);
}

static void part_finished(struct npv_rknpu *npu, uint32_t idx, struct rknpu_part *part,
                          int32_t status, uint32_t dev_error)
{
    struct rknpu_job *job = &npu->jobs[idx];
    part->finished = true;
    if (status != 0 && job->status == 0) {
        job->status = status;
        job->dev_error = dev_error;
    }
    job->parts_left--;
    job_finish_if_done(npu, idx);
}

static void pending_remove(struct npv_rknpu *npu, uint32_t i)
{
    if (npu->jobs[npu->pending[i]].budget_at != 0)
        npu->pending_budgets--;
    memmove(&npu->pending[i], &npu->pending[i + 1],
            (size_t)(npu->nr_pending - i - 1) * sizeof(uint32_t));
    npu->nr_pending--;
}

/* Fail every part of a queued job that has not started. */
static void job_fail_queued(struct npv_rknpu *npu, uint32_t idx, int32_t status)
{
    struct rknpu_job *job = &npu->jobs[idx];
    for (unsigned p = 0; p < job->nr_parts; p++) {
        struct rknpu_part *part = &job->parts[p];
        if (part->finished || npu->cores[part->core].running == idx)
            continue;
        npu->cores[part->core].queued--;
        part_finished(npu, idx, part, status, 0);
    }
}

static int start_part(struct npv_rknpu *npu, uint32_t idx, struct rknpu_part *part)
{
    struct rknpu_core *core = &npu->cores[part->core];
    struct rknpu_job *job = &npu->jobs[idx];
    /*
     * The earlier of the two deadlines: the start-relative one (hang
     * detection) and the submit-relative budget. Either passing stops the
     * core the same way (soft reset): a run cannot be stopped otherwise.
     */
    uint64_t deadline = rknpu_now_ns() + job->timeout_ns;
    if (job->budget_at != 0 && job->budget_at < deadline)
        deadline = job->budget_at;
    int r = npv_inflight_add(core->inflight, idx, deadline, &part->seq);
    if (r < 0)
        return r;
    r = rknpu_core_start(npu, part->core, part->first_iova, part->first_amount, part->nr_tasks,
                         part->done_mask);
    if (r < 0) {
        npv_inflight_set_status(core->inflight, part->seq, r, 0);
        npv_inflight_complete(core->inflight, part->seq + 1);
        struct npv_cpl cpl;
        npv_inflight_reap(core->inflight, &cpl, 1);
        return r;
    }
    core->queued--;
    core->running = idx;
    return 0;
}

/*
 * Start what can start, oldest first. A job starts when all its cores are
 * idle and no older queued job waits for one of them (a core's jobs run in
 * order), and when it is of the device's domain or nothing runs (one IOMMU
 * for the three cores). Once a job waits for a switch, no younger job
 * starts: the switch happens as soon as the cores drain, never starved.
 */
static void schedule(struct npv_rknpu *npu)
{
    unsigned claimed = 0; /* cores an older queued job waits for */
    bool running = false;
    for (unsigned c = 0; c < npu->nr_cores; c++)
        if (npu->cores[c].running != RKNPU_NO_JOB) {
            claimed |= 1u << c;
            running = true;
        }
    for (uint32_t i = 0; i < npu->nr_pending;) {
        uint32_t idx = npu->pending[i];
        struct rknpu_job *job = &npu->jobs[idx];
        unsigned need = 0;
        bool out = false;
        for (unsigned p = 0; p < job->nr_parts; p++) {
            need |= 1u << job->parts[p].core;
            out |= npu->cores[job->parts[p].core].out_of_service;
        }
        if (out) { /* queued before its core went out of service: fail fast */
            pending_remove(npu, i);
            job->state = RKNPU_JOB_RUNNING;
            job_fail_queued(npu, idx, -EIO);
            continue;
        }
        /* Past its budget before it could start: fail it unstarted, no core to reset. */
        if (job->budget_at != 0 && job->budget_at <= rknpu_now_ns()) {
            pending_remove(npu, i);
            job->state = RKNPU_JOB_RUNNING;
            job_fail_queued(npu, idx, -ETIMEDOUT);
            continue;
        }
        struct rknpu_domain *d = &npu->domains[job->domain_id];
        if (d->dom != npu->attached) {
            if (running)
                return;
            int r = rknpu_domain_attach(npu, job->domain_id);
            if (r < 0) {
                pending_remove(npu, i);
                job->state = RKNPU_JOB_RUNNING;
                job_fail_queued(npu, idx, r);
                continue;
            }
        }
        if (need & claimed) {
            claimed |= need;
            i++;
            continue;
        }
        pending_remove(npu, i);
        job->state = RKNPU_JOB_RUNNING;
        for (unsigned p = 0; p < job->nr_parts; p++) {
            struct rknpu_part *part = &job->parts[p];
            int r = start_part(npu, idx, part);
            if (r < 0) {
                npu->cores[part->core].queued--;
                part_finished(npu, idx, part, r, 0);
            }
        }
        claimed |= need;
        running = true;
    }
}

/*
 * What every submit checks last, in this order: the device is alive, the
 * domain exists, a job slot is free.
 */
static int job_check(const struct npv_rknpu *npu, uint32_t domain_id)
{
    if (npu->dead)
        return -EIO;
    if (npu->domains[domain_id].dom == NULL)
        return -ENOENT;
    if (npu->nr_free == 0)
        return -EAGAIN;
    return 0;
}

/* Take a free job slot for domain_id; the job holds its domain until it finishes. */
static uint32_t job_take(struct npv_rknpu *npu, uint32_t domain_id, uint64_t cookie,
                         uint64_t timeout_ns, uint64_t budget_ns)
{
    uint32_t idx = npu->free_jobs[--npu->nr_free];
    struct rknpu_job *j = &npu->jobs[idx];
    memset(j, 0, sizeof(*j));
    npu->domains[domain_id].refs++;
    npu->domains[domain_id].jobs++;
    j->domain_id = domain_id;
    j->cookie = cookie;
    j->timeout_ns = timeout_ns != 0 ? timeout_ns : npu->cfg.job_timeout_ns;
    if (budget_ns != 0) {
        uint64_t now = rknpu_now_ns();
        j->budget_at = budget_ns > UINT64_MAX - now ? UINT64_MAX : now + budget_ns;
        npu->pending_budgets++;
    }
    return idx;
}

/* The job's parts are filled in: queue it behind the others and start what can start. */
static void job_queue(struct npv_rknpu *npu, uint32_t idx, unsigned parts)
{
    struct rknpu_job *j = &npu->jobs[idx];
    for (unsigned p = 0; p < parts; p++)
        npu->cores[j->parts[p].core].queued++;
    j->nr_parts = j->parts_left = (uint8_t)parts;
    j->state = RKNPU_JOB_QUEUED;
    npu->pending[npu->nr_pending++] = idx;
    schedule(npu);
}

static int submit(struct npv_rknpu *npu, const struct npv_rknpu_job *job, uint64_t budget_ns)
{
    if (npu == NULL || job == NULL || job->tasks == NULL || job->nr_tasks == 0 ||
        job->nr_tasks > RKNPU_MAX_TASKS_PER_RUN || job->domain_id >= NPV_RKNPU_MAX_DOMAINS)
        return -EINVAL;
    if (npu->queues_open != 0)
        return -EBUSY; /* the cores belong to their queues (npv_rknpu_queue_open) */
    uint8_t cores[NPV_RKNPU_NUM_CORES];
    int n = mask_cores(npu, job->core_mask, cores);
    if (n < 0)
        return n;
    uint64_t words = 0;
    for (uint32_t t = 0; t < job->nr_tasks; t++) {
        if (job->tasks[t].regcmd == NULL || job->tasks[t].regcmd_count == 0)
            return -EINVAL;
        words += rknpu_task_words(job->tasks[t].regcmd_count);
    }
    if (words > npu->cfg.max_job_words)
        return -E2BIG;
    int r = job_check(npu, job->domain_id);
    if (r < 0)
        return r;
    struct rknpu_domain *d = &npu->domains[job->domain_id];
    if (d->cmd == NULL)
        return -EOPNOTSUPP; /* a claimed domain: no command memory to lay the tasks out in */

    uint32_t idx = job_take(npu, job->domain_id, job->cookie, job->timeout_ns, budget_ns);
    struct rknpu_job *j = &npu->jobs[idx];
    uint64_t slot_off = (uint64_t)idx * npu->slot_bytes;
    uint64_t *slot = (uint64_t *)((uint8_t *)npv_dma_vaddr(d->cmd) + slot_off);
    uint32_t cursor = 0;
    /* A job with fewer tasks than cores in its mask uses only the first cores. */
    unsigned parts = job->nr_tasks < (unsigned)n ? job->nr_tasks : (unsigned)n;
    for (unsigned p = 0; p < parts; p++) {
        j->parts[p].core = cores[p];
        rknpu_lay_out_part(npu, job, p, parts, slot, d->cmd_iova + slot_off, &cursor, &j->parts[p]);
    }
    npv_dma_sync_for_device(d->cmd, (size_t)slot_off, (size_t)cursor * 8u);
    job_queue(npu, idx, parts);
    return 0;
}

int npv_rknpu_submit(struct npv_rknpu *npu, const struct npv_rknpu_job *job)
{
    return submit(npu, job, 0);
}

int npv_rknpu_submit_within(struct npv_rknpu *npu, const struct npv_rknpu_job *job,
                            uint64_t budget_ns)
{
    if (budget_ns == 0)
        return -EINVAL;
    return submit(npu, job, budget_ns);
}

/*
 * A job laid out by its submitter: the vendor driver's RKNPU_SUBMIT, where
 * user space wrote the register-command lists and their chaining trailers
 * into its own buffer and the kernel only programs the PC from the first
 * task (rknpu_job.c rknpu_job_subcore_commit_pc: BASE_ADDRESS = regcmd_addr,
 * REGISTER_AMOUNTS from regcfg_amount in its unit, INTERRUPT_MASK = the last task's
 * int_mask, TASK_CON's TASK_NUMBER = the task count). It is one part on one
 * core, nothing copied: the queue, start, deadline, reset and budget
 * machinery is the one npv_rknpu_submit's jobs go through.
 */
int npv_rknpu_submit_laid_out(struct npv_rknpu *npu, const struct npv_rknpu_laid_out_job *job)
{
    if (npu == NULL || job == NULL || job->nr_tasks == 0 ||
        job->nr_tasks > RKNPU_MAX_TASKS_PER_RUN || job->domain_id >= NPV_RKNPU_MAX_DOMAINS)
        return -EINVAL;
    /*
     * BASE_ADDRESS holds IOVA[31:4] (regs.h); IOVA 0 is the guard page no
     * domain maps (a list there is an unset pointer).
     */
    if (job->regcmd_iova == 0 || job->regcmd_iova > UINT32_MAX ||
        (job->regcmd_iova & ~(npv_iova_t)RKNPU_PC_BASE_ADDRESS_MASK) != 0)
        return -EINVAL;
    /*
     * The done bits are those of INTERRUPT_MASK as a client's driver writes
     * it: the DMA error bits it may unmask beside them (as rknpu_core_start
     * does) end any run as an error, never as its completion, and bits that
     * do not exist are dropped as the register drops them (model choice);
     * nothing left, and no status would ever end the run.
     */
    uint32_t done = job->done_mask & RKNPU_INT_VALID_MASK & ~RKNPU_INT_DMA_ERROR;
    if (done == 0)
        return -EINVAL;
    /* One core's chain: multi-core masks would need a list per core. */
    if (job->core_mask != 0 && job->core_mask != 0x1 && job->core_mask != 0x2 &&
        job->core_mask != 0x4)
        return -EINVAL;
    if (npu->queues_open != 0)
        return -EBUSY;
    uint8_t core;
    int n = mask_cores(npu, job->core_mask, &core);
    if (n < 0)
        return n;
    int r = job_check(npu, job->domain_id);
    if (r < 0)
        return r;
    uint32_t idx = job_take(npu, job->domain_id, job->cookie, job->timeout_ns, 0);
    struct rknpu_part *part = &npu->jobs[idx].parts[0];
    part->core = core;
    part->nr_tasks = (uint16_t)job->nr_tasks;
    part->first_iova = job->regcmd_iova;
    /* REGISTER_AMOUNTS keeps [15:0] (rknpu_core_start writes it masked, as the PC holds it). */
    part->first_amount = job->amount;
    part->done_mask = done;
    job_queue(npu, idx, 1);
    return 0;
}

/*
 * Queued jobs whose budget passed fail with -ETIMEDOUT where they wait: no
 * core ran them, so no core is touched and the jobs around them go on.
 */
static void expire_queued(struct npv_rknpu *npu, uint64_t now)
{
    for (uint32_t i = 0; npu->pending_budgets != 0 && i < npu->nr_pending;) {
        uint32_t idx = npu->pending[i];
        struct rknpu_job *job = &npu->jobs[idx];
        if (job->budget_at == 0 || job->budget_at > now) {
            i++;
            continue;
        }
        pending_remove(npu, i);
        job->state = RKNPU_JOB_RUNNING;
        job_fail_queued(npu, idx, -ETIMEDOUT);
    }
}

uint64_t rknpu_next_budget(const struct npv_rknpu *npu)
{
    uint64_t first = 0;
    for (uint32_t i = 0; npu->pending_budgets != 0 && i < npu->nr_pending; i++) {
        uint64_t b = npu->jobs[npu->pending[i]].budget_at;
        if (b != 0 && (first == 0 || b < first))
            first = b;
    }
    return first;
}

/*
 * A core that failed its job is reset; one whose reset fails is retried,
 * then the NPU is dead. Without a reset on this transport the core is taken
 * out of service: its queued jobs and later submits fail with -EIO at once,
 * the other cores go on.
 */
void rknpu_core_recover(struct npv_rknpu *npu, unsigned c)
{
    if (npu->reset_kind == RKNPU_RESET_NONE) {
        if (!npu->cores[c].out_of_service)
            npv_ctx_log(npu->ctx, NPV_LOG_ERROR,
                        "rknpu: core %u stalled and %s cannot reset it (the RK3588 has no "
                        "register-level reset and vfio-platform no reset handler for its NPU): "
                        "core %u is out of service, its jobs fail with -EIO; rebind the NPU to "
                        "the rocket or vendor driver (their CRU reset) or reboot to recover it",
                        c, npv_dev_name(npu->dev), c);
        npu->cores[c].out_of_service = true;
        return;
    }
    for (int attempt = 1; attempt <= RESET_ATTEMPTS; attempt++) {
        int r = rknpu_core_reset(npu, c);
        if (r == 0) {
            npu->counters.resets++;
            /* No inflight at bring-up (before rknpu_jobs_init): no job runs, nothing to fail. */
            if (npu->cores[c].inflight == NULL)
                return;
            npv_inflight_count_reset(npu->cores[c].inflight);
            /* A device reset stopped the other cores' runs as well. */
            if (npu->reset_kind == RKNPU_RESET_DEVICE)
                for (unsigned o = 0; o < npu->nr_cores; o++)
                    if (o != c)
                        rknpu_fail_running(npu, o, -EIO);
            return;
        }
        npu->counters.reset_retries++;
        npv_ctx_log(npu->ctx, NPV_LOG_WARN,
                    "rknpu: soft reset of core %u failed (%s), attempt %d of %d", c,
                    npv_strerror(r), attempt, RESET_ATTEMPTS);
    }
    npv_ctx_log(npu->ctx, NPV_LOG_ERROR, "rknpu: core %u cannot be reset: the NPU is dead", c);
    npu->dead = true;
}

static struct rknpu_part *running_part(struct npv_rknpu *npu, unsigned c)
{
    struct rknpu_job *job = &npu->jobs[npu->cores[c].running];
    for (unsigned p = 0; p < job->nr_parts; p++)
        if (job->parts[p].core == c && !job->parts[p].finished)
            return &job->parts[p];
    return NULL;
}

void rknpu_fail_running(struct npv_rknpu *npu, unsigned c, int32_t status)
{
    struct rknpu_core *core = &npu->cores[c];
    if (core->running == RKNPU_NO_JOB)
        return;
    uint32_t idx = core->running;
    struct rknpu_part *part = running_part(npu, c);
    npv_inflight_fail_all(core->inflight, status, status);
    struct npv_cpl cpl;
    npv_inflight_reap(core->inflight, &cpl, 1);
    core->running = RKNPU_NO_JOB;
    if (part != NULL)
        part_finished(npu, idx, part, status, 0);
}

static void check_core(struct npv_rknpu *npu, unsigned c, uint64_t now)
{
    struct rknpu_core *core = &npu->cores[c];
    uint32_t idx = core->running;
    struct rknpu_part *part = running_part(npu, c);
    if (part == NULL) { /* cannot happen: a running core always has its part */
        core->running = RKNPU_NO_JOB;
        return;
    }
    bool need_reset = false, stalled = false;
    uint32_t status = 0;
    int r = rknpu_core_check(npu, c, part->nr_tasks, part->done_mask, &status);
    if (r == 1) {
        npv_inflight_complete(core->inflight, part->seq + 1);
    } else if (r < 0) {
        npv_inflight_set_status(core->inflight, part->seq, r, status);
        npv_inflight_complete(core->inflight, part->seq + 1);
        need_reset = true;
    } else if (npv_inflight_expire(core->inflight, now) != 0) {
        need_reset = stalled = true;
    } else {
        return;
    }
    /*
     * Without a reset, a run that ended in an error status is over (the
     * status says so): clear it and go on. Only a core that stopped
     * answering is out of service.
     */
    if (need_reset && !stalled && npu->reset_kind == RKNPU_RESET_NONE) {
        need_reset = false;
        (void)rknpu_reg_write(npu, c, RKNPU_PC_INTERRUPT_CLEAR, RKNPU_INT_CLEAR_ALL);
    }
    struct npv_cpl cpl;
    if (npv_inflight_reap(core->inflight, &cpl, 1) != 1)
        return;
    core->running = RKNPU_NO_JOB;
    if (need_reset)
        rknpu_core_recover(npu, c);
    part_finished(npu, idx, part, cpl.status, cpl.dev_error);
}

void rknpu_jobs_cancel_all(struct npv_rknpu *npu)
{
    for (unsigned c = 0; c < npu->nr_cores; c++)
        rknpu_fail_running(npu, c, -ECANCELED);
    while (npu->nr_pending != 0) {
        uint32_t idx = npu->pending[0];
        pending_remove(npu, 0);
        npu->jobs[idx].state = RKNPU_JOB_RUNNING;
        job_fail_queued(npu, idx, npu->dead ? -EIO : -ECANCELED);
    }
}

int npv_rknpu_poll(struct npv_rknpu *npu, struct npv_cpl *cpl, unsigned max)
{
    if (npu == NULL || (cpl == NULL && max != 0))
        return -EINVAL;
    if (npu->queues_open != 0)
        return -EBUSY;
    uint64_t now = rknpu_now_ns();
    for (unsigned c = 0; c < npu->nr_cores; c++)
        if (npu->cores[c].running != RKNPU_NO_JOB)
            check_core(npu, c, now);
    if (npu->pending_budgets != 0)
        expire_queued(npu, now);
    if (npu->dead)
        rknpu_jobs_cancel_all(npu);
    else
        schedule(npu);
    if (npu->irq_level)
        rknpu_irq_rearm(npu);
    unsigned got = 0;
    while (got < max && npu->nr_done != 0) {
        uint32_t idx = npu->done[npu->done_head];
        npu->done_head = (npu->done_head + 1) % npu->cfg.queue_depth;
        npu->nr_done--;
        struct rknpu_job *job = &npu->jobs[idx];
        cpl[got++] = (struct npv_cpl){
            .cookie = job->cookie, .status = job->status, .dev_error = job->dev_error};
        job->state = RKNPU_JOB_FREE;
        npu->free_jobs[npu->nr_free++] = idx;
    }
    return (int)got;
}

int npv_rknpu_wait(struct npv_rknpu *npu, unsigned min, uint64_t timeout_ns, struct npv_cpl *cpl,
                   unsigned max)
{
    if (npu == NULL || cpl == NULL || min == 0 || min > max)
        return -EINVAL;
    if (npu->queues_open != 0)
        return -EBUSY;
    uint64_t deadline = rknpu_now_ns() + timeout_ns;
    unsigned got = 0;
    for (unsigned spins = 0;; spins++) {
        int r = npv_rknpu_poll(npu, cpl + got, max - got);
        if (r < 0)
            return r;
        got += (unsigned)r;
        if (got >= min || rknpu_now_ns() >= deadline)
            return (int)got;
        /*
         * Spin briefly for short jobs, then sleep: on the cores' interrupts
         * (never past the earliest job deadline, which the next poll serves),
         * or in small steps when polling.
         */
        if (spins >= 64) {
            if (npu->waitset != NULL) {
                rknpu_irq_sleep(npu, deadline);
            } else {
                struct timespec nap = {.tv_sec = 0, .tv_nsec = 20000};
                nanosleep(&nap, NULL);
            }
        }
    }
}

int npv_rknpu_run(struct npv_rknpu *npu, const struct npv_rknpu_job *job)
{
    if (npu == NULL || job == NULL)
        return -EINVAL;
    if (npu->queues_open != 0)
        return -EBUSY;
    if (npu->nr_free != npu->cfg.queue_depth)
        return -EBUSY;
    int r = npv_rknpu_submit(npu, job);
    if (r < 0)
        return r;
    /*
     * The job's own deadline ends it (a stalled core is reset and the job
     * fails); the wait's bound only covers resets that themselves take their
     * full timeout.
     */
    uint64_t timeout = job->timeout_ns != 0 ? job->timeout_ns : npu->cfg.job_timeout_ns;
    timeout += (uint64_t)(RESET_ATTEMPTS + 1) * npu->cfg.reset_timeout_ns;
    struct npv_cpl cpl;
    r = npv_rknpu_wait(npu, 1, timeout, &cpl, 1);
    if (r < 0)
        return r;
    if (r == 0) {
        /* Cannot happen while deadlines are served; never leave the caller hanging. */
        npv_ctx_log(npu->ctx, NPV_LOG_ERROR, "rknpu: job outlived its deadline, resetting");
        npv_rknpu_reset(npu);
        npv_rknpu_poll(npu, &cpl, 1);
        return -ETIMEDOUT;
    }
    return cpl.status;
}

int npv_rknpu_reset(struct npv_rknpu *npu)
{
    if (npu == NULL)
        return -EINVAL;
    if (npu->queues_open != 0)
        return -EBUSY;
    rknpu_jobs_cancel_all(npu);
    npu->dead = false;
    if (npu->reset_kind == RKNPU_RESET_NONE) {
        /* Nothing to reset with: cores out of service stay so. */
        for (unsigned c = 0; c < npu->nr_cores; c++)
            if (npu->cores[c].out_of_service)
                return -EOPNOTSUPP;
        return 0;
    }
    for (unsigned c = 0; c < npu->nr_cores; c++) {
        rknpu_core_recover(npu, c);
        npu->cores[c].out_of_service = false;
    }
    return npu->dead ? -EIO : 0;
}

void npv_rknpu_counters(const struct npv_rknpu *npu, struct npv_rknpu_counters *out)
{
    *out = npu->counters;
}

/* ---- many threads: the calls an npv_share makes (npuvfio/share.h) ---- */

static int share_submit(void *drv, const void *req, uint64_t cookie)
{
    const struct npv_rknpu_request *q = req;
    struct npv_rknpu_job job = *q->job;
    job.cookie = cookie;
    return q->budget_ns != 0 ? npv_rknpu_submit_within(drv, &job, q->budget_ns)
                             : npv_rknpu_submit(drv, &job);
}

static int share_poll(void *drv, struct npv_cpl *cpl, unsigned max)
{
    return npv_rknpu_poll(drv, cpl, max);
}

const struct npv_share_ops *npv_rknpu_share_ops(void)
{
    static const struct npv_share_ops ops = {.submit = share_submit, .poll = share_poll};
    return &ops;
}

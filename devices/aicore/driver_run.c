/* SPDX-License-Identifier: MIT */
/*
 * Runs in two pipeline slots: admission, preparation, launch, result. The
 * device executes one run at a time (LAUNCH resets every dispatch register),
 * so the pipeline overlaps the preparation of one run with the execution of
 * its predecessor, as the part's runtime admits a "prepared successor" only
 * while its predecessor holds the execution claim (simpler's
 * DeviceRunnerBase::try_reserve_native_run,
 * src/common/platform/onboard/host/device_runner_base.cpp).
 */
#include <errno.h>
#include <stdatomic.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver_internal.h"
#include "status_decode.h"

/* Per slot DMA memory: handshake records, two payload slots per sub-core, the result record. */
#define WORKERS_OFF  0u
#define PAYLOADS_OFF (AICORE_MAX_SUBCORES * sizeof(struct aicore_handshake))
#define RESULT_OFF   (PAYLOADS_OFF + AICORE_MAX_SUBCORES * AICORE_PAYLOAD_SLOTS * 64u)
#define SLOT_BYTES   (RESULT_OFF + sizeof(struct aicore_result))

static int run_init(struct npv_aicore *ac, struct npv_aicore_run *run, unsigned slot)
{
    run->ac = ac;
    run->slot = slot;
    size_t n = ac->cfg.max_tasks;
    run->tasks = calloc(n, sizeof(*run->tasks));
    run->task_done = calloc(n, 1);
    run->core_order = calloc(n, sizeof(*run->core_order));
    if (run->tasks == NULL || run->task_done == NULL || run->core_order == NULL)
        return -ENOMEM;
    int r = npv_dma_alloc(ac->ctx, SLOT_BYTES, NULL, &run->dma);
    if (r == 0)
        r = npv_dma_map(run->dma, ac->dom, NPV_DMA_RW, &run->iova);
    if (r < 0)
        return r;
    uint8_t *va = npv_dma_vaddr(run->dma);
    memset(va, 0, SLOT_BYTES);
    /*
     * Cleaned: on a non-coherent arm64 host a dirty zero line left here would
     * be written back over a record the device wrote, at an eviction or at
     * the clean+invalidate before the driver reads it (driver_dispatch.c).
     */
    npv_dma_sync_for_device(run->dma, 0, SLOT_BYTES);
    run->workers = (struct aicore_handshake *)(va + WORKERS_OFF);
    run->workers_iova = run->iova + WORKERS_OFF;
    run->result_rec = (struct aicore_result *)(va + RESULT_OFF);
    run->result_iova = run->iova + RESULT_OFF;
    return 0;
}

int aicore_runs_init(struct npv_aicore *ac)
{
    /* At most one run is on the device and one finishing beside it: two records. */
    int sr = npv_inflight_new(ac->ctx, 2, &ac->stats);
    if (sr < 0)
        return sr;
    char name[64];
    snprintf(name, sizeof(name), "aicore:%s", npv_dev_name(ac->dev));
    npv_inflight_set_name(ac->stats, name, "runs");
    for (unsigned s = 0; s < NPV_AICORE_SLOTS; s++) {
        int r = run_init(ac, &ac->runs[s], s);
        if (r < 0)
            return r;
    }
    return 0;
}

void aicore_runs_fini(struct npv_aicore *ac)
{
    npv_inflight_free(ac->stats);
    ac->stats = NULL;
    for (unsigned s = 0; s < NPV_AICORE_SLOTS; s++) {
        struct npv_aicore_run *run = &ac->runs[s];
        if (run->dma != NULL) {
            (void)npv_dma_unmap(run->dma, ac->dom);
            npv_dma_free(run->dma);
        }
        free(run->tasks);
        free(run->task_done);
        free(run->core_order);
        memset(run, 0, sizeof(*run));
    }
}

static int check_task(const struct npv_aicore *ac, const struct npv_aicore_task *t, uint32_t i)
{
    if (t->a == 0 || t->b == 0 || t->c == 0)
        return -EINVAL;
    if (t->dep != NPV_AICORE_NO_DEP && t->dep >= i)
        return -EINVAL; /* a dependency on an earlier task only: no cycles */
    if (t->core >= ac->topo.nr_cores)
        return -EINVAL;
    if (!aicore_core_usable(ac, t->core))
        return -ENXIO;
    uint32_t type = aicore_core_type(ac->topo.clusters, t->core);
    switch (t->op) {
    case NPV_AICORE_OP_VADD:
        if (type != AICORE_CORE_TYPE_AIV || t->n == 0 || t->n > AICORE_VADD_MAX_N)
            return -EINVAL;
        return 0;
    case NPV_AICORE_OP_MATMUL:
        if (type != AICORE_CORE_TYPE_AIC || t->m == 0 || t->n == 0 || t->k == 0 ||
            t->m > AICORE_MATMUL_MAX || t->n > AICORE_MATMUL_MAX || t->k > AICORE_MATMUL_MAX)
            return -EINVAL;
        return 0;
    default:
        return -EINVAL;
    }
}

/* Task indices grouped by the rank of their core, in graph order within a core. */
static void order_by_core(struct npv_aicore_run *run)
{
    struct npv_aicore *ac = run->ac;
    run->nr_cores = ac->nr_usable;
    for (uint32_t r = 0; r < run->nr_cores; r++)
        run->cores[r] = (struct aicore_core_run){.phys = ac->rank_phys[r]};
    for (uint32_t i = 0; i < run->nr_tasks; i++)
        run->cores[ac->phys_rank[run->tasks[i].core]].count++;
    uint32_t at = 0;
    for (uint32_t r = 0; r < run->nr_cores; r++) {
        run->cores[r].first = at;
        at += run->cores[r].count;
        run->cores[r].count = 0;
    }
    for (uint32_t i = 0; i < run->nr_tasks; i++) {
        struct aicore_core_run *c = &run->cores[ac->phys_rank[run->tasks[i].core]];
        run->core_order[c->first + c->count++] = i;
    }
}

/* A device that failed is reset before anything uses it again. */
static int ready_device(struct npv_aicore *ac)
{
    if (ac->gone)
        return -ENODEV;
    if (ac->dead)
        return -EIO;
    if (!ac->poisoned)
        return 0;
    int r = aicore_device_reset(ac);
    return r;
}

static int prepare(struct npv_aicore *ac, unsigned slot, const struct npv_aicore_run_desc *d,
                   uint64_t budget_ns, struct npv_aicore_run **out)
{
    if (ac == NULL || d == NULL || out == NULL || slot >= NPV_AICORE_SLOTS ||
        (d->nr_tasks > 0 && d->tasks == NULL))
        return -EINVAL;
    if (d->nr_tasks > ac->cfg.max_tasks)
        return -E2BIG;
    struct npv_aicore_run *run = &ac->runs[slot];
    /*
     * One preparation at a time, and only behind a run that already holds the
     * device. A PMU run may be that prepared successor, where simpler refuses
     * a successor while a diagnostics channel is on (try_reserve_native_run):
     * there, arming resets DFX pools the predecessor's window still writes.
     * Here nothing of the PMU is touched at preparation: the successor arms
     * the counters at its launch, which waits until the predecessor finished,
     * and the predecessor collected its counts in that finish (driver_pmu.c).
     */
    if (run->state != RUN_FREE || ac->runs[slot ^ 1u].state == RUN_PREPARED)
        return -EBUSY;
    int r = ac->active == NULL ? ready_device(ac) : (ac->gone ? -ENODEV : 0);
    if (r < 0)
        return r;
    for (uint32_t i = 0; i < d->nr_tasks; i++) {
        r = check_task(ac, &d->tasks[i], i);
        if (r < 0)
            return r;
    }
    r = aicore_tables_ensure(ac, d->pmu);
    if (r < 0)
        return r;

    if (d->nr_tasks > 0)
        memcpy(run->tasks, d->tasks, d->nr_tasks * sizeof(*run->tasks));
    run->nr_tasks = d->nr_tasks;
    run->pmu = d->pmu;
    memcpy(run->pmu_events, d->pmu_events, sizeof(run->pmu_events));
    run->ctrl_table = ac->ctrl_table.addr;
    run->pmu_table = d->pmu ? aicore_pmu_table_of(ac)->addr : 0;
    run->epoch = 0;
    memset(&run->result, 0, sizeof(run->result));
    order_by_core(run);
    run->budget_at = 0;
    run->abandoned = false;
    if (budget_ns != 0) {
        uint64_t now = aicore_now_ns();
        run->budget_at = budget_ns > UINT64_MAX - now ? UINT64_MAX : now + budget_ns;
    }
    run->state = RUN_PREPARED;
    *out = run;
    return 0;
}

int npv_aicore_prepare(struct npv_aicore *ac, unsigned slot, const struct npv_aicore_run_desc *d,
                       struct npv_aicore_run **out)
{
    return prepare(ac, slot, d, 0, out);
}

int npv_aicore_prepare_within(struct npv_aicore *ac, unsigned slot,
                              const struct npv_aicore_run_desc *d, uint64_t budget_ns,
                              struct npv_aicore_run **out)
{
    if (budget_ns == 0)
        return -EINVAL;
    return prepare(ac, slot, d, budget_ns, out);
}

/*
 * A prepared run whose budget passed before it could launch finishes with
 * -ETIMEDOUT where it is: the device never saw it, so it is neither reset
 * nor poisoned, and the run beside it goes on.
 */
static int expire_prepared(struct npv_aicore_run *run)
{
    struct npv_aicore *ac = run->ac;
    run->status = -ETIMEDOUT;
    run->start_ns = run->end_ns = aicore_now_ns();
    run->result = (struct npv_aicore_result){.status = -ETIMEDOUT};
    run->state = RUN_FINISHED;
    ac->counters.timeouts++;
    if (npv_inflight_add(ac->stats, run->slot, 0, &run->stats_seq) == 0) {
        run->stats_open = true;
        aicore_stats_finish(run, -ETIMEDOUT);
    }
    return -ETIMEDOUT;
}

void aicore_stats_finish(struct npv_aicore_run *run, int status)
{
    struct npv_inflight *t = run->ac->stats;
    if (!run->stats_open)
        return;
    run->stats_open = false;
    if (status != 0)
        (void)npv_inflight_set_status(t, run->stats_seq, status, 0);
    (void)npv_inflight_complete(t, run->stats_seq + 1);
    struct npv_cpl cpl;
    (void)npv_inflight_reap(t, &cpl, 1);
}

static int write_run_params(struct npv_aicore_run *run)
{
    struct npv_aicore *ac = run->ac;
    const uint64_t regs[][2] = {
        {AICORE_REG_RUN_CTRL_TABLE, run->ctrl_table}, {AICORE_REG_RUN_PMU_TABLE, run->pmu_table},
        {AICORE_REG_RUN_WORKERS, run->workers_iova},  {AICORE_REG_RUN_WORKERS_COUNT, run->nr_cores},
        {AICORE_REG_RUN_RESULT, run->result_iova},    {AICORE_REG_RUN_EPOCH, run->epoch},
    };
    int r = 0;
    for (size_t i = 0; r == 0 && i < sizeof(regs) / sizeof(regs[0]); i++)
        r = aicore_global_write(ac, regs[i][0], regs[i][1]);
    return r;
}

static void reset_core_state(struct npv_aicore_run *run)
{
    uint8_t *payloads = (uint8_t *)npv_dma_vaddr(run->dma) + PAYLOADS_OFF;
    for (uint32_t c = 0; c < run->nr_cores; c++) {
        struct aicore_core_run *cr = &run->cores[c];
        cr->phase = CORE_WAIT_READY;
        cr->next = 0;
        cr->running = cr->pending = AICORE_NO_TASK;
        cr->running_token = cr->pending_token = cr->last_token = cr->done_token = 0;
        cr->running_acked = false;
        cr->payload = (struct aicore_task_payload *)(payloads + c * AICORE_PAYLOAD_SLOTS * 64u);
        cr->payload_iova = run->iova + PAYLOADS_OFF + c * AICORE_PAYLOAD_SLOTS * 64u;
    }
    memset(run->task_done, 0, run->nr_tasks);
    run->tasks_done = 0;
    run->status = 0;
    /* The records are reused across runs: a stale ready flag would be taken for this run's. */
    memset(run->workers, 0, run->nr_cores * sizeof(*run->workers));
    /*
     * Cleared before the launch, as simpler's DeviceRunner::launch_run clears
     * every aicore_done (src/a2a3/platform/onboard/host/device_runner.cpp); the
     * sub-cores write them by DMA, so cleaned too (a dirty zero line would be
     * written back over a sub-core's ready record).
     */
    npv_dma_sync_for_device(run->dma, WORKERS_OFF, run->nr_cores * sizeof(*run->workers));
}

/* The sub-cores the run was prepared for are the ones the device launches now, rank by rank. */
static bool same_cores(const struct npv_aicore_run *run)
{
    const struct npv_aicore *ac = run->ac;
    if (run->nr_cores != ac->nr_usable)
        return false;
    for (uint32_t r = 0; r < run->nr_cores; r++)
        if (run->cores[r].phys != ac->rank_phys[r])
            return false;
    return true;
}

int npv_aicore_launch(struct npv_aicore_run *run)
{
    if (run == NULL || run->state != RUN_PREPARED)
        return -EINVAL;
    struct npv_aicore *ac = run->ac;
    if (ac->active != NULL)
        return -EBUSY;
    if (run->budget_at != 0 && aicore_now_ns() >= run->budget_at)
        return expire_prepared(run);
    int r = ready_device(ac);
    if (r == 0)
        r = aicore_launch_check_topology(ac);
    /* A reset may have found a new topology: the run's cores must still be the launched ones. */
    if (r == 0 && !same_cores(run))
        r = -ESTALE;
    /* After a reset the tables go up again (the blocks, so the run's addresses, stay). */
    if (r == 0)
        r = aicore_tables_ensure(ac, run->pmu);
    if (r == 0 && (run->ctrl_table != ac->ctrl_table.addr ||
                   (run->pmu && run->pmu_table != aicore_pmu_table_of(ac)->addr)))
        r = -ESTALE;
    if (r < 0)
        return r;
    reset_core_state(run);
    if (run->pmu)
        r = aicore_pmu_arm(run);
    run->epoch = ac->next_epoch++;
    if (r == 0)
        r = write_run_params(run);
    atomic_thread_fence(memory_order_release); /* cleared records before LAUNCH */
    if (r == 0)
        r = aicore_global_write(ac, AICORE_REG_LAUNCH, AICORE_LAUNCH_VALUE);
    bool launch_written = r == 0;
    uint64_t st = 0;
    if (r == 0)
        r = aicore_global_read(ac, AICORE_REG_LAUNCH_STATUS, &st);
    if (r == 0)
        r = aicore_decode_launch_status(st);
    if (r < 0) {
        /* The device may run, or be poisoned, without a run of ours: reset before its next use. */
        if (launch_written)
            ac->poisoned = true;
        return r;
    }
    ac->counters.runs++;
    run->stats_open = npv_inflight_add(ac->stats, run->slot, 0, &run->stats_seq) == 0;
    run->state = RUN_ACTIVE;
    run->winding_down = false;
    ac->active = run;
    run->start_ns = aicore_now_ns();
    run->phase_deadline_ns = run->start_ns + ac->cfg.handshake_timeout_ns;
    return 0;
}

void aicore_run_abandon(struct npv_aicore_run *run, int err)
{
    struct npv_aicore *ac = run->ac;
    run->status = err;
    run->end_ns = aicore_now_ns();
    /* verdict and code stay as an epoch-matching record set them (0 without one). */
    run->result.epoch = run->epoch;
    run->result.status = err;
    run->result.tasks_done = run->tasks_done;
    run->result.nr_cores = run->nr_cores;
    run->result.elapsed_ns = run->end_ns - run->start_ns;
    run->state = RUN_FINISHED;
    run->abandoned = true;
    ac->active = NULL;
    aicore_stats_finish(run, err);
    /* The device may still be in the middle of the run: reset before its next use. */
    ac->poisoned = true;
    if (run->pmu)
        aicore_pmu_forget(ac); /* counted part of a run nobody collected */
    if (err == -ETIMEDOUT)
        ac->counters.timeouts++;
}

int npv_aicore_poll(struct npv_aicore_run *run)
{
    if (run == NULL)
        return -EINVAL;
    if (run->state == RUN_FINISHED)
        return run->result.status;
    if (run->state != RUN_ACTIVE)
        return -EINVAL;
    int r = aicore_run_step(run);
    /*
     * Past its budget and still running: the host cannot take a run back
     * from the device, so it is abandoned as for a missed task deadline and
     * the device reset before its next use (a run that finished in this
     * step counts as finished).
     */
    if (r == -EINPROGRESS && run->budget_at != 0 && aicore_now_ns() >= run->budget_at)
        r = -ETIMEDOUT;
    if (r != -EINPROGRESS && r != 0)
        aicore_run_abandon(run, r);
    return r;
}

int npv_aicore_wait(struct npv_aicore_run *run, uint64_t timeout_ns)
{
    uint64_t deadline = aicore_now_ns() + timeout_ns;
    for (;;) {
        int r = npv_aicore_poll(run);
        if (r != -EINPROGRESS || aicore_now_ns() >= deadline)
            return r;
        /* A blocking wait may give the CPU to the device (a model on this machine). */
        sched_yield();
    }
}

void npv_aicore_run_info(const struct npv_aicore_run *run, struct npv_aicore_run_info *out)
{
    *out = (struct npv_aicore_run_info){
        .slot = run->slot,
        .epoch = run->epoch,
        .ctrl_table = run->ctrl_table,
        .pmu_table = run->pmu_table,
    };
}

int npv_aicore_result(const struct npv_aicore_run *run, struct npv_aicore_result *out)
{
    if (run->state != RUN_FINISHED)
        return -EINPROGRESS;
    *out = run->result;
    return 0;
}

int npv_aicore_pmu(const struct npv_aicore_run *run, struct npv_aicore_core_pmu *out, size_t max)
{
    if (run->state != RUN_FINISHED)
        return -EINPROGRESS;
    if (!run->pmu || run->result.status != 0)
        return 0;
    size_t n = run->nr_cores < max ? run->nr_cores : max;
    memcpy(out, run->pmu_out, n * sizeof(*out));
    return (int)n;
}

int npv_aicore_release(struct npv_aicore_run *run)
{
    if (run == NULL || run->state == RUN_FREE)
        return -EINVAL;
    if (run->state == RUN_ACTIVE)
        return -EBUSY;
    run->state = RUN_FREE;
    return 0;
}

/* ---- caller memory ---- */

int npv_aicore_mem_map(struct npv_aicore *ac, struct npv_dma *dma, unsigned prot, npv_iova_t *iova)
{
    if (ac == NULL || dma == NULL || iova == NULL)
        return -EINVAL;
    /*
     * The same npv_dma_map on every transport: a kernel IOMMU pins the pages,
     * a vfio-user server is sent the buffer's file (fd-less memory is
     * -NPV_ENOTSHARED, the library's refusal, npv_dma_wrap in dma.h).
     */
    int r = npv_dma_map(dma, ac->dom, prot, iova);
    if (r < 0)
        npv_ctx_log(ac->ctx, NPV_LOG_ERROR, "aicore: mapping caller memory %p: %s",
                    npv_dma_vaddr(dma), npv_strerror(r));
    return r;
}

static bool overlaps(npv_iova_t op, uint64_t bytes, npv_iova_t lo, uint64_t len)
{
    return op < lo + len && lo < op + bytes;
}

/* Whether a task of run reads or writes [lo, lo + len): the operands' extents, fp32. */
static bool run_names(const struct npv_aicore_run *run, npv_iova_t lo, uint64_t len)
{
    for (uint32_t i = 0; i < run->nr_tasks; i++) {
        const struct npv_aicore_task *t = &run->tasks[i];
        uint64_t a, b, c;
        if (t->op == NPV_AICORE_OP_VADD) {
            a = b = c = (uint64_t)t->n * sizeof(float);
        } else {
            a = (uint64_t)t->m * t->k * sizeof(float);
            b = (uint64_t)t->k * t->n * sizeof(float);
            c = (uint64_t)t->m * t->n * sizeof(float);
        }
        if (overlaps(t->a, a, lo, len) || overlaps(t->b, b, lo, len) || overlaps(t->c, c, lo, len))
            return true;
    }
    return false;
}

int npv_aicore_mem_unmap(struct npv_aicore *ac, struct npv_dma *dma)
{
    if (ac == NULL || dma == NULL)
        return -EINVAL;
    npv_iova_t iova;
    int r = npv_dma_iova(dma, ac->dom, &iova);
    if (r < 0)
        return r;
    /*
     * Prepared runs will read it, the active one may be reading it, and a
     * finished run that was abandoned (a missed deadline or budget) may still
     * be on the device until its reset: the device would DMA into an IOVA
     * that is unmapped, or given to the next buffer.
     */
    for (unsigned s = 0; s < NPV_AICORE_SLOTS; s++) {
        const struct npv_aicore_run *run = &ac->runs[s];
        bool live = run->state == RUN_PREPARED || run->state == RUN_ACTIVE ||
                    run->abandoned; /* until a reset, released or not */
        if (live && run_names(run, iova, npv_dma_size(dma)))
            return -EBUSY;
    }
    return npv_dma_unmap(dma, ac->dom);
}

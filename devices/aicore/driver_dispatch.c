/* SPDX-License-Identifier: MIT */
/*
 * The host as the on-chip scheduler: handshake, dispatch, ACK/FIN polling
 * (the AICPU side of simpler's handshake: scheduler_cold_path.cpp,
 * scheduler_dispatch.cpp and scheduler_completion.cpp in
 * src/a2a3/runtime/tensormap_and_ringbuffer/runtime/scheduler/, against
 * aicore_execute in aicore_executor.cpp). Everything the device wrote (ready
 * records, COND, the result record) is input, checked before use. No system
 * call, lock, allocation or log line here: this is the poll path.
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "driver_internal.h"
#include "status_decode.h"

/*
 * As simpler's SchedulerContext::decide_slot_transition
 * (scheduler_completion.cpp): a pending task's ACK or FIN implies the running
 * one is done (the sub-core takes tasks in order); the running task's ACK
 * frees the pending slot; its FIN completes it. IDLE, the reset value (a
 * token may be written right after the window is opened, before the sub-core
 * has seen it open: scheduler_cold_path.cpp, "no second round-trip"), or the
 * FIN of the task finished before, say nothing new. Anything else names no
 * task of this core.
 */
struct aicore_transition aicore_decide(uint32_t cond, uint32_t running_token, bool running_acked,
                                       uint32_t pending_token, uint32_t done_token)
{
    struct aicore_transition t = {0};
    uint32_t id = cond & AICORE_COND_ID_MASK;
    bool fin = (cond & AICORE_COND_FIN_BIT) != 0;
    if (running_token == 0) {
        t.slot_free = true;
        return t;
    }
    if (pending_token != 0 && id == pending_token) {
        t.complete_running = t.promote_pending = t.pending_acked = true;
        t.complete_pending = fin;
        t.slot_free = true;
        return t;
    }
    if (id == running_token) {
        t.running_acked = true;
        t.complete_running = fin;
        /* The pending task, written behind it, is the core's next: it runs, not yet ACKed. */
        t.promote_pending = fin && pending_token != 0;
        t.slot_free = pending_token == 0;
        return t;
    }
    if (cond == AICORE_COND_IDLE || cond == AICORE_COND_RESET ||
        (done_token != 0 && cond == AICORE_COND_FIN(done_token))) {
        t.slot_free = running_acked && pending_token == 0;
        return t;
    }
    t.invalid = true;
    return t;
}

static uint32_t work_cycles(const struct npv_aicore_task *t)
{
    uint64_t w = t->op == NPV_AICORE_OP_MATMUL ? (uint64_t)t->m * t->n * t->k : t->n;
    return w > UINT32_MAX ? UINT32_MAX : (uint32_t)w;
}

/* Fill payload slot [token & 1], make it visible, then write DMB = token. */
static int dispatch(struct npv_aicore_run *run, struct aicore_core_run *c, uint32_t task)
{
    const struct npv_aicore_task *t = &run->tasks[task];
    uint32_t token = c->last_token + 1;
    if (token > AICORE_TOKEN_MAX)
        return -EOVERFLOW;
    struct aicore_task_payload *p = &c->payload[token & 1u];
    *p = (struct aicore_task_payload){
        .token = token,
        .kernel = t->op == NPV_AICORE_OP_MATMUL ? AICORE_KERNEL_MATMUL : AICORE_KERNEL_VADD,
        .m = t->op == NPV_AICORE_OP_MATMUL ? t->m : 0,
        .n = t->n,
        .k = t->op == NPV_AICORE_OP_MATMUL ? t->k : 0,
        .work_cycles = work_cycles(t),
        .a = t->a,
        .b = t->b,
        .c = t->c,
    };
    size_t off = (size_t)((uint8_t *)p - (uint8_t *)npv_dma_vaddr(run->dma));
    npv_dma_sync_for_device(run->dma, off, sizeof(*p));
    atomic_thread_fence(memory_order_release);
    int r = aicore_ctrl_write(run->ac, c->phys, AICORE_CTRL_DMB, token);
    if (r < 0)
        return r;
    aicore_core_dispatched(c, task, token, aicore_now_ns() + run->ac->cfg.task_timeout_ns);
    return 0;
}

void aicore_core_dispatched(struct aicore_core_run *c, uint32_t task, uint32_t token,
                            uint64_t deadline_ns)
{
    c->last_token = token;
    if (c->running == AICORE_NO_TASK) {
        c->running = task;
        c->running_token = token;
        c->running_acked = false;
        c->deadline_ns = deadline_ns;
    } else {
        c->pending = task;
        c->pending_token = token;
    }
    c->next++;
}

bool aicore_core_slot_free(const struct aicore_core_run *c)
{
    return c->running == AICORE_NO_TASK || (c->running_acked && c->pending == AICORE_NO_TASK);
}

static uint32_t retire_running(struct aicore_core_run *c)
{
    uint32_t task = c->running;
    c->done_token = c->running_token;
    c->running = AICORE_NO_TASK;
    c->running_token = 0;
    c->running_acked = false;
    return task;
}

unsigned aicore_core_apply(struct aicore_core_run *c, struct aicore_transition t,
                           uint64_t next_deadline_ns, uint32_t done[2])
{
    unsigned n = 0;
    if (t.running_acked)
        c->running_acked = true;
    if (t.complete_running)
        done[n++] = retire_running(c);
    if (t.promote_pending) {
        c->running = c->pending;
        c->running_token = c->pending_token;
        c->running_acked = t.pending_acked;
        c->deadline_ns = next_deadline_ns;
        c->pending = AICORE_NO_TASK;
        c->pending_token = 0;
        if (t.complete_pending)
            done[n++] = retire_running(c);
    }
    return n;
}

static bool next_ready(const struct npv_aicore_run *run, const struct aicore_core_run *c)
{
    if (c->next >= c->count)
        return false;
    uint32_t dep = run->tasks[run->core_order[c->first + c->next]].dep;
    return dep == NPV_AICORE_NO_DEP || run->task_done[dep];
}

/* One sweep of a working core: read COND, account, dispatch what may go, exit when done. */
static int step_working(struct npv_aicore_run *run, struct aicore_core_run *c, uint64_t now)
{
    struct npv_aicore *ac = run->ac;
    if (c->running != AICORE_NO_TASK) {
        uint32_t cond;
        int r = aicore_ctrl_read(ac, c->phys, AICORE_CTRL_COND, &cond);
        if (r < 0)
            return r;
        atomic_thread_fence(memory_order_acquire); /* COND before the results it announces */
        struct aicore_transition t = aicore_decide(cond, c->running_token, c->running_acked,
                                                   c->pending_token, c->done_token);
        if (t.invalid)
            return -EPROTO;
        uint32_t done[2];
        unsigned n = aicore_core_apply(c, t, now + ac->cfg.task_timeout_ns, done);
        for (unsigned i = 0; i < n; i++) {
            run->task_done[done[i]] = 1;
            run->tasks_done++;
        }
    }
    if (aicore_core_slot_free(c) && next_ready(run, c)) {
        int r = dispatch(run, c, run->core_order[c->first + c->next]);
        if (r < 0)
            return r;
    }
    if (c->running != AICORE_NO_TASK && now > c->deadline_ns)
        return -ETIMEDOUT;
    if (c->running == AICORE_NO_TASK && c->next >= c->count) {
        int r = aicore_ctrl_write(ac, c->phys, AICORE_CTRL_DMB, AICORE_DMB_EXIT);
        if (r < 0)
            return r;
        c->phase = CORE_EXITING;
        /* No task runs any more: the deadline now bounds the exit itself. */
        c->deadline_ns = now + ac->cfg.poll_timeout_ns;
    }
    return 0;
}

/* Ready record of rank r: it must name the sub-core that rank belongs to. */
static int step_ready(struct npv_aicore_run *run, uint32_t rank)
{
    struct aicore_core_run *c = &run->cores[rank];
    volatile struct aicore_handshake *w = &run->workers[rank];
    size_t w_off = (size_t)((const uint8_t *)w - (const uint8_t *)npv_dma_vaddr(run->dma));
    /*
     * The sub-core writes the record and flushes its line (simpler's
     * aicore_execute in aicore_executor.cpp: dcci after aicore_done; the AICPU
     * invalidates host-DMA'd memory before reading it, simpler's
     * docs/hardware/cache-coherency.md): here the host reads it across DMA, so
     * past its own cached line first on a non-coherent host.
     */
    npv_dma_sync_for_cpu(run->dma, w_off, sizeof(*w));
    uint32_t done = w->done;
    if (done == 0)
        return 0;
    atomic_thread_fence(memory_order_acquire); /* done is written after the rest */
    int ready = aicore_decode_ready(done, w->physical_core_id, w->core_type, rank, c->phys,
                                    run->ac->topo.clusters);
    if (ready < 0)
        return ready;
    w->task = c->payload_iova;
    /*
     * The sub-core invalidates and reads `task` once its window opens
     * (execute_dispatch_loop's dcci in simpler's aicore_executor.cpp): cleaned
     * first.
     */
    npv_dma_sync_for_device(run->dma, w_off, sizeof(*w));
    atomic_thread_fence(memory_order_release); /* the payload pointer before the window opens */
    /*
     * Open the window (a2a3: FAST_PATH, then DMB = IDLE). That is the
     * acknowledgement: no wait for COND = IDLE before the first token
     * (scheduler_cold_path.cpp, "no second round-trip").
     */
    int r = aicore_ctrl_write(run->ac, c->phys, AICORE_CTRL_FAST_PATH, AICORE_FAST_PATH_OPEN);
    if (r == 0)
        r = aicore_ctrl_write(run->ac, c->phys, AICORE_CTRL_DMB, AICORE_DMB_IDLE);
    if (r == 0)
        c->phase = CORE_WORKING;
    return r;
}

/*
 * A sub-core that reached EXITED: its window is closed again, DMB = IDLE then
 * FAST_PATH = CLOSE, as simpler's shutdown leaves every core it opened
 * (platform_deinit_aicore_regs in src/a2a3/platform/shared/aicpu/platform_regs.cpp).
 */
static int step_exiting(struct npv_aicore_run *run, struct aicore_core_run *c)
{
    uint32_t cond;
    int r = aicore_ctrl_read(run->ac, c->phys, AICORE_CTRL_COND, &cond);
    if (r < 0 || cond != AICORE_COND_EXITED)
        return r;
    r = aicore_ctrl_write(run->ac, c->phys, AICORE_CTRL_DMB, AICORE_DMB_IDLE);
    if (r == 0)
        r = aicore_ctrl_write(run->ac, c->phys, AICORE_CTRL_FAST_PATH, AICORE_FAST_PATH_CLOSE);
    if (r == 0)
        c->phase = CORE_EXITED;
    return r;
}

/* The record says how the run ended; its epoch says whether it is this run's at all. */
static int check_record(struct npv_aicore_run *run, bool all_exited)
{
    volatile struct aicore_result *rec = run->result_rec;
    /* Written by the device's DMA: past the CPU's cached line ("cache rules", as above). */
    npv_dma_sync_for_cpu(
        run->dma,
        (size_t)((const uint8_t *)run->result_rec - (const uint8_t *)npv_dma_vaddr(run->dma)),
        sizeof(*rec));
    if (rec->epoch != run->epoch)
        return -EINPROGRESS; /* stale: a previous run's, or none yet */
    atomic_thread_fence(memory_order_acquire);
    struct aicore_result copy;
    memcpy(&copy, (const void *)run->result_rec, sizeof(copy));
    if (copy.epoch == run->epoch) {
        run->result.verdict = copy.verdict;
        run->result.code = (int32_t)(uint32_t)copy.error;
    }
    return aicore_decode_record(&copy, run->epoch, run->nr_tasks, run->nr_cores, run->tasks_done,
                                all_exited);
}

static int finish(struct npv_aicore_run *run)
{
    struct npv_aicore *ac = run->ac;
    int r = run->pmu ? aicore_pmu_collect(run) : 0;
    if (r < 0)
        return r;
    run->end_ns = aicore_now_ns();
    run->result.epoch = run->epoch;
    run->result.status = 0;
    run->result.tasks_done = run->tasks_done;
    run->result.nr_cores = run->nr_cores;
    run->result.elapsed_ns = run->end_ns - run->start_ns;
    run->state = RUN_FINISHED;
    ac->active = NULL;
    aicore_stats_finish(run, 0);
    return 0;
}

int aicore_run_step(struct npv_aicore_run *run)
{
    uint64_t now = aicore_now_ns();
    bool handshaking = false, all_exited = true;
    for (uint32_t rank = 0; rank < run->nr_cores; rank++) {
        struct aicore_core_run *c = &run->cores[rank];
        int r = 0;
        switch (c->phase) {
        case CORE_WAIT_READY:
            r = step_ready(run, rank);
            /* An open window takes its first token in the same sweep. */
            if (r == 0 && c->phase == CORE_WORKING)
                r = step_working(run, c, now);
            break;
        case CORE_WORKING:
            r = step_working(run, c, now);
            break;
        case CORE_EXITING:
            r = step_exiting(run, c);
            /* A sub-core that never leaves its loop writes no record either. */
            if (r == 0 && c->phase == CORE_EXITING && now > c->deadline_ns)
                r = -ETIMEDOUT;
            break;
        default:
            break;
        }
        if (r < 0)
            return r;
        handshaking |= c->phase == CORE_WAIT_READY;
        all_exited &= c->phase == CORE_EXITED;
    }
    /* A fatal device error ends the run with a record before every core exits. */
    int r = check_record(run, all_exited);
    if (r != -EINPROGRESS)
        return r == 0 ? finish(run) : r;
    if (handshaking && now > run->phase_deadline_ns)
        return -ETIMEDOUT; /* a sub-core that never got ready: a bad table entry hangs it */
    if (all_exited) {
        if (!run->winding_down) {
            run->winding_down = true;
            run->phase_deadline_ns = now + run->ac->cfg.poll_timeout_ns;
        } else if (now > run->phase_deadline_ns) {
            return -ETIMEDOUT;
        }
    }
    return -EINPROGRESS;
}

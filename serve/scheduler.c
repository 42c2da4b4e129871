/* SPDX-License-Identifier: MIT */
/*
 * The owner's scheduler: the one thread that calls the RKNPU driver. It
 * serves the client threads' requests (domains, maps), gives clients turns
 * on the device (round robin, `batch` runs a turn, so a domain switch is paid
 * once per turn), and hands each finished run back to its virtual core.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "ctx_internal.h"
#include <npuvfio/dev.h>

#include "owner_internal.h"
#include "regs.h"

/* How long the scheduler waits on the device before it looks for new work again. */
#define SCHED_DEVICE_WAIT_NS 200000ull
/* How long it sleeps with nothing on the device (a request or a run wakes it sooner). */
#define SCHED_IDLE_WAIT_NS 100000000ull

uint64_t owner_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct timespec abs_after(uint64_t ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t t = (uint64_t)ts.tv_nsec + ns % 1000000000ull;
    ts.tv_sec += (time_t)(ns / 1000000000ull + t / 1000000000ull);
    ts.tv_nsec = (long)(t % 1000000000ull);
    return ts;
}

int owner_request(struct npv_owner *o, struct owner_req *req, uint64_t deadline_ns)
{
    struct timespec until = abs_after(deadline_ns);
    pthread_mutex_lock(&o->lock);
    req->next = NULL;
    *o->reqs_tail = req;
    o->reqs_tail = &req->next;
    pthread_cond_signal(&o->sched_cond);
    int r = 0;
    while (!req->done && r != ETIMEDOUT)
        r = pthread_cond_timedwait(&o->done_cond, &o->lock, &until);
    if (!req->done) {
        req->abandoned = true; /* the scheduler finishes and frees it */
        pthread_mutex_unlock(&o->lock);
        return -ETIMEDOUT;
    }
    r = req->result;
    pthread_mutex_unlock(&o->lock);
    return r;
}

/*
 * The device is lost: nothing more reaches it, and the owner stops, which
 * ends every client's connection (their next call fails with -ENOTCONN)
 * rather than leaving them to time out run after run on a device that will
 * never answer. Model choice: an owner does not reopen its device; its
 * supervisor restarts it (docs/sharing.md).
 */
static void device_lost(struct npv_owner *o, int why)
{
    pthread_mutex_lock(&o->lock);
    bool first = o->device_err == 0;
    if (first)
        o->device_err = why;
    pthread_mutex_unlock(&o->lock);
    if (!first)
        return;
    npv_err(o->ctx, "owner: the device is lost (%s): stopping, every client is dropped",
            npv_strerror(why));
    npv_owner_stop(o);
}

/*
 * After a failure, or on an idle tick: is the device still there? Its
 * transport tells: a vfio-user server that went away fails the request
 * (-ENOTCONN), and a PCI function removed from the bus reads all ones in its
 * config space. A platform NPU on the kernel's vfio does not go away; there
 * the driver's resets tell (npv_rknpu_submit_laid_out's -EIO, submit_picked).
 */
static void check_device(struct npv_owner *o)
{
    struct npv_dev_info info;
    int r = npv_dev_info(npv_rknpu_dev(o->npu), &info);
    if (r == 0 && (info.flags & NPV_DEV_FLAG_PCI) && info.vendor_id == 0xffffu)
        r = -ENODEV;
    if (r < 0)
        device_lost(o, r);
}

/* Under o->lock: a client's queued runs are dropped (it reset or left). */
static void drop_queued(struct owner_client *cl)
{
    for (unsigned v = 0; v < OWNER_VCORES; v++) {
        struct owner_run *run = &cl->runs[v];
        if (run->live && !run->on_device) {
            run->live = false;
            cl->queued--;
            cl->st.runs_dropped++;
        }
    }
}

/*
 * Carry out req if it can be now. Returns false when it must wait (runs of
 * its client still on the device). Called without o->lock.
 */
static bool serve_request(struct npv_owner *o, struct owner_req *req)
{
    struct owner_client *cl = req->cl;
    int r = 0;
    pthread_mutex_lock(&o->lock);
    int lost = o->device_err;
    pthread_mutex_unlock(&o->lock);
    switch (req->kind) {
    case OWNER_REQ_CLAIM:
        r = lost ? lost : npv_rknpu_domain_claim(o->npu, req->slot);
        break;
    case OWNER_REQ_MAP:
        r = lost ? lost : npv_rknpu_mem_wrap_at(o->npu, req->dma, req->slot, req->iova, &req->mem);
        break;
    case OWNER_REQ_UNMAP:
    case OWNER_REQ_RELEASE:
        pthread_mutex_lock(&o->lock);
        if (req->kind == OWNER_REQ_RELEASE)
            drop_queued(cl);
        bool busy = cl->on_device != 0;
        pthread_mutex_unlock(&o->lock);
        if (busy)
            return false;
        if (req->kind == OWNER_REQ_UNMAP) {
            /*
             * The memory may be unmapped only when no run of the client can
             * reach it: none is on the device now, and none starts while
             * `unmapping` is held.
             */
            r = npv_rknpu_mem_unwrap(req->mem);
            if (r == 0)
                npv_dma_free(req->dma);
        } else {
            r = npv_rknpu_domain_release(o->npu, req->slot);
        }
        break;
    }
    if (r < 0)
        check_device(o);
    pthread_mutex_lock(&o->lock);
    req->result = r;
    if (req->kind == OWNER_REQ_UNMAP)
        cl->unmapping--;
    /*
     * The slot's next client has a new domain, which the driver attaches
     * (driver_domain.c: the device is switched when its domain differs):
     * its first turn is a switch, counted as one.
     */
    if (req->kind == OWNER_REQ_RELEASE && r == 0 && o->last_slot == (int)req->slot)
        o->last_slot = -1;
    if (!req->abandoned) {
        req->done = true;
        pthread_cond_broadcast(&o->done_cond);
        pthread_mutex_unlock(&o->lock);
        return true;
    }
    pthread_mutex_unlock(&o->lock);
    /* Nobody waits any more: finish what the waiter would have done. */
    if (req->kind == OWNER_REQ_MAP) {
        if (r == 0)
            npv_rknpu_mem_unwrap(req->mem);
        npv_dma_free(req->dma);
    } else if (req->kind == OWNER_REQ_CLAIM && r == 0) {
        npv_rknpu_domain_release(o->npu, req->slot); /* the client was refused meanwhile */
    } else if (req->kind == OWNER_REQ_RELEASE) {
        owner_client_free(cl);
    }
    free(req);
    return true;
}

/* Serve the requests that can be served; those that must wait stay queued, in order. */
static void serve_requests(struct npv_owner *o)
{
    pthread_mutex_lock(&o->lock);
    struct owner_req *list = o->reqs;
    o->reqs = NULL;
    o->reqs_tail = &o->reqs;
    pthread_mutex_unlock(&o->lock);
    struct owner_req *waiting = NULL, **wtail = &waiting;
    while (list != NULL) {
        struct owner_req *req = list;
        list = req->next;
        req->next = NULL;
        if (!serve_request(o, req)) {
            *wtail = req;
            wtail = &req->next;
        }
    }
    if (waiting == NULL)
        return;
    /* Put the waiting ones back in front of what arrived meanwhile. */
    pthread_mutex_lock(&o->lock);
    *wtail = o->reqs;
    if (o->reqs == NULL)
        o->reqs_tail = wtail;
    o->reqs = waiting;
    pthread_mutex_unlock(&o->lock);
}

/* Under o->lock: the client's oldest queued run, or NULL. */
static struct owner_run *oldest_queued(struct owner_client *cl, unsigned *vcore)
{
    struct owner_run *best = NULL;
    for (unsigned v = 0; v < OWNER_VCORES; v++) {
        struct owner_run *run = &cl->runs[v];
        if (run->live && !run->on_device && (best == NULL || run->seq < best->seq)) {
            best = run;
            *vcore = v;
        }
    }
    return best;
}

struct pick {
    struct owner_client *cl;
    unsigned vcore;
    struct owner_run run;
};

/*
 * Under o->lock: the runs to submit now, in turn order. A turn is up to
 * `batch` runs of one client (0: all it has queued); then the next client
 * with queued runs has its turn. The driver runs them in submission order
 * and switches domains only where the client changes (rknpu.h: no job of the
 * current domain starts while one of another waits).
 */
static unsigned pick_runs(struct npv_owner *o, struct pick *out, unsigned max)
{
    unsigned n = 0;
    unsigned batch = o->opts.batch;
    for (unsigned steps = 0; steps <= NPV_RKNPU_MAX_DOMAINS && n < max; steps++) {
        struct owner_client *cl = o->slots[o->rr];
        bool took = false;
        while (cl != NULL && !cl->leaving && cl->unmapping == 0 && cl->queued > 0 && n < max &&
               cl->on_device < o->opts.max_jobs && (batch == 0 || o->turn_runs < batch)) {
            unsigned v = 0;
            struct owner_run *run = oldest_queued(cl, &v);
            run->on_device = true;
            cl->queued--;
            cl->on_device++;
            if (cl->on_device > cl->st.runs_peak)
                cl->st.runs_peak = cl->on_device;
            o->on_device++;
            uint64_t now = owner_now_ns();
            cl->st.wait_ns += now - run->queued_ns;
            out[n++] = (struct pick){.cl = cl, .vcore = v, .run = *run};
            o->turn_runs++;
            took = true;
        }
        /* A client at its max_jobs ends its turn: its waiting runs wait for the next. */
        bool turn_over = cl == NULL || cl->queued == 0 || cl->leaving || cl->unmapping != 0 ||
                         cl->on_device >= o->opts.max_jobs || (batch != 0 && o->turn_runs >= batch);
        if (!turn_over)
            break; /* out of room: the turn goes on next time */
        o->rr = (o->rr + 1) % NPV_RKNPU_MAX_DOMAINS;
        o->turn_runs = 0;
        (void)took;
    }
    return n;
}

static uint64_t run_cookie(const struct owner_client *cl, unsigned vcore, uint64_t gen)
{
    /* The slot and virtual core, and the run's generation to tell a stale completion. */
    return (gen << 8) | ((uint64_t)cl->slot << 2) | vcore;
}

/*
 * A run left the device with status. Without o->lock: the virtual core's
 * finish takes the core's lock, which start() holds while it takes o->lock.
 */
static void run_ended(struct npv_owner *o, uint64_t cookie, int32_t status, uint32_t dev_error)
{
    unsigned vcore = (unsigned)(cookie & 3u);
    unsigned slot = (unsigned)((cookie >> 2) & 0x3fu);
    uint64_t gen = cookie >> 8;
    if (slot >= NPV_RKNPU_MAX_DOMAINS || vcore >= OWNER_VCORES)
        return;
    pthread_mutex_lock(&o->lock);
    struct owner_client *cl = o->slots[slot];
    if (cl == NULL) {
        pthread_mutex_unlock(&o->lock);
        return;
    }
    struct owner_run *run = &cl->runs[vcore];
    bool current = run->live && run->on_device && (run->gen & (UINT64_MAX >> 8)) == gen;
    struct rknpu_run rn = run->run;
    uint64_t vgen = run->gen;
    if (current) {
        run->live = false;
        run->on_device = false;
    }
    /* Counted even when its virtual core was reset meanwhile: it left the device. */
    cl->on_device--;
    o->on_device--;
    if (!current)
        cl->st.runs_dropped++;
    else if (status == 0)
        cl->st.runs_ok++;
    else
        cl->st.runs_failed++;
    pthread_mutex_unlock(&o->lock);
    if (status == -ETIMEDOUT)
        check_device(o); /* a device that went away answers no run */
    if (!current)
        return;
    if (status == 0) {
        /*
         * The last task's done bit, the DPU of its ping-pong group, as the
         * model's core raises it (model_core.c run); the driver reports no
         * status word for a success. Model choice.
         */
        bool group1 = rn.pingpong && ((rn.tasks - 1u) & 1u);
        npv_rknpu_model_finish(cl->vdev, vcore, vgen, group1 ? RKNPU_INT_DPU_1 : RKNPU_INT_DPU_0,
                               rn.tasks);
    } else if (status == -EIO) {
        /* The real core's interrupt status (a DMA fault: an IOVA outside its domain). */
        npv_rknpu_model_finish(cl->vdev, vcore, vgen, dev_error & RKNPU_INT_VALID_MASK, 0);
    }
    /*
     * Otherwise (its deadline passed and the real core was reset, or it was
     * cancelled with another part): the virtual core stays running, as a
     * stalled core does, until the client's own deadline resets it. Model
     * choice.
     */
}

static void submit_picked(struct npv_owner *o, const struct pick *p)
{
    /*
     * The run ends on the done bits its client unmasked; a client that
     * masked them all (a polling driver) still ends on the DPU's, which the
     * core raises in RAW_STATUS whatever the mask (model_core.c run).
     */
    uint32_t done = p->run.run.int_mask & ~(uint32_t)RKNPU_INT_DMA_ERROR & RKNPU_INT_VALID_MASK;
    if (done == 0)
        done = RKNPU_INT_DPU_DONE;
    struct npv_rknpu_laid_out_job job = {
        .regcmd_iova = p->run.run.base,
        .amount = p->run.run.amount,
        .nr_tasks = p->run.run.tasks,
        .done_mask = done,
        .core_mask = 0,
        .domain_id = p->cl->slot,
        .timeout_ns = o->opts.job_timeout_ns,
        .cookie = run_cookie(p->cl, p->vcore, p->run.gen),
    };
    int r = npv_rknpu_submit_laid_out(o->npu, &job);
    if (r == -EIO) {
        /*
         * A core the driver could not reset: the NPU is dead until
         * npv_rknpu_reset revives it (rknpu.h). One reset, and the run
         * again; a device that stays dead is lost.
         */
        npv_warn(o->ctx, "serve: the NPU is dead: resetting it");
        r = npv_rknpu_reset(o->npu);
        if (r == 0)
            r = npv_rknpu_submit_laid_out(o->npu, &job);
        if (r == -EIO || r == -ENOTCONN || r == -ENODEV)
            device_lost(o, r);
    }
    if (r == 0) {
        /*
         * A switch is counted where a run of another domain than the last
         * one reached the driver, which switches before it starts
         * (driver_job.c schedule): a run it refused switched nothing.
         */
        pthread_mutex_lock(&o->lock);
        if (o->last_slot != (int)p->cl->slot) {
            p->cl->st.switches++;
            o->last_slot = (int)p->cl->slot;
        }
        pthread_mutex_unlock(&o->lock);
    }
    if (r < 0) {
        check_device(o);
        /*
         * A run the real core cannot take (no task, a list outside the
         * 32-bit space): the virtual core stalls, as the model's does on a
         * config error, until the client resets it.
         */
        npv_warn(o->ctx, "serve: client %llu: run refused by the driver: %s",
                 (unsigned long long)p->cl->st.id, npv_strerror(r));
        run_ended(o, job.cookie, r, 0);
    }
}

/* A copy of the driver's counters for the stats thread, which may not call the driver. */
static void publish_device_counters(struct npv_owner *o)
{
    struct npv_rknpu_counters c;
    npv_rknpu_counters(o->npu, &c);
    pthread_mutex_lock(&o->lock);
    o->device = c;
    pthread_mutex_unlock(&o->lock);
}

void *owner_sched_main(void *arg)
{
    struct npv_owner *o = arg;
    struct pick picks[16];
    struct npv_cpl cpl[16];
    for (;;) {
        serve_requests(o);
        publish_device_counters(o);
        pthread_mutex_lock(&o->lock);
        unsigned n = o->device_err ? 0 : pick_runs(o, picks, 16);
        bool device_busy = o->on_device > 0;
        if (n == 0 && !device_busy) {
            if (o->sched_stop && o->nr_clients == 0 && o->reqs == NULL) {
                pthread_mutex_unlock(&o->lock);
                break;
            }
            bool tick = false;
            if (o->reqs == NULL) {
                struct timespec until = abs_after(SCHED_IDLE_WAIT_NS);
                tick = pthread_cond_timedwait(&o->sched_cond, &o->lock, &until) == ETIMEDOUT;
            }
            bool lost = o->device_err != 0;
            pthread_mutex_unlock(&o->lock);
            /* An idle owner notices a lost device too, for its supervisor. */
            if (tick && !lost)
                check_device(o);
            continue;
        }
        pthread_mutex_unlock(&o->lock);
        for (unsigned i = 0; i < n; i++)
            submit_picked(o, &picks[i]);
        if (!device_busy && n == 0)
            continue;
        /* A short wait: new runs and requests are looked at between waits. */
        int got = npv_rknpu_wait(o->npu, 1, n ? 0 : SCHED_DEVICE_WAIT_NS, cpl, 16);
        for (int i = 0; i < got; i++)
            run_ended(o, cpl[i].cookie, cpl[i].status, cpl[i].dev_error);
        if (got < 0) {
            npv_warn(o->ctx, "serve: waiting on the device: %s", npv_strerror(got));
            check_device(o);
        }
    }
    return NULL;
}

/* SPDX-License-Identifier: MIT */
/*
 * One client of the owner: its virtual RKNPU (a forwarding model served on
 * its connection by a thread of its own), its domain, its maps and its runs.
 * The callbacks below run on that thread (the vfio-user event loop).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctx_internal.h"
#include <npuvfio/vfio_user_server.h>

#include "owner_internal.h"
#include "regs.h"

/*
 * How long a client thread waits for the scheduler: a request waits at most
 * for the client's runs on the device to end, which their deadline bounds.
 */
static uint64_t request_deadline(const struct npv_owner *o)
{
    uint64_t job = o->opts.job_timeout_ns ? o->opts.job_timeout_ns : 1000000000ull;
    return 4 * job + 10000000000ull;
}

/* OPERATION_ENABLE rose on virtual core vcore (under its lock; must not block). */
static int fwd_start(void *arg, unsigned vcore, uint64_t gen, const struct rknpu_run *rn)
{
    struct owner_client *cl = arg;
    struct npv_owner *o = cl->o;
    if (vcore >= OWNER_VCORES)
        return -EINVAL;
    pthread_mutex_lock(&o->lock);
    struct owner_run *run = &cl->runs[vcore];
    int r = 0;
    if (run->live) {
        r = -EBUSY; /* cannot happen: the model starts only an idle core */
    } else {
        *run = (struct owner_run){
            .live = true,
            .gen = gen,
            .seq = cl->next_seq++,
            .queued_ns = owner_now_ns(),
            .run = *rn,
        };
        cl->queued++;
        cl->st.runs++;
        pthread_cond_signal(&o->sched_cond);
    }
    pthread_mutex_unlock(&o->lock);
    return r;
}

/* The client reset virtual core vcore: its run is dropped (or its end ignored). */
static void fwd_abandon(void *arg, unsigned vcore, uint64_t gen)
{
    struct owner_client *cl = arg;
    struct npv_owner *o = cl->o;
    if (vcore >= OWNER_VCORES)
        return;
    pthread_mutex_lock(&o->lock);
    struct owner_run *run = &cl->runs[vcore];
    if (run->live && run->gen == gen) {
        if (!run->on_device) {
            cl->queued--;
            cl->st.runs_dropped++;
        }
        /* On the device it runs out (its deadline bounds it); its end is ignored. */
        run->live = false;
        run->on_device = false;
    }
    pthread_mutex_unlock(&o->lock);
}

static int fwd_dma_map(void *arg, npv_iova_t iova, uint64_t size, unsigned prot, void *vaddr,
                       int fd, uint64_t fd_offset)
{
    struct owner_client *cl = arg;
    struct npv_owner *o = cl->o;
    (void)prot; /* the RKNPU driver maps read-write; its IOMMU has no per-page read-only */
    if (vaddr == NULL || fd < 0) {
        /* Message DMA cannot reach a real device: only shared memory can be mapped. */
        pthread_mutex_lock(&o->lock);
        cl->st.maps_refused++;
        pthread_mutex_unlock(&o->lock);
        npv_warn(o->ctx, "serve: client %llu: a mapping without fd refused",
                 (unsigned long long)cl->st.id);
        return -EOPNOTSUPP;
    }
    pthread_mutex_lock(&o->lock);
    /* Each mapping holds an fd of the owner's: one client may not take the others'
     * (owner_internal.h). */
    bool too_many = cl->nr_maps >= o->max_maps;
    bool over = size > o->opts.max_bytes || cl->st.mapped_bytes > o->opts.max_bytes - size;
    if (over || too_many)
        cl->st.maps_refused++;
    else
        cl->st.mapped_bytes += size; /* reserved now, returned if the map fails */
    pthread_mutex_unlock(&o->lock);
    if (too_many) {
        npv_info(o->ctx, "serve: client %llu: map refused: it has %zu mappings, its most",
                 (unsigned long long)cl->st.id, cl->nr_maps);
        return -ENOSPC;
    }
    if (over) {
        npv_info(o->ctx, "serve: client %llu: map of %llu bytes refused: over its %llu",
                 (unsigned long long)cl->st.id, (unsigned long long)size,
                 (unsigned long long)o->opts.max_bytes);
        return -EDQUOT;
    }
    int r = 0;
    if (cl->nr_maps == cl->cap_maps) {
        size_t cap = cl->cap_maps ? cl->cap_maps * 2 : 16;
        struct owner_map *n = realloc(cl->maps, cap * sizeof(*n));
        if (n == NULL)
            r = -ENOMEM;
        else {
            cl->maps = n;
            cl->cap_maps = cap;
        }
    }
    struct owner_req *req = NULL;
    if (r == 0) {
        req = calloc(1, sizeof(*req));
        if (req == NULL)
            r = -ENOMEM;
    }
    if (r == 0) {
        /* The owner's own view of the client's memory, through the client's file. */
        r = npv_dma_wrap(o->ctx, vaddr, (size_t)size, fd, fd_offset, 0, &req->dma);
        if (r < 0) {
            free(req);
            req = NULL;
        }
    }
    if (r == 0) {
        req->kind = OWNER_REQ_MAP;
        req->cl = cl;
        req->slot = cl->slot;
        req->iova = iova;
        r = owner_request(o, req, request_deadline(o));
        if (r == 0)
            cl->maps[cl->nr_maps++] =
                (struct owner_map){.iova = iova, .size = size, .dma = req->dma, .mem = req->mem};
        else if (r != -ETIMEDOUT)
            npv_dma_free(req->dma);
        if (r != -ETIMEDOUT)
            free(req); /* else the scheduler frees it */
    }
    pthread_mutex_lock(&o->lock);
    if (r < 0)
        cl->st.mapped_bytes -= size;
    else
        cl->st.maps++;
    pthread_mutex_unlock(&o->lock);
    return r;
}

static void fwd_dma_unmap(void *arg, npv_iova_t iova, uint64_t size)
{
    struct owner_client *cl = arg;
    struct npv_owner *o = cl->o;
    size_t i = 0;
    while (i < cl->nr_maps && (cl->maps[i].iova != iova || cl->maps[i].size != size))
        i++;
    if (i == cl->nr_maps)
        return; /* a map the owner refused */
    struct owner_map mp = cl->maps[i];
    cl->maps[i] = cl->maps[--cl->nr_maps];

    struct owner_req *req = calloc(1, sizeof(*req));
    bool gone = !npv_vus_connected(cl->srv);
    pthread_mutex_lock(&o->lock);
    if (gone && !cl->leaving) {
        /* The client is gone: what it queued will never be wanted. */
        cl->leaving = true;
        for (unsigned v = 0; v < OWNER_VCORES; v++) {
            struct owner_run *run = &cl->runs[v];
            if (run->live && !run->on_device) {
                run->live = false;
                cl->queued--;
                cl->st.runs_dropped++;
            }
        }
    }
    cl->st.mapped_bytes -= size;
    cl->st.maps--;
    if (req != NULL)
        cl->unmapping++; /* no run of the client starts until the unmap is done */
    pthread_mutex_unlock(&o->lock);
    if (req == NULL) {
        /* No memory for the request: the mapping stays in the domain until the domain goes. */
        npv_err(o->ctx, "serve: client %llu: out of memory unmapping 0x%llx",
                (unsigned long long)cl->st.id, (unsigned long long)iova);
        return;
    }
    req->kind = OWNER_REQ_UNMAP;
    req->cl = cl;
    req->slot = cl->slot;
    req->mem = mp.mem;
    req->dma = mp.dma; /* the scheduler frees it once unwrapped */
    int r = owner_request(o, req, request_deadline(o));
    if (r == -ETIMEDOUT)
        return; /* the scheduler finishes it */
    if (r < 0)
        npv_err(o->ctx, "serve: client %llu: unmap of 0x%llx: %s", (unsigned long long)cl->st.id,
                (unsigned long long)iova, npv_strerror(r));
    free(req);
}

static void *client_main(void *arg)
{
    struct owner_client *cl = arg;
    struct npv_owner *o = cl->o;
    int fd = cl->fd;
    cl->fd = -1;
    int r = npv_vus_serve_fd(cl->srv, fd);
    if (r < 0)
        npv_info(o->ctx, "serve: client %llu: %s", (unsigned long long)cl->st.id, npv_strerror(r));
    npv_info(o->ctx, "serve: client %llu (pid %d) left", (unsigned long long)cl->st.id,
             (int)cl->st.pid);
    /* Its maps are gone (the server unmapped them); now its domain. */
    struct owner_req *req = calloc(1, sizeof(*req));
    if (req == NULL) {
        npv_err(o->ctx, "serve: client %llu: out of memory: its domain stays",
                (unsigned long long)cl->st.id);
        return NULL;
    }
    req->kind = OWNER_REQ_RELEASE;
    req->cl = cl;
    req->slot = cl->slot;
    r = owner_request(o, req, request_deadline(o));
    if (r == -ETIMEDOUT) {
        npv_err(o->ctx, "serve: client %llu: its runs outlived their deadline; released later",
                (unsigned long long)cl->st.id);
        return NULL; /* the scheduler frees the client when it is done */
    }
    if (r < 0)
        npv_err(o->ctx, "serve: client %llu: releasing its domain: %s",
                (unsigned long long)cl->st.id, npv_strerror(r));
    free(req);
    owner_client_free(cl);
    return NULL;
}

void owner_client_free(struct owner_client *cl)
{
    struct npv_owner *o = cl->o;
    /*
     * The virtual device first: its runs are all off the device (the
     * release waited for them), so the scheduler has nothing to finish on
     * it; once the slot is free below, npv_owner_run may return and the
     * caller free what the device used.
     */
    pthread_mutex_lock(&o->lock);
    cl->srv = NULL; /* npv_owner_run stops only the servers still here */
    pthread_mutex_unlock(&o->lock);
    npv_rknpu_model_free(cl->vdev);
    free(cl->maps);
    pthread_mutex_lock(&o->lock);
    cl->st.connected = false;
    o->history[(o->history_head + o->nr_history) % OWNER_HISTORY] = cl->st;
    if (o->nr_history < OWNER_HISTORY)
        o->nr_history++;
    else
        o->history_head = (o->history_head + 1) % OWNER_HISTORY;
    o->slots[cl->slot] = NULL;
    o->nr_clients--;
    pthread_cond_broadcast(&o->sched_cond);
    pthread_cond_broadcast(&o->done_cond);
    pthread_mutex_unlock(&o->lock);
    free(cl);
}

/* A thread nobody joins: 0 or a negative errno. */
static int start_detached(void *(*fn)(void *), void *arg)
{
    pthread_attr_t attr;
    pthread_t thread;
    int r = -pthread_attr_init(&attr);
    if (r == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        r = -pthread_create(&thread, &attr, fn, arg);
        pthread_attr_destroy(&attr);
    }
    return r;
}

struct refusal {
    struct npv_owner *o;
    int fd;
    int err;
};

static void *refuse_main(void *arg)
{
    struct refusal *rf = arg;
    struct npv_owner *o = rf->o;
    npv_vus_refuse_fd(o->ctx, rf->fd, rf->err, 1000);
    free(rf);
    pthread_mutex_lock(&o->lock);
    o->refusing--;
    pthread_cond_broadcast(&o->done_cond);
    pthread_mutex_unlock(&o->lock);
    return NULL;
}

/*
 * A refusal waits up to 1 s for the client's VERSION: on the accept loop,
 * connections that send nothing would hold back every client behind them
 * until it timed out. Past OWNER_MAX_REFUSING the connection is closed at
 * once (its open fails without EUSERS, but fails).
 */
void owner_refuse(struct npv_owner *o, int fd, int err)
{
    pthread_mutex_lock(&o->lock);
    bool room = o->refusing < OWNER_MAX_REFUSING;
    if (room)
        o->refusing++;
    pthread_mutex_unlock(&o->lock);
    struct refusal *rf = room ? malloc(sizeof(*rf)) : NULL;
    int r = -ENOMEM;
    if (rf != NULL) {
        *rf = (struct refusal){.o = o, .fd = fd, .err = err};
        r = start_detached(refuse_main, rf);
        if (r == 0)
            return;
        free(rf);
    }
    if (room) {
        pthread_mutex_lock(&o->lock);
        o->refusing--;
        pthread_mutex_unlock(&o->lock);
    }
    npv_info(o->ctx, "serve: a connection closed unanswered (%s)",
             room ? npv_strerror(r) : "too many refusals under way");
    close(fd);
}

int owner_client_start(struct npv_owner *o, int fd, pid_t pid, uid_t uid)
{
    struct owner_client *cl = calloc(1, sizeof(*cl));
    if (cl == NULL) {
        close(fd);
        return -ENOMEM;
    }
    cl->o = o;
    cl->fd = fd;
    pthread_mutex_lock(&o->lock);
    if (o->device_err != 0) {
        /* The owner is stopping: a client that came meanwhile is told so. */
        pthread_mutex_unlock(&o->lock);
        free(cl);
        owner_refuse(o, fd, ENODEV);
        return -ENODEV;
    }
    unsigned slot = NPV_RKNPU_MAX_DOMAINS;
    if (o->nr_clients < o->opts.max_clients)
        for (unsigned s = 0; s < NPV_RKNPU_MAX_DOMAINS && slot == NPV_RKNPU_MAX_DOMAINS; s++)
            if (o->slots[s] == NULL)
                slot = s;
    if (slot == NPV_RKNPU_MAX_DOMAINS) {
        pthread_mutex_unlock(&o->lock);
        free(cl);
        npv_info(o->ctx, "serve: client pid %d refused: %u clients already", (int)pid,
                 o->opts.max_clients);
        owner_refuse(o, fd, EUSERS);
        return -EUSERS;
    }
    cl->slot = slot;
    cl->st = (struct npv_owner_client_stats){
        .id = ++o->next_id, .domain_id = slot, .pid = pid, .uid = uid, .connected = true};
    o->slots[slot] = cl;
    o->nr_clients++;
    pthread_mutex_unlock(&o->lock);

    const struct rknpu_forward fwd = {
        .arg = cl,
        .start = fwd_start,
        .abandon = fwd_abandon,
        .dma_map = fwd_dma_map,
        .dma_unmap = fwd_dma_unmap,
    };
    int r = npv_rknpu_model_new_forwarding(o->ctx, &fwd, &cl->vdev);
    struct owner_req *req = NULL;
    if (r == 0) {
        cl->srv = npv_rknpu_model_server(cl->vdev);
        req = calloc(1, sizeof(*req));
        r = req ? 0 : -ENOMEM;
    }
    bool claimed = false;
    if (r == 0) {
        req->kind = OWNER_REQ_CLAIM;
        req->cl = cl;
        req->slot = slot;
        r = owner_request(o, req, request_deadline(o));
        if (r != -ETIMEDOUT)
            free(req); /* else the scheduler frees it, and releases a late claim */
        claimed = r == 0;
    }
    if (r == 0) {
        /*
         * Detached from its start, and cl not touched once it runs: a client
         * that leaves at once frees cl on its own thread (owner_client_free),
         * maybe before pthread_create returns here (TSan, npuvfio-serve-bench).
         */
        unsigned long long id = (unsigned long long)cl->st.id;
        r = start_detached(client_main, cl);
        if (r == 0) {
            npv_info(o->ctx, "serve: client %llu (pid %d, uid %d) in domain %u", id, (int)pid,
                     (int)uid, slot);
            return 0;
        }
    }
    if (claimed) {
        struct owner_req *rel = calloc(1, sizeof(*rel));
        if (rel != NULL) {
            *rel = (struct owner_req){.kind = OWNER_REQ_RELEASE, .cl = cl, .slot = slot};
            if (owner_request(o, rel, request_deadline(o)) == -ETIMEDOUT) {
                owner_refuse(o, fd, -r);
                return r; /* the scheduler frees the client with the release */
            }
            free(rel);
        }
    }
    npv_warn(o->ctx, "serve: client pid %d refused: %s", (int)pid, npv_strerror(r));
    owner_refuse(o, fd, -r);
    cl->fd = -1;
    npv_rknpu_model_free(cl->vdev);
    pthread_mutex_lock(&o->lock);
    o->slots[slot] = NULL;
    o->nr_clients--;
    pthread_mutex_unlock(&o->lock);
    free(cl);
    return r;
}

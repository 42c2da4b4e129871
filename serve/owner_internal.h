/* SPDX-License-Identifier: MIT */
/* The owner's state, shared by its files (clients, the scheduler). */
#ifndef NPV_SERVE_OWNER_INTERNAL_H
#define NPV_SERVE_OWNER_INTERNAL_H

#include <pthread.h>

#include <npuvfio/dma.h>

#include "model.h"
#include "owner.h"
#include "unix_listen.h"

#define OWNER_VCORES  3u  /* the virtual RKNPU's cores, as the model's */
#define OWNER_HISTORY 64u /* departed clients whose counters are kept */
/*
 * Mappings of one client: each holds an fd of the owner's (npv_dma_wrap
 * keeps the client's file open for the device's replays) and an mmap. Each
 * client may have an equal share of RLIMIT_NOFILE above OWNER_FD_RESERVE
 * (the owner's own: its device, listener, stats), less OWNER_CLIENT_FDS
 * (its connection, twin socket and interrupt eventfds), and never more than
 * OWNER_MAX_MAPS. Model choice.
 */
#define OWNER_FD_RESERVE 64u
#define OWNER_CLIENT_FDS 8u
#define OWNER_MAX_MAPS   1024u
/*
 * Refusals under way at once (each waits up to 1 s for its client's VERSION
 * on a thread of its own, off the accept loop); past them a connection is
 * closed without a reply. Model choice.
 */
#define OWNER_MAX_REFUSING 32u

/* One run of a virtual core, from its OPERATION_ENABLE edge to its end. */
struct owner_run {
    bool live;      /* queued in the owner or on the device */
    bool on_device; /* submitted to the driver */
    uint64_t gen;   /* the virtual core's run (npv_rknpu_model_finish) */
    uint64_t seq;   /* the client's order of starts */
    uint64_t queued_ns;
    struct rknpu_run run;
};

/* One of the client's DMA maps, mirrored into its domain. Client thread only. */
struct owner_map {
    npv_iova_t iova;
    uint64_t size;
    struct npv_dma *dma; /* the owner's view of the client's memory */
    struct npv_rknpu_mem *mem;
};

struct owner_client {
    struct npv_owner *o;
    unsigned slot; /* its domain */
    struct npv_rknpu_model *vdev;
    struct npv_vus *srv;
    int fd; /* until npv_vus_serve_fd takes it */

    /* Under o->lock. */
    struct owner_run runs[OWNER_VCORES];
    unsigned queued;    /* live runs not yet on the device */
    unsigned on_device; /* live runs on the device */
    unsigned unmapping; /* unmaps waiting for its runs on the device to end */
    bool leaving;       /* its connection ended: queued runs are dropped */
    uint64_t next_seq;
    struct npv_owner_client_stats st;

    /* Client thread only. */
    struct owner_map *maps;
    size_t nr_maps, cap_maps;
};

enum owner_req_kind {
    OWNER_REQ_CLAIM,   /* claim the client's domain */
    OWNER_REQ_MAP,     /* wrap dma at iova into it */
    OWNER_REQ_UNMAP,   /* unwrap mem, free dma, once its runs left the device */
    OWNER_REQ_RELEASE, /* drop its queued runs, release the domain once none is on the device */
};

/*
 * A client thread's request to the scheduler, which alone calls the driver.
 * Heap-allocated: a waiter that gives up (its deadline) marks it abandoned
 * and the scheduler finishes and frees it.
 */
struct owner_req {
    enum owner_req_kind kind;
    struct owner_client *cl;
    unsigned slot; /* the client's domain (an abandoned request may outlive the client) */
    npv_iova_t iova;
    struct npv_dma *dma;
    struct npv_rknpu_mem *mem;
    int result;
    bool done, abandoned;
    struct owner_req *next;
};

struct npv_owner {
    struct npv_ctx *ctx;
    struct npv_rknpu *npu;
    struct npv_owner_opts opts;
    size_t max_maps; /* mappings one client may have (OWNER_MAX_MAPS) */
    char *socket_path;
    struct npv_unix_listener listener;
    int stop_fd; /* eventfd: npv_owner_stop */

    pthread_mutex_t lock;
    pthread_cond_t sched_cond; /* wakes the scheduler: a run, a request, stop */
    pthread_cond_t done_cond;  /* wakes requesters */
    struct owner_client *slots[NPV_RKNPU_MAX_DOMAINS];
    unsigned nr_clients;
    uint64_t next_id;
    struct owner_req *reqs; /* FIFO */
    struct owner_req **reqs_tail;
    unsigned rr;        /* the slot whose turn it is */
    unsigned turn_runs; /* runs its turn submitted */
    int last_slot;      /* the domain the last submitted run ran in; -1 none */
    unsigned on_device; /* runs on the device, all clients */
    /* The driver's counters as the scheduler last read them (it alone may call it). */
    struct npv_rknpu_counters device;
    bool sched_stop;
    unsigned refusing; /* refusal threads still running (npv_owner_run waits for them) */
    int device_err;    /* the device is lost (its error): no run, claim or map reaches it again */
    struct npv_owner_client_stats history[OWNER_HISTORY];
    unsigned nr_history, history_head;

    pthread_t sched_thread;
    bool sched_started;
    bool stats_source; /* "serve" registered with the context's stats */
};

/* scheduler.c */
void *owner_sched_main(void *arg);
/* Queue req and wait for it (deadline_ns from now). 0, its result, or -ETIMEDOUT (abandoned). */
int owner_request(struct npv_owner *o, struct owner_req *req, uint64_t deadline_ns);
uint64_t owner_now_ns(void);

/* client.c */
/* Serve the accepted connection fd in a new client (a thread of its own); closes fd on error. */
int owner_client_start(struct npv_owner *o, int fd, pid_t pid, uid_t uid);
/*
 * Refuse the accepted connection fd with err (its VERSION answered with
 * that error) on a thread of its own, so that the accept loop goes on.
 */
void owner_refuse(struct npv_owner *o, int fd, int err);
/* The last of a client (its thread, or the scheduler for an abandoned release). Under no lock. */
void owner_client_free(struct owner_client *cl);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * A small inference server a deployment can start from: N worker threads
 * share ONE device through one npv_share (npuvfio/share.h), requests arrive
 * over a Unix stream socket as length-prefixed input tensors
 * (inference_proto.h), each runs within a per-request budget
 * (npv_edgetpu_submit_within / npv_rknpu_submit_within), live counters are
 * served with npv_stats_serve, and SIGTERM / SIGINT drain what was accepted
 * before the device is closed.
 *
 *   inference_server --device rknpu --model --socket /tmp/infer.sock \
 *       --stats /tmp/infer.stats --workers 4 --budget-us 20000 &
 *   inference_load --device rknpu --socket /tmp/infer.sock --rates 500,2000 \
 *       --duration 3 --check
 *   npuvfio stats /tmp/infer.stats --prometheus
 *
 * The work (inference_work.h): Edge TPU, the sample network of
 * edgetpu_sample.c (compiled models run through npv_edgetpu_model_invoke,
 * one request at a time per chip, which an npv_share cannot serve); RKNPU,
 * an int8 matmul of a fixed shape.
 *
 * Threads: the main thread accepts connections and handles signals; one
 * reader thread per connection reads frames into a bounded queue (a full
 * queue answers -EAGAIN: load is shed, never buffered without bound); the
 * workers take requests from the queue, each with its own DMA buffers,
 * submit through the share and wait on their own ticket, then write the
 * reply under the connection's write lock.
 *
 * Device: --model starts the device's model in this process over vfio-user
 * (in-tree builds only: NPV_EXAMPLE_WITH_MODEL), --vfio-user SOCK opens a
 * model another process serves (`npuvfio sim --device NAME`), and a
 * positional DEVICE a PCI address or platform device bound to vfio.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4, pipe2 */
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <npuvfio/bar.h>
#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/domain.h>
#include <npuvfio/edgetpu.h>
#include <npuvfio/edgetpu_insn.h>
#include <npuvfio/rknpu.h>
#include <npuvfio/share.h>
#include <npuvfio/stats.h>

#include "inference_proto.h"
#include "inference_work.h"

#ifdef NPV_EXAMPLE_WITH_MODEL
#include "edgetpu/regs.h"
#include "registry.h"
#include "rknpu/regs.h"
#endif

#define MS 1000000ull
/* A frame's body must arrive within this long of its header. */
#define FRAME_TIMEOUT_MS 5000
/* A reply must be taken by the client within this long, else the connection is dropped. */
#define REPLY_TIMEOUT_MS 2000
/* A worker waits this long on one ticket at most (the drivers fail a job by 1 s). */
#define TICKET_CAP_NS (10000 * MS)
/* Requests the Edge TPU cancelled for a neighbour's reset are resubmitted this often. */
#define MAX_RESUBMITS 3
/* Connections served at once (one reader thread each). */
#define MAX_CONNS 64

struct opts {
    enum infer_device device;
    const char *socket, *stats, *vfio_user, *hw;
    unsigned workers, queue;
    uint64_t budget_ns, drain_ns, spin_ns, nap_ns;
    bool model, test_faults;
};

struct server;

struct conn {
    struct server *srv;
    int fd;
    pthread_mutex_t wlock;
    atomic_uint refs; /* the reader's, and one per request queued or running */
};

struct request {
    struct request *next;
    struct conn *conn;
    uint32_t tag, len;
    uint64_t accepted_ns;
    uint8_t *data;
};

struct worker {
    struct server *srv;
    unsigned id;
    pthread_t thread;
    bool started;
    struct npv_share_ticket ticket;
    /* Edge TPU: the worker's input and output in the chip's MMU */
    struct npv_dma *in, *out;
    uint64_t in_va, out_va;
    /* RKNPU: the worker's A and C, its task naming them, its job */
    struct npv_rknpu_mem *a, *c;
    uint64_t regcmd[NPV_RKNPU_MATMUL_MAX_WORDS];
    struct npv_rknpu_task task;
    struct npv_rknpu_job job;
    uint8_t out_buf[INFER_RK_OUTPUT > INFER_ETPU_OUTPUT ? INFER_RK_OUTPUT : INFER_ETPU_OUTPUT];
};

struct server {
    struct opts o;
    struct npv_ctx *ctx;
    struct npv_domain *dom;
    struct npv_dev *dev;
    struct npv_bar *test_port; /* the model's test port (--test-faults) */
    struct npv_edgetpu *tpu;
    struct npv_edgetpu_executable *exe;
    struct infer_etpu_params params;
    struct npv_rknpu *npu;
    struct npv_rknpu_mem *b;
    struct npv_share *share;
    struct npv_stats_server *stats;
    struct worker *workers;
    int listen_fd;
    int stop_pipe[2]; /* readable once shutdown began: wakes every reader's poll */
    int sig_pipe[2];  /* the signal handler's wake-up of the main thread */
    /* the queue */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct request *head, *tail;
    unsigned queued;
    bool draining; /* no new frames: workers empty the queue and leave */
    unsigned readers;
    pthread_cond_t readers_cond;
    /* what happened, for the exit line */
    atomic_ullong accepted, answered, ok, timed_out, failed, rejected, resubmits;
    unsigned long long in_flight_at_stop; /* accepted, not yet answered, when the signal came */
#ifdef NPV_EXAMPLE_WITH_MODEL
    const struct npv_device_entry *entry;
    struct npv_ctx *model_ctx;
    void *model;
    struct npv_vus *vus;
    pthread_t model_thread;
    bool model_running;
    char model_dir[64], model_path[128];
#endif
};

static volatile sig_atomic_t got_stop, got_fault;
static int signal_fd = -1; /* sig_pipe's write end, for the handler */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void on_signal(int sig)
{
    if (sig == SIGUSR1) {
        got_fault = 1;
    } else {
        got_stop = 1;
    }
    char c = 1;
    if (signal_fd >= 0)
        (void)!write(signal_fd, &c, 1);
}

/* ---- connections ---- */

static void conn_put(struct conn *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    close(c->fd);
    pthread_mutex_destroy(&c->wlock);
    free(c);
}

/* Write all of buf within REPLY_TIMEOUT_MS: 0 or a negative errno. */
static int write_all(int fd, const uint8_t *buf, size_t len)
{
    uint64_t deadline = now_ns() + REPLY_TIMEOUT_MS * MS;
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        uint64_t t = now_ns();
        if (t >= deadline)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        (void)poll(&p, 1, (int)((deadline - t) / MS) + 1);
    }
    return 0;
}

/* One reply; a connection that cannot take it is shut down (its reader then ends it). */
static void reply(struct conn *c, uint32_t tag, int status, const void *out, uint32_t len)
{
    uint8_t hdr[INFER_REP_HDR_BYTES];
    if (status != 0)
        len = 0;
    infer_put_le32(hdr, (uint32_t)status);
    infer_put_le32(hdr + 4, tag);
    infer_put_le32(hdr + 8, len);
    pthread_mutex_lock(&c->wlock);
    int r = write_all(c->fd, hdr, sizeof(hdr));
    if (r == 0 && len > 0)
        r = write_all(c->fd, out, len);
    pthread_mutex_unlock(&c->wlock);
    if (r < 0)
        shutdown(c->fd, SHUT_RDWR);
}

/*
 * Read exactly len bytes within FRAME_TIMEOUT_MS, also when shutdown begins
 * meanwhile (a frame begun is finished). 1 read, 0 the peer closed before
 * the first byte, negative errno otherwise (a truncated frame: -EPIPE).
 */
static int read_exact(int fd, uint8_t *buf, size_t len)
{
    uint64_t deadline = now_ns() + FRAME_TIMEOUT_MS * MS;
    size_t got = 0;
    while (got < len) {
        ssize_t n = recv(fd, buf + got, len - got, MSG_DONTWAIT);
        if (n > 0) {
            got += (size_t)n;
            continue;
        }
        if (n == 0)
            return got == 0 ? 0 : -EPIPE;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        uint64_t t = now_ns();
        if (t >= deadline)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        (void)poll(&p, 1, (int)((deadline - t) / MS) + 1);
    }
    return 1;
}

/* Wait until fd has a byte to read (1) or shutdown began (0); bounded looks. */
static int wait_frame(struct server *srv, int fd)
{
    for (;;) {
        struct pollfd p[2] = {{.fd = fd, .events = POLLIN},
                              {.fd = srv->stop_pipe[0], .events = POLLIN}};
        int n = poll(p, 2, 1000);
        if (n < 0 && errno != EINTR)
            return 0;
        if (p[1].revents != 0)
            return 0;
        if (p[0].revents != 0)
            return 1;
    }
}

static bool enqueue(struct server *srv, struct request *rq)
{
    pthread_mutex_lock(&srv->lock);
    bool ok = !srv->draining && srv->queued < srv->o.queue;
    if (ok) {
        rq->next = NULL;
        if (srv->tail != NULL)
            srv->tail->next = rq;
        else
            srv->head = rq;
        srv->tail = rq;
        srv->queued++;
        atomic_fetch_add(&srv->accepted, 1);
        pthread_cond_signal(&srv->cond);
    }
    pthread_mutex_unlock(&srv->lock);
    return ok;
}

/* One frame from c: 0 to go on, negative to close the connection. */
static int read_request(struct conn *c)
{
    struct server *srv = c->srv;
    uint8_t hdr[INFER_REQ_HDR_BYTES];
    int r = read_exact(c->fd, hdr, sizeof(hdr));
    if (r <= 0)
        return r == 0 ? -ECONNRESET : r;
    uint32_t len = infer_get_le32(hdr), tag = infer_get_le32(hdr + 4);
    if (len > INFER_MAX_INPUT) {
        /* Untrusted length: its body is never read, the stream cannot be resynchronised. */
        atomic_fetch_add(&srv->rejected, 1);
        reply(c, tag, -EMSGSIZE, NULL, 0);
        return -EMSGSIZE;
    }
    struct request *rq = calloc(1, sizeof(*rq));
    uint8_t *data = len > 0 ? malloc(len) : NULL;
    if (rq == NULL || (len > 0 && data == NULL)) {
        free(rq);
        free(data);
        return -ENOMEM;
    }
    if (len > 0 && (r = read_exact(c->fd, data, len)) != 1) {
        free(rq);
        free(data);
        return r == 0 ? -EPIPE : r;
    }
    if (len != infer_input_bytes(srv->o.device)) {
        atomic_fetch_add(&srv->rejected, 1);
        reply(c, tag, -EINVAL, NULL, 0);
        free(rq);
        free(data);
        return 0;
    }
    *rq =
        (struct request){.conn = c, .tag = tag, .len = len, .accepted_ns = now_ns(), .data = data};
    atomic_fetch_add(&c->refs, 1);
    if (!enqueue(srv, rq)) {
        atomic_fetch_add(&srv->rejected, 1);
        bool stopping = got_stop != 0;
        reply(c, tag, stopping ? -ESHUTDOWN : -EAGAIN, NULL, 0);
        conn_put(c);
        free(rq);
        free(data);
    }
    return 0;
}

static void *reader_main(void *arg)
{
    struct conn *c = arg;
    struct server *srv = c->srv;
    while (wait_frame(srv, c->fd) && read_request(c) == 0) {
    }
    shutdown(c->fd, SHUT_RD);
    conn_put(c);
    pthread_mutex_lock(&srv->lock);
    srv->readers--;
    pthread_cond_broadcast(&srv->readers_cond);
    pthread_mutex_unlock(&srv->lock);
    return NULL;
}

static void accept_one(struct server *srv)
{
    int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    pthread_mutex_lock(&srv->lock);
    bool room = srv->readers < MAX_CONNS;
    if (room)
        srv->readers++;
    pthread_mutex_unlock(&srv->lock);
    struct conn *c = room ? calloc(1, sizeof(*c)) : NULL;
    if (c == NULL) {
        close(fd);
        goto undo;
    }
    c->srv = srv;
    c->fd = fd;
    atomic_init(&c->refs, 1);
    pthread_mutex_init(&c->wlock, NULL);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int r = pthread_create(&t, &attr, reader_main, c);
    pthread_attr_destroy(&attr);
    if (r == 0)
        return;
    conn_put(c);
undo:
    if (!room)
        return;
    pthread_mutex_lock(&srv->lock);
    srv->readers--;
    pthread_mutex_unlock(&srv->lock);
}

/* ---- the device's work ---- */

/* What is left of rq's budget: 0 none was given (the driver's deadline), 1 it is spent. */
static uint64_t remaining_budget(const struct server *srv, const struct request *rq)
{
    if (srv->o.budget_ns == 0)
        return 0;
    uint64_t spent = now_ns() - rq->accepted_ns;
    return spent >= srv->o.budget_ns ? 1 : srv->o.budget_ns - spent;
}

static void stage_input(struct worker *w, const struct request *rq)
{
    if (w->srv->o.device == INFER_EDGETPU) {
        memcpy(npv_dma_vaddr(w->in), rq->data, INFER_ETPU_INPUT);
        npv_dma_sync_for_device(w->in, 0, INFER_ETPU_INPUT);
        return;
    }
    int8_t *a = npv_rknpu_mem_vaddr(w->a);
    for (uint32_t i = 0; i < INFER_RK_M; i++)
        for (uint32_t k = 0; k < INFER_RK_K; k++)
            a[npv_rknpu_matmul_a_index(NPV_RKNPU_INT8, INFER_RK_M, INFER_RK_K, i, k)] =
                (int8_t)rq->data[i * INFER_RK_K + k];
    /* The RK3588's NPU does not snoop the CPU's caches: clean A (a no-op where DMA is coherent). */
    npv_rknpu_mem_sync_for_device(w->a, 0, npv_rknpu_mem_size(w->a));
}

static void collect_output(struct worker *w)
{
    if (w->srv->o.device == INFER_EDGETPU) {
        npv_dma_sync_for_cpu(w->out, 0, INFER_ETPU_OUTPUT);
        memcpy(w->out_buf, npv_dma_vaddr(w->out), INFER_ETPU_OUTPUT);
        return;
    }
    /* The NPU's writes, not lines the CPU still caches. */
    npv_rknpu_mem_sync_for_cpu(w->c, 0, npv_rknpu_mem_size(w->c));
    const int32_t *c = npv_rknpu_mem_vaddr(w->c);
    for (uint32_t i = 0; i < INFER_RK_M; i++)
        for (uint32_t j = 0; j < INFER_RK_N; j++)
            infer_put_le32(w->out_buf + 4u * (i * INFER_RK_N + j),
                           (uint32_t)c[npv_rknpu_matmul_c_index(INFER_RK_M, INFER_RK_N, i, j)]);
}

/* Submit the worker's request with budget_ns left; the driver's -EAGAIN retried until then. */
static int submit(struct worker *w, uint64_t tag, uint64_t budget_ns)
{
    struct server *srv = w->srv;
    struct npv_edgetpu_request er = {
        .exe = srv->exe, .input_va = &w->in_va, .output_va = &w->out_va, .budget_ns = budget_ns};
    struct npv_rknpu_request rr = {.job = &w->job, .budget_ns = budget_ns};
    const void *req = srv->o.device == INFER_EDGETPU ? (const void *)&er : (const void *)&rr;
    uint64_t deadline = now_ns() + (budget_ns != 0 ? budget_ns : TICKET_CAP_NS);
    for (;;) {
        int r = npv_share_submit(srv->share, req, tag, &w->ticket);
        if (r != -EAGAIN)
            return r;
        if (now_ns() >= deadline)
            return -ETIMEDOUT;
        sched_yield(); /* the queue is full: other workers' waits reap it */
    }
}

/*
 * Wait for the worker's ticket: its status, or -ENOTRECOVERABLE past
 * TICKET_CAP_NS (the ticket stays the device's). Each look at the share
 * reaps for every worker; between looks a worker spins --spin-us, then naps
 * --nap-us, so that waiting workers leave CPU time to whatever else runs
 * (here the model's thread; on a host with cores to spare, --nap-us 0 spins).
 */
static int wait_ticket(struct worker *w)
{
    const struct opts *o = &w->srv->o;
    uint64_t deadline = now_ns() + TICKET_CAP_NS;
    for (;;) {
        int r = npv_share_wait(w->srv->share, &w->ticket, o->spin_ns);
        if (r == 1)
            return w->ticket.cpl.status;
        if (now_ns() >= deadline)
            return -ENOTRECOVERABLE;
        if (o->nap_ns > 0) {
            struct timespec nap = {.tv_nsec = (long)o->nap_ns};
            nanosleep(&nap, NULL);
        }
    }
}

/* Run one request: 0 with w->out_buf filled, or its failure. */
static int run_request(struct worker *w, const struct request *rq)
{
    struct server *srv = w->srv;
    stage_input(w, rq);
    for (unsigned attempt = 0;; attempt++) {
        uint64_t budget = remaining_budget(srv, rq);
        /*
         * Spent waiting in the queue: fail it here. On the Edge TPU a request
         * the chip has not finished by its budget costs a chip reset that
         * cancels its neighbours; never hand the device one already late.
         */
        if (budget == 1)
            return -ETIMEDOUT;
        int r = submit(w, rq->tag, budget);
        if (r == 0)
            r = wait_ticket(w);
        /*
         * The Edge TPU has one in-order queue: a neighbour past its budget
         * costs a chip reset that cancels this request (edgetpu.h). It did
         * nothing wrong: run it again while its own budget lasts.
         */
        if (r == -ECANCELED && srv->o.budget_ns != 0 && remaining_budget(srv, rq) == 1)
            return -ETIMEDOUT; /* its budget passed waiting behind the one that stalled */
        if (r == -ECANCELED && attempt < MAX_RESUBMITS) {
            atomic_fetch_add(&srv->resubmits, 1);
            continue;
        }
        if (r == 0)
            collect_output(w);
        return r;
    }
}

static struct request *dequeue(struct server *srv)
{
    pthread_mutex_lock(&srv->lock);
    while (srv->head == NULL && !srv->draining) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&srv->cond, &srv->lock, &ts);
    }
    struct request *rq = srv->head;
    if (rq != NULL) {
        srv->head = rq->next;
        if (srv->head == NULL)
            srv->tail = NULL;
        srv->queued--;
    }
    pthread_mutex_unlock(&srv->lock);
    return rq;
}

static void finish(struct server *srv, struct request *rq, int status, const void *out)
{
    reply(rq->conn, rq->tag, status, out, infer_output_bytes(srv->o.device));
    atomic_fetch_add(&srv->answered, 1);
    if (status == 0)
        atomic_fetch_add(&srv->ok, 1);
    else if (status == -ETIMEDOUT)
        atomic_fetch_add(&srv->timed_out, 1);
    else if (atomic_fetch_add(&srv->failed, 1) < 8)
        fprintf(stderr, "inference_server: request %u: %s\n", rq->tag, npv_strerror(status));
    conn_put(rq->conn);
    free(rq->data);
    free(rq);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct request *rq;
    while ((rq = dequeue(w->srv)) != NULL) {
        int r = run_request(w, rq);
        finish(w->srv, rq, r, w->out_buf);
        if (r == -ENOTRECOVERABLE) {
            /* The ticket never completed: its memory stays the device's; this worker stops. */
            fprintf(stderr, "inference_server: worker %u: a request never completed\n", w->id);
            break;
        }
    }
    return NULL;
}

/* ---- setting the device up ---- */

static int fail(const char *what, int err)
{
    fprintf(stderr, "inference_server: %s: %s\n", what, npv_strerror(err));
    return err;
}

/* The sample network: FC then "raise SC_HOST_0" (done), with its address fields. */
struct etpu_network {
    struct npv_edgetpu_insn insn[2];
    struct npv_edgetpu_field fields[8];
    struct npv_edgetpu_executable_desc desc;
};

static void patch_address(struct etpu_network *n, size_t field_off, uint8_t base, uint32_t offset)
{
    for (uint8_t half = NPV_EDGETPU_LOWER_32BIT; half <= NPV_EDGETPU_UPPER_32BIT; half++)
        n->fields[n->desc.nr_fields++] = (struct npv_edgetpu_field){
            .bit_offset = (uint32_t)(field_off + 4u * half) * 8u,
            .base = base,
            .half = half,
            .offset = offset,
        };
}

static int etpu_setup(struct server *srv)
{
    struct npv_edgetpu_config cfg = {.completion = NPV_EDGETPU_POLL};
    int r = npv_edgetpu_open(srv->dev, &cfg, &srv->tpu);
    if (r < 0)
        return fail("opening the Edge TPU", r);
    infer_etpu_params(&srv->params);
    struct etpu_network n;
    memset(&n, 0, sizeof(n));
    n.insn[0] = (struct npv_edgetpu_insn){.opcode = NPV_EDGETPU_OP_FC,
                                          .flags = NPV_EDGETPU_FC_RELU,
                                          .rows = INFER_ETPU_ROWS,
                                          .in_features = INFER_ETPU_IN,
                                          .out_features = INFER_ETPU_OUT,
                                          .multiplier = INFER_ETPU_MULTIPLIER,
                                          .shift = INFER_ETPU_SHIFT};
    n.insn[1] = (struct npv_edgetpu_insn){.opcode = NPV_EDGETPU_OP_SC_HOST_INT};
    patch_address(&n, offsetof(struct npv_edgetpu_insn, input_lo), NPV_EDGETPU_BASE_INPUT, 0);
    patch_address(&n, offsetof(struct npv_edgetpu_insn, weights_lo), NPV_EDGETPU_BASE_PARAMETER,
                  offsetof(struct infer_etpu_params, weights));
    patch_address(&n, offsetof(struct npv_edgetpu_insn, bias_lo), NPV_EDGETPU_BASE_PARAMETER,
                  offsetof(struct infer_etpu_params, bias));
    patch_address(&n, offsetof(struct npv_edgetpu_insn, output_lo), NPV_EDGETPU_BASE_OUTPUT, 0);
    n.desc.instructions = n.insn;
    n.desc.instructions_size = sizeof(n.insn);
    n.desc.fields = n.fields;
    n.desc.parameters = &srv->params;
    n.desc.parameters_size = sizeof(srv->params);
    n.desc.nr_inputs = 1;
    n.desc.nr_outputs = 1;
    r = npv_edgetpu_load(srv->tpu, &n.desc, &srv->exe);
    if (r < 0)
        return fail("loading the network", r);
    r = npv_share_new(npv_edgetpu_share_ops(), srv->tpu, &srv->share);
    return r < 0 ? fail("the share", r) : 0;
}

/* Each worker's input (read-only to the chip) and output (write-only) in both MMUs. */
static int etpu_worker_setup(struct server *srv, struct worker *w)
{
    int r = npv_dma_alloc(srv->ctx, 4096, NULL, &w->in);
    if (r == 0)
        r = npv_dma_alloc(srv->ctx, 4096, NULL, &w->out);
    if (r == 0)
        r = npv_dma_map(w->in, srv->dom, NPV_DMA_READ, NULL);
    if (r == 0)
        r = npv_dma_map(w->out, srv->dom, NPV_DMA_WRITE, NULL);
    if (r == 0)
        r = npv_edgetpu_map(srv->tpu, w->in, 0, INFER_ETPU_INPUT, &w->in_va);
    if (r == 0)
        r = npv_edgetpu_map(srv->tpu, w->out, 0, INFER_ETPU_OUTPUT, &w->out_va);
    return r;
}

static int rk_setup(struct server *srv)
{
    int r = npv_rknpu_open(srv->dev, NULL, &srv->npu);
    if (r < 0)
        return fail("opening the RKNPU", r);
    struct npv_rknpu_matmul mm = {
        .dtype = NPV_RKNPU_INT8, .m = INFER_RK_M, .k = INFER_RK_K, .n = INFER_RK_N};
    struct npv_rknpu_matmul_sizes sz;
    r = npv_rknpu_matmul_sizes(&mm, &sz);
    if (r == 0)
        r = npv_rknpu_mem_create(srv->npu, sz.b, 0, 0, &srv->b);
    if (r < 0)
        return fail("the weights", r);
    int8_t *b = npv_rknpu_mem_vaddr(srv->b);
    for (uint32_t k = 0; k < INFER_RK_K; k++)
        for (uint32_t j = 0; j < INFER_RK_N; j++)
            b[npv_rknpu_matmul_b_index(NPV_RKNPU_INT8, INFER_RK_K, INFER_RK_N, k, j)] =
                infer_rk_b(k, j);
    npv_rknpu_mem_sync_for_device(srv->b, 0, npv_rknpu_mem_size(srv->b));
    r = npv_share_new(npv_rknpu_share_ops(), srv->npu, &srv->share);
    return r < 0 ? fail("the share", r) : 0;
}

/* Each worker's A and C, and its job (the addresses never change: built once). */
static int rk_worker_setup(struct server *srv, struct worker *w)
{
    struct npv_rknpu_matmul mm = {
        .dtype = NPV_RKNPU_INT8, .m = INFER_RK_M, .k = INFER_RK_K, .n = INFER_RK_N};
    struct npv_rknpu_matmul_sizes sz;
    int r = npv_rknpu_matmul_sizes(&mm, &sz);
    if (r == 0)
        r = npv_rknpu_mem_create(srv->npu, sz.a, 0, 0, &w->a);
    if (r == 0)
        r = npv_rknpu_mem_create(srv->npu, sz.c, 0, 0, &w->c);
    if (r < 0)
        return r;
    mm.a = npv_rknpu_mem_iova(w->a);
    mm.b = npv_rknpu_mem_iova(srv->b);
    mm.c = npv_rknpu_mem_iova(w->c);
    r = npv_rknpu_matmul_task(&mm, w->regcmd, NPV_RKNPU_MATMUL_MAX_WORDS, &w->task);
    if (r < 0)
        return r;
    /* core_mask 0: the driver picks the core with the least queued work. */
    w->job = (struct npv_rknpu_job){.tasks = &w->task, .nr_tasks = 1, .domain_id = 0};
    return 0;
}

static void worker_teardown(struct server *srv, struct worker *w)
{
    if (srv->tpu != NULL) {
        if (w->in_va != 0)
            (void)npv_edgetpu_unmap(srv->tpu, w->in_va, INFER_ETPU_INPUT);
        if (w->out_va != 0)
            (void)npv_edgetpu_unmap(srv->tpu, w->out_va, INFER_ETPU_OUTPUT);
    }
    npv_dma_free(w->in);
    npv_dma_free(w->out);
    npv_rknpu_mem_destroy(w->a);
    npv_rknpu_mem_destroy(w->c);
}

#ifdef NPV_EXAMPLE_WITH_MODEL
static void *model_main(void *arg)
{
    struct server *srv = arg;
    int r = npv_vus_run(srv->vus, true);
    if (r < 0)
        fprintf(stderr, "inference_server: the model: %s\n", npv_strerror(r));
    return NULL;
}

/* The device's model on a private socket, served by a thread of this process. */
static int model_start(struct server *srv)
{
    srv->entry = npv_device_find(srv->o.device == INFER_EDGETPU ? "edgetpu" : "rknpu");
    if (srv->entry == NULL || srv->entry->model_create == NULL)
        return fail("the device's model", -ENOTSUP);
    snprintf(srv->model_dir, sizeof(srv->model_dir), "/tmp/npuvfio-serve-XXXXXX");
    if (mkdtemp(srv->model_dir) == NULL) {
        srv->model_dir[0] = '\0';
        return fail("a private directory in /tmp", -errno);
    }
    snprintf(srv->model_path, sizeof(srv->model_path), "%s/model.sock", srv->model_dir);
    int r = npv_ctx_new(&srv->model_ctx);
    if (r == 0)
        r = srv->entry->model_create(srv->model_ctx, &srv->model, &srv->vus);
    if (r == 0)
        r = npv_vus_listen(srv->vus, srv->model_path);
    if (r == 0)
        r = -pthread_create(&srv->model_thread, NULL, model_main, srv);
    if (r < 0)
        return fail("starting the model", r);
    srv->model_running = true;
    srv->o.vfio_user = srv->model_path;
    return 0;
}

static void model_stop(struct server *srv)
{
    if (srv->model_running) {
        npv_vus_stop(srv->vus);
        pthread_join(srv->model_thread, NULL);
    }
    if (srv->model != NULL)
        srv->entry->model_destroy(srv->model);
    npv_ctx_free(srv->model_ctx);
    if (srv->model_path[0] != '\0')
        unlink(srv->model_path);
    if (srv->model_dir[0] != '\0')
        rmdir(srv->model_dir);
}

/* SIGUSR1 with --test-faults: the next request the device takes stalls (the model's fault). */
static void arm_stall(struct server *srv)
{
    int r;
    if (srv->o.device == INFER_EDGETPU)
        r = npv_bar_write(srv->test_port, EDGETPU_MODEL_FAULT, 8, EDGETPU_FAULT_HANG);
    else
        r = npv_bar_write(srv->test_port, RKNPU_TP_CORE(0) + RKNPU_TP_FAULT, 4, RKNPU_FAULT_STALL);
    fprintf(stderr, "inference_server: stall armed: %s\n", r < 0 ? npv_strerror(r) : "ok");
}

static int map_test_port(struct server *srv)
{
    uint32_t bar = srv->o.device == INFER_EDGETPU ? 0u : RKNPU_TP_BAR_INDEX;
    int r = npv_bar_map(srv->dev, bar, &srv->test_port);
    return r < 0 ? fail("the model's test port", r) : 0;
}
#else
static int model_start(struct server *srv)
{
    (void)srv;
    fprintf(stderr, "inference_server: --model needs the in-tree build (the models are not "
                    "installed): start one with `npuvfio sim` and pass --vfio-user SOCK\n");
    return -ENOTSUP;
}
static void model_stop(struct server *srv)
{
    (void)srv;
}
static void arm_stall(struct server *srv)
{
    (void)srv;
}
static int map_test_port(struct server *srv)
{
    (void)srv;
    return -ENOTSUP;
}
#endif

static int open_device(struct server *srv)
{
    /* The Edge TPU keeps its queue and page tables below 4 GiB; the RKNPU's IOVAs are 32-bit. */
    struct npv_domain_opts below_4g = {.aperture_last = 0xffffffffull};
    int r = npv_domain_new(srv->ctx, &below_4g, &srv->dom);
    if (r < 0)
        return fail("domain", r);
    const char *where = srv->o.vfio_user != NULL ? srv->o.vfio_user : srv->o.hw;
    if (srv->o.vfio_user != NULL)
        r = npv_dev_open_vfio_user(srv->ctx, where, srv->dom, NULL, &srv->dev);
    else if (strchr(where, ':') != NULL)
        r = npv_dev_open_pci(srv->ctx, where, srv->dom, NULL, &srv->dev);
    else
        r = npv_dev_open_platform(srv->ctx, where, srv->dom, NULL, &srv->dev);
    if (r < 0)
        return fail(where, r);
    if (srv->o.test_faults && (r = map_test_port(srv)) < 0)
        return r;
    r = srv->o.device == INFER_EDGETPU ? etpu_setup(srv) : rk_setup(srv);
    if (r < 0)
        return r;
    srv->workers = calloc(srv->o.workers, sizeof(*srv->workers));
    if (srv->workers == NULL)
        return fail("workers", -ENOMEM);
    for (unsigned i = 0; i < srv->o.workers; i++) {
        struct worker *w = &srv->workers[i];
        *w = (struct worker){.srv = srv, .id = i};
        r = srv->o.device == INFER_EDGETPU ? etpu_worker_setup(srv, w) : rk_worker_setup(srv, w);
        if (r < 0)
            return fail("a worker's buffers", r);
    }
    return 0;
}

static void close_device(struct server *srv)
{
    for (unsigned i = 0; srv->workers != NULL && i < srv->o.workers; i++)
        worker_teardown(srv, &srv->workers[i]);
    free(srv->workers);
    npv_share_free(srv->share);
    npv_edgetpu_unload(srv->exe);
    npv_edgetpu_close(srv->tpu);
    npv_rknpu_mem_destroy(srv->b);
    npv_rknpu_close(srv->npu);
    npv_bar_unmap(srv->test_port);
    npv_dev_close(srv->dev);
    npv_domain_put(srv->dom);
}

/* ---- the listening socket and the shutdown ---- */

static int listen_on(struct server *srv)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(srv->o.socket) >= sizeof(sa.sun_path))
        return fail(srv->o.socket, -ENAMETOOLONG);
    strcpy(sa.sun_path, srv->o.socket);
    srv->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (srv->listen_fd < 0)
        return fail("socket", -errno);
    struct stat st;
    if (lstat(sa.sun_path, &st) == 0 && S_ISSOCK(st.st_mode))
        unlink(sa.sun_path); /* a stale socket of an earlier run */
    if (bind(srv->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        listen(srv->listen_fd, 64) < 0)
        return fail(srv->o.socket, -errno);
    return 0;
}

static void serve(struct server *srv)
{
    while (!got_stop) {
        struct pollfd p[2] = {{.fd = srv->listen_fd, .events = POLLIN},
                              {.fd = srv->sig_pipe[0], .events = POLLIN}};
        int n = poll(p, 2, 1000);
        if (n < 0 && errno != EINTR)
            break;
        char c[16];
        while (read(srv->sig_pipe[0], c, sizeof(c)) > 0) {
        }
        if (got_fault) {
            got_fault = 0;
            if (srv->test_port != NULL)
                arm_stall(srv);
        }
        if (n > 0 && (p[0].revents & POLLIN))
            accept_one(srv);
    }
}

/*
 * Stop accepting, let the readers finish the frame each is in, answer every
 * request accepted (run within the drain deadline, else -ESHUTDOWN), then
 * the workers leave.
 */
static void drain(struct server *srv)
{
    srv->in_flight_at_stop = atomic_load(&srv->accepted) - atomic_load(&srv->answered);
    close(srv->listen_fd);
    srv->listen_fd = -1;
    unlink(srv->o.socket);
    char c = 1;
    (void)!write(srv->stop_pipe[1], &c, 1); /* wakes every reader for good */
    uint64_t deadline = now_ns() + srv->o.drain_ns;
    pthread_mutex_lock(&srv->lock);
    while (srv->readers > 0 && now_ns() < deadline) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 10 * (long)MS;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&srv->readers_cond, &srv->lock, &ts);
    }
    pthread_mutex_unlock(&srv->lock);
    while (now_ns() < deadline) {
        pthread_mutex_lock(&srv->lock);
        bool empty = srv->head == NULL;
        pthread_mutex_unlock(&srv->lock);
        if (empty)
            break;
        struct timespec nap = {.tv_nsec = 1000000};
        nanosleep(&nap, NULL);
    }
    pthread_mutex_lock(&srv->lock);
    srv->draining = true;
    struct request *left = srv->head;
    srv->head = srv->tail = NULL;
    srv->queued = 0;
    pthread_cond_broadcast(&srv->cond);
    pthread_mutex_unlock(&srv->lock);
    while (left != NULL) {
        struct request *next = left->next;
        finish(srv, left, -ESHUTDOWN, NULL);
        left = next;
    }
    for (unsigned i = 0; i < srv->o.workers; i++)
        if (srv->workers[i].started)
            pthread_join(srv->workers[i].thread, NULL);
}

static void usage(FILE *f)
{
    fprintf(f, "Usage: inference_server --device edgetpu|rknpu --socket PATH\n"
               "                        (--model | --vfio-user SOCK | DEVICE) [options]\n"
               "\n"
               "Serve inference requests (examples/inference_proto.h) from N worker threads\n"
               "sharing one device through an npv_share.\n"
               "\n"
               "  --device NAME      edgetpu (the sample network) or rknpu (an int8 matmul)\n"
               "  --socket PATH      the Unix socket requests arrive on\n"
               "  --stats PATH       serve live counters there (npuvfio stats PATH)\n"
               "  --workers N        worker threads (default 4)\n"
               "  --budget-us N      each request's budget from its arrival (default: none\n"
               "                     beyond the driver's 1 s deadline); past it: -ETIMEDOUT\n"
               "  --queue N          requests waiting at most (default 256); more: -EAGAIN\n"
               "  --drain-ms N       on SIGTERM/SIGINT, run what was accepted for at most\n"
               "                     this long (default 5000), then answer -ESHUTDOWN\n"
               "  --spin-us N        a worker looks at the device this long for its\n"
               "                     request (default 20) before it naps\n"
               "  --nap-us N         ... this long (default 50; 0: spin, for hosts with a\n"
               "                     core per worker)\n"
               "  --model            run the device's model in this process (in-tree builds)\n"
               "  --vfio-user SOCK   a model served elsewhere (npuvfio sim --device NAME)\n"
               "  DEVICE             a PCI address or platform device bound to vfio\n"
               "  --test-faults      with --model: SIGUSR1 stalls the device's next request\n"
               "                     (the model's stall fault; for tests)\n"
               "\n"
               "Exit status: 0 after a clean shutdown, 1 when the device or socket failed,\n"
               "2 a usage error.\n");
}

static int parse(int argc, char **argv, struct opts *o)
{
    static const struct option longs[] = {
        {"device", required_argument, NULL, 'd'},
        {"socket", required_argument, NULL, 's'},
        {"stats", required_argument, NULL, 'S'},
        {"workers", required_argument, NULL, 'w'},
        {"budget-us", required_argument, NULL, 'b'},
        {"queue", required_argument, NULL, 'q'},
        {"drain-ms", required_argument, NULL, 'D'},
        {"model", no_argument, NULL, 'm'},
        {"vfio-user", required_argument, NULL, 'v'},
        {"test-faults", no_argument, NULL, 'T'},
        {"spin-us", required_argument, NULL, 'P'},
        {"nap-us", required_argument, NULL, 'N'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (struct opts){.workers = 4,
                       .queue = 256,
                       .drain_ns = 5000 * MS,
                       .spin_ns = 20000,
                       .nap_ns = 50000,
                       .device = INFER_RKNPU};
    bool have_device = false;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        char *end = NULL;
        unsigned long long v = 0;
        if (optarg != NULL && strchr("wbqDPN", ch) != NULL) {
            v = strtoull(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0') {
                fprintf(stderr, "inference_server: %s is not a number\n", optarg);
                return 2;
            }
        }
        switch (ch) {
        case 'd':
            if (infer_device_parse(optarg, &o->device) < 0) {
                fprintf(stderr, "inference_server: --device edgetpu or rknpu\n");
                return 2;
            }
            have_device = true;
            break;
        case 's':
            o->socket = optarg;
            break;
        case 'S':
            o->stats = optarg;
            break;
        case 'w':
            o->workers = (unsigned)v;
            break;
        case 'b':
            o->budget_ns = v * 1000ull;
            break;
        case 'q':
            o->queue = (unsigned)v;
            break;
        case 'D':
            o->drain_ns = v * MS;
            break;
        case 'P':
            o->spin_ns = v * 1000ull;
            break;
        case 'N':
            if (v >= 1000000) {
                fprintf(stderr, "inference_server: --nap-us below 1000000\n");
                return 2;
            }
            o->nap_ns = v * 1000ull;
            break;
        case 'm':
            o->model = true;
            break;
        case 'v':
            o->vfio_user = optarg;
            break;
        case 'T':
            o->test_faults = true;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc)
        o->hw = argv[optind++];
    int where = (o->model ? 1 : 0) + (o->vfio_user != NULL ? 1 : 0) + (o->hw != NULL ? 1 : 0);
    if (!have_device || o->socket == NULL || where != 1 || optind != argc || o->workers == 0 ||
        o->workers > 256 || o->queue == 0 || (o->test_faults && !o->model)) {
        usage(stderr);
        return 2;
    }
    return 0;
}

static int setup_signals(struct server *srv)
{
    if (pipe2(srv->stop_pipe, O_CLOEXEC | O_NONBLOCK) < 0 ||
        pipe2(srv->sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
        return -errno;
    signal_fd = srv->sig_pipe[1];
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

int main(int argc, char **argv)
{
    static struct server srv;
    int r = parse(argc, argv, &srv.o);
    if (r != 0)
        return r;
    srv.listen_fd = -1;
    pthread_mutex_init(&srv.lock, NULL);
    pthread_cond_init(&srv.cond, NULL);
    pthread_cond_init(&srv.readers_cond, NULL);
    int status = 1;
    if (setup_signals(&srv) < 0 || npv_ctx_new(&srv.ctx) < 0)
        return 1;
    if (srv.o.model && model_start(&srv) < 0)
        goto out;
    /* Dashboards want the latency histogram: two vDSO clock reads per batch (stats.h). */
    if (srv.o.stats != NULL)
        npv_stats_set_latency(srv.ctx, 1);
    if (open_device(&srv) < 0)
        goto out_device;
    if (srv.o.stats != NULL && (r = npv_stats_serve(srv.ctx, srv.o.stats, &srv.stats)) < 0) {
        fail(srv.o.stats, r);
        goto out_device;
    }
    if (listen_on(&srv) < 0)
        goto out_stats;
    for (unsigned i = 0; i < srv.o.workers; i++) {
        r = pthread_create(&srv.workers[i].thread, NULL, worker_main, &srv.workers[i]);
        if (r != 0) {
            fail("a worker thread", -r);
            got_stop = 1;
            break;
        }
        srv.workers[i].started = true;
    }
    printf("inference_server: %s, %u workers, serving on %s\n",
           srv.o.device == INFER_EDGETPU ? "edgetpu" : "rknpu", srv.o.workers, srv.o.socket);
    fflush(stdout);
    serve(&srv);
    drain(&srv);
    struct npv_share_counters sc;
    npv_share_counters(srv.share, &sc);
    printf("inference_server: %llu requests in flight at the signal\n", srv.in_flight_at_stop);
    printf("inference_server: accepted %llu, answered %llu (ok %llu, timeout %llu, other %llu), "
           "rejected %llu, resubmitted %llu; device submits %llu, completions %llu\n",
           (unsigned long long)srv.accepted, (unsigned long long)srv.answered,
           (unsigned long long)srv.ok, (unsigned long long)srv.timed_out,
           (unsigned long long)srv.failed, (unsigned long long)srv.rejected,
           (unsigned long long)srv.resubmits, (unsigned long long)sc.submitted,
           (unsigned long long)sc.completed);
    status = srv.accepted == srv.answered ? 0 : 1;
out_stats:
    npv_stats_server_stop(srv.stats);
out_device:
    close_device(&srv);
out:
    model_stop(&srv);
    if (srv.listen_fd >= 0) {
        close(srv.listen_fd);
        unlink(srv.o.socket);
    }
    npv_ctx_free(srv.ctx);
    printf("inference_server: stopped%s\n", status == 0 ? " cleanly" : "");
    return status;
}

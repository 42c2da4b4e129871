/* SPDX-License-Identifier: MIT */
/*
 * The vfio-user client transport: connect, negotiate, the receive thread
 * that matches replies to requests, and the npv_dev_ops of a vfio-user
 * device. DMA mapping lives in vfio_user_client_dma.c, the reply parsers in
 * vfio_user_client_parse.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <npuvfio/common.h>

#include "ctx_internal.h"
#include "deadline.h"
#include "failpoint_internal.h"
#include "vfio_user_client.h"

/* Requests in flight at once; beyond, a caller gets -EBUSY. */
#define MAX_PENDING 1024u

struct vu_request {
    struct vu_request *next;
    uint16_t id;
    uint16_t cmd;
    bool done;
    bool fence; /* a REGION_WRITE_MULTI nobody waits for: deliver_reply consumes it */
    struct npv_vu_msg reply;
};

/* A server command queued for the DMA thread (one-socket mode). */
struct vu_dma_cmd {
    struct vu_dma_cmd *next;
    struct npv_vu_msg msg;
};

static int64_t ns_to_i64(uint64_t ns)
{
    return ns > INT64_MAX ? INT64_MAX : (int64_t)ns;
}

/* Called with c->lock held. */
static void unlink_request(struct vu_client *c, struct vu_request *r)
{
    for (struct vu_request **pp = &c->pending; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == r) {
            *pp = r->next;
            return;
        }
    }
}

void npv_vu_client_kill(struct vu_client *c, int err)
{
    pthread_mutex_lock(&c->lock);
    if (c->dead == 0) {
        c->dead = err;
        /* Wakes the receive and DMA threads out of their reads; later sends fail with EPIPE. */
        shutdown(c->sock, SHUT_RDWR);
        if (c->twin_sock >= 0)
            shutdown(c->twin_sock, SHUT_RDWR);
        pthread_cond_broadcast(&c->cond);
        pthread_cond_broadcast(&c->dma_cond);
    }
    pthread_mutex_unlock(&c->lock);
}

/* Called with c->lock held. A free id that no pending request holds. */
static int alloc_id(struct vu_client *c, uint16_t *id)
{
    unsigned n = 0;
    for (struct vu_request *r = c->pending; r != NULL; r = r->next)
        n++;
    if (n >= MAX_PENDING)
        return -EBUSY;
    for (;;) {
        uint16_t cand = c->next_id++;
        bool used = false;
        for (struct vu_request *r = c->pending; r != NULL && !used; r = r->next)
            used = r->id == cand;
        if (!used) {
            *id = cand;
            return 0;
        }
    }
}

static int reply_errno(const struct npv_vu_hdr *h)
{
    /* The error word is the server's; only a plausible errno is passed on. */
    if (h->error == 0 || h->error > 4095)
        return -EIO;
    return -(int)h->error;
}

static int wait_reply(struct vu_client *c, struct vu_request *r, uint64_t deadline)
{
    struct timespec abs;
    npv_deadline_to_abs_timespec(deadline, &abs);
    int ret = 0;
    pthread_mutex_lock(&c->lock);
    while (!r->done && c->dead == 0) {
        if (pthread_cond_timedwait(&c->cond, &c->lock, &abs) == ETIMEDOUT &&
            npv_deadline_left(deadline) == 0)
            break;
    }
    unlink_request(c, r);
    if (!r->done)
        ret = c->dead != 0 ? c->dead : -ETIMEDOUT;
    pthread_mutex_unlock(&c->lock);
    return ret;
}

/* Allocate a request for cmd and put it on the pending list. */
static int register_request(struct vu_client *c, uint16_t cmd, bool fence, struct vu_request **out)
{
    struct vu_request *r = npv_fp_calloc(c->dev->ctx, 1, sizeof(*r));
    if (r == NULL)
        return -ENOMEM;
    npv_vu_msg_init(&r->reply);
    r->cmd = cmd;
    r->fence = fence;
    pthread_mutex_lock(&c->lock);
    int ret = c->dead;
    if (ret == 0)
        ret = alloc_id(c, &r->id);
    if (ret < 0) {
        pthread_mutex_unlock(&c->lock);
        free(r);
        return ret;
    }
    r->next = c->pending;
    c->pending = r;
    pthread_mutex_unlock(&c->lock);
    *out = r;
    return 0;
}

static void drop_request(struct vu_client *c, struct vu_request *r)
{
    pthread_mutex_lock(&c->lock);
    unlink_request(c, r);
    pthread_mutex_unlock(&c->lock);
    npv_vu_msg_release(&r->reply);
    free(r);
}

/*
 * Called with send_lock held: the batch of posted writes held back, as the
 * body of a REGION_WRITE_MULTI (vfio-user spec, "VFIO_USER_REGION_WRITE_MULTI":
 * wr_cnt, then wr_cnt 24-byte writes of at most 8 bytes each). *wm must
 * outlive the send. Returns the number of iovecs used (1 or 2).
 */
static unsigned batch_body(struct vu_client *c, struct npv_vu_write_multi *wm, struct iovec iov[2])
{
    wm->wr_cnt = c->batch_n;
    iov[0] = (struct iovec){.iov_base = wm, .iov_len = sizeof(*wm)};
    iov[1] = (struct iovec){.iov_base = c->batch, .iov_len = c->batch_n * sizeof(c->batch[0])};
    return c->batch_n > 0 ? 2 : 1;
}

/* Called with send_lock held, once the batch is on the wire. */
static void batch_sent(struct vu_client *c)
{
    c->batch_n = 0;
    c->batch_gen++;
    __atomic_store_n(&c->dev->batch_pending, 0, __ATOMIC_RELEASE);
}

/*
 * Called with send_lock held: the batch leaves without a reply (it is full,
 * or the caller is about to wait for the device). A refused write in it is
 * kept by the server for the next fence's reply (npv_vus_note_posted_error).
 */
static int send_batch_locked(struct vu_client *c)
{
    if (c->batch_n == 0)
        return 0;
    struct npv_vu_write_multi wm;
    struct iovec iov[2];
    unsigned n = batch_body(c, &wm, iov);
    /* No reply comes back: the id matches nothing, so it need not be unique among requests. */
    struct npv_vu_hdr h = {.msg_id = c->noreply_id++,
                           .cmd = NPV_VU_CMD_REGION_WRITE_MULTI,
                           .flags = NPV_VU_F_TYPE_COMMAND | NPV_VU_F_NO_REPLY};
    int ret = npv_fp_send_result(c->dev->ctx);
    if (ret == 0)
        ret = npv_vu_sendv(c->sock, &h, iov, n, NULL, 0, ns_to_i64(c->dev->request_timeout_ns));
    if (ret == 0) {
        batch_sent(c);
        __atomic_fetch_add(&c->dev->reg_count[6], 1, __ATOMIC_RELAXED);
    }
    return ret;
}

/*
 * Called with send_lock held, before a command that orders the posted
 * writes: a REGION_WRITE_MULTI carrying the batch held back (often none)
 * whose reply carries the first failure of a posted write
 * (vfio_user_server.c, npv_vus_note_posted_error). Nobody waits for it: the
 * server answers in order, so its reply is in before the command's, and
 * deliver_reply keeps its error in posted_err.
 */
static int send_fence(struct vu_client *c, struct vu_request *f, uint64_t deadline)
{
    struct npv_vu_write_multi wm;
    struct iovec iov[2];
    unsigned n = batch_body(c, &wm, iov);
    struct npv_vu_hdr h = {
        .msg_id = f->id, .cmd = NPV_VU_CMD_REGION_WRITE_MULTI, .flags = NPV_VU_F_TYPE_COMMAND};
    int ret = npv_fp_send_result(c->dev->ctx);
    if (ret == 0)
        ret = npv_vu_sendv(c->sock, &h, iov, n, NULL, 0, ns_to_i64(npv_deadline_left(deadline)));
    if (ret == 0) {
        batch_sent(c);
        __atomic_fetch_add(&c->dev->reg_count[5], 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&c->dev->reg_count[6], 1, __ATOMIC_RELAXED);
    }
    return ret;
}

/* A command that orders the posted writes got its reply: every write sent before it is done. */
static void posted_done_upto(struct vu_client *c, uint64_t seq)
{
    pthread_mutex_lock(&c->send_lock);
    if (seq > c->posted_done)
        c->posted_done = seq;
    if (c->posted_done == c->posted_sent)
        __atomic_store_n(&c->dev->posted_pending, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&c->send_lock);
}

/* The failure a fence reported, taken: the next synchronous call returns it. */
static int take_posted_err(struct vu_client *c)
{
    pthread_mutex_lock(&c->lock);
    int err = c->posted_err;
    c->posted_err = 0;
    pthread_mutex_unlock(&c->lock);
    return err;
}

/*
 * carried: NULL for a command; else the call is the fence itself (a
 * REGION_WRITE_MULTI, iov unused) carrying the batch held back, and
 * *carried gets the number of writes it carried.
 */
static int client_callv(struct vu_client *c, uint16_t cmd, const struct iovec *iov, unsigned iovcnt,
                        const int *fds, unsigned nr_fds, struct npv_vu_msg *reply,
                        unsigned *carried)
{
    if (nr_fds > c->server_caps.max_msg_fds)
        return -EINVAL;
    uint64_t deadline = npv_deadline_after(c->dev->request_timeout_ns);
    struct vu_request *r = NULL, *fence = NULL;
    int ret = register_request(c, cmd, false, &r);
    if (ret < 0)
        return ret;
    /* A fence is asked for ahead, outside send_lock; returned unused when nothing is posted. */
    bool want_fence = false;
    if (c->posted && cmd != NPV_VU_CMD_REGION_WRITE_MULTI) {
        pthread_mutex_lock(&c->send_lock);
        want_fence = c->posted_sent != c->posted_fenced;
        pthread_mutex_unlock(&c->send_lock);
    }
    if (want_fence &&
        (ret = register_request(c, NPV_VU_CMD_REGION_WRITE_MULTI, true, &fence)) < 0) {
        drop_request(c, r);
        return ret;
    }

    struct npv_vu_hdr h = {.msg_id = r->id, .cmd = cmd, .flags = NPV_VU_F_TYPE_COMMAND};
    pthread_mutex_lock(&c->send_lock);
    uint64_t seq = c->posted_sent;
    ret = 0;
    if (fence != NULL && c->posted_sent != c->posted_fenced) {
        ret = send_fence(c, fence, deadline);
        fence = NULL; /* on the wire: deliver_reply or client_free frees it */
    }
    /*
     * Writes another thread batched after this call looked (want_fence
     * false) are counted in seq, which the command marks fenced below: they
     * must be on the wire before it, or a read overtakes them (a register
     * read of a status the thread's own posted clear had not reached yet).
     */
    if (ret == 0 && carried == NULL && c->batch_n > 0)
        ret = send_batch_locked(c);
    struct npv_vu_write_multi wm;
    struct iovec biov[2];
    if (carried != NULL) {
        iovcnt = batch_body(c, &wm, biov);
        iov = biov;
        *carried = c->batch_n;
    }
    if (ret == 0)
        ret = npv_fp_send_result(c->dev->ctx);
    if (ret == 0)
        ret = npv_vu_sendv(c->sock, &h, iov, iovcnt, fds, nr_fds,
                           ns_to_i64(npv_deadline_left(deadline)));
    if (ret == 0) {
        c->posted_fenced = seq;
        __atomic_fetch_add(&c->dev->reg_count[6], 1, __ATOMIC_RELAXED);
        if (carried != NULL)
            batch_sent(c);
    }
    pthread_mutex_unlock(&c->send_lock);
    if (fence != NULL)
        drop_request(c, fence);
    if (ret < 0) {
        /* Part of a message may be on the wire: the stream cannot be trusted any more. */
        npv_debug(c->dev->ctx, "%s: send command %u: %s", c->dev->name, cmd, npv_strerror(ret));
        npv_vu_client_kill(c, ret == -ETIMEDOUT ? -EIO : -ENOTCONN);
        drop_request(c, r);
        return ret == -ETIMEDOUT ? ret : -ENOTCONN;
    }

    ret = wait_reply(c, r, deadline);
    if (ret == -ETIMEDOUT) {
        /*
         * The server may still carry the command out (a DMA_MAP, an unmap, a
         * reset): from here its state and ours can disagree, so the
         * connection ends and every later call fails with -ENOTCONN.
         */
        npv_err(c->dev->ctx,
                "%s: command %u got no reply within the deadline; closing the connection",
                c->dev->name, cmd);
        npv_vu_client_kill(c, -ENOTCONN);
    }
    if (ret < 0) {
        npv_vu_msg_release(&r->reply);
        free(r);
        return ret;
    }
    struct npv_vu_msg m = r->reply;
    free(r);
    if (c->posted) {
        posted_done_upto(c, seq);
        /* A posted write failed: this, the next synchronous call, reports it. */
        int perr = cmd != NPV_VU_CMD_REGION_WRITE_MULTI ? take_posted_err(c) : 0;
        if (perr != 0) {
            npv_vu_msg_release(&m);
            return perr;
        }
    }
    if (m.hdr.flags & NPV_VU_F_ERROR) {
        ret = reply_errno(&m.hdr);
        npv_vu_msg_release(&m);
        return ret;
    }
    if (reply != NULL) {
        *reply = m;
        return 0;
    }
    ret = m.body_len == 0 && m.nr_fds == 0 ? 0 : -NPV_EPEERPROTO;
    npv_vu_msg_release(&m);
    return ret;
}

int npv_vu_client_callv(struct vu_client *c, uint16_t cmd, const struct iovec *iov, unsigned iovcnt,
                        const int *fds, unsigned nr_fds, struct npv_vu_msg *reply)
{
    return client_callv(c, cmd, iov, iovcnt, fds, nr_fds, reply, NULL);
}

int npv_vu_client_call(struct vu_client *c, uint16_t cmd, const void *req, size_t req_len,
                       const int *fds, unsigned nr_fds, struct npv_vu_msg *reply)
{
    struct iovec iov = {.iov_base = (void *)req, .iov_len = req_len};
    return npv_vu_client_callv(c, cmd, &iov, req_len > 0 ? 1 : 0, fds, nr_fds, reply);
}

/* Hand a reply to its request. A reply nobody asked for is a protocol violation. */
static int deliver_reply(struct vu_client *c, struct npv_vu_msg *m)
{
    pthread_mutex_lock(&c->lock);
    struct vu_request *r = c->pending;
    while (r != NULL && (r->done || r->id != m->hdr.msg_id))
        r = r->next;
    if (r == NULL || r->cmd != m->hdr.cmd) {
        pthread_mutex_unlock(&c->lock);
        npv_warn(c->dev->ctx, "%s: reply id %u command %u matches no request", c->dev->name,
                 m->hdr.msg_id, m->hdr.cmd);
        return -NPV_EPEERPROTO;
    }
    if (r->fence) {
        /* Nobody waits for a fence: its error is kept for the next synchronous call. */
        int ret = 0;
        if (m->hdr.flags & NPV_VU_F_ERROR) {
            if (c->posted_err == 0)
                c->posted_err = reply_errno(&m->hdr);
        } else if (m->body_len != sizeof(struct npv_vu_write_multi) || m->nr_fds != 0) {
            ret = -NPV_EPEERPROTO;
        }
        unlink_request(c, r);
        pthread_mutex_unlock(&c->lock);
        free(r);
        return ret;
    }
    r->reply = *m;
    npv_vu_msg_init(m);
    r->done = true;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    return 0;
}

/* Answer a server command we do not serve; on the DMA thread, where replies are written. */
static void refuse_command(struct vu_client *c, const struct npv_vu_msg *m)
{
    if (m->hdr.flags & NPV_VU_F_NO_REPLY)
        return;
    pthread_mutex_lock(c->dma_send_lock);
    int ret = npv_fp_send_result(c->dev->ctx);
    if (ret == 0)
        ret = npv_vu_send_error(c->dma_sock, m->hdr.msg_id, m->hdr.cmd, ENOSYS,
                                ns_to_i64(c->dev->request_timeout_ns));
    pthread_mutex_unlock(c->dma_send_lock);
    if (ret < 0)
        npv_vu_client_kill(c, -ENOTCONN);
}

static void serve_command(struct vu_client *c, const struct npv_vu_msg *m)
{
    if (m->hdr.cmd == NPV_VU_CMD_DMA_READ || m->hdr.cmd == NPV_VU_CMD_DMA_WRITE)
        npv_vu_client_serve_dma(c, m);
    else
        refuse_command(c, m);
}

/* Hand a server command to the DMA thread. The receive thread never writes to the socket. */
static int queue_command(struct vu_client *c, struct npv_vu_msg *m)
{
    struct vu_dma_cmd *q = npv_fp_malloc(c->dev->ctx, sizeof(*q));
    if (q == NULL)
        return -ENOMEM;
    q->next = NULL;
    q->msg = *m;
    npv_vu_msg_init(m);
    pthread_mutex_lock(&c->lock);
    if (c->dma_queued >= NPV_VU_CLIENT_MAX_DMA_QUEUE) {
        pthread_mutex_unlock(&c->lock);
        npv_vu_msg_release(&q->msg);
        free(q);
        npv_warn(c->dev->ctx, "%s: server sent more than %u commands without waiting", c->dev->name,
                 NPV_VU_CLIENT_MAX_DMA_QUEUE);
        return -NPV_EPEERPROTO;
    }
    *c->dma_queue_tail = q;
    c->dma_queue_tail = &q->next;
    c->dma_queued++;
    pthread_cond_broadcast(&c->dma_cond);
    pthread_mutex_unlock(&c->lock);
    return 0;
}

/* One socket: serve what the receive thread queued until the connection dies. */
static void dma_serve_queue(struct vu_client *c)
{
    for (;;) {
        pthread_mutex_lock(&c->lock);
        while (c->dma_queue == NULL && c->dead == 0)
            pthread_cond_wait(&c->dma_cond, &c->lock);
        if (c->dead != 0) {
            pthread_mutex_unlock(&c->lock);
            return;
        }
        struct vu_dma_cmd *q = c->dma_queue;
        c->dma_queue = q->next;
        if (c->dma_queue == NULL)
            c->dma_queue_tail = &c->dma_queue;
        c->dma_queued--;
        pthread_mutex_unlock(&c->lock);
        serve_command(c, &q->msg);
        npv_vu_msg_release(&q->msg);
        free(q);
    }
}

void npv_vu_client_serve_twin(struct vu_client *c)
{
    size_t max =
        sizeof(struct npv_vu_hdr) + sizeof(struct npv_vu_dma_access) + NPV_VU_CLIENT_MAX_XFER;
    for (;;) {
        struct npv_vu_msg m;
        int ret = npv_fp_recv_result(c->dev->ctx);
        if (ret == 0)
            ret = npv_vu_recv(c->twin_sock, &m, max, 0, -1);
        if (ret < 0) {
            pthread_mutex_lock(&c->lock);
            bool closing = c->dead != 0;
            pthread_mutex_unlock(&c->lock);
            if (!closing)
                npv_info(c->dev->ctx, "%s: twin socket lost: %s", c->dev->name, npv_strerror(ret));
            npv_vu_client_kill(c, ret == -NPV_EPEERPROTO || ret == -EMSGSIZE ? -NPV_EPEERPROTO
                                                                             : -ENOTCONN);
            return;
        }
        if ((m.hdr.flags & NPV_VU_F_TYPE_MASK) == NPV_VU_F_TYPE_REPLY) {
            /* We send no commands there: a reply on it is a server out of step. */
            npv_warn(c->dev->ctx, "%s: reply id %u on the twin socket", c->dev->name, m.hdr.msg_id);
            npv_vu_msg_release(&m);
            npv_vu_client_kill(c, -NPV_EPEERPROTO);
            return;
        }
        serve_command(c, &m);
        npv_vu_msg_release(&m);
    }
}

static void *dma_main(void *arg)
{
    struct vu_client *c = arg;
    if (c->twin_sock >= 0)
        npv_vu_client_serve_twin(c);
    else
        dma_serve_queue(c);
    return NULL;
}

/*
 * The flusher. Model choice: a batch held NPV_VU_CLIENT_BATCH_HOLD_NS
 * after its first write leaves without a reply, so writes reach the device
 * even when the caller polls host memory (a status block, a result the
 * device DMAs) instead of reading a register or waiting in the library.
 * Usually the batch left earlier, with the next synchronous message.
 */
static void *flusher_main(void *arg)
{
    struct vu_client *c = arg;
    pthread_mutex_lock(&c->send_lock);
    while (!c->flusher_stop) {
        if (c->batch_n == 0) {
            pthread_cond_wait(&c->batch_cond, &c->send_lock);
            continue;
        }
        uint64_t gen = c->batch_gen;
        uint64_t deadline = npv_deadline_after(NPV_VU_CLIENT_BATCH_HOLD_NS);
        struct timespec abs;
        npv_deadline_to_abs_timespec(deadline, &abs);
        while (!c->flusher_stop && c->batch_gen == gen && npv_deadline_left(deadline) > 0)
            pthread_cond_timedwait(&c->batch_cond, &c->send_lock, &abs);
        if (c->flusher_stop || c->batch_gen != gen || c->batch_n == 0)
            continue;
        int ret = send_batch_locked(c);
        if (ret < 0) {
            pthread_mutex_unlock(&c->send_lock);
            npv_vu_client_kill(c, ret == -ETIMEDOUT ? -EIO : -ENOTCONN);
            return NULL;
        }
    }
    pthread_mutex_unlock(&c->send_lock);
    return NULL;
}

static void *rx_main(void *arg)
{
    struct vu_client *c = arg;
    /* Room for the largest data message either way plus its access header. */
    size_t max =
        sizeof(struct npv_vu_hdr) + sizeof(struct npv_vu_dma_access) + NPV_VU_CLIENT_MAX_XFER;
    for (;;) {
        struct npv_vu_msg m;
        int ret = npv_fp_recv_result(c->dev->ctx);
        if (ret == 0)
            ret = npv_vu_recv(c->sock, &m, max, NPV_VU_MAX_MSG_FDS, -1);
        if (ret < 0) {
            int reason = ret == -NPV_EPEERPROTO || ret == -EMSGSIZE ? -NPV_EPEERPROTO : -ENOTCONN;
            pthread_mutex_lock(&c->lock);
            bool closing = c->dead != 0;
            pthread_mutex_unlock(&c->lock);
            if (!closing)
                npv_info(c->dev->ctx, "%s: connection lost: %s", c->dev->name, npv_strerror(ret));
            npv_vu_client_kill(c, reason);
            return NULL;
        }
        /* A server that sends its commands here even in twin mode is served all the same. */
        if ((m.hdr.flags & NPV_VU_F_TYPE_MASK) == NPV_VU_F_TYPE_REPLY)
            ret = deliver_reply(c, &m);
        else
            ret = queue_command(c, &m);
        npv_vu_msg_release(&m);
        if (ret < 0) {
            npv_vu_client_kill(c, ret);
            return NULL;
        }
    }
}

static struct vu_client *client_of(struct npv_dev *dev)
{
    return dev->priv;
}

static int vu_get_info(struct npv_dev *dev, struct npv_dev_info *info)
{
    struct vu_client *c = client_of(dev);
    struct npv_vu_device_info req = {.argsz = sizeof(req)};
    struct npv_vu_msg m;
    int ret = npv_vu_client_call(c, NPV_VU_CMD_DEVICE_GET_INFO, &req, sizeof(req), NULL, 0, &m);
    if (ret < 0)
        return ret;
    ret = m.nr_fds == 0 ? npv_vu_parse_device_info(m.body, m.body_len, info) : -NPV_EPEERPROTO;
    npv_vu_msg_release(&m);
    return ret;
}

static int fetch_region_info(struct vu_client *c, uint32_t index, uint32_t argsz,
                             struct npv_region_info *info, uint32_t *needed)
{
    struct npv_vu_region_info req = {.argsz = argsz, .index = index};
    struct npv_vu_msg m;
    int ret =
        npv_vu_client_call(c, NPV_VU_CMD_DEVICE_GET_REGION_INFO, &req, sizeof(req), NULL, 0, &m);
    if (ret < 0)
        return ret;
    uint64_t mmap_offset = 0;
    ret = m.nr_fds <= 1 ? npv_vu_parse_region_info(m.body, m.body_len, index, m.nr_fds == 1, info,
                                                   &mmap_offset, needed)
                        : -NPV_EPEERPROTO;
    if (ret == 0 && *needed == 0 && (info->flags & NPV_REGION_MMAP)) {
        pthread_mutex_lock(&c->lock);
        struct vu_region *r = &c->regions[index];
        /*
         * The first fd is kept for the connection's life: a bar may be mapping
         * it right now, so a later reply's fd never replaces it.
         */
        if (r->fd < 0) {
            r->fd = npv_vu_msg_take_fd(&m, 0);
            r->offset = mmap_offset;
        }
        r->known = true;
        pthread_mutex_unlock(&c->lock);
    }
    npv_vu_msg_release(&m);
    return ret;
}

static int vu_region_info(struct npv_dev *dev, uint32_t index, struct npv_region_info *info)
{
    struct vu_client *c = client_of(dev);
    if (index >= c->num_regions)
        return -EINVAL;
    uint32_t needed = 0;
    int ret = fetch_region_info(c, index, NPV_VU_CLIENT_MAX_REGION_INFO, info, &needed);
    if (ret == 0 && needed != 0) {
        /* Asked once more with the size the server named; a second shortfall is a lie. */
        uint32_t again = 0;
        ret = fetch_region_info(c, index, needed, info, &again);
        if (ret == 0 && again != 0)
            ret = -NPV_EPEERPROTO;
    }
    if (ret < 0)
        npv_debug(dev->ctx, "%s: region %u info: %s", dev->name, index, npv_strerror(ret));
    return ret;
}

static int vu_region_mmap_fd(struct npv_dev *dev, uint32_t index, uint64_t area_off, int *fd,
                             uint64_t *file_off)
{
    struct vu_client *c = client_of(dev);
    if (index >= c->num_regions)
        return -EINVAL;
    pthread_mutex_lock(&c->lock);
    bool known = c->regions[index].known;
    pthread_mutex_unlock(&c->lock);
    if (!known) {
        struct npv_region_info info;
        int ret = vu_region_info(dev, index, &info);
        if (ret < 0)
            return ret;
    }
    pthread_mutex_lock(&c->lock);
    const struct vu_region *r = &c->regions[index];
    int ret = 0;
    if (r->fd < 0)
        ret = -ENOTSUP;
    else if (area_off > UINT64_MAX - r->offset)
        ret = -EINVAL;
    else {
        *fd = r->fd;
        *file_off = r->offset + area_off;
    }
    pthread_mutex_unlock(&c->lock);
    return ret;
}

static int region_read_chunk(struct vu_client *c, uint32_t index, uint64_t off, void *buf,
                             uint32_t count)
{
    struct npv_vu_region_access req = {.offset = off, .region = index, .count = count};
    struct npv_vu_msg m;
    int ret = npv_vu_client_call(c, NPV_VU_CMD_REGION_READ, &req, sizeof(req), NULL, 0, &m);
    if (ret < 0)
        return ret;
    struct npv_vu_region_access rep;
    ret = -NPV_EPEERPROTO;
    if (m.nr_fds == 0 && m.body_len >= sizeof(rep)) {
        memcpy(&rep, m.body, sizeof(rep));
        if (rep.offset == off && rep.region == index && rep.count <= count &&
            m.body_len == sizeof(rep) + rep.count) {
            memcpy(buf, m.body + sizeof(rep), rep.count);
            ret = rep.count == count ? 0 : -EIO;
        }
    }
    npv_vu_msg_release(&m);
    return ret;
}

static int region_write_chunk(struct vu_client *c, uint32_t index, uint64_t off, const void *buf,
                              uint32_t count)
{
    struct npv_vu_region_access req = {.offset = off, .region = index, .count = count};
    struct iovec iov[2] = {{.iov_base = &req, .iov_len = sizeof(req)},
                           {.iov_base = (void *)buf, .iov_len = count}};
    struct npv_vu_msg m;
    int ret = npv_vu_client_callv(c, NPV_VU_CMD_REGION_WRITE, iov, 2, NULL, 0, &m);
    if (ret < 0)
        return ret;
    struct npv_vu_region_access rep;
    ret = -NPV_EPEERPROTO;
    if (m.nr_fds == 0 && m.body_len == sizeof(rep)) {
        memcpy(&rep, m.body, sizeof(rep));
        if (rep.offset == off && rep.region == index && rep.count <= count)
            ret = rep.count == count ? 0 : -EIO;
    }
    npv_vu_msg_release(&m);
    return ret;
}

/*
 * Accesses of 1, 2, 4 or 8 bytes go out as one message of exactly that
 * count: a register may act on the width it sees. Larger ones are split at
 * the server's transfer limit.
 */
static int vu_region_rw(struct npv_dev *dev, uint32_t index, uint64_t off, void *rbuf,
                        const void *wbuf, size_t len)
{
    struct vu_client *c = client_of(dev);
    if (index >= c->num_regions || off > UINT64_MAX - len)
        return -EINVAL;
    size_t done = 0;
    while (done < len) {
        /* Bounded by the server's limit and by what our receive path takes in a reply. */
        size_t n = len - done;
        if (n > c->server_caps.max_data_xfer_size)
            n = c->server_caps.max_data_xfer_size;
        if (n > NPV_VU_CLIENT_MAX_XFER)
            n = NPV_VU_CLIENT_MAX_XFER;
        int ret = rbuf != NULL
                      ? region_read_chunk(c, index, off + done, (uint8_t *)rbuf + done, (uint32_t)n)
                      : region_write_chunk(c, index, off + done, (const uint8_t *)wbuf + done,
                                           (uint32_t)n);
        if (ret < 0)
            return ret;
        done += n;
    }
    return 0;
}

static int vu_region_write(struct npv_dev *dev, uint32_t index, uint64_t off, const void *buf,
                           size_t len);

/*
 * Called with send_lock held: add a write to the batch, sending the batch
 * first when it is full. Every message leaves in the order its writes were
 * made, so the server carries them out in program order.
 */
static int batch_add(struct vu_client *c, uint32_t index, uint64_t off, const void *buf, size_t len)
{
    if (c->batch_n == c->batch_max) {
        int ret = send_batch_locked(c);
        if (ret < 0)
            return ret;
    }
    if (c->batch_n == 0 && c->flusher_running)
        pthread_cond_signal(&c->batch_cond); /* a batch starts: the flusher times it */
    struct npv_vu_write_one *w = &c->batch[c->batch_n++];
    *w = (struct npv_vu_write_one){.offset = off, .region = index, .count = (uint32_t)len};
    memcpy(w->data, buf, len);
    __atomic_store_n(&c->dev->batch_pending, 1, __ATOMIC_RELEASE);
    return 0;
}

/*
 * A posted write, exactly len bytes as a register sees them. Gathered into
 * the batch (c->batch_max > 0), which leaves as one REGION_WRITE_MULTI in
 * front of the next synchronous message or before the caller waits for the
 * device (vu_kick); else at once as REGION_WRITE with NO_REPLY (vfio-user
 * spec, "Header": no reply is sent for it). Either way the server carries
 * it out in order with everything sent before and after; its failure comes
 * back through the next fence.
 */
static int vu_region_write_posted(struct npv_dev *dev, uint32_t index, uint64_t off,
                                  const void *buf, size_t len)
{
    struct vu_client *c = client_of(dev);
    if (!c->posted || index >= NPV_VU_PCI_CONFIG_REGION || index >= c->num_regions ||
        (len != 1 && len != 2 && len != 4 && len != 8))
        return vu_region_write(dev, index, off, buf, len);
    if (c->batch_max > 0) {
        pthread_mutex_lock(&c->send_lock);
        int ret = batch_add(c, index, off, buf, len);
        if (ret == 0) {
            c->posted_sent++;
            __atomic_fetch_add(&dev->reg_count[4], 1, __ATOMIC_RELAXED);
            __atomic_store_n(&dev->posted_pending, 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&c->send_lock);
        if (ret < 0) {
            npv_debug(dev->ctx, "%s: send posted writes: %s", dev->name, npv_strerror(ret));
            npv_vu_client_kill(c, ret == -ETIMEDOUT ? -EIO : -ENOTCONN);
            return ret == -ETIMEDOUT ? ret : -ENOTCONN;
        }
        return 0;
    }
    struct npv_vu_region_access req = {.offset = off, .region = index, .count = (uint32_t)len};
    struct iovec iov[2] = {{.iov_base = &req, .iov_len = sizeof(req)},
                           {.iov_base = (void *)buf, .iov_len = len}};
    pthread_mutex_lock(&c->lock);
    int ret = c->dead;
    uint16_t id = c->next_id++; /* no reply comes back: the id matches nothing */
    pthread_mutex_unlock(&c->lock);
    if (ret < 0)
        return ret;
    struct npv_vu_hdr h = {.msg_id = id,
                           .cmd = NPV_VU_CMD_REGION_WRITE,
                           .flags = NPV_VU_F_TYPE_COMMAND | NPV_VU_F_NO_REPLY};
    pthread_mutex_lock(&c->send_lock);
    ret = npv_fp_send_result(dev->ctx);
    if (ret == 0)
        ret = npv_vu_sendv(c->sock, &h, iov, 2, NULL, 0, ns_to_i64(dev->request_timeout_ns));
    if (ret == 0) {
        c->posted_sent++;
        __atomic_fetch_add(&dev->reg_count[4], 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&dev->reg_count[6], 1, __ATOMIC_RELAXED);
        __atomic_store_n(&dev->posted_pending, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&c->send_lock);
    if (ret < 0) {
        npv_debug(dev->ctx, "%s: send posted write: %s", dev->name, npv_strerror(ret));
        npv_vu_client_kill(c, ret == -ETIMEDOUT ? -EIO : -ENOTCONN);
        return ret == -ETIMEDOUT ? ret : -ENOTCONN;
    }
    return 0;
}

/*
 * Order the posted writes: a REGION_WRITE_MULTI carrying the batch held
 * back (or none), answered once the server carried out every earlier write,
 * with the first failure among them.
 */
static int vu_flush(struct npv_dev *dev, bool take_error)
{
    struct vu_client *c = client_of(dev);
    if (!c->posted)
        return 0;
    pthread_mutex_lock(&c->send_lock);
    bool outstanding = c->posted_done != c->posted_sent;
    pthread_mutex_unlock(&c->send_lock);
    int ret = 0;
    if (outstanding) {
        struct npv_vu_msg m;
        unsigned carried = 0;
        __atomic_fetch_add(&dev->reg_count[5], 1, __ATOMIC_RELAXED);
        ret = client_callv(c, NPV_VU_CMD_REGION_WRITE_MULTI, NULL, 0, NULL, 0, &m, &carried);
        if (ret == 0) {
            struct npv_vu_write_multi rep;
            if (m.nr_fds != 0 || m.body_len != sizeof(rep))
                ret = -NPV_EPEERPROTO;
            else
                memcpy(&rep, m.body, sizeof(rep));
            /* A success reply says every write it carried was done. */
            if (ret == 0 && rep.wr_cnt != carried)
                ret = -NPV_EPEERPROTO;
            npv_vu_msg_release(&m);
        } else {
            pthread_mutex_lock(&c->lock);
            bool alive = c->dead == 0;
            /* An error reply with the connection alive is a posted write's failure. */
            if (alive && !take_error) {
                if (c->posted_err == 0)
                    c->posted_err = ret;
                ret = 0;
            }
            pthread_mutex_unlock(&c->lock);
        }
    }
    if (ret == 0 && take_error)
        ret = take_posted_err(c);
    return ret;
}

/* Send the batch held back without waiting: the caller is about to wait for the device. */
static void vu_kick(struct npv_dev *dev)
{
    struct vu_client *c = client_of(dev);
    pthread_mutex_lock(&c->send_lock);
    int ret = send_batch_locked(c);
    pthread_mutex_unlock(&c->send_lock);
    if (ret < 0) {
        /* The connection is gone: the next call reports it. */
        npv_debug(dev->ctx, "%s: send posted writes: %s", dev->name, npv_strerror(ret));
        npv_vu_client_kill(c, ret == -ETIMEDOUT ? -EIO : -ENOTCONN);
    }
}

static int vu_region_read(struct npv_dev *dev, uint32_t index, uint64_t off, void *buf, size_t len)
{
    return vu_region_rw(dev, index, off, buf, NULL, len);
}

static int vu_region_write(struct npv_dev *dev, uint32_t index, uint64_t off, const void *buf,
                           size_t len)
{
    return vu_region_rw(dev, index, off, NULL, buf, len);
}

static int vu_irq_info(struct npv_dev *dev, uint32_t index, struct npv_irq_info *info)
{
    struct vu_client *c = client_of(dev);
    if (index >= c->num_irqs)
        return -EINVAL;
    struct npv_vu_irq_info req = {.argsz = sizeof(req), .index = index};
    struct npv_vu_msg m;
    int ret = npv_vu_client_call(c, NPV_VU_CMD_DEVICE_GET_IRQ_INFO, &req, sizeof(req), NULL, 0, &m);
    if (ret < 0)
        return ret;
    ret = m.nr_fds == 0 ? npv_vu_parse_irq_info(m.body, m.body_len, index, info) : -NPV_EPEERPROTO;
    npv_vu_msg_release(&m);
    return ret;
}

static int send_set_irqs(struct vu_client *c, uint32_t index, uint32_t flags, uint32_t start,
                         uint32_t count, const int32_t *fds, unsigned nr_fds)
{
    struct npv_vu_irq_set req = {
        .argsz = sizeof(req), .flags = flags, .index = index, .start = start, .count = count};
    return npv_vu_client_call(c, NPV_VU_CMD_DEVICE_SET_IRQS, &req, sizeof(req), fds, nr_fds, NULL);
}

/*
 * Eventfds travel as SCM_RIGHTS, at most max_msg_fds per message, so a long
 * range goes out as several messages with advancing start. A -1 (unassign)
 * cannot ride as an fd: a run of them is a message with count and no fds.
 */
static int vu_set_irqs(struct npv_dev *dev, uint32_t index, uint32_t flags, uint32_t start,
                       uint32_t count, const int32_t *fds)
{
    struct vu_client *c = client_of(dev);
    if (index >= c->num_irqs || (flags & NPV_IRQ_SET_DATA_BOOL) ||
        count > NPV_VU_CLIENT_MAX_VECTORS)
        return -EINVAL;
    if (!(flags & NPV_IRQ_SET_DATA_EVENTFD) || count == 0)
        return send_set_irqs(c, index, flags, start, count, NULL, 0);
    if (fds == NULL)
        return -EINVAL;
    uint32_t i = 0;
    while (i < count) {
        bool assign = fds[i] >= 0;
        uint32_t n = 1;
        while (i + n < count && (fds[i + n] >= 0) == assign &&
               (!assign || n < c->server_caps.max_msg_fds))
            n++;
        int ret =
            send_set_irqs(c, index, flags, start + i, n, assign ? &fds[i] : NULL, assign ? n : 0);
        if (ret < 0)
            return ret;
        i += n;
    }
    return 0;
}

static int vu_reset(struct npv_dev *dev)
{
    return npv_vu_client_call(client_of(dev), NPV_VU_CMD_DEVICE_RESET, NULL, 0, NULL, 0, NULL);
}

static int vu_attach(struct npv_dev *dev, struct npv_domain *dom)
{
    return npv_dev_move_private_sink(dev, &client_of(dev)->sink, dom);
}

static void client_free(struct vu_client *c)
{
    if (c->flusher_running) {
        pthread_mutex_lock(&c->send_lock);
        c->flusher_stop = true;
        pthread_cond_broadcast(&c->batch_cond);
        pthread_mutex_unlock(&c->send_lock);
        pthread_join(c->flusher, NULL);
    }
    if (c->rx_running || c->dma_running)
        npv_vu_client_kill(c, -ENOTCONN);
    if (c->rx_running)
        pthread_join(c->rx_thread, NULL);
    if (c->dma_running)
        pthread_join(c->dma_thread, NULL);
    while (c->dma_queue != NULL) {
        struct vu_dma_cmd *q = c->dma_queue;
        c->dma_queue = q->next;
        npv_vu_msg_release(&q->msg);
        free(q);
    }
    while (c->pending != NULL) {
        struct vu_request *r = c->pending;
        c->pending = r->next;
        npv_vu_msg_release(&r->reply);
        free(r);
    }
    for (uint32_t i = 0; i < NPV_VU_CLIENT_MAX_REGIONS; i++)
        if (c->regions[i].fd >= 0)
            close(c->regions[i].fd);
    if (c->sock >= 0)
        close(c->sock);
    if (c->twin_sock >= 0)
        close(c->twin_sock);
    npv_vu_client_maps_free(c);
    pthread_cond_destroy(&c->batch_cond);
    pthread_cond_destroy(&c->dma_cond);
    pthread_mutex_destroy(&c->twin_send_lock);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->send_lock);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static void vu_close(struct npv_dev *dev)
{
    struct vu_client *c = client_of(dev);
    /* A live server is told of each unmap; a dead one has dropped them all already. */
    pthread_mutex_lock(&c->lock);
    bool alive = c->dead == 0;
    pthread_mutex_unlock(&c->lock);
    /* Writes made before the close reach the device, as posted writes on PCIe do. */
    if (alive)
        vu_kick(dev);
    if (dev->domain != NULL)
        npv_domain_remove_sink(dev->domain, &c->sink, alive);
    client_free(c);
    dev->priv = NULL;
}

static const struct npv_dev_ops vu_ops = {
    .get_info = vu_get_info,
    .region_info = vu_region_info,
    .region_mmap_fd = vu_region_mmap_fd,
    .region_read = vu_region_read,
    .region_write = vu_region_write,
    .region_write_posted = vu_region_write_posted,
    .flush = vu_flush,
    .kick = vu_kick,
    .irq_info = vu_irq_info,
    .set_irqs = vu_set_irqs,
    .reset = vu_reset,
    .attach = vu_attach,
    .close = vu_close,
};

static int client_new(struct npv_ctx *ctx, struct vu_client **out)
{
    struct vu_client *c = npv_fp_calloc(ctx, 1, sizeof(*c));
    if (c == NULL)
        return -ENOMEM;
    c->sock = -1;
    c->twin_sock = -1;
    c->dma_sock = -1;
    c->dma_send_lock = &c->send_lock;
    c->dma_queue_tail = &c->dma_queue;
    for (uint32_t i = 0; i < NPV_VU_CLIENT_MAX_REGIONS; i++)
        c->regions[i].fd = -1;
    pthread_condattr_t ca;
    int ret = pthread_condattr_init(&ca);
    if (ret != 0)
        goto err_free;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    ret = pthread_cond_init(&c->cond, &ca);
    if (ret == 0) {
        ret = pthread_cond_init(&c->batch_cond, &ca);
        if (ret != 0)
            pthread_cond_destroy(&c->cond);
    }
    pthread_condattr_destroy(&ca);
    if (ret != 0)
        goto err_free;
    ret = pthread_mutex_init(&c->lock, NULL);
    if (ret != 0)
        goto err_cond;
    ret = pthread_mutex_init(&c->send_lock, NULL);
    if (ret != 0)
        goto err_lock;
    ret = pthread_mutex_init(&c->twin_send_lock, NULL);
    if (ret != 0)
        goto err_send_lock;
    ret = pthread_cond_init(&c->dma_cond, NULL);
    if (ret != 0)
        goto err_twin_lock;
    npv_vu_caps_default(&c->server_caps);
    *out = c;
    return 0;

err_twin_lock:
    pthread_mutex_destroy(&c->twin_send_lock);
err_send_lock:
    pthread_mutex_destroy(&c->send_lock);
err_lock:
    pthread_mutex_destroy(&c->lock);
err_cond:
    pthread_cond_destroy(&c->batch_cond);
    pthread_cond_destroy(&c->cond);
err_free:
    free(c);
    return -ret;
}

/* AF_UNIX connect does not block on a listening peer except when its backlog is full. */
static int connect_socket(struct npv_ctx *ctx, const char *path, uint64_t deadline)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    strcpy(sa.sun_path, path);
    int fd = npv_fp_socket(ctx, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    for (;;) {
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
            return fd;
        int err = errno;
        if (err == EINTR)
            continue;
        if (err != EAGAIN || npv_deadline_left(deadline) == 0) {
            close(fd);
            return err == EAGAIN ? -ETIMEDOUT : -err;
        }
        usleep(1000);
    }
}

/* What we offer: what our receive path accepts, and twin sockets. */
static void client_caps(struct npv_vu_caps *caps)
{
    npv_vu_caps_default(caps);
    caps->max_msg_fds = NPV_VU_MAX_MSG_FDS;
    caps->max_data_xfer_size = NPV_VU_CLIENT_MAX_XFER;
    caps->pgsizes = 4096u | (2u << 20) | (1u << 30);
    caps->twin_socket = true;
    caps->write_multiple = true;
    caps->present = NPV_VU_CAP_MAX_MSG_FDS | NPV_VU_CAP_MAX_DATA_XFER_SIZE | NPV_VU_CAP_PGSIZES |
                    NPV_VU_CAP_TWIN_SOCKET | NPV_VU_CAP_WRITE_MULTIPLE;
}

/*
 * The server's end of twin mode: the fd at fd_index of the VERSION reply,
 * which must be a stream socket (anything else would leave its commands
 * unread). Other fds of the reply are closed with it.
 */
static int take_twin_socket(struct vu_client *c, struct npv_vu_msg *m)
{
    if (!c->server_caps.twin_socket)
        return 0;
    if (c->server_caps.twin_fd_index >= m->nr_fds)
        return -NPV_EPEERPROTO;
    int fd = npv_vu_msg_take_fd(m, c->server_caps.twin_fd_index);
    int type = 0;
    socklen_t tlen = sizeof(type);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) < 0 || type != SOCK_STREAM) {
        close(fd);
        return -NPV_EPEERPROTO;
    }
    c->twin_sock = fd;
    return 0;
}

static int negotiate(struct vu_client *c, uint64_t deadline)
{
    struct npv_dev *dev = c->dev;
    struct npv_vu_caps mine;
    client_caps(&mine);
    char json[256];
    int jlen = npv_vu_caps_format(&mine, json, sizeof(json));
    if (jlen < 0)
        return jlen;
    struct npv_vu_version v = {.major = NPV_VU_MAJOR, .minor = NPV_VU_MINOR};
    struct iovec iov[2] = {{.iov_base = &v, .iov_len = sizeof(v)},
                           {.iov_base = json, .iov_len = (size_t)jlen}};
    struct npv_vu_hdr h = {.msg_id = 0, .cmd = NPV_VU_CMD_VERSION, .flags = NPV_VU_F_TYPE_COMMAND};
    int ret = npv_fp_send_result(dev->ctx);
    if (ret == 0)
        ret = npv_vu_sendv(c->sock, &h, iov, 2, NULL, 0, ns_to_i64(npv_deadline_left(deadline)));
    if (ret < 0)
        return ret == -EPIPE || ret == -ECONNRESET ? -ENOTCONN : ret;
    c->next_id = 1;

    struct npv_vu_msg m;
    size_t max = sizeof(struct npv_vu_hdr) + sizeof(v) + NPV_VU_MAX_VERSION_DATA;
    ret = npv_fp_recv_result(dev->ctx);
    if (ret == 0)
        ret = npv_vu_recv(c->sock, &m, max, NPV_VU_MAX_MSG_FDS,
                          ns_to_i64(npv_deadline_left(deadline)));
    if (ret == -ECONNRESET) {
        npv_err(dev->ctx,
                "%s: the server closed the connection during version negotiation "
                "(it may not speak vfio-user %d.%d)",
                dev->name, NPV_VU_MAJOR, NPV_VU_MINOR);
        return -ENOTCONN;
    }
    if (ret < 0)
        return ret == -EMSGSIZE ? -NPV_EPEERPROTO : ret;
    if ((m.hdr.flags & NPV_VU_F_TYPE_MASK) != NPV_VU_F_TYPE_REPLY ||
        m.hdr.cmd != NPV_VU_CMD_VERSION || m.hdr.msg_id != 0) {
        ret = -NPV_EPEERPROTO;
    } else if (m.hdr.flags & NPV_VU_F_ERROR) {
        ret = reply_errno(&m.hdr);
        if (ret == -EBUSY) /* our server's answer to a second client (vfio_user_server.c) */
            npv_err(dev->ctx, "%s: busy: one client at a time (another client is connected)",
                    dev->name);
        else /* a version it does not speak, or a refusal (an owner's npv_vus_refuse_fd) */
            npv_err(dev->ctx,
                    "%s: the server refused the connection (VERSION, vfio-user %d.%d): %s",
                    dev->name, NPV_VU_MAJOR, NPV_VU_MINOR, npv_strerror(ret));
    } else {
        uint16_t minor = 0;
        ret = npv_vu_parse_version_reply(m.body, m.body_len, &c->server_caps, &minor);
        if (ret == 0)
            ret = take_twin_socket(c, &m);
        /*
         * Model choice: writes are posted only to a server that offers
         * "write_multiple": the fence that reports a posted write's failure
         * is a REGION_WRITE_MULTI. Any other server gets every write
         * synchronously, as before.
         */
        c->posted = c->server_caps.write_multiple;
        /*
         * Model choice: consecutive posted writes are batched (at most
         * NPV_VU_CLIENT_MAX_BATCH, and what fits the server's transfer
         * limit); NPUVFIO_VU_BATCH=0 sends each on its own, for comparison.
         */
        const char *env = getenv("NPUVFIO_VU_BATCH");
        c->batch_max = 0;
        uint64_t xfer = c->server_caps.max_data_xfer_size;
        if (c->posted && (env == NULL || strcmp(env, "0") != 0) &&
            xfer >= sizeof(struct npv_vu_write_multi) + sizeof(struct npv_vu_write_one)) {
            uint64_t fit =
                (xfer - sizeof(struct npv_vu_write_multi)) / sizeof(struct npv_vu_write_one);
            c->batch_max = fit < NPV_VU_CLIENT_MAX_BATCH ? (unsigned)fit : NPV_VU_CLIENT_MAX_BATCH;
        }
        if (ret == -EPROTONOSUPPORT) {
            struct npv_vu_version got;
            memcpy(&got, m.body, sizeof(got));
            npv_err(dev->ctx, "%s: the server speaks vfio-user major version %u; we speak only %d",
                    dev->name, got.major, NPV_VU_MAJOR);
        } else if (ret == 0) {
            npv_debug(dev->ctx, "%s: vfio-user %d.%u, max_msg_fds %u, max_data_xfer_size %u, %s",
                      dev->name, NPV_VU_MAJOR, minor, c->server_caps.max_msg_fds,
                      c->server_caps.max_data_xfer_size,
                      c->twin_sock >= 0 ? "twin sockets" : "one socket");
        }
    }
    if (ret == -NPV_EPEERPROTO)
        npv_err(dev->ctx, "%s: malformed VERSION reply", dev->name);
    npv_vu_msg_release(&m);
    return ret;
}

int npv_vfio_user_open(struct npv_ctx *ctx, const char *socket_path,
                       const struct npv_dev_opts *opts, struct npv_dev **out)
{
    struct vu_client *c = NULL;
    int ret = client_new(ctx, &c);
    if (ret < 0)
        return ret;
    struct npv_dev *dev = npv_dev_alloc(ctx, &vu_ops, NPV_TRANSPORT_VFIO_USER, socket_path, opts);
    if (dev == NULL) {
        ret = -errno;
        client_free(c);
        return ret;
    }
    dev->priv = c;
    c->dev = dev;
    npv_vu_client_sink_init(c);
    uint64_t deadline = npv_deadline_after(dev->request_timeout_ns);

    c->sock = connect_socket(ctx, socket_path, deadline);
    if (c->sock < 0) {
        ret = c->sock;
        npv_err(ctx, "%s: connect: %s", socket_path, npv_strerror(ret));
        goto err;
    }
    ret = negotiate(c, deadline);
    if (ret < 0)
        goto err;
    if (c->twin_sock >= 0) {
        c->dma_sock = c->twin_sock;
        c->dma_send_lock = &c->twin_send_lock;
    } else {
        c->dma_sock = c->sock;
    }
    ret = pthread_create(&c->dma_thread, NULL, dma_main, c);
    if (ret != 0) {
        ret = -ret;
        goto err;
    }
    c->dma_running = true;
    ret = pthread_create(&c->rx_thread, NULL, rx_main, c);
    if (ret != 0) {
        ret = -ret;
        goto err;
    }
    c->rx_running = true;
    if (c->batch_max > 0) {
        ret = pthread_create(&c->flusher, NULL, flusher_main, c);
        if (ret != 0) {
            ret = -ret;
            goto err;
        }
        c->flusher_running = true;
    }
    /* Region and IRQ indexes are checked against what the device said it has. */
    c->num_regions = NPV_VU_CLIENT_MAX_REGIONS;
    c->num_irqs = NPV_VU_CLIENT_MAX_IRQ_INDEXES;
    struct npv_dev_info info;
    ret = vu_get_info(dev, &info);
    if (ret < 0) {
        npv_err(ctx, "%s: device info: %s", socket_path, npv_strerror(ret));
        goto err;
    }
    c->num_regions = info.num_regions;
    c->num_irqs = info.num_irqs;
    *out = dev;
    return 0;

err:
    client_free(c);
    npv_dev_free_shell(dev);
    return ret;
}

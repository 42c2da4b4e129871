/* SPDX-License-Identifier: MIT */
/*
 * vfio-user server: lifecycle, the listening socket, the event loop and the
 * command dispatch. Regions, DMA and IRQs live in their own files.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctx_internal.h"
#include "vfio_user_server_internal.h"

NPV_API int npv_vus_new(struct npv_ctx *ctx, const struct npv_vus_config *cfg, struct npv_vus **out)
{
    struct npv_vus *srv;
    int r;

    if (cfg == NULL || out == NULL)
        return -EINVAL;
    if (cfg->msix_vectors > 2048 ||
        (cfg->msix_vectors > 0 &&
         (cfg->msix_bar >= 6 || cfg->bars[cfg->msix_bar].size == 0 ||
          (uint64_t)cfg->msix_table_offset + 16ull * cfg->msix_vectors >
              cfg->bars[cfg->msix_bar].size ||
          (uint64_t)cfg->msix_pba_offset + 8ull * ((cfg->msix_vectors + 63) / 64) >
              cfg->bars[cfg->msix_bar].size)))
        return -EINVAL;
    srv = calloc(1, sizeof(*srv));
    if (srv == NULL)
        return -ENOMEM;
    srv->ctx = ctx;
    srv->cfg = *cfg;
    srv->listen_fd = -1;
    srv->listener.fd = -1;
    srv->conn_fd = -1;
    srv->twin_fd = -1;
    npv_vu_msg_init(&srv->wait_reply);
    pthread_mutex_init(&srv->conn_lock, NULL);
    pthread_mutex_init(&srv->send_lock, NULL);
    pthread_mutex_init(&srv->dma_msg_lock, NULL);
    pthread_mutex_init(&srv->wait_lock, NULL);
    pthread_cond_init(&srv->wait_cond, NULL);
    pthread_mutex_init(&srv->irq_lock, NULL);
    pthread_rwlock_init(&srv->dma_lock, NULL);
    npv_pci_config_init(&srv->pci, cfg);

    srv->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (srv->stop_fd < 0) {
        r = -errno;
        goto err_free;
    }
    r = npv_vus_regions_init(srv);
    if (r < 0)
        goto err_stop;
    r = npv_vus_irq_init(srv);
    if (r < 0)
        goto err_regions;
    *out = srv;
    return 0;

err_regions:
    npv_vus_regions_fini(srv);
err_stop:
    close(srv->stop_fd);
err_free:
    pthread_rwlock_destroy(&srv->dma_lock);
    pthread_mutex_destroy(&srv->irq_lock);
    pthread_cond_destroy(&srv->wait_cond);
    pthread_mutex_destroy(&srv->wait_lock);
    pthread_mutex_destroy(&srv->dma_msg_lock);
    pthread_mutex_destroy(&srv->send_lock);
    pthread_mutex_destroy(&srv->conn_lock);
    free(srv);
    return r;
}

NPV_API void npv_vus_free(struct npv_vus *srv)
{
    if (srv == NULL)
        return;
    if (srv->conn_fd >= 0)
        npv_vus_drop_conn(srv);
    npv_unix_listener_close(&srv->listener);
    srv->listen_fd = -1;
    /* Empty once a client is dropped; a mapping left anyway still owes the model its dma_unmap. */
    npv_vus_dma_unmap_all(srv);
    npv_vus_irq_fini(srv);
    npv_vus_regions_fini(srv);
    npv_vu_msg_release(&srv->wait_reply);
    close(srv->stop_fd);
    pthread_rwlock_destroy(&srv->dma_lock);
    pthread_mutex_destroy(&srv->irq_lock);
    pthread_cond_destroy(&srv->wait_cond);
    pthread_mutex_destroy(&srv->wait_lock);
    pthread_mutex_destroy(&srv->dma_msg_lock);
    pthread_mutex_destroy(&srv->send_lock);
    pthread_mutex_destroy(&srv->conn_lock);
    free(srv);
}

NPV_API int npv_vus_listen(struct npv_vus *srv, const char *path)
{
    if (srv->listen_fd >= 0)
        return -EBUSY;
    /* Whoever connects gets the device's DMA into their memory and ours: owner only. */
    int r = npv_unix_listen(path, 0600, -1, 4, &srv->listener);
    if (r < 0)
        return r;
    srv->listen_fd = srv->listener.fd;
    return 0;
}

NPV_API void npv_vus_stop(struct npv_vus *srv)
{
    uint64_t one = 1;
    ssize_t n = write(srv->stop_fd, &one, sizeof(one));
    (void)n;
}

NPV_API bool npv_vus_connected(struct npv_vus *srv)
{
    pthread_mutex_lock(&srv->conn_lock);
    bool c = srv->conn_fd >= 0;
    pthread_mutex_unlock(&srv->conn_lock);
    return c;
}

NPV_API void npv_vus_disconnect(struct npv_vus *srv)
{
    /* The loop owns teardown; shutting the socket down makes its poll see the end. */
    pthread_mutex_lock(&srv->conn_lock);
    if (srv->conn_fd >= 0) {
        srv->kick = true;
        shutdown(srv->conn_fd, SHUT_RDWR);
    }
    if (srv->twin_fd >= 0)
        shutdown(srv->twin_fd, SHUT_RDWR);
    pthread_mutex_unlock(&srv->conn_lock);
    npv_vus_dma_abort_wait(srv);
}

NPV_API uint16_t npv_vus_pci_command(struct npv_vus *srv)
{
    return npv_pci_config_read16(&srv->pci, NPV_PCI_COMMAND);
}

void npv_vus_set_conn(struct npv_vus *srv, int fd)
{
    pthread_mutex_lock(&srv->conn_lock);
    pthread_mutex_lock(&srv->send_lock);
    srv->conn_fd = fd;
    atomic_fetch_add(&srv->conn_gen, 1);
    pthread_mutex_unlock(&srv->send_lock);
    srv->versioned = false;
    srv->kick = false;
    srv->write_multi = false;
    srv->posted_err = 0;
    npv_vu_caps_default(&srv->peer);
    __atomic_store_n(&srv->peer_max_xfer, srv->peer.max_data_xfer_size, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&srv->conn_lock);
}

void npv_vus_drop_conn(struct npv_vus *srv)
{
    pthread_mutex_lock(&srv->conn_lock);
    pthread_mutex_lock(&srv->send_lock);
    int fd = srv->conn_fd;
    srv->conn_fd = -1;
    bool was_versioned = srv->versioned;
    srv->versioned = false;
    /* Wakes a requester reading its DMA reply on the twin socket. */
    if (srv->twin_fd >= 0)
        shutdown(srv->twin_fd, SHUT_RDWR);
    pthread_mutex_unlock(&srv->send_lock);
    pthread_mutex_unlock(&srv->conn_lock);
    if (fd >= 0)
        close(fd);
    npv_vus_dma_abort_wait(srv);
    /* twin_fd changes under both locks: requesters hold one, npv_vus_disconnect the other. */
    pthread_mutex_lock(&srv->dma_msg_lock);
    pthread_mutex_lock(&srv->conn_lock);
    if (srv->twin_fd >= 0)
        close(srv->twin_fd);
    srv->twin_fd = -1;
    pthread_mutex_unlock(&srv->conn_lock);
    pthread_mutex_unlock(&srv->dma_msg_lock);
    /* The spec: on client loss unmap all DMA and close IRQ fds, keep device state. */
    npv_vus_dma_unmap_all(srv);
    npv_vus_irq_close_all(srv);
    if (was_versioned && srv->cfg.disconnect != NULL)
        srv->cfg.disconnect(srv->cfg.arg);
}

int npv_vus_send_locked(struct npv_vus *srv, struct npv_vu_hdr *hdr, const struct iovec *iov,
                        unsigned iovcnt, const int *fds, unsigned nr_fds)
{
    return npv_vus_send_to(srv, NPV_VUS_ANY_CONN, hdr, iov, iovcnt, fds, nr_fds);
}

int npv_vus_send_to(struct npv_vus *srv, uint64_t conn_gen, struct npv_vu_hdr *hdr,
                    const struct iovec *iov, unsigned iovcnt, const int *fds, unsigned nr_fds)
{
    int r;
    pthread_mutex_lock(&srv->send_lock);
    if (srv->conn_fd < 0 ||
        (conn_gen != NPV_VUS_ANY_CONN && conn_gen != atomic_load(&srv->conn_gen)))
        r = -ENOTCONN;
    else
        r = npv_vu_sendv(srv->conn_fd, hdr, iov, iovcnt, fds, nr_fds, NPV_VUS_MSG_TIMEOUT);
    pthread_mutex_unlock(&srv->send_lock);
    return r;
}

int npv_vus_reply(struct npv_vus *srv, const struct npv_vu_msg *m, const void *body, size_t len,
                  const int *fds, unsigned nr_fds)
{
    if (m->hdr.flags & NPV_VU_F_NO_REPLY)
        return 0;
    struct npv_vu_hdr h = {
        .msg_id = m->hdr.msg_id,
        .cmd = m->hdr.cmd,
        .flags = NPV_VU_F_TYPE_REPLY,
    };
    struct iovec iov = {.iov_base = (void *)body, .iov_len = len};
    return npv_vus_send_locked(srv, &h, &iov, len > 0 ? 1 : 0, fds, nr_fds);
}

/*
 * Model choice: the spec gives a no-reply command no way to report a failure.
 * A posted write that fails (on PCIe an Unsupported Request the CPU never
 * sees) is kept here and answered in the reply to the client's next
 * REGION_WRITE_MULTI, which our client sends as its fence before a read or
 * any other command (vfio_user_client.c, send_fence). Only the first is kept.
 */
void npv_vus_note_posted_error(struct npv_vus *srv, int err)
{
    npv_debug(srv->ctx, "vfio-user server: a write sent with no reply failed: %s", strerror(err));
    if (srv->posted_err == 0)
        srv->posted_err = err;
}

static int reply_error(struct npv_vus *srv, const struct npv_vu_msg *m, int err)
{
    if (m->hdr.flags & NPV_VU_F_NO_REPLY)
        return 0;
    struct npv_vu_hdr h = {
        .msg_id = m->hdr.msg_id,
        .cmd = m->hdr.cmd,
        .flags = NPV_VU_F_TYPE_REPLY | NPV_VU_F_ERROR,
        .error = (uint32_t)(err < 0 ? -err : err),
    };
    /* Our own codes are not errnos a peer would know. */
    if (h.error >= NPV_ERROR_BASE)
        h.error = EINVAL;
    return npv_vus_send_locked(srv, &h, NULL, 0, NULL, 0);
}

static int handle_version(struct npv_vus *srv, struct npv_vu_msg *m)
{
    struct npv_vu_version v;
    struct npv_vu_caps peer, mine;
    char json[256];

    if (srv->versioned || m->body_len < sizeof(v) ||
        m->body_len - sizeof(v) > NPV_VU_MAX_VERSION_DATA) {
        reply_error(srv, m, EINVAL);
        return -NPV_EPEERPROTO;
    }
    memcpy(&v, m->body, sizeof(v));
    if (v.major != NPV_VU_MAJOR) {
        npv_warn(srv->ctx, "vfio-user server: client proposes major %u, we speak %u", v.major,
                 NPV_VU_MAJOR);
        reply_error(srv, m, ENOTSUP);
        return -NPV_EPEERPROTO;
    }
    if (npv_vu_caps_parse((const char *)m->body + sizeof(v), m->body_len - sizeof(v), &peer) < 0) {
        reply_error(srv, m, EINVAL);
        return -NPV_EPEERPROTO;
    }
    srv->peer = peer;
    __atomic_store_n(&srv->peer_max_xfer, peer.max_data_xfer_size, __ATOMIC_RELAXED);
    /*
     * What we receive at most; the client's limits bound what we send it.
     * The spec makes the reply's capabilities a subset of the proposal: a key
     * the client left out is left out here too, and the client assumes the
     * spec's default for it, which is what we accept (one fd, 1 MiB, 65535
     * maps, 4 KiB pages at least).
     */
    npv_vu_caps_default(&mine);
    mine.max_msg_fds = NPV_VUS_MAX_FDS;
    mine.max_data_xfer_size = NPV_VUS_MAX_XFER;
    mine.max_dma_maps =
        peer.max_dma_maps < NPV_VUS_MAX_DMA_MAPS ? peer.max_dma_maps : NPV_VUS_MAX_DMA_MAPS;
    mine.pgsizes = peer.pgsizes & (4096u | (2u << 20) | (1u << 30));
    if (mine.pgsizes == 0)
        mine.pgsizes = 4096;
    mine.present = peer.present & (NPV_VU_CAP_MAX_MSG_FDS | NPV_VU_CAP_MAX_DATA_XFER_SIZE |
                                   NPV_VU_CAP_MAX_DMA_MAPS | NPV_VU_CAP_PGSIZES |
                                   NPV_VU_CAP_WRITE_MULTIPLE | NPV_VU_CAP_TWIN_SOCKET);
    /* Offered when asked for: a reply names only what the proposal held (subset rule). */
    mine.write_multiple = peer.write_multiple;
    /* The client end of a fresh pair rides as fd 0 of the reply; ours carries our DMA commands. */
    int twin[2] = {-1, -1};
    if (peer.twin_socket && !srv->cfg.single_socket &&
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, twin) == 0) {
        mine.twin_socket = true;
        mine.twin_fd_index = 0;
        mine.present |= NPV_VU_CAP_TWIN_FD_INDEX;
    }
    int n = npv_vu_caps_format(&mine, json, sizeof(json));
    if (n < 0)
        goto err_twin;
    /* Our highest minor is NPV_VU_MINOR; the reply's minor is never above the client's. */
    uint16_t minor = NPV_VU_MINOR;
    if (v.minor < minor)
        minor = v.minor;
    struct npv_vu_version rv = {.major = NPV_VU_MAJOR, .minor = minor};
    struct iovec iov[2] = {{.iov_base = &rv, .iov_len = sizeof(rv)},
                           {.iov_base = json, .iov_len = (size_t)n}};
    struct npv_vu_hdr h = {
        .msg_id = m->hdr.msg_id, .cmd = m->hdr.cmd, .flags = NPV_VU_F_TYPE_REPLY};
    int r = npv_vus_send_locked(srv, &h, iov, 2, mine.twin_socket ? &twin[1] : NULL,
                                mine.twin_socket ? 1 : 0);
    if (r < 0) {
        n = r;
        goto err_twin;
    }
    if (mine.twin_socket) {
        close(twin[1]);
        pthread_mutex_lock(&srv->dma_msg_lock);
        pthread_mutex_lock(&srv->conn_lock);
        srv->twin_fd = twin[0];
        pthread_mutex_unlock(&srv->conn_lock);
        pthread_mutex_unlock(&srv->dma_msg_lock);
    }
    srv->versioned = true;
    srv->write_multi = mine.write_multiple;
    srv->posted_err = 0;
    if (srv->cfg.connect != NULL)
        srv->cfg.connect(srv->cfg.arg);
    return 0;

err_twin:
    if (twin[0] >= 0) {
        close(twin[0]);
        close(twin[1]);
    }
    return n;
}

static int handle_device_info(struct npv_vus *srv, struct npv_vu_msg *m)
{
    struct npv_vu_device_info in;
    if (m->body_len < sizeof(in))
        return reply_error(srv, m, EINVAL);
    memcpy(&in, m->body, sizeof(in));
    if (in.argsz < sizeof(in))
        return reply_error(srv, m, EINVAL);
    struct npv_vu_device_info out = {
        .argsz = sizeof(out),
        .flags = NPV_VU_DEVICE_FLAGS_PCI | NPV_VU_DEVICE_FLAGS_RESET,
        .num_regions = NPV_VU_PCI_NUM_REGIONS,
        .num_irqs = NPV_VU_PCI_NUM_IRQS,
    };
    return npv_vus_reply(srv, m, &out, sizeof(out), NULL, 0);
}

static int handle_reset(struct npv_vus *srv, struct npv_vu_msg *m)
{
    if (m->body_len != 0)
        return reply_error(srv, m, EINVAL);
    if (srv->cfg.reset != NULL) {
        int r = srv->cfg.reset(srv->cfg.arg);
        if (r < 0)
            return reply_error(srv, m, r);
    }
    return npv_vus_reply(srv, m, NULL, 0, NULL, 0);
}

/* How many fds each command may carry: DMA_MAP one, SET_IRQS one per vector. */
static bool fds_allowed(const struct npv_vu_msg *m)
{
    switch (m->hdr.cmd) {
    case NPV_VU_CMD_DMA_MAP:
        return m->nr_fds <= 1;
    case NPV_VU_CMD_DEVICE_SET_IRQS:
        return true; /* checked against count by the handler */
    default:
        return m->nr_fds == 0;
    }
}

int npv_vus_handle(struct npv_vus *srv, struct npv_vu_msg *m)
{
    uint32_t type = m->hdr.flags & NPV_VU_F_TYPE_MASK;
    int r;

    if (type == NPV_VU_F_TYPE_REPLY) {
        /* Only our DMA_READ/WRITE requests have replies; anything else is dropped. */
        npv_vus_dma_reply(srv, m);
        return 0;
    }
    if (m->hdr.flags & NPV_VU_F_ERROR)
        return reply_error(srv, m, EINVAL);
    if (!srv->versioned && m->hdr.cmd != NPV_VU_CMD_VERSION) {
        reply_error(srv, m, EINVAL);
        return -NPV_EPEERPROTO; /* the spec: VERSION comes first */
    }
    if (!fds_allowed(m))
        return reply_error(srv, m, EINVAL);

    switch (m->hdr.cmd) {
    case NPV_VU_CMD_VERSION:
        return handle_version(srv, m);
    case NPV_VU_CMD_DMA_MAP:
        r = npv_vus_handle_dma_map(srv, m);
        break;
    case NPV_VU_CMD_DMA_UNMAP:
        r = npv_vus_handle_dma_unmap(srv, m);
        break;
    case NPV_VU_CMD_DEVICE_GET_INFO:
        return handle_device_info(srv, m);
    case NPV_VU_CMD_DEVICE_GET_REGION_INFO:
        r = npv_vus_handle_region_info(srv, m);
        break;
    case NPV_VU_CMD_DEVICE_GET_IRQ_INFO:
        r = npv_vus_handle_irq_info(srv, m);
        break;
    case NPV_VU_CMD_DEVICE_SET_IRQS:
        r = npv_vus_handle_set_irqs(srv, m);
        break;
    case NPV_VU_CMD_REGION_READ:
    case NPV_VU_CMD_REGION_WRITE:
        r = npv_vus_handle_region_rw(srv, m);
        break;
    case NPV_VU_CMD_REGION_WRITE_MULTI:
        r = npv_vus_handle_write_multi(srv, m);
        break;
    case NPV_VU_CMD_DEVICE_RESET:
        return handle_reset(srv, m);
    default:
        /*
         * DEVICE_FEATURE (migration, dirty-page logging), MIG_DATA_READ/WRITE,
         * GET_REGION_IO_FDS: our models
         * have no state to migrate and no dirty tracking, so the optional
         * features are refused cleanly, as the spec allows.
         */
        r = -ENOSYS;
        break;
    }
    /* Handlers return a positive errno for "reply with this error", negative to drop. */
    if (r > 0 && (m->hdr.flags & NPV_VU_F_NO_REPLY) && m->hdr.cmd == NPV_VU_CMD_REGION_WRITE)
        npv_vus_note_posted_error(srv, r);
    if (r > 0)
        return reply_error(srv, m, r);
    if (r == -ENOSYS)
        return reply_error(srv, m, ENOSYS);
    return r;
}

/*
 * Answer the client on fd with error err to its first command (its VERSION),
 * read within timeout_ns (< 0: no bound), and close fd. True when the reply
 * went out. The vfio-user spec lets a server answer any command with an
 * error reply; our client (vfio_user_client.c, negotiate) returns it as -err.
 */
static bool refuse_conn(int fd, uint32_t err, int64_t timeout_ns)
{
    struct npv_vu_msg m;
    bool replied = false;
    int r = npv_vu_recv(fd, &m, sizeof(struct npv_vu_hdr) + NPV_VU_MAX_VERSION_DATA + 64, 0,
                        timeout_ns);
    if (r == 0) {
        if ((m.hdr.flags & NPV_VU_F_TYPE_MASK) == NPV_VU_F_TYPE_COMMAND)
            replied = npv_vu_send_error(fd, m.hdr.msg_id, m.hdr.cmd, err, timeout_ns) == 0;
        npv_vu_msg_release(&m);
    }
    close(fd);
    return replied;
}

NPV_API void npv_vus_refuse_fd(struct npv_ctx *ctx, int fd, int err, int timeout_ms)
{
    if (fd < 0)
        return;
    if (err < 0)
        err = -err;
    /* As reply_error: our own codes are not errnos a peer would know. */
    if (err == 0 || err >= NPV_ERROR_BASE)
        err = EINVAL;
    int64_t timeout_ns = timeout_ms < 0 ? -1 : (int64_t)timeout_ms * 1000000;
    if (refuse_conn(fd, (uint32_t)err, timeout_ns))
        npv_info(ctx, "vfio-user server: refused a client: %s", npv_strerror(-err));
    else
        npv_info(ctx, "vfio-user server: closed a client to refuse (%s) before its VERSION came",
                 npv_strerror(-err));
}

/*
 * A second client while one is served: read its VERSION (briefly) and answer
 * it with EBUSY, so it learns at once that the server serves one client at a
 * time instead of waiting out its own timeout. Model choice: refuse rather
 * than queue; the vfio-user spec leaves a second connection to the server.
 */
static void refuse_busy(struct npv_vus *srv)
{
    struct pollfd lp = {.fd = srv->listen_fd, .events = POLLIN};
    if (poll(&lp, 1, 0) <= 0 || !(lp.revents & POLLIN))
        return; /* the client gave up already */
    int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    if (refuse_conn(fd, EBUSY, NPV_VUS_BUSY_RECV_TIMEOUT))
        npv_info(srv->ctx, "vfio-user server: refused a second client: busy, one client at a time");
}

void npv_vus_serve_conn(struct npv_vus *srv)
{
    /* When a second client was first seen waiting; 0: none waits. */
    int64_t waiting_since = 0;
    /*
     * The spec: VERSION comes first. A client that sends nothing is dropped
     * after NPV_VUS_MSG_TIMEOUT (5 s, what our client gives its connect and
     * negotiation by default: dev.c DEFAULT_REQUEST_TIMEOUT_NS): a silent
     * connection would otherwise hold the server (and an owner's slot and
     * domain, serve/client.c) for ever. Model choice.
     */
    int64_t version_by = npv_vu_now_ns() + NPV_VUS_MSG_TIMEOUT;
    for (;;) {
        /*
         * A client waiting on the listening socket gets a short grace period
         * in which the current client can still leave (a process that just
         * closed its device); then it is refused, not left to time out.
         */
        bool watch_listen = srv->listen_fd >= 0 && waiting_since == 0;
        int timeout_ms = -1;
        if (waiting_since != 0) {
            int64_t left = waiting_since + NPV_VUS_BUSY_GRACE - npv_vu_now_ns();
            if (left <= 0) {
                refuse_busy(srv);
                waiting_since = 0;
                continue;
            }
            timeout_ms = (int)(left / 1000000) + 1;
        }
        if (!srv->versioned) {
            int64_t left = version_by - npv_vu_now_ns();
            if (left <= 0) {
                npv_info(srv->ctx, "vfio-user server: dropping client: no VERSION within %lld s",
                         (long long)(NPV_VUS_MSG_TIMEOUT / 1000000000));
                break;
            }
            int ms = (int)(left / 1000000) + 1;
            if (timeout_ms < 0 || ms < timeout_ms)
                timeout_ms = ms;
        }
        struct pollfd p[3] = {
            {.fd = srv->conn_fd, .events = POLLIN},
            {.fd = srv->stop_fd, .events = POLLIN},
            {.fd = srv->listen_fd, .events = POLLIN},
        };
        int r = poll(p, watch_listen ? 3 : 2, timeout_ms);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents & POLLIN)
            break;
        if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            if (watch_listen && (p[2].revents & POLLIN))
                waiting_since = npv_vu_now_ns();
            continue;
        }
        struct npv_vu_msg m;
        size_t max =
            sizeof(struct npv_vu_hdr) + sizeof(struct npv_vu_region_access) + NPV_VUS_MAX_XFER;
        r = npv_vu_recv(srv->conn_fd, &m, max, NPV_VUS_MAX_FDS, NPV_VUS_MSG_TIMEOUT);
        if (r < 0) {
            if (r != -ECONNRESET)
                npv_info(srv->ctx, "vfio-user server: dropping client: %s", npv_strerror(r));
            break;
        }
        r = npv_vus_handle(srv, &m);
        npv_vu_msg_release(&m);
        if (r < 0) {
            npv_info(srv->ctx, "vfio-user server: dropping client: %s", npv_strerror(r));
            break;
        }
    }
    npv_vus_drop_conn(srv);
}

NPV_API int npv_vus_serve_fd(struct npv_vus *srv, int fd)
{
    if (srv == NULL || fd < 0) {
        if (fd >= 0)
            close(fd);
        return -EINVAL;
    }
    if (srv->loop_running || srv->conn_fd >= 0) {
        close(fd);
        return -EBUSY;
    }
    srv->loop_thread = pthread_self();
    srv->loop_running = true;
    npv_vus_set_conn(srv, fd);
    npv_info(srv->ctx, "vfio-user server: serving a client handed over");
    /* Without a listening socket serve_conn watches no second client (nothing to refuse). */
    npv_vus_serve_conn(srv);
    npv_info(srv->ctx, "vfio-user server: client disconnected");
    srv->loop_running = false;
    return 0;
}

NPV_API int npv_vus_run(struct npv_vus *srv, bool once)
{
    int r = 0;
    if (srv->listen_fd < 0)
        return -EINVAL;
    srv->loop_thread = pthread_self();
    srv->loop_running = true;
    for (;;) {
        struct pollfd p[2] = {
            {.fd = srv->listen_fd, .events = POLLIN},
            {.fd = srv->stop_fd, .events = POLLIN},
        };
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            r = -errno;
            break;
        }
        if (p[1].revents & POLLIN)
            break;
        if (!(p[0].revents & POLLIN))
            continue;
        int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED)
                continue;
            r = -errno;
            break;
        }
        npv_vus_set_conn(srv, fd);
        npv_info(srv->ctx, "vfio-user server: client connected");
        npv_vus_serve_conn(srv);
        npv_info(srv->ctx, "vfio-user server: client disconnected");
        if (once)
            break;
    }
    srv->loop_running = false;
    npv_unix_listener_close(&srv->listener);
    srv->listen_fd = -1;
    return r;
}

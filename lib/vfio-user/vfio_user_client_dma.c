/* SPDX-License-Identifier: MIT */
/*
 * A vfio-user connection as an IOMMU: the domain's mappings become DMA_MAP
 * messages carrying the buffer's memfd, and the connection keeps its own
 * table of them so it can serve the server's DMA_READ / DMA_WRITE commands
 * (the protocol's in-band path for memory the server cannot mmap). The
 * table is the bound: the server reaches nothing we did not map, and only
 * in the direction the mapping allows.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/dma.h>

#include "ctx_internal.h"
#include "failpoint_internal.h"
#include "vfio_user_client.h"

static struct vu_client *sink_client(struct npv_iommu_sink *sink)
{
    return sink->priv;
}

/* The smallest page size the server accepts DMA maps in. */
static uint64_t min_page(const struct vu_client *c)
{
    uint64_t p = c->server_caps.pgsizes;
    return p == 0 ? 4096 : p & -p;
}

/* Called with c->lock held. */
static int maps_add(struct vu_client *c, const struct npv_mapping *m)
{
    if (c->nr_maps >= c->server_caps.max_dma_maps)
        return -ENOSPC;
    if (c->nr_maps == c->cap_maps) {
        size_t cap = c->cap_maps ? c->cap_maps * 2 : 16;
        struct vu_mapping *p = npv_fp_realloc(c->dev->ctx, c->maps, cap * sizeof(*p));
        if (p == NULL)
            return -ENOMEM;
        c->maps = p;
        c->cap_maps = cap;
    }
    c->maps[c->nr_maps++] =
        (struct vu_mapping){.iova = m->iova, .len = m->len, .vaddr = m->vaddr, .prot = m->prot};
    return 0;
}

/* Called with c->lock held. */
static void maps_remove(struct vu_client *c, npv_iova_t iova, uint64_t len)
{
    for (size_t i = 0; i < c->nr_maps; i++) {
        if (c->maps[i].iova == iova && c->maps[i].len == len) {
            c->maps[i] = c->maps[--c->nr_maps];
            return;
        }
    }
}

void npv_vu_client_maps_free(struct vu_client *c)
{
    free(c->maps);
    c->maps = NULL;
    c->nr_maps = c->cap_maps = 0;
}

static int sink_map(struct npv_iommu_sink *sink, const struct npv_mapping *m)
{
    struct vu_client *c = sink_client(sink);
    uint64_t pg = min_page(c);
    if (m->len == 0 || m->iova % pg != 0 || m->len % pg != 0 || m->iova > UINT64_MAX - m->len)
        return -EINVAL;
    struct npv_vu_dma_map req = {
        .argsz = sizeof(req),
        .flags = ((m->prot & NPV_DMA_READ) ? NPV_VU_DMA_FLAG_READ : 0) |
                 ((m->prot & NPV_DMA_WRITE) ? NPV_VU_DMA_FLAG_WRITE : 0),
        .offset = m->fd >= 0 ? m->fd_offset : 0,
        .address = m->iova,
        .size = m->len,
    };
    /* In the table first: the server may DMA the moment it has the map. */
    pthread_mutex_lock(&c->lock);
    int ret = maps_add(c, m);
    pthread_mutex_unlock(&c->lock);
    if (ret < 0)
        return ret;
    ret = npv_vu_client_call(c, NPV_VU_CMD_DMA_MAP, &req, sizeof(req), m->fd >= 0 ? &m->fd : NULL,
                             m->fd >= 0 ? 1 : 0, NULL);
    if (ret < 0) {
        pthread_mutex_lock(&c->lock);
        maps_remove(c, m->iova, m->len);
        pthread_mutex_unlock(&c->lock);
        npv_debug(c->dev->ctx, "%s: DMA_MAP %#llx+%#llx: %s", c->dev->name,
                  (unsigned long long)m->iova, (unsigned long long)m->len, npv_strerror(ret));
    }
    return ret;
}

static int sink_unmap(struct npv_iommu_sink *sink, const struct npv_mapping *m)
{
    struct vu_client *c = sink_client(sink);
    /* Out of the table first: from here on the server's DMA_READ/WRITE there are refused. */
    pthread_mutex_lock(&c->lock);
    maps_remove(c, m->iova, m->len);
    pthread_mutex_unlock(&c->lock);
    struct npv_vu_dma_unmap req = {.argsz = sizeof(req), .address = m->iova, .size = m->len};
    struct npv_vu_msg rep;
    int ret = npv_vu_client_call(c, NPV_VU_CMD_DMA_UNMAP, &req, sizeof(req), NULL, 0, &rep);
    if (ret < 0)
        return ret;
    /* The reply is empty or echoes the entry. */
    if (rep.nr_fds != 0 || (rep.body_len != 0 && rep.body_len != sizeof(req)))
        ret = -NPV_EPEERPROTO;
    npv_vu_msg_release(&rep);
    return ret;
}

static const struct npv_iommu_sink_ops vu_sink_ops = {
    .name = "vfio-user connection",
    .map = sink_map,
    .unmap = sink_unmap,
};

void npv_vu_client_sink_init(struct vu_client *c)
{
    c->sink.ops = &vu_sink_ops;
    c->sink.priv = c;
    c->sink.ranges = NULL;
    c->sink.nr_ranges = 0;
    /* The server reaches our memory through shared pages: as coherent as the CPU. */
    c->sink.coherent = -1;
    /* Pages it maps from the fd of each DMA_MAP: the domain refuses memory without one. */
    c->sink.shares_by_fd = true;
}

/* Called with c->lock held. The mapping holding [iova, iova+len) with prot, or NULL. */
static const struct vu_mapping *maps_find(const struct vu_client *c, uint64_t iova, uint64_t len,
                                          unsigned prot)
{
    for (size_t i = 0; i < c->nr_maps; i++) {
        const struct vu_mapping *m = &c->maps[i];
        if (iova >= m->iova && iova - m->iova <= m->len && len <= m->len - (iova - m->iova))
            return (m->prot & prot) == prot ? m : NULL;
    }
    return NULL;
}

static void send_reply(struct vu_client *c, const struct npv_vu_msg *req, const struct iovec *iov,
                       unsigned iovcnt)
{
    struct npv_vu_hdr h = {
        .msg_id = req->hdr.msg_id, .cmd = req->hdr.cmd, .flags = NPV_VU_F_TYPE_REPLY};
    pthread_mutex_lock(c->dma_send_lock);
    int ret = npv_fp_send_result(c->dev->ctx);
    if (ret == 0)
        ret = npv_vu_sendv(c->dma_sock, &h, iov, iovcnt, NULL, 0,
                           (int64_t)(c->dev->request_timeout_ns > INT64_MAX
                                         ? INT64_MAX
                                         : c->dev->request_timeout_ns));
    pthread_mutex_unlock(c->dma_send_lock);
    if (ret < 0)
        npv_vu_client_kill(c, -ENOTCONN);
}

static void send_error(struct vu_client *c, const struct npv_vu_msg *req, int err)
{
    if (req->hdr.flags & NPV_VU_F_NO_REPLY)
        return;
    pthread_mutex_lock(c->dma_send_lock);
    int ret = npv_vu_send_error(
        c->dma_sock, req->hdr.msg_id, req->hdr.cmd, (uint32_t)err,
        (int64_t)(c->dev->request_timeout_ns > INT64_MAX ? INT64_MAX : c->dev->request_timeout_ns));
    pthread_mutex_unlock(c->dma_send_lock);
    if (ret < 0)
        npv_vu_client_kill(c, -ENOTCONN);
}

static void serve_read(struct vu_client *c, const struct npv_vu_msg *m, struct npv_vu_dma_access a)
{
    /* Bounded by what we advertised, as is a DMA_WRITE: the server's own limit is for our requests.
     */
    if (m->body_len != sizeof(a) || a.count > NPV_VU_CLIENT_MAX_XFER) {
        send_error(c, m, EINVAL);
        return;
    }
    uint8_t *data = npv_fp_malloc(c->dev->ctx, a.count ? a.count : 1);
    if (data == NULL) {
        send_error(c, m, ENOMEM);
        return;
    }
    pthread_mutex_lock(&c->lock);
    const struct vu_mapping *map = maps_find(c, a.address, a.count, NPV_DMA_READ);
    if (map != NULL)
        memcpy(data, (const uint8_t *)map->vaddr + (a.address - map->iova), a.count);
    pthread_mutex_unlock(&c->lock);
    if (map == NULL) {
        npv_debug(c->dev->ctx, "%s: refused DMA_READ %#llx+%#llx", c->dev->name,
                  (unsigned long long)a.address, (unsigned long long)a.count);
        send_error(c, m, EFAULT);
    } else if (!(m->hdr.flags & NPV_VU_F_NO_REPLY)) {
        struct iovec iov[2] = {{.iov_base = &a, .iov_len = sizeof(a)},
                               {.iov_base = data, .iov_len = a.count}};
        send_reply(c, m, iov, 2);
    }
    free(data);
}

static void serve_write(struct vu_client *c, const struct npv_vu_msg *m, struct npv_vu_dma_access a)
{
    if (a.count > NPV_VU_CLIENT_MAX_XFER || m->body_len != sizeof(a) + a.count) {
        send_error(c, m, EINVAL);
        return;
    }
    pthread_mutex_lock(&c->lock);
    const struct vu_mapping *map = maps_find(c, a.address, a.count, NPV_DMA_WRITE);
    if (map != NULL)
        memcpy((uint8_t *)map->vaddr + (a.address - map->iova), m->body + sizeof(a), a.count);
    pthread_mutex_unlock(&c->lock);
    if (map == NULL) {
        npv_debug(c->dev->ctx, "%s: refused DMA_WRITE %#llx+%#llx", c->dev->name,
                  (unsigned long long)a.address, (unsigned long long)a.count);
        send_error(c, m, EFAULT);
    } else if (!(m->hdr.flags & NPV_VU_F_NO_REPLY)) {
        struct iovec iov = {.iov_base = &a, .iov_len = sizeof(a)};
        send_reply(c, m, &iov, 1);
    }
}

void npv_vu_client_serve_dma(struct vu_client *c, const struct npv_vu_msg *m)
{
    struct npv_vu_dma_access a;
    if (m->body_len < sizeof(a) || m->nr_fds != 0) {
        send_error(c, m, EINVAL);
        return;
    }
    memcpy(&a, m->body, sizeof(a));
    if (m->hdr.cmd == NPV_VU_CMD_DMA_READ)
        serve_read(c, m, a);
    else
        serve_write(c, m, a);
}

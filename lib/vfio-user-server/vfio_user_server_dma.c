/* SPDX-License-Identifier: MIT */
/*
 * The server's view of the client's IOMMU: the DMA_MAP table (sorted,
 * non-overlapping, binary-searched), the client memory mmapped from the fds
 * it passed, and message DMA (DMA_READ/DMA_WRITE) for mappings without fd.
 *
 * A range the table does not cover is what an IOMMU would fault on: the
 * model gets -EFAULT and reports its own device fault.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctx_internal.h"
#include "vfio_user_server_internal.h"

#define DMA_MSG_TIMEOUT (5ll * 1000000000ll)

/* Index of the first mapping whose end is above iova (the only one that can hold iova). */
static size_t lower_bound(const struct npv_vus *srv, uint64_t iova)
{
    size_t lo = 0, hi = srv->nr_maps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct npv_vus_mapping *mp = &srv->maps[mid];
        if (mp->iova + (mp->size - 1) < iova)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static const struct npv_vus_mapping *find(const struct npv_vus *srv, uint64_t iova, uint64_t len)
{
    if (len == 0 || iova + (len - 1) < iova)
        return NULL;
    size_t i = lower_bound(srv, iova);
    if (i >= srv->nr_maps)
        return NULL;
    const struct npv_vus_mapping *mp = &srv->maps[i];
    /* The whole range in this one mapping: a range spanning two maps is refused too. */
    if (iova < mp->iova || iova - mp->iova > mp->size - 1 || len > mp->size - (iova - mp->iova))
        return NULL;
    return mp;
}

/* Under the write lock. Readers inside a begin/end section see it stable. */
static void dma_gen_bump(struct npv_vus *srv)
{
    __atomic_store_n(&srv->dma_gen, srv->dma_gen + 1, __ATOMIC_RELEASE);
}

static_assert(NPV_VUS_DMA_READ == NPV_VU_DMA_FLAG_READ &&
                  NPV_VUS_DMA_WRITE == NPV_VU_DMA_FLAG_WRITE,
              "the public prot bits are the protocol's DMA_MAP flags");

/* The model's dma_unmap (for a mapping its dma_map took), then our own mmap goes. */
static void unmap_one(struct npv_vus *srv, const struct npv_vus_mapping *mp)
{
    if (mp->accepted && srv->cfg.dma_unmap != NULL)
        srv->cfg.dma_unmap(srv->cfg.arg, mp->iova, mp->size);
    if (mp->addr != NULL)
        munmap(mp->addr, (size_t)mp->size);
}

/* Take the mapping at exactly [iova, iova+size) out of the table into *out. */
static bool table_remove(struct npv_vus *srv, uint64_t iova, uint64_t size,
                         struct npv_vus_mapping *out)
{
    bool found = false;
    pthread_rwlock_wrlock(&srv->dma_lock);
    size_t i = lower_bound(srv, iova);
    if (i < srv->nr_maps && srv->maps[i].iova == iova && srv->maps[i].size == size) {
        *out = srv->maps[i];
        memmove(&srv->maps[i], &srv->maps[i + 1], (srv->nr_maps - i - 1) * sizeof(srv->maps[0]));
        srv->nr_maps--;
        dma_gen_bump(srv);
        found = true;
    }
    pthread_rwlock_unlock(&srv->dma_lock);
    return found;
}

/*
 * The model's say on a mapping already in the table: accepted, it is marked
 * so (its dma_unmap will come); refused, it leaves the table again and our
 * mmap goes, so only the generation (bumped twice) shows it was there, and a
 * pointer a model DMA thread took meanwhile is stale by that rule. The entry
 * cannot move under us: only this thread (the event loop) changes the table.
 * Returns 0 or the positive errno for the client.
 */
static int model_accepts(struct npv_vus *srv, const struct npv_vu_dma_map *d, void *addr, int fd)
{
    int r = 0;
    if (srv->cfg.dma_map != NULL)
        r = srv->cfg.dma_map(srv->cfg.arg, d->address, d->size,
                             d->flags & (NPV_VUS_DMA_READ | NPV_VUS_DMA_WRITE), addr, fd,
                             fd >= 0 ? d->offset : 0);
    if (r == 0) {
        pthread_rwlock_wrlock(&srv->dma_lock);
        srv->maps[lower_bound(srv, d->address)].accepted = true;
        pthread_rwlock_unlock(&srv->dma_lock);
        return 0;
    }
    int err = r < 0 ? -r : r;
    npv_debug(srv->ctx,
              "vfio-user server: DMA_MAP iova 0x%llx size 0x%llx refused by the model: %s",
              (unsigned long long)d->address, (unsigned long long)d->size, npv_strerror(-err));
    struct npv_vus_mapping mp;
    if (table_remove(srv, d->address, d->size, &mp))
        unmap_one(srv, &mp); /* not accepted: our mmap only */
    return err;
}

int npv_vus_handle_dma_map(struct npv_vus *srv, struct npv_vu_msg *m)
{
    struct npv_vu_dma_map d;
    void *addr = NULL;
    int r;

    if (m->body_len < sizeof(d))
        return EINVAL;
    memcpy(&d, m->body, sizeof(d));
    if (d.argsz < sizeof(d) || (d.flags & ~(NPV_VU_DMA_FLAG_READ | NPV_VU_DMA_FLAG_WRITE)) ||
        d.size == 0 || d.address + (d.size - 1) < d.address)
        return EINVAL;
    if (m->nr_fds == 0 && d.offset != 0)
        return EINVAL;

    pthread_rwlock_wrlock(&srv->dma_lock);
    size_t i = lower_bound(srv, d.address);
    if (i < srv->nr_maps && srv->maps[i].iova <= d.address + (d.size - 1)) {
        r = EEXIST; /* the spec: mapping over an existing region fails with EEXIST */
        goto out;
    }
    if (srv->nr_maps >= NPV_VUS_MAX_DMA_MAPS || srv->nr_maps >= srv->peer.max_dma_maps) {
        r = ENOSPC;
        goto out;
    }
    if (srv->nr_maps == srv->cap_maps) {
        size_t cap = srv->cap_maps ? srv->cap_maps * 2 : 16;
        struct npv_vus_mapping *n = realloc(srv->maps, cap * sizeof(*n));
        if (n == NULL) {
            r = ENOMEM;
            goto out;
        }
        srv->maps = n;
        srv->cap_maps = cap;
    }
    if (m->nr_fds == 1) {
        int prot = 0;
        if (d.flags & NPV_VU_DMA_FLAG_READ)
            prot |= PROT_READ;
        if (d.flags & NPV_VU_DMA_FLAG_WRITE)
            prot |= PROT_WRITE | PROT_READ;
        if ((d.offset & 4095) != 0 || d.size > (uint64_t)SIZE_MAX || d.offset > INT64_MAX ||
            d.size > (uint64_t)INT64_MAX - d.offset) {
            r = EINVAL;
            goto out;
        }
        /*
         * mmap(2) maps past a file's end, and a touch there is SIGBUS: a
         * client mapping more than its file holds would kill this process
         * (and an owner's device with it) at the first DMA. A regular file
         * (memfd, shmem, hugetlbfs, a disk file) must cover the range.
         */
        struct stat st;
        if (fstat(m->fds[0], &st) != 0) {
            r = errno;
            goto out;
        }
        if (S_ISREG(st.st_mode) && (st.st_size < 0 || d.offset + d.size > (uint64_t)st.st_size)) {
            npv_debug(srv->ctx,
                      "vfio-user server: DMA_MAP iova 0x%llx size 0x%llx at offset 0x%llx of a "
                      "file of 0x%llx bytes: past its end",
                      (unsigned long long)d.address, (unsigned long long)d.size,
                      (unsigned long long)d.offset, (unsigned long long)st.st_size);
            r = EINVAL;
            goto out;
        }
        addr = mmap(NULL, (size_t)d.size, prot ? prot : PROT_NONE, MAP_SHARED, m->fds[0],
                    (off_t)d.offset);
        if (addr == MAP_FAILED) {
            r = errno;
            goto out;
        }
        /* The mapping keeps the memory; the fd is closed with the message. */
    }
    memmove(&srv->maps[i + 1], &srv->maps[i], (srv->nr_maps - i) * sizeof(srv->maps[0]));
    srv->maps[i] = (struct npv_vus_mapping){
        .iova = d.address, .size = d.size, .prot = d.flags, .addr = addr, .accepted = false};
    srv->nr_maps++;
    dma_gen_bump(srv);
    r = 0;
out:
    pthread_rwlock_unlock(&srv->dma_lock);
    if (r != 0)
        return r;
    r = model_accepts(srv, &d, addr, m->nr_fds == 1 ? m->fds[0] : -1);
    if (r != 0)
        return r;
    npv_debug(srv->ctx, "vfio-user server: DMA_MAP iova 0x%llx size 0x%llx%s",
              (unsigned long long)d.address, (unsigned long long)d.size,
              addr ? "" : " (message DMA)");
    return npv_vus_reply(srv, m, NULL, 0, NULL, 0);
}

int npv_vus_handle_dma_unmap(struct npv_vus *srv, struct npv_vu_msg *m)
{
    struct npv_vu_dma_unmap d;

    if (m->body_len < sizeof(d))
        return EINVAL;
    memcpy(&d, m->body, sizeof(d));
    if (d.argsz < sizeof(d))
        return EINVAL;
    if (d.flags == NPV_VU_DMA_UNMAP_FLAG_ALL) {
        /* As VFIO_DMA_UNMAP_FLAG_ALL in the kernel: address and size 0, every mapping goes. */
        if (d.address != 0 || d.size != 0)
            return EINVAL;
        npv_vus_dma_unmap_all(srv);
        npv_debug(srv->ctx, "vfio-user server: DMA_UNMAP all");
        return npv_vus_reply(srv, m, &d, sizeof(d), NULL, 0);
    }
    /* Dirty-page logging is not implemented: refused as such, not as a malformed request. */
    if (d.flags == NPV_VU_DMA_UNMAP_FLAG_GET_DIRTY_BITMAP)
        return ENOTSUP;
    if (d.flags != 0 || d.size == 0)
        return EINVAL;
    /*
     * Taking the write lock waits for the model's DMA sections, and the
     * model's dma_unmap for its own use: no reference survives the reply.
     */
    struct npv_vus_mapping mp;
    if (!table_remove(srv, d.address, d.size, &mp))
        return ENOENT; /* the spec: an unmap matches a map exactly */
    unmap_one(srv, &mp);
    d.argsz = sizeof(d);
    return npv_vus_reply(srv, m, &d, sizeof(d), NULL, 0);
}

void npv_vus_dma_unmap_all(struct npv_vus *srv)
{
    /*
     * The whole table leaves at once under the lock; the model's dma_unmap
     * calls and our munmaps follow without it (the model may wait in them).
     */
    pthread_rwlock_wrlock(&srv->dma_lock);
    struct npv_vus_mapping *maps = srv->maps;
    size_t n = srv->nr_maps;
    srv->maps = NULL;
    srv->nr_maps = srv->cap_maps = 0;
    dma_gen_bump(srv);
    pthread_rwlock_unlock(&srv->dma_lock);
    for (size_t i = 0; i < n; i++)
        unmap_one(srv, &maps[i]);
    free(maps);
}

NPV_API void npv_vus_dma_begin(struct npv_vus *srv)
{
    pthread_rwlock_rdlock(&srv->dma_lock);
}

NPV_API void npv_vus_dma_end(struct npv_vus *srv)
{
    pthread_rwlock_unlock(&srv->dma_lock);
}

NPV_API uint64_t npv_vus_dma_generation(struct npv_vus *srv)
{
    return __atomic_load_n(&srv->dma_gen, __ATOMIC_ACQUIRE);
}

NPV_API size_t npv_vus_dma_count(struct npv_vus *srv)
{
    pthread_rwlock_rdlock(&srv->dma_lock);
    size_t n = srv->nr_maps;
    pthread_rwlock_unlock(&srv->dma_lock);
    return n;
}

NPV_API int npv_vus_dma_ptr(struct npv_vus *srv, npv_iova_t iova, uint64_t len, unsigned prot,
                            void **ptr)
{
    const struct npv_vus_mapping *mp = find(srv, iova, len);
    if (mp == NULL || (mp->prot & prot) != prot)
        return -EFAULT;
    if (mp->addr == NULL)
        return -ENOTSUP;
    *ptr = (uint8_t *)mp->addr + (iova - mp->iova);
    return 0;
}

void npv_vus_dma_reply(struct npv_vus *srv, struct npv_vu_msg *m)
{
    pthread_mutex_lock(&srv->wait_lock);
    if (srv->waiting && !srv->wait_done && m->hdr.msg_id == srv->wait_id &&
        m->hdr.cmd == srv->wait_cmd) {
        srv->wait_reply = *m;
        npv_vu_msg_init(m); /* ownership moved to the waiter */
        srv->wait_done = true;
        srv->wait_err = 0;
        pthread_cond_broadcast(&srv->wait_cond);
    }
    pthread_mutex_unlock(&srv->wait_lock);
}

void npv_vus_dma_abort_wait(struct npv_vus *srv)
{
    pthread_mutex_lock(&srv->wait_lock);
    if (srv->waiting && !srv->wait_done) {
        srv->wait_done = true;
        srv->wait_err = -ENOTCONN;
        pthread_cond_broadcast(&srv->wait_cond);
    }
    pthread_mutex_unlock(&srv->wait_lock);
}

/* Check the client's reply to one DMA_READ/WRITE and take the data of a read. */
static int take_dma_reply(const struct npv_vu_msg *rep, uint16_t cmd, uint64_t iova, void *buf,
                          uint64_t len)
{
    struct npv_vu_dma_access ra;
    if (rep->hdr.flags & NPV_VU_F_ERROR)
        return -EFAULT; /* the client refused: the IOMMU fault the model reports */
    if (rep->nr_fds != 0 || rep->body_len < 12)
        return -NPV_EPEERPROTO;
    memset(&ra, 0, sizeof(ra));
    memcpy(&ra, rep->body, rep->body_len < sizeof(ra) ? rep->body_len : sizeof(ra));
    if (ra.address != iova)
        return -NPV_EPEERPROTO;
    if (cmd == NPV_VU_CMD_DMA_READ) {
        if (rep->body_len != sizeof(ra) + len || ra.count != len)
            return -NPV_EPEERPROTO;
        memcpy(buf, rep->body + sizeof(ra), (size_t)len);
    }
    return 0;
}

/*
 * Twin sockets: the second socket carries nothing but our commands and their
 * replies, one at a time (dma_msg_lock), so the requester reads its reply
 * itself. Anything else there, or no reply in time, leaves the stream in an
 * unknown state: the client is dropped.
 */
static int dma_msg_twin(struct npv_vus *srv, struct npv_vu_hdr *h, const struct iovec *iov,
                        unsigned iovcnt, void *buf, uint64_t len, uint64_t iova)
{
    int r = npv_vu_sendv(srv->twin_fd, h, iov, iovcnt, NULL, 0, DMA_MSG_TIMEOUT);
    struct npv_vu_msg rep;
    npv_vu_msg_init(&rep);
    if (r == 0) {
        size_t max =
            sizeof(struct npv_vu_hdr) + sizeof(struct npv_vu_dma_access) + NPV_VUS_MAX_XFER;
        r = npv_vu_recv(srv->twin_fd, &rep, max, 0, DMA_MSG_TIMEOUT);
    }
    if (r == 0 && ((rep.hdr.flags & NPV_VU_F_TYPE_MASK) != NPV_VU_F_TYPE_REPLY ||
                   rep.hdr.msg_id != h->msg_id || rep.hdr.cmd != h->cmd))
        r = -NPV_EPEERPROTO;
    if (r == 0)
        r = take_dma_reply(&rep, h->cmd, iova, buf, len);
    npv_vu_msg_release(&rep);
    if (r < 0 && r != -EFAULT) {
        npv_info(srv->ctx, "vfio-user server: twin socket: %s; dropping client", npv_strerror(r));
        npv_vus_disconnect(srv);
        if (r == -ECONNRESET || r == -EPIPE)
            r = -ENOTCONN;
    }
    return r;
}

/* One DMA_READ or DMA_WRITE round trip of at most the client's max_data_xfer_size. */
static int dma_msg_chunk(struct npv_vus *srv, uint64_t conn_gen, uint16_t cmd, uint64_t iova,
                         void *buf, uint64_t len)
{
    struct npv_vu_dma_access a = {.address = iova, .count = len};
    struct iovec iov[2] = {{.iov_base = &a, .iov_len = sizeof(a)},
                           {.iov_base = buf, .iov_len = (size_t)len}};
    unsigned iovcnt = cmd == NPV_VU_CMD_DMA_WRITE ? 2 : 1;
    int r;

    pthread_mutex_lock(&srv->wait_lock);
    uint16_t id = srv->next_msg_id++;
    if (srv->twin_fd < 0) {
        srv->waiting = true;
        srv->wait_done = false;
        srv->wait_id = id;
        srv->wait_cmd = cmd;
        npv_vu_msg_release(&srv->wait_reply);
    }
    pthread_mutex_unlock(&srv->wait_lock);

    struct npv_vu_hdr h = {.msg_id = id, .cmd = cmd, .flags = NPV_VU_F_TYPE_COMMAND};
    if (srv->twin_fd >= 0)
        return dma_msg_twin(srv, &h, iov, iovcnt, buf, len, iova);

    /* One socket: the event loop reads the reply among the client's requests and hands it over. */
    r = npv_vus_send_to(srv, conn_gen, &h, iov, iovcnt, NULL, 0);
    pthread_mutex_lock(&srv->wait_lock);
    if (r == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t ns = ts.tv_nsec + DMA_MSG_TIMEOUT;
        ts.tv_sec += ns / 1000000000;
        ts.tv_nsec = ns % 1000000000;
        while (!srv->wait_done && r == 0)
            if (pthread_cond_timedwait(&srv->wait_cond, &srv->wait_lock, &ts) == ETIMEDOUT)
                r = -ETIMEDOUT;
        if (r == 0)
            r = srv->wait_err;
    }
    if (r == 0)
        r = take_dma_reply(&srv->wait_reply, cmd, iova, buf, len);
    srv->waiting = false;
    npv_vu_msg_release(&srv->wait_reply);
    pthread_mutex_unlock(&srv->wait_lock);
    return r;
}

static int dma_msg(struct npv_vus *srv, uint64_t conn_gen, uint16_t cmd, uint64_t iova, void *buf,
                   uint64_t len)
{
    if (srv->loop_running && pthread_equal(pthread_self(), srv->loop_thread))
        return -EDEADLK; /* the loop thread is the one that would read the reply */
    /* The client's limit bounds what we send; ours bounds the DMA_READ reply we receive. */
    uint64_t max = __atomic_load_n(&srv->peer_max_xfer, __ATOMIC_RELAXED);
    if (max > NPV_VUS_MAX_XFER)
        max = NPV_VUS_MAX_XFER;
    if (max == 0)
        return -EINVAL;
    pthread_mutex_lock(&srv->dma_msg_lock);
    /* twin_fd cannot change while we hold dma_msg_lock; a later client's would be its own. */
    int r = conn_gen == atomic_load(&srv->conn_gen) ? 0 : -ENOTCONN;
    for (uint64_t done = 0; done < len && r == 0;) {
        uint64_t n = len - done < max ? len - done : max;
        r = dma_msg_chunk(srv, conn_gen, cmd, iova + done, (uint8_t *)buf + done, n);
        done += n;
    }
    pthread_mutex_unlock(&srv->dma_msg_lock);
    return r;
}

static int dma_copy(struct npv_vus *srv, npv_iova_t iova, void *buf, uint64_t len, bool write)
{
    if (len == 0)
        return 0;
    unsigned prot = write ? NPV_VU_DMA_FLAG_WRITE : NPV_VU_DMA_FLAG_READ;
    npv_vus_dma_begin(srv);
    const struct npv_vus_mapping *mp = find(srv, iova, len);
    if (mp == NULL || (mp->prot & prot) != prot) {
        npv_vus_dma_end(srv);
        return -EFAULT;
    }
    if (mp->addr != NULL) {
        uint8_t *p = (uint8_t *)mp->addr + (iova - mp->iova);
        if (write)
            memcpy(p, buf, (size_t)len);
        else
            memcpy(buf, p, (size_t)len);
        npv_vus_dma_end(srv);
        return 0;
    }
    /*
     * The mapping is the current client's while we hold the lock (a dropped
     * client's are unmapped before the next is accepted), so is this generation.
     */
    uint64_t conn_gen = atomic_load(&srv->conn_gen);
    /* Not under the lock: the client's unmap must not wait for our round trip. */
    npv_vus_dma_end(srv);
    return dma_msg(srv, conn_gen, write ? NPV_VU_CMD_DMA_WRITE : NPV_VU_CMD_DMA_READ, iova, buf,
                   len);
}

NPV_API int npv_vus_dma_read(struct npv_vus *srv, npv_iova_t iova, void *buf, uint64_t len)
{
    return dma_copy(srv, iova, buf, len, false);
}

NPV_API int npv_vus_dma_write(struct npv_vus *srv, npv_iova_t iova, const void *buf, uint64_t len)
{
    return dma_copy(srv, iova, (void *)buf, len, true);
}

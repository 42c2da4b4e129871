/* SPDX-License-Identifier: MIT */
/*
 * Server-side interrupts: the client's eventfds per vector (SET_IRQS), mask
 * and pending state, and the MSI-X table and PBA the framework emulates in
 * the MSI-X BAR.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctx_internal.h"
#include "vfio_user_server_internal.h"

int npv_vus_irq_init(struct npv_vus *srv)
{
    srv->irq_count[NPV_VU_PCI_INTX_IRQ] = 1;
    srv->irq_count[NPV_VU_PCI_MSI_IRQ] = 0;
    srv->irq_count[NPV_VU_PCI_MSIX_IRQ] = srv->cfg.msix_vectors;
    srv->irq_count[NPV_VU_PCI_ERR_IRQ] = 1;
    srv->irq_count[NPV_VU_PCI_REQ_IRQ] = 1;
    for (unsigned i = 0; i < NPV_VU_PCI_NUM_IRQS; i++) {
        if (srv->irq_count[i] == 0)
            continue;
        srv->irqs[i] = calloc(srv->irq_count[i], sizeof(*srv->irqs[i]));
        if (srv->irqs[i] == NULL)
            goto err;
        for (uint32_t v = 0; v < srv->irq_count[i]; v++)
            srv->irqs[i][v].fd = -1;
    }
    if (srv->cfg.msix_vectors > 0) {
        srv->msix_table = calloc(srv->cfg.msix_vectors, 16);
        if (srv->msix_table == NULL)
            goto err;
    }
    return 0;
err:
    npv_vus_irq_fini(srv);
    return -ENOMEM;
}

void npv_vus_irq_fini(struct npv_vus *srv)
{
    npv_vus_irq_close_all(srv);
    for (unsigned i = 0; i < NPV_VU_PCI_NUM_IRQS; i++) {
        free(srv->irqs[i]);
        srv->irqs[i] = NULL;
    }
    free(srv->msix_table);
    srv->msix_table = NULL;
}

void npv_vus_irq_close_all(struct npv_vus *srv)
{
    pthread_mutex_lock(&srv->irq_lock);
    for (unsigned i = 0; i < NPV_VU_PCI_NUM_IRQS; i++) {
        for (uint32_t v = 0; srv->irqs[i] != NULL && v < srv->irq_count[i]; v++) {
            struct npv_vus_irq_vec *x = &srv->irqs[i][v];
            if (x->fd >= 0)
                close(x->fd);
            x->fd = -1;
            x->masked = false;
            x->pending = false;
        }
    }
    pthread_mutex_unlock(&srv->irq_lock);
}

int npv_vus_handle_irq_info(struct npv_vus *srv, struct npv_vu_msg *m)
{
    struct npv_vu_irq_info in;
    if (m->body_len < sizeof(in))
        return EINVAL;
    memcpy(&in, m->body, sizeof(in));
    if (in.argsz < sizeof(in) || in.index >= NPV_VU_PCI_NUM_IRQS)
        return EINVAL;
    struct npv_vu_irq_info out = {
        .argsz = sizeof(out),
        .flags = NPV_VU_IRQ_INFO_EVENTFD,
        .index = in.index,
        .count = srv->irq_count[in.index],
    };
    if (in.index == NPV_VU_PCI_MSIX_IRQ || in.index == NPV_VU_PCI_MSI_IRQ)
        out.flags |= NPV_VU_IRQ_INFO_MASKABLE | NPV_VU_IRQ_INFO_NORESIZE;
    else if (in.index == NPV_VU_PCI_INTX_IRQ)
        out.flags |= NPV_VU_IRQ_INFO_MASKABLE | NPV_VU_IRQ_INFO_AUTOMASKED;
    return npv_vus_reply(srv, m, &out, sizeof(out), NULL, 0);
}

/* An interrupt fd must be an eventfd: writing 8 bytes to anything else is not our business. */
static bool is_eventfd(int fd)
{
    char path[64], link[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, link, sizeof(link) - 1);
    if (n < 0)
        return false;
    link[n] = '\0';
    return strcmp(link, "anon_inode:[eventfd]") == 0;
}

static void signal_fd(int fd)
{
    uint64_t one = 1;
    ssize_t n = write(fd, &one, sizeof(one));
    (void)n; /* a full counter (2^64-2 unread events) loses this one, as a level would */
}

static bool msix_vector_masked(struct npv_vus *srv, uint32_t index, uint32_t vec)
{
    if (index != NPV_VU_PCI_MSIX_IRQ || srv->msix_table == NULL)
        return false;
    uint32_t ctl;
    memcpy(&ctl, srv->msix_table + 16u * vec + 12, 4);
    return (ctl & 1u) || npv_pci_config_msix_masked(&srv->pci);
}

/* Deliver pending vectors that are no longer masked. Under irq_lock. */
static void deliver_pending(struct npv_vus *srv, uint32_t index, uint32_t vec)
{
    struct npv_vus_irq_vec *x = &srv->irqs[index][vec];
    if (x->pending && !x->masked && !msix_vector_masked(srv, index, vec) && x->fd >= 0) {
        x->pending = false;
        signal_fd(x->fd);
    }
}

static int set_irqs_eventfd(struct npv_vus *srv, const struct npv_vu_irq_set *s,
                            struct npv_vu_msg *m)
{
    if (!(s->flags & NPV_VU_IRQ_SET_ACTION_TRIGGER))
        return ENOTSUP; /* mask/unmask notification eventfds are not offered */
    if (m->nr_fds != 0 && m->nr_fds != s->count)
        return EINVAL;
    for (unsigned i = 0; i < m->nr_fds; i++)
        if (!is_eventfd(m->fds[i]))
            return EINVAL;
    pthread_mutex_lock(&srv->irq_lock);
    for (uint32_t i = 0; i < s->count; i++) {
        struct npv_vus_irq_vec *x = &srv->irqs[s->index][s->start + i];
        if (x->fd >= 0)
            close(x->fd);
        x->fd = m->nr_fds ? npv_vu_msg_take_fd(m, i) : -1;
        if (x->fd >= 0)
            deliver_pending(srv, s->index, s->start + i);
    }
    pthread_mutex_unlock(&srv->irq_lock);
    return 0;
}

static int set_irqs_action(struct npv_vus *srv, const struct npv_vu_irq_set *s,
                           const uint8_t *bools)
{
    pthread_mutex_lock(&srv->irq_lock);
    for (uint32_t i = 0; i < s->count; i++) {
        if (bools != NULL && !bools[i])
            continue;
        uint32_t v = s->start + i;
        struct npv_vus_irq_vec *x = &srv->irqs[s->index][v];
        if (s->flags & NPV_VU_IRQ_SET_ACTION_MASK) {
            x->masked = true;
        } else if (s->flags & NPV_VU_IRQ_SET_ACTION_UNMASK) {
            x->masked = false;
            deliver_pending(srv, s->index, v);
        } else {
            x->pending = true;
            deliver_pending(srv, s->index, v);
        }
    }
    pthread_mutex_unlock(&srv->irq_lock);
    return 0;
}

int npv_vus_handle_set_irqs(struct npv_vus *srv, struct npv_vu_msg *m)
{
    struct npv_vu_irq_set s;
    if (m->body_len < sizeof(s))
        return EINVAL;
    memcpy(&s, m->body, sizeof(s));
    if (s.argsz < sizeof(s) || s.argsz > m->body_len || s.index >= NPV_VU_PCI_NUM_IRQS)
        return EINVAL;
    uint32_t data = s.flags & NPV_VU_IRQ_SET_DATA_MASK;
    uint32_t action = s.flags & NPV_VU_IRQ_SET_ACTION_MASK_ALL;
    /* Exactly one data type and one action, nothing else. */
    if ((s.flags & ~(NPV_VU_IRQ_SET_DATA_MASK | NPV_VU_IRQ_SET_ACTION_MASK_ALL)) ||
        __builtin_popcount(data) != 1 || __builtin_popcount(action) != 1)
        return EINVAL;
    if (data != NPV_VU_IRQ_SET_DATA_EVENTFD && m->nr_fds != 0)
        return EINVAL;

    /* count 0 + DATA_NONE + TRIGGER: disable every vector of the index. */
    if (s.count == 0) {
        if (data != NPV_VU_IRQ_SET_DATA_NONE || action != NPV_VU_IRQ_SET_ACTION_TRIGGER ||
            s.start != 0)
            return EINVAL;
        pthread_mutex_lock(&srv->irq_lock);
        for (uint32_t v = 0; v < srv->irq_count[s.index]; v++) {
            struct npv_vus_irq_vec *x = &srv->irqs[s.index][v];
            if (x->fd >= 0)
                close(x->fd);
            x->fd = -1;
            x->pending = false;
        }
        pthread_mutex_unlock(&srv->irq_lock);
        return npv_vus_reply(srv, m, NULL, 0, NULL, 0);
    }
    if ((uint64_t)s.start + s.count > srv->irq_count[s.index])
        return EINVAL;
    int r;
    if (data == NPV_VU_IRQ_SET_DATA_EVENTFD) {
        r = set_irqs_eventfd(srv, &s, m);
    } else {
        const uint8_t *bools = NULL;
        if (data == NPV_VU_IRQ_SET_DATA_BOOL) {
            if (s.argsz - sizeof(s) < s.count)
                return EINVAL;
            bools = m->body + sizeof(s);
        }
        r = set_irqs_action(srv, &s, bools);
    }
    if (r != 0)
        return r;
    return npv_vus_reply(srv, m, NULL, 0, NULL, 0);
}

NPV_API int npv_vus_irq_raise(struct npv_vus *srv, uint32_t index, uint32_t vec)
{
    if (index >= NPV_VU_PCI_NUM_IRQS || vec >= srv->irq_count[index])
        return -EINVAL;
    pthread_mutex_lock(&srv->irq_lock);
    /* Without an eventfd the vector is disabled: the message is lost, not held. */
    if (srv->irqs[index][vec].fd >= 0) {
        srv->irqs[index][vec].pending = true;
        deliver_pending(srv, index, vec);
    }
    pthread_mutex_unlock(&srv->irq_lock);
    return 0;
}

NPV_API void npv_vus_msix_reset(struct npv_vus *srv)
{
    pthread_mutex_lock(&srv->irq_lock);
    for (uint32_t v = 0;
         srv->irqs[NPV_VU_PCI_MSIX_IRQ] != NULL && v < srv->irq_count[NPV_VU_PCI_MSIX_IRQ]; v++) {
        struct npv_vus_irq_vec *x = &srv->irqs[NPV_VU_PCI_MSIX_IRQ][v];
        if (x->fd >= 0)
            close(x->fd);
        x->fd = -1;
        x->masked = false;
        x->pending = false;
    }
    if (srv->msix_table != NULL)
        memset(srv->msix_table, 0, 16u * srv->cfg.msix_vectors);
    pthread_mutex_unlock(&srv->irq_lock);
}

int npv_vus_msix_access(struct npv_vus *srv, uint64_t off, void *buf, size_t len, bool is_write)
{
    uint64_t n = srv->cfg.msix_vectors;
    uint64_t t = srv->cfg.msix_table_offset, p = srv->cfg.msix_pba_offset;
    uint64_t pba_len = ((n + 63) / 64) * 8;
    if (n == 0)
        return 1;
    if (off >= t && off - t < n * 16) {
        if (len > n * 16 - (off - t))
            return -EINVAL;
        pthread_mutex_lock(&srv->irq_lock);
        if (is_write) {
            memcpy(srv->msix_table + (off - t), buf, len);
            /* An unmask in the table may release a pending vector. */
            for (uint32_t v = (uint32_t)((off - t) / 16); v < n && v * 16ull < off - t + len; v++)
                deliver_pending(srv, NPV_VU_PCI_MSIX_IRQ, v);
        } else {
            memcpy(buf, srv->msix_table + (off - t), len);
        }
        pthread_mutex_unlock(&srv->irq_lock);
        return 0;
    }
    if (off >= p && off - p < pba_len) {
        if (len > pba_len - (off - p))
            return -EINVAL;
        if (is_write)
            return 0; /* the PBA is read-only */
        uint8_t pba[256] = {0};
        pthread_mutex_lock(&srv->irq_lock);
        for (uint32_t v = 0; v < n; v++)
            if (srv->irqs[NPV_VU_PCI_MSIX_IRQ][v].pending)
                pba[v / 8] |= (uint8_t)(1u << (v % 8));
        pthread_mutex_unlock(&srv->irq_lock);
        memcpy(buf, pba + (off - p), len);
        return 0;
    }
    return 1;
}

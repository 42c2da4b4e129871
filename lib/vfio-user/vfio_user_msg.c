/* SPDX-License-Identifier: MIT */
/* vfio-user framing: one message = 16-byte header + body, fds as SCM_RIGHTS. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <npuvfio/common.h>

#include "vfio_user_msg.h"

int64_t npv_vu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void npv_vu_msg_init(struct npv_vu_msg *m)
{
    memset(&m->hdr, 0, sizeof(m->hdr));
    m->body = NULL;
    m->body_len = 0;
    m->nr_fds = 0;
    for (unsigned i = 0; i < NPV_VU_MAX_MSG_FDS; i++)
        m->fds[i] = -1;
}

void npv_vu_msg_release(struct npv_vu_msg *m)
{
    free(m->body);
    for (unsigned i = 0; i < m->nr_fds && i < NPV_VU_MAX_MSG_FDS; i++)
        if (m->fds[i] >= 0)
            close(m->fds[i]);
    npv_vu_msg_init(m);
}

int npv_vu_msg_take_fd(struct npv_vu_msg *m, unsigned i)
{
    if (i >= m->nr_fds)
        return -1;
    int fd = m->fds[i];
    m->fds[i] = -1;
    return fd;
}

int npv_vu_hdr_check(const struct npv_vu_hdr *hdr, size_t max_size)
{
    if (hdr->size < sizeof(*hdr))
        return -NPV_EPEERPROTO;
    if (hdr->size > max_size)
        return -EMSGSIZE;
    uint32_t type = hdr->flags & NPV_VU_F_TYPE_MASK;
    if (type != NPV_VU_F_TYPE_COMMAND && type != NPV_VU_F_TYPE_REPLY)
        return -NPV_EPEERPROTO;
    /*
     * The spec says an error reply carries only the header, but libvfio-user
     * sends the reply body along: size frames it all the same, so the body is
     * read and discarded by whoever handles the reply.
     */
    return 0;
}

/* Wait until fd is ready for events or the deadline passes. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        int timeout_ms = -1;
        if (deadline >= 0) {
            int64_t left = deadline - npv_vu_now_ns();
            if (left <= 0)
                return -ETIMEDOUT;
            int64_t ms = (left + 999999) / 1000000;
            timeout_ms = ms > 60000 ? 60000 : (int)ms;
        }
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, timeout_ms);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            continue; /* re-check the deadline */
        if (p.revents & POLLNVAL)
            return -EBADF;
        /* POLLHUP/POLLERR: let the read or write report what happened. */
        return 0;
    }
}

/* Collect SCM_RIGHTS fds of one recvmsg into m; fds beyond room are closed. */
static int collect_fds(struct msghdr *mh, struct npv_vu_msg *m, unsigned max_fds, bool *too_many)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c != NULL; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        if (c->cmsg_len < CMSG_LEN(0))
            continue;
        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        const unsigned char *p = CMSG_DATA(c);
        for (size_t i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, p + i * sizeof(int), sizeof(int));
            if (m->nr_fds < max_fds && m->nr_fds < NPV_VU_MAX_MSG_FDS) {
                m->fds[m->nr_fds++] = fd;
            } else {
                close(fd);
                *too_many = true;
            }
        }
    }
    /* The kernel dropped fds that did not fit our control buffer. */
    if (mh->msg_flags & MSG_CTRUNC)
        *too_many = true;
    return 0;
}

/* Read exactly len bytes, collecting any fds that ride along. */
static int recv_exact(int sock, void *buf, size_t len, struct npv_vu_msg *m, unsigned max_fds,
                      bool *too_many, int64_t deadline, bool *got_any)
{
    size_t done = 0;
    while (done < len) {
        int r = wait_fd(sock, POLLIN, deadline);
        if (r < 0)
            return r;
        union {
            struct cmsghdr align;
            char buf[CMSG_SPACE(sizeof(int) * NPV_VU_MAX_MSG_FDS)];
        } cbuf;
        struct iovec iov = {.iov_base = (char *)buf + done, .iov_len = len - done};
        struct msghdr mh = {
            .msg_iov = &iov,
            .msg_iovlen = 1,
            .msg_control = cbuf.buf,
            .msg_controllen = sizeof(cbuf.buf),
        };
        ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return errno == ECONNRESET ? -ECONNRESET : -errno;
        }
        collect_fds(&mh, m, max_fds, too_many);
        if (n == 0)
            return -ECONNRESET;
        done += (size_t)n;
        *got_any = true;
    }
    return 0;
}

int npv_vu_recv(int sock, struct npv_vu_msg *m, size_t max_size, unsigned max_fds,
                int64_t timeout_ns)
{
    int64_t deadline = timeout_ns < 0 ? -1 : npv_vu_now_ns() + timeout_ns;
    bool too_many = false, got_any = false;
    int r;

    npv_vu_msg_init(m);
    if (max_fds > NPV_VU_MAX_MSG_FDS)
        max_fds = NPV_VU_MAX_MSG_FDS;
    r = recv_exact(sock, &m->hdr, sizeof(m->hdr), m, max_fds, &too_many, deadline, &got_any);
    if (r < 0)
        goto err;
    r = npv_vu_hdr_check(&m->hdr, max_size);
    if (r < 0)
        goto err;
    m->body_len = m->hdr.size - sizeof(m->hdr);
    if (m->body_len > 0) {
        m->body = malloc(m->body_len);
        if (m->body == NULL) {
            r = -ENOMEM;
            goto err;
        }
        r = recv_exact(sock, m->body, m->body_len, m, max_fds, &too_many, deadline, &got_any);
        if (r < 0)
            goto err;
    }
    if (too_many) {
        r = -NPV_EPEERPROTO;
        goto err;
    }
    return 0;

err:
    npv_vu_msg_release(m);
    return r;
}

int npv_vu_sendv(int sock, struct npv_vu_hdr *hdr, const struct iovec *iov, unsigned iovcnt,
                 const int *fds, unsigned nr_fds, int64_t timeout_ns)
{
    enum { MAX_IOV = 8 };
    struct iovec v[MAX_IOV + 1];
    size_t total = sizeof(*hdr);
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * NPV_VU_MAX_MSG_FDS)];
    } cbuf;

    if (iovcnt > MAX_IOV || nr_fds > NPV_VU_MAX_MSG_FDS)
        return -EINVAL;
    for (unsigned i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len > UINT32_MAX - total)
            return -EMSGSIZE;
        total += iov[i].iov_len;
        v[i + 1] = iov[i];
    }
    hdr->size = (uint32_t)total;
    v[0].iov_base = hdr;
    v[0].iov_len = sizeof(*hdr);

    int64_t deadline = timeout_ns < 0 ? -1 : npv_vu_now_ns() + timeout_ns;
    struct iovec *cur = v;
    size_t nv = iovcnt + 1;
    bool fds_sent = nr_fds == 0;
    while (nv > 0) {
        struct msghdr mh = {.msg_iov = cur, .msg_iovlen = nv};
        if (!fds_sent) {
            memset(cbuf.buf, 0, sizeof(cbuf.buf));
            mh.msg_control = cbuf.buf;
            mh.msg_controllen = CMSG_SPACE(sizeof(int) * nr_fds);
            struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int) * nr_fds);
            memcpy(CMSG_DATA(c), fds, sizeof(int) * nr_fds);
        }
        ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                int r = wait_fd(sock, POLLOUT, deadline);
                if (r < 0)
                    return r;
                continue;
            }
            return -errno;
        }
        fds_sent = true;
        size_t left = (size_t)n;
        while (nv > 0 && left >= cur->iov_len) {
            left -= cur->iov_len;
            cur++;
            nv--;
        }
        if (nv > 0) {
            cur->iov_base = (char *)cur->iov_base + left;
            cur->iov_len -= left;
        }
    }
    return 0;
}

int npv_vu_send(int sock, struct npv_vu_hdr *hdr, const void *body, size_t len, const int *fds,
                unsigned nr_fds, int64_t timeout_ns)
{
    struct iovec iov = {.iov_base = (void *)body, .iov_len = len};
    return npv_vu_sendv(sock, hdr, &iov, len > 0 ? 1 : 0, fds, nr_fds, timeout_ns);
}

int npv_vu_send_error(int sock, uint16_t msg_id, uint16_t cmd, uint32_t err, int64_t timeout_ns)
{
    struct npv_vu_hdr h = {
        .msg_id = msg_id,
        .cmd = cmd,
        .flags = NPV_VU_F_TYPE_REPLY | NPV_VU_F_ERROR,
        .error = err,
    };
    return npv_vu_sendv(sock, &h, NULL, 0, NULL, 0, timeout_ns);
}

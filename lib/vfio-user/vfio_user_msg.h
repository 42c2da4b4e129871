/* SPDX-License-Identifier: MIT */
/*
 * vfio-user message codec, shared by the client and the server framework:
 * framing over an AF_UNIX stream socket with SCM_RIGHTS fds, and the JSON
 * capabilities of the VERSION message.
 *
 * Everything a peer sends is untrusted: the receive path bounds the size
 * before allocating, bounds the fd count, and closes every fd it does not
 * hand to the caller. After any receive error other than -ETIMEDOUT before
 * the first byte, the stream position is unknown and the caller must drop
 * the connection.
 */
#ifndef NPV_VFIO_USER_MSG_H
#define NPV_VFIO_USER_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "vfio_user_proto.h"

/* One received message. Owns body and fds until npv_vu_msg_release(). */
struct npv_vu_msg {
    struct npv_vu_hdr hdr;
    uint8_t *body;   /* hdr.size - 16 bytes (NULL when empty); malloc'ed */
    size_t body_len; /* hdr.size - 16 */
    int fds[NPV_VU_MAX_MSG_FDS];
    unsigned nr_fds;
};

void npv_vu_msg_init(struct npv_vu_msg *m);
/* Free the body and close the fds not taken. Leaves m re-initialised. Idempotent. */
void npv_vu_msg_release(struct npv_vu_msg *m);
/* Take ownership of fd i (the message will not close it). -1 when i ≥ nr_fds or already taken. */
int npv_vu_msg_take_fd(struct npv_vu_msg *m, unsigned i);

/*
 * Check a header as received: size ≥ 16 and ≤ max_size and a known type.
 * An error reply may carry a body (libvfio-user sends the reply payload
 * with the error): it is framed like any message, so the receiver reads and
 * discards it instead of losing the stream. 0, -EMSGSIZE (too large) or
 * -NPV_EPEERPROTO. Pure: usable from fuzzers.
 */
int npv_vu_hdr_check(const struct npv_vu_hdr *hdr, size_t max_size);

/*
 * Receive one whole message: header, then exactly hdr.size - 16 body bytes.
 * timeout_ns bounds the whole message (< 0: no bound). At most max_fds fds
 * are accepted; a message with more is refused (all its fds closed). fds
 * arrive with O_CLOEXEC.
 * Returns 0, -ETIMEDOUT, -ECONNRESET (peer closed), -EMSGSIZE (size >
 * max_size), -NPV_EPEERPROTO (malformed), -ENOMEM, or another -errno.
 */
int npv_vu_recv(int sock, struct npv_vu_msg *m, size_t max_size, unsigned max_fds,
                int64_t timeout_ns);

/*
 * Send header + body (+ up to NPV_VU_MAX_MSG_FDS fds) as one message.
 * hdr->size is set by the call. MSG_NOSIGNAL: a closed peer is -EPIPE, not
 * SIGPIPE. timeout_ns bounds a send that blocks on a full socket (< 0: none).
 */
int npv_vu_sendv(int sock, struct npv_vu_hdr *hdr, const struct iovec *iov, unsigned iovcnt,
                 const int *fds, unsigned nr_fds, int64_t timeout_ns);
int npv_vu_send(int sock, struct npv_vu_hdr *hdr, const void *body, size_t len, const int *fds,
                unsigned nr_fds, int64_t timeout_ns);
/* An error reply (header only) to command cmd with id msg_id; err is a positive errno. */
int npv_vu_send_error(int sock, uint16_t msg_id, uint16_t cmd, uint32_t err, int64_t timeout_ns);

/* Which keys a VERSION object held (parse) or is to hold (format). */
enum {
    NPV_VU_CAP_MAX_MSG_FDS = 1u << 0,
    NPV_VU_CAP_MAX_DATA_XFER_SIZE = 1u << 1,
    NPV_VU_CAP_MAX_DMA_MAPS = 1u << 2,
    NPV_VU_CAP_PGSIZES = 1u << 3,
    NPV_VU_CAP_WRITE_MULTIPLE = 1u << 4,
    NPV_VU_CAP_TWIN_SOCKET = 1u << 5,
    NPV_VU_CAP_TWIN_FD_INDEX = 1u << 6, /* twin_socket.fd_index; only in a reply */
    NPV_VU_CAP_ALL = (1u << 7) - 1,
};

/* The capabilities object of VERSION. */
struct npv_vu_caps {
    uint32_t max_msg_fds;
    uint32_t max_data_xfer_size;
    uint32_t max_dma_maps;
    uint64_t pgsizes;
    bool write_multiple;
    bool twin_socket;       /* twin_socket.supported */
    uint32_t twin_fd_index; /* twin_socket.fd_index, valid with NPV_VU_CAP_TWIN_FD_INDEX */
    uint32_t present;       /* NPV_VU_CAP_* */
};

/* The spec's defaults for keys a peer leaves out; present is 0. */
void npv_vu_caps_default(struct npv_vu_caps *c);

/*
 * Parse version data: len bytes, NUL-terminated or not, holding
 * {"capabilities": {...}}. Starts from the defaults; known keys override
 * them; unknown keys (and "migration", "twin_socket" members other than
 * "supported") are skipped. Nesting deeper than NPV_VU_JSON_MAX_DEPTH, a
 * known key of the wrong type or out of range, or trailing garbage is
 * -EINVAL. len 0 (no data) gives the defaults.
 */
#define NPV_VU_JSON_MAX_DEPTH 8
int npv_vu_caps_parse(const char *data, size_t len, struct npv_vu_caps *out);

/*
 * Write {"capabilities":{...}} with a terminating NUL into buf, with the keys
 * c->present names (a VERSION reply names only keys the proposal held: the
 * spec makes the reply a subset). twin_socket is written as
 * {"supported":...} plus fd_index when NPV_VU_CAP_TWIN_FD_INDEX is set.
 * Returns the length including the NUL, or -ENOSPC.
 */
int npv_vu_caps_format(const struct npv_vu_caps *c, char *buf, size_t len);

/* Monotonic clock in ns, for deadlines. */
int64_t npv_vu_now_ns(void);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The frames examples/inference_server.c and examples/inference_load.c
 * exchange over a Unix stream socket (docs/serving.md). Every integer is
 * little-endian.
 *
 *   request: u32 length | u32 tag | length bytes: the input tensor
 *   reply:   u32 status | u32 tag | u32 length | length bytes: the output tensor
 *
 * status is 0 or a negative errno as a two's-complement u32 (-EINVAL: the
 * input has the wrong length for the device's tensor; -ETIMEDOUT: the request
 * passed its budget; -EAGAIN: the server's queue was full; -ESHUTDOWN: the
 * server stopped before it ran the request); length is 0 unless status is 0.
 * tag is the client's, returned as sent: requests pipelined on one
 * connection are run by several workers at once and answered as each
 * finishes, so replies may come in another order than their requests.
 *
 * A request longer than INFER_MAX_INPUT gets a -EMSGSIZE reply (tag as sent)
 * and the connection is closed: its body is never read. A connection that
 * ends inside a frame is closed without a reply.
 */
#ifndef NPV_EXAMPLES_INFERENCE_PROTO_H
#define NPV_EXAMPLES_INFERENCE_PROTO_H

#include <stdint.h>

#define INFER_MAX_INPUT     (1u << 20) /* bytes of one input tensor the server reads at most */
#define INFER_REQ_HDR_BYTES 8u
#define INFER_REP_HDR_BYTES 12u

static inline void infer_put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline uint32_t infer_get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The library's calls of each failure class go through these wrappers
 * (npuvfio/failpoint.h): with NPUVFIO_FAILPOINTS they count the call and
 * fail the armed one as the real call would (return value and errno);
 * without, each is the direct call. ctx may be NULL (never fails).
 */
#ifndef NPV_FAILPOINT_INTERNAL_H
#define NPV_FAILPOINT_INTERNAL_H

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <npuvfio/failpoint.h>

#include "npv_config.h"

#if NPV_HAVE_FAILPOINTS
/* Nonzero when this call of cls is the armed one (errno is then set). */
#define npv_fp_fails(ctx, cls) (npv_failpoint_check((ctx), (cls)) != 0)
#else
#define npv_fp_fails(ctx, cls) ((void)(ctx), 0)
#endif

#define npv_fp_malloc(ctx, size)    (npv_fp_fails(ctx, NPV_FAIL_ALLOC) ? NULL : malloc(size))
#define npv_fp_calloc(ctx, n, size) (npv_fp_fails(ctx, NPV_FAIL_ALLOC) ? NULL : calloc((n), (size)))
#define npv_fp_realloc(ctx, p, size)                                                               \
    (npv_fp_fails(ctx, NPV_FAIL_ALLOC) ? NULL : realloc((p), (size)))
#define npv_fp_mmap(ctx, addr, len, prot, flags, fd, off)                                          \
    (npv_fp_fails(ctx, NPV_FAIL_MMAP) ? MAP_FAILED                                                 \
                                      : mmap((addr), (len), (prot), (flags), (fd), (off)))
#define npv_fp_memfd_create(ctx, name, flags)                                                      \
    (npv_fp_fails(ctx, NPV_FAIL_MEMFD) ? -1 : memfd_create((name), (flags)))
#define npv_fp_ioctl(ctx, fd, ...)                                                                 \
    (npv_fp_fails(ctx, NPV_FAIL_IOCTL) ? -1 : ioctl((fd), __VA_ARGS__))
#define npv_fp_eventfd(ctx, initval, flags)                                                        \
    (npv_fp_fails(ctx, NPV_FAIL_EVENTFD) ? -1 : eventfd((initval), (flags)))

/* A socket that cannot be made: the process is out of descriptors. */
static inline int npv_fp_socket(struct npv_ctx *ctx, int domain, int type, int protocol)
{
    if (npv_fp_fails(ctx, NPV_FAIL_SOCKET)) {
        errno = EMFILE;
        return -1;
    }
    return socket(domain, type, protocol);
}

/*
 * A send or receive of a whole message, as its callers see it (negative
 * errno): a failed send looks like a peer that went away (-EPIPE), a failed
 * receive like a reset connection (-ECONNRESET).
 */
static inline int npv_fp_send_result(struct npv_ctx *ctx)
{
    return npv_fp_fails(ctx, NPV_FAIL_SOCKET) ? -EPIPE : 0;
}

static inline int npv_fp_recv_result(struct npv_ctx *ctx)
{
    return npv_fp_fails(ctx, NPV_FAIL_SOCKET) ? -ECONNRESET : 0;
}

/* io_uring set-up returns a negative errno itself. */
static inline int npv_fp_uring_result(struct npv_ctx *ctx)
{
    return npv_fp_fails(ctx, NPV_FAIL_URING) ? -ENOMEM : 0;
}

#endif

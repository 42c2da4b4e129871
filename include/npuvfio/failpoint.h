/* SPDX-License-Identifier: MIT */
/*
 * Deterministic failure injection: make the nth call of one class of
 * acquisitions fail, once, so a test can walk every error path of open ->
 * map -> submit -> wait -> close and check that each releases what it took.
 *
 * The library routes its own calls of each class through the failpoints;
 * device driver libraries call npv_failpoint_check() before theirs. State
 * lives in the context: two contexts never disturb each other.
 *
 * Built in only with the CMake option NPUVFIO_FAILPOINTS (on in the default,
 * debug and asan presets, off in release). Without it the functions exist
 * (the ABI is the same) and return -ENOTSUP (npv_failpoint_check returns 0
 * and npv_failpoint_calls 0), and the library calls the system directly.
 *
 * Thread-safety: every call may run in any thread while other threads use
 * the context; counting is atomic. Which of two racing calls of one class is
 * the nth is decided by whichever counts first.
 */
#ifndef NPUVFIO_FAILPOINT_H
#define NPUVFIO_FAILPOINT_H

#include <stdint.h>

#include <npuvfio/common.h>

#ifdef __cplusplus
extern "C" {
#endif

struct npv_ctx;

/* A class of calls that can fail, and the errno an injected failure sets. */
enum npv_fail_class {
    NPV_FAIL_ALLOC,   /* malloc/calloc/realloc: ENOMEM */
    NPV_FAIL_MMAP,    /* mmap: ENOMEM */
    NPV_FAIL_MEMFD,   /* memfd_create: EMFILE */
    NPV_FAIL_IOCTL,   /* ioctl: EIO */
    NPV_FAIL_EVENTFD, /* eventfd: EMFILE */
    NPV_FAIL_URING,   /* io_uring set-up: ENOMEM */
    NPV_FAIL_SOCKET,  /* socket create (EMFILE), send (EPIPE), receive (ECONNRESET) */
    NPV_FAIL_CLASS_COUNT,
};

/*
 * Arm: the nth call of cls from now on fails, once (1 = the next). Resets
 * every class's call count. One class is armed at a time; arming replaces.
 * 0, -EINVAL (cls out of range or nth 0), -ENOTSUP (built without).
 */
NPV_API int npv_failpoint_arm(struct npv_ctx *ctx, enum npv_fail_class cls, uint64_t nth);
/* Disarm and reset every call count. 0 or -ENOTSUP. */
NPV_API int npv_failpoint_disarm(struct npv_ctx *ctx);
/* Calls of cls seen since the last arm or disarm (0 for cls out of range or built without). */
NPV_API uint64_t npv_failpoint_calls(struct npv_ctx *ctx, enum npv_fail_class cls);
/*
 * Count one call of cls: 0 to go on, or the negative errno the class fails
 * with when this is the armed call (errno is set to it too). For device
 * driver libraries, before their own allocations. Not for hot paths.
 */
NPV_API int npv_failpoint_check(struct npv_ctx *ctx, enum npv_fail_class cls);
/* The class's name ("alloc", "mmap", ...) or NULL when out of range. */
NPV_API const char *npv_failpoint_class_name(enum npv_fail_class cls);

#ifdef __cplusplus
}
#endif

#endif

/* SPDX-License-Identifier: MIT */
/*
 * What the RKNPU bench binaries share (npuvfio-rknpu-switch-cost,
 * npuvfio-serve-bench): the RKNPU model in a child process on a socket, the
 * driver opened on a socket, a monotonic clock and sorting of samples.
 * Starting/stopping children is for one thread; the rest is thread-safe
 * (each bench_rknpu used by one thread).
 */
#ifndef NPV_BENCH_RKNPU_CHILD_H
#define NPV_BENCH_RKNPU_CHILD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/domain.h>
#include <npuvfio/rknpu.h>

/* The unchanged RKNPU driver on a vfio-user socket, with its own context and domain. */
struct bench_rknpu {
    struct npv_ctx *ctx;
    struct npv_domain *dom;
    struct npv_dev *dev;
    struct npv_rknpu *npu;
};

/* CLOCK_MONOTONIC in ns. */
uint64_t bench_now_ns(void);
/* Sort n samples ascending. */
void bench_sort_u64(uint64_t *v, size_t n);
/*
 * Fork the RKNPU model serving on path (once: one connection, then it
 * exits; else one connection after another, the same model), killed with
 * its parent. Its pid once the socket exists, or -1.
 */
pid_t bench_model_start(const char *path, bool once);
/* SIGKILL and reap it; the socket is unlinked. pid <= 0 is a no-op. */
void bench_model_stop(pid_t pid, const char *path);

/* Open b (zeroed by the caller) on socket: 0 or a negative errno; close it either way. */
int bench_rknpu_open(const char *socket, struct bench_rknpu *b);
void bench_rknpu_close(struct bench_rknpu *b);

#endif

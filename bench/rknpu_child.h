/* SPDX-License-Identifier: MIT */
/*
 * What the RKNPU bench binaries share (npuvfio-rknpu-switch-cost,
 * npuvfio-serve-bench): the RKNPU model in a child process on a socket, a
 * monotonic clock and sorting of samples. Not thread-safe to start/stop
 * children from several threads; the clock and sort are.
 */
#ifndef NPV_BENCH_RKNPU_CHILD_H
#define NPV_BENCH_RKNPU_CHILD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

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

#endif

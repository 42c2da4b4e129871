/* SPDX-License-Identifier: MIT */
/* The RKNPU benches' shared pieces (rknpu_child.h). */
#include "rknpu_child.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "registry.h"

uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

void bench_sort_u64(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_u64);
}

pid_t bench_model_start(const char *path, bool once)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        _exit(npv_device_serve(npv_device_find("rknpu"), path, once) < 0 ? 1 : 0);
    }
    for (int i = 0; i < 5000; i++) {
        struct stat st;
        if (stat(path, &st) == 0)
            return pid;
        struct timespec nap = {.tv_sec = 0, .tv_nsec = 2000000};
        nanosleep(&nap, NULL);
    }
    bench_model_stop(pid, path);
    return -1;
}

void bench_model_stop(pid_t pid, const char *path)
{
    if (pid <= 0)
        return;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    unlink(path);
}

int bench_rknpu_open(const char *socket, struct bench_rknpu *b)
{
    int r = npv_ctx_new(&b->ctx);
    if (r == 0)
        r = npv_domain_new(b->ctx, NULL, &b->dom);
    if (r == 0)
        r = npv_dev_open_vfio_user(b->ctx, socket, b->dom, NULL, &b->dev);
    if (r == 0)
        r = npv_rknpu_open(b->dev, NULL, &b->npu);
    return r;
}

void bench_rknpu_close(struct bench_rknpu *b)
{
    npv_rknpu_close(b->npu);
    if (b->dev != NULL)
        npv_dev_close(b->dev);
    npv_domain_put(b->dom);
    npv_ctx_free(b->ctx);
    *b = (struct bench_rknpu){0};
}

/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness: the vfio-user client's twin socket, where a server's
 * DMA_READ/DMA_WRITE commands arrive (npv_vu_client_serve_twin). The input
 * is the raw byte stream the server sends on it; the client's mapping table
 * holds a read-write and a read-only mapping. Replies are drained by a
 * thread. The client must never touch memory outside its mappings (guard
 * pages around them), never write a read-only one, and hold no more fds
 * after the stream than before.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <npuvfio/ctx.h>
#include <npuvfio/dma.h>

#include "vfio_user_client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define RW_IOVA 0x100000ull
#define RO_IOVA 0x200000ull
#define MAP_LEN 0x2000u

static struct vu_client *c;
static uint8_t *rw, *ro;

static const struct npv_dev_ops no_ops;

/* Mapped memory with a PROT_NONE page either side: any stray access faults. */
static uint8_t *guarded(void)
{
    uint8_t *p = mmap(NULL, MAP_LEN + 8192, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || mprotect(p + 4096, MAP_LEN, PROT_READ | PROT_WRITE) < 0)
        abort();
    return p + 4096;
}

static void setup(void)
{
    struct npv_ctx *ctx;
    if (npv_ctx_new(&ctx) < 0)
        abort();
    npv_ctx_set_log_level(ctx, NPV_LOG_ERROR);
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        abort();
    c->dev = npv_dev_alloc(ctx, &no_ops, NPV_TRANSPORT_VFIO_USER, "fuzz", NULL);
    if (c->dev == NULL)
        abort();
    c->sock = -1;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    pthread_cond_init(&c->dma_cond, NULL);
    pthread_mutex_init(&c->twin_send_lock, NULL);
    c->dma_send_lock = &c->twin_send_lock;
    rw = guarded();
    ro = guarded();
    memset(ro, 0x5a, MAP_LEN);
    if (mprotect(ro, MAP_LEN, PROT_READ) < 0)
        abort();
    c->maps = calloc(2, sizeof(*c->maps));
    if (c->maps == NULL)
        abort();
    c->maps[0] =
        (struct vu_mapping){.iova = RW_IOVA, .len = MAP_LEN, .vaddr = rw, .prot = NPV_DMA_RW};
    c->maps[1] =
        (struct vu_mapping){.iova = RO_IOVA, .len = MAP_LEN, .vaddr = ro, .prot = NPV_DMA_READ};
    c->nr_maps = c->cap_maps = 2;
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (d == NULL)
        return -1;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

static void *drain(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[65536];
    while (read(fd, buf, sizeof(buf)) > 0)
        ;
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (c == NULL)
        setup();
    int before = count_fds();
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        abort();
    int big = 1 << 20;
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    size_t len = size > 65536 ? 65536 : size;
    if (len > 0 && write(sv[1], data, len) != (ssize_t)len)
        abort();
    shutdown(sv[1], SHUT_WR);
    pthread_t t;
    if (pthread_create(&t, NULL, drain, (void *)(intptr_t)sv[1]) != 0)
        abort();
    c->twin_sock = sv[0];
    c->dma_sock = sv[0];
    c->dead = 0;
    npv_vu_client_serve_twin(c); /* returns once the stream ends or breaks the protocol */
    if (c->dead == 0)
        abort(); /* the connection must be dead once its twin socket is */
    close(sv[0]);
    pthread_join(t, NULL);
    close(sv[1]);
    c->twin_sock = c->dma_sock = -1;
    for (size_t i = 0; i < MAP_LEN; i++)
        if (ro[i] != 0x5a)
            abort();
    if (count_fds() != before)
        abort();
    return 0;
}

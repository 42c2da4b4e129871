/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness: the vfio-user server's receive path and command
 * dispatch. The input is byte 0 (bit 0: start as if VERSION had been done)
 * followed by a raw byte stream, written to one end of a socketpair whose
 * other end is the server's connection; the server reads messages until the
 * stream ends. Replies are drained and discarded by a thread. After each
 * input the server must hold no more fds than before (DMA maps, IRQ fds
 * dropped with the connection).
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vfio_user_server_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct npv_vus *srv;

/* Trapped page of BAR0: RAZ/WI plus one register, to reach the callback path. */
static uint64_t scratch;
static int access_fn(void *arg, uint32_t index, uint64_t off, void *buf, size_t len, bool is_write)
{
    (void)arg;
    (void)index;
    if (off == 0x40 && len == 8) {
        if (is_write)
            memcpy(&scratch, buf, 8);
        else
            memcpy(buf, &scratch, 8);
        return 0;
    }
    if (!is_write)
        memset(buf, 0xa5, len);
    return off >= 0x800 ? -EINVAL : 0;
}

static void setup(void)
{
    struct npv_ctx *ctx;
    if (npv_ctx_new(&ctx) < 0)
        abort();
    npv_ctx_set_log_level(ctx, NPV_LOG_ERROR);
    struct npv_vus_config cfg = {
        .vendor_id = 0x1234,
        .device_id = 0x4e50,
        .class_code = 0x120000,
        .msix_vectors = 4,
        .msix_bar = 0,
        .msix_table_offset = 0x2000,
        .msix_pba_offset = 0x3000,
    };
    cfg.bars[0] = (struct npv_vus_region){
        .size = 0x4000,
        .flags = NPV_VUS_REGION_READ | NPV_VUS_REGION_WRITE,
        .shared = true,
        .nr_areas = 1,
        .areas = {{.offset = 0x1000, .size = 0x1000}},
        .access = access_fn,
    };
    cfg.bars[2] = (struct npv_vus_region){
        .size = 0x1000,
        .flags = NPV_VUS_REGION_READ,
        .shared = true,
    };
    if (npv_vus_new(ctx, &cfg, &srv) < 0)
        abort();
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    struct dirent *e;
    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
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
    if (srv == NULL)
        setup();
    if (size < 1)
        return 0;
    int before = count_fds();
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        abort();
    /* The whole input must fit the socket buffer so the write never blocks. */
    int big = 1 << 20;
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    size_t len = size - 1;
    if (len > 65536)
        len = 65536;
    if (len > 0 && write(sv[1], data + 1, len) != (ssize_t)len) {
        close(sv[0]);
        close(sv[1]);
        return 0;
    }
    shutdown(sv[1], SHUT_WR);
    pthread_t t;
    if (pthread_create(&t, NULL, drain, (void *)(intptr_t)sv[1]) != 0)
        abort();
    npv_vus_set_conn(srv, sv[0]);
    if (data[0] & 1) {
        srv->versioned = true;
        srv->peer.max_msg_fds = 1;
    }
    npv_vus_serve_conn(srv); /* closes sv[0] */
    pthread_join(t, NULL);
    close(sv[1]);
    if (npv_vus_dma_count(srv) != 0 || count_fds() != before)
        abort(); /* a mapping or an fd outlived its connection */
    return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness: the vfio-user server's twin socket, where the client's
 * replies to our DMA_READ/DMA_WRITE arrive. Byte 0 picks the command (bit 0:
 * write) and the length (bits 1-7, times 64, plus 1); the rest is the byte
 * stream the client sends back. A message-DMA mapping (no fd) covers the
 * target. The call must return (success only with a well-formed reply of the
 * right id, command, address and count), a broken reply must drop the
 * client, and no fd may outlive the connection.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vfio_user_server_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAP_IOVA 0x100000ull
#define MAP_LEN  0x10000u

static struct npv_vus *srv;

static void setup(void)
{
    struct npv_ctx *ctx;
    if (npv_ctx_new(&ctx) < 0)
        abort();
    npv_ctx_set_log_level(ctx, NPV_LOG_ERROR);
    struct npv_vus_config cfg = {.vendor_id = 0x1234, .device_id = 0x4e50};
    cfg.bars[0] = (struct npv_vus_region){
        .size = 0x1000, .flags = NPV_VUS_REGION_READ | NPV_VUS_REGION_WRITE, .shared = true};
    if (npv_vus_new(ctx, &cfg, &srv) < 0)
        abort();
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (srv == NULL)
        setup();
    if (size < 1)
        return 0;
    int before = count_fds();
    int conn[2], twin[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, conn) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, twin) < 0)
        abort();
    /* Our command and the client's stream must both fit the buffers: nothing blocks. */
    int big = 1 << 20;
    setsockopt(twin[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    setsockopt(twin[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    setsockopt(twin[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    setsockopt(twin[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    size_t len = size - 1 > 65536 ? 65536 : size - 1;
    if (len > 0 && write(twin[1], data + 1, len) != (ssize_t)len)
        abort();
    shutdown(twin[1], SHUT_WR);

    npv_vus_set_conn(srv, conn[0]);
    srv->versioned = true;
    srv->twin_fd = twin[0];
    srv->next_msg_id = 0;
    pthread_rwlock_wrlock(&srv->dma_lock);
    srv->maps = realloc(srv->maps, sizeof(*srv->maps));
    if (srv->maps == NULL)
        abort();
    srv->maps[0] = (struct npv_vus_mapping){
        .iova = MAP_IOVA, .size = MAP_LEN, .prot = NPV_VU_DMA_FLAG_READ | NPV_VU_DMA_FLAG_WRITE};
    srv->nr_maps = srv->cap_maps = 1;
    pthread_rwlock_unlock(&srv->dma_lock);

    static uint8_t buf[MAP_LEN];
    uint64_t n = (uint64_t)(data[0] >> 1) * 64 + 1;
    int r = (data[0] & 1) ? npv_vus_dma_write(srv, MAP_IOVA, buf, n)
                          : npv_vus_dma_read(srv, MAP_IOVA, buf, n);
    if (r == 0 && len < sizeof(struct npv_vu_hdr) + 12)
        abort(); /* success without a reply */
    if (r < 0 && r != -EFAULT && srv->kick == false)
        abort(); /* a broken twin stream must drop the client */

    npv_vus_drop_conn(srv); /* closes conn[0] and twin[0] */
    close(conn[1]);
    close(twin[1]);
    if (srv->twin_fd != -1 || npv_vus_dma_count(srv) != 0 || count_fds() != before)
        abort();
    return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * What an owner daemon (issue 27) needs of the vfio-user server: the model
 * hears of every DMA mapping a client makes and loses (and may refuse one),
 * serves a connection it accepted itself on a thread of its own, and turns
 * a client away with an error the client's open returns.
 *
 * The server runs in a thread of the test process, the client is the real
 * one (npv_dev_open_vfio_user) on the same process, or in a forked child
 * where it must be killed, or raw messages on a socketpair for what our
 * client never sends (DMA_UNMAP of all, a mapping without fd).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/domain.h>
#include <npuvfio/vfio_user_server.h>

#include "npv_test.h"
#include "vfio_user_msg.h"
#include "vfio_user_server_internal.h"

/* A bound for waits that a healthy run never comes near; no assertion is about time. */
#define GENEROUS_NS (30ll * 1000000000ll)
#define BUF_SIZE    0x10000u

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* How many mappings of the file with inode ino this process holds (client's and server's). */
static int maps_of(ino_t ino)
{
    FILE *fp = fopen("/proc/self/maps", "re");
    ck_assert_ptr_nonnull(fp);
    char line[512];
    int n = 0;
    while (fgets(line, sizeof(line), fp) != NULL) {
        unsigned long long inode = 0;
        if (sscanf(line, "%*s %*s %*s %*s %llu", &inode) == 1 && inode == (unsigned long long)ino)
            n++;
    }
    fclose(fp);
    return n;
}

static ino_t ino_of(int fd)
{
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    return st.st_ino;
}

/* ---- the model's side: what its hooks saw ---- */

struct seen_map {
    npv_iova_t iova;
    uint64_t size;
    unsigned prot;
    bool has_vaddr;
    ino_t ino; /* of the fd passed, 0 without */
    uint64_t fd_offset;
    uint8_t head[16]; /* the first bytes at vaddr */
};

struct seen_unmap {
    npv_iova_t iova;
    uint64_t size;
    int mappings_of_file; /* maps_of(watch) during the call: the server's mmap still there */
    unsigned seq;
};

struct hooks {
    pthread_mutex_t lock;
    unsigned seq; /* orders the events below */
    unsigned nr_maps, nr_unmaps, nr_disconnects;
    struct seen_map maps[8];
    struct seen_unmap unmaps[8];
    unsigned disconnect_seq;
    int refuse;  /* what dma_map returns */
    ino_t watch; /* file whose mappings dma_unmap counts, 0 none */
};

static int hook_dma_map(void *arg, npv_iova_t iova, uint64_t size, unsigned prot, void *vaddr,
                        int fd, uint64_t fd_offset)
{
    struct hooks *h = arg;
    struct seen_map s = {.iova = iova,
                         .size = size,
                         .prot = prot,
                         .has_vaddr = vaddr != NULL,
                         .ino = fd >= 0 ? ino_of(fd) : 0,
                         .fd_offset = fd_offset};
    if (vaddr != NULL && (prot & NPV_VUS_DMA_READ))
        memcpy(s.head, vaddr, sizeof(s.head));
    pthread_mutex_lock(&h->lock);
    if (h->nr_maps < 8)
        h->maps[h->nr_maps] = s;
    h->nr_maps++;
    h->seq++;
    int r = h->refuse;
    pthread_mutex_unlock(&h->lock);
    return r;
}

static void hook_dma_unmap(void *arg, npv_iova_t iova, uint64_t size)
{
    struct hooks *h = arg;
    pthread_mutex_lock(&h->lock);
    struct seen_unmap s = {.iova = iova,
                           .size = size,
                           .mappings_of_file = h->watch ? maps_of(h->watch) : -1,
                           .seq = ++h->seq};
    if (h->nr_unmaps < 8)
        h->unmaps[h->nr_unmaps] = s;
    h->nr_unmaps++;
    pthread_mutex_unlock(&h->lock);
}

static void hook_disconnect(void *arg)
{
    struct hooks *h = arg;
    pthread_mutex_lock(&h->lock);
    h->nr_disconnects++;
    h->disconnect_seq = ++h->seq;
    pthread_mutex_unlock(&h->lock);
}

static struct hooks *hooks_new(void)
{
    struct hooks *h = calloc(1, sizeof(*h));
    ck_assert_ptr_nonnull(h);
    pthread_mutex_init(&h->lock, NULL);
    return h;
}

static void hooks_free(struct hooks *h)
{
    pthread_mutex_destroy(&h->lock);
    free(h);
}

static unsigned count(struct hooks *h, const unsigned *field)
{
    pthread_mutex_lock(&h->lock);
    unsigned n = *field;
    pthread_mutex_unlock(&h->lock);
    return n;
}

/* Wait (bounded, never asserted on time) until *field reaches want. */
static void wait_count(struct hooks *h, const unsigned *field, unsigned want)
{
    int64_t deadline = now_ns() + GENEROUS_NS;
    while (count(h, field) < want) {
        ck_assert_msg(now_ns() < deadline, "still %u of %u", count(h, field), want);
        usleep(1000);
    }
}

/* One PCI function with a 4 KiB BAR of plain shared memory; h's hooks when h is given. */
static struct npv_vus *server_new(struct npv_ctx *ctx, struct hooks *h)
{
    struct npv_vus_config cfg = {
        .vendor_id = 0x1af4,
        .device_id = 0x10ff,
        .class_code = 0x120000, /* processing accelerator */
        .arg = h,
    };
    cfg.bars[0] = (struct npv_vus_region){
        .size = 4096, .flags = NPV_VUS_REGION_READ | NPV_VUS_REGION_WRITE, .shared = true};
    if (h != NULL) {
        cfg.dma_map = hook_dma_map;
        cfg.dma_unmap = hook_dma_unmap;
        cfg.disconnect = hook_disconnect;
    }
    struct npv_vus *srv;
    ck_assert_int_eq(npv_vus_new(ctx, &cfg, &srv), 0);
    return srv;
}

static const char *sock_path(const char *what)
{
    static char path[108];
    snprintf(path, sizeof(path), "/tmp/npv-vus-owner-%s-%d.sock", what, (int)getpid());
    unlink(path);
    return path;
}

static struct npv_ctx *quiet_ctx(void)
{
    struct npv_ctx *ctx;
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    npv_ctx_set_log_level(ctx, NPV_LOG_ERROR);
    return ctx;
}

static void *run_main(void *arg)
{
    return (void *)(intptr_t)npv_vus_run(arg, false);
}

/* A client of the test process: its context, domain and device. */
struct client {
    struct npv_ctx *ctx;
    struct npv_domain *dom;
    struct npv_dev *dev;
};

static int client_open(struct client *c, const char *path)
{
    c->ctx = quiet_ctx();
    ck_assert_int_eq(npv_domain_new(c->ctx, NULL, &c->dom), 0);
    struct npv_dev_opts opts = {.request_timeout_ns = (uint64_t)GENEROUS_NS};
    return npv_dev_open_vfio_user(c->ctx, path, c->dom, &opts, &c->dev);
}

static void client_close(struct client *c)
{
    npv_dev_close(c->dev);
    npv_domain_put(c->dom);
    npv_ctx_free(c->ctx);
}

static struct npv_dma *buf_new(struct npv_ctx *ctx, uint8_t fill)
{
    struct npv_dma *dma;
    ck_assert_int_eq(npv_dma_alloc(ctx, BUF_SIZE, NULL, &dma), 0);
    memset(npv_dma_vaddr(dma), fill, BUF_SIZE);
    ck_assert_int_ge(npv_dma_fd(dma), 0);
    return dma;
}

/* ---- DMA hooks ---- */

START_TEST(dma_map_hook_sees_the_clients_mapping_and_may_refuse_it)
{
    struct npv_ctx *sctx = quiet_ctx();
    struct hooks *h = hooks_new();
    struct npv_vus *srv = server_new(sctx, h);
    const char *path = sock_path("map");
    ck_assert_int_eq(npv_vus_listen(srv, path), 0);
    pthread_t loop;
    ck_assert_int_eq(pthread_create(&loop, NULL, run_main, srv), 0);

    struct client c;
    ck_assert_int_eq(client_open(&c, path), 0);
    struct npv_dma *a = buf_new(c.ctx, 0xa5);
    memcpy(npv_dma_vaddr(a), "client bytes!!!", 16);
    npv_iova_t ia;
    ck_assert_int_eq(npv_dma_map(a, c.dom, NPV_DMA_READ, &ia), 0);

    /* The hook ran before the reply: the client's map returning means it was called. */
    ck_assert_uint_eq(count(h, &h->nr_maps), 1);
    ck_assert_uint_eq(h->maps[0].iova, ia);
    ck_assert_uint_eq(h->maps[0].size, BUF_SIZE);
    ck_assert_uint_eq(h->maps[0].prot, NPV_VUS_DMA_READ);
    ck_assert(h->maps[0].has_vaddr);
    ck_assert_uint_eq(h->maps[0].ino, ino_of(npv_dma_fd(a)));
    ck_assert_uint_eq(h->maps[0].fd_offset, 0);
    ck_assert_mem_eq(h->maps[0].head, "client bytes!!!", 16);
    ck_assert_uint_eq(npv_vus_dma_count(srv), 1);

    /* Refused: the client's map fails with the model's error, the server keeps nothing. */
    struct npv_dma *b = buf_new(c.ctx, 0x3c);
    ino_t ib_ino = ino_of(npv_dma_fd(b));
    pthread_mutex_lock(&h->lock);
    h->refuse = -EDQUOT;
    pthread_mutex_unlock(&h->lock);
    npv_iova_t ib;
    ck_assert_int_eq(npv_dma_map(b, c.dom, NPV_DMA_RW, &ib), -EDQUOT);
    ck_assert_uint_eq(count(h, &h->nr_maps), 2);
    ck_assert_uint_eq(h->maps[1].prot, NPV_VUS_DMA_READ | NPV_VUS_DMA_WRITE);
    ck_assert_uint_eq(npv_vus_dma_count(srv), 1);
    ck_assert_int_eq(maps_of(ib_ino), 1);          /* the client's own; the server's mmap is gone */
    ck_assert_uint_eq(count(h, &h->nr_unmaps), 0); /* a refused map is owed no unmap */

    /* No trace: the same buffer maps again (an entry left behind would make it EEXIST). */
    pthread_mutex_lock(&h->lock);
    h->refuse = 0;
    pthread_mutex_unlock(&h->lock);
    ck_assert_int_eq(npv_dma_map(b, c.dom, NPV_DMA_RW, &ib), 0);
    ck_assert_uint_eq(npv_vus_dma_count(srv), 2);
    ck_assert_int_eq(maps_of(ib_ino), 2);

    /* The client's unmap: the hook runs once, with the server's mmap still there. */
    pthread_mutex_lock(&h->lock);
    h->watch = ib_ino;
    pthread_mutex_unlock(&h->lock);
    ck_assert_int_eq(npv_dma_unmap(b, c.dom), 0);
    ck_assert_uint_eq(count(h, &h->nr_unmaps), 1);
    ck_assert_uint_eq(h->unmaps[0].iova, ib);
    ck_assert_uint_eq(h->unmaps[0].size, BUF_SIZE);
    ck_assert_int_eq(h->unmaps[0].mappings_of_file, 2);
    ck_assert_int_eq(maps_of(ib_ino), 1);
    ck_assert_uint_eq(npv_vus_dma_count(srv), 1);

    /* The client closes with a still mapped: its unmap comes once, before disconnect. */
    npv_dev_close(c.dev);
    c.dev = NULL;
    wait_count(h, &h->nr_disconnects, 1);
    ck_assert_uint_eq(count(h, &h->nr_unmaps), 2);
    ck_assert_uint_eq(h->unmaps[1].iova, ia);
    ck_assert_uint_lt(h->unmaps[1].seq, h->disconnect_seq);
    ck_assert_uint_eq(npv_vus_dma_count(srv), 0);

    npv_dma_free(a);
    npv_dma_free(b);
    client_close(&c); /* the domain and context, after the buffers they hold */
    npv_vus_stop(srv);
    void *ret;
    ck_assert_int_eq(pthread_join(loop, &ret), 0);
    ck_assert_int_eq((int)(intptr_t)ret, 0);
    npv_vus_free(srv);
    ck_assert_uint_eq(count(h, &h->nr_unmaps), 2); /* nothing owed twice */
    hooks_free(h);
    npv_ctx_free(sctx);
}
END_TEST

/* The child: open, map two buffers, say so, and wait to be killed. */
static void killed_client(const char *path, int tell)
{
    struct client c;
    if (client_open(&c, path) < 0)
        _exit(2);
    struct npv_dma *d[2];
    npv_iova_t iova;
    for (int i = 0; i < 2; i++)
        if (npv_dma_alloc(c.ctx, BUF_SIZE, NULL, &d[i]) < 0 ||
            npv_dma_map(d[i], c.dom, NPV_DMA_RW, &iova) < 0)
            _exit(3);
    if (write(tell, "m", 1) != 1)
        _exit(4);
    for (;;)
        pause();
}

START_TEST(dma_unmap_hook_runs_for_each_mapping_of_a_killed_client)
{
    struct npv_ctx *sctx = quiet_ctx();
    struct hooks *h = hooks_new();
    struct npv_vus *srv = server_new(sctx, h);
    const char *path = sock_path("kill");
    ck_assert_int_eq(npv_vus_listen(srv, path), 0);
    int tell[2];
    ck_assert_int_eq(pipe2(tell, O_CLOEXEC), 0);
    /* Forked before any thread of ours runs. */
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(tell[0]);
        killed_client(path, tell[1]);
    }
    close(tell[1]);
    pthread_t loop;
    ck_assert_int_eq(pthread_create(&loop, NULL, run_main, srv), 0);

    struct pollfd p = {.fd = tell[0], .events = POLLIN};
    ck_assert_int_eq(poll(&p, 1, (int)(GENEROUS_NS / 1000000)), 1);
    char m;
    ck_assert_int_eq(read(tell[0], &m, 1), 1);
    ck_assert_uint_eq(count(h, &h->nr_maps), 2);
    ck_assert_uint_eq(npv_vus_dma_count(srv), 2);

    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFSIGNALED(st));
    wait_count(h, &h->nr_disconnects, 1);
    ck_assert_uint_eq(count(h, &h->nr_unmaps), 2);
    /* Each mapping once, both before disconnect. */
    ck_assert_uint_eq(h->maps[0].iova == h->unmaps[0].iova ? h->maps[1].iova : h->maps[0].iova,
                      h->unmaps[1].iova);
    ck_assert_uint_ne(h->unmaps[0].iova, h->unmaps[1].iova);
    ck_assert_uint_lt(h->unmaps[1].seq, h->disconnect_seq);
    ck_assert_uint_eq(npv_vus_dma_count(srv), 0);

    npv_vus_stop(srv);
    ck_assert_int_eq(pthread_join(loop, NULL), 0);
    npv_vus_free(srv);
    ck_assert_uint_eq(count(h, &h->nr_unmaps), 2);
    close(tell[0]);
    hooks_free(h);
    npv_ctx_free(sctx);
}
END_TEST

/* ---- what our client never sends: DMA_UNMAP of all, a mapping without fd ---- */

struct served {
    pthread_t t;
    struct npv_vus *srv;
    int fd;
    int ret;
};

static void *serve_main(void *arg)
{
    struct served *sv = arg;
    sv->ret = npv_vus_serve_fd(sv->srv, sv->fd);
    return NULL;
}

static uint16_t raw_id;

static void raw_send(int sock, uint16_t cmd, const void *body, size_t len, const int *fds,
                     unsigned nr_fds)
{
    struct npv_vu_hdr h = {.msg_id = ++raw_id, .cmd = cmd, .flags = NPV_VU_F_TYPE_COMMAND};
    ck_assert_int_eq(npv_vu_send(sock, &h, body, len, fds, nr_fds, GENEROUS_NS), 0);
}

/* The reply to the last raw_send; asserts it is no error. */
static void raw_reply(int sock)
{
    struct npv_vu_msg rep;
    ck_assert_int_eq(npv_vu_recv(sock, &rep, 1u << 16, 8, GENEROUS_NS), 0);
    ck_assert_uint_eq(rep.hdr.msg_id, raw_id);
    ck_assert_msg(!(rep.hdr.flags & NPV_VU_F_ERROR), "command %u: error %u", rep.hdr.cmd,
                  rep.hdr.error);
    npv_vu_msg_release(&rep);
}

/* One raw request and its reply (a server thread answers). */
static void raw_call(int sock, uint16_t cmd, const void *body, size_t len, const int *fds,
                     unsigned nr_fds)
{
    raw_send(sock, cmd, body, len, fds, nr_fds);
    raw_reply(sock);
}

static void raw_version(int sock)
{
    char version[64] = {0};
    struct npv_vu_version v = {.major = NPV_VU_MAJOR, .minor = NPV_VU_MINOR};
    memcpy(version, &v, sizeof(v));
    const char *caps = "{\"capabilities\":{\"max_msg_fds\":8}}";
    strcpy(version + sizeof(v), caps);
    raw_send(sock, NPV_VU_CMD_VERSION, version, sizeof(v) + strlen(caps) + 1, NULL, 0);
}

START_TEST(dma_hooks_see_unmap_all_and_mappings_without_fd)
{
    struct npv_ctx *sctx = quiet_ctx();
    struct hooks *h = hooks_new();
    int pair[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    struct served sv = {.srv = server_new(sctx, h), .fd = pair[1], .ret = 1};
    ck_assert_int_eq(pthread_create(&sv.t, NULL, serve_main, &sv), 0);
    int sock = pair[0];

    raw_version(sock);
    raw_reply(sock);

    /* From an fd at an offset, then without fd (message DMA). */
    int mem = memfd_create("owner-hooks", MFD_CLOEXEC);
    ck_assert_int_ge(mem, 0);
    ck_assert_int_eq(ftruncate(mem, 0x2000), 0);
    struct npv_vu_dma_map m = {.argsz = sizeof(m),
                               .flags = NPV_VU_DMA_FLAG_READ | NPV_VU_DMA_FLAG_WRITE,
                               .offset = 0x1000,
                               .address = 0x100000,
                               .size = 0x1000};
    raw_call(sock, NPV_VU_CMD_DMA_MAP, &m, sizeof(m), &mem, 1);
    m = (struct npv_vu_dma_map){
        .argsz = sizeof(m), .flags = NPV_VU_DMA_FLAG_READ, .address = 0x200000, .size = 0x3000};
    raw_call(sock, NPV_VU_CMD_DMA_MAP, &m, sizeof(m), NULL, 0);
    ck_assert_uint_eq(count(h, &h->nr_maps), 2);
    ck_assert_uint_eq(h->maps[0].iova, 0x100000);
    ck_assert_uint_eq(h->maps[0].fd_offset, 0x1000);
    ck_assert_uint_eq(h->maps[0].ino, ino_of(mem));
    ck_assert(h->maps[0].has_vaddr);
    ck_assert_uint_eq(h->maps[1].iova, 0x200000);
    ck_assert_uint_eq(h->maps[1].size, 0x3000);
    ck_assert_uint_eq(h->maps[1].prot, NPV_VUS_DMA_READ);
    ck_assert(!h->maps[1].has_vaddr);
    ck_assert_uint_eq(h->maps[1].ino, 0); /* fd -1 */
    ck_assert_uint_eq(h->maps[1].fd_offset, 0);

    /* Unmap-all: each mapping's hook once. */
    struct npv_vu_dma_unmap u = {.argsz = sizeof(u), .flags = NPV_VU_DMA_UNMAP_FLAG_ALL};
    raw_call(sock, NPV_VU_CMD_DMA_UNMAP, &u, sizeof(u), NULL, 0);
    ck_assert_uint_eq(count(h, &h->nr_unmaps), 2);
    ck_assert_uint_ne(h->unmaps[0].iova, h->unmaps[1].iova);
    ck_assert(h->unmaps[0].iova == 0x100000 || h->unmaps[0].iova == 0x200000);
    ck_assert(h->unmaps[1].iova == 0x100000 || h->unmaps[1].iova == 0x200000);
    ck_assert_uint_eq(npv_vus_dma_count(sv.srv), 0);

    /* The client leaves: nothing more is owed. */
    close(sock);
    ck_assert_int_eq(pthread_join(sv.t, NULL), 0);
    ck_assert_int_eq(sv.ret, 0);
    ck_assert_uint_eq(count(h, &h->nr_disconnects), 1);
    npv_vus_free(sv.srv);
    ck_assert_uint_eq(count(h, &h->nr_unmaps), 2);
    close(mem);
    hooks_free(h);
    npv_ctx_free(sctx);
}
END_TEST

/* The server side, on this thread: take the next message from sock and handle it. */
static void serve_one(struct npv_vus *srv, int sock)
{
    struct npv_vu_msg m;
    ck_assert_int_eq(npv_vu_recv(sock, &m, 1u << 16, 8, GENEROUS_NS), 0);
    ck_assert_int_eq(npv_vus_handle(srv, &m), 0);
    npv_vu_msg_release(&m);
}

START_TEST(free_owes_the_model_the_unmaps_of_a_client_still_there)
{
    struct npv_ctx *sctx = quiet_ctx();
    struct hooks *h = hooks_new();
    struct npv_vus *srv = server_new(sctx, h);
    int pair[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    /* The connection, served message by message here (as the fuzzers do): no loop to end. */
    npv_vus_set_conn(srv, pair[1]);
    raw_version(pair[0]);
    serve_one(srv, pair[1]);
    raw_reply(pair[0]);
    int mem = memfd_create("owner-hooks", MFD_CLOEXEC);
    ck_assert_int_ge(mem, 0);
    ck_assert_int_eq(ftruncate(mem, 0x1000), 0);
    struct npv_vu_dma_map m = {
        .argsz = sizeof(m), .flags = NPV_VU_DMA_FLAG_WRITE, .address = 0x100000, .size = 0x1000};
    raw_send(pair[0], NPV_VU_CMD_DMA_MAP, &m, sizeof(m), &mem, 1);
    serve_one(srv, pair[1]);
    raw_reply(pair[0]);
    ck_assert_uint_eq(count(h, &h->nr_maps), 1);
    ck_assert_uint_eq(h->maps[0].prot, NPV_VUS_DMA_WRITE);

    /* Freed with the client still connected and its mapping in place. */
    npv_vus_free(srv);
    ck_assert_uint_eq(count(h, &h->nr_unmaps), 1);
    ck_assert_uint_eq(h->unmaps[0].iova, 0x100000);
    ck_assert_uint_eq(h->unmaps[0].size, 0x1000);
    ck_assert_uint_eq(count(h, &h->nr_disconnects), 1);
    ck_assert_uint_lt(h->unmaps[0].seq, h->disconnect_seq);
    close(pair[0]);
    close(mem);
    hooks_free(h);
    npv_ctx_free(sctx);
}
END_TEST

/* ---- an owner's own accept: serve_fd and refuse_fd ---- */

static int listen_at(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(l, 0);
    ck_assert_int_eq(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(l, 4), 0);
    return l;
}

struct owner_thread {
    pthread_t t;
    int listen_fd;
    struct npv_vus *srv;
    int ret;
};

/* What an owner does per client: accept on its own socket, serve on a thread of its own. */
static void *owner_main(void *arg)
{
    struct owner_thread *o = arg;
    int fd = accept4(o->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    o->ret = fd < 0 ? -errno : npv_vus_serve_fd(o->srv, fd);
    return NULL;
}

START_TEST(serve_fd_serves_two_clients_at_once_until_stopped)
{
    struct npv_ctx *sctx = quiet_ctx();
    const char *path = sock_path("serve");
    int l = listen_at(path);
    struct owner_thread o[2];
    for (int i = 0; i < 2; i++) {
        o[i] = (struct owner_thread){.listen_fd = l, .srv = server_new(sctx, NULL), .ret = 1};
        ck_assert_int_eq(pthread_create(&o[i].t, NULL, owner_main, &o[i]), 0);
    }

    struct client c[2];
    for (int i = 0; i < 2; i++) {
        int r = client_open(&c[i], path);
        ck_assert_msg(r == 0, "client %d: %s", i, npv_strerror(r));
    }
    /* Both served at once, each by its own server: a write lands in one BAR only. */
    uint32_t v[2] = {0x11111111u, 0x22222222u};
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(npv_dev_region_write(c[i].dev, 0, 0x40, &v[i], 4), 0);
    for (int i = 0; i < 2; i++) {
        uint32_t back;
        ck_assert_int_eq(npv_dev_region_read(c[i].dev, 0, 0x40, &back, 4), 0);
        ck_assert_uint_eq(back, v[i]);
        ck_assert(npv_vus_connected(o[i].srv));
    }
    uint32_t s0, s1;
    memcpy(&s0, (uint8_t *)npv_vus_region_mem(o[0].srv, 0) + 0x40, 4);
    memcpy(&s1, (uint8_t *)npv_vus_region_mem(o[1].srv, 0) + 0x40, 4);
    ck_assert((s0 == v[0] && s1 == v[1]) || (s0 == v[1] && s1 == v[0]));

    /* Stopped with their clients still there: both return, and the clients lose the device. */
    for (int i = 0; i < 2; i++)
        npv_vus_stop(o[i].srv);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(pthread_join(o[i].t, NULL), 0);
        ck_assert_int_eq(o[i].ret, 0);
        ck_assert(!npv_vus_connected(o[i].srv));
    }
    for (int i = 0; i < 2; i++) {
        uint32_t back;
        ck_assert_int_lt(npv_dev_region_read(c[i].dev, 0, 0x40, &back, 4), 0);
        client_close(&c[i]);
        npv_vus_free(o[i].srv);
    }
    close(l);
    unlink(path);
    npv_ctx_free(sctx);
}
END_TEST

struct opener {
    pthread_t t;
    const char *path;
    int ret;
};

static void *opener_main(void *arg)
{
    struct opener *op = arg;
    struct client c;
    op->ret = client_open(&c, op->path);
    if (op->ret == 0)
        npv_dev_close(c.dev);
    npv_domain_put(c.dom);
    npv_ctx_free(c.ctx);
    return NULL;
}

static const int refusals[] = {EUSERS, EDQUOT};

START_TEST(refuse_fd_fails_the_clients_open_with_that_error)
{
    struct npv_ctx *sctx = quiet_ctx();
    const char *path = sock_path("refuse");
    int l = listen_at(path);
    struct opener op = {.path = path, .ret = 1};
    ck_assert_int_eq(pthread_create(&op.t, NULL, opener_main, &op), 0);
    int fd = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    npv_vus_refuse_fd(sctx, fd, refusals[_i], (int)(GENEROUS_NS / 1000000));
    ck_assert_int_eq(pthread_join(op.t, NULL), 0);
    ck_assert_int_eq(op.ret, -refusals[_i]);
    /* fd was given away: closed (the next socket reuses the lowest number). */
    ck_assert_int_eq(fcntl(fd, F_GETFD), -1);
    close(l);
    unlink(path);
    npv_ctx_free(sctx);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("vfio_user_server_owner_hooks");
    TCase *tc = tcase_create("dma hooks");
    tcase_add_test(tc, dma_map_hook_sees_the_clients_mapping_and_may_refuse_it);
    tcase_add_test(tc, dma_unmap_hook_runs_for_each_mapping_of_a_killed_client);
    tcase_add_test(tc, dma_hooks_see_unmap_all_and_mappings_without_fd);
    tcase_add_test(tc, free_owes_the_model_the_unmaps_of_a_client_still_there);
    suite_add_tcase(s, tc);
    tc = tcase_create("owner accept");
    tcase_add_test(tc, serve_fd_serves_two_clients_at_once_until_stopped);
    tcase_add_loop_test(tc, refuse_fd_fails_the_clients_open_with_that_error, 0,
                        (int)(sizeof(refusals) / sizeof(refusals[0])));
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return npv_test_run(suite());
}

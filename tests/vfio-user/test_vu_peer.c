/* SPDX-License-Identifier: MIT */
/*
 * The client facing a server that misbehaves: a version we do not speak, no
 * reply, a reply to nothing, a malformed region description, a server killed
 * in the middle of a request, a twin socket claimed but not given. Every call
 * returns an error within its deadline, and nothing (fd, mapping) is left
 * behind. And the client facing servers that differ from ours in what the
 * spec leaves open: error replies with a body, twin sockets.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <npuvfio/ctx.h>
#include <npuvfio/irq.h>

#include "harness.h"
#include "vfio_user_client.h"

static struct vu_server srv;
static struct npv_ctx *ctx;

static void setup(void)
{
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    /* The failures below are the point; their log lines are noise here. */
    npv_ctx_set_log_level(ctx, NPV_LOG_ERROR);
}

static void teardown(void)
{
    vu_server_kill(&srv);
    npv_ctx_free(ctx);
}

static int open_dev(uint64_t timeout_ns, struct npv_dev **dev)
{
    struct npv_dev_opts opts = {.request_timeout_ns = timeout_ns};
    return npv_dev_open_vfio_user(ctx, srv.path, NULL, &opts, dev);
}

/* ---- negotiation ---- */

static void script_idle(int sock, unsigned nth, const struct vu_fake *f)
{
    (void)nth;
    struct npv_vu_msg m;
    while (fake_next(sock, f, &m) == 0)
        npv_vu_msg_release(&m);
}

START_TEST(open_refuses_a_major_version_it_does_not_speak)
{
    struct vu_fake f = {.script = script_idle, .major = 1};
    vu_server_start(&srv, vu_serve_fake, &f);
    struct npv_dev *dev = NULL;
    int fds = count_fds();
    ck_assert_int_eq(open_dev(GENEROUS_NS, &dev), -EPROTONOSUPPORT);
    ck_assert_ptr_null(dev);
    ck_assert_int_eq(count_fds(), fds);
}
END_TEST

static void script_close_at_once(int sock, unsigned nth, const struct vu_fake *f)
{
    (void)sock;
    (void)nth;
    (void)f;
}

START_TEST(open_fails_when_the_server_hangs_up_during_negotiation)
{
    struct vu_fake f = {.script = script_close_at_once};
    vu_server_start(&srv, vu_serve_fake, &f);
    struct npv_dev *dev = NULL;
    ck_assert_int_eq(open_dev(GENEROUS_NS, &dev), -ENOTCONN);
}
END_TEST

START_TEST(open_without_a_server_fails)
{
    /* A stale pointer in *out must not survive a failed open (callers free it on error). */
    struct npv_dev *dev = (struct npv_dev *)&dev;
    int fds = count_fds();
    int r = npv_dev_open_vfio_user(ctx, "/tmp/npv-no-such-dir/dev.sock", NULL, NULL, &dev);
    ck_assert_int_eq(r, -ENOENT);
    ck_assert_ptr_null(dev);
    ck_assert_int_eq(count_fds(), fds);
}
END_TEST

static void script_answer_region_reads(int sock, unsigned nth, const struct vu_fake *f)
{
    (void)nth;
    struct npv_vu_msg m;
    while (fake_next(sock, f, &m) == 0) {
        if (m.hdr.cmd == NPV_VU_CMD_REGION_READ) {
            struct npv_vu_region_access a;
            memcpy(&a, m.body, sizeof(a));
            uint8_t buf[sizeof(a) + 8] = {0};
            memcpy(buf, &a, sizeof(a));
            memset(buf + sizeof(a), 0x77, a.count <= 8 ? a.count : 8);
            fake_reply(sock, &m, buf, sizeof(a) + (a.count <= 8 ? a.count : 8));
        } else {
            struct npv_vu_hdr h = {.msg_id = m.hdr.msg_id,
                                   .cmd = m.hdr.cmd,
                                   .flags = NPV_VU_F_TYPE_REPLY | NPV_VU_F_ERROR,
                                   .error = EACCES};
            fake_send(sock, &h, NULL, 0);
        }
        npv_vu_msg_release(&m);
    }
}

START_TEST(error_reply_carries_the_servers_errno)
{
    struct vu_fake f = {.script = script_answer_region_reads};
    vu_server_start(&srv, vu_serve_fake, &f);
    struct npv_dev *dev;
    ck_assert_int_eq(open_dev(GENEROUS_NS, &dev), 0);
    uint32_t v = 0;
    ck_assert_int_eq(npv_dev_region_read(dev, 0, 0, &v, 4), 0);
    ck_assert_uint_eq(v, 0x77777777);
    ck_assert_int_eq(npv_dev_region_write(dev, 0, 0, &v, 4), -EACCES);
    /* An index the device never listed does not reach the wire. */
    ck_assert_int_eq(npv_dev_region_read(dev, 9, 0, &v, 4), -EINVAL);
    npv_dev_close(dev);
}
END_TEST

/* REGION_READ at 0 is refused the way libvfio-user refuses it: the error with the reply body. */
static void script_refuse_with_body(int sock, unsigned nth, const struct vu_fake *f)
{
    (void)nth;
    struct npv_vu_msg m;
    while (fake_next(sock, f, &m) == 0) {
        struct npv_vu_region_access a;
        memcpy(&a, m.body, sizeof(a));
        uint8_t buf[sizeof(a) + 4];
        memcpy(buf, &a, sizeof(a));
        memset(buf + sizeof(a), 0x77, 4);
        if (a.offset == 0) {
            struct npv_vu_hdr h = {.msg_id = m.hdr.msg_id,
                                   .cmd = m.hdr.cmd,
                                   .flags = NPV_VU_F_TYPE_REPLY | NPV_VU_F_ERROR,
                                   .error = EACCES};
            fake_send(sock, &h, buf, sizeof(buf));
        } else {
            fake_reply(sock, &m, buf, sizeof(buf));
        }
        npv_vu_msg_release(&m);
    }
}

START_TEST(error_reply_with_a_body_fails_that_request_only)
{
    struct vu_fake f = {.script = script_refuse_with_body};
    vu_server_start(&srv, vu_serve_fake, &f);
    struct npv_dev *dev;
    ck_assert_int_eq(open_dev(GENEROUS_NS, &dev), 0);
    for (int i = 0; i < 100; i++) {
        uint32_t v = 0;
        ck_assert_int_eq(npv_dev_region_read(dev, 0, 0, &v, 4), -EACCES);
        ck_assert_int_eq(npv_dev_region_read(dev, 0, 4, &v, 4), 0);
        ck_assert_uint_eq(v, 0x77777777);
    }
    npv_dev_close(dev);
}
END_TEST

/* ---- deadlines and disconnects ---- */

static void script_never_reply(int sock, unsigned nth, const struct vu_fake *f)
{
    (void)nth;
    struct npv_vu_msg m;
    if (fake_next(sock, f, &m) == 0)
        fake_hang();
}

START_TEST(request_without_a_reply_times_out)
{
    struct vu_fake f = {.script = script_never_reply};
    vu_server_start(&srv, vu_serve_fake, &f);
    struct npv_dev *dev;
    ck_assert_int_eq(open_dev(100 * MS, &dev), 0);
    uint32_t v;
    ck_assert_int_eq(npv_dev_region_read(dev, 0, 0, &v, 4), -ETIMEDOUT);
    npv_dev_close(dev);
}
END_TEST

/* The first REGION_READ is answered late, after the second arrived; the rest at once. */
static void script_late_first_reply(int sock, unsigned nth, const struct vu_fake *f)
{
    (void)nth;
    struct npv_vu_msg first, m;
    if (fake_next(sock, f, &first) != 0)
        return;
    while (fake_next(sock, f, &m) == 0) {
        struct npv_vu_msg *which[2] = {&first, &m};
        for (int i = 0; i < 2; i++) {
            if (which[i]->hdr.size == 0)
                continue;
            struct npv_vu_region_access a;
            memcpy(&a, which[i]->body, sizeof(a));
            uint8_t buf[sizeof(a) + 4];
            memcpy(buf, &a, sizeof(a));
            memset(buf + sizeof(a), 0x55, 4);
            fake_reply(sock, which[i], buf, sizeof(buf));
            npv_vu_msg_release(which[i]);
        }
    }
}

START_TEST(timed_out_request_leaves_the_connection_dead)
{
    struct vu_fake f = {.script = script_late_first_reply};
    vu_server_start(&srv, vu_serve_fake, &f);
    int fds = count_fds();
    struct npv_dev *dev;
    ck_assert_int_eq(open_dev(100 * MS, &dev), 0);
    uint32_t v;
    ck_assert_int_eq(npv_dev_region_read(dev, 0, 0, &v, 4), -ETIMEDOUT);
    /*
     * The server would answer this one (and the late first): the connection
     * must refuse it all the same, since the server may have acted on a
     * request we count as failed.
     */
    ck_assert_int_eq(npv_dev_region_read(dev, 0, 4, &v, 4), -ENOTCONN);
    ck_assert_int_eq(npv_dev_reset(dev), -ENOTCONN);
    npv_dev_close(dev);
    ck_assert_int_eq(count_fds(), fds);
}
END_TEST

struct killer {
    pid_t pid;
    unsigned delay_ms;
};

static void *kill_later(void *arg)
{
    struct killer *k = arg;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)k->delay_ms * 1000000};
    nanosleep(&ts, NULL);
    kill(k->pid, SIGKILL);
    return NULL;
}

START_TEST(server_killed_mid_request_fails_the_call_before_its_deadline)
{
    struct vu_fake f = {.script = script_never_reply};
    vu_server_start(&srv, vu_serve_fake, &f);
    int fds = count_fds();
    struct npv_dev *dev;
    ck_assert_int_eq(open_dev(GENEROUS_NS, &dev), 0);
    struct killer k = {.pid = srv.pid, .delay_ms = 100};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, kill_later, &k), 0);
    uint32_t v;
    /* The deadline is 30 s: -ENOTCONN instead of -ETIMEDOUT shows the death was noticed. */
    ck_assert_int_eq(npv_dev_region_read(dev, 0, 0, &v, 4), -ENOTCONN);
    pthread_join(t, NULL);
    ck_assert_int_eq(npv_dev_region_read(dev, 0, 0, &v, 4), -ENOTCONN);
    ck_assert_int_eq(npv_dev_reset(dev), -ENOTCONN);
    npv_dev_close(dev);
    ck_assert_int_eq(count_fds(), fds);
}
END_TEST

/* Warm up once so thread arenas and lazily made mappings exist before counting. */
static void td_cycle(void)
{
    struct td t;
    td_open(&t, srv.path);
    td_enable(&t, true);
    td_close(&t);
}

START_TEST(killed_testdev_fails_calls_and_close_leaks_nothing)
{
    vu_server_start(&srv, vu_serve_testdev, NULL);
    td_cycle();
    int fds = count_fds(), maps = count_maps();

    struct td t;
    td_open(&t, srv.path);
    td_enable(&t, true);
    ck_assert_int_gt(count_fds(), fds);

    kill(srv.pid, SIGKILL);
    uint64_t v;
    /* Until the receive thread sees the EOF a call may still be on its way: wait for it. */
    int r = 0;
    for (int i = 0; i < 3000; i++) {
        r = npv_bar_read(t.bar, TESTDEV_REG_ID, 4, &v);
        if (r != 0)
            break;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 10000000};
        nanosleep(&ts, NULL);
    }
    ck_assert_int_eq(r, -ENOTCONN);
    ck_assert_uint_eq(npv_bar_read32(t.bar, TESTDEV_REG_ID), 0xffffffffu);
    td_close(&t);
    ck_assert_int_eq(count_fds(), fds);
    ck_assert_int_le(count_maps(), maps + MAPS_SLACK);
}
END_TEST

/* ---- hostile replies ---- */

struct region_reply {
    uint8_t body[256];
    size_t len;
    int fd; /* sent along when >= 0 */
};

static void script_region_info(int sock, unsigned nth, const struct vu_fake *f)
{
    (void)nth;
    const struct region_reply *rr = f->arg;
    struct npv_vu_msg m;
    while (fake_next(sock, f, &m) == 0) {
        if (m.hdr.cmd == NPV_VU_CMD_DEVICE_GET_REGION_INFO)
            fake_reply_fds(sock, &m, rr->body, rr->len, rr->fd >= 0 ? &rr->fd : NULL,
                           rr->fd >= 0 ? 1 : 0);
        npv_vu_msg_release(&m);
    }
}

static void region_reply_init(struct region_reply *rr, uint32_t flags, uint32_t cap_offset)
{
    memset(rr, 0, sizeof(*rr));
    rr->fd = -1;
    struct npv_vu_region_info ri = {.argsz = sizeof(rr->body),
                                    .flags = flags,
                                    .index = 0,
                                    .cap_offset = cap_offset,
                                    .size = 0x4000};
    memcpy(rr->body, &ri, sizeof(ri));
    rr->len = sizeof(rr->body);
}

static int region_info_from(struct region_reply *rr, struct npv_region_info *ri)
{
    struct vu_fake f = {.script = script_region_info, .arg = rr};
    vu_server_start(&srv, vu_serve_fake, &f);
    struct npv_dev *dev;
    ck_assert_int_eq(open_dev(GENEROUS_NS, &dev), 0);
    int fds = count_fds();
    int r = npv_dev_region_info(dev, 0, ri);
    npv_dev_close(dev);
    /* Whatever the reply held, nothing stays open after close. */
    ck_assert_int_le(count_fds(), fds);
    return r;
}

START_TEST(region_info_with_a_looping_cap_chain_is_refused)
{
    struct region_reply rr;
    region_reply_init(&rr, NPV_VU_REGION_FLAG_READ | NPV_VU_REGION_FLAG_CAPS, 32);
    struct npv_vu_cap_hdr h = {.id = 99, .version = 1, .next = 32};
    memcpy(rr.body + 32, &h, sizeof(h));
    struct npv_region_info ri;
    ck_assert_int_eq(region_info_from(&rr, &ri), -NPV_EPEERPROTO);
}
END_TEST

START_TEST(region_info_with_a_cap_beyond_the_reply_is_refused)
{
    struct region_reply rr;
    region_reply_init(&rr, NPV_VU_REGION_FLAG_READ | NPV_VU_REGION_FLAG_CAPS, 4000);
    struct npv_region_info ri;
    ck_assert_int_eq(region_info_from(&rr, &ri), -NPV_EPEERPROTO);
}
END_TEST

START_TEST(region_info_with_a_sparse_area_beyond_the_region_is_refused)
{
    struct region_reply rr;
    region_reply_init(
        &rr, NPV_VU_REGION_FLAG_READ | NPV_VU_REGION_FLAG_MMAP | NPV_VU_REGION_FLAG_CAPS, 32);
    struct npv_vu_cap_sparse_mmap cap = {
        .header = {.id = NPV_VU_REGION_CAP_SPARSE_MMAP, .version = 1}, .nr_areas = 1};
    struct npv_vu_sparse_area a = {.offset = 0x3000, .size = 0x2000};
    memcpy(rr.body + 32, &cap, sizeof(cap));
    memcpy(rr.body + 32 + sizeof(cap), &a, sizeof(a));
    rr.fd = memfd_create("region", MFD_CLOEXEC);
    ck_assert_int_ge(rr.fd, 0);
    struct npv_region_info ri;
    ck_assert_int_eq(region_info_from(&rr, &ri), -NPV_EPEERPROTO);
    close(rr.fd);
}
END_TEST

START_TEST(region_info_with_mmap_but_no_fd_is_reported_trapped)
{
    struct region_reply rr;
    region_reply_init(&rr, NPV_VU_REGION_FLAG_READ | NPV_VU_REGION_FLAG_MMAP, 0);
    struct npv_region_info ri;
    ck_assert_int_eq(region_info_from(&rr, &ri), 0);
    ck_assert_uint_eq(ri.flags & NPV_REGION_MMAP, 0);
    ck_assert_uint_eq(ri.nr_mmap_areas, 0);
    ck_assert_uint_eq(ri.size, 0x4000);
}
END_TEST

static void script_stray_reply(int sock, unsigned nth, const struct vu_fake *f)
{
    (void)nth;
    struct npv_vu_msg m;
    if (fake_next(sock, f, &m) != 0)
        return;
    struct npv_vu_hdr h = {
        .msg_id = (uint16_t)(m.hdr.msg_id + 1000), .cmd = m.hdr.cmd, .flags = NPV_VU_F_TYPE_REPLY};
    fake_send(sock, &h, NULL, 0);
    npv_vu_msg_release(&m);
    fake_hang();
}

START_TEST(reply_to_a_request_never_sent_ends_the_connection)
{
    struct vu_fake f = {.script = script_stray_reply};
    vu_server_start(&srv, vu_serve_fake, &f);
    struct npv_dev *dev;
    ck_assert_int_eq(open_dev(GENEROUS_NS, &dev), 0);
    ck_assert_int_eq(npv_dev_reset(dev), -ENOTSUP); /* the fake has no reset */
    uint32_t v;
    ck_assert_int_eq(npv_dev_region_read(dev, 0, 0, &v, 4), -NPV_EPEERPROTO);
    ck_assert_int_eq(npv_dev_region_read(dev, 0, 0, &v, 4), -NPV_EPEERPROTO);
    npv_dev_close(dev);
}
END_TEST

static void script_short_read(int sock, unsigned nth, const struct vu_fake *f)
{
    (void)nth;
    struct npv_vu_msg m;
    while (fake_next(sock, f, &m) == 0) {
        struct npv_vu_region_access a;
        memcpy(&a, m.body, sizeof(a));
        a.count = 2; /* asked for 4; the body says 4 more bytes follow */
        uint8_t buf[sizeof(a) + 4] = {0};
        memcpy(buf, &a, sizeof(a));
        fake_reply(sock, &m, buf, sizeof(buf));
        npv_vu_msg_release(&m);
    }
}

START_TEST(region_read_reply_with_an_inconsistent_count_is_refused)
{
    struct vu_fake f = {.script = script_short_read};
    vu_server_start(&srv, vu_serve_fake, &f);
    struct npv_dev *dev;
    ck_assert_int_eq(open_dev(GENEROUS_NS, &dev), 0);
    uint32_t v;
    ck_assert_int_eq(npv_dev_region_read(dev, 0, 0, &v, 4), -NPV_EPEERPROTO);
    npv_dev_close(dev);
}
END_TEST

/* Send the client a DMA command and return the errno of its (error) reply, 0 for success. */
static uint16_t dma_probe(int sock, uint16_t cmd, uint64_t address, uint64_t count, size_t data)
{
    uint8_t body[sizeof(struct npv_vu_dma_access) + 16] = {0};
    struct npv_vu_dma_access a = {.address = address, .count = count};
    memcpy(body, &a, sizeof(a));
    struct npv_vu_hdr h = {.msg_id = 77, .cmd = cmd, .flags = NPV_VU_F_TYPE_COMMAND};
    fake_send(sock, &h, body, sizeof(a) + data);
    struct npv_vu_msg r;
    if (npv_vu_recv(sock, &r, 1u << 22, 0, (int64_t)GENEROUS_NS) < 0 || r.hdr.msg_id != 77 ||
        (r.hdr.flags & NPV_VU_F_TYPE_MASK) != NPV_VU_F_TYPE_REPLY)
        _exit(8);
    uint16_t err = (r.hdr.flags & NPV_VU_F_ERROR) ? (uint16_t)r.hdr.error : 0;
    npv_vu_msg_release(&r);
    return err;
}

/* Answers the first REGION_READ with the errnos the client gave to DMA probes. */
static void script_dma_probes(int sock, unsigned nth, const struct vu_fake *f)
{
    (void)nth;
    struct npv_vu_msg m;
    if (fake_next(sock, f, &m) != 0)
        return;
    /* With twin sockets the commands and their replies travel on the second one. */
    int dsock = fake_twin_sock >= 0 ? fake_twin_sock : sock;
    uint16_t e[4] = {
        dma_probe(dsock, NPV_VU_CMD_DMA_WRITE, 0x1000, 8, 8),         /* nothing mapped there */
        dma_probe(dsock, NPV_VU_CMD_DMA_READ, 0x1000, 8, 0),          /* nothing mapped there */
        dma_probe(dsock, NPV_VU_CMD_DMA_WRITE, 0x1000, 16, 8),        /* count beyond the data */
        dma_probe(dsock, NPV_VU_CMD_DMA_READ, 0x1000, 1ull << 40, 0), /* beyond any transfer */
    };
    struct npv_vu_region_access a;
    memcpy(&a, m.body, sizeof(a));
    uint8_t buf[sizeof(a) + 8];
    memcpy(buf, &a, sizeof(a));
    memcpy(buf + sizeof(a), e, 8);
    fake_reply(sock, &m, buf, sizeof(a) + 8);
    npv_vu_msg_release(&m);
    struct npv_vu_msg rest;
    while (fake_next(sock, f, &rest) == 0)
        npv_vu_msg_release(&rest);
}

START_TEST(server_dma_outside_our_mappings_is_refused)
{
    /* _i: 0 one socket, 1 twin sockets. */
    struct vu_fake f = {.script = script_dma_probes, .twin = _i ? FAKE_TWIN_OFFER : FAKE_TWIN_NONE};
    vu_server_start(&srv, vu_serve_fake, &f);
    struct npv_dev *dev;
    ck_assert_int_eq(open_dev(GENEROUS_NS, &dev), 0);
    uint16_t e[4];
    ck_assert_int_eq(npv_dev_region_read(dev, 0, 0, e, 8), 0);
    ck_assert_uint_eq(e[0], EFAULT);
    ck_assert_uint_eq(e[1], EFAULT);
    ck_assert_uint_eq(e[2], EINVAL);
    ck_assert_uint_eq(e[3], EINVAL);
    struct vu_client *c = dev->priv;
    ck_assert_int_eq(c->twin_sock >= 0, _i);
    npv_dev_close(dev);
}
END_TEST

/* ---- twin sockets and transfer limits ---- */

START_TEST(open_refuses_a_twin_socket_claim_it_cannot_use)
{
    /* _i: claimed without fd_index, or with an index past the fds. */
    struct vu_fake f = {.script = script_idle,
                        .twin = _i ? FAKE_TWIN_BAD_INDEX : FAKE_TWIN_NO_INDEX};
    vu_server_start(&srv, vu_serve_fake, &f);
    int fds = count_fds();
    struct npv_dev *dev = NULL;
    ck_assert_int_eq(open_dev(GENEROUS_NS, &dev), -NPV_EPEERPROTO);
    ck_assert_ptr_null(dev);
    ck_assert_int_eq(count_fds(), fds);
}
END_TEST

#define BIG_IOVA 0x100000ull
#define BIG_LEN  (64u << 10)

/* Maps and unmaps are taken; the first REGION_READ is answered with a DMA_READ's errno. */
static void script_big_dma_read(int sock, unsigned nth, const struct vu_fake *f)
{
    (void)nth;
    struct npv_vu_msg m;
    while (fake_next(sock, f, &m) == 0) {
        if (m.hdr.cmd == NPV_VU_CMD_REGION_READ) {
            uint16_t e[2] = {
                dma_probe(sock, NPV_VU_CMD_DMA_READ, BIG_IOVA, BIG_LEN, 0),
                dma_probe(sock, NPV_VU_CMD_DMA_READ, BIG_IOVA, NPV_VU_CLIENT_MAX_XFER + 1ull, 0),
            };
            struct npv_vu_region_access a;
            memcpy(&a, m.body, sizeof(a));
            uint8_t buf[sizeof(a) + 4];
            memcpy(buf, &a, sizeof(a));
            memcpy(buf + sizeof(a), e, 4);
            fake_reply(sock, &m, buf, sizeof(buf));
        } else {
            fake_reply(sock, &m, NULL, 0);
        }
        npv_vu_msg_release(&m);
    }
}

START_TEST(server_dma_read_is_bounded_by_what_the_client_advertised)
{
    /* The server takes 4 KiB per message; the client said it takes 1 MiB. */
    struct vu_fake f = {.script = script_big_dma_read, .max_data_xfer_size = 4096};
    vu_server_start(&srv, vu_serve_fake, &f);
    struct npv_dev *dev;
    ck_assert_int_eq(open_dev(GENEROUS_NS, &dev), 0);
    struct vu_client *c = dev->priv;
    uint8_t *mem = aligned_alloc(4096, 2u << 20);
    ck_assert_ptr_nonnull(mem);
    struct npv_mapping map = {
        .iova = BIG_IOVA, .len = 2u << 20, .vaddr = mem, .fd = -1, .prot = NPV_DMA_RW};
    ck_assert_int_eq(c->sink.ops->map(&c->sink, &map), 0);
    uint16_t e[2];
    ck_assert_int_eq(npv_dev_region_read(dev, 0, 0, e, 4), 0);
    ck_assert_uint_eq(e[0], 0);
    ck_assert_uint_eq(e[1], EINVAL);
    ck_assert_int_eq(c->sink.ops->unmap(&c->sink, &map), 0);
    npv_dev_close(dev);
    free(mem);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("vfio-user peer");
    TCase *tc = tcase_create("negotiation");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, open_refuses_a_major_version_it_does_not_speak);
    tcase_add_test(tc, open_fails_when_the_server_hangs_up_during_negotiation);
    tcase_add_test(tc, open_without_a_server_fails);
    tcase_add_test(tc, error_reply_carries_the_servers_errno);
    tcase_add_test(tc, error_reply_with_a_body_fails_that_request_only);
    tcase_add_loop_test(tc, open_refuses_a_twin_socket_claim_it_cannot_use, 0, 2);
    suite_add_tcase(s, tc);
    tc = tcase_create("disconnect");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, request_without_a_reply_times_out);
    tcase_add_test(tc, timed_out_request_leaves_the_connection_dead);
    tcase_add_test(tc, server_killed_mid_request_fails_the_call_before_its_deadline);
    tcase_add_test(tc, killed_testdev_fails_calls_and_close_leaks_nothing);
    suite_add_tcase(s, tc);
    tc = tcase_create("hostile");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, region_info_with_a_looping_cap_chain_is_refused);
    tcase_add_test(tc, region_info_with_a_cap_beyond_the_reply_is_refused);
    tcase_add_test(tc, region_info_with_a_sparse_area_beyond_the_region_is_refused);
    tcase_add_test(tc, region_info_with_mmap_but_no_fd_is_reported_trapped);
    tcase_add_test(tc, reply_to_a_request_never_sent_ends_the_connection);
    tcase_add_test(tc, region_read_reply_with_an_inconsistent_count_is_refused);
    tcase_add_loop_test(tc, server_dma_outside_our_mappings_is_refused, 0, 2);
    tcase_add_test(tc, server_dma_read_is_bounded_by_what_the_client_advertised);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

/* SPDX-License-Identifier: MIT */
/*
 * Posted register writes over vfio-user (issue 25): trapped BAR writes sent
 * with NO_REPLY once the server offers "write_multiple", ordered by the next
 * read or flush (a REGION_WRITE_MULTI fence), their failure reported by the
 * next synchronous call; a server that does not offer them gets every write
 * synchronously as before.
 *
 * A scripted server counts what arrives (posted writes, replied writes,
 * fences); the testdev model checks the real server's side.
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <npuvfio/ctx.h>
#include <npuvfio/irq.h>

#include "dev_internal.h"
#include "harness.h"

/* ---- a scripted server that counts ---- */

/* Region 0 of the fake: 64 registers of 4 bytes, and the counters read at COUNTS. */
#define FAKE_REGS   64u
#define FAKE_COUNTS 0x1000u

struct fake_counts {
    uint32_t posted;   /* REGION_WRITE with NO_REPLY */
    uint32_t replied;  /* REGION_WRITE waiting for its reply */
    uint32_t fences;   /* REGION_WRITE_MULTI waiting for its reply */
    uint32_t order_ok; /* 1 while every write arrived in the order of its value */
    uint32_t batched;  /* writes that came inside a REGION_WRITE_MULTI */
    uint32_t batches;  /* REGION_WRITE_MULTI with writes in it, reply or not */
    uint32_t bad;      /* a REGION_WRITE_MULTI that broke the spec's layout */
    uint32_t pad;
};

/* One write as the fake carries it out: 4-byte registers, values checked for order. */
static void fake_write(uint32_t *regs, struct fake_counts *n, uint32_t *last, uint64_t off,
                       uint32_t v)
{
    if (off / 4 < FAKE_REGS)
        regs[off / 4] = v;
    /* The tests write increasing values: one out of order is a reordered write. */
    if (v < *last)
        n->order_ok = 0;
    *last = v;
}

static void script_count(int sock, unsigned nth, const struct vu_fake *f)
{
    (void)nth;
    uint32_t regs[FAKE_REGS] = {0};
    struct fake_counts n = {.order_ok = 1};
    uint32_t last = 0;
    struct npv_vu_msg m;
    while (fake_next(sock, f, &m) == 0) {
        struct npv_vu_region_access a;
        if (m.hdr.cmd == NPV_VU_CMD_REGION_WRITE && m.body_len == sizeof(a) + 4) {
            memcpy(&a, m.body, sizeof(a));
            uint32_t v;
            memcpy(&v, m.body + sizeof(a), 4);
            fake_write(regs, &n, &last, a.offset, v);
            if (m.hdr.flags & NPV_VU_F_NO_REPLY) {
                n.posted++;
            } else {
                n.replied++;
                fake_reply(sock, &m, &a, sizeof(a));
            }
        } else if (m.hdr.cmd == NPV_VU_CMD_REGION_WRITE_MULTI) {
            struct npv_vu_write_multi rep = {.wr_cnt = 0};
            memcpy(&rep, m.body, m.body_len >= 8 ? 8 : 0);
            /* The spec's layout: wr_cnt, then wr_cnt 24-byte writes of 1 to 8 bytes. */
            if (m.body_len != 8 + rep.wr_cnt * sizeof(struct npv_vu_write_one) ||
                rep.wr_cnt > NPV_VU_MAX_WRITE_MULTI)
                n.bad++;
            for (uint64_t i = 0; n.bad == 0 && i < rep.wr_cnt; i++) {
                struct npv_vu_write_one w;
                memcpy(&w, m.body + 8 + i * sizeof(w), sizeof(w));
                uint32_t v;
                memcpy(&v, w.data, 4);
                if (w.count != 4 || w.region != 0)
                    n.bad++;
                fake_write(regs, &n, &last, w.offset, v);
                n.batched++;
            }
            if (rep.wr_cnt > 0)
                n.batches++;
            if (!(m.hdr.flags & NPV_VU_F_NO_REPLY)) {
                n.fences++;
                fake_reply(sock, &m, &rep, sizeof(rep));
            }
        } else if (m.hdr.cmd == NPV_VU_CMD_REGION_READ && m.body_len == sizeof(a)) {
            memcpy(&a, m.body, sizeof(a));
            uint8_t buf[sizeof(a) + 64] = {0};
            _Static_assert(sizeof(n) <= 64, "counts fit a read");
            memcpy(buf, &a, sizeof(a));
            if (a.offset == FAKE_COUNTS && a.count == sizeof(n))
                memcpy(buf + sizeof(a), &n, sizeof(n));
            else if (a.count == 4 && a.offset / 4 < FAKE_REGS)
                memcpy(buf + sizeof(a), &regs[a.offset / 4], 4);
            fake_reply(sock, &m, buf, sizeof(a) + (a.count <= 64 ? a.count : 0));
        } else if (!(m.hdr.flags & NPV_VU_F_NO_REPLY)) {
            struct npv_vu_hdr h = {.msg_id = m.hdr.msg_id,
                                   .cmd = m.hdr.cmd,
                                   .flags = NPV_VU_F_TYPE_REPLY | NPV_VU_F_ERROR,
                                   .error = ENOSYS};
            fake_send(sock, &h, NULL, 0);
        }
        npv_vu_msg_release(&m);
    }
}

static struct vu_server srv;
static struct npv_ctx *ctx;

static struct npv_dev *open_fake(struct vu_fake *f)
{
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    vu_server_start(&srv, vu_serve_fake, f);
    struct npv_dev_opts opts = {.request_timeout_ns = GENEROUS_NS};
    struct npv_dev *dev = NULL;
    int r = npv_dev_open_vfio_user(ctx, srv.path, NULL, &opts, &dev);
    ck_assert_msg(r == 0, "open: %s", npv_strerror(r));
    return dev;
}

static void close_fake(struct npv_dev *dev)
{
    npv_dev_close(dev);
    vu_server_kill(&srv);
    npv_ctx_free(ctx);
}

/* Ten writes the way npv_bar_write sends a trapped one, then what the server saw. */
static struct fake_counts ten_writes_then_counts(struct npv_dev *dev)
{
    for (uint32_t i = 0; i < 10; i++) {
        uint32_t v = 100 + i;
        ck_assert_int_eq(npv_dev_region_write_posted(dev, 0, 4 * i, &v, 4), 0);
    }
    struct fake_counts n;
    ck_assert_int_eq(npv_dev_region_read(dev, 0, FAKE_COUNTS, &n, sizeof(n)), 0);
    for (uint32_t i = 0; i < 10; i++) {
        uint32_t v = 0;
        ck_assert_int_eq(npv_dev_region_read(dev, 0, 4 * i, &v, 4), 0);
        ck_assert_uint_eq(v, 100 + i);
    }
    return n;
}

START_TEST(writes_are_posted_to_a_server_offering_write_multiple)
{
    struct vu_fake f = {.script = script_count, .write_multiple = true};
    struct npv_dev *dev = open_fake(&f);
    struct npv_dev_stats st0, st1;
    ck_assert_int_eq(npv_dev_stats(dev, &st0), 0);
    struct fake_counts n = ten_writes_then_counts(dev);
    /*
     * The ten writes left batched (as the fence in front of the read, or,
     * when this thread was descheduled for longer than the flusher's hold,
     * partly on their own): nothing waited for per write.
     */
    ck_assert_uint_eq(n.posted, 0);
    ck_assert_uint_eq(n.replied, 0);
    ck_assert_uint_eq(n.batched, 10);
    ck_assert_uint_ge(n.batches, 1);
    ck_assert_uint_eq(n.fences, 1);
    ck_assert_uint_eq(n.bad, 0);
    ck_assert_uint_eq(n.order_ok, 1);
    /* Messages: the batch as the fence, the first read, the ten reads of ten_writes_then_counts. */
    ck_assert_int_eq(npv_dev_stats(dev, &st1), 0);
    ck_assert_uint_ge(st1.messages - st0.messages, 12);
    ck_assert_uint_le(st1.messages - st0.messages, 12 + n.batches);
    /* Reads with nothing posted since need no fence. */
    ck_assert_int_eq(npv_dev_region_read(dev, 0, FAKE_COUNTS, &n, sizeof(n)), 0);
    ck_assert_uint_eq(n.fences, 1);
    /* A flush with nothing outstanding sends nothing either. */
    ck_assert_int_eq(npv_dev_flush(dev), 0);
    ck_assert_int_eq(npv_dev_region_read(dev, 0, FAKE_COUNTS, &n, sizeof(n)), 0);
    ck_assert_uint_eq(n.fences, 1);
    /*
     * Config space is never posted (it changes how the device decodes): the
     * fake refuses this write, and the refusal comes back at once.
     */
    uint16_t cmd = 0;
    ck_assert_int_eq(npv_dev_region_write_posted(dev, NPV_PCI_CONFIG_REGION, 4, &cmd, 2), -ENOSYS);
    ck_assert_int_eq(npv_dev_region_read(dev, 0, FAKE_COUNTS, &n, sizeof(n)), 0);
    ck_assert_uint_eq(n.batched, 10);
    close_fake(dev);
}
END_TEST

START_TEST(without_batching_each_posted_write_is_a_message)
{
    /* NPUVFIO_VU_BATCH=0: the way before batching, for comparison (bench --no-batch). */
    setenv("NPUVFIO_VU_BATCH", "0", 1);
    struct vu_fake f = {.script = script_count, .write_multiple = true};
    struct npv_dev *dev = open_fake(&f);
    unsetenv("NPUVFIO_VU_BATCH");
    struct npv_dev_stats st0, st1;
    ck_assert_int_eq(npv_dev_stats(dev, &st0), 0);
    struct fake_counts n = ten_writes_then_counts(dev);
    ck_assert_uint_eq(n.posted, 10);
    ck_assert_uint_eq(n.batched, 0);
    ck_assert_uint_eq(n.fences, 1);
    ck_assert_uint_eq(n.order_ok, 1);
    ck_assert_int_eq(npv_dev_stats(dev, &st1), 0);
    ck_assert_uint_eq(st1.messages - st0.messages, 10 + 1 + 1 + 10);
    close_fake(dev);
}
END_TEST

START_TEST(order_is_kept_across_batches_and_reads)
{
    struct vu_fake f = {.script = script_count, .write_multiple = true};
    struct npv_dev *dev = open_fake(&f);
    /*
     * 1000 writes of increasing values to rotating registers, a read of the
     * last one written every 97 writes: more than a batch holds, so batches
     * leave full, others in front of the reads. The fake checks the order
     * of all; each read sees its write.
     */
    uint32_t reads = 0;
    for (uint32_t i = 1; i <= 1000; i++) {
        uint32_t reg = i % FAKE_REGS;
        ck_assert_int_eq(npv_dev_region_write_posted(dev, 0, 4 * reg, &i, 4), 0);
        if (i % 97 == 0) {
            uint32_t v = 0;
            ck_assert_int_eq(npv_dev_region_read(dev, 0, 4 * reg, &v, 4), 0);
            ck_assert_uint_eq(v, i);
            reads++;
        }
    }
    struct fake_counts n;
    ck_assert_int_eq(npv_dev_region_read(dev, 0, FAKE_COUNTS, &n, sizeof(n)), 0);
    ck_assert_uint_eq(n.order_ok, 1);
    ck_assert_uint_eq(n.bad, 0);
    ck_assert_uint_eq(n.batched, 1000);
    ck_assert_uint_eq(n.posted, 0);
    ck_assert_uint_eq(n.fences, reads + 1);
    /* 97 writes between reads fit a batch: at least one message per read. */
    ck_assert_uint_ge(n.batches, reads);
    for (uint32_t r = 0; r < FAKE_REGS; r++) {
        uint32_t v = 0;
        ck_assert_int_eq(npv_dev_region_read(dev, 0, 4 * r, &v, 4), 0);
        ck_assert_uint_eq(v, 1000 - ((1000 - r) % FAKE_REGS)); /* the last i with i % 64 == r */
    }
    /* A run longer than a batch: full batches leave without a reply, in order. */
    for (uint32_t i = 1001; i <= 1500; i++)
        ck_assert_int_eq(npv_dev_region_write_posted(dev, 0, 0, &i, 4), 0);
    ck_assert_int_eq(npv_dev_flush(dev), 0);
    ck_assert_int_eq(npv_dev_region_read(dev, 0, FAKE_COUNTS, &n, sizeof(n)), 0);
    ck_assert_uint_eq(n.order_ok, 1);
    ck_assert_uint_eq(n.batched, 1500);
    ck_assert_uint_ge(n.batches, reads + 1 + 3); /* 500 writes: at least three messages */
    ck_assert_uint_eq(n.bad, 0);
    close_fake(dev);
}
END_TEST

START_TEST(a_server_without_write_multiple_gets_every_write_synchronously)
{
    struct vu_fake f = {.script = script_count};
    struct npv_dev *dev = open_fake(&f);
    struct fake_counts n = ten_writes_then_counts(dev);
    ck_assert_uint_eq(n.posted, 0);
    ck_assert_uint_eq(n.replied, 10);
    ck_assert_uint_eq(n.fences, 0); /* never sent what the server did not offer */
    ck_assert_uint_eq(n.order_ok, 1);
    ck_assert_int_eq(npv_dev_flush(dev), 0);
    close_fake(dev);
}
END_TEST

/*
 * A device whose register 0x100 is a doorbell: a write to it, alone or in a
 * REGION_WRITE_MULTI, raises IRQ index 0 vector 0 at once.
 */
#define FAKE_DOORBELL 0x100u

static void script_doorbell(int sock, unsigned nth, const struct vu_fake *f)
{
    (void)nth;
    int irq_fd = -1;
    struct npv_vu_msg m;
    while (fake_next(sock, f, &m) == 0) {
        bool ring = false;
        if (m.hdr.cmd == NPV_VU_CMD_DEVICE_GET_IRQ_INFO && m.body_len >= 16) {
            struct npv_vu_irq_info ii;
            memcpy(&ii, m.body, sizeof(ii));
            ii.flags = NPV_VU_IRQ_INFO_EVENTFD;
            ii.count = 1;
            fake_reply(sock, &m, &ii, sizeof(ii));
        } else if (m.hdr.cmd == NPV_VU_CMD_DEVICE_SET_IRQS) {
            if (m.nr_fds == 1) {
                irq_fd = m.fds[0];
                m.nr_fds = 0; /* kept */
            }
            fake_reply(sock, &m, NULL, 0);
        } else if (m.hdr.cmd == NPV_VU_CMD_REGION_WRITE) {
            struct npv_vu_region_access a;
            memcpy(&a, m.body, sizeof(a));
            ring = a.offset == FAKE_DOORBELL;
            if (!(m.hdr.flags & NPV_VU_F_NO_REPLY))
                fake_reply(sock, &m, &a, sizeof(a));
        } else if (m.hdr.cmd == NPV_VU_CMD_REGION_WRITE_MULTI) {
            struct npv_vu_write_multi wm;
            memcpy(&wm, m.body, sizeof(wm));
            for (uint64_t i = 0; i < wm.wr_cnt && 8 + (i + 1) * 24 <= m.body_len; i++) {
                struct npv_vu_write_one w;
                memcpy(&w, m.body + 8 + i * sizeof(w), sizeof(w));
                ring |= w.offset == FAKE_DOORBELL;
            }
            if (!(m.hdr.flags & NPV_VU_F_NO_REPLY))
                fake_reply(sock, &m, &wm, sizeof(wm));
        } else if (!(m.hdr.flags & NPV_VU_F_NO_REPLY)) {
            struct npv_vu_hdr h = {.msg_id = m.hdr.msg_id,
                                   .cmd = m.hdr.cmd,
                                   .flags = NPV_VU_F_TYPE_REPLY | NPV_VU_F_ERROR,
                                   .error = ENOSYS};
            fake_send(sock, &h, NULL, 0);
        }
        if (ring && irq_fd >= 0) {
            uint64_t one = 1;
            if (write(irq_fd, &one, sizeof(one)) != sizeof(one))
                _exit(3);
        }
        npv_vu_msg_release(&m);
    }
}

START_TEST(a_doorbell_in_a_batch_reaches_the_device_before_an_irq_wait)
{
    struct vu_fake f = {.script = script_doorbell, .write_multiple = true};
    struct npv_dev *dev = open_fake(&f);
    struct npv_irq *irq = NULL;
    ck_assert_int_eq(npv_irq_enable(dev, (enum npv_irq_type)0, 1, &irq), 0);
    /*
     * Setup writes and the doorbell are posted and held in a batch; the
     * wait must send them, or the device never rings and the wait times out.
     */
    for (uint32_t round = 0; round < 3; round++) {
        uint32_t v = round;
        ck_assert_int_eq(npv_dev_region_write_posted(dev, 0, 0x10, &v, 4), 0);
        ck_assert_int_eq(npv_dev_region_write_posted(dev, 0, FAKE_DOORBELL, &v, 4), 0);
        ck_assert_int_eq(npv_irq_wait(irq, 0, 5000 * MS), 1);
    }
    /* The same through a wait set (the RKNPU driver's way). */
    struct npv_irq_waitset *ws = NULL;
    ck_assert_int_eq(npv_irq_waitset_new(ctx, 2, &ws), 0);
    ck_assert_int_eq(npv_irq_waitset_add(ws, irq, 0, 42), 0);
    uint32_t v = 7;
    ck_assert_int_eq(npv_dev_region_write_posted(dev, 0, FAKE_DOORBELL, &v, 4), 0);
    uint64_t cookie = 0;
    ck_assert_int_eq(npv_irq_waitset_wait(ws, 5000 * MS, &cookie, 1), 1);
    ck_assert_uint_eq(cookie, 42);
    npv_irq_waitset_free(ws);
    /*
     * A caller that sleeps on the eventfd by itself (its own poll): the
     * flusher sends the batch after its hold, so the interrupt still comes.
     */
    ck_assert_int_eq(npv_dev_region_write_posted(dev, 0, FAKE_DOORBELL, &v, 4), 0);
    struct pollfd pfd = {.fd = npv_irq_fd(irq, 0), .events = POLLIN};
    ck_assert_int_eq(poll(&pfd, 1, 5000), 1);
    uint64_t cnt = 0;
    ck_assert_int_eq(read(pfd.fd, &cnt, sizeof(cnt)), (int)sizeof(cnt));
    ck_assert_uint_eq(cnt, 1);
    /* Nothing held back after the waits: the flush has no writes to carry. */
    ck_assert_int_eq(npv_dev_flush(dev), 0);
    npv_irq_disable(irq);
    close_fake(dev);
}
END_TEST

/* ---- our server, spoken to by hand ---- */

static int raw_fd;
static uint16_t raw_id;

static void raw_send(uint16_t cmd, uint32_t flags, const void *body, size_t len)
{
    struct npv_vu_hdr h = {.msg_id = ++raw_id, .cmd = cmd, .flags = flags};
    ck_assert_int_eq(npv_vu_send(raw_fd, &h, body, len, NULL, 0, (int64_t)GENEROUS_NS), 0);
}

/* The reply to the last command sent: 0 and its body in *m, or the errno it carried. */
static uint32_t raw_reply(uint16_t cmd, struct npv_vu_msg *m)
{
    ck_assert_int_eq(npv_vu_recv(raw_fd, m, 1u << 20, 4, (int64_t)GENEROUS_NS), 0);
    ck_assert_uint_eq(m->hdr.msg_id, raw_id);
    ck_assert_uint_eq(m->hdr.cmd, cmd);
    if (!(m->hdr.flags & NPV_VU_F_ERROR))
        return 0;
    uint32_t err = m->hdr.error;
    npv_vu_msg_release(m);
    return err;
}

static void raw_connect(const char *json)
{
    raw_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(raw_fd, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", srv.path);
    int64_t deadline = npv_vu_now_ns() + (int64_t)GENEROUS_NS;
    while (connect(raw_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        ck_assert_msg(npv_vu_now_ns() < deadline, "connect: %s", strerror(errno));
        usleep(1000);
    }
    char buf[4 + 128] = {0};
    ck_assert_uint_lt(strlen(json), sizeof(buf) - 4);
    strcpy(buf + 4, json);
    raw_send(NPV_VU_CMD_VERSION, 0, buf, 4 + strlen(json) + 1);
    struct npv_vu_msg m;
    ck_assert_uint_eq(raw_reply(NPV_VU_CMD_VERSION, &m), 0);
    struct npv_vu_caps caps;
    ck_assert_int_eq(npv_vu_caps_parse((char *)m.body + 4, m.body_len - 4, &caps), 0);
    ck_assert(caps.write_multiple);
    npv_vu_msg_release(&m);
}

/* WRITE_MULTI of n writes; the errno of the reply, or 0 with *done the reply's wr_cnt. */
static uint32_t raw_write_multi(const struct npv_vu_write_one *w, uint64_t n, uint32_t flags,
                                uint64_t *done)
{
    uint8_t buf[8 + 8 * sizeof(*w)];
    ck_assert_uint_le(n, 8);
    memcpy(buf, &n, 8);
    if (n > 0)
        memcpy(buf + 8, w, n * sizeof(*w));
    raw_send(NPV_VU_CMD_REGION_WRITE_MULTI, flags, buf, 8 + n * sizeof(*w));
    if (flags & NPV_VU_F_NO_REPLY)
        return 0;
    struct npv_vu_msg m;
    uint32_t err = raw_reply(NPV_VU_CMD_REGION_WRITE_MULTI, &m);
    if (err == 0) {
        ck_assert_uint_eq(m.body_len, 8);
        memcpy(done, m.body, 8);
        npv_vu_msg_release(&m);
    }
    return err;
}

static uint64_t raw_read64(uint64_t off)
{
    struct npv_vu_region_access a = {.offset = off, .region = 0, .count = 8};
    raw_send(NPV_VU_CMD_REGION_READ, 0, &a, sizeof(a));
    struct npv_vu_msg m;
    ck_assert_uint_eq(raw_reply(NPV_VU_CMD_REGION_READ, &m), 0);
    ck_assert_uint_eq(m.body_len, sizeof(a) + 8);
    uint64_t v;
    memcpy(&v, m.body + sizeof(a), 8);
    npv_vu_msg_release(&m);
    return v;
}

static struct npv_vu_write_one wr(uint64_t off, uint32_t count, uint64_t v)
{
    struct npv_vu_write_one w = {.offset = off, .region = 0, .count = count};
    memcpy(w.data, &v, sizeof(w.data));
    return w;
}

START_TEST(the_server_does_write_multi_in_order_and_a_refused_write_stops_none)
{
    vu_server_start(&srv, vu_serve_testdev, NULL);
    raw_connect("{\"capabilities\":{\"write_multiple\":true}}");
    uint64_t done = 99;
    struct npv_vu_write_one w[3] = {wr(TESTDEV_REG_SCRATCH64, 4, 1),
                                    wr(TESTDEV_REG_RING_ENTRIES, 4, 8),
                                    wr(TESTDEV_REG_SCRATCH64, 8, 0x55)};
    ck_assert_uint_eq(raw_write_multi(w, 3, 0, &done), 0);
    ck_assert_uint_eq(done, 3);
    ck_assert_uint_eq(raw_read64(TESTDEV_REG_SCRATCH64), 0x55);

    /*
     * CTRL takes 32-bit accesses only: refused, and the write after it is
     * still done (each is a posted write of its own, as on PCIe).
     */
    struct npv_vu_write_one bad[2] = {wr(TESTDEV_REG_CTRL, 2, 1), wr(TESTDEV_REG_SCRATCH64, 8, 9)};
    ck_assert_uint_eq(raw_write_multi(bad, 2, 0, &done), EINVAL);
    ck_assert_uint_eq(raw_read64(TESTDEV_REG_SCRATCH64), 9);

    /* A refused no-reply write is reported by the next WRITE_MULTI that has a reply, once. */
    struct npv_vu_region_access a = {.offset = TESTDEV_REG_CTRL, .region = 0, .count = 2};
    uint8_t req[sizeof(a) + 2] = {0};
    memcpy(req, &a, sizeof(a));
    raw_send(NPV_VU_CMD_REGION_WRITE, NPV_VU_F_NO_REPLY, req, sizeof(req));
    ck_assert_uint_eq(raw_read64(TESTDEV_REG_SCRATCH64), 9); /* a read does not report it */
    ck_assert_uint_eq(raw_write_multi(NULL, 0, 0, &done), EINVAL);
    ck_assert_uint_eq(raw_write_multi(NULL, 0, 0, &done), 0);
    ck_assert_uint_eq(done, 0);
    /* The same for a refused write inside a no-reply WRITE_MULTI. */
    ck_assert_uint_eq(raw_write_multi(bad, 2, NPV_VU_F_NO_REPLY, &done), 0);
    ck_assert_uint_eq(raw_write_multi(NULL, 0, 0, &done), EINVAL);

    /* Malformed: wr_cnt and the size disagree, a write wider than 8 bytes. */
    uint8_t shortm[8 + 10] = {1};
    raw_send(NPV_VU_CMD_REGION_WRITE_MULTI, 0, shortm, sizeof(shortm));
    struct npv_vu_msg m;
    ck_assert_uint_eq(raw_reply(NPV_VU_CMD_REGION_WRITE_MULTI, &m), EINVAL);
    struct npv_vu_write_one wide = wr(TESTDEV_REG_SCRATCH64, 9, 0);
    ck_assert_uint_eq(raw_write_multi(&wide, 1, 0, &done), EINVAL);
    close(raw_fd);
    vu_server_kill(&srv);
}
END_TEST

/* ---- the testdev model behind our server ---- */

static struct td t;

static void td_setup(void)
{
    vu_server_start(&srv, vu_serve_testdev, NULL);
    td_open(&t, srv.path);
}

static void td_teardown(void)
{
    td_close(&t);
    vu_server_kill(&srv);
}

START_TEST(a_posted_write_error_surfaces_on_the_next_call)
{
    uint64_t v = 0;
    /* CTRL takes 32-bit accesses only: the model refuses a 16-bit write with EINVAL. */
    ck_assert_int_eq(npv_bar_write(t.bar, TESTDEV_REG_CTRL, 2, 1), 0); /* posted */
    ck_assert_int_eq(npv_bar_read(t.bar, TESTDEV_REG_ID, 4, &v), -EINVAL);
    /* Reported once: the device itself is fine. */
    ck_assert_int_eq(npv_bar_read(t.bar, TESTDEV_REG_ID, 4, &v), 0);
    ck_assert_uint_eq(v, TESTDEV_ID_VALUE);

    /* Through an explicit flush, and only the first of several. */
    ck_assert_int_eq(npv_bar_write(t.bar, TESTDEV_REG_CTRL, 2, 1), 0);
    ck_assert_int_eq(npv_bar_write(t.bar, TESTDEV_REG_SCRATCH64, 8, 7), 0);
    ck_assert_int_eq(npv_bar_write(t.bar, TESTDEV_REG_STATUS, 2, 1), 0);
    ck_assert_int_eq(npv_dev_flush(t.dev), -EINVAL);
    ck_assert_int_eq(npv_dev_flush(t.dev), 0);
    /* The good write between the two refused ones was carried out. */
    ck_assert_int_eq(npv_bar_read(t.bar, TESTDEV_REG_SCRATCH64, 8, &v), 0);
    ck_assert_uint_eq(v, 7);

    /* Any other command reports it too (here a reset). */
    ck_assert_int_eq(npv_bar_write(t.bar, TESTDEV_REG_CTRL, 2, 1), 0);
    struct npv_dev_info info;
    ck_assert_int_eq(npv_dev_info(t.dev, &info), -EINVAL);
    ck_assert_int_eq(npv_dev_info(t.dev, &info), 0);
}
END_TEST

START_TEST(a_read_after_posted_writes_sees_them_all_in_order)
{
    /* Alternating registers and widths: the last of each wins only if none was reordered. */
    for (uint32_t i = 1; i <= 500; i++) {
        npv_bar_write32(t.bar, TESTDEV_REG_RING_ENTRIES, i);
        npv_bar_write64(t.bar, TESTDEV_REG_SCRATCH64, (uint64_t)i << 32 | i);
        npv_bar_write32(t.bar, TESTDEV_REG_SCRATCH64, i * 3); /* low half only */
    }
    uint64_t v = 0;
    ck_assert_int_eq(npv_bar_read(t.bar, TESTDEV_REG_SCRATCH64, 8, &v), 0);
    ck_assert_uint_eq(v, (uint64_t)500 << 32 | 1500);
    ck_assert_int_eq(npv_bar_read(t.bar, TESTDEV_REG_RING_ENTRIES, 4, &v), 0);
    ck_assert_uint_eq(v, 500);
    ck_assert_int_eq(npv_bar_read(t.bar, TESTDEV_REG_LAST_WIDTH, 4, &v), 0);
    ck_assert_uint_eq(v, 8); /* the read above; each write kept its own width */
}
END_TEST

struct reader {
    struct td *t;
    bool stop; /* __atomic */
    uint64_t reads, bad;
};

static void *read_id_until_stopped(void *arg)
{
    struct reader *r = arg;
    while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
        uint64_t v = 0;
        if (npv_bar_read(r->t->bar, TESTDEV_REG_ID, 4, &v) < 0 || v != TESTDEV_ID_VALUE)
            r->bad++;
        r->reads++;
    }
    return NULL;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

START_TEST(a_read_sees_its_threads_posted_writes_while_another_thread_reads)
{
    /*
     * Another thread's read may go out between this thread's posted write
     * and its read: the write must still reach the device before the read
     * (two RKNPU queues' threads, each starting its core and reading its
     * status, do exactly this). 1.5 s of write-read pairs against two
     * reading threads; without the ordering a run here missed about one
     * read in 8,000, failing one run in three.
     */
    struct reader r[2] = {{.t = &t}, {.t = &t}};
    pthread_t tid[2];
    for (unsigned k = 0; k < 2; k++)
        ck_assert_int_eq(pthread_create(&tid[k], NULL, read_id_until_stopped, &r[k]), 0);
    uint64_t stale = 0, pairs = 0, first_stale = 0;
    for (uint64_t end = mono_ns() + 1500000000ull, i = 1; mono_ns() < end; i++, pairs++) {
        npv_bar_write64(t.bar, TESTDEV_REG_SCRATCH64, i);
        uint64_t v = 0;
        ck_assert_int_eq(npv_bar_read(t.bar, TESTDEV_REG_SCRATCH64, 8, &v), 0);
        if (v != i && stale++ == 0)
            first_stale = i;
    }
    for (unsigned k = 0; k < 2; k++) {
        __atomic_store_n(&r[k].stop, true, __ATOMIC_RELEASE);
        pthread_join(tid[k], NULL);
    }
    ck_assert_msg(stale == 0, "%llu of %llu reads missed the same thread's write (first: %llu)",
                  (unsigned long long)stale, (unsigned long long)pairs,
                  (unsigned long long)first_stale);
    for (unsigned k = 0; k < 2; k++) {
        ck_assert_uint_eq(r[k].bad, 0);
        ck_assert_uint_gt(r[k].reads, 0);
    }
}
END_TEST

START_TEST(the_driver_runs_jobs_with_posted_writes)
{
    /* Trapped setup writes, then the mapped doorbell: the model must see them before it. */
    td_enable(&t, false);
    struct npv_testdev_desc d = {.opcode = NPV_TESTDEV_OP_NOP};
    for (int i = 0; i < 8; i++)
        td_submit(&t, &d);
    struct npv_cpl last;
    ck_assert_int_eq(td_wait(&t, GENEROUS_NS, &last), 0);
    ck_assert_int_eq(npv_dev_flush(t.dev), 0);
}
END_TEST

START_TEST(a_refused_write_in_a_batch_sent_without_a_reply_surfaces_on_the_next_call)
{
    /*
     * More writes than a batch holds: the first batch, with a refused write
     * early in it, leaves full and without a reply; the next read reports
     * the refusal, and every good write (before and after it) was done.
     */
    for (uint32_t i = 0; i < 5; i++)
        npv_bar_write32(t.bar, TESTDEV_REG_RING_ENTRIES, 2u << i);
    ck_assert_int_eq(npv_bar_write(t.bar, TESTDEV_REG_CTRL, 2, 1), 0); /* refused */
    for (uint64_t i = 1; i <= 450; i++)
        npv_bar_write64(t.bar, TESTDEV_REG_SCRATCH64, i);
    uint64_t v = 0;
    ck_assert_int_eq(npv_bar_read(t.bar, TESTDEV_REG_ID, 4, &v), -EINVAL);
    ck_assert_int_eq(npv_bar_read(t.bar, TESTDEV_REG_SCRATCH64, 8, &v), 0);
    ck_assert_uint_eq(v, 450);
    ck_assert_int_eq(npv_bar_read(t.bar, TESTDEV_REG_RING_ENTRIES, 4, &v), 0);
    ck_assert_uint_eq(v, 32);
    struct npv_dev_stats st;
    ck_assert_int_eq(npv_dev_stats(t.dev, &st), 0);
    ck_assert_uint_ge(st.writes_posted, 456);
}
END_TEST

START_TEST(writes_made_before_a_close_reach_the_device)
{
    /* Posted writes, then the close at once (within the flusher's hold): they must not be lost. */
    for (uint64_t round = 1; round <= 20; round++) {
        npv_bar_write64(t.bar, TESTDEV_REG_SCRATCH64, 0x1000 + round);
        td_close(&t);
        td_open(&t, srv.path);
        uint64_t v = 0;
        ck_assert_int_eq(npv_bar_read(t.bar, TESTDEV_REG_SCRATCH64, 8, &v), 0);
        ck_assert_uint_eq(v, 0x1000 + round);
    }
}
END_TEST

START_TEST(register_accesses_are_counted_by_the_way_they_went)
{
    struct npv_dev_stats a, b;
    ck_assert_int_eq(npv_dev_stats(t.dev, &a), 0);
    ck_assert_uint_eq(npv_bar_read32(t.bar, TESTDEV_REG_ID), TESTDEV_ID_VALUE);
    npv_bar_write32(t.bar, TESTDEV_REG_SCRATCH64, 5);
    /* The doorbell page is mapped: this load waits for the posted write first (a fence). */
    uint32_t db = npv_bar_read32(t.bar, TESTDEV_REG_DOORBELL);
    npv_bar_write32(t.bar, TESTDEV_REG_DOORBELL, db);
    ck_assert_int_eq(npv_dev_stats(t.dev, &b), 0);
    ck_assert_uint_eq(b.reads_trapped - a.reads_trapped, 1);
    ck_assert_uint_eq(b.writes_trapped - a.writes_trapped, 1);
    ck_assert_uint_eq(b.writes_posted - a.writes_posted, 1);
    ck_assert_uint_eq(b.reads_mapped - a.reads_mapped, 1);
    ck_assert_uint_eq(b.writes_mapped - a.writes_mapped, 1);
    ck_assert_uint_eq(b.flushes - a.flushes, 1);
    /* Nothing outstanding: mapped accesses cost no message. */
    (void)npv_bar_read32(t.bar, TESTDEV_REG_DOORBELL);
    ck_assert_int_eq(npv_dev_stats(t.dev, &a), 0);
    ck_assert_uint_eq(a.flushes, b.flushes);
    ck_assert_int_eq(npv_dev_stats(NULL, &a), -EINVAL);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("vfio-user posted writes");
    TCase *tc = tcase_create("scripted");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, writes_are_posted_to_a_server_offering_write_multiple);
    tcase_add_test(tc, a_server_without_write_multiple_gets_every_write_synchronously);
    tcase_add_test(tc, without_batching_each_posted_write_is_a_message);
    tcase_add_test(tc, order_is_kept_across_batches_and_reads);
    tcase_add_test(tc, a_doorbell_in_a_batch_reaches_the_device_before_an_irq_wait);
    tcase_add_test(tc, the_server_does_write_multi_in_order_and_a_refused_write_stops_none);
    suite_add_tcase(s, tc);
    tc = tcase_create("testdev");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, td_setup, td_teardown);
    tcase_add_test(tc, a_posted_write_error_surfaces_on_the_next_call);
    tcase_add_test(tc, a_read_after_posted_writes_sees_them_all_in_order);
    tcase_add_test(tc, a_read_sees_its_threads_posted_writes_while_another_thread_reads);
    tcase_add_test(tc, the_driver_runs_jobs_with_posted_writes);
    tcase_add_test(tc, register_accesses_are_counted_by_the_way_they_went);
    tcase_add_test(tc, writes_made_before_a_close_reach_the_device);
    tcase_add_test(tc, a_refused_write_in_a_batch_sent_without_a_reply_surfaces_on_the_next_call);
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

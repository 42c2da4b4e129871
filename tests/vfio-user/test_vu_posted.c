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
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <npuvfio/ctx.h>

#include "dev_internal.h"
#include "harness.h"

/* ---- a scripted server that counts ---- */

/* Region 0 of the fake: 64 registers of 4 bytes, and the counters read at COUNTS. */
#define FAKE_REGS   64u
#define FAKE_COUNTS 0x1000u

struct fake_counts {
    uint32_t posted;   /* REGION_WRITE with NO_REPLY */
    uint32_t replied;  /* REGION_WRITE waiting for its reply */
    uint32_t fences;   /* REGION_WRITE_MULTI */
    uint32_t order_ok; /* 1 while every write arrived in the order of its value */
};

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
            if (a.offset / 4 < FAKE_REGS)
                regs[a.offset / 4] = v;
            /* The test writes increasing values: one out of order is a reordered write. */
            if (v < last)
                n.order_ok = 0;
            last = v;
            if (m.hdr.flags & NPV_VU_F_NO_REPLY) {
                n.posted++;
            } else {
                n.replied++;
                fake_reply(sock, &m, &a, sizeof(a));
            }
        } else if (m.hdr.cmd == NPV_VU_CMD_REGION_WRITE_MULTI) {
            n.fences++;
            struct npv_vu_write_multi rep = {.wr_cnt = 0};
            if (!(m.hdr.flags & NPV_VU_F_NO_REPLY))
                fake_reply(sock, &m, &rep, sizeof(rep));
        } else if (m.hdr.cmd == NPV_VU_CMD_REGION_READ && m.body_len == sizeof(a)) {
            memcpy(&a, m.body, sizeof(a));
            uint8_t buf[sizeof(a) + 64] = {0};
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
    struct fake_counts n = ten_writes_then_counts(dev);
    /* Ten messages without a reply, one fence before the read, nothing waited for per write. */
    ck_assert_uint_eq(n.posted, 10);
    ck_assert_uint_eq(n.replied, 0);
    ck_assert_uint_eq(n.fences, 1);
    ck_assert_uint_eq(n.order_ok, 1);
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
    ck_assert_uint_eq(n.posted, 10);
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

START_TEST(the_server_does_write_multi_in_order_and_stops_at_the_first_refused)
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

    /* CTRL takes 32-bit accesses only: refused, and the write after it is not done. */
    struct npv_vu_write_one bad[2] = {wr(TESTDEV_REG_CTRL, 2, 1), wr(TESTDEV_REG_SCRATCH64, 8, 9)};
    ck_assert_uint_eq(raw_write_multi(bad, 2, 0, &done), EINVAL);
    ck_assert_uint_eq(raw_read64(TESTDEV_REG_SCRATCH64), 0x55);

    /* A refused no-reply write is reported by the next WRITE_MULTI that has a reply, once. */
    struct npv_vu_region_access a = {.offset = TESTDEV_REG_CTRL, .region = 0, .count = 2};
    uint8_t req[sizeof(a) + 2] = {0};
    memcpy(req, &a, sizeof(a));
    raw_send(NPV_VU_CMD_REGION_WRITE, NPV_VU_F_NO_REPLY, req, sizeof(req));
    ck_assert_uint_eq(raw_read64(TESTDEV_REG_SCRATCH64), 0x55); /* a read does not report it */
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
    tcase_add_test(tc, the_server_does_write_multi_in_order_and_stops_at_the_first_refused);
    suite_add_tcase(s, tc);
    tc = tcase_create("testdev");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, td_setup, td_teardown);
    tcase_add_test(tc, a_posted_write_error_surfaces_on_the_next_call);
    tcase_add_test(tc, a_read_after_posted_writes_sees_them_all_in_order);
    tcase_add_test(tc, the_driver_runs_jobs_with_posted_writes);
    tcase_add_test(tc, register_accesses_are_counted_by_the_way_they_went);
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

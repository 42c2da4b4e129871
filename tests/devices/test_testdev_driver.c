/* SPDX-License-Identifier: MIT */
/*
 * The testdev driver against the testdev model over vfio-user, the model in
 * a child process: open and the ring it programs, jobs and their results,
 * reset after a hang and after a failed reset, close, and the failure paths
 * (bad config, a device that is gone).
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <npuvfio/testdev.h>

#include "harness.h"
#include "testdev/sample.h"

static struct vu_server srv;
static struct td t;
static char last_err[512];

static void keep_errors(void *user, enum npv_log_level level, const char *msg)
{
    (void)user;
    if (level == NPV_LOG_ERROR)
        snprintf(last_err, sizeof(last_err), "%s", msg);
}

/* The device opened over vfio-user; the driver not yet. */
static void setup(void)
{
    vu_server_start(&srv, vu_serve_testdev, NULL);
    td_open(&t, srv.path);
    last_err[0] = '\0';
    npv_ctx_set_log_sink(t.ctx, keep_errors, NULL);
}

static void teardown(void)
{
    td_close(&t);
    vu_server_kill(&srv);
}

static struct npv_testdev *open_driver(const struct npv_testdev_config *cfg)
{
    struct npv_testdev *td;
    int r = npv_testdev_open(t.dev, cfg, &td);
    ck_assert_msg(r == 0, "open: %s (%s)", npv_strerror(r), last_err);
    return td;
}

static struct npv_dma *mapped_buffer(size_t size, unsigned prot, npv_iova_t *iova)
{
    struct npv_dma *b;
    ck_assert_int_eq(npv_dma_alloc(t.ctx, size, NULL, &b), 0);
    ck_assert_int_eq(npv_dma_map(b, t.dom, prot, iova), 0);
    return b;
}

/* One job through td, waited for; its completion. */
static struct npv_cpl run_one(struct npv_testdev *td, const struct npv_testdev_desc *d,
                              uint64_t cookie)
{
    struct npv_ring *ring = npv_testdev_ring(td);
    ck_assert_int_eq(npv_ring_push(ring, d, cookie), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 1);
    struct npv_cpl c;
    int got = npv_testdev_wait(td, NPV_RING_WAIT_POLL, 1, GENEROUS_NS, &c);
    ck_assert_msg(got == 1, "wait: %s", got < 0 ? npv_strerror(got) : "nothing in time");
    ck_assert_uint_eq(c.cookie, cookie);
    return c;
}

static void assert_works(struct npv_testdev *td)
{
    struct npv_testdev_desc nop = npv_testdev_nop(0);
    ck_assert_int_eq(run_one(td, &nop, 4242).status, 0);
}

/* Wait until every job in flight has come back (failed or not), at most a generous while. */
static unsigned drain(struct npv_testdev *td, struct npv_cpl *c, unsigned n)
{
    unsigned got = 0;
    for (int tries = 0; got < n && tries < 200; tries++) {
        int r = npv_testdev_wait(td, NPV_RING_WAIT_POLL, n - got, 100 * MS, c + got);
        if (r == -ETIMEDOUT)
            continue; /* a ring whose wait timeout recovers: the failed jobs follow */
        if (r < 0)
            break;
        got += (unsigned)r;
    }
    return got;
}

/* ---- open ---- */

START_TEST(open_programs_the_ring_and_starts_the_engine)
{
    struct npv_testdev_config cfg = {.entries = 32};
    struct npv_testdev *td = open_driver(&cfg);
    struct npv_testdev_state st;
    ck_assert_int_eq(npv_testdev_state(td, &st), 0);
    ck_assert(st.running);
    ck_assert(!st.fault);
    ck_assert_uint_eq(npv_ring_entries(npv_testdev_ring(td)), 32);
    ck_assert_ptr_eq(npv_testdev_dev(td), t.dev);
    ck_assert_ptr_null(npv_testdev_irq(td));
    npv_iova_t iova;
    ck_assert_int_eq(npv_dma_iova(npv_testdev_ring_memory(td), t.dom, &iova), 0);
    assert_works(td);
    npv_testdev_close(td);
}
END_TEST

START_TEST(open_without_config_takes_the_defaults)
{
    struct npv_testdev *td = open_driver(NULL);
    ck_assert_uint_eq(npv_ring_entries(npv_testdev_ring(td)), 256);
    assert_works(td);
    npv_testdev_close(td);
}
END_TEST

START_TEST(bad_ring_sizes_are_einval_and_touch_nothing)
{
    static const uint32_t bad[] = {1, 3, 100, 131072};
    int fds = count_fds();
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct npv_testdev_config cfg = {.entries = bad[i]};
        struct npv_testdev *td = NULL;
        last_err[0] = '\0';
        ck_assert_int_eq(npv_testdev_open(t.dev, &cfg, &td), -EINVAL);
        ck_assert_ptr_null(td);
        ck_assert_msg(strstr(last_err, "entries") != NULL, "logged: %s", last_err);
    }
    ck_assert_int_eq(count_fds(), fds);
    ck_assert_uint_eq(npv_domain_mapping_count(t.dom), 0);
    ck_assert_int_eq(npv_testdev_open(NULL, NULL, NULL), -EINVAL);
    /* The device was never started and still opens. */
    struct npv_testdev *td = open_driver(NULL);
    npv_testdev_close(td);
}
END_TEST

/* A device that is not a test device: a scripted server with a BAR0 whose registers read
 * 0xdeadbeef. */
static void script_other_device(int sock, unsigned nth, const struct vu_fake *f)
{
    (void)nth;
    struct npv_vu_msg m;
    while (fake_next(sock, f, &m) == 0) {
        if (m.hdr.cmd == NPV_VU_CMD_DEVICE_GET_REGION_INFO) {
            struct npv_vu_region_info ri = {.argsz = sizeof(ri),
                                            .flags =
                                                NPV_VU_REGION_FLAG_READ | NPV_VU_REGION_FLAG_WRITE,
                                            .index = 0,
                                            .size = 0x4000};
            fake_reply(sock, &m, &ri, sizeof(ri));
        } else if (m.hdr.cmd == NPV_VU_CMD_REGION_READ && m.body_len >= 16) {
            uint8_t body[16 + 8];
            struct npv_vu_region_access a;
            memcpy(&a, m.body, sizeof(a));
            uint32_t count = a.count <= 8 ? a.count : 8;
            a.count = count;
            memcpy(body, &a, sizeof(a));
            memset(body + 16, 0, 8);
            uint32_t v = 0xdeadbeef;
            memcpy(body + 16, &v, count < 4 ? count : 4);
            fake_reply(sock, &m, body, 16 + count);
        } else {
            fake_reply(sock, &m, NULL, 0);
        }
        npv_vu_msg_release(&m);
    }
}

START_TEST(open_refuses_a_device_that_is_not_a_test_device)
{
    struct vu_server other;
    struct vu_fake f = {.script = script_other_device, .major = 0};
    vu_server_start(&other, vu_serve_fake, &f);
    struct npv_dev *dev;
    struct npv_dev_opts opts = {.request_timeout_ns = GENEROUS_NS};
    int r = npv_dev_open_vfio_user(t.ctx, other.path, t.dom, &opts, &dev);
    ck_assert_msg(r == 0, "open: %s", npv_strerror(r));
    struct npv_testdev *td = NULL;
    ck_assert_int_eq(npv_testdev_open(dev, NULL, &td), -ENODEV);
    ck_assert_ptr_null(td);
    ck_assert_msg(strstr(last_err, "not a test device (ID 0xdeadbeef") != NULL, "logged: %s",
                  last_err);
    npv_dev_close(dev);
    vu_server_kill(&other);
}
END_TEST

START_TEST(open_fails_cleanly_when_the_device_does_not_reset)
{
    struct npv_testdev *first = open_driver(NULL);
    int fds = count_fds();
    size_t mappings = npv_domain_mapping_count(t.dom);
    ck_assert_int_eq(npv_testdev_inject_fault(first, NPV_TESTDEV_FAULT_FAIL_RESET), 0);
    struct npv_testdev *second = NULL;
    ck_assert_int_eq(npv_testdev_open(t.dev, NULL, &second), -EIO);
    ck_assert_ptr_null(second);
    ck_assert_msg(strstr(last_err, "failed its reset") != NULL, "logged: %s", last_err);
    /* Its ring memory and BAR went back. */
    ck_assert_int_eq(count_fds(), fds);
    ck_assert_uint_eq(npv_domain_mapping_count(t.dom), mappings);
    npv_testdev_close(first);
    struct npv_testdev *td = open_driver(NULL);
    assert_works(td);
    npv_testdev_close(td);
}
END_TEST

START_TEST(open_on_a_device_whose_server_is_gone_names_it)
{
    vu_server_kill(&srv);
    /* Until the client's receive thread sees the EOF a call may still be on its way. */
    uint64_t v;
    for (int i = 0; i < 3000 && npv_bar_read(t.bar, TESTDEV_REG_ID, 4, &v) == 0; i++) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 10000000};
        nanosleep(&ts, NULL);
    }
    struct npv_testdev *td = NULL;
    ck_assert_int_eq(npv_testdev_open(t.dev, NULL, &td), -ENOTCONN);
    ck_assert_ptr_null(td);
    ck_assert_msg(strstr(last_err, "testdev ") != NULL && strstr(last_err, "not connected") != NULL,
                  "logged: %s", last_err);
    ck_assert_uint_eq(npv_domain_mapping_count(t.dom), 0);
}
END_TEST

/* ---- jobs ---- */

START_TEST(copy_and_fill_jobs_write_what_the_cpu_expects)
{
    struct npv_testdev *td = open_driver(NULL);
    npv_iova_t src_iova, dst_iova;
    struct npv_dma *src = mapped_buffer(8192, NPV_DMA_READ, &src_iova);
    struct npv_dma *dst = mapped_buffer(8192, NPV_DMA_RW, &dst_iova);
    uint8_t *s = npv_dma_vaddr(src), *d = npv_dma_vaddr(dst);
    for (int i = 0; i < 8192; i++)
        s[i] = (uint8_t)(i * 29 + 1);
    memset(d, 0, 8192);
    struct npv_ring *ring = npv_testdev_ring(td);
    struct npv_testdev_desc copy = npv_testdev_copy(dst_iova, src_iova, 4096, 0);
    struct npv_testdev_desc fill = npv_testdev_fill(dst_iova + 4096, 0xc3, 4096, 0);
    ck_assert_int_eq(npv_ring_push(ring, &copy, 1), 0);
    ck_assert_int_eq(npv_ring_push(ring, &fill, 2), 0);
    ck_assert_int_eq(npv_ring_submit(ring), 2);
    struct npv_cpl c[2];
    ck_assert_int_eq(npv_testdev_wait(td, NPV_RING_WAIT_POLL, 2, GENEROUS_NS, c), 2);
    ck_assert_int_eq(c[0].status, 0);
    ck_assert_int_eq(c[1].status, 0);
    ck_assert_int_eq(memcmp(s, d, 4096), 0);
    for (int i = 4096; i < 8192; i++)
        ck_assert_uint_eq(d[i], 0xc3);
    npv_dma_free(src);
    npv_dma_free(dst);
    npv_testdev_close(td);
}
END_TEST

START_TEST(a_descriptor_the_device_refuses_fails_with_its_error_word)
{
    struct npv_testdev *td = open_driver(NULL);
    npv_iova_t iova;
    struct npv_dma *b = mapped_buffer(4096, NPV_DMA_RW, &iova);
    struct npv_testdev_desc bad_op = {.opcode = 99, .dst = iova, .len = 64};
    struct npv_cpl c = run_one(td, &bad_op, 1);
    ck_assert_int_eq(c.status, -EIO);
    ck_assert_uint_eq(c.dev_error, NPV_TESTDEV_ERR_BAD_DESC);
    ck_assert_int_eq(npv_testdev_reset(td), 0);
    struct npv_testdev_desc too_long = npv_testdev_fill(iova, 1, NPV_TESTDEV_MAX_LEN + 1, 0);
    c = run_one(td, &too_long, 2);
    ck_assert_uint_eq(c.dev_error, NPV_TESTDEV_ERR_BAD_DESC);
    ck_assert_int_eq(npv_testdev_reset(td), 0);
    struct npv_testdev_desc unmapped = npv_testdev_fill(0x7ead0000ull, 1, 64, 0);
    c = run_one(td, &unmapped, 3);
    ck_assert_int_eq(c.status, -EIO);
    ck_assert_uint_eq(c.dev_error, NPV_TESTDEV_ERR_DMA);
    struct npv_testdev_state st;
    ck_assert_int_eq(npv_testdev_state(td, &st), 0);
    ck_assert(st.fault && !st.running);
    ck_assert_uint_eq(st.fault_iova, 0x7ead0000ull);
    ck_assert_int_eq(npv_testdev_reset(td), 0);
    assert_works(td);
    npv_dma_free(b);
    npv_testdev_close(td);
}
END_TEST

START_TEST(interrupt_waits_complete_with_irq_configured)
{
    struct npv_testdev_config cfg = {.irq = true};
    struct npv_testdev *td = open_driver(&cfg);
    ck_assert_ptr_nonnull(npv_testdev_irq(td));
    struct npv_ring *ring = npv_testdev_ring(td);
    struct npv_testdev_desc d = npv_testdev_nop(NPV_TESTDEV_DESC_IRQ);
    for (uint64_t i = 0; i < 20; i++) {
        ck_assert_int_eq(npv_ring_push(ring, &d, i), 0);
        npv_ring_submit(ring);
        struct npv_cpl c;
        ck_assert_int_eq(npv_testdev_wait(td, NPV_RING_WAIT_IRQ, 1, GENEROUS_NS, &c), 1);
        ck_assert_int_eq(c.status, 0);
    }
    ck_assert_uint_gt(npv_irq_count(npv_testdev_irq(td)), 0);
    npv_testdev_close(td);
}
END_TEST

START_TEST(sample_workload_matches_the_cpu_reference)
{
    struct npv_testdev *td = open_driver(NULL);
    struct npv_sample_opts o = {.iterations = 50};
    struct npv_sample_result res;
    ck_assert_int_eq(npv_testdev_sample_run(td, &o, &res), 0);
    ck_assert_uint_eq(res.iterations, 50);
    ck_assert_uint_eq(res.jobs, 50 * 16);
    ck_assert_uint_eq(res.mismatches, 0);
    ck_assert_uint_ge(res.p99_ns, res.p50_ns);
    /* A device that refuses a DMA makes the sample fail, not pass. */
    ck_assert_int_eq(npv_testdev_inject_fault(td, NPV_TESTDEV_FAULT_DMA_UNMAPPED), 0);
    ck_assert_int_eq(npv_testdev_sample_run(td, &o, &res), -EIO);
    ck_assert_uint_eq(res.iterations, 0);
    /* The sample reset the device on its way out: it runs again. */
    ck_assert_int_eq(npv_testdev_sample_run(td, &o, &res), 0);
    ck_assert_uint_eq(res.mismatches, 0);
    npv_testdev_close(td);
}
END_TEST

/* ---- reset ---- */

START_TEST(reset_brings_a_hung_engine_back)
{
    struct npv_testdev *td = open_driver(NULL);
    struct npv_ring *ring = npv_testdev_ring(td);
    ck_assert_int_eq(npv_testdev_inject_fault(td, NPV_TESTDEV_FAULT_HANG), 0);
    struct npv_testdev_desc nop = npv_testdev_nop(0);
    for (uint64_t i = 0; i < 4; i++)
        ck_assert_int_eq(npv_ring_push(ring, &nop, i), 0);
    npv_ring_submit(ring);
    struct npv_cpl c[4];
    ck_assert_int_eq(npv_testdev_reset(td), 0);
    ck_assert_int_eq(npv_ring_poll(ring, c, 4), 4);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(c[i].status, -ECANCELED);
    assert_works(td);
    npv_testdev_close(td);
}
END_TEST

START_TEST(a_hang_ends_in_failed_jobs_and_a_working_device)
{
    struct npv_testdev *td = open_driver(NULL);
    struct npv_ring *ring = npv_testdev_ring(td);
    ck_assert_int_eq(npv_testdev_inject_fault(td, NPV_TESTDEV_FAULT_HANG), 0);
    struct npv_testdev_desc nop = npv_testdev_nop(0);
    for (uint64_t i = 0; i < 2; i++)
        ck_assert_int_eq(npv_ring_push(ring, &nop, i), 0);
    npv_ring_submit(ring);
    struct npv_cpl c[2];
    ck_assert_uint_eq(drain(td, c, 2), 2);
    ck_assert_int_eq(c[0].status, -ETIMEDOUT);
    /* Claimed together, their deadlines pass within microseconds: the later may be either. */
    ck_assert(c[1].status == -ETIMEDOUT || c[1].status == -ECANCELED);
    ck_assert(!npv_ring_dead(ring));
    assert_works(td);
    npv_testdev_close(td);
}
END_TEST

START_TEST(a_failed_reset_leaves_the_ring_dead_until_a_reset_succeeds)
{
    struct npv_testdev *td = open_driver(NULL);
    struct npv_ring *ring = npv_testdev_ring(td);
    ck_assert_int_eq(npv_testdev_inject_fault(td, NPV_TESTDEV_FAULT_FAIL_RESET), 0);
    ck_assert_int_eq(npv_testdev_reset(td), -EIO);
    ck_assert_msg(strstr(last_err, "reset") != NULL, "logged: %s", last_err);
    ck_assert(npv_ring_dead(ring));
    void *slot;
    ck_assert_int_eq(npv_ring_next(ring, 1, &slot), -EIO);
    ck_assert_int_eq(npv_testdev_reset(td), 0);
    ck_assert(!npv_ring_dead(ring));
    assert_works(td);
    npv_testdev_close(td);
}
END_TEST

START_TEST(fault_kinds_outside_the_device_set_are_einval)
{
    struct npv_testdev *td = open_driver(NULL);
    ck_assert_int_eq(npv_testdev_inject_fault(td, (enum npv_testdev_fault)6), -EINVAL);
    ck_assert_int_eq(npv_testdev_inject_fault(td, (enum npv_testdev_fault) - 1), -EINVAL);
    assert_works(td);
    npv_testdev_close(td);
}
END_TEST

/* ---- the device goes away ---- */

START_TEST(jobs_on_a_device_whose_server_died_end_in_a_dead_ring)
{
    struct npv_testdev *td = open_driver(NULL);
    struct npv_ring *ring = npv_testdev_ring(td);
    assert_works(td);
    vu_server_kill(&srv);
    struct npv_testdev_desc nop = npv_testdev_nop(0);
    ck_assert_int_eq(npv_ring_push(ring, &nop, 1), 0);
    npv_ring_submit(ring);
    struct npv_cpl c;
    /* Nobody completes it: the job fails and the reset cannot reach the device. */
    ck_assert_uint_eq(drain(td, &c, 1), 1);
    ck_assert_int_eq(c.status, -ETIMEDOUT);
    ck_assert(npv_ring_dead(ring));
    ck_assert_int_eq(npv_testdev_reset(td), -ENOTCONN);
    ck_assert(npv_ring_dead(ring));
    ck_assert_int_eq(npv_ring_push(ring, &nop, 2), -EIO);
    npv_testdev_close(td);
}
END_TEST

START_TEST(disconnect_fault_is_seen_as_a_dead_device)
{
    struct npv_testdev *td = open_driver(NULL);
    struct npv_ring *ring = npv_testdev_ring(td);
    ck_assert_int_eq(npv_testdev_inject_fault(td, NPV_TESTDEV_FAULT_DISCONNECT), 0);
    struct npv_testdev_desc nop = npv_testdev_nop(0);
    ck_assert_int_eq(npv_ring_push(ring, &nop, 1), 0);
    npv_ring_submit(ring);
    struct npv_cpl c;
    ck_assert_uint_eq(drain(td, &c, 1), 1);
    ck_assert_int_eq(c.status, -ETIMEDOUT);
    ck_assert(npv_ring_dead(ring));
    npv_testdev_close(td);
}
END_TEST

/* ---- close ---- */

START_TEST(close_stops_the_engine_and_open_close_cycles_leak_nothing)
{
    struct npv_testdev *td = open_driver(NULL);
    npv_testdev_close(td);
    int fds = count_fds(), maps = count_maps();
    size_t mappings = npv_domain_mapping_count(t.dom);
    for (int i = 0; i < 20; i++) {
        struct npv_testdev_config cfg = {.irq = i % 2 == 0};
        td = open_driver(&cfg);
        struct npv_testdev_desc nop = npv_testdev_nop(0);
        ck_assert_int_eq(npv_ring_push(npv_testdev_ring(td), &nop, 1), 0);
        npv_ring_submit(npv_testdev_ring(td));
        /* Closed with a job possibly still in flight. */
        npv_testdev_close(td);
    }
    ck_assert_int_eq(count_fds(), fds);
    ck_assert_int_le(count_maps(), maps + MAPS_SLACK);
    ck_assert_uint_eq(npv_domain_mapping_count(t.dom), mappings);
    /* The engine was stopped: the device reads as idle. */
    ck_assert_uint_eq(npv_bar_read32(t.bar, TESTDEV_REG_STATUS) & TESTDEV_STATUS_RUNNING, 0);
    npv_testdev_close(NULL);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("testdev driver");
    TCase *tc = tcase_create("open");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, open_programs_the_ring_and_starts_the_engine);
    tcase_add_test(tc, open_without_config_takes_the_defaults);
    tcase_add_test(tc, bad_ring_sizes_are_einval_and_touch_nothing);
    tcase_add_test(tc, open_refuses_a_device_that_is_not_a_test_device);
    tcase_add_test(tc, open_fails_cleanly_when_the_device_does_not_reset);
    tcase_add_test(tc, open_on_a_device_whose_server_is_gone_names_it);
    suite_add_tcase(s, tc);
    tc = tcase_create("jobs");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, copy_and_fill_jobs_write_what_the_cpu_expects);
    tcase_add_test(tc, a_descriptor_the_device_refuses_fails_with_its_error_word);
    tcase_add_test(tc, interrupt_waits_complete_with_irq_configured);
    tcase_add_test(tc, sample_workload_matches_the_cpu_reference);
    suite_add_tcase(s, tc);
    tc = tcase_create("reset");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, reset_brings_a_hung_engine_back);
    tcase_add_test(tc, a_hang_ends_in_failed_jobs_and_a_working_device);
    tcase_add_test(tc, a_failed_reset_leaves_the_ring_dead_until_a_reset_succeeds);
    tcase_add_test(tc, fault_kinds_outside_the_device_set_are_einval);
    suite_add_tcase(s, tc);
    tc = tcase_create("gone");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, jobs_on_a_device_whose_server_died_end_in_a_dead_ring);
    tcase_add_test(tc, disconnect_fault_is_seen_as_a_dead_device);
    suite_add_tcase(s, tc);
    tc = tcase_create("close");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, close_stops_the_engine_and_open_close_cycles_leak_nothing);
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

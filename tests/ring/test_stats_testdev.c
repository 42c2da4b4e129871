/* SPDX-License-Identifier: MIT */
/*
 * Stats (issue 24 item 5) against the real testdev model over vfio-user:
 * jobs that complete, fail with the device's error word and time out are
 * counted by class; the stats socket serves them as JSON and as Prometheus
 * text, which small parsers here read back (Debian bookworm's promtool comes
 * with the whole prometheus package: too heavy for a test dependency) and
 * compare with what the test itself saw come back.
 */
#include <check.h>
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <npuvfio/ring.h>
#include <npuvfio/stats.h>

#include "harness.h"
#include "json_check.h"
#include "stats_text.h"

static struct vu_server srv;
static struct td t;
static struct npv_ring *ring;
static struct npv_stats_server *stats_srv;
static char stats_path[108];

/* What the test saw come back, by class. */
static uint64_t seen_req, seen_ok, seen_err, seen_timeout, seen_cancel, seen_other;

static void quiet(void *user, enum npv_log_level level, const char *msg)
{
    (void)user;
    (void)level;
    (void)msg;
}

static void setup(void)
{
    vu_server_start(&srv, vu_serve_testdev, NULL);
    td_open(&t, srv.path);
    npv_ctx_set_log_sink(t.ctx, quiet, NULL);
    npv_stats_set_latency(t.ctx, 1);
    td_enable(&t, false);
    ring = t.ring;
    snprintf(stats_path, sizeof(stats_path), "/tmp/npv-stats-test-%d.sock", (int)getpid());
    ck_assert_int_eq(npv_stats_serve(t.ctx, stats_path, &stats_srv), 0);
    seen_req = seen_ok = seen_err = seen_timeout = seen_cancel = seen_other = 0;
}

static void teardown(void)
{
    npv_stats_server_stop(stats_srv);
    stats_srv = NULL;
    ring = NULL;
    td_close(&t);
    vu_server_kill(&srv);
}

static void tally(const struct npv_cpl *c, int n)
{
    for (int i = 0; i < n; i++) {
        switch (c[i].status) {
        case 0:
            seen_ok++;
            break;
        case -EIO:
            seen_err++;
            break;
        case -ETIMEDOUT:
            seen_timeout++;
            break;
        case -ECANCELED:
            seen_cancel++;
            break;
        default:
            seen_other++;
        }
    }
}

static const struct npv_testdev_desc nop = {.opcode = NPV_TESTDEV_OP_NOP};

static void push_timed(uint64_t cookie, uint64_t timeout_ns)
{
    void *d;
    ck_assert_int_eq(npv_ring_next_timed(ring, cookie, timeout_ns, &d), 0);
    memcpy(d, &nop, sizeof(nop));
    seen_req++;
}

/* n jobs, all reaped. */
static void run_ok(unsigned n)
{
    struct npv_cpl c[16];
    for (unsigned done = 0; done < n;) {
        unsigned batch = n - done < 16 ? n - done : 16;
        for (unsigned i = 0; i < batch; i++)
            push_timed(done + i, 0);
        npv_ring_submit(ring);
        int got = npv_ring_wait(ring, NPV_RING_WAIT_POLL, batch, GENEROUS_NS, c, batch);
        ck_assert_int_eq(got, (int)batch);
        tally(c, got);
        done += batch;
    }
}

/* One failing with the device's error word (and one ok before it), then a reset. */
static void run_dev_error(void)
{
    ck_assert_int_eq(npv_testdev_inject_fault(t.drv, NPV_TESTDEV_FAULT_DMA_UNMAPPED), 0);
    push_timed(100, 0);
    struct npv_testdev_desc fill = {
        .opcode = NPV_TESTDEV_OP_FILL, .dst = 0x100000, .len = 64, .pattern = 3};
    void *d;
    ck_assert_int_eq(npv_ring_next(ring, 101, &d), 0);
    memcpy(d, &fill, sizeof(fill));
    seen_req++;
    npv_ring_submit(ring);
    struct npv_cpl c[2];
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 2, GENEROUS_NS, c, 2), 2);
    ck_assert_int_eq(c[1].status, -EIO);
    tally(c, 2);
    ck_assert_int_eq(npv_testdev_reset(t.drv), 0);
}

/* A hung device: three jobs with a 20 ms budget time out (the later may be cancelled). */
static void run_timeout(void)
{
    ck_assert_int_eq(npv_testdev_inject_fault(t.drv, NPV_TESTDEV_FAULT_HANG), 0);
    for (uint64_t i = 0; i < 3; i++)
        push_timed(200 + i, 20 * MS);
    npv_ring_submit(ring);
    struct npv_cpl c[3];
    ck_assert_int_eq(npv_ring_wait(ring, NPV_RING_WAIT_POLL, 3, GENEROUS_NS, c, 3), 3);
    ck_assert_int_eq(c[0].status, -ETIMEDOUT);
    tally(c, 3);
}

/* ---- a client of the socket ---- */

static char *ask(const char *cmd)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", stats_path);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(write(fd, cmd, strlen(cmd)), (ssize_t)strlen(cmd));
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    for (;;) {
        if (len + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            ck_assert_ptr_nonnull(buf);
        }
        ssize_t r = read(fd, buf + len, cap - 1 - len);
        ck_assert_int_ge(r, 0);
        if (r == 0)
            break;
        len += (size_t)r;
    }
    buf[len] = '\0';
    close(fd);
    return buf;
}

/* Run a shell command; its standard output, which must end with exit status 0. */
static char *run(const char *cmd)
{
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    size_t r;
    while ((r = fread(buf + len, 1, cap - 1 - len, f)) > 0) {
        len += r;
        if (len + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            ck_assert_ptr_nonnull(buf);
        }
    }
    buf[len] = '\0';
    ck_assert_int_eq(pclose(f), 0);
    return buf;
}

START_TEST(stats_count_every_class_and_the_socket_serves_json_and_prometheus)
{
    run_ok(100);
    run_dev_error();
    run_ok(10);
    run_timeout();
    run_ok(5);

    /* The in-process snapshot: exactly what came back. */
    struct npv_stats st;
    ck_assert_int_eq(npv_stats_read(t.ctx, NULL, &st, sizeof(st)), 1);
    ck_assert_uint_eq(st.requests, seen_req);
    ck_assert_uint_eq(st.ok, seen_ok);
    ck_assert_uint_eq(st.dev_error, seen_err);
    ck_assert_uint_eq(st.timeout, seen_timeout);
    ck_assert_uint_eq(st.cancelled, seen_cancel);
    ck_assert_uint_eq(st.fault, seen_other);
    ck_assert_uint_eq(st.in_flight, 0);
    ck_assert_uint_eq(st.resets, 2);
    ck_assert_uint_eq(seen_ok, 100 + 1 + 10 + 5);
    ck_assert_uint_eq(seen_err, 1);
    ck_assert_uint_ge(seen_timeout, 1);
    ck_assert_uint_eq(seen_timeout + seen_cancel, 3);
    /* Every job the device completed was measured: ok ones and the failed DMA. */
    ck_assert_uint_eq(st.latency_count, seen_ok + seen_err);
    uint64_t in_buckets = 0;
    for (unsigned b = 0; b < NPV_STATS_HIST_BUCKETS; b++)
        in_buckets += st.latency[b];
    ck_assert_uint_eq(in_buckets, st.latency_count);
    ck_assert_uint_gt(st.latency_sum_ns, 0);

    /* JSON over the socket. */
    char *json = ask("json\n");
    ck_assert_msg(json_valid_document(json), "not one JSON document: %s", json);
    char dev[80];
    snprintf(dev, sizeof(dev), "testdev:%s", npv_dev_name(t.dev));
    for (char *c = dev; *c; c++)
        if (!(isalnum((unsigned char)*c) || strchr("-_.:/", *c)))
            *c = '_';
    const char *p_req[] = {"devices", dev, "queues", "ring0", "requests", NULL};
    const char *p_ok[] = {"devices", dev, "total", "ok", NULL};
    const char *p_err[] = {"devices", dev, "total", "dev_error", NULL};
    const char *p_to[] = {"devices", dev, "queues", "ring0", "timeout", NULL};
    const char *p_cn[] = {"devices", dev, "queues", "ring0", "cancelled", NULL};
    const char *p_rs[] = {"devices", dev, "total", "resets", NULL};
    const char *p_lc[] = {"devices", dev, "total", "latency_ns", "count", NULL};
    const char *p_maps[] = {"context", "dma_maps", NULL};
    ck_assert_uint_eq(json_num(json, p_req), seen_req);
    ck_assert_uint_eq(json_num(json, p_ok), seen_ok);
    ck_assert_uint_eq(json_num(json, p_err), seen_err);
    ck_assert_uint_eq(json_num(json, p_to), seen_timeout);
    ck_assert_uint_eq(json_num(json, p_cn), seen_cancel);
    ck_assert_uint_eq(json_num(json, p_rs), 2);
    ck_assert_uint_eq(json_num(json, p_lc), seen_ok + seen_err);
    /* The driver mapped its ring memory: at least one map. */
    ck_assert_uint_ge(json_num(json, p_maps), 1);
    free(json);

    /* Prometheus text over the socket. */
    char *prom = ask("prometheus\n");
    ck_assert_double_eq(prom_value(prom, "npuvfio_queue_requests_total", "queue=\"ring0\""),
                        (double)seen_req);
    ck_assert_double_eq(prom_value(prom, "npuvfio_queue_ok_total", "queue=\"ring0\""),
                        (double)seen_ok);
    ck_assert_double_eq(prom_value(prom, "npuvfio_queue_dev_error_total", "queue=\"ring0\""),
                        (double)seen_err);
    ck_assert_double_eq(prom_value(prom, "npuvfio_queue_timeout_total", "queue=\"ring0\""),
                        (double)seen_timeout);
    ck_assert_double_eq(prom_value(prom, "npuvfio_queue_cancelled_total", "queue=\"ring0\""),
                        (double)seen_cancel);
    ck_assert_double_eq(prom_value(prom, "npuvfio_queue_in_flight", "queue=\"ring0\""), 0);
    ck_assert_double_eq(prom_value(prom, "npuvfio_queue_resets_total", "queue=\"ring0\""), 2);
    ck_assert_double_eq(prom_value(prom, "npuvfio_queue_latency_seconds_bucket", "le=\"+Inf\""),
                        (double)(seen_ok + seen_err));
    ck_assert_double_eq(prom_value(prom, "npuvfio_queue_latency_seconds_count", NULL),
                        (double)(seen_ok + seen_err));
    ck_assert(prom_value(prom, "npuvfio_dma_maps_total", NULL) >= 1);
    free(prom);

    /* The CLI reads the same socket: Prometheus text, and --watch twice. */
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s stats %s --prometheus", NPV_CLI, stats_path);
    char *cli = run(cmd);
    ck_assert_double_eq(prom_value(cli, "npuvfio_queue_ok_total", "queue=\"ring0\""),
                        (double)seen_ok);
    free(cli);
    snprintf(cmd, sizeof(cmd), "%s stats %s --watch --interval 0.01 --count 2", NPV_CLI,
             stats_path);
    cli = run(cmd);
    char *second = strstr(cli, "}\n{");
    ck_assert_msg(second != NULL, "two JSON documents: %s", cli);
    second[1] = '\0';
    ck_assert(json_valid_document(cli));
    ck_assert(json_valid_document(second + 2));
    free(cli);

    char *bad = ask("what\n");
    ck_assert_ptr_nonnull(strstr(bad, "\"error\""));
    free(bad);
}
END_TEST

/* A reader on another thread while the owner runs jobs: no lock, counts only grow. */
static volatile int reader_stop;

static void *reader(void *arg)
{
    uint64_t *reads = arg;
    uint64_t last_req = 0, last_done = 0;
    struct npv_stats *st = malloc(sizeof(*st));
    ck_assert_ptr_nonnull(st);
    while (!__atomic_load_n(&reader_stop, __ATOMIC_RELAXED)) {
        ck_assert_int_eq(npv_stats_read(t.ctx, NULL, st, sizeof(*st)), 1);
        uint64_t done = st->ok + st->dev_error + st->timeout + st->cancelled + st->fault;
        ck_assert_uint_ge(st->requests, last_req);
        ck_assert_uint_ge(done, last_done);
        last_req = st->requests;
        last_done = done;
        char *text;
        size_t len;
        ck_assert_int_eq(npv_stats_format(t.ctx, NPV_STATS_PROMETHEUS, &text, &len), 0);
        free(text);
        (*reads)++;
    }
    free(st);
    return NULL;
}

START_TEST(stats_are_read_from_another_thread_while_jobs_run)
{
    uint64_t reads = 0;
    reader_stop = 0;
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, reader, &reads), 0);
    run_ok(2000);
    /* And through the socket's own thread at the same time. */
    char *json = ask("json\n");
    ck_assert(json_valid_document(json));
    free(json);
    run_ok(500);
    __atomic_store_n(&reader_stop, 1, __ATOMIC_RELAXED);
    pthread_join(th, NULL);
    ck_assert_uint_gt(reads, 0);
    struct npv_stats st;
    ck_assert_int_eq(npv_stats_read(t.ctx, NULL, &st, sizeof(st)), 1);
    ck_assert_uint_eq(st.requests, 2500);
    ck_assert_uint_eq(st.ok, 2500);
    ck_assert_uint_eq(st.latency_count, 2500);
}
END_TEST

START_TEST(latency_buckets_are_log_linear_and_contiguous)
{
    ck_assert_uint_eq(npv_stats_bucket(0), 0);
    ck_assert_uint_eq(npv_stats_bucket(7), 7);
    ck_assert_uint_eq(npv_stats_bucket(8), 8);
    ck_assert_uint_eq(npv_stats_bucket(16), 16);
    ck_assert_uint_eq(npv_stats_bucket(UINT64_MAX), NPV_STATS_HIST_BUCKETS - 1);
    for (unsigned b = 0; b + 1 < NPV_STATS_HIST_BUCKETS; b++) {
        ck_assert_uint_eq(npv_stats_bucket_upper(b) + 1, npv_stats_bucket_lower(b + 1));
        ck_assert_uint_eq(npv_stats_bucket(npv_stats_bucket_lower(b)), b);
        ck_assert_uint_eq(npv_stats_bucket(npv_stats_bucket_upper(b)), b);
        /* At most 1/8 of the bucket's lower bound wide: 3 significant bits. */
        if (b >= 8)
            ck_assert_uint_le(npv_stats_bucket_upper(b) - npv_stats_bucket_lower(b) + 1,
                              npv_stats_bucket_lower(b) / 8);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("stats");
    TCase *tc = tcase_create("testdev");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, stats_count_every_class_and_the_socket_serves_json_and_prometheus);
    tcase_add_test(tc, stats_are_read_from_another_thread_while_jobs_run);
    suite_add_tcase(s, tc);
    tc = tcase_create("buckets");
    tcase_add_test(tc, latency_buckets_are_log_linear_and_contiguous);
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

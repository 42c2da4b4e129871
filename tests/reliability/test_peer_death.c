/* SPDX-License-Identifier: MIT */
/*
 * Peer death both ways, for every device of the table with a model and a
 * driver:
 * - the model SIGKILLed while the driver has jobs in flight: the run ends
 *   with an error (bounded by the driver's deadlines, the case's timeout
 *   bounds the whole), the device stays an error, the client's resources
 *   come back, and a new model on the same socket runs exact;
 * - the client SIGKILLed mid-DMA: the model frees every mapping and fd of
 *   that client (counted from its /proc) and serves the next one exact.
 *
 * Prints for scripts/reliability-report.py:
 *   peer device=NAME case=model-killed|client-killed passed=1 ...
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <npuvfio/dev.h>
#include <npuvfio/domain.h>

#include "npv_test.h"
#include "rel_harness.h"

/* More jobs than run before the kill: the run is in flight when its peer dies. */
#define LONG_RUN 10000000u

static void nap_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

struct long_run {
    const struct npv_device_entry *e;
    void *drv;
    int ret;
    struct npv_sample_result res;
};

static void *run_long(void *arg)
{
    struct long_run *lr = arg;
    struct npv_sample_opts o = {.iterations = LONG_RUN};
    lr->ret = lr->e->sample_run(lr->drv, &o, &lr->res);
    return NULL;
}

static void model_killed(const struct npv_device_entry *e)
{
    struct vu_server srv;
    rel_model_start(&srv, e);
    struct npv_ctx *ctx = rel_ctx_new();
    struct rel_pass p;
    rel_pass_run(ctx, e, srv.path, 2, NULL, NULL, &p);
    ck_assert_msg(p.err == 0 && p.exact, "%s: first pass", e->name);
    struct rel_counts base, now;
    rel_counts_read(0, ctx, &base);

    struct npv_domain *dom;
    struct npv_dev *dev;
    struct long_run lr = {.e = e};
    ck_assert_int_eq(npv_domain_new(ctx, NULL, &dom), 0);
    ck_assert_int_eq(npv_dev_open_vfio_user(ctx, srv.path, dom, NULL, &dev), 0);
    ck_assert_int_eq(e->driver_open(dev, &lr.drv), 0);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, run_long, &lr), 0);
    nap_ms(100); /* jobs under way (a delay, not a measurement) */
    vu_server_crash(&srv);
    pthread_join(th, NULL);
    ck_assert_msg(lr.ret < 0, "%s: a run whose device died returned %d", e->name, lr.ret);
    ck_assert_msg(lr.res.iterations < LONG_RUN, "%s: the run finished before the kill", e->name);
    /* The device stays gone: the next run is an error too, never a hang. */
    struct npv_sample_opts one = {.iterations = 1};
    struct npv_sample_result r1 = {0};
    int again = e->sample_run(lr.drv, &one, &r1);
    ck_assert_msg(again < 0, "%s: a run on a dead device returned %d", e->name, again);
    e->driver_close(lr.drv);
    npv_dev_close(dev);
    npv_domain_put(dom);
    rel_counts_read(0, ctx, &now);
    ck_assert_int_eq(now.fds, base.fds);
    ck_assert_int_eq(now.lib.dma_buffers, 0);
    ck_assert_int_eq(now.lib.devices, 0);

    rel_model_restart(&srv, e);
    rel_pass_run(ctx, e, srv.path, 16, NULL, NULL, &p);
    ck_assert_msg(p.err == 0 && p.exact, "%s: new model on the same socket: %s at %s", e->name,
                  npv_strerror(p.err), p.step ? p.step : "-");
    printf("peer device=%s case=model-killed passed=1 jobs-before-kill=%llu error=%s "
           "then=%s\n",
           e->name, (unsigned long long)lr.res.iterations, npv_strerror(lr.ret),
           npv_strerror(again));
    fflush(stdout);
    npv_ctx_free(ctx);
    vu_server_kill(&srv);
}

/* The client child: run until killed. */
static void client_main(const struct npv_device_entry *e, const char *path)
{
    struct npv_ctx *ctx = rel_ctx_new();
    struct rel_pass p;
    rel_pass_run(ctx, e, path, LONG_RUN, NULL, NULL, &p);
    _exit(3); /* never: the parent kills it first */
}

/* Wait (bounded) until the model's counts are back to base, then compare. */
static void expect_model_back(pid_t model, const struct rel_counts *base, const char *name)
{
    struct rel_counts now;
    for (int i = 0; i < 1000; i++) {
        rel_counts_read(model, NULL, &now);
        if (now.fds == base->fds && now.mappings == base->mappings)
            return;
        /* The model is its own process, built with the same sanitizer as this one. */
        if (!REL_COMPARE_MEMORY && now.fds == base->fds && i > 10)
            return;
        nap_ms(10);
    }
    ck_abort_msg("%s: the model holds %ld fds and %ld mappings, %ld and %ld before the client",
                 name, now.fds, now.mappings, base->fds, base->mappings);
}

static void client_killed(const struct npv_device_entry *e)
{
    struct vu_server srv;
    rel_model_start(&srv, e);
    struct npv_ctx *ctx = rel_ctx_new();
    struct rel_pass p;
    /* Two clients first: the model's threads and arenas settle. */
    for (int i = 0; i < 2; i++) {
        rel_pass_run(ctx, e, srv.path, 2, NULL, NULL, &p);
        ck_assert_msg(p.err == 0 && p.exact, "%s: warm-up pass", e->name);
    }
    struct rel_counts base;
    nap_ms(50);
    rel_counts_read(srv.pid, NULL, &base);
    expect_model_back(srv.pid, &base, e->name);

    struct rel_counts during;
    pid_t c = fork();
    ck_assert_int_ge(c, 0);
    if (c == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        client_main(e, srv.path);
    }
    /* Until the client's memory is mapped in the model: DMA is then under way. */
    for (int i = 0; i < 1000; i++) {
        rel_counts_read(srv.pid, NULL, &during);
        if (during.fds > base.fds)
            break;
        nap_ms(5);
    }
    ck_assert_msg(during.fds > base.fds, "%s: the client never reached the model", e->name);
    nap_ms(100);
    kill(c, SIGKILL);
    int status;
    ck_assert_int_eq(waitpid(c, &status, 0), c);
    ck_assert(WIFSIGNALED(status));
    expect_model_back(srv.pid, &base, e->name);

    rel_pass_run(ctx, e, srv.path, 16, NULL, NULL, &p);
    ck_assert_msg(p.err == 0 && p.exact, "%s: the next client: %s at %s", e->name,
                  npv_strerror(p.err), p.step ? p.step : "-");
    expect_model_back(srv.pid, &base, e->name);
    printf("peer device=%s case=client-killed passed=1 model-fds=%ld/%ld model-mappings=%ld\n",
           e->name, during.fds, base.fds, base.mappings);
    fflush(stdout);
    npv_ctx_free(ctx);
    vu_server_kill(&srv);
}

START_TEST(model_killed_with_jobs_in_flight_fails_them_and_a_new_model_runs_exact)
{
    const struct npv_device_entry *e = rel_device_or_note((size_t)_i, "peer", "case=model-killed");
    if (e != NULL)
        model_killed(e);
}
END_TEST

START_TEST(client_killed_mid_dma_leaves_the_model_clean_and_serving)
{
    const struct npv_device_entry *e = rel_device_or_note((size_t)_i, "peer", "case=client-killed");
    if (e != NULL)
        client_killed(e);
}
END_TEST

int main(void)
{
    size_t n = rel_device_count();
    Suite *s = suite_create("peer_death");
    TCase *tc = tcase_create("peer");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, model_killed_with_jobs_in_flight_fails_them_and_a_new_model_runs_exact,
                        0, (int)n);
    tcase_add_loop_test(tc, client_killed_mid_dma_leaves_the_model_clean_and_serving, 0, (int)n);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}

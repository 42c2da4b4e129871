/* SPDX-License-Identifier: MIT */
/*
 * Load: 4 threads at once, each driving a device model of the table (the
 * devices that run today, in turn) through one shared context, each its own
 * model process. Every thread's jobs must all complete, once, exact: the
 * sample workloads check each completion against the job it belongs to
 * (testdev by cookie in submission order, the Edge TPU request by request)
 * and every result byte against the CPU reference.
 *
 * NPUVFIO_LOAD_JOBS sets the total (default 4000; the stress target runs
 * 1,000,000). Prints for scripts/reliability-report.py:
 *   load threads=4 jobs=N completed=N lost=0 mismatches=0
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/dev.h>
#include <npuvfio/domain.h>

#include "npv_test.h"
#include "rel_harness.h"

#define THREADS      4
#define DEFAULT_JOBS 4000ull

struct worker {
    const struct npv_device_entry *e;
    struct npv_ctx *ctx;
    struct vu_server srv;
    uint64_t iterations;
    uint64_t jobs_per_iteration;
    int ret;
    const char *step;
    struct npv_sample_result res;
};

/* One iteration's jobs: what the workload completes per iteration on this device. */
static uint64_t jobs_per_iteration(struct npv_ctx *ctx, const struct npv_device_entry *e,
                                   const char *path)
{
    struct npv_domain *dom;
    struct npv_dev *dev;
    void *drv;
    ck_assert_int_eq(npv_domain_new(ctx, NULL, &dom), 0);
    ck_assert_int_eq(npv_dev_open_vfio_user(ctx, path, dom, NULL, &dev), 0);
    ck_assert_int_eq(e->driver_open(dev, &drv), 0);
    struct npv_sample_opts o = {.iterations = 1};
    struct npv_sample_result r = {0};
    ck_assert_int_eq(e->sample_run(drv, &o, &r), 0);
    e->driver_close(drv);
    npv_dev_close(dev);
    npv_domain_put(dom);
    ck_assert_uint_gt(r.jobs, 0);
    return r.jobs;
}

static void *work(void *arg)
{
    struct worker *w = arg;
    struct npv_domain *dom = NULL;
    struct npv_dev *dev = NULL;
    void *drv;
    w->step = "domain";
    w->ret = npv_domain_new(w->ctx, NULL, &dom);
    if (w->ret < 0)
        return NULL;
    w->step = "open";
    w->ret = npv_dev_open_vfio_user(w->ctx, w->srv.path, dom, NULL, &dev);
    if (w->ret < 0)
        goto out_dom;
    w->step = "driver";
    w->ret = w->e->driver_open(dev, &drv);
    if (w->ret < 0)
        goto out_dev;
    w->step = "run";
    struct npv_sample_opts o = {.iterations = (unsigned)w->iterations};
    w->ret = w->e->sample_run(drv, &o, &w->res);
    w->e->driver_close(drv);
out_dev:
    npv_dev_close(dev);
out_dom:
    npv_domain_put(dom);
    return NULL;
}

START_TEST(four_threads_lose_and_duplicate_no_completion_and_stay_exact)
{
    const struct npv_device_entry *run[8];
    size_t nrun = 0;
    for (size_t i = 0; npv_device_at(i) != NULL && nrun < 8; i++)
        if (rel_device_runs(npv_device_at(i)))
            run[nrun++] = npv_device_at(i);
    ck_assert_uint_gt(nrun, 0);
    const char *env = getenv("NPUVFIO_LOAD_JOBS");
    uint64_t total = env != NULL ? strtoull(env, NULL, 0) : DEFAULT_JOBS;
    ck_assert_uint_gt(total, 0);

    struct npv_ctx *ctx = rel_ctx_new();
    struct worker w[THREADS];
    memset(w, 0, sizeof(w));
    for (int t = 0; t < THREADS; t++) {
        w[t].e = run[(size_t)t % nrun];
        w[t].ctx = ctx;
        rel_model_start(&w[t].srv, w[t].e);
        w[t].jobs_per_iteration = jobs_per_iteration(ctx, w[t].e, w[t].srv.path);
        uint64_t share = (total + THREADS - 1) / THREADS;
        w[t].iterations = (share + w[t].jobs_per_iteration - 1) / w[t].jobs_per_iteration;
        ck_assert_uint_le(w[t].iterations, 0xffffffffu);
    }
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        ck_assert_int_eq(pthread_create(&th[t], NULL, work, &w[t]), 0);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);

    uint64_t jobs = 0, completed = 0, mismatches = 0;
    for (int t = 0; t < THREADS; t++) {
        ck_assert_msg(w[t].ret == 0, "thread %d (%s): %s at %s after %llu jobs", t, w[t].e->name,
                      strerror(-w[t].ret), w[t].step, (unsigned long long)w[t].res.jobs);
        uint64_t want = w[t].iterations * w[t].jobs_per_iteration;
        ck_assert_msg(w[t].res.iterations == w[t].iterations && w[t].res.jobs == want,
                      "thread %d (%s): %llu of %llu jobs completed", t, w[t].e->name,
                      (unsigned long long)w[t].res.jobs, (unsigned long long)want);
        ck_assert_msg(w[t].res.mismatches == 0, "thread %d (%s): %llu bytes differ", t,
                      w[t].e->name, (unsigned long long)w[t].res.mismatches);
        jobs += want;
        completed += w[t].res.jobs;
        mismatches += w[t].res.mismatches;
        printf("load thread=%d device=%s jobs=%llu completed=%llu mismatches=%llu\n", t,
               w[t].e->name, (unsigned long long)want, (unsigned long long)w[t].res.jobs,
               (unsigned long long)w[t].res.mismatches);
        vu_server_kill(&w[t].srv);
    }
    printf("load threads=%d jobs=%llu completed=%llu lost=%llu mismatches=%llu\n", THREADS,
           (unsigned long long)jobs, (unsigned long long)completed,
           (unsigned long long)(jobs - completed), (unsigned long long)mismatches);
    fflush(stdout);
    struct npv_ctx_resources lib;
    npv_ctx_resources(ctx, &lib);
    ck_assert_uint_eq(lib.devices + lib.domains + lib.dma_buffers + lib.iova_allocations, 0);
    npv_ctx_free(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("load");
    TCase *tc = tcase_create("load");
    tcase_set_timeout(tc, 0);
    tcase_add_test(tc, four_threads_lose_and_duplicate_no_completion_and_stay_exact);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}

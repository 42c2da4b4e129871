/* SPDX-License-Identifier: MIT */
/*
 * Thread rows (--threads N): each device's sample requests through an
 * npv_share (npuvfio/share.h, devices/threaded.c) by one thread and by N
 * threads sharing one driver, each thread with its own requests in flight,
 * against the device's model on the device core. The submitting threads
 * all run on the submitter CPU, so N threads get the CPU time one thread
 * gets: the rows show what sharing costs, not extra cores. Both move the
 * same data: one thread cycles over all the buffer sets N threads use
 * between them (devices/threaded.c, slot_of). Repetitions alternate 1 and N
 * threads; medians and spreads as elsewhere.
 *
 * The testdev has a second row, "testdev rings": its lock-free path, a ring
 * per thread (npv_testdev_queue_open, docs/threads.md), no share: 1 thread
 * on the driver's ring against N threads each on a queue of its own. The
 * RKNPU has one too, "queues": a queue per core (npv_rknpu_queue_open), 1
 * thread on core 0's queue against N threads each on its core's queue, N
 * capped at the three cores.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/domain.h>
#include <npuvfio/rknpu.h>

#include "bench.h"
#include "registry.h"
#include "threaded.h"

/* Requests each thread keeps in flight: the AICore has two slots in all. */
static unsigned depth_of(const char *name)
{
    return strcmp(name, "aicore") == 0 ? 2u : 8u;
}

int bench_threads(const struct bench_opts *o, const struct bench_cpus *c, unsigned nthreads)
{
    static const char *const names[] = {"testdev", "edgetpu", "rknpu", "aicore"};
    printf("thread rows: each device's sample through an npv_share, 1 thread vs %u threads on "
           "the submitter CPU %d, the model on CPU %d; %u reps x %llu ms\n",
           nthreads, c->sub, c->dev, o->reps, (unsigned long long)(o->point_ns / 1000000u));
    printf("  (rings: the testdev with a ring per thread, no share and no lock;\n"
           "   queues: the RKNPU with a queue per core and a thread per queue, no share and no "
           "lock, at most %u threads)\n",
           nthreads < NPV_RKNPU_NUM_CORES ? nthreads : NPV_RKNPU_NUM_CORES);
    printf("  %-8s %5s %14s %14s %7s  %s\n", "device", "qd/th", "1 thread /s", "N threads /s",
           "N / 1", "wrong");
    int worst = 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const struct npv_device_entry *e = npv_device_find(names[i]);
        if (e == NULL || e->model_create == NULL || e->driver_open == NULL) {
            printf("  %-8s skipped: no model or driver\n", names[i]);
            continue;
        }
        unsigned depth = depth_of(names[i]);
        struct bench_model model;
        int rc = bench_model_start(e, c, false, &model);
        struct bench_dev d = {0};
        struct threaded_sample *ts = NULL;
        if (rc == 0) {
            bench_pin(c->sub, false);
            rc = bench_dev_open(e, model.path, &d);
        }
        if (rc == 0)
            rc = threaded_sample_open(names[i], d.drv, nthreads * depth, &ts);
        struct series one = {0}, many = {0}, rone = {0}, rmany = {0};
        uint64_t wrong = 0, rwrong = 0;
        /* The lock-free per-queue row: the testdev's rings, the RKNPU's core queues. */
        bool rk = strcmp(names[i], "rknpu") == 0;
        bool rings = strcmp(names[i], "testdev") == 0 || rk;
        const char *rname = rk ? "queues" : "rings";
        unsigned qthreads = rk && nthreads > NPV_RKNPU_NUM_CORES ? NPV_RKNPU_NUM_CORES : nthreads;
        int rrc = 0;
        for (unsigned r = 0; rc == 0 && r < o->reps; r++) {
            double v;
            uint64_t bad;
            rc = threaded_sample_measure(ts, 1, depth, o->point_ns, &v, &bad);
            if (rc < 0)
                break;
            series_add(&one, v);
            wrong += bad;
            rc = threaded_sample_measure(ts, nthreads, depth, o->point_ns, &v, &bad);
            if (rc < 0)
                break;
            series_add(&many, v);
            wrong += bad;
            /* The ring-per-thread path, in the same repetition. */
            if (rings && rrc == 0)
                rrc = threaded_sample_measure_queues(ts, 1, depth, o->point_ns, &v, &bad);
            if (rings && rrc == 0) {
                series_add(&rone, v);
                rwrong += bad;
                rrc = threaded_sample_measure_queues(ts, qthreads, depth, o->point_ns, &v, &bad);
            }
            if (rings && rrc == 0) {
                series_add(&rmany, v);
                rwrong += bad;
            }
            bench_progress(o, "threads %s rep %u", names[i], r + 1);
        }
        threaded_sample_close(ts);
        bench_dev_close(&d);
        bench_model_stop(&model);
        if (rc < 0) {
            printf("  %-8s failed: %s\n", names[i], npv_strerror(rc));
            worst = rc;
            continue;
        }
        double m1 = series_median(&one), mn = series_median(&many);
        printf("  %-8s %5u %14.0f %14.0f %7.2f  %llu   (spread 1: %.0f..%.0f, N: %.0f..%.0f)\n",
               names[i], depth, m1, mn, mn / m1, (unsigned long long)wrong, series_min(&one),
               series_max(&one), series_min(&many), series_max(&many));
        if (wrong != 0)
            worst = -EIO;
        if (!rings)
            continue;
        if (rrc == -ERANGE) {
            printf("  %-8s skipped: the device has fewer queues than %u threads\n", rname,
                   qthreads);
            continue;
        }
        if (rrc < 0) {
            printf("  %-8s failed: %s\n", rname, npv_strerror(rrc));
            worst = rrc;
            continue;
        }
        m1 = series_median(&rone);
        mn = series_median(&rmany);
        printf("  %-8s %5u %14.0f %14.0f %7.2f  %llu   (spread 1: %.0f..%.0f, N: %.0f..%.0f)\n",
               rname, depth, m1, mn, mn / m1, (unsigned long long)rwrong, series_min(&rone),
               series_max(&rone), series_min(&rmany), series_max(&rmany));
        if (rwrong != 0)
            worst = -EIO;
    }
    return worst;
}

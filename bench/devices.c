/* SPDX-License-Identifier: MIT */
/*
 * Device rows: every device of the device table that has a model, a driver
 * and a sample workload runs that sample through its driver against its
 * model, beside the raw ring, so a reader sees what each driver adds. The
 * table is walked generically (npv_device_at), so a device that registers
 * later appears here without a change to the bench.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/domain.h>

#include "bench.h"
#include "registry.h"

static const struct npv_device_entry *entries[BENCH_MAX_DEVS];

void devices_init(struct dev_results *r)
{
    memset(r, 0, sizeof(*r));
    for (size_t i = 0; npv_device_at(i) != NULL && r->n < BENCH_MAX_DEVS; i++) {
        const struct npv_device_entry *e = npv_device_at(i);
        struct dev_row *row = &r->row[r->n];
        entries[r->n] = e;
        row->name = e->name;
        row->steady_reads = row->steady_writes = NAN;
        row->steady_trapped_reads = row->steady_trapped_writes = NAN;
        row->steady_messages = row->steady_messages_unbatched = NAN;
        r->n++;
        if (e->model_create == NULL || e->driver_open == NULL || e->sample_run == NULL) {
            row->skipped = e->model_create == NULL  ? "no model yet"
                           : e->driver_open == NULL ? "no driver yet"
                                                    : "no sample workload yet";
        }
    }
}

/* One run of e's sample against the model serving at path. */
static int sample_once(const struct npv_device_entry *e, const char *path, unsigned iterations,
                       struct npv_sample_result *res, struct npv_dev_stats *regs)
{
    struct npv_ctx *ctx;
    struct npv_domain *dom = NULL;
    struct npv_dev *dev = NULL;
    void *drv;
    int rc = bench_ctx_new(&ctx);
    if (rc < 0)
        return rc;
    rc = npv_domain_new(ctx, NULL, &dom);
    if (rc == 0)
        rc = npv_dev_open_vfio_user(ctx, path, dom, NULL, &dev);
    if (rc == 0)
        rc = e->driver_open(dev, &drv);
    if (rc == 0) {
        struct npv_sample_opts opts = {.iterations = iterations};
        memset(res, 0, sizeof(*res));
        struct npv_dev_stats before, after;
        npv_dev_stats(dev, &before);
        rc = e->sample_run(drv, &opts, res);
        npv_dev_stats(dev, &after);
        regs->reads_mapped = after.reads_mapped - before.reads_mapped;
        regs->writes_mapped = after.writes_mapped - before.writes_mapped;
        regs->reads_trapped = after.reads_trapped - before.reads_trapped;
        regs->writes_trapped = after.writes_trapped - before.writes_trapped;
        regs->messages = after.messages - before.messages;
        e->driver_close(drv);
    }
    npv_dev_close(dev);
    npv_domain_put(dom);
    npv_ctx_free(ctx);
    return rc;
}

/*
 * Messages per job in the steady state with posted writes sent one message
 * each (NPUVFIO_VU_BATCH=0, read by the client when it connects): the
 * figure before batching, measured beside the batched one.
 */
static double steady_messages_unbatched(const struct npv_device_entry *e, const char *path,
                                        unsigned iterations)
{
    const char *old = getenv("NPUVFIO_VU_BATCH");
    char *saved = old != NULL ? strdup(old) : NULL;
    setenv("NPUVFIO_VU_BATCH", "0", 1);
    struct npv_sample_result res, short_res;
    struct npv_dev_stats regs = {0}, short_regs = {0};
    double v = NAN;
    if (sample_once(e, path, iterations, &res, &regs) == 0 &&
        sample_once(e, path, BENCH_STEADY_SHORT, &short_res, &short_regs) == 0 &&
        res.jobs > short_res.jobs)
        v = ((double)regs.messages - (double)short_regs.messages) /
            (double)(res.jobs - short_res.jobs);
    if (saved != NULL)
        setenv("NPUVFIO_VU_BATCH", saved, 1);
    else
        unsetenv("NPUVFIO_VU_BATCH");
    free(saved);
    return v;
}

/*
 * Each model runs only while its sample does: an idle model left on the
 * device core would take time from the ring and peer points.
 */
int devices_rep(const struct bench_opts *o, const struct bench_cpus *c, struct dev_results *r)
{
    /* Each sample's own default size, or a fixed small one for --quick. */
    unsigned iterations = o->quick ? 20 : 0;
    for (unsigned i = 0; i < r->n; i++) {
        struct dev_row *row = &r->row[i];
        if (row->skipped != NULL)
            continue;
        struct npv_sample_result res;
        struct bench_model model;
        int rc = bench_model_start(entries[i], c, &model);
        if (rc < 0) {
            bench_model_stop(&model);
            row->skipped = "its model did not start";
            fprintf(stderr, "npuvfio-bench: %s model: %s\n", row->name, npv_strerror(rc));
            continue;
        }
        bench_pin(c->sub, false);
        struct npv_dev_stats regs = {0}, short_regs = {0};
        struct npv_sample_result short_res = {0};
        rc = sample_once(entries[i], model.path, iterations, &res, &regs);
        /* The steady state once: a short run beside it, whose setup is the same. */
        bool steady = rc == 0 && row->p50_ns.n == 0;
        if (steady &&
            sample_once(entries[i], model.path, BENCH_STEADY_SHORT, &short_res, &short_regs) < 0)
            steady = false;
        if (steady)
            row->steady_messages_unbatched =
                steady_messages_unbatched(entries[i], model.path, iterations);
        bench_model_stop(&model);
        if (rc < 0) {
            row->skipped = "its sample failed";
            fprintf(stderr, "npuvfio-bench: %s sample: %s\n", row->name, npv_strerror(rc));
            continue;
        }
        snprintf(row->what, sizeof(row->what), "%s", res.what);
        row->mismatches += res.mismatches;
        /* A sample that timed nothing gives NAN (null in the JSON), never a 0 as a measurement. */
        series_add(&row->p50_ns, res.p50_ns != 0 ? (double)res.p50_ns : NAN);
        series_add(&row->p99_ns, res.p99_ns != 0 ? (double)res.p99_ns : NAN);
        series_add(&row->per_s, res.elapsed_ns != 0 && res.iterations != 0
                                    ? (double)res.iterations * 1e9 / (double)res.elapsed_ns
                                    : NAN);
        double jobs = res.jobs != 0 ? (double)res.jobs : NAN;
        series_add(&row->reads_per_job, (double)(regs.reads_mapped + regs.reads_trapped) / jobs);
        series_add(&row->writes_per_job, (double)(regs.writes_mapped + regs.writes_trapped) / jobs);
        series_add(&row->trapped_reads_per_job, (double)regs.reads_trapped / jobs);
        series_add(&row->trapped_writes_per_job, (double)regs.writes_trapped / jobs);
        if (steady && res.jobs > short_res.jobs) {
            double dj = (double)(res.jobs - short_res.jobs);
            row->steady_reads = ((double)(regs.reads_mapped + regs.reads_trapped) -
                                 (double)(short_regs.reads_mapped + short_regs.reads_trapped)) /
                                dj;
            row->steady_writes = ((double)(regs.writes_mapped + regs.writes_trapped) -
                                  (double)(short_regs.writes_mapped + short_regs.writes_trapped)) /
                                 dj;
            row->steady_trapped_reads =
                ((double)regs.reads_trapped - (double)short_regs.reads_trapped) / dj;
            row->steady_trapped_writes =
                ((double)regs.writes_trapped - (double)short_regs.writes_trapped) / dj;
            row->steady_messages = ((double)regs.messages - (double)short_regs.messages) / dj;
        }
        bench_progress(o, "device %s sample: p50 %llu ns", row->name,
                       (unsigned long long)res.p50_ns);
    }
    return 0;
}

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

const double bench_dev_open_fracs[BENCH_DEV_OPEN_POINTS] = {0.25, 0.5, 0.75, 0.9};

/*
 * Issue 25's register-read targets for each driver's hot path (poll mode,
 * steady state), and where the device's README says why one is not met.
 */
static const struct {
    const char *name;
    double goal;
    const char *why;
} read_goals[] = {
    {"edgetpu", 2,
     "devices/edgetpu/README.md, \"The driver\": in poll mode each look reads "
     "sc_host_int_count until SC_HOST_0 counts the request, which the model runs 50 us after "
     "consuming it; libedgetpu reads it once per SC_HOST_0 interrupt"},
    {"rknpu", 3, "devices/rknpu/README.md"},
    {"aicore", 2,
     "devices/aicore/README.md, \"Register accesses per task\": the host plays the AICPU and "
     "polls each busy sub-core's COND once per pass, so reads count passes, as simpler's do"},
};

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
        row->reads_goal = row->max_rate = NAN;
        for (size_t g = 0; g < sizeof(read_goals) / sizeof(read_goals[0]); g++)
            if (strcmp(read_goals[g].name, e->name) == 0) {
                row->reads_goal = read_goals[g].goal;
                row->reads_why = read_goals[g].why;
            }
        r->n++;
        if (e->model_create == NULL || e->driver_open == NULL || e->sample_run == NULL) {
            row->skipped = e->model_create == NULL  ? "no model yet"
                           : e->driver_open == NULL ? "no driver yet"
                                                    : "no sample workload yet";
        }
    }
}

static uint64_t compute_read(const struct npv_model_compute *c)
{
    return c != NULL ? atomic_load_explicit(&c->ns, memory_order_relaxed) : 0;
}

/*
 * One run of the sample on an open device, open loop when interval_ns is
 * set. *compute_ns: what the model's workers computed during the sample
 * alone (the setup before and the teardown after are not in it).
 */
static int sample_on(const struct bench_dev *k, unsigned iterations, uint64_t interval_ns,
                     const struct npv_model_compute *compute, struct npv_sample_result *res,
                     struct npv_dev_stats *regs, uint64_t *compute_ns)
{
    struct npv_sample_opts opts = {.iterations = iterations, .interval_ns = interval_ns};
    memset(res, 0, sizeof(*res));
    struct npv_dev_stats before, after;
    npv_dev_stats(k->dev, &before);
    uint64_t c0 = compute_read(compute);
    int rc = k->e->sample_run(k->drv, &opts, res);
    *compute_ns = compute_read(compute) - c0;
    npv_dev_stats(k->dev, &after);
    regs->reads_mapped = after.reads_mapped - before.reads_mapped;
    regs->writes_mapped = after.writes_mapped - before.writes_mapped;
    regs->reads_trapped = after.reads_trapped - before.reads_trapped;
    regs->writes_trapped = after.writes_trapped - before.writes_trapped;
    regs->messages = after.messages - before.messages;
    return rc;
}

/* The same on a device opened for this run alone (every closed-loop sample). */
static int sample_run(const struct npv_device_entry *e, const char *path, unsigned iterations,
                      uint64_t interval_ns, const struct npv_model_compute *compute,
                      struct npv_sample_result *res, struct npv_dev_stats *regs,
                      uint64_t *compute_ns)
{
    struct bench_dev k;
    int rc = bench_dev_open(e, path, &k);
    if (rc == 0)
        rc = sample_on(&k, iterations, interval_ns, compute, res, regs, compute_ns);
    bench_dev_close(&k);
    return rc;
}

static int sample_once(const struct npv_device_entry *e, const char *path, unsigned iterations,
                       struct npv_sample_result *res, struct npv_dev_stats *regs)
{
    uint64_t unused;
    return sample_run(e, path, iterations, 0, NULL, res, regs, &unused);
}

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
        int rc = bench_model_start(entries[i], c, true, &model);
        if (rc < 0) {
            bench_model_stop(&model);
            row->skipped = "its model did not start";
            fprintf(stderr, "npuvfio-bench: %s model: %s\n", row->name, npv_strerror(rc));
            continue;
        }
        bench_pin(c->sub, false);
        struct npv_dev_stats regs = {0}, short_regs = {0};
        struct npv_sample_result short_res = {0};
        uint64_t compute_ns = 0;
        rc = sample_run(entries[i], model.path, iterations, 0, model.compute, &res, &regs,
                        &compute_ns);
        bool counted = model.compute != NULL;
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
        /*
         * The mean compute per iteration against the p50: the model's work
         * hardly varies from one iteration to the next, the host's does.
         */
        double compute =
            counted && res.iterations != 0 ? (double)compute_ns / (double)res.iterations : NAN;
        series_add(&row->compute_ns, compute);
        series_add(&row->overhead_ns, res.p50_ns != 0 ? (double)res.p50_ns - compute : NAN);
        series_add(&row->loop_per_s, res.span_ns != 0 && res.iterations != 0
                                         ? (double)res.iterations * 1e9 / (double)res.span_ns
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

/* The closed-loop maximum of a row measured now: one sample, for a run without repetitions. */
static double measure_max(unsigned i, const char *path)
{
    struct npv_sample_result res;
    struct npv_dev_stats regs;
    if (sample_once(entries[i], path, BENCH_DEV_MAX_ITERATIONS, &res, &regs) < 0 ||
        res.span_ns == 0)
        return NAN;
    return (double)res.iterations * 1e9 / (double)res.span_ns;
}

/* One open-loop point of row i at frac of its maximum, on the open device k. */
static int open_point(const struct bench_opts *o, const struct bench_dev *k, struct dev_row *row,
                      double frac, unsigned point_ms)
{
    struct dev_open_point *pt = &row->open[row->nopen];
    double rate = frac * row->max_rate;
    double want = rate * (double)point_ms / 1e3;
    unsigned count = want < BENCH_DEV_OPEN_MIN ? BENCH_DEV_OPEN_MIN
                     : want > BENCH_MAX_COUNT  ? BENCH_MAX_COUNT
                                               : (unsigned)want;
    struct npv_sample_result res;
    struct npv_dev_stats regs;
    uint64_t unused;
    int rc = sample_on(k, count, (uint64_t)(1e9 / rate), NULL, &res, &regs, &unused);
    if (rc < 0)
        return rc;
    row->mismatches += res.mismatches;
    *pt = (struct dev_open_point){
        .frac = frac,
        .rate = rate,
        .achieved = res.span_ns != 0 ? (double)res.iterations * 1e9 / (double)res.span_ns : NAN,
        .count = res.iterations,
        .p50_ns = res.p50_ns != 0 ? (double)res.p50_ns : NAN,
        .p99_ns = res.p99_ns != 0 ? (double)res.p99_ns : NAN,
        .p999_ns = res.p999_ns != 0 ? (double)res.p999_ns : NAN,
    };
    row->nopen++;
    bench_progress(o, "device %s open loop at %.0f%%: p50 %.0f ns", row->name, frac * 100,
                   pt->p50_ns);
    return 0;
}

/* Every point of row i on one device opened once and warmed by a short closed-loop sample. */
static int open_points(const struct bench_opts *o, unsigned i, const char *path,
                       struct dev_row *row, const double *fracs, unsigned nfracs, unsigned point_ms)
{
    struct bench_dev k;
    struct npv_sample_result res;
    struct npv_dev_stats regs;
    uint64_t unused;
    int rc = bench_dev_open(entries[i], path, &k);
    if (rc == 0)
        rc = sample_on(&k, BENCH_STEADY_SHORT, 0, NULL, &res, &regs, &unused);
    for (unsigned f = 0; rc == 0 && f < nfracs && row->nopen < BENCH_DEV_OPEN_POINTS; f++) {
        rc = open_point(o, &k, row, fracs[f], point_ms);
        if (rc < 0)
            fprintf(stderr, "npuvfio-bench: %s open loop at %.0f%%: %s\n", row->name,
                    fracs[f] * 100, npv_strerror(rc));
    }
    bench_dev_close(&k);
    return rc;
}

/*
 * One model and one open device per row for all its points: the driver's
 * cold start (its first iterations after open) is in none of them.
 */
int devices_open_loop(const struct bench_opts *o, const struct bench_cpus *c, struct dev_results *r,
                      const double *fracs, unsigned nfracs, unsigned point_ms)
{
    int status = 0;
    for (unsigned i = 0; i < r->n; i++) {
        struct dev_row *row = &r->row[i];
        if (row->skipped != NULL)
            continue;
        struct bench_model model;
        int rc = bench_model_start(entries[i], c, true, &model);
        if (rc < 0) {
            bench_model_stop(&model);
            row->open_skipped = "its model did not start";
            status = rc;
            continue;
        }
        bench_pin(c->sub, false);
        row->max_rate = series_median(&row->loop_per_s);
        if (!(row->max_rate > 0))
            row->max_rate = measure_max(i, model.path);
        if (!(row->max_rate > 0))
            row->open_skipped = "no closed-loop maximum to take fractions of";
        else if ((rc = open_points(o, i, model.path, row, fracs, nfracs, point_ms)) < 0) {
            row->open_skipped = "an open-loop point failed";
            status = rc;
        }
        bench_model_stop(&model);
    }
    return status;
}

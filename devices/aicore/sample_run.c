/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample.h"
#include "sample_run.h"

#define RUN_TIMEOUT_NS (30ull * 1000000000ull)

struct pmu_sum {
    uint64_t counters[NPV_AICORE_PMU_EVENTS], cycles;
};

static int prepare(struct npv_aicore *ac, struct aicore_sample_graph *g, uint32_t i,
                   struct npv_aicore_run **run)
{
    aicore_sample_fill(g, i + 1);
    return npv_aicore_prepare(ac, i & 1u, &g->desc, run);
}

/*
 * Wait for run i, check it, account it. Its latency: the driver's, from launch
 * to done; in open loop (due != 0), from when it was due to now.
 */
static int finish(struct npv_aicore_run *run, const struct aicore_sample_graph *g, uint64_t due,
                  struct npv_sample_result *res, struct pmu_sum *pmu, uint64_t *lat)
{
    struct npv_aicore_core_pmu cores[NPV_AICORE_MAX_CORES];
    struct npv_aicore_result out;
    int r = npv_aicore_wait(run, RUN_TIMEOUT_NS);
    if (r == 0)
        r = npv_aicore_result(run, &out);
    if (r < 0)
        return r;
    *lat = due != 0 ? npv_sample_now() - due : out.elapsed_ns;
    res->elapsed_ns += *lat;
    res->iterations++;
    res->jobs += out.tasks_done;
    res->bytes += aicore_sample_bytes(g);
    res->mismatches += aicore_sample_check(g);
    int n = npv_aicore_pmu(run, cores, NPV_AICORE_MAX_CORES);
    for (int c = 0; c < n; c++) {
        pmu->cycles += cores[c].total_cycles;
        for (uint32_t e = 0; e < NPV_AICORE_PMU_EVENTS; e++)
            pmu->counters[e] += cores[c].counters[e];
    }
    return npv_aicore_release(run);
}

static int run_all(struct npv_aicore *ac, const struct npv_sample_opts *opts,
                   struct aicore_sample_graph g[2], uint32_t n, uint64_t *lat,
                   struct npv_sample_result *res, struct pmu_sum *pmu)
{
    struct npv_aicore_run *run[2] = {NULL, NULL};
    bool open = opts != NULL && opts->interval_ns != 0;
    uint64_t due[2] = {0, 0}, start = npv_sample_now();
    int r = prepare(ac, &g[0], 0, &run[0]);
    due[0] = npv_sample_due(opts, start, 0);
    if (r == 0)
        r = npv_aicore_launch(run[0]);
    for (uint32_t i = 0; r == 0 && i < n; i++) {
        unsigned s = i & 1u, next = s ^ 1u;
        /* The next run is prepared while this one executes. */
        if (i + 1 < n)
            r = prepare(ac, &g[next], i + 1, &run[next]);
        if (r == 0)
            r = finish(run[s], &g[s], open ? due[s] : 0, res, pmu, &lat[i]);
        if (r == 0)
            run[s] = NULL; /* released */
        if (r == 0 && i + 1 < n) {
            due[next] = npv_sample_due(opts, start, i + 1);
            r = npv_aicore_launch(run[next]);
        }
    }
    res->span_ns = npv_sample_now() - start;
    /* After a failure: a run still executing is stopped by a reset, then both slots freed. */
    for (unsigned s = 0; s < 2; s++) {
        if (run[s] == NULL)
            continue;
        if (npv_aicore_release(run[s]) == -EBUSY) {
            (void)npv_aicore_reset(ac);
            (void)npv_aicore_release(run[s]);
        }
    }
    return r;
}

static void describe(struct npv_sample_result *res, const struct aicore_sample_graph *g,
                     const struct npv_aicore_topology *t, const struct pmu_sum *pmu)
{
    snprintf(res->what, sizeof(res->what),
             "fp32 graph of %u tasks (vadd %u, 16x16 matmul) on %u of %u sub-cores, 2 slots",
             g->desc.nr_tasks, AICORE_SAMPLE_ELEMS, t->nr_usable, t->nr_cores);
    int len = snprintf(res->detail, sizeof(res->detail),
                       "PMU over all cores and runs: cycles %" PRIu64, pmu->cycles);
    for (uint32_t e = 0; e < NPV_AICORE_PMU_EVENTS && len > 0 && (size_t)len < sizeof(res->detail);
         e++)
        len += snprintf(res->detail + len, sizeof(res->detail) - (size_t)len, ", ev%u %" PRIu64,
                        g->desc.pmu_events[e], pmu->counters[e]);
}

int aicore_sample_run(struct npv_aicore *ac, const struct npv_sample_opts *opts,
                      struct npv_sample_result *res)
{
    uint32_t n =
        opts != NULL && opts->iterations ? opts->iterations : AICORE_SAMPLE_DEFAULT_ITERATIONS;
    struct aicore_sample_graph *g = calloc(2, sizeof(*g));
    uint64_t *lat = calloc(n, sizeof(*lat));
    struct pmu_sum pmu = {0};
    struct npv_aicore_topology t;
    memset(res, 0, sizeof(*res));
    int r = -ENOMEM;
    if (g == NULL || lat == NULL)
        goto out;
    npv_aicore_topology(ac, &t);
    r = aicore_sample_build(ac, true, &g[0]);
    if (r == 0)
        r = aicore_sample_build(ac, true, &g[1]);
    if (r == 0)
        r = run_all(ac, opts, g, n, lat, res, &pmu);
    npv_sample_percentiles(lat, res);
    if (res->iterations > 0)
        describe(res, &g[0], &t, &pmu);
out:
    if (g != NULL) {
        aicore_sample_free(ac, &g[0]);
        aicore_sample_free(ac, &g[1]);
    }
    free(lat);
    free(g);
    return r;
}

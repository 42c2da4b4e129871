/* SPDX-License-Identifier: MIT */
/*
 * npuvfio-rknpu-switch-cost: what the domain switch costs an RKNPU job over
 * vfio-user, by the number of mappings in the target domain. The RKNPU model
 * runs in a child process; two domains each hold N buffers of 4 KiB (plus
 * the matmul's own and the driver's command memory). A job in the device's
 * current domain and a job that needs the other domain (the driver drains
 * the cores, then npv_dev_attach replays the target's mappings to the
 * server) are timed alternately; the medians and their difference are
 * printed, with the exact command line. Not a test: nothing is asserted.
 *
 * Side by side with the kernel backends: --kernel FILE reads the output of
 * tests/vm guest_switch_cost (one run per backend, lines "# legacy N ..."
 * and "# iommufd N ..."; this machine has no kernel VFIO device to measure
 * them on) and prints the three switch costs per mapping count in one
 * table, each column naming where it was measured.
 *
 *   npuvfio-rknpu-switch-cost [JOBS] [--kernel FILE]   (default 200 per point)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/domain.h>
#include <npuvfio/rknpu.h>

#include "rknpu_child.h"
#include "rknpu/sample.h"

static double median_us(uint64_t *v, unsigned n)
{
    bench_sort_u64(v, n);
    return (double)v[n / 2] / 1000.0;
}

static int run(struct npv_rknpu *npu, struct rknpu_sample_mm *s, uint32_t domain, uint64_t *ns)
{
    struct npv_rknpu_job job = {
        .tasks = &s->task, .nr_tasks = 1, .core_mask = 1, .domain_id = domain};
    uint64_t t0 = bench_now_ns();
    int r = npv_rknpu_run(npu, &job);
    *ns = bench_now_ns() - t0;
    return r;
}

/* A kernel backend's median switch cost for `maps` mappings from guest_switch_cost's output. */
static double kernel_median(const char *file, const char *backend, unsigned maps)
{
    FILE *f = file != NULL ? fopen(file, "r") : NULL;
    double found = -1.0;
    char line[256], name[32];
    unsigned n;
    double first, median;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "# %31s %u %lf %lf", name, &n, &first, &median) == 4 &&
            strcmp(name, backend) == 0 && n == maps)
            found = median;
    if (f != NULL)
        fclose(f);
    return found;
}

static void print_cell(double v)
{
    if (v < 0)
        printf(" %14s", "n/a");
    else
        printf(" %14.1f", v);
}

static int point(struct npv_rknpu *npu, unsigned maps, unsigned jobs, double *cost_us)
{
    static const struct rknpu_sample_shape shape = {
        .dtype = NPV_RKNPU_INT8, .m = 4, .k = 32, .n = 32};
    struct rknpu_sample_mm *s[2] = {NULL, NULL};
    struct npv_rknpu_mem **extra = calloc(2u * maps, sizeof(*extra));
    uint64_t *same = calloc(jobs, sizeof(uint64_t)), *other = calloc(jobs, sizeof(uint64_t));
    int r = extra && same && other ? 0 : -ENOMEM;
    for (uint32_t d = 0; d < 2 && r == 0; d++) {
        r = rknpu_sample_mm_new(npu, &shape, d, 0, 1 + d, &s[d]);
        for (unsigned i = 0; i < maps && r == 0; i++)
            r = npv_rknpu_mem_create(npu, 4096, d, 0, &extra[d * maps + i]);
    }
    uint64_t ns;
    /* Both domains visited once first. */
    for (uint32_t d = 0; d < 2 && r == 0; d++)
        r = run(npu, s[d], d, &ns);
    for (unsigned j = 0; j < jobs && r == 0; j++) {
        uint32_t d = j % 2;
        r = run(npu, s[d], d, &same[j]); /* the device is in domain d after the previous job */
        if (r == 0)
            r = run(npu, s[1 - d], 1 - d, &other[j]);
        if (r == 0)
            r = run(npu, s[1 - d], 1 - d, &ns); /* leave the device in 1 - d, then the loop flips */
    }
    if (r == 0) {
        double a = median_us(same, jobs), b = median_us(other, jobs);
        unsigned total = maps + 4; /* + A, B, C of the matmul and the driver's command memory */
        printf("%-10s %9u %12.1f %12.1f %12.1f %14.3f\n", "vfio-user", total, a, b, b - a,
               (b - a) / (double)total);
        *cost_us = b - a;
    }
    for (unsigned i = 0; extra != NULL && i < 2u * maps; i++)
        npv_rknpu_mem_destroy(extra[i]);
    rknpu_sample_mm_free(s[0]);
    rknpu_sample_mm_free(s[1]);
    free(extra);
    free(same);
    free(other);
    return r;
}

int main(int argc, char **argv)
{
    unsigned jobs = 0;
    const char *kernel = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--kernel") == 0 && i + 1 < argc)
            kernel = argv[++i];
        else
            jobs = (unsigned)strtoul(argv[i], NULL, 10);
    }
    if (jobs == 0)
        jobs = 200;
    char dir[] = "/tmp/npuvfio-rknpu-cost-XXXXXX", path[128];
    if (mkdtemp(dir) == NULL)
        return 1;
    snprintf(path, sizeof(path), "%s/rknpu.sock", dir);
    pid_t pid = bench_model_start(path, true);
    struct bench_rknpu b = {0};
    int r = pid > 0 ? bench_rknpu_open(path, &b) : -ECHILD;
    struct npv_rknpu *npu = b.npu;
    if (r == 0) {
        printf("# %s %u%s%s   (RKNPU model over vfio-user, one int8 4x32x32 matmul per job on "
               "core 0)\n",
               argv[0], jobs, kernel != NULL ? " --kernel " : "", kernel != NULL ? kernel : "");
        printf("%-10s %9s %12s %12s %12s %14s\n", "# transport", "mappings", "same_us", "switch_us",
               "cost_us", "cost_us/map");
        const unsigned counts[] = {1, 64, 512};
        double cost[3] = {-1.0, -1.0, -1.0};
        for (unsigned i = 0; i < 3 && r == 0; i++)
            r = point(npu, counts[i], jobs, &cost[i]);
        /* The backends side by side: one switch's cost, by the target domain's extra mappings. */
        printf("\n# switch cost, us   vfio-user: this run (RKNPU model, + 4 mappings of its own);\n"
               "# legacy type1 / iommufd: tests/vm guest_switch_cost medians%s%s\n",
               kernel != NULL ? " from " : " (not given: --kernel FILE)",
               kernel != NULL ? kernel : "");
        printf("%-10s %14s %14s %14s\n", "# mappings", "vfio-user", "legacy-type1", "iommufd");
        for (unsigned i = 0; i < 3 && r == 0; i++) {
            printf("%-10u", counts[i]);
            print_cell(cost[i]);
            print_cell(kernel_median(kernel, "legacy", counts[i]));
            print_cell(kernel_median(kernel, "iommufd", counts[i]));
            printf("\n");
        }
    }
    if (r < 0)
        fprintf(stderr, "npuvfio-rknpu-switch-cost: %s\n", npv_strerror(r));
    bench_rknpu_close(&b);
    bench_model_stop(pid, path);
    rmdir(dir);
    return r < 0 ? 1 : 0;
}

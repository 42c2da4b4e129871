/* SPDX-License-Identifier: MIT */
/* Samples, percentiles, the clock and CPU pinning (hwloc). */
#include <errno.h>
#include <hwloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

const char *const bench_mode_names[BENCH_MODES] = {"poll", "irq", "hybrid"};

static hwloc_topology_t topo;

int samples_init(struct samples *s, size_t cap)
{
    s->v = malloc(cap * sizeof(*s->v));
    s->n = 0;
    s->cap = cap;
    return s->v == NULL ? -ENOMEM : 0;
}

void samples_free(struct samples *s)
{
    free(s->v);
    s->v = NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double pct(const struct samples *s, double p)
{
    size_t i = (size_t)(p * (double)(s->n - 1) + 0.5);
    return (double)s->v[i];
}

void lat_compute(struct samples *s, struct lat *out)
{
    memset(out, 0, sizeof(*out));
    if (s->n == 0)
        return;
    qsort(s->v, s->n, sizeof(*s->v), cmp_u64);
    out->n = s->n;
    out->min = (double)s->v[0];
    out->p50 = pct(s, 0.50);
    out->p99 = pct(s, 0.99);
    out->p999 = pct(s, 0.999);
    out->max = (double)s->v[s->n - 1];
}

uint64_t bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void read_cpu_model(char *buf, size_t len)
{
    snprintf(buf, len, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "re");
    if (f == NULL)
        return;
    char line[256];
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "model name", 10) == 0) {
            char *p = strchr(line, ':');
            if (p != NULL) {
                p += 2;
                p[strcspn(p, "\n")] = 0;
                snprintf(buf, len, "%s", p);
            }
            break;
        }
    }
    fclose(f);
}

int bench_cpus_init(struct bench_cpus *c)
{
    memset(c, 0, sizeof(*c));
    read_cpu_model(c->model, sizeof(c->model));
    if (hwloc_topology_init(&topo) < 0 || hwloc_topology_load(topo) < 0)
        return -ENODEV;
    int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    if (n <= 0)
        return -ENODEV;
    c->npus = (unsigned)n;
    /* The submitter and the device side on different cores when there are two. */
    hwloc_obj_t a = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PU, 0);
    hwloc_obj_t b = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PU, n > 1 ? 1 : 0);
    c->sub = (int)a->os_index;
    c->dev = (int)b->os_index;
    return 0;
}

void bench_cpus_fini(void)
{
    if (topo != NULL)
        hwloc_topology_destroy(topo);
    topo = NULL;
}

int bench_pin(int os_index, bool whole_process)
{
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (set == NULL)
        return -ENOMEM;
    hwloc_bitmap_only(set, (unsigned)os_index);
    int rc =
        hwloc_set_cpubind(topo, set, whole_process ? HWLOC_CPUBIND_PROCESS : HWLOC_CPUBIND_THREAD);
    hwloc_bitmap_free(set);
    return rc < 0 ? -errno : 0;
}

void bench_progress(const struct bench_opts *o, const char *fmt, ...)
{
    static unsigned done;
    if (o->points == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    printf("  [%u/%u] ", ++done, o->points);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
}

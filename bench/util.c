/* SPDX-License-Identifier: MIT */
/* Samples, percentiles, repetitions, the clock, CPU pinning (hwloc), model children. */
#include <errno.h>
#include <hwloc.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/domain.h>

#include "registry.h"

#include "bench.h"

const char *const bench_mode_names[BENCH_MODES] = {"poll", "irq", "hybrid"};
const char *const bench_mem_names[BENCH_MEMS] = {"2 MiB", "4 KiB"};

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

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Repetitions that measured nothing are NAN: figures are taken over the others. */
unsigned series_measured(const struct series *s)
{
    unsigned k = 0;
    for (unsigned i = 0; i < s->n; i++)
        k += isfinite(s->v[i]) != 0;
    return k;
}

double series_median(const struct series *s)
{
    double v[BENCH_MAX_REPS];
    unsigned n = 0;
    for (unsigned i = 0; i < s->n; i++)
        if (isfinite(s->v[i]))
            v[n++] = s->v[i];
    if (n == 0)
        return NAN;
    qsort(v, n, sizeof(v[0]), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double series_min(const struct series *s)
{
    double m = NAN;
    for (unsigned i = 0; i < s->n; i++)
        if (isfinite(s->v[i]) && (isnan(m) || s->v[i] < m))
            m = s->v[i];
    return m;
}

double series_max(const struct series *s)
{
    double m = NAN;
    for (unsigned i = 0; i < s->n; i++)
        if (isfinite(s->v[i]) && (isnan(m) || s->v[i] > m))
            m = s->v[i];
    return m;
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

static hwloc_obj_t pu_by_os_index(int os_index)
{
    return hwloc_get_pu_obj_by_os_index(topo, (unsigned)os_index);
}

int bench_cpus_init(struct bench_cpus *c, int want_sub, int want_dev)
{
    memset(c, 0, sizeof(*c));
    c->sub = c->dev = -1;
    read_cpu_model(c->model, sizeof(c->model));
    if (hwloc_topology_init(&topo) < 0 || hwloc_topology_load(topo) < 0)
        return -ENODEV;
    int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    if (n <= 0)
        return -ENODEV;
    c->npus = (unsigned)n;
    /*
     * Only the CPUs this process may run on (taskset, a container's cpuset):
     * a pin outside them fails or, with taskset, escapes the user's choice.
     */
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0)
        return -errno;
    c->nallowed = (unsigned)CPU_COUNT(&allowed);
    if (want_sub >= 0) {
        if (pu_by_os_index(want_sub) == NULL || pu_by_os_index(want_dev) == NULL)
            return -EINVAL;
        if (!CPU_ISSET(want_sub, &allowed) || !CPU_ISSET(want_dev, &allowed))
            return -EPERM;
        c->sub = want_sub;
        c->dev = want_dev;
        return 0;
    }
    /* The submitter and the device side on the first two allowed PUs, in hwloc's order. */
    for (int i = 0; i < n && c->dev < 0; i++) {
        hwloc_obj_t pu = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PU, (unsigned)i);
        if (pu == NULL || pu->os_index >= CPU_SETSIZE || !CPU_ISSET(pu->os_index, &allowed))
            continue;
        if (c->sub < 0)
            c->sub = (int)pu->os_index;
        else
            c->dev = (int)pu->os_index;
    }
    return c->sub >= 0 ? 0 : -ENODEV;
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

int bench_model_start(const struct npv_device_entry *e, const struct bench_cpus *c,
                      bool count_compute, struct bench_model *m)
{
    m->pid = -1;
    m->path[0] = '\0';
    m->compute = NULL;
    /* Shared with the child, which adds its compute time to it; the bench reads it between samples.
     */
    void *shared = count_compute ? mmap(NULL, sizeof(*m->compute), PROT_READ | PROT_WRITE,
                                        MAP_SHARED | MAP_ANONYMOUS, -1, 0)
                                 : MAP_FAILED;
    if (shared != MAP_FAILED)
        m->compute = shared;
    snprintf(m->dir, sizeof(m->dir), "/tmp/npv-bench-XXXXXX");
    if (mkdtemp(m->dir) == NULL) {
        m->dir[0] = '\0';
        return -errno;
    }
    snprintf(m->path, sizeof(m->path), "%s/%s.sock", m->dir, e->name);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* Every thread of the model, its poller included, on the device core. */
        bench_pin(c->dev, true);
        int rc = npv_device_serve_counted(e, m->path, false, m->compute);
        _exit(rc < 0 ? 1 : 0);
    }
    m->pid = pid;
    uint64_t give_up = bench_now() + 10000000000ull;
    struct stat st;
    while (stat(m->path, &st) != 0) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            m->pid = -1;
            return -ECHILD;
        }
        if (bench_now() > give_up)
            return -ETIMEDOUT;
        usleep(1000);
    }
    return 0;
}

void bench_model_stop(struct bench_model *m)
{
    if (m->pid > 0) {
        kill(m->pid, SIGKILL);
        waitpid(m->pid, NULL, 0);
    }
    m->pid = -1;
    if (m->compute != NULL)
        munmap(m->compute, sizeof(*m->compute));
    m->compute = NULL;
    if (m->path[0] != '\0')
        unlink(m->path);
    if (m->dir[0] != '\0')
        rmdir(m->dir);
    m->path[0] = m->dir[0] = '\0';
}

/* The library's messages in the CLI's style (tools/npuvfio.c, log_sink): "PROGRAM: LEVEL: msg". */
static void bench_log_sink(void *user, enum npv_log_level level, const char *msg)
{
    (void)user;
    static const char *const tags[] = {"error", "warn", "info", "debug"};
    fprintf(stderr, "npuvfio-bench: %s: %s\n", tags[(unsigned)level < 4 ? level : 3], msg);
}

int bench_ctx_new(struct npv_ctx **out)
{
    int rc = npv_ctx_new(out);
    if (rc == 0)
        npv_ctx_set_log_sink(*out, bench_log_sink, NULL);
    return rc;
}

int bench_dev_open(const struct npv_device_entry *e, const char *path, struct bench_dev *d)
{
    memset(d, 0, sizeof(*d));
    d->e = e;
    int rc = bench_ctx_new(&d->ctx);
    if (rc == 0)
        rc = npv_domain_new(d->ctx, NULL, &d->dom);
    if (rc == 0)
        rc = npv_dev_open_vfio_user(d->ctx, path, d->dom, NULL, &d->dev);
    if (rc == 0)
        rc = e->driver_open(d->dev, &d->drv);
    return rc;
}

void bench_dev_close(struct bench_dev *d)
{
    if (d->drv != NULL)
        d->e->driver_close(d->drv);
    npv_dev_close(d->dev);
    npv_domain_put(d->dom);
    npv_ctx_free(d->ctx);
    memset(d, 0, sizeof(*d));
}

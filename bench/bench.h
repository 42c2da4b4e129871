/* SPDX-License-Identifier: MIT */
/*
 * npuvfio-bench: the ring engine against the generic test device's model
 * over vfio-user, the peers that bound what it could reach and the queue a
 * user would build instead, measured in the same run on the same two cores,
 * each figure the median of several repetitions that alternate ours and
 * the peers.
 */
#ifndef NPV_BENCH_H
#define NPV_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define BENCH_MODES     3
#define BENCH_MEMS      2
#define BENCH_MAX_QD    9 /* 1, 2, 4, ... 256 */
#define BENCH_MAX_REPS  31
#define BENCH_MAX_DEVS  8
#define BENCH_MAX_RATES 16
/* Requests one open-loop point sends at most (its latency samples are kept). */
#define BENCH_MAX_COUNT (4u << 20)

struct bench_opts {
    bool quick;
    uint64_t point_ns;  /* how long one measured point runs */
    uint64_t warmup_ns; /* run before each point, not counted */
    const char *json_path;
    const char *compare_path;
    unsigned reps;             /* repetitions of everything, ours and peers alternating */
    bool mode_on[BENCH_MODES]; /* --mode */
    unsigned nqd;              /* --qd */
    unsigned qd[BENCH_MAX_QD]; /* ascending powers of two, 1..256 */
    unsigned desc_size;        /* the same-work peer's request size (--desc-size) */
    int cpu_sub, cpu_dev;      /* --cpus; -1: the first two PUs hwloc lists */
    bool devices;              /* device rows (--no-devices turns them off) */
    unsigned threads;          /* --threads N: the thread rows only; 0: not asked */
    unsigned points;           /* measured points in the whole run; progress only when nonzero */
    /*
     * --rate: open-loop points instead of the closed-loop run. Each entry is
     * an arrival rate per second (rate[i] > 0) or a fraction of the measured
     * maximum (rate[i] < 0: -0.25 is 25 %%). count: requests per point (0:
     * rate x --duration).
     */
    unsigned nrates;
    double rate[BENCH_MAX_RATES];
    uint64_t count;
};

/*
 * "  [k/points] what" on stdout, one line per measured point, when
 * o->points is set (stdout is a terminal).
 */
void bench_progress(const struct bench_opts *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Latency percentiles of one point, in nanoseconds. */
struct lat {
    uint64_t n;
    double min, p50, p99, p999, max;
};

/* One figure's repetitions, in the order they were measured. */
struct series {
    unsigned n;
    double v[BENCH_MAX_REPS];
};
static inline void series_add(struct series *s, double v)
{
    if (s->n < BENCH_MAX_REPS)
        s->v[s->n++] = v;
}
/*
 * A repetition that measured nothing is stored as NAN (null in the JSON),
 * never as 0; the figures below skip it and are NAN when none measured.
 */
unsigned series_measured(const struct series *s);
double series_median(const struct series *s);
double series_min(const struct series *s);
double series_max(const struct series *s);

/* A growable sample buffer with a cap: beyond the cap samples are dropped, not stored. */
struct samples {
    uint64_t *v;
    size_t n, cap;
};
int samples_init(struct samples *s, size_t cap);
void samples_free(struct samples *s);
static inline void samples_add(struct samples *s, uint64_t ns)
{
    if (s->n < s->cap)
        s->v[s->n++] = ns;
}
/* Sorts the samples. */
void lat_compute(struct samples *s, struct lat *out);

uint64_t bench_now(void);

/* The two logical CPUs the run uses: submitter / "device" side. */
struct bench_cpus {
    int sub, dev;      /* OS indexes; dev -1: only one CPU is allowed */
    unsigned npus;     /* PUs the machine has */
    unsigned nallowed; /* CPUs this process may run on (sched_getaffinity) */
    char model[128];   /* CPU model name */
};
/*
 * want_sub / want_dev: OS indexes from --cpus, or -1 for the first two PUs
 * this process may run on (c->dev stays -1 when only one is allowed).
 * -EINVAL: --cpus names a CPU the machine lacks; -EPERM: one not allowed.
 */
int bench_cpus_init(struct bench_cpus *c, int want_sub, int want_dev);
void bench_cpus_fini(void);
/* npv_ctx_new with the library's messages printed as "npuvfio-bench: LEVEL: msg". */
struct npv_ctx;
struct npv_domain;
struct npv_dev;
int bench_ctx_new(struct npv_ctx **out);
/* Pin the calling thread (or, with whole_process, the process) to an OS CPU index. */
int bench_pin(int os_index, bool whole_process);

/*
 * A device model serving on a private socket in a child pinned to the device
 * core. compute: the model's compute counter (devices/model_compute.h), in
 * memory shared with the child, which adds to it; NULL when it could not be
 * shared.
 */
struct npv_model_compute;
struct bench_model {
    int pid;
    char dir[64];
    char path[128];
    struct npv_model_compute *compute;
};
struct npv_device_entry;
/*
 * count_compute: the model counts its own compute time (devices/model_compute.h) for the device
 * rows; off for the ring and thread rows, which measure the transport and a clock read per unit
 * of work would be part of what they measure.
 */
int bench_model_start(const struct npv_device_entry *e, const struct bench_cpus *c,
                      bool count_compute, struct bench_model *m);
/* Harmless when nothing was started. */
void bench_model_stop(struct bench_model *m);

/* A device opened through its driver on the model serving at a path. */
struct bench_dev {
    const struct npv_device_entry *e;
    struct npv_ctx *ctx;
    struct npv_domain *dom;
    struct npv_dev *dev;
    void *drv;
};
/* 0 or a negative errno; bench_dev_close it either way (it takes a half-opened one). */
int bench_dev_open(const struct npv_device_entry *e, const char *path, struct bench_dev *d);
/* Harmless on a zeroed one; leaves it zeroed. */
void bench_dev_close(struct bench_dev *d);

/* ---- peers ---- */
int peer_cacheline(const struct bench_opts *o, const struct bench_cpus *c, struct lat *out);
int peer_eventfd(const struct bench_opts *o, const struct bench_cpus *c, struct lat *out);
int peer_uring_nop(const struct bench_opts *o, const struct bench_cpus *c, unsigned batch,
                   double *rate);
/* The bound: rte_ring SPSC, 16-byte elements one way in bursts of 32. -ENOTSUP without DPDK. */
int peer_rte_ring(const struct bench_opts *o, const struct bench_cpus *c, double *rate);
/*
 * The same work as ours, built from two rte_rings: o->desc_size-byte requests
 * to a worker on the device core, which dequeues everything there is (as our
 * model's poller works everything up to the doorbell) and sends a 16-byte
 * completion back per request; the submitter keeps qd in flight, reaping and
 * refilling in batches of bench_batch(qd). -ENOTSUP without DPDK.
 */
int peer_same_work(const struct bench_opts *o, const struct bench_cpus *c, unsigned qd,
                   double *rate);
/* Reap-and-refill batch at queue depth qd: half the depth, at most 32 (the peers' burst). */
static inline unsigned bench_batch(unsigned qd)
{
    unsigned b = qd / 2;
    return b > 32 ? 32 : (b > 0 ? b : 1);
}

struct peer_results {
    struct series cacheline_p50;
    struct lat cacheline_rtt; /* of the last repetition, for the percentile columns */
    struct series eventfd_p50;
    struct lat eventfd_rtt;
    struct series uring_nop_1;  /* ops/s, one submit+reap at a time */
    struct series uring_nop_32; /* ops/s, batches of 32 */
    bool have_rte_ring;
    const char *rte_ring_missing;          /* why not, when !have_rte_ring */
    struct series rte_ring_16;             /* elements/s, SPSC, 16-byte, bursts of 32, one way */
    unsigned rte_ring_empty;               /* repetitions in which the bound moved nothing */
    struct series same_work[BENCH_MAX_QD]; /* jobs/s per --qd entry */
};

/* ---- ours ---- */

/* What one rate point cost besides time, per job. */
struct per_job {
    struct series wakeups; /* sleeps on the interrupt's eventfd (each ends in a wake-up) */
    struct series cpu_ns;  /* CPU time of the submitting thread (CLOCK_THREAD_CPUTIME_ID) */
};

struct ours_mem {
    bool ran;
    const char *skipped; /* why not, when !ran */
    size_t page_size;    /* what the allocator gave */
    struct series rtt_p50[BENCH_MODES];
    struct lat rtt[BENCH_MODES]; /* of the last repetition, for the percentile columns */
    struct per_job rtt_cost[BENCH_MODES];
    /*
     * The cache-line peer measured just before the QD1 round trips, on the
     * same cores: the latency between two vCPUs moves when the host places
     * them elsewhere, so the QD1 ratio takes the peer from the same moment.
     */
    struct series cacheline_adjacent_p50;
    struct series rate[BENCH_MODES][BENCH_MAX_QD];
    struct per_job rate_cost[BENCH_MODES][BENCH_MAX_QD];
};

struct ours;
struct ours_results {
    struct ours_mem mem[BENCH_MEMS]; /* [0] 2 MiB hugepage, [1] 4 KiB */
    /* Syscalls counted over round trips on a filtered thread (see syscount.c). */
    int syscount_rc;
    uint64_t sys_poll, rt_poll;
    uint64_t sys_irq, rt_irq;
    int last_nr_poll; /* a system call number seen in the poll loop, or -1 */
};
/* Start the testdev model and open it over vfio-user. */
int ours_open(const struct bench_opts *o, const struct bench_cpus *c, struct ours **out);
void ours_close(struct ours *t);
/* One repetition of every ours point for ring memory m (0: 2 MiB, 1: 4 KiB). */
int ours_rep(struct ours *t, int m, struct ours_results *r);

/*
 * ---- open loop (--rate) ----
 * Requests arrive on a fixed schedule (request k at start + k / rate), are
 * submitted as soon as they are due and the ring has room, and each one's
 * latency runs from its scheduled time to the moment its completion is
 * reaped: a submitter that falls behind (ring full, a stall) does not hide
 * the wait (no coordinated omission). Poll mode, 4 KiB ring memory, up to
 * the ring's capacity in flight.
 */
struct open_point {
    double rate;     /* arrivals per second asked */
    uint64_t count;  /* requests sent and completed */
    double achieved; /* completions per second over the point */
    uint64_t full;   /* requests that came due with the ring full (waited for room) */
    struct lat lat;  /* from the scheduled time, ns */
};
/* The closed-loop maximum the --rate percentages are of: poll, QD 256, one point. */
int ours_max_rate(struct ours *t, double *rate);
int ours_open_loop(struct ours *t, double rate, uint64_t count, struct open_point *out);

/* ---- device rows: each registered device's sample on its model ---- */

/*
 * One open-loop point of a device row: iterations of its sample due on a
 * fixed schedule (npv_sample_opts.interval_ns) at frac of the row's maximum,
 * latency from each one's due time.
 */
struct dev_open_point {
    double frac, rate; /* asked: the fraction of max_rate, and iterations per second */
    double achieved;   /* iterations per second from the first start to the last end */
    uint64_t count;
    double p50_ns, p99_ns, p999_ns;
};
#define BENCH_DEV_OPEN_POINTS 4

struct dev_row {
    const char *name;
    const char *skipped; /* why not, when set */
    char what[128];
    struct series p50_ns, p99_ns, per_s;
    /*
     * Register accesses per job the device completed (npv_dev_stats over the
     * whole sample run, its setup included, divided by its jobs): all, and
     * the trapped ones (a message each over vfio-user) among them.
     */
    struct series reads_per_job, writes_per_job, trapped_reads_per_job, trapped_writes_per_job;
    /*
     * The driver's hot path alone (steady state), measured once in the first
     * repetition: the difference between this sample and one of
     * BENCH_STEADY_SHORT iterations, per job of the difference, so setup and
     * teardown cancel. NAN when not measured.
     */
    double steady_reads, steady_writes, steady_trapped_reads, steady_trapped_writes;
    /*
     * Messages to the device per job in the steady state (npv_dev_stats
     * messages, the same difference): with posted writes batched (the
     * default) and with each posted write a message of its own
     * (NPUVFIO_VU_BATCH=0), what batching saves. NAN when not measured.
     */
    double steady_messages, steady_messages_unbatched;
    uint64_t mismatches; /* over every repetition */
    /*
     * The model's own compute per iteration (its workers' CPU time over the
     * sample, model_compute.h, divided by the iterations), and what the p50
     * leaves for the host: the driver and the transport (p50 - compute).
     * NAN when the model does not measure it.
     */
    struct series compute_ns, overhead_ns;
    /*
     * Iterations per second of the sample's whole loop (res.span_ns: its CPU
     * check of each result included, which per_s leaves out): what an open
     * loop through the same sample can sustain, so the open-loop maximum.
     */
    struct series loop_per_s;
    /*
     * The hot path's register-read target (issue 25 item 2), on steady_reads:
     * goal reads per job; NAN: none for this device. why: where the README
     * explains a shortfall.
     */
    double reads_goal;
    const char *reads_why;
    /* Open loop (devices_open_loop): the closed-loop maximum the points are fractions of. */
    double max_rate;
    const char *open_skipped; /* why no points, when set */
    unsigned nopen;
    struct dev_open_point open[BENCH_DEV_OPEN_POINTS];
};
struct dev_results {
    unsigned n;
    struct dev_row row[BENCH_MAX_DEVS];
};
#define BENCH_STEADY_SHORT 5u
/* Fill r->row[] from the device table. */
void devices_init(struct dev_results *r);
/* One repetition: each runnable device's model started, its sample run, the model stopped. */
int devices_rep(const struct bench_opts *o, const struct bench_cpus *c, struct dev_results *r);
/*
 * Open-loop points of each runnable device at fracs[] (at most
 * BENCH_DEV_OPEN_POINTS) of its closed-loop maximum: the median loop_per_s
 * of the repetitions, or one BENCH_DEV_MAX_ITERATIONS-iteration closed-loop
 * sample measured here when there were none. A point runs for about
 * point_ms (the full run: BENCH_DEV_OPEN_MS, --quick BENCH_DEV_OPEN_QUICK_MS)
 * and at least BENCH_DEV_OPEN_MIN iterations. 0, or a negative errno.
 */
#define BENCH_DEV_OPEN_MS        1000u
#define BENCH_DEV_OPEN_QUICK_MS  100u
#define BENCH_DEV_OPEN_MIN       5u
#define BENCH_DEV_MAX_ITERATIONS 20u
int devices_open_loop(const struct bench_opts *o, const struct bench_cpus *c, struct dev_results *r,
                      const double *fracs, unsigned nfracs, unsigned point_ms);
/* The fractions of the full run's open-loop points: 25, 50, 75 and 90 %. */
extern const double bench_dev_open_fracs[BENCH_DEV_OPEN_POINTS];

/*
 * The thread rows (--threads N, bench/threads.c): each device's sample
 * through an npv_share by 1 and by nthreads threads. 0, or the last error.
 */
int bench_threads(const struct bench_opts *o, const struct bench_cpus *c, unsigned nthreads);

/*
 * Run fn(arg) on a new thread whose system calls are each counted (and then
 * allowed to proceed). fn reads the running count through *counter (an
 * atomic the supervisor increments before the call proceeds) so it can
 * bracket exactly the part it measures; *last_nr is the number of the most
 * recent call. Returns 0 or a negative errno.
 */
int syscount_run(void (*fn)(void *arg, const uint64_t *counter, const int *last_nr), void *arg);

extern const char *const bench_mode_names[BENCH_MODES];
extern const char *const bench_mem_names[BENCH_MEMS];

/* ---- targets, JSON, comparison ---- */
enum target_dir { TARGET_AT_MOST, TARGET_AT_LEAST, TARGET_ZERO };
struct target {
    const char *name;
    const char *what;
    double value; /* NAN when it could not be measured */
    double goal;
    enum target_dir dir;
    bool met;
};
#define BENCH_TARGETS 6

struct bench_run {
    const struct bench_opts *o;
    const struct bench_cpus *c;
    const char *cmdline;
    const char *kernel;
    const struct peer_results *p;
    const struct ours_results *r;
    const struct dev_results *d;
    const struct target *t;
    double elapsed_s;
};
int bench_write_json(const char *path, const struct bench_run *run);
/* A device row's read target, and its open-loop points, as JSON values (both JSON outputs). */
void bench_json_reads_target(FILE *f, const struct dev_row *d);
void bench_json_dev_open(FILE *f, const struct dev_row *d);
/*
 * Print today's target ratios against those in an earlier --json FILE; a
 * ratio that got worse by more than a third is reported loudly on stdout and
 * stderr. Returns how many did (0 or more), or a negative errno when FILE
 * cannot be read.
 */
int bench_compare(const char *path, const struct target *t, int nt);

#endif

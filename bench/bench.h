/* SPDX-License-Identifier: MIT */
/*
 * npuvfio-bench: the ring engine against the generic test device's model
 * over vfio-user, and the peers that bound what it could reach, measured in
 * the same run on the same two cores.
 */
#ifndef NPV_BENCH_H
#define NPV_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bench_opts {
    bool quick;
    uint64_t point_ns;  /* how long one measured point runs */
    uint64_t warmup_ns; /* run before each point, not counted */
    const char *json_path;
    unsigned qd_max;
    unsigned points; /* measured points in the whole run; progress lines only when nonzero */
};

/*
 * "  [k/points] what" on stdout, one line per measured point, when
 * o->points is set (stdout is a terminal): the full run takes a minute or two.
 */
void bench_progress(const struct bench_opts *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Latency percentiles of one point, in nanoseconds. */
struct lat {
    uint64_t n;
    double min, p50, p99, p999, max;
};

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
    int sub, dev;    /* OS indexes */
    unsigned npus;   /* PUs the machine has */
    char model[128]; /* CPU model name */
};
int bench_cpus_init(struct bench_cpus *c);
void bench_cpus_fini(void);
/* Pin the calling thread (or, with whole_process, the process) to an OS CPU index. */
int bench_pin(int os_index, bool whole_process);

/* ---- peers ---- */
struct peer_results {
    struct lat cacheline_rtt;
    struct lat eventfd_rtt;
    double uring_nop_rate_1;  /* ops/s, one submit+reap at a time */
    double uring_nop_rate_32; /* ops/s, batches of 32 */
    bool have_rte_ring;
    double rte_ring_rate_32;      /* elements/s, SPSC, 16-byte elements, bursts of 32 */
    const char *rte_ring_missing; /* why not, when !have_rte_ring */
};
int peer_cacheline(const struct bench_opts *o, const struct bench_cpus *c, struct lat *out);
int peer_eventfd(const struct bench_opts *o, const struct bench_cpus *c, struct lat *out);
int peer_uring_nop(const struct bench_opts *o, const struct bench_cpus *c, unsigned batch,
                   double *rate);
/* -ENOTSUP when built without DPDK. */
int peer_rte_ring(const struct bench_opts *o, const struct bench_cpus *c, double *rate);

/* ---- ours ---- */
#define BENCH_MODES  3
#define BENCH_MEMS   2
#define BENCH_MAX_QD 9 /* 1, 2, 4, ... 256 */

struct ours_mem {
    bool ran;
    const char *skipped; /* why not, when !ran */
    size_t page_size;    /* what the allocator gave */
    struct lat rtt[BENCH_MODES];
    /*
     * What a QD1 round trip costs besides time, per job over the measured
     * part: sleeps on the interrupt's eventfd (each ends in a wake-up) and
     * CPU time of the submitting thread (CLOCK_THREAD_CPUTIME_ID).
     */
    double wakeups_per_job[BENCH_MODES];
    double cpu_ns_per_job[BENCH_MODES];
    /*
     * The cache-line peer measured just before rtt[poll], on the same cores:
     * the latency between two vCPUs moves when the host places them
     * elsewhere, so the QD1 ratio takes the peer from the same moment.
     */
    struct lat cacheline_adjacent;
    double rate[BENCH_MODES][BENCH_MAX_QD];
    unsigned nqd;
    unsigned qd[BENCH_MAX_QD];
};
struct ours_results {
    struct ours_mem mem[BENCH_MEMS]; /* [0] 2 MiB hugepage, [1] 4 KiB */
    /* Syscalls counted over round trips on a filtered thread (see syscount.c). */
    int syscount_rc;
    uint64_t sys_poll, rt_poll;
    uint64_t sys_irq, rt_irq;
    int last_nr_poll; /* a system call number seen in the poll loop, or -1 */
};
int ours_run(const struct bench_opts *o, const struct bench_cpus *c, struct ours_results *r);

/*
 * Run fn(arg) on a new thread whose system calls are each counted (and then
 * allowed to proceed). fn reads the running count through *counter (an
 * atomic the supervisor increments before the call proceeds) so it can
 * bracket exactly the part it measures; *last_nr is the number of the most
 * recent call. Returns 0 or a negative errno.
 */
int syscount_run(void (*fn)(void *arg, const uint64_t *counter, const int *last_nr), void *arg);

extern const char *const bench_mode_names[BENCH_MODES];

#endif

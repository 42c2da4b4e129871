/* SPDX-License-Identifier: MIT */
/*
 * npuvfio-bench: ring round trips and throughput against the generic test
 * device's model, with the peers that bound them measured in the same run on
 * the same two cores, printed as one table (ours, peer, ratio) and, with
 * --json, as a file for CI.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <npuvfio/ctx.h>

#include "bench.h"

struct target {
    const char *name;
    const char *what;
    double value; /* NAN when it could not be measured */
    const char *goal;
    bool met;
};

static const char *const mem_names[BENCH_MEMS] = {"2 MiB", "4 KiB"};

/*
 * Fail before minutes of measuring rather than after: --json FILE must be
 * writable now. A file created by the check is removed again.
 */
static int check_writable(const char *path)
{
    bool existed = access(path, F_OK) == 0;
    FILE *f = fopen(path, "ae");
    if (f == NULL) {
        fprintf(stderr, "npuvfio-bench: --json %s: cannot write it: %s (nothing measured)\n", path,
                strerror(errno));
        return -errno;
    }
    fclose(f);
    if (!existed)
        unlink(path);
    return 0;
}

/* How many points the run measures and roughly how long that takes; progress on a terminal. */
static void print_plan(struct bench_opts *o)
{
    unsigned nqd = 0;
    for (unsigned qd = 1; qd <= o->qd_max && nqd < BENCH_MAX_QD; qd *= 2)
        nqd++;
    /* Per ring memory: the adjacent cache line, then per mode QD1 round trips and each QD. */
    unsigned points = BENCH_MEMS * (1 + BENCH_MODES * (1 + nqd)) + 5;
    double secs = (double)points * (double)(o->point_ns + o->warmup_ns) / 1e9;
    bool tty = isatty(STDOUT_FILENO);
    printf("plan:    %u points, about %.0f s%s\n\n", points, secs,
           tty ? "; a line per point follows" : "");
    if (tty)
        o->points = points;
}

static void usage(FILE *f)
{
    fprintf(f, "Usage: npuvfio-bench [--quick] [--point-ms N] [--qd-max N] [--json FILE]\n"
               "\n"
               "Measure the ring engine against the testdev model over vfio-user (QD1 round\n"
               "trips, throughput at queue depths 1..256, in poll, irq and hybrid modes, with\n"
               "2 MiB hugepage and 4 KiB ring memory) and, in the same run on the same cores,\n"
               "a cache line bounced between the cores, eventfd ping-pong, io_uring NOPs and\n"
               "DPDK's rte_ring. Warm-up is excluded from every figure.\n"
               "\n"
               "  --quick        short points (whole run well under 30 s)\n"
               "  --point-ms N   measured time per point (default 500, quick 60)\n"
               "  --qd-max N     largest queue depth (default 256)\n"
               "  --json FILE    also write every figure and the targets as JSON\n");
}

static void print_lat(const char *name, const struct lat *l)
{
    printf("  %-28s %8.0f %8.0f %8.0f %8.0f %9.0f %9llu\n", name, l->min, l->p50, l->p99, l->p999,
           l->max, (unsigned long long)l->n);
}

/* Descriptor bytes per job: what each side moves through the caches. */
#define OURS_DESC_BYTES 32.0 /* sizeof(struct npv_testdev_desc), device ABI */
#define RTE_ELEM_BYTES  16.0

static double best_poll_rate_from(const struct ours_mem *m, unsigned min_qd);

/*
 * What the throughput ratios compare, so a reader does not take them for
 * like with like: the descriptor sizes differ, and only ours is a round trip.
 */
static void print_notes(const struct peer_results *p, const struct ours_mem *bm)
{
    double ours = bm != NULL ? best_poll_rate_from(bm, 32) : NAN;
    printf("\nNotes on the throughput comparison:\n");
    printf(
        "  - ours: every job is a %.0f-byte testdev descriptor (%.0f per 64-byte line) written by\n"
        "    the submitter and read by the model on the other core, plus a completion: status\n"
        "    block written once per batch, cookie and status reaped per job. The submitter\n"
        "    reaps and refills in batches of QD/2 (at most 32, the peers' burst), one doorbell\n"
        "    per batch. rte_ring moves %.0f-byte elements (%.0f per line) one way, with no\n"
        "    completion.\n",
        OURS_DESC_BYTES, 64.0 / OURS_DESC_BYTES, RTE_ELEM_BYTES, 64.0 / RTE_ELEM_BYTES);
    if (p->have_rte_ring && isfinite(ours))
        printf("  - descriptor cache lines crossing cores: ours %.2f M lines/s, rte_ring %.2f M "
               "lines/s (ratio %.2f; per job %.2f)\n",
               ours * OURS_DESC_BYTES / 64.0 / 1e6,
               p->rte_ring_rate_32 * RTE_ELEM_BYTES / 64.0 / 1e6,
               ours * OURS_DESC_BYTES / (p->rte_ring_rate_32 * RTE_ELEM_BYTES),
               ours / p->rte_ring_rate_32);
    printf(
        "  - io_uring NOPs run on the submitting core alone; ours and rte_ring use both cores.\n");
    printf(
        "  - the QD1 target takes the cache line measured just before ours (the \"slot\" rows):\n"
        "    the latency between two vCPUs changes when the host moves them.\n");
}

static const struct ours_mem *best_mem(const struct ours_results *r)
{
    for (int m = 0; m < BENCH_MEMS; m++)
        if (r->mem[m].ran)
            return &r->mem[m];
    return NULL;
}

static double best_poll_rate_from(const struct ours_mem *m, unsigned min_qd)
{
    double best = NAN;
    for (unsigned q = 0; q < m->nqd; q++)
        if (m->qd[q] >= min_qd && (isnan(best) || m->rate[0][q] > best))
            best = m->rate[0][q];
    return best;
}

static void json_lat(FILE *f, const struct lat *l)
{
    fprintf(f,
            "{\"n\": %llu, \"min\": %.1f, \"p50\": %.1f, \"p99\": %.1f, \"p999\": %.1f, "
            "\"max\": %.1f}",
            (unsigned long long)l->n, l->min, l->p50, l->p99, l->p999, l->max);
}

static void json_num(FILE *f, double v)
{
    if (!isfinite(v))
        fprintf(f, "null");
    else
        fprintf(f, "%.6g", v);
}

static int write_json(const char *path, const char *cmdline, const struct bench_cpus *c,
                      const struct bench_opts *o, const struct utsname *u,
                      const struct peer_results *p, const struct ours_results *r,
                      const struct target *t, int nt)
{
    FILE *f = fopen(path, "we");
    if (f == NULL)
        return -errno;
    fprintf(f, "{\n  \"command\": \"%s\",\n", cmdline);
    fprintf(f,
            "  \"machine\": {\"cpu\": \"%s\", \"pus\": %u, \"submitter_cpu\": %d, "
            "\"device_cpu\": %d, \"kernel\": \"%s\", \"npuvfio\": \"%s\"},\n",
            c->model, c->npus, c->sub, c->dev, u->release, npv_version());
    fprintf(f,
            "  \"run\": {\"point_ns\": %llu, \"warmup_ns\": %llu, \"quick\": %s, "
            "\"ours_descriptor_bytes\": %.0f, \"rte_ring_element_bytes\": %.0f},\n",
            (unsigned long long)o->point_ns, (unsigned long long)o->warmup_ns,
            o->quick ? "true" : "false", OURS_DESC_BYTES, RTE_ELEM_BYTES);
    fprintf(f, "  \"ours\": {\n");
    for (int m = 0; m < BENCH_MEMS; m++) {
        const struct ours_mem *mm = &r->mem[m];
        fprintf(f, "    \"%s\": {\"ran\": %s", m == 0 ? "hugepage_2m" : "page_4k",
                mm->ran ? "true" : "false");
        if (!mm->ran) {
            fprintf(f, ", \"skipped\": \"%s\"}%s\n", mm->skipped ? mm->skipped : "",
                    m + 1 < BENCH_MEMS ? "," : "");
            continue;
        }
        fprintf(f, ", \"page_size\": %zu,\n      \"cacheline_adjacent_rtt_ns\": ", mm->page_size);
        json_lat(f, &mm->cacheline_adjacent);
        fprintf(f, ",\n      \"qd1_rtt_ns\": {");
        for (int mode = 0; mode < BENCH_MODES; mode++) {
            fprintf(f, "%s\"%s\": ", mode ? ", " : "", bench_mode_names[mode]);
            json_lat(f, &mm->rtt[mode]);
        }
        fprintf(f, "},\n      \"qd1_per_job\": {");
        for (int mode = 0; mode < BENCH_MODES; mode++)
            fprintf(f, "%s\"%s\": {\"wakeups\": %.4f, \"cpu_ns\": %.1f}", mode ? ", " : "",
                    bench_mode_names[mode], mm->wakeups_per_job[mode], mm->cpu_ns_per_job[mode]);
        fprintf(f, "},\n      \"rate_per_s\": {");
        for (int mode = 0; mode < BENCH_MODES; mode++) {
            fprintf(f, "%s\"%s\": {", mode ? ", " : "", bench_mode_names[mode]);
            for (unsigned q = 0; q < mm->nqd; q++)
                fprintf(f, "%s\"%u\": %.0f", q ? ", " : "", mm->qd[q], mm->rate[mode][q]);
            fprintf(f, "}");
        }
        fprintf(f, "}}%s\n", m + 1 < BENCH_MEMS ? "," : "");
    }
    fprintf(f,
            "  },\n  \"syscalls\": {\"poll_round_trips\": %llu, \"poll_syscalls\": %llu, "
            "\"irq_round_trips\": %llu, \"irq_syscalls\": %llu, \"method\": \"seccomp "
            "user notification, every call counted then continued\"},\n",
            (unsigned long long)r->rt_poll, (unsigned long long)r->sys_poll,
            (unsigned long long)r->rt_irq, (unsigned long long)r->sys_irq);
    fprintf(f, "  \"peers\": {\"cacheline_rtt_ns\": ");
    json_lat(f, &p->cacheline_rtt);
    fprintf(f, ", \"eventfd_rtt_ns\": ");
    json_lat(f, &p->eventfd_rtt);
    fprintf(f, ", \"io_uring_nop_per_s\": {\"batch1\": %.0f, \"batch32\": %.0f}",
            p->uring_nop_rate_1, p->uring_nop_rate_32);
    fprintf(f, ", \"rte_ring_spsc16_burst32_per_s\": ");
    json_num(f, p->have_rte_ring ? p->rte_ring_rate_32 : NAN);
    fprintf(f, "},\n  \"targets\": [\n");
    for (int i = 0; i < nt; i++) {
        fprintf(f, "    {\"name\": \"%s\", \"value\": ", t[i].name);
        json_num(f, t[i].value);
        fprintf(f, ", \"goal\": \"%s\", \"met\": %s}%s\n", t[i].goal, t[i].met ? "true" : "false",
                i + 1 < nt ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    int rc = ferror(f) ? -EIO : 0;
    if (fclose(f) != 0 && rc == 0)
        rc = -errno;
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option lopts[] = {
        {"quick", no_argument, NULL, 'q'},        {"point-ms", required_argument, NULL, 'p'},
        {"qd-max", required_argument, NULL, 'd'}, {"json", required_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    struct bench_opts o = {.qd_max = 256};
    long point_ms = -1;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
        switch (ch) {
        case 'q':
            o.quick = true;
            break;
        case 'p':
            point_ms = strtol(optarg, NULL, 10);
            if (point_ms <= 0 || point_ms > 60000) {
                fprintf(stderr, "npuvfio-bench: --point-ms wants 1..60000\n");
                return 2;
            }
            break;
        case 'd':
            o.qd_max = (unsigned)strtoul(optarg, NULL, 10);
            if (o.qd_max < 1 || o.qd_max > 256) {
                fprintf(stderr, "npuvfio-bench: --qd-max wants 1..256\n");
                return 2;
            }
            break;
        case 'j':
            o.json_path = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return 2;
    }
    if (point_ms < 0)
        point_ms = o.quick ? 60 : 500;
    o.point_ns = (uint64_t)point_ms * 1000000u;
    o.warmup_ns = o.quick ? 20000000u : 100000000u;

    char cmdline[512] = "";
    for (int i = 0; i < argc; i++) {
        size_t len = strlen(cmdline);
        snprintf(cmdline + len, sizeof(cmdline) - len, "%s%s", i ? " " : "", argv[i]);
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (o.json_path != NULL && check_writable(o.json_path) < 0)
        return 1;
    struct utsname u;
    uname(&u);
    struct bench_cpus c;
    int rc = bench_cpus_init(&c);
    if (rc < 0) {
        fprintf(stderr, "npuvfio-bench: cannot read the CPU topology (hwloc): %s\n",
                npv_strerror(rc));
        return 1;
    }
    printf("npuvfio-bench %s: ring engine vs the testdev model over vfio-user, peers in the same "
           "run\n",
           npv_version());
    printf("command: %s\n", cmdline);
    printf("machine: %s, %u CPUs, Linux %s; submitter on CPU %d, device side on CPU %d "
           "(hwloc-pinned)\n",
           c.model, c.npus, u.release, c.sub, c.dev);
    printf("run:     %.0f ms per point after %.0f ms warm-up (excluded); latency = per-operation "
           "CLOCK_MONOTONIC\n",
           (double)o.point_ns / 1e6, (double)o.warmup_ns / 1e6);
    print_plan(&o);
    int status = 0;
    struct ours_results r;
    struct peer_results p;
    memset(&r, 0, sizeof(r));
    memset(&p, 0, sizeof(p));

    /* Ours first: the model child is forked before any peer thread exists. */
    rc = ours_run(&o, &c, &r);
    if (rc < 0)
        status = 1;
    if ((rc = peer_cacheline(&o, &c, &p.cacheline_rtt)) < 0) {
        fprintf(stderr, "npuvfio-bench: cache-line peer: %s\n", npv_strerror(rc));
        status = 1;
    }
    bench_progress(&o, "peer cache line bounce: p50 %.0f ns", p.cacheline_rtt.p50);
    if ((rc = peer_eventfd(&o, &c, &p.eventfd_rtt)) < 0) {
        fprintf(stderr, "npuvfio-bench: eventfd peer: %s\n", npv_strerror(rc));
        status = 1;
    }
    bench_progress(&o, "peer eventfd ping-pong: p50 %.0f ns", p.eventfd_rtt.p50);
    if ((rc = peer_uring_nop(&o, &c, 1, &p.uring_nop_rate_1)) < 0 ||
        (rc = peer_uring_nop(&o, &c, 32, &p.uring_nop_rate_32)) < 0) {
        fprintf(stderr, "npuvfio-bench: io_uring peer: %s\n", npv_strerror(rc));
        status = 1;
    }
    bench_progress(&o, "peer io_uring NOP: %.2f M/s one at a time", p.uring_nop_rate_1 / 1e6);
    bench_progress(&o, "peer io_uring NOP: %.2f M/s in batches of 32", p.uring_nop_rate_32 / 1e6);
    rc = peer_rte_ring(&o, &c, &p.rte_ring_rate_32);
    p.have_rte_ring = rc == 0 && p.rte_ring_rate_32 > 0;
    bench_progress(&o, "peer rte_ring SPSC: %.2f M/s", p.rte_ring_rate_32 / 1e6);
    if (rc == 0 && !p.have_rte_ring) {
        rc = -EIO;
        fprintf(stderr, "npuvfio-bench: rte_ring peer moved nothing (starved of CPU?)\n");
    }
    if (rc == -ENOTSUP) {
        p.rte_ring_missing = "this npuvfio-bench was built without libdpdk";
    } else if (rc < 0) {
        p.rte_ring_missing = "rte_ring run failed";
        fprintf(stderr, "npuvfio-bench: rte_ring peer: %s\n", npv_strerror(rc));
        status = 1;
    }

    printf("\n");
    if (!p.have_rte_ring)
        printf("!!! PEER MISSING: DPDK rte_ring not measured: %s !!!\n\n", p.rte_ring_missing);

    printf("QD1 round trip, ns               min      p50      p99    p99.9       max         n\n");
    for (int m = 0; m < BENCH_MEMS; m++) {
        if (!r.mem[m].ran) {
            printf("  ours, %s ring memory: SKIPPED (%s)\n", mem_names[m],
                   r.mem[m].skipped ? r.mem[m].skipped : "not run");
            continue;
        }
        for (int mode = 0; mode < BENCH_MODES; mode++) {
            char name[64];
            snprintf(name, sizeof(name), "ours %s, %s", bench_mode_names[mode], mem_names[m]);
            print_lat(name, &r.mem[m].rtt[mode]);
        }
    }
    for (int m = 0; m < BENCH_MEMS; m++) {
        if (!r.mem[m].ran)
            continue;
        char name[64];
        snprintf(name, sizeof(name), "peer: cache line, %s slot", mem_names[m]);
        print_lat(name, &r.mem[m].cacheline_adjacent);
    }
    print_lat("peer: cache line bounce", &p.cacheline_rtt);
    print_lat("peer: eventfd ping-pong", &p.eventfd_rtt);

    printf("\nQD1 cost per job                wake-ups   CPU ns (submitting thread)\n");
    for (int m = 0; m < BENCH_MEMS; m++) {
        if (!r.mem[m].ran)
            continue;
        for (int mode = 0; mode < BENCH_MODES; mode++) {
            char name[64];
            snprintf(name, sizeof(name), "ours %s, %s", bench_mode_names[mode], mem_names[m]);
            printf("  %-28s %9.3f %9.0f\n", name, r.mem[m].wakeups_per_job[mode],
                   r.mem[m].cpu_ns_per_job[mode]);
        }
    }

    const struct ours_mem *bm = best_mem(&r);
    if (bm != NULL) {
        printf("\nThroughput, M descriptors/s   ");
        for (unsigned q = 0; q < bm->nqd; q++)
            printf(" %6s%-3u", "QD", bm->qd[q]);
        printf("\n");
        for (int m = 0; m < BENCH_MEMS; m++) {
            if (!r.mem[m].ran)
                continue;
            for (int mode = 0; mode < BENCH_MODES; mode++) {
                printf("  ours %-6s, %-5s          ", bench_mode_names[mode], mem_names[m]);
                for (unsigned q = 0; q < r.mem[m].nqd; q++)
                    printf(" %9.2f", r.mem[m].rate[mode][q] / 1e6);
                printf("\n");
            }
        }
    }
    printf("  peer: rte_ring SPSC, 16 B, bursts of 32:  ");
    if (p.have_rte_ring)
        printf("%.2f M/s\n", p.rte_ring_rate_32 / 1e6);
    else
        printf("NOT MEASURED (%s)\n", p.rte_ring_missing);
    printf("  peer: io_uring NOP submit+reap:           %.2f M/s one at a time, %.2f M/s in "
           "batches of 32\n",
           p.uring_nop_rate_1 / 1e6, p.uring_nop_rate_32 / 1e6);

    print_notes(&p, bm);

    /* Targets. */
    struct target t[4];
    double ours_rtt = bm ? bm->rtt[0].p50 : NAN;
    /* The cache line measured next to ours' round trips: same host placement of the vCPUs. */
    double cl_p50 =
        bm && bm->cacheline_adjacent.n ? bm->cacheline_adjacent.p50 : p.cacheline_rtt.p50;
    double ours_rate32 = bm ? best_poll_rate_from(bm, 32) : NAN;
    t[0] = (struct target){"qd1_rtt_vs_cacheline", "QD1 polled round trip p50 / cache line p50",
                           ours_rtt / cl_p50, "<=1.5", false};
    t[0].met = isfinite(t[0].value) && t[0].value <= 1.5;
    t[1] =
        (struct target){"qd32_rate_vs_rte_ring", "best polled rate at QD>=32 / rte_ring",
                        p.have_rte_ring ? ours_rate32 / p.rte_ring_rate_32 : NAN, ">=1.0", false};
    t[1].met = isfinite(t[1].value) && t[1].value >= 1.0;
    t[2] = (struct target){"rate_vs_io_uring_nop",
                           "best polled rate at QD>=32 / io_uring NOP in batches of 32",
                           ours_rate32 / p.uring_nop_rate_32, ">=5", false};
    t[2].met = isfinite(t[2].value) && t[2].value >= 5.0;
    double spr = r.syscount_rc == 0 && r.rt_poll ? (double)r.sys_poll / (double)r.rt_poll : NAN;
    t[3] = (struct target){"syscalls_per_round_trip", "system calls per polled QD1 round trip", spr,
                           "==0", false};
    t[3].met = r.syscount_rc == 0 && r.sys_poll == 0;

    printf("\nTargets                                         ours         peer     ratio  goal   "
           "met\n");
    printf("  QD1 polled RTT p50 vs cache line        %9.0f ns %9.0f ns %8.2f  <=1.5  %s\n",
           ours_rtt, cl_p50, t[0].value, t[0].met ? "yes" : "NO");
    if (p.have_rte_ring)
        printf("  rate at QD>=32 vs rte_ring              %8.2f M/s %8.2f M/s %7.2f  >=1.0  %s\n",
               ours_rate32 / 1e6, p.rte_ring_rate_32 / 1e6, t[1].value, t[1].met ? "yes" : "NO");
    else
        printf(
            "  rate at QD>=32 vs rte_ring              %8.2f M/s   (no peer)      -  >=1.0  NO\n",
            ours_rate32 / 1e6);
    printf("  rate at QD>=32 vs io_uring NOP x32      %8.2f M/s %8.2f M/s %7.2f  >=5    %s\n",
           ours_rate32 / 1e6, p.uring_nop_rate_32 / 1e6, t[2].value, t[2].met ? "yes" : "NO");
    if (r.syscount_rc == 0)
        printf("  system calls per polled round trip      %llu in %llu round trips (irq mode: "
               "%.2f per round trip)  ==0  %s\n",
               (unsigned long long)r.sys_poll, (unsigned long long)r.rt_poll,
               r.rt_irq ? (double)r.sys_irq / (double)r.rt_irq : 0.0, t[3].met ? "yes" : "NO");
    else
        printf("  system calls per polled round trip      NOT MEASURED (%s)  ==0  NO\n",
               npv_strerror(r.syscount_rc));
    if (!t[3].met && r.syscount_rc == 0 && r.last_nr_poll >= 0)
        printf("    (a call seen in the poll loop: system call number %d)\n", r.last_nr_poll);
    printf("  (system calls counted by a seccomp user-notification supervisor on the submitting "
           "thread: every call counted, then continued)\n");

    if (o.json_path != NULL) {
        rc = write_json(o.json_path, cmdline, &c, &o, &u, &p, &r, t, 4);
        if (rc < 0) {
            fprintf(stderr, "npuvfio-bench: writing %s: %s\n", o.json_path, npv_strerror(rc));
            status = 1;
        }
    }
    bench_cpus_fini();
    return status;
}

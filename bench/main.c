/* SPDX-License-Identifier: MIT */
/*
 * npuvfio-bench: ring round trips and throughput against the generic test
 * device's model, with the peers that bound them and the same work built from
 * two rte_rings, measured in the same run on the same two cores. Every figure
 * is the median of --reps repetitions that alternate ours and the peers,
 * printed with its spread as one table (ours, peer, ratio) and, with --json,
 * written with every repetition for CI.
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

#define OURS_DESC_BYTES 32.0 /* sizeof(struct npv_testdev_desc), device ABI */
#define RTE_ELEM_BYTES  16.0 /* the bound's element */

/*
 * Fail before minutes of measuring rather than after: --json FILE must be
 * writable and --compare FILE readable now. A file created by the check is
 * removed again.
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

static unsigned modes_on(const struct bench_opts *o)
{
    unsigned n = 0;
    for (int m = 0; m < BENCH_MODES; m++)
        n += o->mode_on[m];
    return n;
}

/* How many points the run measures and roughly how long that takes; progress on a terminal. */
static void print_plan(struct bench_opts *o, const struct dev_results *d)
{
    unsigned devs = 0;
    for (unsigned i = 0; i < d->n; i++)
        devs += d->row[i].skipped == NULL;
    /* Per ring memory: the adjacent cache line, then per mode QD1 round trips and each QD. */
    unsigned ours = BENCH_MEMS * (1 + modes_on(o) * (1 + o->nqd));
    unsigned peers = 5 + o->nqd;
    unsigned per_rep = ours + peers;
    unsigned points = o->reps * (per_rep + devs) + devs * BENCH_DEV_OPEN_POINTS;
    double secs = (double)(o->reps * per_rep) * (double)(o->point_ns + o->warmup_ns) / 1e9;
    double open_s = (double)(devs * BENCH_DEV_OPEN_POINTS) *
                    (o->quick ? BENCH_DEV_OPEN_QUICK_MS : BENCH_DEV_OPEN_MS) / 1e3;
    bool tty = isatty(STDOUT_FILENO);
    printf("plan:    %u repetitions of %u points (ours and the peers alternating) and %u device "
           "samples, then %u open-loop device points, about %.0f s%s\n\n",
           o->reps, per_rep, devs, devs * BENCH_DEV_OPEN_POINTS, (secs + open_s) * 1.15,
           tty ? "; a line per point follows" : "");
    if (tty)
        o->points = points;
}

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: npuvfio-bench [--quick] [--mode LIST] [--qd LIST] [--desc-size N]\n"
            "                     [--duration MS] [--reps N] [--cpus SUB,DEV] [--no-devices]\n"
            "                     [--json FILE] [--compare FILE] [--threads N]\n"
            "       npuvfio-bench --rate LIST [--count N] [--duration MS] [--cpus SUB,DEV]\n"
            "                     [--no-devices] [--json FILE]\n"
            "\n"
            "Measure the ring engine against the testdev model over vfio-user (QD1 round\n"
            "trips and throughput per queue depth, in poll, irq and hybrid modes, with\n"
            "2 MiB hugepage and 4 KiB ring memory), each registered device's sample on its\n"
            "model (its p50 split into the model's compute and the host's overhead, then\n"
            "open loop at 25/50/75/90%% of its maximum), and, in the same run on the same\n"
            "cores: the same work built from two DPDK rte_rings (requests one way,\n"
            "completions back), the rte_ring bound (16-byte elements one way), a cache\n"
            "line bounced between the cores, eventfd ping-pong and io_uring NOPs. Every\n"
            "figure is the median of --reps repetitions that alternate ours and the peers,\n"
            "shown with its spread; warm-up is excluded.\n"
            "\n"
            "  --quick          short points and small device samples (about 15 s on an idle\n"
            "                   two-CPU machine; the plan line estimates it)\n"
            "  --mode LIST      wait modes, from poll,irq,hybrid (default all three)\n"
            "  --qd LIST        queue depths, powers of two in 1..256 (default 1,2,4,...,256)\n"
            "  --desc-size N    request bytes of the same-work peer, 16..256, a multiple of 4\n"
            "                   (default 32, ours' descriptor; ours' is fixed by the device)\n"
            "  --duration MS    measured time per point (default 200, quick 20)\n"
            "  --reps N         repetitions, 1..%d (default 5; the medians want at least 5)\n"
            "  --cpus SUB,DEV   OS CPU indexes of the submitter and of the device side\n"
            "                   (default the first two this process may run on; with only\n"
            "                   one allowed the bench refuses: nothing measured, exit 1)\n"
            "  --no-devices     leave out the device rows\n"
            "  --json FILE      also write every repetition, the medians and the targets\n"
            "  --compare FILE   print today's target ratios against an earlier --json FILE,\n"
            "                   warning loudly when one got worse by more than a third\n"
            "  --threads N      only the thread rows: each device's sample through an\n"
            "                   npv_share by 1 thread and by N threads (2..16) sharing one\n"
            "                   driver, all on the submitter CPU, requests per second;\n"
            "                   and the testdev's ring per thread (no share, no lock)\n"
            "  --rate LIST      open loop instead: requests arrive on a fixed schedule at each\n"
            "                   rate (per second, k and M suffixes; N%% of the measured\n"
            "                   maximum; 'max' is 25%%,50%%,75%%,90%%), latency from each\n"
            "                   request's scheduled time; p50/p99/p99.9 per rate (testdev\n"
            "                   ring, poll mode); then each device's sample at the list's\n"
            "                   percentages of its own maximum, at most 1 s a point\n"
            "  --count N        requests per ring rate (default rate x --duration, default\n"
            "                   1000 ms)\n",
            BENCH_MAX_REPS);
}

static int parse_modes(struct bench_opts *o, const char *arg)
{
    char buf[64];
    snprintf(buf, sizeof(buf), "%s", arg);
    memset(o->mode_on, 0, sizeof(o->mode_on));
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int m = 0;
        while (m < BENCH_MODES && strcmp(tok, bench_mode_names[m]) != 0)
            m++;
        if (m == BENCH_MODES)
            return -EINVAL;
        o->mode_on[m] = true;
    }
    return modes_on(o) ? 0 : -EINVAL;
}

static int parse_qds(struct bench_opts *o, const char *arg)
{
    bool on[BENCH_MAX_QD] = {false};
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", arg);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        unsigned long v = strtoul(tok, &end, 10);
        if (*end != '\0' || v < 1 || v > 256 || (v & (v - 1)) != 0)
            return -EINVAL;
        on[__builtin_ctzl(v)] = true;
    }
    o->nqd = 0;
    for (unsigned i = 0; i < BENCH_MAX_QD; i++)
        if (on[i])
            o->qd[o->nqd++] = 1u << i;
    return o->nqd ? 0 : -EINVAL;
}

/* --rate: "10k,250000,1.5M", "25%,50%", "max" (25,50,75,90 % of the measured maximum), mixed. */
static int parse_rates(struct bench_opts *o, const char *arg)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", arg);
    o->nrates = 0;
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (strcmp(tok, "max") == 0) {
            static const double quarters[] = {-0.25, -0.5, -0.75, -0.9};
            for (unsigned i = 0; i < 4; i++) {
                if (o->nrates == BENCH_MAX_RATES)
                    return -EINVAL;
                o->rate[o->nrates++] = quarters[i];
            }
            continue;
        }
        char *end;
        double v = strtod(tok, &end);
        if (end == tok || !(v > 0) || o->nrates == BENCH_MAX_RATES)
            return -EINVAL;
        if (*end == '%') {
            if (v > 100)
                return -EINVAL;
            v = -v / 100;
            end++;
        } else if (*end == 'k' || *end == 'K') {
            v *= 1e3;
            end++;
        } else if (*end == 'M') {
            v *= 1e6;
            end++;
        }
        if (*end != '\0' || v > 1e9)
            return -EINVAL;
        o->rate[o->nrates++] = v;
    }
    return o->nrates > 0 ? 0 : -EINVAL;
}

static int parse_opts(int argc, char **argv, struct bench_opts *o)
{
    static const struct option lopts[] = {
        {"quick", no_argument, NULL, 'q'},
        {"mode", required_argument, NULL, 'm'},
        {"qd", required_argument, NULL, 'Q'},
        {"desc-size", required_argument, NULL, 's'},
        {"duration", required_argument, NULL, 'p'},
        {"reps", required_argument, NULL, 'r'},
        {"cpus", required_argument, NULL, 'c'},
        {"no-devices", no_argument, NULL, 'D'},
        {"json", required_argument, NULL, 'j'},
        {"compare", required_argument, NULL, 'C'},
        {"rate", required_argument, NULL, 'R'},
        {"count", required_argument, NULL, 'n'},
        {"threads", required_argument, NULL, 'T'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    long point_ms = -1;
    int ch;
    opterr = 0; /* one line per mistake, as npuvfio's (tools/npuvfio.c, cli_getopt) */
    while ((ch = getopt_long(argc, argv, ":h", lopts, NULL)) != -1) {
        char *end;
        switch (ch) {
        case 'q':
            o->quick = true;
            break;
        case 'm':
            if (parse_modes(o, optarg) < 0) {
                fprintf(stderr, "npuvfio-bench: --mode wants a list of poll, irq, hybrid (try "
                                "'npuvfio-bench --help')\n");
                return 2;
            }
            break;
        case 'Q':
            if (parse_qds(o, optarg) < 0) {
                fprintf(stderr, "npuvfio-bench: --qd wants a list of powers of two in 1..256 (try "
                                "'npuvfio-bench --help')\n");
                return 2;
            }
            break;
        case 's': {
            unsigned long v = strtoul(optarg, &end, 10);
            if (*end != '\0' || v < 16 || v > 256 || v % 4 != 0) {
                fprintf(stderr, "npuvfio-bench: --desc-size wants 16..256, a multiple of 4 (try "
                                "'npuvfio-bench --help')\n");
                return 2;
            }
            o->desc_size = (unsigned)v;
            break;
        }
        case 'p':
            point_ms = strtol(optarg, &end, 10);
            if (*end != '\0' || point_ms <= 0 || point_ms > 60000) {
                fprintf(
                    stderr,
                    "npuvfio-bench: --duration wants 1..60000 (ms) (try 'npuvfio-bench --help')\n");
                return 2;
            }
            break;
        case 'r': {
            unsigned long v = strtoul(optarg, &end, 10);
            if (*end != '\0' || v < 1 || v > BENCH_MAX_REPS) {
                fprintf(stderr, "npuvfio-bench: --reps wants 1..%d (try 'npuvfio-bench --help')\n",
                        BENCH_MAX_REPS);
                return 2;
            }
            o->reps = (unsigned)v;
            break;
        }
        case 'c':
            if (sscanf(optarg, "%d,%d", &o->cpu_sub, &o->cpu_dev) != 2 || o->cpu_sub < 0 ||
                o->cpu_dev < 0 || o->cpu_sub == o->cpu_dev) {
                fprintf(stderr, "npuvfio-bench: --cpus wants two different CPU indexes: SUB,DEV "
                                "(try 'npuvfio-bench --help')\n");
                return 2;
            }
            break;
        case 'D':
            o->devices = false;
            break;
        case 'T': {
            unsigned long v = strtoul(optarg, &end, 10);
            if (*end != '\0' || v < 2 || v > 16) {
                fprintf(stderr,
                        "npuvfio-bench: --threads wants 2..16 (try 'npuvfio-bench --help')\n");
                return 2;
            }
            o->threads = (unsigned)v;
            break;
        }
        case 'j':
            o->json_path = optarg;
            break;
        case 'C':
            o->compare_path = optarg;
            break;
        case 'R':
            if (parse_rates(o, optarg) < 0) {
                fprintf(stderr, "npuvfio-bench: --rate wants a list of rates per second (k, M "
                                "suffixes), N%% of the maximum, or max (try 'npuvfio-bench "
                                "--help')\n");
                return 2;
            }
            break;
        case 'n': {
            unsigned long long v = strtoull(optarg, &end, 10);
            if (*end != '\0' || v < 1 || v > BENCH_MAX_COUNT) {
                fprintf(stderr, "npuvfio-bench: --count wants 1..%u (try 'npuvfio-bench --help')\n",
                        BENCH_MAX_COUNT);
                return 2;
            }
            o->count = v;
            break;
        }
        case 'h':
            usage(stdout);
            return 0;
        case ':':
            fprintf(stderr,
                    "npuvfio-bench: option '%s' needs an argument (try 'npuvfio-bench --help')\n",
                    argv[optind - 1]);
            return 2;
        default:
            if (optopt != 0)
                fprintf(stderr,
                        "npuvfio-bench: unknown option '-%c' (try 'npuvfio-bench --help')\n",
                        optopt);
            else
                fprintf(stderr, "npuvfio-bench: unknown option '%s' (try 'npuvfio-bench --help')\n",
                        argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "npuvfio-bench: unexpected argument '%s' (try 'npuvfio-bench --help')\n",
                argv[optind]);
        return 2;
    }
    if (o->count != 0 && o->nrates == 0) {
        fprintf(stderr, "npuvfio-bench: --count goes with --rate (try 'npuvfio-bench --help')\n");
        return 2;
    }
    if (point_ms < 0)
        point_ms = o->nrates > 0 ? 1000 : o->quick ? 20 : 200;
    o->point_ns = (uint64_t)point_ms * 1000000u;
    o->warmup_ns = o->quick ? 10000000u : 50000000u;
    return -1;
}

/* ---- one repetition of the peers ---- */

static int run_peers(const struct bench_opts *o, const struct bench_cpus *c, struct peer_results *p)
{
    struct lat l;
    double rate;
    int rc;
    if ((rc = peer_cacheline(o, c, &l)) < 0) {
        fprintf(stderr, "npuvfio-bench: cache-line peer: %s\n", npv_strerror(rc));
        return rc;
    }
    p->cacheline_rtt = l;
    series_add(&p->cacheline_p50, l.n != 0 ? l.p50 : NAN); /* an empty point: NAN, not 0 */
    bench_progress(o, "peer cache line bounce: p50 %.0f ns", l.p50);
    if ((rc = peer_eventfd(o, c, &l)) < 0) {
        fprintf(stderr, "npuvfio-bench: eventfd peer: %s\n", npv_strerror(rc));
        return rc;
    }
    p->eventfd_rtt = l;
    series_add(&p->eventfd_p50, l.n != 0 ? l.p50 : NAN);
    bench_progress(o, "peer eventfd ping-pong: p50 %.0f ns", l.p50);
    for (unsigned batch = 1; batch <= 32; batch *= 32) {
        if ((rc = peer_uring_nop(o, c, batch, &rate)) < 0) {
            fprintf(stderr, "npuvfio-bench: io_uring peer: %s\n", npv_strerror(rc));
            return rc;
        }
        series_add(batch == 1 ? &p->uring_nop_1 : &p->uring_nop_32, rate > 0 ? rate : NAN);
        bench_progress(o, "peer io_uring NOP, batches of %u: %.2f M/s", batch, rate / 1e6);
    }
    rc = peer_rte_ring(o, c, &rate);
    if (rc == -ENOTSUP) {
        p->have_rte_ring = false;
        p->rte_ring_missing = "this npuvfio-bench was built without libdpdk";
        return 0;
    }
    if (rc == 0 && rate <= 0)
        p->rte_ring_empty++; /* said once, after the run */
    if (rc < 0) {
        p->have_rte_ring = false;
        p->rte_ring_missing = "rte_ring run failed";
        fprintf(stderr, "npuvfio-bench: rte_ring peer: %s\n", npv_strerror(rc));
        return rc;
    }
    p->have_rte_ring = true;
    series_add(&p->rte_ring_16, rate > 0 ? rate : NAN);
    bench_progress(o, "peer rte_ring bound (16 B one way): %.2f M/s", rate / 1e6);
    for (unsigned q = 0; q < o->nqd; q++) {
        if ((rc = peer_same_work(o, c, o->qd[q], &rate)) < 0) {
            fprintf(stderr, "npuvfio-bench: same-work peer at QD %u: %s\n", o->qd[q],
                    npv_strerror(rc));
            return rc;
        }
        series_add(&p->same_work[q], rate > 0 ? rate : NAN);
        bench_progress(o, "peer same work (2 rte_rings) QD%u: %.2f M/s", o->qd[q], rate / 1e6);
    }
    return 0;
}

/* ---- figures from the repetitions ---- */

/*
 * The median of per-repetition ratios a/b when both have every repetition,
 * else of the medians. A repetition whose peer measured nothing (starved of
 * CPU) is left out rather than counted as an infinite ratio.
 */
static double ratio_median(const struct series *a, const struct series *b)
{
    if (a->n == 0 || b->n == 0)
        return NAN;
    if (a->n != b->n) {
        double mb = series_median(b);
        double ma = series_median(a);
        return mb > 0 && ma > 0 ? ma / mb : NAN;
    }
    struct series r = {0};
    for (unsigned i = 0; i < a->n; i++)
        if (b->v[i] > 0 && a->v[i] > 0 && isfinite(a->v[i]))
            series_add(&r, a->v[i] / b->v[i]);
    return series_median(&r);
}

static int qd_index(const struct bench_opts *o, unsigned qd)
{
    for (unsigned q = 0; q < o->nqd; q++)
        if (o->qd[q] == qd)
            return (int)q;
    return -1;
}

static const struct ours_mem *best_mem(const struct ours_results *r)
{
    for (int m = 0; m < BENCH_MEMS; m++)
        if (r->mem[m].ran)
            return &r->mem[m];
    return NULL;
}

static void compute_targets(const struct bench_opts *o, const struct peer_results *p,
                            const struct ours_results *r, struct target *t)
{
    const struct ours_mem *bm = best_mem(r);
    int q32 = qd_index(o, 32);
    struct series none = {0};
    const struct series *poll32 = bm && q32 >= 0 && o->mode_on[0] ? &bm->rate[0][q32] : &none;
    const struct series *hyb32 = bm && q32 >= 0 && o->mode_on[2] ? &bm->rate[2][q32] : &none;

    t[0] = (struct target){
        "qd1_rtt_vs_cacheline",
        "QD1 polled round trip p50 / cache line p50 (measured next to it)",
        bm && o->mode_on[0] ? ratio_median(&bm->rtt_p50[0], &bm->cacheline_adjacent_p50) : NAN,
        1.5,
        TARGET_AT_MOST,
        false};
    t[1] = (struct target){"qd32_rate_vs_same_work_rte_ring",
                           "polled rate at QD32 / the same work through two rte_rings at QD32",
                           p->have_rte_ring && q32 >= 0 ? ratio_median(poll32, &p->same_work[q32])
                                                        : NAN,
                           1.0,
                           TARGET_AT_LEAST,
                           false};
    /*
     * Descriptor cache lines per second crossing to the device core, against
     * the lines per second the rte_ring SPSC bound moves between the same two
     * cores (16-byte elements, four to a line): what this machine can carry.
     * Replaces rate_vs_io_uring_nop (issue 25): io_uring NOPs never leave the
     * submitting core, and 5x them is more lines than the bound moves.
     */
    int q256 = qd_index(o, 256);
    const struct series *poll256 = bm && q256 >= 0 && o->mode_on[0] ? &bm->rate[0][q256] : &none;
    double lines = OURS_DESC_BYTES / RTE_ELEM_BYTES;
    t[2] = (struct target){"lines_vs_bound_qd32",
                           "descriptor lines/s at QD32 (polled) / the rte_ring bound's lines/s",
                           p->have_rte_ring ? ratio_median(poll32, &p->rte_ring_16) * lines : NAN,
                           0.75,
                           TARGET_AT_LEAST,
                           false};
    t[3] = (struct target){"lines_vs_bound_qd256",
                           "descriptor lines/s at QD256 (polled) / the rte_ring bound's lines/s",
                           p->have_rte_ring ? ratio_median(poll256, &p->rte_ring_16) * lines : NAN,
                           0.9,
                           TARGET_AT_LEAST,
                           false};
    t[4] = (struct target){"hybrid_vs_poll_qd32",
                           "hybrid rate at QD32 / polled rate at QD32",
                           ratio_median(hyb32, poll32),
                           0.9,
                           TARGET_AT_LEAST,
                           false};
    double spr = r->syscount_rc == 0 && r->rt_poll ? (double)r->sys_poll / (double)r->rt_poll : NAN;
    t[5] = (struct target){"syscalls_per_round_trip",
                           "system calls per polled QD1 round trip",
                           spr,
                           0,
                           TARGET_ZERO,
                           false};
    for (int i = 0; i < BENCH_TARGETS; i++) {
        double v = t[i].value;
        t[i].met = isfinite(v) && (t[i].dir == TARGET_AT_MOST    ? v <= t[i].goal
                                   : t[i].dir == TARGET_AT_LEAST ? v >= t[i].goal
                                                                 : v == 0);
    }
}

/* ---- the table ---- */

/*
 * A figure right-aligned in width with prec decimals, or "-" when nothing
 * was measured (an empty series is NAN): a 0 is never shown for a figure
 * that was not measured. A measured figure too small for prec reads as
 * "<0.01" (prec 2), not as a 0 either. Up to 32 results live at once (one
 * printf's worth).
 */
static const char *fig(double v, int width, int prec)
{
    static char bufs[32][40];
    static unsigned next;
    char *b = bufs[next++ % 32];
    double unit = pow(10.0, -prec);
    if (isfinite(v) && v > 0 && v < unit / 2) {
        char small[24];
        snprintf(small, sizeof(small), "<%.*f", prec, unit);
        snprintf(b, sizeof(bufs[0]), "%*s", width, small);
    } else if (isfinite(v))
        snprintf(b, sizeof(bufs[0]), "%*.*f", width, prec, v);
    else
        snprintf(b, sizeof(bufs[0]), "%*s", width, "-");
    return b;
}

static double spread_pct(const struct series *s)
{
    double m = series_median(s);
    return s->n && m > 0 ? (series_max(s) - series_min(s)) / m * 100 : NAN;
}

static void print_rate_row(const char *name, const struct bench_opts *o, const struct series *s,
                           double scale)
{
    printf("  %-30s", name);
    for (unsigned q = 0; q < o->nqd; q++)
        printf(" %s", fig(series_median(&s[q]) / scale, 8, 2));
    printf("\n  %-30s", "    spread (max-min)/median %");
    for (unsigned q = 0; q < o->nqd; q++)
        printf(" %s%%", fig(spread_pct(&s[q]), 7, 0));
    printf("\n");
}

static void print_qd_header(const char *title, const struct bench_opts *o)
{
    printf("\n%-32s", title);
    for (unsigned q = 0; q < o->nqd; q++)
        printf("    QD%-3u", o->qd[q]);
    printf("\n");
}

static void print_lat_table(const struct bench_opts *o, const struct peer_results *p,
                            const struct ours_results *r)
{
    printf("QD1 round trip, ns          p50 median  [min    -  max]   p99   p99.9  (last rep)\n");
    for (int m = 0; m < BENCH_MEMS; m++) {
        const struct ours_mem *mm = &r->mem[m];
        if (!mm->ran) {
            printf("  ours, %s ring memory: SKIPPED (%s)\n", bench_mem_names[m],
                   mm->skipped ? mm->skipped : "not run");
            continue;
        }
        for (int mode = 0; mode < BENCH_MODES; mode++) {
            if (!o->mode_on[mode])
                continue;
            const struct series *s = &mm->rtt_p50[mode];
            char name[64];
            snprintf(name, sizeof(name), "ours %s, %s", bench_mode_names[mode], bench_mem_names[m]);
            /* p99 and p99.9 are the last repetition's: '-' when that one measured nothing. */
            bool got = mm->rtt[mode].n != 0;
            printf("  %-26s %s  [%s - %s] %s %s\n", name, fig(series_median(s), 9, 0),
                   fig(series_min(s), 6, 0), fig(series_max(s), 6, 0),
                   fig(got ? mm->rtt[mode].p99 : NAN, 6, 0),
                   fig(got ? mm->rtt[mode].p999 : NAN, 7, 0));
        }
        char name[64];
        snprintf(name, sizeof(name), "peer: cache line, %s slot", bench_mem_names[m]);
        const struct series *s = &mm->cacheline_adjacent_p50;
        printf("  %-26s %s  [%s - %s]\n", name, fig(series_median(s), 9, 0),
               fig(series_min(s), 6, 0), fig(series_max(s), 6, 0));
    }
    bool cl = p->cacheline_rtt.n != 0, ev = p->eventfd_rtt.n != 0;
    printf("  %-26s %s  [%s - %s] %s %s\n", "peer: cache line bounce",
           fig(series_median(&p->cacheline_p50), 9, 0), fig(series_min(&p->cacheline_p50), 6, 0),
           fig(series_max(&p->cacheline_p50), 6, 0), fig(cl ? p->cacheline_rtt.p99 : NAN, 6, 0),
           fig(cl ? p->cacheline_rtt.p999 : NAN, 7, 0));
    printf("  %-26s %s  [%s - %s] %s %s\n", "peer: eventfd ping-pong",
           fig(series_median(&p->eventfd_p50), 9, 0), fig(series_min(&p->eventfd_p50), 6, 0),
           fig(series_max(&p->eventfd_p50), 6, 0), fig(ev ? p->eventfd_rtt.p99 : NAN, 6, 0),
           fig(ev ? p->eventfd_rtt.p999 : NAN, 7, 0));
}

static void print_rate_tables(const struct bench_opts *o, const struct peer_results *p,
                              const struct ours_results *r)
{
    print_qd_header("Throughput, M jobs/s (median)", o);
    for (int m = 0; m < BENCH_MEMS; m++) {
        if (!r->mem[m].ran)
            continue;
        for (int mode = 0; mode < BENCH_MODES; mode++) {
            if (!o->mode_on[mode])
                continue;
            char name[64];
            snprintf(name, sizeof(name), "ours %s, %s", bench_mode_names[mode], bench_mem_names[m]);
            print_rate_row(name, o, r->mem[m].rate[mode], 1e6);
        }
    }
    if (p->have_rte_ring) {
        char name[64];
        snprintf(name, sizeof(name), "peer: same work, %u B req", o->desc_size);
        print_rate_row(name, o, p->same_work, 1e6);
        printf("  peer bound: rte_ring SPSC, 16 B one way, bursts of 32: %s M/s [%s - %s]\n",
               fig(series_median(&p->rte_ring_16) / 1e6, 0, 2),
               fig(series_min(&p->rte_ring_16) / 1e6, 0, 2),
               fig(series_max(&p->rte_ring_16) / 1e6, 0, 2));
    } else {
        printf("  peers: rte_ring same work and bound NOT MEASURED (%s)\n", p->rte_ring_missing);
    }
    printf("  peer: io_uring NOP submit+reap: %s M/s one at a time, %s M/s in batches of 32 "
           "[%s - %s]\n",
           fig(series_median(&p->uring_nop_1) / 1e6, 0, 2),
           fig(series_median(&p->uring_nop_32) / 1e6, 0, 2),
           fig(series_min(&p->uring_nop_32) / 1e6, 0, 2),
           fig(series_max(&p->uring_nop_32) / 1e6, 0, 2));

    print_qd_header("Cost per job: wake-ups | CPU ns", o);
    printf("  %-30s (submitting thread; QD1 round trips: first figure after the name)\n", "");
    for (int m = 0; m < BENCH_MEMS; m++) {
        const struct ours_mem *mm = &r->mem[m];
        if (!mm->ran)
            continue;
        for (int mode = 0; mode < BENCH_MODES; mode++) {
            if (!o->mode_on[mode])
                continue;
            char name[64];
            snprintf(name, sizeof(name), "ours %s, %s", bench_mode_names[mode], bench_mem_names[m]);
            printf("  %-30s", name);
            for (unsigned q = 0; q < o->nqd; q++)
                printf(" %s", fig(series_median(&mm->rate_cost[mode][q].wakeups), 8, 3));
            printf("\n  %-30s", "");
            for (unsigned q = 0; q < o->nqd; q++)
                printf(" %s", fig(series_median(&mm->rate_cost[mode][q].cpu_ns), 8, 0));
            printf("\n  %-30s QD1 round trips: %s wake-ups, %s CPU ns per job\n", "",
                   fig(series_median(&mm->rtt_cost[mode].wakeups), 0, 3),
                   fig(series_median(&mm->rtt_cost[mode].cpu_ns), 0, 0));
        }
    }
}

static void print_notes(const struct bench_opts *o, const struct peer_results *p,
                        const struct ours_results *r)
{
    const struct ours_mem *bm = best_mem(r);
    int q32 = qd_index(o, 32);
    printf("\nNotes on the throughput comparison:\n");
    printf("  - ours: a %.0f-byte testdev descriptor per job written by the submitter and read by\n"
           "    the model on the other core; the model writes the status block once per doorbell\n"
           "    batch; cookie and status reaped per job. The submitter reaps exactly QD/2 jobs\n"
           "    (at most 32) and refills as many behind one doorbell; in irq and hybrid modes\n"
           "    the last descriptor of each such batch asks for an interrupt.\n",
           OURS_DESC_BYTES);
    printf("  - same work: %u-byte requests through one rte_ring, 16-byte completions back\n"
           "    through another; the worker takes every request there is, the submitter reaps\n"
           "    and refills in the same batches as ours.\n",
           o->desc_size);
    if (o->desc_size != (unsigned)OURS_DESC_BYTES)
        printf("    (--desc-size %u: NOT the same work as ours, whose descriptor is %.0f bytes)\n",
               o->desc_size, OURS_DESC_BYTES);
    if (p->have_rte_ring && bm != NULL && q32 >= 0 && o->mode_on[0]) {
        double ours = series_median(&bm->rate[0][q32]);
        double sw = series_median(&p->same_work[q32]);
        double bound = series_median(&p->rte_ring_16);
        if (isfinite(ours) && isfinite(sw) && isfinite(bound))
            printf("  - request cache lines crossing cores at QD32: ours %.2f M/s, same work %.2f "
                   "M/s,\n"
                   "    bound (16 B one way) %.2f M/s: ours at %.2f of the bound's lines/s\n",
                   ours * OURS_DESC_BYTES / 64 / 1e6, sw * o->desc_size / 64.0 / 1e6,
                   bound * RTE_ELEM_BYTES / 64 / 1e6,
                   ours * OURS_DESC_BYTES / (bound * RTE_ELEM_BYTES));
    }
    printf(
        "  - io_uring NOPs run on the submitting core alone; ours and rte_ring use both cores.\n");
    printf(
        "  - the QD1 target takes the cache line measured just before ours (the \"slot\" rows),\n"
        "    per repetition: the latency between two vCPUs changes when the host moves them.\n");
}

/* The hot path's reads against issue 25's target, and where the README says why when missed. */
static void print_reads_target(const struct dev_row *row)
{
    if (!isfinite(row->reads_goal))
        return;
    bool met = isfinite(row->steady_reads) && row->steady_reads <= row->reads_goal;
    printf("  %-12s   target: hot path reads per job <= %g: %s\n", "", row->reads_goal,
           met                            ? "met"
           : !isfinite(row->steady_reads) ? "not measured"
                                          : "NOT MET");
    if (!met && isfinite(row->steady_reads) && row->reads_why != NULL)
        printf("  %-12s     why: %s\n", "", row->reads_why);
}

/* Each device's open-loop points, when the run made some. */
static void print_devices_open(const struct dev_results *d)
{
    bool any = false;
    for (unsigned i = 0; i < d->n; i++)
        any = any || d->row[i].nopen > 0 || d->row[i].open_skipped != NULL;
    if (!any)
        return;
    printf("\nDevice samples, open loop: iterations due on a fixed schedule at a fraction of "
           "the\nclosed-loop maximum (the sample's whole loop, its CPU check included), "
           "latency from\neach one's due time (ns)\n");
    printf("  %-12s %14s %8s %12s %12s %12s %12s\n", "", "rate/s", "count", "achieved/s", "p50",
           "p99", "p99.9");
    for (unsigned i = 0; i < d->n; i++) {
        const struct dev_row *row = &d->row[i];
        if (row->skipped != NULL)
            continue;
        if (row->open_skipped != NULL)
            printf("  %-12s SKIPPED (%s)\n", row->name, row->open_skipped);
        for (unsigned k = 0; k < row->nopen; k++) {
            const struct dev_open_point *p = &row->open[k];
            char label[40];
            snprintf(label, sizeof(label), "%.1f (%.0f%%)", p->rate, p->frac * 100);
            printf("  %-12s %14s %8llu %s %s %s %s\n", k == 0 ? row->name : "", label,
                   (unsigned long long)p->count, fig(p->achieved, 12, 1), fig(p->p50_ns, 12, 0),
                   fig(p->p99_ns, 12, 0), fig(p->p999_ns, 12, 0));
        }
    }
}

static void print_devices(const struct dev_results *d)
{
    if (d->n == 0)
        return;
    printf("\nDevice samples on their models   p50 ns  [min - max]       p99 ns   inferences/s\n");
    for (unsigned i = 0; i < d->n; i++) {
        const struct dev_row *row = &d->row[i];
        if (row->skipped != NULL) {
            printf("  %-12s SKIPPED (%s)\n", row->name, row->skipped);
            continue;
        }
        printf("  %-12s %s  [%s - %s] %s %s%s\n", row->name,
               fig(series_median(&row->p50_ns), 19, 0), fig(series_min(&row->p50_ns), 0, 0),
               fig(series_max(&row->p50_ns), 0, 0), fig(series_median(&row->p99_ns), 10, 0),
               fig(series_median(&row->per_s), 12, 0), row->mismatches ? "  RESULTS WRONG" : "");
        printf("  %-12s   (%s)\n", "", row->what);
        printf("  %-12s   registers per job: %s reads (%s trapped), %s writes (%s trapped)\n", "",
               fig(series_median(&row->reads_per_job), 0, 1),
               fig(series_median(&row->trapped_reads_per_job), 0, 1),
               fig(series_median(&row->writes_per_job), 0, 1),
               fig(series_median(&row->trapped_writes_per_job), 0, 1));
        printf("  %-12s   hot path (steady state): %s reads (%s trapped), %s writes (%s trapped)\n",
               "", fig(row->steady_reads, 0, 2), fig(row->steady_trapped_reads, 0, 2),
               fig(row->steady_writes, 0, 2), fig(row->steady_trapped_writes, 0, 2));
        printf("  %-12s   messages to the device per job (steady state): %s, %s with each "
               "posted write its own\n",
               "", fig(row->steady_messages, 0, 2), fig(row->steady_messages_unbatched, 0, 2));
        print_reads_target(row);
        /* Each a median over the repetitions, so the two need not add up to the p50's. */
        printf("  %-12s   of the p50: model compute %s ns per iteration, host overhead (p50 - "
               "compute: driver and transport) %s ns\n",
               "", fig(series_median(&row->compute_ns), 0, 0),
               fig(series_median(&row->overhead_ns), 0, 0));
    }
    print_devices_open(d);
}

static void print_targets(const struct target *t, const struct ours_results *r)
{
    printf("\nTargets (medians of per-repetition ratios)     value   goal    met\n");
    for (int i = 0; i < BENCH_TARGETS; i++)
        printf("  %-42s %s  %s%-4g  %s\n", t[i].name, fig(t[i].value, 8, 3),
               t[i].dir == TARGET_AT_MOST    ? "<="
               : t[i].dir == TARGET_AT_LEAST ? ">="
                                             : "==",
               t[i].goal,
               t[i].met               ? "yes"
               : isfinite(t[i].value) ? "NO"
                                      : "not measured");
    if (r->syscount_rc == 0)
        printf("  system calls: %llu in %llu polled round trips; irq mode %s per round trip\n",
               (unsigned long long)r->sys_poll, (unsigned long long)r->rt_poll,
               fig(r->rt_irq ? (double)r->sys_irq / (double)r->rt_irq : NAN, 0, 2));
    else
        printf("  system calls per polled round trip NOT MEASURED (%s)\n",
               npv_strerror(r->syscount_rc));
    if (r->syscount_rc == 0 && r->sys_poll != 0 && r->last_nr_poll >= 0)
        printf("    (a call seen in the poll loop: system call number %d)\n", r->last_nr_poll);
    printf("  (counted by a seccomp user-notification supervisor on the submitting thread: every "
           "call counted, then continued)\n");
}

/* --json for an open-loop run: the points, their percentiles. */
static int write_open_json(const char *path, const char *cmdline, double max_rate,
                           const struct open_point *pt, unsigned n, const struct dev_results *d)
{
    FILE *f = fopen(path, "we");
    if (f == NULL)
        return -errno;
    fprintf(f, "{\n  \"command\": \"");
    for (const char *c = cmdline; *c; c++)
        fprintf(f, *c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
    fprintf(f, "\",\n  \"open_loop\": {\"max_rate\": ");
    if (isfinite(max_rate))
        fprintf(f, "%.1f", max_rate);
    else
        fprintf(f, "null");
    fprintf(f, ", \"points\": [");
    for (unsigned i = 0; i < n; i++)
        fprintf(f,
                "%s\n    {\"rate\": %.1f, \"count\": %llu, \"achieved\": %.1f, \"ring_full\": "
                "%llu, \"p50_ns\": %.0f, "
                "\"p99_ns\": %.0f, \"p999_ns\": %.0f, \"max_ns\": %.0f}",
                i ? "," : "", pt[i].rate, (unsigned long long)pt[i].count,
                isfinite(pt[i].achieved) ? pt[i].achieved : 0, (unsigned long long)pt[i].full,
                pt[i].lat.p50, pt[i].lat.p99, pt[i].lat.p999, pt[i].lat.max);
    fprintf(f, "\n  ]},\n  \"devices\": [");
    unsigned k = 0;
    for (unsigned i = 0; i < d->n; i++) {
        if (d->row[i].skipped != NULL)
            continue;
        fprintf(f, "%s\n    {\"name\": \"%s\", \"open_loop\": ", k++ ? "," : "", d->row[i].name);
        bench_json_dev_open(f, &d->row[i]);
        fprintf(f, "}");
    }
    fprintf(f, "\n  ]\n}\n");
    int rc = ferror(f) ? -EIO : 0;
    if (fclose(f) != 0 && rc == 0)
        rc = -errno;
    return rc;
}

/*
 * --rate's device points: each device at the list's percentages (at most
 * BENCH_DEV_OPEN_POINTS) of its own closed-loop maximum, each point at most
 * BENCH_DEV_OPEN_MS. Rates per second are the ring's only: one device's
 * 2000/s is another's overload.
 */
static int run_devices_open(const struct bench_opts *o, const struct bench_cpus *c,
                            struct dev_results *d)
{
    double fracs[BENCH_DEV_OPEN_POINTS];
    unsigned n = 0;
    for (unsigned i = 0; i < o->nrates && n < BENCH_DEV_OPEN_POINTS; i++)
        if (o->rate[i] < 0)
            fracs[n++] = -o->rate[i];
    if (n == 0) {
        printf("\nDevice rows: no percentage in --rate LIST, so no device points (rates per "
               "second are the ring's)\n");
        return 0;
    }
    uint64_t ms = o->point_ns / 1000000u;
    int rc = devices_open_loop(o, c, d, fracs, n,
                               ms < BENCH_DEV_OPEN_MS ? (unsigned)ms : BENCH_DEV_OPEN_MS);
    print_devices_open(d);
    return rc;
}

/*
 * --rate: the open-loop points, one after the other on the testdev ring,
 * then each device's (run_devices_open). Percentages take the closed-loop
 * maximum measured first. 0, or 1 when a point failed or none was measured.
 */
static int run_open_loop(const struct bench_opts *o, const struct bench_cpus *c,
                         const char *cmdline)
{
    struct ours *ours = NULL;
    int rc = ours_open(o, c, &ours);
    if (rc < 0)
        return 1;
    double max_rate = NAN;
    bool want_max = false;
    for (unsigned i = 0; i < o->nrates; i++)
        want_max = want_max || o->rate[i] < 0;
    if (want_max) {
        rc = ours_max_rate(ours, &max_rate);
        if (rc < 0 || !(max_rate > 0)) {
            fprintf(stderr, "npuvfio-bench: measuring the maximum rate: %s\n",
                    rc < 0 ? npv_strerror(rc) : "nothing completed");
            ours_close(ours);
            return 1;
        }
        printf("maximum: %.0f requests/s (closed loop, poll, QD 256, %.0f ms)\n", max_rate,
               (double)o->point_ns / 1e6);
    }
    static struct open_point pt[BENCH_MAX_RATES];
    unsigned n = 0;
    int status = 0;
    printf("\nOpen loop: testdev ring, poll mode, 4 KiB ring memory; requests arrive on a fixed "
           "schedule,\nlatency from each request's scheduled send time (ns)\n");
    printf("  %14s %10s %14s %10s %10s %10s %10s\n", "rate/s", "requests", "achieved/s", "p50",
           "p99", "p99.9", "max");
    for (unsigned i = 0; i < o->nrates; i++) {
        double rate = o->rate[i] > 0 ? o->rate[i] : -o->rate[i] * max_rate;
        double cnt = o->count != 0 ? (double)o->count : rate * (double)o->point_ns / 1e9;
        uint64_t count = cnt < 1 ? 1 : cnt > BENCH_MAX_COUNT ? BENCH_MAX_COUNT : (uint64_t)cnt;
        rc = ours_open_loop(ours, rate, count, &pt[n]);
        if (rc < 0) {
            fprintf(stderr, "npuvfio-bench: open loop at %.0f/s: %s\n", rate, npv_strerror(rc));
            status = 1;
            continue;
        }
        const struct open_point *p = &pt[n++];
        char label[32];
        if (o->rate[i] < 0)
            snprintf(label, sizeof(label), "%.0f (%.0f%%)", rate, -o->rate[i] * 100);
        else
            snprintf(label, sizeof(label), "%.0f", rate);
        printf("  %14s %10llu %14.0f %10.0f %10.0f %10.0f %10.0f%s\n", label,
               (unsigned long long)p->count, p->achieved, p->lat.p50, p->lat.p99, p->lat.p999,
               p->lat.max, p->full > 0 ? "  RING FULL" : "");
        if (p->full > 0)
            printf("  %14s %llu requests came due with the ring full: past this machine's "
                   "capacity\n",
                   "", (unsigned long long)p->full);
    }
    ours_close(ours);
    if (n == 0) {
        fprintf(stderr, "npuvfio-bench: nothing could be measured\n");
        status = 1;
    }
    static struct dev_results d;
    devices_init(&d);
    if (!o->devices)
        d.n = 0;
    if (d.n > 0 && run_devices_open(o, c, &d) < 0)
        status = 1;
    if (o->json_path != NULL && n > 0) {
        rc = write_open_json(o->json_path, cmdline, max_rate, pt, n, &d);
        if (rc < 0) {
            fprintf(stderr, "npuvfio-bench: writing %s: %s\n", o->json_path, npv_strerror(rc));
            status = 1;
        }
    }
    return status;
}

int main(int argc, char **argv)
{
    struct bench_opts o = {
        .reps = 5, .desc_size = 32, .cpu_sub = -1, .cpu_dev = -1, .devices = true};
    for (int m = 0; m < BENCH_MODES; m++)
        o.mode_on[m] = true;
    for (unsigned q = 0; q < BENCH_MAX_QD; q++)
        o.qd[o.nqd++] = 1u << q;
    int rc = parse_opts(argc, argv, &o);
    if (rc >= 0)
        return rc;

    char cmdline[512] = "";
    for (int i = 0; i < argc; i++) {
        size_t len = strlen(cmdline);
        snprintf(cmdline + len, sizeof(cmdline) - len, "%s%s", i ? " " : "", argv[i]);
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (o.json_path != NULL && check_writable(o.json_path) < 0)
        return 1;
    if (o.compare_path != NULL && access(o.compare_path, R_OK) != 0) {
        fprintf(stderr, "npuvfio-bench: --compare %s: %s (nothing measured)\n", o.compare_path,
                strerror(errno));
        return 1;
    }
    struct utsname u;
    uname(&u);
    struct bench_cpus c;
    rc = bench_cpus_init(&c, o.cpu_sub, o.cpu_dev);
    if (rc < 0) {
        fprintf(stderr, "npuvfio-bench: %s (nothing measured)\n",
                rc == -EINVAL  ? "--cpus names a CPU this machine does not have"
                : rc == -EPERM ? "--cpus names a CPU this process may not run on "
                                 "(see taskset -p $$ or the container's cpuset)"
                               : "cannot read the CPU topology (hwloc)");
        bench_cpus_fini();
        return rc == -EINVAL || rc == -EPERM ? 2 : 1;
    }
    if (c.dev < 0) {
        /* Every figure is a submitter on one core and a device side on another. */
        fprintf(stderr,
                "npuvfio-bench: only CPU %d is allowed to this process (taskset or a cpuset): "
                "the measurements need two, the submitter's and the device side's; allow two "
                "CPUs (nothing measured)\n",
                c.sub);
        bench_cpus_fini();
        return 1;
    }
    if (o.threads != 0) {
        rc = bench_threads(&o, &c, o.threads);
        bench_cpus_fini();
        return rc < 0 ? 1 : 0;
    }
    if (o.nrates > 0) {
        printf("npuvfio-bench %s: open loop on the testdev model over vfio-user\n", npv_version());
        printf("command: %s\n", cmdline);
        printf("machine: %s, %u CPUs (%u allowed), Linux %s; submitter on CPU %d, device side "
               "on CPU %d (hwloc-pinned)\n",
               c.model, c.npus, c.nallowed, u.release, c.sub, c.dev);
        rc = run_open_loop(&o, &c, cmdline);
        bench_cpus_fini();
        return rc;
    }
    struct dev_results d;
    devices_init(&d);
    if (!o.devices)
        d.n = 0;
    printf("npuvfio-bench %s: ring engine vs the testdev model over vfio-user, peers in the same "
           "run\n",
           npv_version());
    printf("command: %s\n", cmdline);
    printf("machine: %s, %u CPUs (%u allowed), Linux %s; submitter on CPU %d, device side on "
           "CPU %d (hwloc-pinned)\n",
           c.model, c.npus, c.nallowed, u.release, c.sub, c.dev);
    printf("run:     %.0f ms per point after %.0f ms warm-up (excluded); figures are medians of %u "
           "repetitions%s\n",
           (double)o.point_ns / 1e6, (double)o.warmup_ns / 1e6, o.reps,
           o.reps < 5 ? " (FEWER THAN 5: spread not trustworthy)" : "");
    print_plan(&o, &d);

    uint64_t t0 = bench_now();
    int status = 0;
    static struct ours_results r;
    static struct peer_results p;
    r.syscount_rc = -ENODATA;
    struct ours *ours = NULL;
    /* Ours first: the model child is forked before any peer thread exists. */
    rc = ours_open(&o, &c, &ours);
    for (unsigned rep = 0; rc == 0 && rep < o.reps; rep++) {
        /* Alternate which goes first, so a drift in the machine favours neither. */
        for (int half = 0; half < 2 && rc == 0; half++) {
            if ((half == 0) == (rep % 2 == 0)) {
                for (int m = 0; m < BENCH_MEMS && rc == 0; m++)
                    rc = ours_rep(ours, m, &r);
            } else {
                rc = run_peers(&o, &c, &p);
            }
        }
        if (rc == 0)
            rc = devices_rep(&o, &c, &d);
    }
    ours_close(ours);
    /* A point failing leaves its row without points and says why; the run goes on. */
    if (rc == 0 && d.n > 0)
        (void)devices_open_loop(&o, &c, &d, bench_dev_open_fracs, BENCH_DEV_OPEN_POINTS,
                                o.quick ? BENCH_DEV_OPEN_QUICK_MS : BENCH_DEV_OPEN_MS);
    if (rc < 0)
        status = 1;
    double elapsed = (double)(bench_now() - t0) / 1e9;

    if (p.rte_ring_empty > 0)
        fprintf(stderr,
                "npuvfio-bench: the rte_ring bound moved nothing in %u of %u repetitions "
                "(starved of CPU?); those are left out\n",
                p.rte_ring_empty, o.reps);
    printf("\n");
    if (!p.have_rte_ring)
        printf("!!! PEER MISSING: DPDK rte_ring not measured: %s !!!\n\n",
               p.rte_ring_missing ? p.rte_ring_missing : "not run");
    print_lat_table(&o, &p, &r);
    print_rate_tables(&o, &p, &r);
    print_notes(&o, &p, &r);
    print_devices(&d);
    struct target t[BENCH_TARGETS];
    compute_targets(&o, &p, &r, t);
    print_targets(t, &r);
    printf("\nmeasured in %.0f s\n", elapsed);
    bool any = false;
    for (int i = 0; i < BENCH_TARGETS; i++)
        any = any || (isfinite(t[i].value) && i != BENCH_TARGETS - 1);
    if (!any) {
        /* No target has both sides of its ratio: the run measured nothing worth a table. */
        fprintf(stderr, "npuvfio-bench: nothing could be measured (no ratio target has a value)\n");
        status = 1;
    }

    if (o.json_path != NULL) {
        struct bench_run run = {.o = &o,
                                .c = &c,
                                .cmdline = cmdline,
                                .kernel = u.release,
                                .p = &p,
                                .r = &r,
                                .d = &d,
                                .t = t,
                                .elapsed_s = elapsed};
        rc = bench_write_json(o.json_path, &run);
        if (rc < 0) {
            fprintf(stderr, "npuvfio-bench: writing %s: %s\n", o.json_path, npv_strerror(rc));
            status = 1;
        }
    }
    if (o.compare_path != NULL) {
        rc = bench_compare(o.compare_path, t, BENCH_TARGETS);
        if (rc < 0) {
            fprintf(stderr, "npuvfio-bench: --compare %s: %s\n", o.compare_path, npv_strerror(rc));
            status = 1;
        }
    }
    bench_cpus_fini();
    return status;
}

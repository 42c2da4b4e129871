/* SPDX-License-Identifier: MIT */
/*
 * npuvfio-serve-bench: one RKNPU shared through the owner (serve/owner.h)
 * against the same clients each owning the device in turn (issue 27), and
 * what a domain switch per job costs the owner against batched turns. The
 * RKNPU model runs in a child process; every client is a thread with its
 * own context, domain and unchanged driver, and every job's C is checked
 * exactly against the CPU (a wrong or failed job is counted and printed).
 * Not a test: nothing is asserted. Prints a table and the command line.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/domain.h>
#include <npuvfio/rknpu.h>

#include "owner.h"
#include "rknpu/sample.h"
#include "rknpu_child.h"

#define WAIT_NS 10000000000ull /* 10 s: far beyond any job; a hang counts as failed */

static const char usage[] =
    "Usage: npuvfio-serve-bench [--clients N] [--jobs J] [--shape M,K,N]\n"
    "One RKNPU model (in a child, over vfio-user) shared by N client threads, each with\n"
    "its own driver, running J exact-checked int8 matmuls (default 3 clients, 300 jobs,\n"
    "64,64,64):\n"
    "  owner     all N at once through an npv_owner (npuvfio serve), one job at a time each\n"
    "  in turn   the same N one after another, each owning a model of its own\n"
    "  batch 1 / batch 0   the owner again, each client running rounds of 3 jobs at once\n"
    "            (one per core), a domain switch per run vs a client's waiting runs in one turn:\n"
    "            the cost of one switch as the owner pays it\n"
    "Prints jobs/s, p50/p99 latency (submit to completion), wrong and failed jobs, and the\n"
    "switches per job. Not a test: nothing is asserted.\n";

struct cfg {
    unsigned clients, jobs;
    struct rknpu_sample_shape shape;
};

/* One client thread's run. */
struct client {
    const struct cfg *cfg;
    const char *socket;
    unsigned idx;
    bool in_flight3; /* rounds of 3 jobs at once, one per core; else one at a time */
    pthread_barrier_t *start;
    uint64_t *lat; /* cfg->jobs latencies, ns */
    unsigned nlat, wrong, failed;
    uint64_t t0, t1;
    int err;
};

/* Check a completed job, count it, and note its latency. */
static void account(struct client *c, struct rknpu_sample_mm *s, int status, uint64_t t_sub)
{
    c->lat[c->nlat++] = bench_now_ns() - t_sub;
    if (status != 0)
        c->failed++;
    else if (rknpu_sample_mm_check(s) != 0)
        c->wrong++;
}

static int submit(struct npv_rknpu *npu, struct rknpu_sample_mm *s, uint32_t core_mask,
                  uint64_t cookie, uint64_t *t_sub)
{
    rknpu_sample_mm_poison(s);
    struct npv_rknpu_job job = {
        .tasks = &s->task, .nr_tasks = 1, .core_mask = core_mask, .cookie = cookie};
    *t_sub = bench_now_ns();
    return npv_rknpu_submit(npu, &job);
}

/*
 * J jobs: one at a time, or in rounds of 3 at once (core k for cookie k) as
 * serve_client's "cores" mode, the next round once all 3 completed, so a
 * client's runs reach the owner together. 0 or a submit/wait error.
 */
static int client_jobs(struct client *c, struct npv_rknpu *npu, struct rknpu_sample_mm *s[3])
{
    unsigned width = c->in_flight3 ? 3 : 1, sent = 0;
    uint64_t t_sub[3] = {0, 0, 0};
    int r = 0;
    while (r == 0 && c->nlat < c->cfg->jobs) {
        if (c->nlat == sent) { /* all completed: the next round */
            unsigned round = c->cfg->jobs - sent < width ? c->cfg->jobs - sent : width;
            for (unsigned k = 0; k < round && r == 0; k++, sent++)
                r = submit(npu, s[k], c->in_flight3 ? 1u << k : 0, k, &t_sub[k]);
        }
        struct npv_cpl cpl[3];
        int n = r == 0 ? npv_rknpu_wait(npu, 1, WAIT_NS, cpl, 3) : r;
        if (n <= 0) {
            r = n < 0 ? n : -ETIMEDOUT;
            break;
        }
        for (int j = 0; j < n; j++) {
            unsigned k = (unsigned)cpl[j].cookie;
            account(c, s[k], cpl[j].status, t_sub[k]);
        }
    }
    return r;
}

static void *client_main(void *arg)
{
    struct client *c = arg;
    struct bench_rknpu b = {0};
    struct rknpu_sample_mm *s[3] = {NULL, NULL, NULL};
    int r = bench_rknpu_open(c->socket, &b);
    struct npv_rknpu *npu = b.npu;
    for (unsigned k = 0; k < (c->in_flight3 ? 3u : 1u) && r == 0; k++)
        r = rknpu_sample_mm_new(npu, &c->cfg->shape, 0, 0, 1 + c->idx * 3 + k, &s[k]);
    if (c->start != NULL)
        pthread_barrier_wait(c->start); /* every client waits, opened or not */
    c->t0 = bench_now_ns();
    if (r == 0)
        r = client_jobs(c, npu, s);
    c->t1 = bench_now_ns();
    for (unsigned k = 0; k < 3; k++)
        rknpu_sample_mm_free(s[k]);
    bench_rknpu_close(&b);
    c->err = r;
    return NULL;
}

struct result {
    const char *name;
    uint64_t jobs, wrong, failed, wall_ns;
    double p50_us, p99_us;
    double sw_npu, sw_owner; /* switches per job; < 0: not measured */
    int err;
};

/* Fold the clients' runs into r: wall is the span (together) or the sum (in turn). */
static void summarize(struct client *cl, unsigned n, bool together, struct result *res)
{
    uint64_t total = 0, first = UINT64_MAX, last = 0, sum = 0;
    for (unsigned i = 0; i < n; i++)
        total += cl[i].nlat;
    uint64_t *all = calloc(total ? total : 1, sizeof(*all));
    size_t at = 0;
    for (unsigned i = 0; i < n; i++) {
        if (all != NULL)
            memcpy(all + at, cl[i].lat, cl[i].nlat * sizeof(*all));
        at += cl[i].nlat;
        res->wrong += cl[i].wrong;
        res->failed += cl[i].failed;
        first = cl[i].t0 < first ? cl[i].t0 : first;
        last = cl[i].t1 > last ? cl[i].t1 : last;
        sum += cl[i].t1 - cl[i].t0;
        if (cl[i].err < 0 && res->err == 0)
            res->err = cl[i].err;
    }
    res->jobs = total;
    res->wall_ns = together ? last - first : sum;
    if (all != NULL && total > 0) {
        bench_sort_u64(all, total);
        /* Nearest rank. */
        res->p50_us = (double)all[(total * 50 + 99) / 100 - 1] / 1000.0;
        res->p99_us = (double)all[(total * 99 + 99) / 100 - 1] / 1000.0;
    }
    free(all);
}

static struct client *clients_new(const struct cfg *cfg, const char *socket, bool in_flight3)
{
    struct client *cl = calloc(cfg->clients, sizeof(*cl));
    for (unsigned i = 0; cl != NULL && i < cfg->clients; i++) {
        cl[i] = (struct client){
            .cfg = cfg, .socket = socket, .idx = i, .in_flight3 = in_flight3, .err = 0};
        cl[i].lat = calloc(cfg->jobs, sizeof(uint64_t));
        if (cl[i].lat == NULL)
            cl[i].err = -ENOMEM;
    }
    return cl;
}

static void clients_free(struct client *cl, unsigned n)
{
    for (unsigned i = 0; cl != NULL && i < n; i++)
        free(cl[i].lat);
    free(cl);
}

static void *owner_main(void *arg)
{
    return (void *)(intptr_t)npv_owner_run(arg);
}

/* The N clients at once through an owner of npu with this batch. */
static void phase_owner(struct npv_ctx *ctx, struct npv_rknpu *npu, const struct cfg *cfg,
                        const char *sock, unsigned batch, bool in_flight3, struct result *res)
{
    struct npv_owner_opts oo = {.socket_path = sock, .batch = batch, .socket_gid = -1};
    struct npv_rknpu_counters before, after;
    struct npv_owner *o = NULL;
    struct client *cl = clients_new(cfg, sock, in_flight3);
    pthread_t ot, *th = calloc(cfg->clients, sizeof(*th));
    pthread_barrier_t bar;
    res->err = cl != NULL && th != NULL ? 0 : -ENOMEM;
    npv_rknpu_counters(npu, &before);
    if (res->err == 0)
        res->err = npv_owner_new(ctx, npu, &oo, &o);
    if (res->err == 0 && pthread_create(&ot, NULL, owner_main, o) != 0)
        res->err = -EAGAIN;
    if (res->err == 0) {
        pthread_barrier_init(&bar, NULL, cfg->clients);
        unsigned started = 0;
        for (unsigned i = 0; i < cfg->clients; i++) {
            cl[i].start = &bar;
            if (pthread_create(&th[i], NULL, client_main, &cl[i]) == 0)
                started++;
            else
                abort(); /* the barrier would never open */
        }
        for (unsigned i = 0; i < started; i++)
            pthread_join(th[i], NULL);
        pthread_barrier_destroy(&bar);
        npv_owner_stop(o);
        void *ret;
        pthread_join(ot, &ret);
        if ((intptr_t)ret < 0 && res->err == 0)
            res->err = (int)(intptr_t)ret;
        summarize(cl, cfg->clients, true, res);
        struct npv_owner_client_stats st[NPV_RKNPU_MAX_DOMAINS];
        size_t n = npv_owner_clients(o, st, NPV_RKNPU_MAX_DOMAINS);
        uint64_t sw = 0;
        for (size_t i = 0; i < n && i < NPV_RKNPU_MAX_DOMAINS; i++)
            sw += st[i].switches;
        npv_rknpu_counters(npu, &after);
        double jobs = res->jobs ? (double)res->jobs : 1.0;
        res->sw_npu = (double)(after.domain_switches - before.domain_switches) / jobs;
        res->sw_owner = (double)sw / jobs;
    }
    npv_owner_free(o);
    unlink(sock);
    clients_free(cl, cfg->clients);
    free(th);
}

/* The N clients one after another, each on a model child of its own. */
static void phase_in_turn(const struct cfg *cfg, const char *sock, struct result *res)
{
    struct client *cl = clients_new(cfg, sock, false);
    res->err = cl != NULL ? 0 : -ENOMEM;
    for (unsigned i = 0; i < cfg->clients && res->err == 0; i++) {
        pid_t pid = bench_model_start(sock, true);
        if (pid < 0) {
            res->err = -ECHILD;
            break;
        }
        client_main(&cl[i]);
        bench_model_stop(pid, sock);
    }
    if (res->err == 0)
        summarize(cl, cfg->clients, false, res);
    res->sw_npu = res->sw_owner = -1.0;
    clients_free(cl, cfg->clients);
}

static double rate(const struct result *r)
{
    return r->wall_ns ? (double)r->jobs * 1e9 / (double)r->wall_ns : 0.0;
}

static void print_row(const struct result *r)
{
    printf("%-18s %7llu %6llu %6llu %9.1f %9.1f %9.1f", r->name, (unsigned long long)r->jobs,
           (unsigned long long)r->wrong, (unsigned long long)r->failed, rate(r), r->p50_us,
           r->p99_us);
    if (r->sw_npu < 0)
        printf(" %10s %10s", "-", "-");
    else
        printf(" %10.3f %10.3f", r->sw_npu, r->sw_owner);
    if (r->err < 0)
        printf("   error: %s", npv_strerror(r->err));
    printf("\n");
}

static int parse(int argc, char **argv, struct cfg *cfg)
{
    /* Options come in pairs (--name value), so i steps by two. */
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage, stdout);
            exit(0);
        } else if (strcmp(argv[i], "--clients") == 0 && v != NULL) {
            cfg->clients = (unsigned)strtoul(v, NULL, 10);
        } else if (strcmp(argv[i], "--jobs") == 0 && v != NULL) {
            cfg->jobs = (unsigned)strtoul(v, NULL, 10);
        } else if (strcmp(argv[i], "--shape") == 0 && v != NULL) {
            if (sscanf(v, "%u,%u,%u", &cfg->shape.m, &cfg->shape.k, &cfg->shape.n) != 3)
                return -1;
        } else {
            return -1;
        }
    }
    /* The owner serves at most one client per domain (owner.h: max_clients 1..16). */
    if (cfg->clients < 1 || cfg->clients > NPV_RKNPU_MAX_DOMAINS || cfg->jobs < 1 ||
        cfg->shape.m == 0 || cfg->shape.k == 0 || cfg->shape.n == 0)
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    struct cfg cfg = {.clients = 3,
                      .jobs = 300,
                      .shape = {.dtype = NPV_RKNPU_INT8, .m = 64, .k = 64, .n = 64, .bias = true}};
    if (parse(argc, argv, &cfg) < 0) {
        fputs(usage, stderr);
        return 2;
    }
    char dir[] = "/tmp/npuvfio-serve-bench-XXXXXX", model[128], sock[128];
    if (mkdtemp(dir) == NULL)
        return 1;
    snprintf(model, sizeof(model), "%s/model.sock", dir);
    snprintf(sock, sizeof(sock), "%s/owner.sock", dir);
    printf("#");
    for (int i = 0; i < argc; i++)
        printf(" %s", argv[i]);
    printf("\n# RKNPU model in a child over vfio-user; %u client threads x %u int8 %ux%ux%u "
           "matmuls, each checked exactly\n",
           cfg.clients, cfg.jobs, cfg.shape.m, cfg.shape.k, cfg.shape.n);
    pid_t pid = bench_model_start(model, true);
    struct bench_rknpu b = {0};
    int r = pid > 0 ? bench_rknpu_open(model, &b) : -ECHILD;
    struct result res[4] = {{.name = "owner"},
                            {.name = "in turn"},
                            {.name = "owner 3/cl batch 1"},
                            {.name = "owner 3/cl batch 0"}};
    if (r == 0) {
        phase_owner(b.ctx, b.npu, &cfg, sock, 0, false, &res[0]);
        phase_owner(b.ctx, b.npu, &cfg, sock, 1, true, &res[2]);
        phase_owner(b.ctx, b.npu, &cfg, sock, 0, true, &res[3]);
    }
    bench_rknpu_close(&b);
    bench_model_stop(pid, model);
    if (r == 0)
        phase_in_turn(&cfg, model, &res[1]);
    if (r < 0) {
        fprintf(stderr, "npuvfio-serve-bench: %s\n", npv_strerror(r));
    } else {
        printf("%-18s %7s %6s %6s %9s %9s %9s %10s %10s\n", "# mode", "jobs", "wrong", "failed",
               "jobs/s", "p50_us", "p99_us", "sw/job", "owner_sw/j");
        for (unsigned i = 0; i < 4; i++)
            print_row(&res[i]);
        double d_sw = res[2].sw_npu - res[3].sw_npu;
        double d_t = 1e6 / rate(&res[2]) - 1e6 / rate(&res[3]);
        printf("# sw/job: npv_rknpu_counters().domain_switches of the owner's driver per job;\n"
               "# owner_sw/j: npv_owner_clients' switches per job. owner 3/cl: each client runs\n"
               "# rounds of 3 jobs at once (core_mask 1/2/4); batch 1 switches domain per run,\n"
               "# batch 0 runs a client's waiting runs in one turn. The switch's cost includes\n"
               "# draining the cores before it (rknpu.h).\n");
        if (d_sw > 0)
            printf("# one switch as the owner pays it: (%.1f - %.1f us/job) / (%.3f - %.3f "
                   "switches/job) = %.1f us%s\n",
                   1e6 / rate(&res[2]), 1e6 / rate(&res[3]), res[2].sw_npu, res[3].sw_npu,
                   d_t / d_sw,
                   d_t < 0      ? " (negative: the rates' noise exceeds it)"
                   : d_sw < 0.1 ? " (switch counts too close: mostly noise)"
                                : "");
        else
            printf("# one switch: n/a (batch 1 did not switch more often than batch 0)\n");
        printf("# Over vfio-user a switch replays the target domain's mappings to the model\n"
               "# (rknpu.h), so it grows with the mapping count; on iommufd it is one flat\n"
               "# attach (~17 us in the VM suite: npuvfio-rknpu-switch-cost, tests/vm).\n");
    }
    rmdir(dir);
    int bad = r < 0;
    for (unsigned i = 0; i < 4; i++)
        bad |= res[i].err < 0 || res[i].wrong > 0 || res[i].failed > 0;
    return bad ? 1 : 0;
}

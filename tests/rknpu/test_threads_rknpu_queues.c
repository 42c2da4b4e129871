/* SPDX-License-Identifier: MIT */
/*
 * A queue per core on one RKNPU (issue 24 item 1, the lock-free path),
 * against the model in a child process: 3 threads, each on its own core's
 * queue (npv_rknpu_queue_open) with 4 int8 matmul jobs of its own in flight
 * and buffers of its own, no lock anywhere. Every output is poisoned before
 * its job and compared with the CPU reference after it; every completion
 * must come back on its own queue, in submission order, once. 5,000 jobs
 * per thread by default (1,000 under ThreadSanitizer);
 * NPUVFIO_THREADS_REQUESTS sets the count. Also: the same with interrupts
 * (npv_rknpu_queue_wait, a fifth of the count); queues of two domains at
 * once (a twentieth: every switch is a remap over vfio-user) and taking
 * strict turns (one switch per turn); a stalled job on one queue fails on
 * its own deadline while the other queues' jobs complete; what a queue
 * refuses (multi-core masks, another domain, a second open, a bad core,
 * device-wide jobs in flight, device-wide calls while queues are open).
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <npuvfio/dev.h>
#include <npuvfio/failpoint.h>
#include <npuvfio/stats.h>

#include "rk_drv.h"
#include "threads_run.h"

#if defined(__SANITIZE_THREAD__)
#define DEFAULT_REQUESTS 1000u
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DEFAULT_REQUESTS 1000u
#endif
#endif
#ifndef DEFAULT_REQUESTS
#define DEFAULT_REQUESTS 5000u
#endif

#define NQ    NPV_RKNPU_NUM_CORES
#define DEPTH 4u
/* A cookie names its thread in the top byte, so a completion on the wrong queue is seen. */
#define COOKIE(th, i) (((uint64_t)(th) << 56) | (i))

static const struct rknpu_sample_shape SHAPE = {
    .dtype = NPV_RKNPU_INT8, .m = 4, .k = 32, .n = 32, .bias = true, .relu = true};

struct qrun {
    struct rk t;
    struct npv_rknpu_queue *q[NQ];
    struct rknpu_sample_mm *s[NQ][DEPTH];
    uint64_t requests;
    uint64_t timeout_ns;
    uint32_t dom[NQ]; /* each queue's domain */
    /* strict alternation (turn-taking test): the thread whose turn it is, then the next */
    bool alternate;
    bool sleep;    /* reap with npv_rknpu_queue_wait (the driver opened with interrupts) */
    uint32_t turn; /* __atomic */
    /* results, per thread (written by that thread only, read after the join) */
    uint64_t done[NQ], wrong[NQ], misrouted[NQ], failed[NQ], leftover[NQ];
    int first_error[NQ];
    uint64_t first_wrong[NQ], wrong_elems[NQ]; /* the first wrong job and its bad elements */
};

struct worker {
    struct qrun *r;
    unsigned th;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int submit(struct qrun *r, unsigned th, uint64_t i)
{
    struct rknpu_sample_mm *s = r->s[th][i % DEPTH];
    rknpu_sample_mm_poison(s);
    struct npv_rknpu_job job = {
        .tasks = &s->task,
        .nr_tasks = 1,
        .core_mask = (i & 1) ? 1u << th : 0, /* both forms a queue takes */
        .domain_id = r->dom[th],
        .timeout_ns = r->timeout_ns,
        .cookie = COOKIE(th, i),
    };
    return npv_rknpu_queue_submit(r->q[th], &job);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct qrun *r = w->r;
    unsigned th = w->th;
    uint64_t next_submit = 0, next_done = 0;
    uint64_t deadline = now_ns() + GENEROUS_NS;
    unsigned depth = r->alternate ? 1 : DEPTH;
    while (next_done < r->requests) {
        if (r->alternate && next_submit == next_done && next_submit < r->requests) {
            while (__atomic_load_n(&r->turn, __ATOMIC_ACQUIRE) != th)
                if (now_ns() > deadline) {
                    r->failed[th]++;
                    r->first_error[th] = -ETIMEDOUT;
                    return NULL;
                }
        }
        while (next_submit < r->requests && next_submit - next_done < depth) {
            int e = submit(r, th, next_submit);
            if (e < 0) {
                r->failed[th]++;
                r->first_error[th] = e;
                return NULL;
            }
            next_submit++;
        }
        struct npv_cpl cpl[DEPTH];
        int n = r->sleep && next_submit != next_done
                    ? npv_rknpu_queue_wait(r->q[th], 1, 100 * MS, cpl, DEPTH)
                    : npv_rknpu_queue_poll(r->q[th], cpl, DEPTH);
        if (n < 0) {
            r->failed[th]++;
            r->first_error[th] = n;
            return NULL;
        }
        for (int k = 0; k < n; k++) {
            /* In order on its own queue: exactly the oldest outstanding job. */
            if (cpl[k].cookie != COOKIE(th, next_done)) {
                r->misrouted[th]++;
                return NULL;
            }
            if (cpl[k].status != 0) {
                r->failed[th]++;
                if (r->first_error[th] == 0)
                    r->first_error[th] = cpl[k].status;
            } else {
                uint64_t bad = rknpu_sample_mm_check(r->s[th][next_done % DEPTH]);
                if (bad != 0 && r->wrong[th]++ == 0) {
                    r->first_wrong[th] = next_done;
                    r->wrong_elems[th] = bad;
                }
            }
            r->done[th]++;
            next_done++;
            if (r->alternate) /* the other thread's turn */
                __atomic_store_n(&r->turn, (th + 1) % 2, __ATOMIC_RELEASE);
        }
        if (n == 0 && now_ns() > deadline) {
            r->failed[th]++;
            r->first_error[th] = -ETIMEDOUT;
            return NULL;
        }
    }
    /* Nothing more may arrive on the queue. */
    struct npv_cpl extra;
    r->leftover[th] = (uint64_t)npv_rknpu_queue_poll(r->q[th], &extra, 1);
    return NULL;
}

static void open_queues(struct qrun *r)
{
    for (unsigned th = 0; th < NQ; th++) {
        for (unsigned k = 0; k < DEPTH; k++)
            ck_assert_int_eq(rknpu_sample_mm_new(r->t.npu, &SHAPE, r->dom[th], 0,
                                                 700 + th * DEPTH + k, &r->s[th][k]),
                             0);
    }
    for (unsigned th = 0; th < NQ; th++) {
        ck_assert_int_eq(npv_rknpu_queue_open(r->t.npu, th, r->dom[th], &r->q[th]), 0);
        ck_assert_uint_eq(npv_rknpu_queue_core(r->q[th]), th);
    }
}

static void close_queues(struct qrun *r)
{
    for (unsigned th = 0; th < NQ; th++)
        npv_rknpu_queue_close(r->q[th]);
    for (unsigned th = 0; th < NQ; th++)
        for (unsigned k = 0; k < DEPTH; k++)
            rknpu_sample_mm_free(r->s[th][k]);
}

static void run_workers(struct qrun *r, unsigned first, unsigned count)
{
    pthread_t tid[NQ];
    struct worker w[NQ];
    for (unsigned th = first; th < first + count; th++) {
        w[th] = (struct worker){.r = r, .th = th};
        ck_assert_int_eq(pthread_create(&tid[th], NULL, worker_main, &w[th]), 0);
    }
    for (unsigned th = first; th < first + count; th++)
        pthread_join(tid[th], NULL);
}

static void assert_thread_clean(const struct qrun *r, unsigned th)
{
    if (r->wrong[th] != 0)
        rk_dump((struct rk *)&r->t);
    ck_assert_msg(r->failed[th] == 0 && r->misrouted[th] == 0 && r->wrong[th] == 0,
                  "queue %u: %llu failed (first %d), %llu misrouted, %llu wrong (the first: job "
                  "%llu, %llu elements)",
                  th, (unsigned long long)r->failed[th], r->first_error[th],
                  (unsigned long long)r->misrouted[th], (unsigned long long)r->wrong[th],
                  (unsigned long long)r->first_wrong[th], (unsigned long long)r->wrong_elems[th]);
    ck_assert_uint_eq(r->done[th], r->requests);
    ck_assert_uint_eq(r->leftover[th], 0);
}

START_TEST(three_threads_a_queue_per_core_exact_in_order_and_own_queue)
{
    static struct qrun r;
    rk_require_model("the run's size is set for the model");
    rk_open(&r.t, NULL);
    r.requests = threads_requests(DEFAULT_REQUESTS);
    r.timeout_ns = GENEROUS_NS;
    open_queues(&r);
    uint64_t t0 = now_ns();
    run_workers(&r, 0, NQ);
    uint64_t ns = now_ns() - t0;
    for (unsigned th = 0; th < NQ; th++) {
        assert_thread_clean(&r, th);
        struct npv_rknpu_queue_counters c;
        npv_rknpu_queue_counters(r.q[th], &c);
        ck_assert_uint_eq(c.submitted, r.requests);
        ck_assert_uint_eq(c.jobs, r.requests);
        ck_assert_uint_eq(c.errors, 0);
    }
    printf("rknpu queues: %u threads x %llu jobs, exact, %.0f jobs/s\n", NQ,
           (unsigned long long)r.requests, (double)(NQ * r.requests) * 1e9 / (double)ns);
    close_queues(&r);
    struct npv_rknpu_counters dc;
    npv_rknpu_counters(r.t.npu, &dc);
    ck_assert_uint_eq(dc.jobs, NQ * r.requests); /* the queues' counts, added at close */
    rk_close(&r.t);
}
END_TEST

struct queue_stats {
    const char *device;
    bool seen[NQ];
    struct npv_stats st[NQ];
};

static void queue_stats_of(void *user, const char *device, const char *queue,
                           const struct npv_stats *st)
{
    struct queue_stats *qs = user;
    unsigned q;
    if (strcmp(device, qs->device) != 0 || sscanf(queue, "queue%u", &q) != 1 || q >= NQ)
        return;
    qs->seen[q] = true;
    qs->st[q] = *st;
}

static void wait_stalled(struct rk *t, unsigned core)
{
    for (unsigned tries = 0;
         rk_port_read(t, RKNPU_TP_CORE(core) + RKNPU_TP_STATE) != RKNPU_CORE_STALLED; tries++)
        ck_assert_msg(tries < 100000, "core %u never took its stall", core);
}

START_TEST(a_stalled_job_fails_on_its_own_deadline_while_other_queues_complete)
{
    static struct qrun r;
    rk_require_model("fault injection is the model's test port");
    rk_open(&r.t, NULL);
    r.requests = 200;
    r.timeout_ns = GENEROUS_NS;
    open_queues(&r);
    /* Core 1 stalls its next run; only its 300 ms deadline ends it. */
    rk_fault(&r.t, 1, RKNPU_FAULT_STALL);
    struct rknpu_sample_mm *st = r.s[1][0];
    struct npv_rknpu_job job = {
        .tasks = &st->task, .nr_tasks = 1, .core_mask = 0x2, .timeout_ns = 300 * MS, .cookie = 77};
    uint64_t t0 = now_ns();
    ck_assert_int_eq(npv_rknpu_queue_submit(r.q[1], &job), 0);
    wait_stalled(&r.t, 1);
    /* Cores 0 and 2 run their jobs on their own threads meanwhile. */
    run_workers(&r, 0, 1);
    run_workers(&r, 2, 1);
    struct npv_cpl cpl;
    int n;
    while ((n = npv_rknpu_queue_poll(r.q[1], &cpl, 1)) == 0)
        ck_assert_msg(now_ns() - t0 < GENEROUS_NS, "the stalled job never failed");
    uint64_t at = now_ns() - t0;
    ck_assert_int_eq(n, 1);
    ck_assert_uint_eq(cpl.cookie, 77);
    ck_assert_int_eq(cpl.status, -ETIMEDOUT);
    ck_assert_uint_ge(at, 300 * MS);
    assert_thread_clean(&r, 0);
    assert_thread_clean(&r, 2);
    struct npv_rknpu_queue_counters c[NQ];
    for (unsigned th = 0; th < NQ; th++)
        npv_rknpu_queue_counters(r.q[th], &c[th]);
    ck_assert_uint_eq(c[1].timeouts, 1);
    ck_assert_uint_eq(c[1].resets, 1); /* core 1 alone */
    ck_assert_uint_eq(c[0].resets + c[2].resets, 0);
    /* Core 1 runs again after its reset, exactly. */
    run_workers(&r, 1, 1);
    assert_thread_clean(&r, 1);
    /* lib/stats has each queue ("rknpu:<dev>", "queue<core>") by how its jobs ended. */
    struct queue_stats qs = {0};
    char dev[96];
    snprintf(dev, sizeof(dev), "rknpu:%s", npv_dev_name(r.t.dev));
    qs.device = dev;
    npv_stats_foreach(r.t.ctx, queue_stats_of, &qs);
    for (unsigned th = 0; th < NQ; th++) {
        ck_assert_msg(qs.seen[th], "no stats queue queue%u", th);
        ck_assert_uint_eq(qs.st[th].requests, th == 1 ? r.requests + 1 : r.requests);
        ck_assert_uint_eq(qs.st[th].ok, r.requests);
        ck_assert_uint_eq(qs.st[th].timeout, th == 1 ? 1 : 0);
        ck_assert_uint_eq(qs.st[th].resets, th == 1 ? 1 : 0);
        ck_assert_uint_eq(qs.st[th].in_flight, 0);
    }
    close_queues(&r);
    rk_close(&r.t);
}
END_TEST

/*
 * A transport with no reset of the cores (the model's soft reset made absent,
 * as vfio-platform without a reset handler): a stalled core's queue fails its
 * job on its deadline, then every job behind it and every later submit with
 * -EIO, while the other queues complete exactly; nothing resets.
 */
START_TEST(without_a_reset_a_stalled_queue_goes_out_of_service_and_the_others_go_on)
{
    static struct qrun r;
    rk_require_model("fault injection is the model's test port");
    rk_open(&r.t, NULL);
    rk_close_client(&r.t);
    rk_reopen(&r.t, NULL);
    ck_assert_int_eq(npv_bar_write(r.t.port, RKNPU_TP_SOFT_RESET_ABSENT, 4, 1), 0);
    rk_close_client(&r.t);
    rk_reopen(&r.t, NULL);
    r.requests = 100;
    r.timeout_ns = GENEROUS_NS;
    open_queues(&r);
    uint32_t model_resets = rk_port_read(&r.t, RKNPU_TP_CORE(1) + RKNPU_TP_RESETS);
    rk_fault(&r.t, 1, RKNPU_FAULT_STALL);
    struct npv_rknpu_job job = {.tasks = &r.s[1][0]->task,
                                .nr_tasks = 1,
                                .core_mask = 0x2,
                                .timeout_ns = 300 * MS,
                                .cookie = 1};
    ck_assert_int_eq(npv_rknpu_queue_submit(r.q[1], &job), 0);
    job.tasks = &r.s[1][1]->task;
    job.cookie = 2;
    ck_assert_int_eq(npv_rknpu_queue_submit(r.q[1], &job), 0); /* behind it */
    wait_stalled(&r.t, 1);
    run_workers(&r, 0, 1);
    run_workers(&r, 2, 1);
    struct npv_cpl cpl[2];
    unsigned got = 0;
    uint64_t t0 = now_ns();
    while (got < 2) {
        int n = npv_rknpu_queue_poll(r.q[1], cpl + got, 2 - got);
        ck_assert_int_ge(n, 0);
        got += (unsigned)n;
        ck_assert_msg(now_ns() - t0 < GENEROUS_NS, "the stalled queue never failed its jobs");
    }
    ck_assert_uint_eq(cpl[0].cookie, 1);
    ck_assert_int_eq(cpl[0].status, -ETIMEDOUT);
    ck_assert_uint_eq(cpl[1].cookie, 2);
    ck_assert_int_eq(cpl[1].status, -EIO);
    /* Out of service: a new job is refused, and nothing tried to reset the core. */
    ck_assert_int_eq(npv_rknpu_queue_submit(r.q[1], &job), -EIO);
    ck_assert_uint_eq(rk_port_read(&r.t, RKNPU_TP_CORE(1) + RKNPU_TP_RESETS), model_resets);
    assert_thread_clean(&r, 0);
    assert_thread_clean(&r, 2);
    struct npv_rknpu_queue_counters c;
    npv_rknpu_queue_counters(r.q[1], &c);
    ck_assert_uint_eq(c.timeouts, 1);
    ck_assert_uint_eq(c.resets, 0);
    close_queues(&r);
    rk_close(&r.t);
}
END_TEST

START_TEST(a_queue_refuses_other_cores_domains_a_second_open_and_device_wide_calls)
{
    static struct rk t;
    rk_open(&t, NULL);
    struct rknpu_sample_mm *s, *s1;
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 1, &s), 0);
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 1, 0, 2, &s1), 0);
    struct npv_rknpu_queue *q0 = NULL, *q = NULL;

    /* Device-wide jobs in flight (or unreaped): no queue. */
    struct npv_rknpu_job job = {.tasks = &s->task, .nr_tasks = 1, .core_mask = 0x1};
    ck_assert_int_eq(npv_rknpu_submit(t.npu, &job), 0);
    ck_assert_int_eq(npv_rknpu_queue_open(t.npu, 0, 0, &q0), -EBUSY);
    struct npv_cpl cpl;
    ck_assert_int_eq(npv_rknpu_wait(t.npu, 1, GENEROUS_NS, &cpl, 1), 1);
    ck_assert_int_eq(cpl.status, 0);

    ck_assert_int_eq(npv_rknpu_queue_open(t.npu, npv_rknpu_num_cores(t.npu), 0, &q), -EINVAL);
    ck_assert_int_eq(npv_rknpu_queue_open(t.npu, 0, NPV_RKNPU_MAX_DOMAINS, &q), -EINVAL);
    ck_assert_int_eq(npv_rknpu_queue_open(t.npu, 0, 5, &q), -ENOENT); /* no buffer there */
    ck_assert_int_eq(npv_rknpu_queue_open(t.npu, 0, 0, &q0), 0);
    ck_assert_int_eq(npv_rknpu_queue_open(t.npu, 0, 0, &q), -EBUSY); /* a second open */
    ck_assert_int_eq(npv_rknpu_queue_open(t.npu, 1, 1, &q), 0); /* another domain: its own turns */
    npv_rknpu_queue_close(q);

    /* A queue takes 0 and its own core's bit only. */
    const uint32_t bad_masks[] = {0x2, 0x4, 0x3, 0x7, 0x5};
    for (unsigned i = 0; i < sizeof(bad_masks) / sizeof(bad_masks[0]); i++) {
        job.core_mask = bad_masks[i];
        ck_assert_int_eq(npv_rknpu_queue_submit(q0, &job), -EINVAL);
    }
    job.core_mask = 0x1;
    struct npv_rknpu_job other = {.tasks = &s1->task, .nr_tasks = 1, .domain_id = 1};
    ck_assert_int_eq(npv_rknpu_queue_submit(q0, &other), -EXDEV);
    ck_assert_int_eq(npv_rknpu_queue_submit_within(q0, &job, 0), -EINVAL);

    /* The device-wide calls wait for queue mode to end. */
    ck_assert_int_eq(npv_rknpu_submit(t.npu, &job), -EBUSY);
    ck_assert_int_eq(npv_rknpu_submit_within(t.npu, &job, GENEROUS_NS), -EBUSY);
    ck_assert_int_eq(npv_rknpu_poll(t.npu, &cpl, 1), -EBUSY);
    ck_assert_int_eq(npv_rknpu_wait(t.npu, 1, 0, &cpl, 1), -EBUSY);
    ck_assert_int_eq(npv_rknpu_run(t.npu, &job), -EBUSY);
    ck_assert_int_eq(npv_rknpu_reset(t.npu), -EBUSY);

    /* Its own slots full: -EAGAIN; then every job completes exactly, in order. */
    unsigned depth = 64 / NPV_RKNPU_NUM_CORES;
    for (unsigned i = 0; i < depth; i++) {
        job.cookie = i;
        ck_assert_int_eq(npv_rknpu_queue_submit_within(q0, &job, GENEROUS_NS), 0);
    }
    ck_assert_int_eq(npv_rknpu_queue_submit(q0, &job), -EAGAIN);
    uint64_t t0 = now_ns();
    for (unsigned got = 0; got < depth;) {
        int n = npv_rknpu_queue_poll(q0, &cpl, 1);
        ck_assert_int_ge(n, 0);
        if (n == 1) {
            ck_assert_uint_eq(cpl.cookie, got);
            ck_assert_int_eq(cpl.status, 0);
            got++;
        }
        ck_assert(now_ns() - t0 < GENEROUS_NS);
    }
    ck_assert_uint_eq(rknpu_sample_mm_check(s), 0);

    npv_rknpu_queue_close(q0);
    npv_rknpu_queue_close(NULL);
    /* Queue mode over: the device-wide path and another domain work again. */
    rk_assert_exact(&t, s, 0x7);
    rk_assert_exact(&t, s1, 0x2);

    /* An open that fails its allocation leaves no queue mode behind. */
    if (npv_failpoint_arm(t.ctx, NPV_FAIL_ALLOC, 1) == 0) {
        ck_assert_int_lt(npv_rknpu_queue_open(t.npu, 1, 0, &q), 0);
        npv_failpoint_disarm(t.ctx);
        rk_assert_exact(&t, s, 0x1); /* not -EBUSY: no queue is open */
        ck_assert_int_eq(npv_rknpu_queue_open(t.npu, 1, 0, &q), 0);
        npv_rknpu_queue_close(q);
    }
    rknpu_sample_mm_free(s);
    rknpu_sample_mm_free(s1);
    rk_close(&t);
}
END_TEST

START_TEST(three_threads_sleeping_on_their_own_cores_interrupts_exact)
{
    static struct qrun r;
    rk_require_model("the run's size is set for the model");
    const struct npv_rknpu_config cfg = {.completion = NPV_RKNPU_IRQ_ONLY};
    rk_open(&r.t, &cfg);
    r.requests = threads_requests(DEFAULT_REQUESTS) / 5;
    r.timeout_ns = GENEROUS_NS;
    r.sleep = true;
    open_queues(&r);
    uint64_t t0 = now_ns();
    run_workers(&r, 0, NQ);
    uint64_t ns = now_ns() - t0;
    for (unsigned th = 0; th < NQ; th++)
        assert_thread_clean(&r, th);
    printf("rknpu queues with interrupts: %u threads x %llu jobs, exact, %.0f jobs/s\n", NQ,
           (unsigned long long)r.requests, (double)(NQ * r.requests) * 1e9 / (double)ns);
    /* Nothing in flight: a wait returns empty at its timeout instead of hanging. */
    struct npv_cpl cpl;
    ck_assert_int_eq(npv_rknpu_queue_wait(r.q[0], 1, 10 * MS, &cpl, 1), 0);
    ck_assert_int_eq(npv_rknpu_queue_wait(r.q[0], 2, 10 * MS, &cpl, 1), -EINVAL);
    close_queues(&r);
    rk_close(&r.t);
}
END_TEST

static uint64_t switches_of(struct qrun *r)
{
    uint64_t n = 0;
    for (unsigned th = 0; th < NQ; th++) {
        struct npv_rknpu_queue_counters c;
        npv_rknpu_queue_counters(r->q[th], &c);
        n += c.domain_switches;
    }
    return n;
}

START_TEST(two_queues_in_two_domains_take_turns_one_switch_per_turn)
{
    static struct qrun r;
    rk_open(&r.t, NULL);
    r.requests = 50; /* per thread: 100 turns */
    r.timeout_ns = GENEROUS_NS;
    r.dom[0] = 0;
    r.dom[1] = 1;
    r.dom[2] = 0;
    r.alternate = true;
    open_queues(&r);
    struct npv_rknpu_counters before;
    npv_rknpu_counters(r.t.npu, &before);
    run_workers(&r, 0, 2);
    assert_thread_clean(&r, 0);
    assert_thread_clean(&r, 1);
    /*
     * Every turn runs in the other domain than the last: a switch per turn
     * (the first one too: the driver had attached no domain of its own).
     */
    ck_assert_uint_eq(switches_of(&r), 2 * r.requests);
    close_queues(&r);
    struct npv_rknpu_counters after;
    npv_rknpu_counters(r.t.npu, &after);
    ck_assert_uint_eq(after.domain_switches - before.domain_switches, 2 * r.requests);
    rk_close(&r.t);
}
END_TEST

START_TEST(three_queues_in_two_domains_at_once_exact_and_switching)
{
    static struct qrun r;
    rk_require_model("the run's size is set for the model");
    rk_open(&r.t, NULL);
    r.requests = threads_requests(DEFAULT_REQUESTS) /
                 20; /* a switch per few jobs: each one a remap over vfio-user */
    r.timeout_ns = GENEROUS_NS;
    r.dom[0] = 0;
    r.dom[1] = 1;
    r.dom[2] = 0;
    open_queues(&r);
    uint64_t t0 = now_ns();
    run_workers(&r, 0, NQ);
    for (unsigned th = 0; th < NQ; th++)
        assert_thread_clean(&r, th);
    uint64_t sw = switches_of(&r);
    printf("rknpu queues in two domains: %u threads x %llu jobs, exact, %llu switches, %.1f s\n",
           NQ, (unsigned long long)r.requests, (unsigned long long)sw,
           (double)(now_ns() - t0) / 1e9);
    ck_assert_uint_ge(sw, 2); /* domain 1 had the device at some point, and domain 0 did */
    ck_assert_uint_le(sw, 2 * r.requests + 1);
    close_queues(&r);
    /* The device-wide path goes on from where the queues left the device. */
    struct rknpu_sample_mm *s;
    ck_assert_int_eq(rknpu_sample_mm_new(r.t.npu, &SHAPE, 1, 0, 5, &s), 0);
    rk_assert_exact(&r.t, s, 0x7);
    rknpu_sample_mm_free(s);
    rk_close(&r.t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("threads_rknpu_queues");
    TCase *tc = tcase_create("queues");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, three_threads_a_queue_per_core_exact_in_order_and_own_queue);
    tcase_add_test(tc, a_stalled_job_fails_on_its_own_deadline_while_other_queues_complete);
    tcase_add_test(tc, without_a_reset_a_stalled_queue_goes_out_of_service_and_the_others_go_on);
    tcase_add_test(tc, three_threads_sleeping_on_their_own_cores_interrupts_exact);
    tcase_add_test(tc, two_queues_in_two_domains_take_turns_one_switch_per_turn);
    tcase_add_test(tc, three_queues_in_two_domains_at_once_exact_and_switching);
    tcase_add_test(tc, a_queue_refuses_other_cores_domains_a_second_open_and_device_wide_calls);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

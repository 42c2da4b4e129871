/* SPDX-License-Identifier: MIT */
/*
 * Issue 22 section 4: the domain switch under everything a job can be. Jobs
 * over 5 domains with core masks 0x7, 0x3, 0, 0x1, 0x4, 0x2 and 1 to 5 tasks,
 * in poll and in irq mode, runs of 1 to 3 jobs per domain so that some
 * switches are skipped: each task's own result exact (every task of every job
 * writes a C of its own, poisoned before and checked at its completion) and
 * the switch count EXACT (a job starts only in submission order, so the count
 * is the number of domain changes along the submissions, plus the first
 * attach). Then a stall and a
 * reset while a switch waits, and an attach that fails. The model only.
 */
#include <assert.h>
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <npuvfio/failpoint.h>

#include "npv_test.h"
#include "rk_drv.h"

#define DOMAINS 5u
#define QUEUE   8u /* jobs in flight at once */

static struct rk t;

static void setup_poll(void)
{
    const struct npv_rknpu_config cfg = {.job_timeout_ns = 300 * MS, .reset_timeout_ns = 50 * MS};
    rk_open(&t, &cfg);
}

static void setup_irq(void)
{
    const struct npv_rknpu_config cfg = {
        .job_timeout_ns = 300 * MS, .reset_timeout_ns = 50 * MS, .completion = NPV_RKNPU_IRQ};
    rk_open(&t, &cfg);
}

static void teardown(void)
{
    rk_close(&t);
}

static const struct rknpu_sample_shape SHAPE = {.dtype = NPV_RKNPU_INT8, .m = 4, .k = 32, .n = 32};
static const uint32_t MASKS[6] = {0x7, 0x3, 0x0, 0x1, 0x4, 0x2};

static struct npv_rknpu_counters counters(void)
{
    struct npv_rknpu_counters c;
    npv_rknpu_counters(t.npu, &c);
    return c;
}

/*
 * Job j's domain and its place in that domain's run: runs of 1, 2, 3 jobs per
 * domain in turn (j = 0 | 1, 2 | 3, 4, 5 | 6 ...), run r in domain r % 5.
 */
static uint32_t domain_of(unsigned j, unsigned *pos)
{
    unsigned run = 0, at = 0;
    for (unsigned len = 1;; len = len % 3 + 1, run++) {
        if (j < at + len) {
            if (pos != NULL)
                *pos = j - at;
            return run % DOMAINS;
        }
        at += len;
    }
}

/*
 * Where each task writes its result: per domain, a slot per place in a run
 * (at most 3) and task (at most 5), so that no two tasks in flight write the
 * same C (the cores of a split job run at once) and every task's result is
 * checked on its own. Two runs of one domain are at least 1 + 2 + 3 + 1 + 2 =
 * 9 jobs apart, more than QUEUE, so a slot is never in flight twice.
 */
#define RUN_MAX   3u
#define TASKS_MAX 5u
#define SLOTS     (RUN_MAX * TASKS_MAX)
static_assert(1 + 2 + 3 + 1 + 2 > QUEUE, "a domain's next run starts after its last one ended");

struct domain_slots {
    struct rknpu_sample_mm *ref; /* A, B and the CPU reference; its own C unused by the jobs */
    struct npv_rknpu_mem *c;     /* SLOTS results of ref's shape, one after the other */
    uint64_t c_bytes;
    uint64_t regcmd[SLOTS][NPV_RKNPU_MATMUL_MAX_WORDS];
    struct npv_rknpu_task task[SLOTS];
};

static void slots_new(struct domain_slots *ds, uint32_t d)
{
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, d, 0, 900 + d, &ds->ref), 0);
    struct npv_rknpu_matmul_sizes sz;
    ck_assert_int_eq(npv_rknpu_matmul_sizes(&ds->ref->mm, &sz), 0);
    ds->c_bytes = (sz.c + 63u) & ~(uint64_t)63u;
    ck_assert_int_eq(npv_rknpu_mem_create(t.npu, ds->c_bytes * SLOTS, d, 0, &ds->c), 0);
    for (unsigned i = 0; i < SLOTS; i++) {
        struct npv_rknpu_matmul mm = ds->ref->mm;
        mm.c = npv_rknpu_mem_iova(ds->c) + i * ds->c_bytes;
        ck_assert_int_gt(
            npv_rknpu_matmul_task(&mm, ds->regcmd[i], NPV_RKNPU_MATMUL_MAX_WORDS, &ds->task[i]), 0);
    }
}

static void slots_free(struct domain_slots *ds)
{
    npv_rknpu_mem_destroy(ds->c);
    rknpu_sample_mm_free(ds->ref);
}

static uint32_t *slot_c(struct domain_slots *ds, unsigned i)
{
    return (uint32_t *)((uint8_t *)npv_rknpu_mem_vaddr(ds->c) + i * ds->c_bytes);
}

/* Fill a slot with the pattern no result has (rknpu_sample_mm_poison's). */
static void slot_poison(struct domain_slots *ds, unsigned i)
{
    uint32_t *c = slot_c(ds, i);
    for (size_t e = 0; e < (size_t)SHAPE.m * SHAPE.n; e++)
        c[e] = 0x7fbadbadu;
    /* As a user on a non-coherent host (rknpu.h): the fill out of the CPU's caches. */
    ck_assert_int_eq(npv_rknpu_mem_sync_for_device(ds->c, i * ds->c_bytes, ds->c_bytes), 0);
}

/* Mismatches of a slot against the CPU reference (through ref's own C, which no job writes). */
static uint64_t slot_check(struct domain_slots *ds, unsigned i)
{
    ck_assert_int_eq(npv_rknpu_mem_sync_for_cpu(ds->c, i * ds->c_bytes, ds->c_bytes), 0);
    memcpy(npv_rknpu_mem_vaddr(ds->ref->c), slot_c(ds, i), (size_t)SHAPE.m * SHAPE.n * 4u);
    return rknpu_sample_mm_check(ds->ref);
}

static void mixed(unsigned jobs)
{
    static struct domain_slots ds[DOMAINS];
    for (uint32_t d = 0; d < DOMAINS; d++)
        slots_new(&ds[d], d);
    struct npv_rknpu_counters before = counters();
    uint64_t want_switches = 0, tasks_checked = 0;
    uint32_t last = UINT32_MAX; /* the device starts in the test's own domain */
    unsigned submitted = 0, completed = 0, in_flight = 0;
    struct npv_cpl cpl[QUEUE];
    while (completed < jobs) {
        while (submitted < jobs && in_flight < QUEUE) {
            unsigned pos;
            uint32_t d = domain_of(submitted, &pos);
            uint32_t nr = 1 + submitted % TASKS_MAX;
            for (unsigned k = 0; k < nr; k++)
                slot_poison(&ds[d], pos * TASKS_MAX + k);
            struct npv_rknpu_job job = {
                .tasks = &ds[d].task[pos * TASKS_MAX],
                .nr_tasks = nr,
                .core_mask = MASKS[submitted % 6],
                .domain_id = d,
                .timeout_ns = GENEROUS_NS,
                .cookie = submitted,
            };
            int r = npv_rknpu_submit(t.npu, &job);
            ck_assert_msg(r == 0, "submit %u: %s", submitted, npv_strerror(r));
            want_switches += d != last;
            last = d;
            submitted++;
            in_flight++;
        }
        int n = npv_rknpu_wait(t.npu, 1, GENEROUS_NS, cpl, QUEUE);
        ck_assert_msg(n > 0, "no completion after %u of %u jobs", completed, jobs);
        for (int k = 0; k < n; k++) {
            unsigned j = (unsigned)cpl[k].cookie, pos;
            ck_assert_msg(cpl[k].status == 0, "job %u: %s", j, npv_strerror(cpl[k].status));
            uint32_t d = domain_of(j, &pos);
            /* Every task of the job ran and wrote its own result. */
            for (unsigned task = 0; task < 1 + j % TASKS_MAX; task++, tasks_checked++)
                ck_assert_msg(slot_check(&ds[d], pos * TASKS_MAX + task) == 0,
                              "job %u (mask 0x%x) task %u: wrong result", j, MASKS[j % 6], task);
        }
        completed += (unsigned)n;
        in_flight -= (unsigned)n;
    }
    struct npv_rknpu_counters after = counters();
    ck_assert_uint_eq(after.jobs - before.jobs, jobs);
    ck_assert_uint_eq(after.timeouts, before.timeouts);
    ck_assert_uint_eq(after.domain_switches - before.domain_switches, want_switches);
    printf("%u jobs, %llu tasks checked, %llu domain switches\n", jobs,
           (unsigned long long)tasks_checked, (unsigned long long)want_switches);
    for (uint32_t d = 0; d < DOMAINS; d++)
        slots_free(&ds[d]);
}

START_TEST(masks_tasks_and_domains_mixed_exact_with_the_exact_switch_count)
{
    mixed(600);
}
END_TEST

static void submit_one(struct rknpu_sample_mm *s, uint32_t mask, uint32_t domain, uint64_t cookie,
                       uint64_t timeout_ns)
{
    rknpu_sample_mm_poison(s);
    struct npv_rknpu_job job = {.tasks = &s->task,
                                .nr_tasks = 1,
                                .core_mask = mask,
                                .domain_id = domain,
                                .timeout_ns = timeout_ns,
                                .cookie = cookie};
    ck_assert_int_eq(npv_rknpu_submit(t.npu, &job), 0);
}

static void collect(struct npv_cpl *by_cookie, unsigned n)
{
    struct npv_cpl cpl[8];
    for (unsigned got = 0; got < n;) {
        int r = npv_rknpu_wait(t.npu, 1, GENEROUS_NS, cpl, 8);
        ck_assert_int_gt(r, 0);
        for (int k = 0; k < r; k++)
            by_cookie[cpl[k].cookie] = cpl[k];
        got += (unsigned)r;
    }
}

START_TEST(a_stall_while_a_switch_waits_fails_alone_and_the_switch_happens)
{
    struct rknpu_sample_mm *a, *b, *c;
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 31, &a), 0);
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 1, 0, 32, &b), 0);
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 33, &c), 0);
    struct npv_rknpu_counters before = counters();
    rk_fault(&t, 1, RKNPU_FAULT_STALL);
    submit_one(a, 0x2, 0, 0, 0); /* domain 0, stalls on core 1 */
    submit_one(b, 0x1, 1, 1, 0); /* domain 1: waits for a switch, core 0 idle */
    submit_one(c, 0x4, 0, 2, 0); /* domain 0 again, behind the waiting switch */
    struct npv_cpl cpl[3];
    collect(cpl, 3);
    ck_assert_int_eq(cpl[0].status, -ETIMEDOUT);
    ck_assert_int_eq(cpl[1].status, 0);
    ck_assert_int_eq(cpl[2].status, 0);
    ck_assert_uint_eq(rknpu_sample_mm_check(b), 0);
    ck_assert_uint_eq(rknpu_sample_mm_check(c), 0);
    struct npv_rknpu_counters after = counters();
    /* Into 0, into 1 once the stalled core was reset, back into 0. */
    ck_assert_uint_eq(after.domain_switches - before.domain_switches, 3);
    ck_assert_uint_eq(after.resets - before.resets, 1);
    rknpu_sample_mm_free(a);
    rknpu_sample_mm_free(b);
    rknpu_sample_mm_free(c);
}
END_TEST

START_TEST(a_reset_while_a_switch_waits_cancels_both_and_the_next_switch_works)
{
    struct rknpu_sample_mm *a, *b;
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 2, 0, 41, &a), 0);
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 3, 0, 42, &b), 0);
    struct npv_rknpu_counters before = counters();
    rk_fault(&t, 0, RKNPU_FAULT_STALL);
    submit_one(a, 0x1, 2, 0, GENEROUS_NS); /* runs (stalled) in domain 2 */
    submit_one(b, 0x2, 3, 1, GENEROUS_NS); /* waits to switch to domain 3 */
    struct npv_cpl none[2];
    ck_assert_int_eq(npv_rknpu_poll(t.npu, none, 2), 0);
    ck_assert_int_eq(npv_rknpu_reset(t.npu), 0);
    struct npv_cpl cpl[2];
    collect(cpl, 2);
    ck_assert_int_eq(cpl[0].status, -ECANCELED);
    ck_assert_int_eq(cpl[1].status, -ECANCELED);
    /* Only the first switch happened; the waiting one never did. */
    ck_assert_uint_eq(counters().domain_switches - before.domain_switches, 1);
    rk_assert_exact(&t, b, 0x2); /* now the switch to 3 */
    rk_assert_exact(&t, a, 0x4); /* and back to 2 */
    ck_assert_uint_eq(counters().domain_switches - before.domain_switches, 3);
    rknpu_sample_mm_free(a);
    rknpu_sample_mm_free(b);
}
END_TEST

START_TEST(an_attach_that_fails_fails_its_job_and_the_next_switch_works)
{
    struct rknpu_sample_mm *a, *b;
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 51, &a), 0);
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 1, 0, 52, &b), 0);
    rk_assert_exact(&t, a, 0x1); /* the device is in domain 0 */
    struct npv_rknpu_counters before = counters();
    /* The switch's first allocation fails. */
    ck_assert_int_eq(npv_failpoint_arm(t.ctx, NPV_FAIL_ALLOC, 1), 0);
    submit_one(b, 0x1, 1, 0, GENEROUS_NS);
    struct npv_cpl cpl[1];
    collect(cpl, 1);
    npv_failpoint_disarm(t.ctx);
    ck_assert_int_lt(cpl[0].status, 0);
    ck_assert_uint_eq(counters().domain_switches, before.domain_switches);
    /* The next switches work, both ways, and compute exact. */
    rk_assert_exact(&t, b, 0x1);
    rk_assert_exact(&t, a, 0x2);
    rk_assert_exact(&t, b, 0x4);
    ck_assert_uint_eq(counters().domain_switches - before.domain_switches, 3);
    rknpu_sample_mm_free(a);
    rknpu_sample_mm_free(b);
}
END_TEST

int main(void)
{
    rk_require_model("stalls, resets and failing attaches are the model's");
    Suite *s = suite_create("rknpu_driver_switches");
    TCase *poll = tcase_create("poll");
    tcase_add_checked_fixture(poll, setup_poll, teardown);
    tcase_add_test(poll, masks_tasks_and_domains_mixed_exact_with_the_exact_switch_count);
    tcase_add_test(poll, a_stall_while_a_switch_waits_fails_alone_and_the_switch_happens);
    tcase_add_test(poll, a_reset_while_a_switch_waits_cancels_both_and_the_next_switch_works);
    tcase_add_test(poll, an_attach_that_fails_fails_its_job_and_the_next_switch_works);
    suite_add_tcase(s, poll);
    TCase *irq = tcase_create("irq");
    tcase_add_checked_fixture(irq, setup_irq, teardown);
    tcase_add_test(irq, masks_tasks_and_domains_mixed_exact_with_the_exact_switch_count);
    tcase_add_test(irq, a_stall_while_a_switch_waits_fails_alone_and_the_switch_happens);
    suite_add_tcase(s, irq);
    return npv_test_run(s);
}

/* SPDX-License-Identifier: MIT */
/*
 * The failure walk (issue 13): for every device of the table with a model
 * and a driver, for every failure class, fail call k = 1, 2, ... of the
 * class during open -> map -> submit -> wait -> close until the path runs
 * through without reaching call k. After each injected failure: the path
 * returned an error (or absorbed the failure and still ran exact), a failed
 * driver is usable or cleanly dead, and fds, mappings and the library's
 * live objects are back to where they started.
 *
 * argv[1] names one device (ctest runs one test per device, side by side);
 * without it every device is walked (the reliability-stress target).
 *
 * The walk covers paths, not their repetitions: each device's model runs at
 * its small size (registry.h, model_create_small; the AICore with 5 usable
 * sub-cores instead of 69, whose register polls over vfio-user make the
 * calls of a pass). NPV_WALK_FULL_SIZE=1 walks the default-size models (the
 * reliability-stress target does).
 *
 * Prints for scripts/reliability-report.py, per device and class:
 *   walk-cost device=NAME class=CLASS calls=N pass_ms=T   (one clean pass)
 *   walk device=NAME class=CLASS points=N errors=E absorbed=A usable=U dead=D
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/ctx.h>
#include <npuvfio/failpoint.h>

#include "deadline.h"
#include "npv_config.h"
#include "npv_test.h"
#include "rel_harness.h"

/* Far beyond any path's calls of one class: a walk that gets here never ends. */
#define MAX_POINTS 4000u
#define ITERATIONS 2u
/*
 * Every driver deadline of the walk's passes. An injected failure can leave a
 * job that never completes (a lost doorbell or start write) or a device the
 * driver must reset: the driver then waits the deadline out, and at the
 * drivers' default of 1 s hundreds of such points do not fit the default
 * run. Short enough for that, long enough that a clean pass (sanitizers
 * included) never meets it: a clean pass missing it fails the walk.
 * NPV_WALK_DEADLINE_MS overrides it.
 */
#define DEFAULT_DEADLINE_MS 250u

static uint64_t walk_deadline_ns(void)
{
    const char *ms = getenv("NPV_WALK_DEADLINE_MS");
    uint64_t v = ms != NULL ? strtoull(ms, NULL, 0) : DEFAULT_DEADLINE_MS;
    return (v != 0 ? v : DEFAULT_DEADLINE_MS) * 1000000ull;
}

/*
 * NPV_WALK_STRIDE=N: fail every Nth call only (1, every call, by default).
 * The tsan preset sets 4: ThreadSanitizer looks for races around the failure
 * paths, which a quarter of the points still crosses in every class and
 * step, while the plain and ASan runs walk every point.
 */
static uint64_t walk_stride(void)
{
    const char *s = getenv("NPV_WALK_STRIDE");
    uint64_t v = s != NULL ? strtoull(s, NULL, 0) : 1;
    return v != 0 ? v : 1;
}

struct walk_state {
    struct npv_ctx *ctx;
    enum npv_fail_class cls;
    uint64_t k;
    bool fired;
};

/* Before the retry of a failed run: the failure is spent, so the retry runs clean. */
static void note_and_disarm(void *arg)
{
    struct walk_state *w = arg;
    w->fired = npv_failpoint_calls(w->ctx, w->cls) >= w->k;
    npv_failpoint_disarm(w->ctx);
}

static void assert_counts_back(const char *dev, const char *cls, uint64_t k,
                               const struct rel_counts *base, const struct rel_counts *now)
{
    ck_assert_msg(now->fds == base->fds, "%s %s k=%llu: %ld fds, started with %ld", dev, cls,
                  (unsigned long long)k, now->fds, base->fds);
    ck_assert_msg(!REL_COMPARE_MEMORY || now->mappings == base->mappings,
                  "%s %s k=%llu: %ld mappings, started with %ld", dev, cls, (unsigned long long)k,
                  now->mappings, base->mappings);
    ck_assert_msg(now->lib.devices == 0 && now->lib.domains == 0 && now->lib.dma_buffers == 0 &&
                      now->lib.dma_bytes == 0 && now->lib.iova_allocations == 0,
                  "%s %s k=%llu: left devices %llu domains %llu dma %llu (%llu bytes) iovas %llu",
                  dev, cls, (unsigned long long)k, (unsigned long long)now->lib.devices,
                  (unsigned long long)now->lib.domains, (unsigned long long)now->lib.dma_buffers,
                  (unsigned long long)now->lib.dma_bytes,
                  (unsigned long long)now->lib.iova_allocations);
}

/*
 * A pass with nothing injected that missed the walk's short deadline: the
 * machine was slow (a loaded 2-core runner: CI once saw an AICore run miss
 * it), or the driver lost a job. Run it again, nothing injected, with a
 * deadline twenty times as long: a lost job misses that one too, and the
 * caller's assertion then fails as before. The failpoint is left as it was
 * (arm it again first to count the calls of the second pass).
 */
static void again_if_slow(struct npv_ctx *ctx, const struct npv_device_entry *e, const char *path,
                          const struct rel_pass_opts *clean, struct rel_pass *p)
{
    if (p->err != -ETIMEDOUT)
        return;
    struct rel_pass_opts slow = *clean;
    slow.deadline_ns = clean->deadline_ns * 20u;
    printf("walk device=%s: a pass with nothing injected missed the %llu ms deadline at %s; "
           "again with %llu ms\n",
           e->name, (unsigned long long)(clean->deadline_ns / 1000000u), p->step ? p->step : "-",
           (unsigned long long)(slow.deadline_ns / 1000000u));
    fflush(stdout);
    rel_pass_run_opts(ctx, e, path, &slow, p);
}

/*
 * A class whose clean pass makes more calls than this is not walked: the
 * walk costs calls x pass time, and the AICore's register polls over
 * vfio-user (a message, an allocation and two socket calls each) make
 * thousands. NPV_WALK_MAX_CALLS overrides it; 0 walks every class.
 */
#define DEFAULT_MAX_CALLS 1000u

static void walk_device(const struct npv_device_entry *e)
{
    const char *mc = getenv("NPV_WALK_MAX_CALLS");
    uint64_t max_calls = mc != NULL ? strtoull(mc, NULL, 0) : DEFAULT_MAX_CALLS;
    const char *full = getenv("NPV_WALK_FULL_SIZE");
    bool full_size = full != NULL && strcmp(full, "0") != 0;
    struct vu_server srv;
    if (full_size)
        rel_model_start(&srv, e);
    else
        rel_model_start_small(&srv, e);
    printf("walk-model device=%s size=%s\n", e->name,
           full_size || e->model_create_small == NULL ? "default" : "small");
    struct npv_ctx *ctx = rel_ctx_new();
    struct rel_pass_opts clean = {.iterations = ITERATIONS, .deadline_ns = walk_deadline_ns()};

    /* Two clean passes first: threads' stacks, malloc arenas and lazy probes settle. */
    struct rel_pass p;
    for (int i = 0; i < 2; i++) {
        rel_pass_run_opts(ctx, e, srv.path, &clean, &p);
        again_if_slow(ctx, e, srv.path, &clean, &p);
        ck_assert_msg(p.err == 0 && p.exact, "%s: clean pass: %s at %s", e->name, strerror(-p.err),
                      p.step ? p.step : "-");
    }
    struct rel_counts base, now;
    rel_counts_read(0, ctx, &base);

    /*
     * What the walk of each class will cost: the calls of one clean pass (the
     * points to walk, give or take what polling adds) and its time.
     */
    uint64_t pass_calls[NPV_FAIL_CLASS_COUNT];
    for (int c = 0; c < NPV_FAIL_CLASS_COUNT; c++) {
        enum npv_fail_class cls = (enum npv_fail_class)c;
        uint64_t t0 = npv_now_ns();
        ck_assert_int_eq(npv_failpoint_arm(ctx, cls, UINT64_MAX), 0);
        rel_pass_run_opts(ctx, e, srv.path, &clean, &p);
        if (p.err == -ETIMEDOUT) {
            t0 = npv_now_ns();
            ck_assert_int_eq(npv_failpoint_arm(ctx, cls, UINT64_MAX), 0);
            again_if_slow(ctx, e, srv.path, &clean, &p);
        }
        uint64_t calls = npv_failpoint_calls(ctx, cls);
        pass_calls[c] = calls;
        npv_failpoint_disarm(ctx);
        ck_assert_msg(p.err == 0 && p.exact, "%s: clean pass: %s at %s", e->name, strerror(-p.err),
                      p.step ? p.step : "-");
        printf("walk-cost device=%s class=%s calls=%llu pass_ms=%llu\n", e->name,
               npv_failpoint_class_name(cls), (unsigned long long)calls,
               (unsigned long long)((npv_now_ns() - t0) / 1000000u));
    }
    fflush(stdout);

    for (int c = 0; c < NPV_FAIL_CLASS_COUNT; c++) {
        enum npv_fail_class cls = (enum npv_fail_class)c;
        const char *cname = npv_failpoint_class_name(cls);
        unsigned errors = 0, absorbed = 0, usable = 0, dead = 0;
        if (max_calls != 0 && pass_calls[c] > max_calls) {
            printf("walk device=%s class=%s not-covered in this run (%llu calls a pass, over "
                   "NPV_WALK_MAX_CALLS=%llu; the reliability-stress target walks it)\n",
                   e->name, cname, (unsigned long long)pass_calls[c],
                   (unsigned long long)max_calls);
            fflush(stdout);
            continue;
        }
        uint64_t k = 1;
        /* NPV_WALK_FROM=N: start every class at call N (to reproduce one point). */
        const char *from = getenv("NPV_WALK_FROM");
        if (from != NULL)
            k = strtoull(from, NULL, 0);
        for (; k <= MAX_POINTS; k += walk_stride()) {
            struct walk_state w = {.ctx = ctx, .cls = cls, .k = k};
            ck_assert_int_eq(npv_failpoint_arm(ctx, cls, k), 0);
            struct rel_pass_opts o = clean;
            o.before_retry = note_and_disarm;
            o.arg = &w;
            rel_pass_run_opts(ctx, e, srv.path, &o, &p);
            if (p.step == NULL || strcmp(p.step, "run") != 0)
                w.fired = npv_failpoint_calls(ctx, cls) >= k;
            npv_failpoint_disarm(ctx);
            if (getenv("NPV_WALK_TRACE") != NULL)
                fprintf(stderr, "%s %s k=%llu fired=%d err=%s at %s retried=%d\n", e->name, cname,
                        (unsigned long long)k, w.fired, strerror(-p.err), p.step ? p.step : "-",
                        p.retried);
            rel_counts_read(0, ctx, &now);
            assert_counts_back(e->name, cname, k, &base, &now);
            if (!w.fired) {
                if (p.err == -ETIMEDOUT) {
                    again_if_slow(ctx, e, srv.path, &clean, &p);
                    rel_counts_read(0, ctx, &now);
                    assert_counts_back(e->name, cname, k, &base, &now);
                }
                /* Nothing injected: the path must have run, exact, and the walk is done. */
                ck_assert_msg(p.err == 0, "%s %s k=%llu: %s at %s with nothing injected", e->name,
                              cname, (unsigned long long)k, strerror(-p.err), p.step);
                ck_assert_msg(p.exact, "%s %s k=%llu: wrong results", e->name, cname,
                              (unsigned long long)k);
                break;
            }
            if (p.err == 0) {
                /* A failure the library may absorb (a BAR area left trapped, a release). */
                ck_assert_msg(p.exact, "%s %s k=%llu: the failure was swallowed into wrong results",
                              e->name, cname, (unsigned long long)k);
                absorbed++;
                continue;
            }
            errors++;
            if (strcmp(p.step, "run") == 0) {
                if (p.retried == 0)
                    usable++;
                else
                    dead++;
            }
        }
        ck_assert_msg(k <= MAX_POINTS, "%s %s: the path never completed", e->name, cname);
        printf("walk device=%s class=%s points=%llu errors=%u absorbed=%u usable=%u dead=%u%s\n",
               e->name, cname, (unsigned long long)(k - 1), errors, absorbed, usable, dead,
               walk_stride() > 1 ? " (every NPV_WALK_STRIDE-th point)" : "");
        fflush(stdout);
    }
    npv_ctx_free(ctx);
    vu_server_kill(&srv);
}

/* The device argv[1] names (one ctest test per device), or every device of the table. */
static const char *only_device;

START_TEST(walk_every_failure_point_of_each_device)
{
    const struct npv_device_entry *e = rel_device_or_note((size_t)_i, "walk", "");
    if (e == NULL || (only_device != NULL && strcmp(e->name, only_device) != 0))
        return;
    walk_device(e);
}
END_TEST

int main(int argc, char **argv)
{
#if !NPV_HAVE_FAILPOINTS
    return npv_test_skip("reliability_failure_walk", "built without NPUVFIO_FAILPOINTS");
#endif
    size_t n = rel_device_count();
    if (argc > 1) {
        only_device = argv[1];
        if (npv_device_find(only_device) == NULL) {
            fprintf(stderr, "reliability_failure_walk: no device \"%s\" in the table\n",
                    only_device);
            return EXIT_FAILURE;
        }
    }
    Suite *s = suite_create("failure_walk");
    TCase *tc = tcase_create("walk");
    tcase_set_timeout(tc, 0);
    tcase_add_loop_test(tc, walk_every_failure_point_of_each_device, 0, (int)n);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}

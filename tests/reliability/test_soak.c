/* SPDX-License-Identifier: MIT */
/*
 * Soak: every device of the table that runs today, its model and driver, for
 * a configurable time (NPUVFIO_SOAK_SECONDS, default 30; the stress target
 * runs 1800), with faults at random intervals: a library failure of a random
 * class at a random call during a pass, or the model SIGKILLed and restarted
 * on its socket. Clean passes must stay exact, faulted ones end in an error
 * or exact results, and the process's RSS, fds and mappings must be flat:
 * fds exactly, and (in builds without sanitizers) mappings within
 * MAPPINGS_SLACK lines and RSS within
 * RSS_SLACK_KIB of the values after the warm-up (allocator caches and lazily
 * touched pages move a little; a leak per pass moves without bound).
 *
 * NPUVFIO_SOAK_SEED fixes the random sequence (printed). Prints for
 * scripts/reliability-report.py:
 *   soak seconds=S passes=P faults=F model-kills=K rss-kib=A->B fds=A->B mappings=A->B
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <npuvfio/failpoint.h>

#include "npv_config.h"
#include "npv_test.h"
#include "rel_harness.h"

#define MAX_DEVICES    8
#define MAPPINGS_SLACK 16
#define RSS_SLACK_KIB  (16 * 1024)

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: a reproducible sequence from the printed seed. */
static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

START_TEST(soak_keeps_results_exact_and_resources_flat)
{
    const char *env = getenv("NPUVFIO_SOAK_SECONDS");
    uint64_t seconds = env != NULL ? strtoull(env, NULL, 0) : 30;
    env = getenv("NPUVFIO_SOAK_SEED");
    uint64_t seed = env != NULL ? strtoull(env, NULL, 0) : (mono_ns() | 1);
    printf("soak seed=%llu\n", (unsigned long long)seed);
    uint64_t rng = seed;

    const struct npv_device_entry *devs[MAX_DEVICES];
    struct vu_server srv[MAX_DEVICES];
    uint64_t calls[MAX_DEVICES][NPV_FAIL_CLASS_COUNT];
    size_t n = 0;
    for (size_t i = 0; npv_device_at(i) != NULL && n < MAX_DEVICES; i++)
        if (rel_device_runs(npv_device_at(i)))
            devs[n++] = npv_device_at(i);
    ck_assert_uint_gt(n, 0);
    struct npv_ctx *ctx = rel_ctx_new();
    struct rel_pass p;
    for (size_t d = 0; d < n; d++) {
        rel_model_start(&srv[d], devs[d]);
        for (int i = 0; i < 3; i++) {
            npv_failpoint_disarm(ctx);
            rel_pass_run(ctx, devs[d], srv[d].path, 4, NULL, NULL, &p);
            ck_assert_msg(p.err == 0 && p.exact, "%s: warm-up", devs[d]->name);
        }
        /* A pass's calls of each class: injected failures land inside the path. */
        for (int c = 0; c < NPV_FAIL_CLASS_COUNT; c++)
            calls[d][c] = npv_failpoint_calls(ctx, (enum npv_fail_class)c);
    }
    struct rel_counts start, end;
    rel_counts_read(0, ctx, &start);

    uint64_t deadline = mono_ns() + seconds * 1000000000ull;
    uint64_t passes = 0, faults = 0, fired = 0, kills = 0, clean = 0;
    while (mono_ns() < deadline) {
        size_t d = (size_t)(next_rand(&rng) % n);
        unsigned roll = (unsigned)(next_rand(&rng) % 16);
        bool injected = false;
        enum npv_fail_class cls = NPV_FAIL_ALLOC;
        uint64_t k = 0;
        if (roll == 0) {
            /* The model dies between passes; a new one takes its socket. */
            vu_server_crash(&srv[d]);
            rel_model_restart(&srv[d], devs[d]);
            kills++;
        } else if (roll <= 4 && NPV_HAVE_FAILPOINTS) {
            cls = (enum npv_fail_class)(next_rand(&rng) % NPV_FAIL_CLASS_COUNT);
            k = 1 + next_rand(&rng) % (calls[d][cls] + 1);
            ck_assert_int_eq(npv_failpoint_arm(ctx, cls, k), 0);
            injected = true;
            faults++;
        }
        unsigned iterations = 1 + (unsigned)(next_rand(&rng) % 32);
        rel_pass_run(ctx, devs[d], srv[d].path, iterations, NULL, NULL, &p);
        if (injected) {
            fired += npv_failpoint_calls(ctx, cls) >= k;
            npv_failpoint_disarm(ctx);
        }
        if (!injected)
            ck_assert_msg(p.err == 0 && p.exact, "%s pass %llu: %s at %s", devs[d]->name,
                          (unsigned long long)passes, strerror(-p.err), p.step ? p.step : "-");
        else
            ck_assert_msg(p.err != 0 || p.exact, "%s pass %llu: a fault turned into wrong results",
                          devs[d]->name, (unsigned long long)passes);
        clean += p.err == 0;
        passes++;
        struct rel_counts now;
        rel_counts_read(0, ctx, &now);
        ck_assert_msg(now.fds == start.fds, "pass %llu: %ld fds, %ld at the start",
                      (unsigned long long)passes, now.fds, start.fds);
        ck_assert_uint_eq(
            now.lib.devices + now.lib.domains + now.lib.dma_buffers + now.lib.iova_allocations, 0);
    }
    rel_counts_read(0, ctx, &end);
    printf("soak seconds=%llu passes=%llu clean=%llu faults=%llu fired=%llu model-kills=%llu "
           "rss-kib=%ld->%ld "
           "fds=%ld->%ld mappings=%ld->%ld\n",
           (unsigned long long)seconds, (unsigned long long)passes, (unsigned long long)clean,
           (unsigned long long)faults, (unsigned long long)fired, (unsigned long long)kills,
           start.rss_kib, end.rss_kib, start.fds, end.fds, start.mappings, end.mappings);
    fflush(stdout);
    ck_assert_int_eq(end.fds, start.fds);
    ck_assert_msg(!REL_COMPARE_MEMORY || end.mappings <= start.mappings + MAPPINGS_SLACK,
                  "mappings %ld -> %ld", start.mappings, end.mappings);
    ck_assert_msg(!REL_COMPARE_MEMORY || end.rss_kib <= start.rss_kib + RSS_SLACK_KIB,
                  "RSS %ld -> %ld KiB", start.rss_kib, end.rss_kib);
    for (size_t d = 0; d < n; d++)
        vu_server_kill(&srv[d]);
    npv_ctx_free(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("soak");
    TCase *tc = tcase_create("soak");
    tcase_set_timeout(tc, 0);
    tcase_add_test(tc, soak_keeps_results_exact_and_resources_flat);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}

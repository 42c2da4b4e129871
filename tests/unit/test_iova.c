/* SPDX-License-Identifier: MIT */
/* The IOVA allocator and range-set arithmetic (lib/iova.c). */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iova.h"

#define PG 4096ull

static struct npv_iova_space sp;

static void setup(void)
{
    npv_iova_space_init(&sp);
}

static void teardown(void)
{
    npv_iova_space_fini(&sp);
}

static void set_one_range(npv_iova_t start, npv_iova_t last)
{
    struct npv_iova_range r = {start, last};
    ck_assert_int_eq(npv_iova_space_set_ranges(&sp, &r, 1), 0);
}

static size_t hole_count(void)
{
    ck_assert_uint_eq(sp.free_by_start.count, sp.free_by_size.count);
    return sp.free_by_start.count;
}

START_TEST(iova_empty_space_has_no_room)
{
    npv_iova_t iova;
    ck_assert_int_eq(npv_iova_alloc(&sp, PG, PG, &iova), -ENOSPC);
    ck_assert_int_eq(npv_iova_alloc_at(&sp, 0, PG), -ERANGE);
}
END_TEST

START_TEST(iova_alloc_rejects_bad_arguments)
{
    npv_iova_t iova;
    set_one_range(0, 0xffffffff);
    ck_assert_int_eq(npv_iova_alloc(&sp, 0, PG, &iova), -EINVAL);
    ck_assert_int_eq(npv_iova_alloc(&sp, PG, 0, &iova), -EINVAL);
    ck_assert_int_eq(npv_iova_alloc(&sp, PG, 3 * PG, &iova), -EINVAL);
    ck_assert_int_eq(npv_iova_alloc_at(&sp, 0, 0), -EINVAL);
    ck_assert_int_eq(npv_iova_alloc_at(&sp, UINT64_MAX - PG + 2, PG), -EINVAL);
    ck_assert_int_eq(npv_iova_free(&sp, 0), -ENOENT);
}
END_TEST

START_TEST(iova_alloc_aligns_start_to_requested_alignment)
{
    npv_iova_t iova;
    set_one_range(0x1000, 0xffffffff);
    ck_assert_int_eq(npv_iova_alloc(&sp, PG, PG, &iova), 0);
    ck_assert_uint_eq(iova, 0x1000);
    ck_assert_int_eq(npv_iova_alloc(&sp, 2 << 20, 2 << 20, &iova), 0);
    ck_assert_uint_eq(iova % (2 << 20), 0);
    ck_assert_uint_eq(iova, 2 << 20);
    ck_assert_int_eq(npv_iova_alloc(&sp, 1ull << 30, 1ull << 30, &iova), 0);
    ck_assert_uint_eq(iova, 1ull << 30);
    /* The gap left before the 2 MiB block is still usable for small things. */
    ck_assert_int_eq(npv_iova_alloc(&sp, PG, PG, &iova), 0);
    ck_assert_uint_eq(iova, 0x2000);
}
END_TEST

START_TEST(iova_alloc_best_fit_picks_smallest_hole)
{
    npv_iova_t a[6];
    set_one_range(0, 64 * PG - 1);
    /* Holes of 4, 1 and 2 pages separated by allocations. */
    ck_assert_int_eq(npv_iova_alloc_at(&sp, 4 * PG, PG), 0);
    ck_assert_int_eq(npv_iova_alloc_at(&sp, 6 * PG, PG), 0);
    ck_assert_int_eq(npv_iova_alloc_at(&sp, 9 * PG, 55 * PG), 0);
    /* holes: [0,4) 4 pages, [5,6) 1 page, [7,9) 2 pages */
    ck_assert_uint_eq(hole_count(), 3);
    ck_assert_int_eq(npv_iova_alloc(&sp, PG, PG, &a[0]), 0);
    ck_assert_uint_eq(a[0], 5 * PG);
    ck_assert_int_eq(npv_iova_alloc(&sp, PG, PG, &a[1]), 0);
    ck_assert_uint_eq(a[1], 7 * PG);
    ck_assert_int_eq(npv_iova_alloc(&sp, 2 * PG, PG, &a[2]), 0);
    ck_assert_uint_eq(a[2], 0);
    ck_assert_int_eq(npv_iova_alloc(&sp, PG, PG, &a[3]), 0);
    ck_assert_uint_eq(a[3], 8 * PG);
}
END_TEST

START_TEST(iova_best_fit_skips_hole_too_small_after_alignment)
{
    npv_iova_t iova;
    set_one_range(0, 64 * PG - 1);
    /* A 3-page hole at page 1 cannot hold 2 pages aligned to 4; the 8-page hole at 8 can. */
    ck_assert_int_eq(npv_iova_alloc_at(&sp, 0, PG), 0);
    ck_assert_int_eq(npv_iova_alloc_at(&sp, 4 * PG, 4 * PG), 0);
    ck_assert_int_eq(npv_iova_alloc_at(&sp, 16 * PG, 48 * PG), 0);
    ck_assert_int_eq(npv_iova_alloc(&sp, 2 * PG, 4 * PG, &iova), 0);
    ck_assert_uint_eq(iova, 8 * PG);
}
END_TEST

START_TEST(iova_free_coalesces_with_both_neighbours)
{
    npv_iova_t a, b, c, big;
    set_one_range(0, 3 * PG - 1);
    ck_assert_int_eq(npv_iova_alloc(&sp, PG, PG, &a), 0);
    ck_assert_int_eq(npv_iova_alloc(&sp, PG, PG, &b), 0);
    ck_assert_int_eq(npv_iova_alloc(&sp, PG, PG, &c), 0);
    ck_assert_uint_eq(hole_count(), 0);
    ck_assert_int_eq(npv_iova_free(&sp, a), 0);
    ck_assert_int_eq(npv_iova_free(&sp, c), 0);
    ck_assert_uint_eq(hole_count(), 2);
    ck_assert_int_eq(npv_iova_free(&sp, b), 0);
    ck_assert_uint_eq(hole_count(), 1);
    ck_assert_int_eq(npv_iova_alloc(&sp, 3 * PG, PG, &big), 0);
    ck_assert_uint_eq(big, 0);
}
END_TEST

START_TEST(iova_exhaustion_returns_enospc_and_free_gives_room)
{
    npv_iova_t iova[16], extra;
    set_one_range(0x100000, 0x100000 + 16 * PG - 1);
    for (int i = 0; i < 16; i++)
        ck_assert_int_eq(npv_iova_alloc(&sp, PG, PG, &iova[i]), 0);
    ck_assert_int_eq(npv_iova_alloc(&sp, PG, PG, &extra), -ENOSPC);
    ck_assert_int_eq(npv_iova_free(&sp, iova[7]), 0);
    ck_assert_int_eq(npv_iova_alloc(&sp, 2 * PG, PG, &extra), -ENOSPC);
    ck_assert_int_eq(npv_iova_alloc(&sp, PG, PG, &extra), 0);
    ck_assert_uint_eq(extra, iova[7]);
}
END_TEST

START_TEST(iova_alloc_at_reports_busy_and_out_of_range)
{
    set_one_range(0x10000, 0x1ffff);
    ck_assert_int_eq(npv_iova_alloc_at(&sp, 0x12000, 2 * PG), 0);
    ck_assert_int_eq(npv_iova_alloc_at(&sp, 0x13000, PG), -EBUSY);
    ck_assert_int_eq(npv_iova_alloc_at(&sp, 0x11000, 2 * PG), -EBUSY);
    ck_assert_int_eq(npv_iova_alloc_at(&sp, 0xf000, PG), -ERANGE);
    ck_assert_int_eq(npv_iova_alloc_at(&sp, 0x1f000, 2 * PG), -ERANGE);
    ck_assert_int_eq(npv_iova_alloc_at(&sp, 0x1f000, PG), 0);
    ck_assert_int_eq(npv_iova_free(&sp, 0x13000), -ENOENT);
    ck_assert_uint_eq(npv_iova_count(&sp), 2);
}
END_TEST

START_TEST(iova_allocates_only_inside_disjoint_ranges)
{
    struct npv_iova_range r[] = {{0x40000, 0x41fff}, {0x10000, 0x10fff}};
    npv_iova_t iova;
    ck_assert_int_eq(npv_iova_space_set_ranges(&sp, r, 2), 0);
    ck_assert_int_eq(npv_iova_alloc(&sp, 2 * PG, PG, &iova), 0);
    ck_assert_uint_eq(iova, 0x40000);
    ck_assert_int_eq(npv_iova_alloc(&sp, PG, PG, &iova), 0);
    ck_assert_uint_eq(iova, 0x10000);
    ck_assert_int_eq(npv_iova_alloc(&sp, PG, PG, &iova), -ENOSPC);
}
END_TEST

START_TEST(iova_narrowing_that_strands_an_allocation_fails_and_changes_nothing)
{
    npv_iova_t iova;
    set_one_range(0, 0xffffffff);
    ck_assert_int_eq(npv_iova_alloc_at(&sp, 0x80000000, PG), 0);
    struct npv_iova_range low = {0, 0x7fffffff};
    ck_assert_int_eq(npv_iova_space_set_ranges(&sp, &low, 1), -ERANGE);
    ck_assert_uint_eq(sp.nr_ranges, 1);
    ck_assert_uint_eq(sp.ranges[0].last, 0xffffffff);
    ck_assert_int_eq(npv_iova_alloc_at(&sp, 0xfffff000, PG), 0);
    /* Narrowing around the allocations works. */
    struct npv_iova_range keep[] = {{0x80000000, 0x80000fff}, {0xfffff000, 0xffffffff}};
    ck_assert_int_eq(npv_iova_space_set_ranges(&sp, keep, 2), 0);
    ck_assert_int_eq(npv_iova_alloc(&sp, PG, PG, &iova), -ENOSPC);
    ck_assert_int_eq(npv_iova_free(&sp, 0x80000000), 0);
    ck_assert_int_eq(npv_iova_alloc(&sp, PG, PG, &iova), 0);
    ck_assert_uint_eq(iova, 0x80000000);
}
END_TEST

START_TEST(iova_handles_the_full_64_bit_space)
{
    npv_iova_t iova;
    set_one_range(0, UINT64_MAX);
    ck_assert_int_eq(npv_iova_alloc_at(&sp, UINT64_MAX - PG + 1, PG), 0);
    ck_assert_int_eq(npv_iova_alloc(&sp, 1ull << 63, 1ull << 63, &iova), 0);
    ck_assert_uint_eq(iova, 0);
    /* [2^63, 2^64 - 4096) is left: 2^63 - 4096 bytes. */
    ck_assert_int_eq(npv_iova_alloc(&sp, 1ull << 63, PG, &iova), -ENOSPC);
    ck_assert_int_eq(npv_iova_alloc(&sp, (1ull << 63) - PG, PG, &iova), 0);
    ck_assert_uint_eq(iova, 1ull << 63);
    ck_assert_uint_eq(hole_count(), 0);
    ck_assert_int_eq(npv_iova_free(&sp, UINT64_MAX - PG + 1), 0);
    ck_assert_int_eq(npv_iova_free(&sp, 1ull << 63), 0);
    ck_assert_int_eq(npv_iova_free(&sp, 0), 0);
    ck_assert_uint_eq(hole_count(), 1);
}
END_TEST

/* ---- range sets ---- */

static void expect_ranges(const struct npv_iova_range *got, size_t n,
                          const struct npv_iova_range *want, size_t nw)
{
    ck_assert_uint_eq(n, nw);
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_eq(got[i].start, want[i].start);
        ck_assert_uint_eq(got[i].last, want[i].last);
    }
}

START_TEST(ranges_normalize_sorts_merges_and_drops_empty)
{
    struct npv_iova_range r[] = {{50, 60}, {0, 9}, {10, 19}, {5, 7}, {9, 3}, {61, 61}, {100, 200}};
    size_t n = npv_ranges_normalize(r, 7);
    struct npv_iova_range want[] = {{0, 19}, {50, 61}, {100, 200}};
    expect_ranges(r, n, want, 3);
    struct npv_iova_range top[] = {{UINT64_MAX, UINT64_MAX}, {0, UINT64_MAX}};
    ck_assert_uint_eq(npv_ranges_normalize(top, 2), 1);
    ck_assert_uint_eq(top[0].last, UINT64_MAX);
}
END_TEST

START_TEST(ranges_intersect_keeps_common_parts)
{
    struct npv_iova_range a[] = {{0, 0xffffffff}};
    /* What x86 type1 reports: everything but the MSI window. */
    struct npv_iova_range b[] = {{0xfef00000, UINT64_MAX}, {0, 0xfedfffff}};
    struct npv_iova_range *out = NULL;
    size_t n = 0;
    ck_assert_int_eq(npv_ranges_intersect(a, 1, b, 2, &out, &n), 0);
    struct npv_iova_range want[] = {{0, 0xfedfffff}, {0xfef00000, 0xffffffff}};
    expect_ranges(out, n, want, 2);
    free(out);

    struct npv_iova_range c[] = {{0x1000, 0x1fff}, {0x3000, 0x3fff}};
    struct npv_iova_range d[] = {{0x1800, 0x37ff}};
    ck_assert_int_eq(npv_ranges_intersect(c, 2, d, 1, &out, &n), 0);
    struct npv_iova_range want2[] = {{0x1800, 0x1fff}, {0x3000, 0x37ff}};
    expect_ranges(out, n, want2, 2);
    free(out);

    ck_assert_int_eq(npv_ranges_intersect(c, 2, NULL, 0, &out, &n), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(out);
    struct npv_iova_range e[] = {{0x2000, 0x2fff}};
    ck_assert_int_eq(npv_ranges_intersect(c, 2, e, 1, &out, &n), 0);
    ck_assert_uint_eq(n, 0);
}
END_TEST

START_TEST(ranges_subtract_cuts_holes)
{
    struct npv_iova_range a[] = {{0, 0xffff}, {0x20000, 0x2ffff}};
    struct npv_iova_range b[] = {{0x1000, 0x1fff}, {0xf000, 0x20fff}, {0x2f000, UINT64_MAX}};
    struct npv_iova_range *out = NULL;
    size_t n = 0;
    ck_assert_int_eq(npv_ranges_subtract(a, 2, b, 3, &out, &n), 0);
    struct npv_iova_range want[] = {{0, 0xfff}, {0x2000, 0xefff}, {0x21000, 0x2efff}};
    expect_ranges(out, n, want, 3);
    free(out);
    ck_assert_int_eq(npv_ranges_subtract(a, 2, NULL, 0, &out, &n), 0);
    struct npv_iova_range want2[] = {{0, 0xffff}, {0x20000, 0x2ffff}};
    expect_ranges(out, n, want2, 2);
    free(out);
    struct npv_iova_range all = {0, UINT64_MAX};
    ck_assert_int_eq(npv_ranges_subtract(a, 2, &all, 1, &out, &n), 0);
    ck_assert_uint_eq(n, 0);
}
END_TEST

/* ---- randomized against a reference model ---- */

#define UNITS  1024
#define BASE   0x100000ull /* aligned to the largest alignment used */
#define NR_OPS 12000

enum { FREE_USABLE = 0, TAKEN = 1, UNUSABLE = 2 };

struct model {
    unsigned char state[UNITS];
    unsigned alloc_start[UNITS]; /* allocations: start unit -> length, 0 if none */
    unsigned alloc_len[UNITS];
    size_t nr_allocs;
};

static uint64_t rng_state;

static uint64_t rng(void)
{
    /* xorshift64*: fixed seed, same sequence on every run. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

static unsigned rnd(unsigned n)
{
    return (unsigned)(rng() % n);
}

static npv_iova_t unit_iova(unsigned u)
{
    return BASE + (npv_iova_t)u * PG;
}

/* The allocator's expected choice: smallest run (then lowest) that fits after alignment. */
static int model_best_fit(const struct model *m, unsigned len, unsigned align, unsigned *start)
{
    unsigned best_run = 0;
    int found = 0;
    for (unsigned i = 0; i < UNITS;) {
        if (m->state[i] != FREE_USABLE) {
            i++;
            continue;
        }
        unsigned j = i;
        while (j < UNITS && m->state[j] == FREE_USABLE)
            j++;
        unsigned run = j - i;
        unsigned s = (i + align - 1) / align * align;
        if (s + len <= j && (!found || run < best_run)) {
            found = 1;
            best_run = run;
            *start = s;
        }
        i = j;
    }
    return found;
}

static void model_take(struct model *m, unsigned s, unsigned len)
{
    for (unsigned i = s; i < s + len; i++)
        m->state[i] = TAKEN;
    m->alloc_start[m->nr_allocs] = s;
    m->alloc_len[m->nr_allocs] = len;
    m->nr_allocs++;
}

/* The allocator's holes must be exactly the model's maximal free runs: coalescing is complete. */
static void check_holes(const struct model *m)
{
    static struct npv_iova_range holes[UNITS];
    size_t nh = npv_iova_holes(&sp, holes, UNITS);
    ck_assert_uint_eq(nh, hole_count());
    size_t runs = 0;
    for (unsigned i = 0; i < UNITS;) {
        if (m->state[i] != FREE_USABLE) {
            i++;
            continue;
        }
        unsigned j = i;
        while (j < UNITS && m->state[j] == FREE_USABLE)
            j++;
        ck_assert_msg(runs < nh, "model has more free runs than the allocator has holes");
        ck_assert_msg(holes[runs].start == unit_iova(i) && holes[runs].last == unit_iova(j) - 1,
                      "hole %zu: [0x%" PRIx64 ", 0x%" PRIx64 "], model [0x%" PRIx64 ", 0x%" PRIx64
                      "]",
                      runs, holes[runs].start, holes[runs].last, unit_iova(i), unit_iova(j) - 1);
        runs++;
        i = j;
    }
    ck_assert_uint_eq(nh, runs);
}

static void apply_ranges(struct model *m, const struct npv_iova_range *r, size_t n)
{
    for (unsigned u = 0; u < UNITS; u++) {
        int in = 0;
        for (size_t k = 0; k < n; k++)
            if (unit_iova(u) >= r[k].start && unit_iova(u) + PG - 1 <= r[k].last)
                in = 1;
        if (m->state[u] != TAKEN)
            m->state[u] = in ? FREE_USABLE : UNUSABLE;
    }
}

static int model_fits(const struct model *m, const struct npv_iova_range *r, size_t n)
{
    for (unsigned u = 0; u < UNITS; u++) {
        if (m->state[u] != TAKEN)
            continue;
        int in = 0;
        for (size_t k = 0; k < n; k++)
            if (unit_iova(u) >= r[k].start && unit_iova(u) + PG - 1 <= r[k].last)
                in = 1;
        if (!in)
            return 0;
    }
    return 1;
}

START_TEST(iova_random_sequence_matches_reference_model)
{
    static struct model m;
    const uint64_t seed = 0x6e7075766669ull;
    rng_state = seed;
    printf("iova_random_sequence_matches_reference_model: seed 0x%" PRIx64 ", %d ops\n", seed,
           NR_OPS);
    fflush(stdout);
    memset(&m, 0, sizeof(m));
    set_one_range(unit_iova(0), unit_iova(UNITS) - 1);
    static const unsigned aligns[] = {1, 1, 2, 4, 16};
    unsigned counts[4] = {0};
    for (int op = 0; op < NR_OPS; op++) {
        unsigned kind = rnd(100);
        if (kind < 45) {
            unsigned len = rnd(4) == 0 ? 1 + rnd(128) : 1 + rnd(8);
            unsigned align = aligns[rnd(5)];
            unsigned want = 0;
            npv_iova_t got;
            int fits = model_best_fit(&m, len, align, &want);
            int ret = npv_iova_alloc(&sp, len * PG, align * PG, &got);
            if (!fits) {
                ck_assert_msg(ret == -ENOSPC, "op %d: alloc %u/%u: %d, model has no room", op, len,
                              align, ret);
                continue;
            }
            ck_assert_msg(ret == 0, "op %d: alloc %u/%u failed %d", op, len, align, ret);
            ck_assert_msg(got == unit_iova(want), "op %d: got 0x%" PRIx64 " want 0x%" PRIx64, op,
                          got, unit_iova(want));
            model_take(&m, want, len);
            counts[0]++;
        } else if (kind < 55) {
            unsigned s = rnd(UNITS + 16);
            unsigned len = 1 + rnd(16);
            int expect = 0;
            for (unsigned u = s; u < s + len && expect != -EBUSY; u++)
                if (u >= UNITS || m.state[u] == UNUSABLE)
                    expect = -ERANGE;
                else if (m.state[u] == TAKEN)
                    expect = -EBUSY;
            int ret = npv_iova_alloc_at(&sp, unit_iova(s), len * PG);
            ck_assert_msg(ret == expect, "op %d: alloc_at %u+%u: %d want %d", op, s, len, ret,
                          expect);
            if (ret == 0)
                model_take(&m, s, len);
            counts[1]++;
        } else if (kind < 95) {
            if (m.nr_allocs == 0)
                continue;
            size_t k = rnd((unsigned)m.nr_allocs);
            unsigned s = m.alloc_start[k], len = m.alloc_len[k];
            if (len > 1 && rnd(10) == 0)
                ck_assert_int_eq(npv_iova_free(&sp, unit_iova(s + 1)), -ENOENT);
            ck_assert_int_eq(npv_iova_free(&sp, unit_iova(s)), 0);
            for (unsigned u = s; u < s + len; u++)
                m.state[u] = FREE_USABLE;
            m.nr_allocs--;
            m.alloc_start[k] = m.alloc_start[m.nr_allocs];
            m.alloc_len[k] = m.alloc_len[m.nr_allocs];
            counts[2]++;
        } else {
            struct npv_iova_range r[3];
            size_t n = 1 + rnd(3);
            for (size_t i = 0; i < n; i++) {
                unsigned a = rnd(UNITS), b = rnd(UNITS);
                if (a > b) {
                    unsigned t = a;
                    a = b;
                    b = t;
                }
                r[i] = (struct npv_iova_range){unit_iova(a), unit_iova(b + 1) - 1};
            }
            /* Mostly the whole space again, so allocations do not starve. */
            if (rnd(2) == 0) {
                n = 1;
                r[0] = (struct npv_iova_range){unit_iova(0), unit_iova(UNITS) - 1};
            }
            int fits = model_fits(&m, r, n);
            int ret = npv_iova_space_set_ranges(&sp, r, n);
            ck_assert_msg(ret == (fits ? 0 : -ERANGE), "op %d: set_ranges %d fits %d", op, ret,
                          fits);
            if (ret == 0)
                apply_ranges(&m, r, n);
            counts[3]++;
        }
        ck_assert_uint_eq(npv_iova_count(&sp), m.nr_allocs);
        check_holes(&m);
    }
    printf("  allocs %u, fixed %u, frees %u, range changes %u\n", counts[0], counts[1], counts[2],
           counts[3]);
}
END_TEST

static Suite *iova_suite(void)
{
    Suite *s = suite_create("iova");
    TCase *tc = tcase_create("allocator");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, iova_empty_space_has_no_room);
    tcase_add_test(tc, iova_alloc_rejects_bad_arguments);
    tcase_add_test(tc, iova_alloc_aligns_start_to_requested_alignment);
    tcase_add_test(tc, iova_alloc_best_fit_picks_smallest_hole);
    tcase_add_test(tc, iova_best_fit_skips_hole_too_small_after_alignment);
    tcase_add_test(tc, iova_free_coalesces_with_both_neighbours);
    tcase_add_test(tc, iova_exhaustion_returns_enospc_and_free_gives_room);
    tcase_add_test(tc, iova_alloc_at_reports_busy_and_out_of_range);
    tcase_add_test(tc, iova_allocates_only_inside_disjoint_ranges);
    tcase_add_test(tc, iova_narrowing_that_strands_an_allocation_fails_and_changes_nothing);
    tcase_add_test(tc, iova_handles_the_full_64_bit_space);
    suite_add_tcase(s, tc);
    TCase *tm = tcase_create("model");
    /* Generous: the machine is shared and ASan slows the model tenfold. */
    tcase_set_timeout(tm, 300);
    tcase_add_checked_fixture(tm, setup, teardown);
    tcase_add_test(tm, iova_random_sequence_matches_reference_model);
    suite_add_tcase(s, tm);
    TCase *tr = tcase_create("ranges");
    tcase_add_test(tr, ranges_normalize_sorts_merges_and_drops_empty);
    tcase_add_test(tr, ranges_intersect_keeps_common_parts);
    tcase_add_test(tr, ranges_subtract_cuts_holes);
    suite_add_tcase(s, tr);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(iova_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

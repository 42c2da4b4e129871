/* SPDX-License-Identifier: MIT */
/* npv_domain with recording fake IOMMU sinks (lib/domain.c). */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include <npuvfio/dma.h>
#include <npuvfio/domain.h>

#include "ctx_internal.h"
#include "dma_test_util.h"
#include "domain_internal.h"
#include "fake_sink.h"

#define PG 4096ull

static struct npv_ctx *ctx;
static struct npv_domain *dom;

static void quiet_log(void *user, enum npv_log_level level, const char *msg)
{
    (void)user;
    (void)level;
    (void)msg;
}

static void setup(void)
{
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    npv_ctx_set_log_sink(ctx, quiet_log, NULL);
    ck_assert_int_eq(npv_domain_new(ctx, NULL, &dom), 0);
}

static void teardown(void)
{
    npv_domain_put(dom);
    npv_ctx_free(ctx);
}

/* A host range that only exists as a number: the domain never touches the memory. */
static struct npv_mapping mapping(uintptr_t va, uint64_t len)
{
    return (struct npv_mapping){
        .vaddr = (void *)va, .len = len, .fd = -1, .fd_offset = 0, .prot = NPV_DMA_RW};
}

START_TEST(domain_put_null_is_noop)
{
    npv_domain_put(NULL);
    ck_assert_ptr_null(npv_domain_get(NULL));
}
END_TEST

START_TEST(domain_get_keeps_it_alive_until_the_last_put)
{
    struct npv_domain *d2 = npv_domain_get(dom);
    ck_assert_ptr_eq(d2, dom);
    npv_domain_put(d2);
    /* Still ours: map and count (ASan catches a use after free). */
    struct npv_mapping m = mapping(0x10000000, PG);
    ck_assert_int_eq(npv_domain_map(dom, &m, PG), 0);
    ck_assert_uint_eq(npv_domain_mapping_count(dom), 1);
    ck_assert_int_eq(npv_domain_unmap(dom, m.iova), 0);
}
END_TEST

START_TEST(domain_new_rejects_inverted_aperture)
{
    struct npv_domain *d = NULL;
    struct npv_domain_opts o = {.aperture_start = 0x2000, .aperture_last = 0x1000};
    ck_assert_int_eq(npv_domain_new(ctx, &o, &d), -EINVAL);
    ck_assert_ptr_null(d);
}
END_TEST

START_TEST(domain_allocates_inside_a_32_bit_aperture_until_full)
{
    struct npv_domain *d;
    struct npv_domain_opts o = {.aperture_start = 0, .aperture_last = 0xffffffff};
    ck_assert_int_eq(npv_domain_new(ctx, &o, &d), 0);
    struct npv_mapping a = mapping(0x100000000, 1ull << 31);
    /* The first page is never allocated, so this fills the rest exactly. */
    struct npv_mapping b = mapping(0x200000000, (1ull << 31) - NPV_DOMAIN_IOVA_ZERO_GUARD);
    struct npv_mapping c = mapping(0x300000000, PG);
    ck_assert_int_eq(npv_domain_map(d, &a, PG), 0);
    ck_assert_int_eq(npv_domain_map(d, &b, PG), 0);
    ck_assert_uint_le(a.iova + a.len - 1, 0xffffffff);
    ck_assert_uint_le(b.iova + b.len - 1, 0xffffffff);
    ck_assert_int_eq(npv_domain_map(d, &c, PG), -ENOSPC);
    ck_assert_uint_eq(npv_domain_mapping_count(d), 2);
    ck_assert_int_eq(npv_domain_unmap(d, a.iova), 0);
    ck_assert_int_eq(npv_domain_unmap(d, b.iova), 0);
    npv_domain_put(d);
}
END_TEST

START_TEST(domain_never_allocates_iova_zero)
{
    struct npv_domain *d;
    /* Four pages from 0: the first is the guard, three are usable. */
    struct npv_domain_opts o = {.aperture_start = 0, .aperture_last = 4 * PG - 1};
    ck_assert_int_eq(npv_domain_new(ctx, &o, &d), 0);
    struct npv_iova_range r[2];
    ck_assert_int_eq(npv_domain_iova_ranges(d, r, 2), 1);
    ck_assert_uint_eq(r[0].start, NPV_DOMAIN_IOVA_ZERO_GUARD);
    ck_assert_uint_eq(r[0].last, 4 * PG - 1);
    struct npv_mapping at0 = mapping(0x20000000, PG);
    at0.iova = 0;
    ck_assert_int_eq(npv_domain_map_at(d, &at0), -ERANGE);
    struct npv_mapping m[4];
    for (int i = 0; i < 3; i++) {
        m[i] = mapping(0x10000000 + (uintptr_t)i * PG, PG);
        ck_assert_int_eq(npv_domain_map(d, &m[i], PG), 0);
        ck_assert_uint_ge(m[i].iova, NPV_DOMAIN_IOVA_ZERO_GUARD);
    }
    m[3] = mapping(0x10000000 + 3 * PG, PG);
    ck_assert_int_eq(npv_domain_map(d, &m[3], PG), -ENOSPC);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(npv_domain_unmap(d, m[i].iova), 0);
    npv_domain_put(d);

    /* The whole 64-bit space too, and an aperture that is nothing but the guard is refused. */
    struct npv_mapping any = mapping(0x10000000, PG);
    ck_assert_int_eq(npv_domain_map(dom, &any, 1), 0);
    ck_assert_uint_ne(any.iova, 0);
    ck_assert_int_eq(npv_domain_unmap(dom, any.iova), 0);
    struct npv_domain_opts tiny = {.aperture_start = 0, .aperture_last = PG - 1};
    d = NULL;
    ck_assert_int_eq(npv_domain_new(ctx, &tiny, &d), -EINVAL);
    ck_assert_ptr_null(d);
}
END_TEST

/* domain.h: an aperture may start at 0; the usable space then starts after the guard page. */
START_TEST(domain_aperture_may_start_at_zero)
{
    struct npv_domain *d;
    struct npv_iova_range r[2];
    struct npv_domain_opts o = {.aperture_start = 0, .aperture_last = 0xffff};
    ck_assert_int_eq(npv_domain_new(ctx, &o, &d), 0);
    ck_assert_int_eq(npv_domain_iova_ranges(d, r, 2), 1);
    ck_assert_uint_eq(r[0].start, NPV_DOMAIN_IOVA_ZERO_GUARD);
    ck_assert_uint_eq(r[0].last, 0xffff);
    struct npv_mapping at0 = mapping(0x20000000, PG);
    at0.iova = 0;
    ck_assert_int_eq(npv_domain_map_at(d, &at0), -ERANGE);
    struct npv_mapping first = mapping(0x20000000, PG);
    first.iova = NPV_DOMAIN_IOVA_ZERO_GUARD;
    ck_assert_int_eq(npv_domain_map_at(d, &first), 0);
    ck_assert_int_eq(npv_domain_unmap(d, first.iova), 0);
    npv_domain_put(d);

    /* Starting inside the guard page: the usable space still starts after it. */
    o = (struct npv_domain_opts){.aperture_start = 0x800, .aperture_last = 0x1fff};
    ck_assert_int_eq(npv_domain_new(ctx, &o, &d), 0);
    ck_assert_int_eq(npv_domain_iova_ranges(d, r, 2), 1);
    ck_assert_uint_eq(r[0].start, NPV_DOMAIN_IOVA_ZERO_GUARD);
    ck_assert_uint_eq(r[0].last, 0x1fff);
    npv_domain_put(d);

    /* From 0 with aperture_last 0: the whole 64-bit space but the guard. */
    o = (struct npv_domain_opts){.aperture_start = 0, .aperture_last = 0};
    ck_assert_int_eq(npv_domain_new(ctx, &o, &d), 0);
    ck_assert_int_eq(npv_domain_iova_ranges(d, r, 2), 1);
    ck_assert_uint_eq(r[0].start, NPV_DOMAIN_IOVA_ZERO_GUARD);
    ck_assert_uint_eq(r[0].last, UINT64_MAX);
    npv_domain_put(d);
}
END_TEST

START_TEST(domain_map_pushes_to_every_sink)
{
    struct fake_sink f1, f2;
    fake_sink_init(&f1, 1);
    fake_sink_init(&f2, 1);
    ck_assert_int_eq(npv_domain_add_sink(dom, &f1.sink), 0);
    ck_assert_int_eq(npv_domain_add_sink(dom, &f2.sink), 0);
    struct npv_mapping m = mapping(0x10000000, 4 * PG);
    m.fd = 7;
    m.fd_offset = 0x3000;
    m.prot = NPV_DMA_READ;
    ck_assert_int_eq(npv_domain_map(dom, &m, PG), 0);
    const struct npv_mapping *in1 = fake_sink_find(&f1, m.iova);
    const struct npv_mapping *in2 = fake_sink_find(&f2, m.iova);
    ck_assert_ptr_nonnull(in1);
    ck_assert_ptr_nonnull(in2);
    ck_assert_uint_eq(in1->len, 4 * PG);
    ck_assert_int_eq(in1->fd, 7);
    ck_assert_uint_eq(in1->fd_offset, 0x3000);
    ck_assert_uint_eq(in1->prot, NPV_DMA_READ);
    ck_assert_ptr_eq(in2->vaddr, (void *)0x10000000);
    ck_assert_int_eq(npv_domain_unmap(dom, m.iova), 0);
    ck_assert_uint_eq(f1.nr_live, 0);
    ck_assert_uint_eq(f2.nr_live, 0);
    npv_domain_remove_sink(dom, &f1.sink, true);
    npv_domain_remove_sink(dom, &f2.sink, true);
}
END_TEST

START_TEST(domain_add_sink_replays_the_journal)
{
    struct npv_mapping m[3];
    for (int i = 0; i < 3; i++) {
        m[i] = mapping(0x10000000 + (uintptr_t)i * 0x100000, (uint64_t)(i + 1) * PG);
        ck_assert_int_eq(npv_domain_map(dom, &m[i], PG), 0);
    }
    struct fake_sink f;
    fake_sink_init(&f, 1);
    ck_assert_int_eq(npv_domain_add_sink(dom, &f.sink), 0);
    ck_assert_uint_eq(f.nr_live, 3);
    for (int i = 0; i < 3; i++) {
        const struct npv_mapping *got = fake_sink_find(&f, m[i].iova);
        ck_assert_ptr_nonnull(got);
        ck_assert_ptr_eq(got->vaddr, m[i].vaddr);
        ck_assert_uint_eq(got->len, m[i].len);
    }
    ck_assert_int_eq(npv_domain_add_sink(dom, &f.sink), -EEXIST);
    npv_domain_remove_sink(dom, &f.sink, true);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(npv_domain_unmap(dom, m[i].iova), 0);
}
END_TEST

/*
 * Leaving a domain is all or nothing: an unmap failing midway maps back what
 * was unmapped and keeps the sink in the domain, whole (a sink left holding
 * part of it refused every later replay over those IOVAs with -EEXIST: the
 * vfio-user domain-switch wedge of issue 22).
 */
START_TEST(domain_leave_sink_is_all_or_nothing)
{
    struct npv_mapping m[3];
    for (int i = 0; i < 3; i++) {
        m[i] = mapping(0x10000000 + (uintptr_t)i * 0x100000, (uint64_t)(i + 1) * PG);
        ck_assert_int_eq(npv_domain_map(dom, &m[i], PG), 0);
    }
    struct fake_sink f;
    fake_sink_init(&f, 1);
    ck_assert_int_eq(npv_domain_add_sink(dom, &f.sink), 0);
    f.fail_unmap_at = 2; /* the second unmap fails */
    ck_assert_int_eq(npv_domain_leave_sink(dom, &f.sink), -EIO);
    ck_assert_uint_eq(f.nr_live, 3);                              /* whole again */
    ck_assert_int_eq(npv_domain_add_sink(dom, &f.sink), -EEXIST); /* still in */
    f.fail_unmap_at = 0;
    ck_assert_int_eq(npv_domain_leave_sink(dom, &f.sink), 0);
    ck_assert_uint_eq(f.nr_live, 0);
    ck_assert_int_eq(npv_domain_leave_sink(dom, &f.sink), 0); /* not in: nothing to do */
    /* It can join again, and the replay finds nothing in its way. */
    ck_assert_int_eq(npv_domain_add_sink(dom, &f.sink), 0);
    ck_assert_uint_eq(f.nr_live, 3);
    npv_domain_remove_sink(dom, &f.sink, true);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(npv_domain_unmap(dom, m[i].iova), 0);
}
END_TEST

START_TEST(domain_remove_sink_unmaps_the_journal_from_it)
{
    struct fake_sink f, keep;
    fake_sink_init(&f, 1);
    fake_sink_init(&keep, 1);
    ck_assert_int_eq(npv_domain_add_sink(dom, &f.sink), 0);
    ck_assert_int_eq(npv_domain_add_sink(dom, &keep.sink), 0);
    struct npv_mapping a = mapping(0x10000000, PG), b = mapping(0x20000000, 2 * PG);
    ck_assert_int_eq(npv_domain_map(dom, &a, PG), 0);
    ck_assert_int_eq(npv_domain_map(dom, &b, PG), 0);
    npv_domain_remove_sink(dom, &f.sink, true);
    ck_assert_uint_eq(f.nr_live, 0);
    ck_assert_uint_eq(keep.nr_live, 2);
    ck_assert_uint_eq(npv_domain_mapping_count(dom), 2);
    /* Later mappings no longer reach the removed sink. */
    struct npv_mapping c = mapping(0x30000000, PG);
    ck_assert_int_eq(npv_domain_map(dom, &c, PG), 0);
    ck_assert_uint_eq(f.map_calls, 2);
    /* Without unmap the sink keeps what it had. */
    npv_domain_remove_sink(dom, &keep.sink, false);
    ck_assert_uint_eq(keep.nr_live, 3);
    npv_domain_remove_sink(dom, &keep.sink, true); /* not attached: no-op */
    ck_assert_uint_eq(keep.nr_live, 3);
    ck_assert_int_eq(npv_domain_unmap(dom, a.iova), 0);
    ck_assert_int_eq(npv_domain_unmap(dom, b.iova), 0);
    ck_assert_int_eq(npv_domain_unmap(dom, c.iova), 0);
}
END_TEST

START_TEST(domain_sink_failing_midway_leaves_nothing_mapped)
{
    struct fake_sink ok, bad;
    fake_sink_init(&ok, 1);
    fake_sink_init(&bad, 1);
    ck_assert_int_eq(npv_domain_add_sink(dom, &bad.sink), 0);
    ck_assert_int_eq(npv_domain_add_sink(dom, &ok.sink), 0);
    struct npv_mapping first = mapping(0x10000000, PG);
    ck_assert_int_eq(npv_domain_map(dom, &first, PG), 0);
    /* The second map call on `bad` fails; `ok` (pushed to first) must be undone. */
    bad.fail_map_at = 2;
    bad.fail_err = -EFAULT;
    struct npv_mapping m = mapping(0x20000000, 8 * PG);
    ck_assert_int_eq(npv_domain_map(dom, &m, PG), -EFAULT);
    ck_assert_uint_eq(ok.nr_live, 1);
    ck_assert_uint_eq(bad.nr_live, 1);
    ck_assert_uint_eq(npv_domain_mapping_count(dom), 1);
    npv_iova_t none;
    ck_assert_int_eq(npv_domain_vaddr_to_iova(dom, (void *)0x20000000, &none), -ENOENT);
    /* The IOVA went back: the same request now lands where the failed one would have. */
    bad.fail_map_at = 0;
    struct npv_mapping again = mapping(0x20000000, 8 * PG);
    ck_assert_int_eq(npv_domain_map(dom, &again, PG), 0);
    ck_assert_uint_eq(again.iova, m.iova);
    ck_assert_int_eq(npv_domain_unmap(dom, again.iova), 0);
    ck_assert_int_eq(npv_domain_unmap(dom, first.iova), 0);
    npv_domain_remove_sink(dom, &ok.sink, true);
    npv_domain_remove_sink(dom, &bad.sink, true);
}
END_TEST

START_TEST(domain_add_sink_failing_on_nth_replay_undoes_and_is_not_added)
{
    struct npv_mapping m[5];
    for (int i = 0; i < 5; i++) {
        m[i] = mapping(0x10000000 + (uintptr_t)i * 0x100000, PG);
        ck_assert_int_eq(npv_domain_map(dom, &m[i], PG), 0);
    }
    struct fake_sink f;
    fake_sink_init(&f, 0);
    f.fail_map_at = 4;
    ck_assert_int_eq(npv_domain_add_sink(dom, &f.sink), -EIO);
    ck_assert_uint_eq(f.nr_live, 0);
    ck_assert_uint_eq(f.unmap_calls, 3);
    ck_assert_ptr_null(npv_domain_find_sink(dom, &fake_sink_ops));
    /* Not attached: its (non-coherent) vote does not count. */
    ck_assert_int_eq(npv_domain_coherent(dom), -ENODATA);
    struct npv_mapping more = mapping(0x30000000, PG);
    ck_assert_int_eq(npv_domain_map(dom, &more, PG), 0);
    ck_assert_uint_eq(f.map_calls, 4);
    ck_assert_int_eq(npv_domain_unmap(dom, more.iova), 0);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(npv_domain_unmap(dom, m[i].iova), 0);
}
END_TEST

/* A domain with room for exactly one page above the zero guard: a reused IOVA cannot hide. */
static struct npv_domain *one_page_domain(void)
{
    struct npv_domain_opts o = {.aperture_start = 0, .aperture_last = 2 * PG - 1};
    struct npv_domain *d = NULL;
    ck_assert_int_eq(npv_domain_new(ctx, &o, &d), 0);
    return d;
}

START_TEST(domain_unmap_failing_in_a_sink_quarantines_its_iova)
{
    static struct log_capture logs;
    npv_ctx_set_log_sink(ctx, capture_log, &logs);
    struct npv_domain *d = one_page_domain();
    struct fake_sink ok, bad;
    fake_sink_init(&ok, 1);
    fake_sink_init(&bad, 1);
    ck_assert_int_eq(npv_domain_add_sink(d, &bad.sink), 0);
    ck_assert_int_eq(npv_domain_add_sink(d, &ok.sink), 0);
    struct npv_mapping m = mapping(0x10000000, PG);
    ck_assert_int_eq(npv_domain_map(d, &m, PG), 0);
    bad.fail_unmaps = true;
    /* The error is reported and logged; the other sink is unmapped; the journal forgets it. */
    ck_assert_int_eq(npv_domain_unmap(d, m.iova), -EIO);
    ck_assert_uint_eq(ok.nr_live, 0);
    ck_assert_ptr_nonnull(fake_sink_find(&bad, m.iova));
    ck_assert_uint_eq(npv_domain_mapping_count(d), 0);
    ck_assert_ptr_nonnull(strstr(logs.last_error, "quarantined"));
    uint64_t bytes = 0;
    ck_assert_uint_eq(npv_domain_quarantined(d, &bytes), 1);
    ck_assert_uint_eq(bytes, PG);
    /* `bad` may still translate the IOVA: it is handed out to no one. */
    struct npv_mapping other = mapping(0x20000000, PG);
    ck_assert_int_eq(npv_domain_map(d, &other, PG), -ENOSPC);
    other.iova = m.iova;
    ck_assert_int_eq(npv_domain_map_at(d, &other), -EBUSY);
    ck_assert_uint_eq(ok.nr_live, 0);
    /* A retry that fails again keeps it; one that succeeds releases it. */
    ck_assert_int_eq(npv_domain_unmap(d, m.iova), -EIO);
    ck_assert_uint_eq(npv_domain_quarantined(d, NULL), 1);
    unsigned ok_unmaps = ok.unmap_calls;
    bad.fail_unmaps = false;
    ck_assert_int_eq(npv_domain_unmap(d, m.iova), 0);
    ck_assert_uint_eq(ok.unmap_calls, ok_unmaps); /* only the holder is asked again */
    ck_assert_ptr_null(fake_sink_find(&bad, m.iova));
    ck_assert_uint_eq(npv_domain_quarantined(d, &bytes), 0);
    ck_assert_uint_eq(bytes, 0);
    ck_assert_int_eq(npv_domain_unmap(d, m.iova), -ENOENT);
    ck_assert_int_eq(npv_domain_map(d, &other, PG), 0);
    ck_assert_uint_eq(other.iova, m.iova);
    ck_assert_int_eq(npv_domain_unmap(d, other.iova), 0);
    npv_domain_remove_sink(d, &ok.sink, true);
    npv_domain_remove_sink(d, &bad.sink, true);
    npv_domain_put(d);
}
END_TEST

START_TEST(domain_quarantine_ends_when_the_holding_sink_leaves)
{
    struct npv_domain *d = one_page_domain();
    struct fake_sink ok, bad;
    fake_sink_init(&ok, 1);
    fake_sink_init(&bad, 1);
    ck_assert_int_eq(npv_domain_add_sink(d, &bad.sink), 0);
    ck_assert_int_eq(npv_domain_add_sink(d, &ok.sink), 0);
    struct npv_mapping m = mapping(0x10000000, PG);
    ck_assert_int_eq(npv_domain_map(d, &m, PG), 0);
    bad.fail_unmaps = true;
    ck_assert_int_eq(npv_domain_unmap(d, m.iova), -EIO);
    /* Another sink leaving changes nothing. */
    npv_domain_remove_sink(d, &ok.sink, true);
    ck_assert_uint_eq(npv_domain_quarantined(d, NULL), 1);
    /* The holder leaving (its device closed or moved): it translates nothing here now. */
    npv_domain_remove_sink(d, &bad.sink, false);
    ck_assert_uint_eq(npv_domain_quarantined(d, NULL), 0);
    struct npv_mapping again = mapping(0x20000000, PG);
    ck_assert_int_eq(npv_domain_map(d, &again, PG), 0);
    ck_assert_uint_eq(again.iova, m.iova);
    ck_assert_int_eq(npv_domain_unmap(d, again.iova), 0);
    npv_domain_put(d);
}
END_TEST

START_TEST(domain_map_rollback_reports_a_failing_unmap_and_quarantines)
{
    static struct log_capture logs;
    npv_ctx_set_log_sink(ctx, capture_log, &logs);
    struct npv_domain *d = one_page_domain();
    struct fake_sink took, refuses;
    fake_sink_init(&took, 1);
    fake_sink_init(&refuses, 1);
    /* Pushed newest first: `took` maps, `refuses` fails, `took` must undo and cannot. */
    ck_assert_int_eq(npv_domain_add_sink(d, &refuses.sink), 0);
    ck_assert_int_eq(npv_domain_add_sink(d, &took.sink), 0);
    refuses.fail_map_at = 1;
    refuses.fail_err = -EFAULT;
    took.fail_unmaps = true;
    struct npv_mapping m = mapping(0x10000000, PG);
    ck_assert_int_eq(npv_domain_map(d, &m, PG), -EFAULT);
    ck_assert_uint_eq(took.unmap_calls, 1);
    ck_assert_ptr_nonnull(fake_sink_find(&took, m.iova));
    ck_assert_uint_eq(npv_domain_mapping_count(d), 0);
    /* The undo's failure is logged, not swallowed, and its IOVA is not handed out. */
    ck_assert_ptr_nonnull(strstr(logs.last_error, "undoing"));
    ck_assert_ptr_nonnull(strstr(logs.last_error, "quarantined"));
    ck_assert_uint_eq(npv_domain_quarantined(d, NULL), 1);
    struct npv_mapping next = mapping(0x20000000, PG);
    ck_assert_int_eq(npv_domain_map(d, &next, PG), -ENOSPC);
    /* A retried unmap releases it. */
    took.fail_unmaps = false;
    ck_assert_int_eq(npv_domain_unmap(d, m.iova), 0);
    ck_assert_uint_eq(npv_domain_quarantined(d, NULL), 0);
    ck_assert_int_eq(npv_domain_map(d, &next, PG), 0);
    ck_assert_int_eq(npv_domain_unmap(d, next.iova), 0);
    npv_domain_remove_sink(d, &took.sink, true);
    npv_domain_remove_sink(d, &refuses.sink, true);
    npv_domain_put(d);
}
END_TEST

START_TEST(domain_unmap_with_a_sink_saying_enoent_quarantines_nothing)
{
    struct fake_sink f;
    fake_sink_init(&f, 1);
    ck_assert_int_eq(npv_domain_add_sink(dom, &f.sink), 0);
    struct npv_mapping m = mapping(0x10000000, PG);
    ck_assert_int_eq(npv_domain_map(dom, &m, PG), 0);
    /* The IOMMU lost it already: disagreement is reported, but nothing translates the IOVA. */
    f.nr_live = 0;
    ck_assert_int_eq(npv_domain_unmap(dom, m.iova), -ENOENT);
    ck_assert_uint_eq(npv_domain_quarantined(dom, NULL), 0);
    npv_domain_remove_sink(dom, &f.sink, true);
}
END_TEST

START_TEST(domain_refuses_memory_without_fd_where_a_sink_needs_one)
{
    static struct log_capture logs;
    npv_ctx_set_log_sink(ctx, capture_log, &logs);
    struct fake_sink kernel, server;
    fake_sink_init(&kernel, 1);
    fake_sink_init(&server, -1);
    server.sink.ops = &fake_sink_ops_other;
    server.sink.shares_by_fd = true;
    ck_assert_int_eq(npv_domain_add_sink(dom, &kernel.sink), 0);
    struct npv_mapping anon = mapping(0x10000000, PG); /* fd -1 */
    ck_assert_int_eq(npv_domain_map(dom, &anon, PG), 0);
    /* A server cannot join while the domain maps memory it could not reach. */
    ck_assert_int_eq(npv_domain_add_sink(dom, &server.sink), -NPV_ENOTSHARED);
    ck_assert_ptr_nonnull(strstr(logs.last_error, "anonymous"));
    ck_assert_uint_eq(server.map_calls, 0);
    ck_assert_int_eq(npv_domain_unmap(dom, anon.iova), 0);
    ck_assert_int_eq(npv_domain_add_sink(dom, &server.sink), 0);
    /* And with it joined, such a map is refused before any sink sees it. */
    logs.last_error[0] = '\0';
    ck_assert_int_eq(npv_domain_map(dom, &anon, PG), -NPV_ENOTSHARED);
    ck_assert_ptr_nonnull(strstr(logs.last_error, "anonymous"));
    ck_assert_uint_eq(kernel.nr_live, 0);
    ck_assert_uint_eq(npv_domain_mapping_count(dom), 0);
    struct npv_mapping shared = mapping(0x20000000, PG);
    shared.fd = 0; /* any descriptor: the fakes never read it */
    ck_assert_int_eq(npv_domain_map(dom, &shared, PG), 0);
    ck_assert_uint_eq(server.nr_live, 1);
    ck_assert_int_eq(npv_domain_unmap(dom, shared.iova), 0);
    npv_domain_remove_sink(dom, &server.sink, true);
    npv_domain_remove_sink(dom, &kernel.sink, true);
}
END_TEST

START_TEST(domain_translates_both_ways)
{
    struct npv_mapping a = mapping(0x7f0000000000, 16 * PG);
    struct npv_mapping b = mapping(0x7f0000100000, PG);
    ck_assert_int_eq(npv_domain_map(dom, &a, PG), 0);
    ck_assert_int_eq(npv_domain_map(dom, &b, PG), 0);
    void *va = NULL;
    npv_iova_t iova = 0;
    ck_assert_int_eq(npv_domain_iova_to_vaddr(dom, a.iova, &va), 0);
    ck_assert_ptr_eq(va, (void *)0x7f0000000000);
    ck_assert_int_eq(npv_domain_iova_to_vaddr(dom, a.iova + 16 * PG - 1, &va), 0);
    ck_assert_ptr_eq(va, (void *)(0x7f0000000000 + 16 * PG - 1));
    ck_assert_int_eq(npv_domain_iova_to_vaddr(dom, b.iova + 123, &va), 0);
    ck_assert_ptr_eq(va, (void *)(0x7f0000100000 + 123));
    ck_assert_int_eq(npv_domain_vaddr_to_iova(dom, (void *)(0x7f0000000000 + 5 * PG + 7), &iova),
                     0);
    ck_assert_uint_eq(iova, a.iova + 5 * PG + 7);
    ck_assert_int_eq(npv_domain_vaddr_to_iova(dom, (void *)0x7f0000100fff, &iova), 0);
    ck_assert_uint_eq(iova, b.iova + 0xfff);
    /* Just outside each mapping. */
    ck_assert_int_eq(npv_domain_vaddr_to_iova(dom, (void *)(0x7f0000000000 + 16 * PG), &iova),
                     -ENOENT);
    ck_assert_int_eq(npv_domain_vaddr_to_iova(dom, (void *)0x7f0000101000, &iova), -ENOENT);
    ck_assert_int_eq(npv_domain_vaddr_to_iova(dom, (void *)0x7effffffffff, &iova), -ENOENT);
    npv_iova_t hole = b.iova + PG;
    if (hole != a.iova)
        ck_assert_int_eq(npv_domain_iova_to_vaddr(dom, hole, &va), -ENOENT);
    ck_assert_int_eq(npv_domain_unmap(dom, a.iova), 0);
    ck_assert_int_eq(npv_domain_iova_to_vaddr(dom, a.iova, &va), -ENOENT);
    ck_assert_int_eq(npv_domain_unmap(dom, a.iova), -ENOENT);
    ck_assert_int_eq(npv_domain_unmap(dom, b.iova + PG / 2), -ENOENT);
    ck_assert_int_eq(npv_domain_unmap(dom, b.iova), 0);
}
END_TEST

START_TEST(domain_refuses_overlapping_host_ranges)
{
    struct npv_mapping a = mapping(0x10000000, 4 * PG);
    ck_assert_int_eq(npv_domain_map(dom, &a, PG), 0);
    struct npv_mapping inside = mapping(0x10001000, PG);
    struct npv_mapping over_start = mapping(0x0ffff000, 2 * PG);
    struct npv_mapping around = mapping(0x0ffff000, 8 * PG);
    ck_assert_int_eq(npv_domain_map(dom, &inside, PG), -EEXIST);
    ck_assert_int_eq(npv_domain_map(dom, &over_start, PG), -EEXIST);
    ck_assert_int_eq(npv_domain_map(dom, &around, PG), -EEXIST);
    struct npv_mapping after = mapping(0x10004000, PG);
    ck_assert_int_eq(npv_domain_map(dom, &after, PG), 0);
    ck_assert_int_eq(npv_domain_unmap(dom, after.iova), 0);
    ck_assert_int_eq(npv_domain_unmap(dom, a.iova), 0);
}
END_TEST

START_TEST(domain_map_at_checks_overlap_and_range)
{
    struct npv_domain *d;
    struct npv_domain_opts o = {.aperture_start = 0x100000, .aperture_last = 0x1fffff};
    ck_assert_int_eq(npv_domain_new(ctx, &o, &d), 0);
    struct npv_mapping a = mapping(0x10000000, 2 * PG);
    a.iova = 0x180000;
    ck_assert_int_eq(npv_domain_map_at(d, &a), 0);
    struct npv_mapping b = mapping(0x20000000, PG);
    b.iova = 0x181000;
    ck_assert_int_eq(npv_domain_map_at(d, &b), -EBUSY);
    b.iova = 0x200000;
    ck_assert_int_eq(npv_domain_map_at(d, &b), -ERANGE);
    b.iova = 0xff000;
    ck_assert_int_eq(npv_domain_map_at(d, &b), -ERANGE);
    ck_assert_int_eq(npv_domain_unmap(d, 0x180000), 0);
    npv_domain_put(d);
}
END_TEST

START_TEST(domain_sink_ranges_narrow_the_usable_space)
{
    struct npv_domain *d;
    struct npv_domain_opts o = {.aperture_start = 0, .aperture_last = 0xffffffff};
    ck_assert_int_eq(npv_domain_new(ctx, &o, &d), 0);
    struct npv_iova_range r[8];
    ck_assert_int_eq(npv_domain_iova_ranges(d, r, 8), 1);
    /* x86 type1: all but the MSI window. */
    static const struct npv_iova_range type1[] = {{0, 0xfedfffff}, {0xfef00000, UINT64_MAX}};
    struct fake_sink f;
    fake_sink_init(&f, 1);
    ck_assert_int_eq(npv_domain_set_sink_ranges(NULL, &f.sink, type1, 2), 0);
    ck_assert_int_eq(npv_domain_add_sink(d, &f.sink), 0);
    ck_assert_int_eq(npv_domain_iova_ranges(d, r, 8), 2);
    ck_assert_uint_eq(r[0].start, NPV_DOMAIN_IOVA_ZERO_GUARD);
    ck_assert_uint_eq(r[0].last, 0xfedfffff);
    ck_assert_uint_eq(r[1].start, 0xfef00000);
    ck_assert_uint_eq(r[1].last, 0xffffffff);
    ck_assert_int_eq(npv_domain_iova_ranges(d, r, 1), 2);
    ck_assert_int_eq(npv_domain_iova_ranges(d, NULL, 0), 2);
    struct npv_mapping m = mapping(0x10000000, PG);
    m.iova = 0xfee00000;
    ck_assert_int_eq(npv_domain_map_at(d, &m), -ERANGE);
    npv_domain_remove_sink(d, &f.sink, true);
    ck_assert_int_eq(npv_domain_iova_ranges(d, r, 8), 1);
    ck_assert_int_eq(npv_domain_map_at(d, &m), 0);
    /* Now a sink whose ranges would strand that mapping cannot join. */
    ck_assert_int_eq(npv_domain_add_sink(d, &f.sink), -ERANGE);
    ck_assert_uint_eq(f.nr_live, 0);
    ck_assert_ptr_null(npv_domain_find_sink(d, &fake_sink_ops));
    ck_assert_int_eq(npv_domain_unmap(d, m.iova), 0);
    npv_iommu_sink_fini(&f.sink);
    npv_domain_put(d);
}
END_TEST

START_TEST(domain_sink_range_change_that_strands_a_mapping_fails_and_changes_nothing)
{
    static const struct npv_iova_range all[] = {{0, UINT64_MAX}};
    /* The IOMMU now reports a 32-bit window (as after attaching a second device). */
    static const struct npv_iova_range low[] = {{0, 0xffffffff}};
    struct fake_sink f;
    fake_sink_init(&f, 1);
    ck_assert_int_eq(npv_domain_set_sink_ranges(NULL, &f.sink, all, 1), 0);
    ck_assert_ptr_ne(f.sink.ranges, all); /* a copy, owned by the domain code */
    ck_assert_int_eq(npv_domain_add_sink(dom, &f.sink), 0);
    struct npv_mapping m = mapping(0x10000000, PG);
    m.iova = 0x100000000;
    ck_assert_int_eq(npv_domain_map_at(dom, &m), 0);
    const struct npv_iova_range *before = f.sink.ranges;
    ck_assert_int_eq(npv_domain_set_sink_ranges(dom, &f.sink, low, 1), -ERANGE);
    /* Neither the domain nor the sink changed. */
    struct npv_iova_range r[4];
    ck_assert_int_eq(npv_domain_iova_ranges(dom, r, 4), 1);
    ck_assert_uint_eq(r[0].last, UINT64_MAX);
    ck_assert_ptr_eq(f.sink.ranges, before);
    ck_assert_uint_eq(f.sink.nr_ranges, 1);
    ck_assert_uint_eq(f.sink.ranges[0].last, UINT64_MAX);
    ck_assert_int_eq(npv_domain_unmap(dom, m.iova), 0);
    ck_assert_int_eq(npv_domain_set_sink_ranges(dom, &f.sink, low, 1), 0);
    ck_assert_int_eq(npv_domain_iova_ranges(dom, r, 4), 1);
    ck_assert_uint_eq(r[0].last, 0xffffffff);
    ck_assert_uint_eq(f.sink.ranges[0].last, 0xffffffff);
    npv_domain_remove_sink(dom, &f.sink, true);
    npv_iommu_sink_fini(&f.sink);
    ck_assert_ptr_null(f.sink.ranges);
    ck_assert_uint_eq(f.sink.nr_ranges, 0);
}
END_TEST

START_TEST(domain_set_sink_ranges_with_the_same_ranges_changes_nothing)
{
    static const struct npv_iova_range type1[] = {{0, 0xfedfffff}, {0xfef00000, UINT64_MAX}};
    struct npv_iova_range again[2] = {type1[0], type1[1]};
    struct fake_sink f;
    fake_sink_init(&f, 1);
    ck_assert_int_eq(npv_domain_set_sink_ranges(NULL, &f.sink, type1, 2), 0);
    ck_assert_int_eq(npv_domain_add_sink(dom, &f.sink), 0);
    const struct npv_iova_range *before = f.sink.ranges;
    /* An IOAS re-reports its ranges on every attach: the same ones keep the same array. */
    ck_assert_int_eq(npv_domain_set_sink_ranges(dom, &f.sink, again, 2), 0);
    ck_assert_ptr_eq(f.sink.ranges, before);
    ck_assert_uint_eq(f.sink.nr_ranges, 2);
    struct npv_iova_range r[4];
    ck_assert_int_eq(npv_domain_iova_ranges(dom, r, 4), 2);
    /* Different ones still take effect. */
    again[1].last = 0xffffffff;
    ck_assert_int_eq(npv_domain_set_sink_ranges(dom, &f.sink, again, 2), 0);
    ck_assert_uint_eq(f.sink.ranges[1].last, 0xffffffff);
    ck_assert_int_eq(npv_domain_iova_ranges(dom, r, 4), 2);
    ck_assert_uint_eq(r[1].last, 0xffffffff);
    npv_domain_remove_sink(dom, &f.sink, true);
    npv_iommu_sink_fini(&f.sink);
}
END_TEST

START_TEST(domain_set_sink_ranges_refuses_a_sink_of_another_domain)
{
    static const struct npv_iova_range low[] = {{0, 0xffffffff}};
    struct fake_sink f;
    fake_sink_init(&f, 1);
    ck_assert_int_eq(npv_domain_set_sink_ranges(dom, &f.sink, low, 1), -ENOENT);
    ck_assert_ptr_null(f.sink.ranges);
    struct npv_iova_range r[4];
    ck_assert_int_eq(npv_domain_iova_ranges(dom, r, 4), 1);
    ck_assert_uint_eq(r[0].last, UINT64_MAX);
}
END_TEST

/*
 * Readers of a sink's ranges (a reserve recomputes the usable space from every
 * sink; another sink joining and leaving does too) while the sink's owner
 * swaps them, as an iommufd IOAS does when a device attaches. Under ASan a
 * read of a freed array fails the test.
 */
struct swap_stress {
    struct npv_domain *dom;
    atomic_int readers_left;
    atomic_int failures; /* counted here, asserted by the test's own thread */
};

enum { STRESS_ROUNDS = 500 };

static void *stress_reader(void *arg)
{
    struct swap_stress *st = arg;
    struct fake_sink other;
    fake_sink_init(&other, 1);
    other.sink.ops = &fake_sink_ops_other;
    for (int i = 0; i < STRESS_ROUNDS; i++) {
        struct npv_iova_range r[8];
        npv_iova_t at = 0x800000000ull + (uint64_t)i * PG;
        bool ok = npv_domain_iova_ranges(st->dom, r, 8) >= 1 &&
                  npv_domain_reserve(st->dom, at, at + PG - 1) == 0;
        if (ok && i % 16 == 0) {
            ok = npv_domain_add_sink(st->dom, &other.sink) == 0;
            npv_domain_remove_sink(st->dom, &other.sink, true);
        }
        if (!ok)
            atomic_fetch_add(&st->failures, 1);
    }
    atomic_fetch_sub(&st->readers_left, 1);
    return NULL;
}

START_TEST(domain_sink_range_swap_is_safe_against_concurrent_readers)
{
    static const struct npv_iova_range wide[] = {{0, 0xfedfffff}, {0xfef00000, UINT64_MAX}};
    static const struct npv_iova_range narrow[] = {{0, 0x7fffffffff}};
    struct fake_sink f;
    fake_sink_init(&f, 1);
    ck_assert_int_eq(npv_domain_set_sink_ranges(NULL, &f.sink, wide, 2), 0);
    ck_assert_int_eq(npv_domain_add_sink(dom, &f.sink), 0);
    struct swap_stress st = {.dom = dom};
    enum { READERS = 2 };
    atomic_init(&st.readers_left, READERS);
    atomic_init(&st.failures, 0);
    pthread_t t[READERS];
    for (int i = 0; i < READERS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, stress_reader, &st), 0);
    for (unsigned i = 0; atomic_load(&st.readers_left) > 0; i++) {
        if (i % 2 == 0)
            ck_assert_int_eq(npv_domain_set_sink_ranges(dom, &f.sink, narrow, 1), 0);
        else
            ck_assert_int_eq(npv_domain_set_sink_ranges(dom, &f.sink, wide, 2), 0);
    }
    for (int i = 0; i < READERS; i++)
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    ck_assert_int_eq(atomic_load(&st.failures), 0);
    npv_domain_remove_sink(dom, &f.sink, true);
    npv_iommu_sink_fini(&f.sink);
}
END_TEST

START_TEST(domain_reserve_keeps_range_out_and_refuses_busy)
{
    struct npv_mapping m = mapping(0x10000000, PG);
    m.iova = 0x5000;
    ck_assert_int_eq(npv_domain_map_at(dom, &m), 0);
    ck_assert_int_eq(npv_domain_reserve(dom, 0x4000, 0x5fff), -EBUSY);
    ck_assert_int_eq(npv_domain_reserve(dom, 0x2000, 0x1000), -EINVAL);
    ck_assert_int_eq(npv_domain_reserve(dom, 0, 0x4fff), 0);
    struct npv_iova_range r[4];
    ck_assert_int_eq(npv_domain_iova_ranges(dom, r, 4), 1);
    ck_assert_uint_eq(r[0].start, 0x5000);
    struct npv_mapping low = mapping(0x20000000, PG);
    low.iova = 0x1000;
    ck_assert_int_eq(npv_domain_map_at(dom, &low), -ERANGE);
    ck_assert_int_eq(npv_domain_unmap(dom, m.iova), 0);
    struct npv_mapping any = mapping(0x20000000, PG);
    ck_assert_int_eq(npv_domain_map(dom, &any, PG), 0);
    ck_assert_uint_ge(any.iova, 0x5000);
    ck_assert_int_eq(npv_domain_unmap(dom, any.iova), 0);
}
END_TEST

START_TEST(domain_coherent_is_the_and_of_kernel_sinks)
{
    struct fake_sink user, yes, no;
    fake_sink_init(&user, -1);
    fake_sink_init(&yes, 1);
    fake_sink_init(&no, 0);
    ck_assert_int_eq(npv_domain_coherent(dom), -ENODATA);
    ck_assert_int_eq(npv_domain_add_sink(dom, &user.sink), 0);
    ck_assert_int_eq(npv_domain_coherent(dom), -ENODATA);
    ck_assert_int_eq(npv_domain_add_sink(dom, &yes.sink), 0);
    ck_assert_int_eq(npv_domain_coherent(dom), 1);
    ck_assert_int_eq(npv_domain_add_sink(dom, &no.sink), 0);
    ck_assert_int_eq(npv_domain_coherent(dom), 0);
    npv_domain_remove_sink(dom, &no.sink, true);
    ck_assert_int_eq(npv_domain_coherent(dom), 1);
    npv_domain_remove_sink(dom, &yes.sink, true);
    ck_assert_int_eq(npv_domain_coherent(dom), -ENODATA);
    npv_domain_remove_sink(dom, &user.sink, true);
}
END_TEST

START_TEST(domain_find_sink_matches_ops)
{
    struct fake_sink a, b;
    fake_sink_init(&a, 1);
    fake_sink_init(&b, 1);
    b.sink.ops = &fake_sink_ops_other;
    ck_assert_ptr_null(npv_domain_find_sink(dom, &fake_sink_ops));
    ck_assert_int_eq(npv_domain_add_sink(dom, &a.sink), 0);
    ck_assert_int_eq(npv_domain_add_sink(dom, &b.sink), 0);
    ck_assert_ptr_eq(npv_domain_find_sink(dom, &fake_sink_ops), &a.sink);
    ck_assert_ptr_eq(npv_domain_find_sink(dom, &fake_sink_ops_other), &b.sink);
    npv_domain_remove_sink(dom, &a.sink, true);
    ck_assert_ptr_null(npv_domain_find_sink(dom, &fake_sink_ops));
    npv_domain_remove_sink(dom, &b.sink, true);
}
END_TEST

START_TEST(domain_many_mappings_translate_and_unmap)
{
    enum { N = 2000 };
    static npv_iova_t iova[N];
    for (int i = 0; i < N; i++) {
        struct npv_mapping m = mapping(0x100000000 + (uintptr_t)i * 0x10000, PG * (1 + i % 3));
        ck_assert_int_eq(npv_domain_map(dom, &m, PG), 0);
        iova[i] = m.iova;
    }
    ck_assert_uint_eq(npv_domain_mapping_count(dom), N);
    for (int i = 0; i < N; i++) {
        npv_iova_t got;
        void *va;
        ck_assert_int_eq(
            npv_domain_vaddr_to_iova(dom, (void *)(0x100000000 + (uintptr_t)i * 0x10000 + 5), &got),
            0);
        ck_assert_uint_eq(got, iova[i] + 5);
        ck_assert_int_eq(npv_domain_iova_to_vaddr(dom, iova[i] + 9, &va), 0);
        ck_assert_ptr_eq(va, (void *)(0x100000000 + (uintptr_t)i * 0x10000 + 9));
    }
    for (int i = 0; i < N; i += 2)
        ck_assert_int_eq(npv_domain_unmap(dom, iova[i]), 0);
    for (int i = 1; i < N; i += 2)
        ck_assert_int_eq(npv_domain_unmap(dom, iova[i]), 0);
    ck_assert_uint_eq(npv_domain_mapping_count(dom), 0);
}
END_TEST

static struct npv_domain *new_domain(void)
{
    struct npv_domain *d = NULL;
    ck_assert_int_eq(npv_domain_new(ctx, NULL, &d), 0);
    return d;
}

static void owned_sink_init(struct fake_sink *f)
{
    fake_sink_init(f, 0);
    f->sink.ops = &fake_sink_ops_owned;
}

START_TEST(domain_releases_an_owned_sink_once_at_its_last_put)
{
    static const struct npv_iova_range low[] = {{0, 0xffffffff}};
    struct npv_domain *d = new_domain();
    struct fake_sink f;
    owned_sink_init(&f);
    ck_assert_int_eq(npv_domain_set_sink_ranges(NULL, &f.sink, low, 1), 0);
    ck_assert_int_eq(npv_domain_add_sink(d, &f.sink), 0);
    struct npv_mapping m = mapping(0x10000000, PG);
    ck_assert_int_eq(npv_domain_map(d, &m, PG), 0);
    ck_assert_int_eq(npv_domain_unmap(d, m.iova), 0);
    /* A reference dropped that is not the last one frees nothing. */
    npv_domain_put(npv_domain_get(d));
    ck_assert_uint_eq(f.release_calls, 0);
    npv_domain_put(d);
    ck_assert_uint_eq(f.release_calls, 1);
    ck_assert_ptr_null(f.sink.next);
    ck_assert_ptr_null(f.sink.ranges); /* the hook's fini ran on a sink in no domain */
}
END_TEST

START_TEST(domain_keeps_an_owned_sink_mapped_while_it_has_no_users)
{
    struct npv_domain *d = new_domain();
    struct fake_sink f;
    owned_sink_init(&f);
    f.sink.users = 1;
    ck_assert_int_eq(npv_domain_add_sink(d, &f.sink), 0);
    f.sink.users = 0; /* its last device left: the sink stays in the domain */
    struct npv_mapping m = mapping(0x10000000, PG);
    ck_assert_int_eq(npv_domain_map(d, &m, PG), 0);
    ck_assert_ptr_nonnull(fake_sink_find(&f, m.iova));
    ck_assert_ptr_eq(npv_domain_find_sink(d, &fake_sink_ops_owned), &f.sink);
    ck_assert_int_eq(npv_domain_unmap(d, m.iova), 0);
    ck_assert_uint_eq(f.release_calls, 0);
    npv_domain_put(d);
    ck_assert_uint_eq(f.release_calls, 1);
}
END_TEST

START_TEST(domain_leaves_mappings_left_at_free_to_the_release_hook)
{
    struct npv_domain *d = new_domain();
    struct fake_sink f;
    owned_sink_init(&f);
    ck_assert_int_eq(npv_domain_add_sink(d, &f.sink), 0);
    struct npv_mapping a = mapping(0x10000000, PG), b = mapping(0x20000000, 2 * PG);
    ck_assert_int_eq(npv_domain_map(d, &a, PG), 0);
    ck_assert_int_eq(npv_domain_map(d, &b, PG), 0);
    /* A caller's bug (buffers hold references), but the sink still goes in one call. */
    npv_domain_put(d);
    ck_assert_uint_eq(f.release_calls, 1);
    ck_assert_uint_eq(f.unmap_calls, 0);
    ck_assert_uint_eq(f.live_at_release, 2);
}
END_TEST

START_TEST(domain_never_releases_a_sink_its_owner_removed)
{
    struct npv_domain *d = new_domain();
    struct fake_sink f;
    owned_sink_init(&f);
    ck_assert_int_eq(npv_domain_add_sink(d, &f.sink), 0);
    npv_domain_remove_sink(d, &f.sink, true);
    ck_assert_uint_eq(f.release_calls, 0);
    npv_domain_put(d);
    ck_assert_uint_eq(f.release_calls, 0);
    npv_iommu_sink_fini(&f.sink);
}
END_TEST

START_TEST(domain_releases_each_owned_sink_once)
{
    struct npv_domain *d = new_domain();
    struct fake_sink f1, f2;
    owned_sink_init(&f1);
    owned_sink_init(&f2);
    ck_assert_int_eq(npv_domain_add_sink(d, &f1.sink), 0);
    ck_assert_int_eq(npv_domain_add_sink(d, &f2.sink), 0);
    npv_domain_put(d);
    ck_assert_uint_eq(f1.release_calls, 1);
    ck_assert_uint_eq(f2.release_calls, 1);
}
END_TEST

static void count_errors(void *user, enum npv_log_level level, const char *msg)
{
    (void)msg;
    if (level == NPV_LOG_ERROR)
        (*(int *)user)++;
}

START_TEST(domain_free_unlinks_and_reports_sinks_it_does_not_own)
{
    int errors = 0;
    npv_ctx_set_log_sink(ctx, count_errors, &errors);
    struct npv_domain *d = new_domain();
    struct fake_sink plain, busy;
    fake_sink_init(&plain, 1);
    owned_sink_init(&busy);
    ck_assert_int_eq(npv_domain_add_sink(d, &plain.sink), 0);
    ck_assert_int_eq(npv_domain_add_sink(d, &busy.sink), 0);
    /* A device still on it would use it after the free: left to its owner, and reported. */
    busy.sink.users = 1;
    npv_domain_put(d);
    npv_ctx_set_log_sink(ctx, quiet_log, NULL);
    ck_assert_uint_eq(busy.release_calls, 0);
    ck_assert_ptr_null(plain.sink.next);
    ck_assert_ptr_null(busy.sink.next);
    ck_assert_int_eq(errors, 1);
}
END_TEST

static Suite *domain_suite(void)
{
    Suite *s = suite_create("domain");
    TCase *tc = tcase_create("domain");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, domain_put_null_is_noop);
    tcase_add_test(tc, domain_get_keeps_it_alive_until_the_last_put);
    tcase_add_test(tc, domain_new_rejects_inverted_aperture);
    tcase_add_test(tc, domain_allocates_inside_a_32_bit_aperture_until_full);
    tcase_add_test(tc, domain_aperture_may_start_at_zero);
    tcase_add_test(tc, domain_never_allocates_iova_zero);
    tcase_add_test(tc, domain_map_pushes_to_every_sink);
    tcase_add_test(tc, domain_add_sink_replays_the_journal);
    tcase_add_test(tc, domain_remove_sink_unmaps_the_journal_from_it);
    tcase_add_test(tc, domain_leave_sink_is_all_or_nothing);
    tcase_add_test(tc, domain_sink_failing_midway_leaves_nothing_mapped);
    tcase_add_test(tc, domain_add_sink_failing_on_nth_replay_undoes_and_is_not_added);
    tcase_add_test(tc, domain_unmap_failing_in_a_sink_quarantines_its_iova);
    tcase_add_test(tc, domain_quarantine_ends_when_the_holding_sink_leaves);
    tcase_add_test(tc, domain_map_rollback_reports_a_failing_unmap_and_quarantines);
    tcase_add_test(tc, domain_unmap_with_a_sink_saying_enoent_quarantines_nothing);
    tcase_add_test(tc, domain_refuses_memory_without_fd_where_a_sink_needs_one);
    tcase_add_test(tc, domain_translates_both_ways);
    tcase_add_test(tc, domain_refuses_overlapping_host_ranges);
    tcase_add_test(tc, domain_map_at_checks_overlap_and_range);
    tcase_add_test(tc, domain_sink_ranges_narrow_the_usable_space);
    tcase_add_test(tc, domain_sink_range_change_that_strands_a_mapping_fails_and_changes_nothing);
    tcase_add_test(tc, domain_set_sink_ranges_refuses_a_sink_of_another_domain);
    tcase_add_test(tc, domain_set_sink_ranges_with_the_same_ranges_changes_nothing);
    tcase_add_test(tc, domain_sink_range_swap_is_safe_against_concurrent_readers);
    tcase_add_test(tc, domain_reserve_keeps_range_out_and_refuses_busy);
    tcase_add_test(tc, domain_coherent_is_the_and_of_kernel_sinks);
    tcase_add_test(tc, domain_find_sink_matches_ops);
    tcase_add_test(tc, domain_many_mappings_translate_and_unmap);
    tcase_add_test(tc, domain_releases_an_owned_sink_once_at_its_last_put);
    tcase_add_test(tc, domain_keeps_an_owned_sink_mapped_while_it_has_no_users);
    tcase_add_test(tc, domain_leaves_mappings_left_at_free_to_the_release_hook);
    tcase_add_test(tc, domain_never_releases_a_sink_its_owner_removed);
    tcase_add_test(tc, domain_releases_each_owned_sink_once);
    tcase_add_test(tc, domain_free_unlinks_and_reports_sinks_it_does_not_own);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(domain_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

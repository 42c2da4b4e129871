/* SPDX-License-Identifier: MIT */
/*
 * npv_dma without hugepages: the 4 KiB fallback and its one warning per
 * context. Needs the host's 2 MiB pool to have no free page; skips (77)
 * otherwise, since the fallback cannot be forced while pages are free.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/dma.h>

#include "dma_test_util.h"
#include "fake_sink.h"

#define PG 4096ul
#define MB (1ul << 20)

static struct npv_ctx *ctx;
static struct log_capture logs;

static void setup(void)
{
    memset(&logs, 0, sizeof(logs));
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    npv_ctx_set_log_sink(ctx, capture_log, &logs);
}

static void teardown(void)
{
    npv_ctx_free(ctx);
}

/* A domain with one fake sink: coherent -1 stands for a vfio-user server, 1 for a kernel IOMMU. */
static struct npv_domain *domain_with_sink(struct npv_ctx *c, struct fake_sink *f, int coherent)
{
    struct npv_domain *dom;
    fake_sink_init(f, coherent);
    ck_assert_int_eq(npv_domain_new(c, NULL, &dom), 0);
    ck_assert_int_eq(npv_domain_add_sink(dom, &f->sink), 0);
    return dom;
}

START_TEST(dma_falls_back_to_4k_pages_with_one_warning_per_context)
{
    struct npv_dma_opts o = {.page = NPV_DMA_PAGE_2M, .numa_node = -1};
    struct npv_dma *a, *b, *c;
    struct fake_sink f;
    struct npv_domain *dom = domain_with_sink(ctx, &f, 1);
    ck_assert_int_eq(npv_dma_alloc(ctx, 2 * MB, &o, &a), 0);
    ck_assert_uint_eq(npv_dma_page_size(a), PG);
    ck_assert_uint_eq(npv_dma_size(a), 2 * MB);
    ck_assert_uint_eq(logs.warns, 0); /* not mapped anywhere yet */
    ck_assert_int_eq(npv_dma_map(a, dom, NPV_DMA_RW, NULL), 0);
    ck_assert_uint_eq(logs.warns, 1);
    ck_assert_ptr_nonnull(strstr(logs.last_warn, "4 KiB"));
    ck_assert_ptr_nonnull(strstr(logs.last_warn, "npuvfio hugepages"));
    ck_assert_int_eq(npv_dma_alloc(ctx, MB + 1, &o, &b), 0);
    ck_assert_uint_eq(npv_dma_size(b), MB + PG);
    ck_assert_int_eq(npv_dma_alloc(ctx, 4 * MB, NULL, &c), 0);
    ck_assert_uint_eq(npv_dma_page_size(c), PG);
    ck_assert_int_eq(npv_dma_map(b, dom, NPV_DMA_RW, NULL), 0);
    ck_assert_int_eq(npv_dma_map(c, dom, NPV_DMA_RW, NULL), 0);
    ck_assert_uint_eq(logs.warns, 1);
    npv_dma_free(a);
    npv_dma_free(b);
    npv_dma_free(c);
    npv_domain_remove_sink(dom, &f.sink, true);
    npv_domain_put(dom);

    /* Another context hears it once too. */
    struct npv_ctx *other;
    struct log_capture other_logs;
    memset(&other_logs, 0, sizeof(other_logs));
    ck_assert_int_eq(npv_ctx_new(&other), 0);
    npv_ctx_set_log_sink(other, capture_log, &other_logs);
    dom = domain_with_sink(other, &f, 1);
    ck_assert_int_eq(npv_dma_alloc(other, 2 * MB, &o, &a), 0);
    ck_assert_int_eq(npv_dma_alloc(other, 2 * MB, &o, &b), 0);
    ck_assert_int_eq(npv_dma_map(a, dom, NPV_DMA_RW, NULL), 0);
    ck_assert_int_eq(npv_dma_map(b, dom, NPV_DMA_RW, NULL), 0);
    ck_assert_uint_eq(other_logs.warns, 1);
    npv_dma_free(a);
    npv_dma_free(b);
    npv_domain_remove_sink(dom, &f.sink, true);
    npv_domain_put(dom);
    npv_ctx_free(other);
}
END_TEST

/* Over vfio-user (a sink that is no kernel IOMMU) there is no IOTLB and no pin to warn about. */
START_TEST(dma_fallback_is_not_warned_about_over_vfio_user)
{
    struct npv_dma_opts o = {.page = NPV_DMA_PAGE_2M, .numa_node = -1};
    struct npv_dma *a;
    struct fake_sink f;
    struct npv_domain *dom = domain_with_sink(ctx, &f, -1);
    ck_assert_int_eq(npv_dma_alloc(ctx, 2 * MB, &o, &a), 0);
    ck_assert_uint_eq(npv_dma_page_size(a), PG);
    ck_assert_int_eq(npv_dma_map(a, dom, NPV_DMA_RW, NULL), 0);
    ck_assert_uint_eq(logs.warns, 0);
    npv_dma_free(a);
    npv_domain_remove_sink(dom, &f.sink, true);
    npv_domain_put(dom);
}
END_TEST

START_TEST(dma_require_page_fails_instead_of_falling_back)
{
    struct npv_dma_opts o = {.page = NPV_DMA_PAGE_2M, .numa_node = -1, .require_page = 1};
    struct npv_dma *d = NULL;
    int before = count_fds();
    ck_assert_int_eq(npv_dma_alloc(ctx, 2 * MB, &o, &d), -ENOMEM);
    ck_assert_ptr_null(d);
    ck_assert_int_eq(count_fds(), before);
    ck_assert_uint_eq(logs.warns, 0);
    ck_assert_ptr_nonnull(strstr(logs.last_error, "2 MiB"));
}
END_TEST

START_TEST(dma_1g_request_falls_back_through_2m_to_4k)
{
    struct npv_dma_opts o = {.page = NPV_DMA_PAGE_1G, .numa_node = -1};
    struct npv_dma *d;
    ck_assert_int_eq(npv_dma_alloc(ctx, 3 * MB, &o, &d), 0);
    ck_assert_uint_eq(npv_dma_page_size(d), PG);
    ck_assert_uint_eq(npv_dma_size(d), 3 * MB);
    /* One for 1 GiB -> 2 MiB; the 4 KiB fallback is warned about when mapped into an IOMMU. */
    ck_assert_uint_eq(logs.warns, 1);
    npv_dma_free(d);
}
END_TEST

static Suite *fallback_suite(void)
{
    Suite *s = suite_create("dma_fallback");
    TCase *tc = tcase_create("fallback");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, dma_falls_back_to_4k_pages_with_one_warning_per_context);
    tcase_add_test(tc, dma_fallback_is_not_warned_about_over_vfio_user);
    tcase_add_test(tc, dma_require_page_fails_instead_of_falling_back);
    tcase_add_test(tc, dma_1g_request_falls_back_through_2m_to_4k);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    long free2m = free_2m_hugepages();
    if (free2m != 0) {
        fprintf(stderr,
                "SKIP unit_dma_fallback: the host has %ld free 2 MiB hugepages, so the 4 KiB "
                "fallback cannot be exercised (it needs an empty pool)\n",
                free2m);
        if (free2m > 0)
            return 77;
        /* -1: no 2 MiB pool at all, which is a fallback case too. */
    }
    SRunner *sr = srunner_create(fallback_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

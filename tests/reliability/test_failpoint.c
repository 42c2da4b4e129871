/* SPDX-License-Identifier: MIT */
/* Failure injection (lib/core/failpoint.c): counting, firing once, per context. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>

#include <npuvfio/ctx.h>
#include <npuvfio/domain.h>
#include <npuvfio/failpoint.h>

#include "npv_config.h"

static struct npv_ctx *new_ctx(void)
{
    struct npv_ctx *ctx;
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    return ctx;
}

#if NPV_HAVE_FAILPOINTS

START_TEST(failpoint_fails_the_nth_call_once)
{
    struct npv_ctx *ctx = new_ctx();
    ck_assert_int_eq(npv_failpoint_arm(ctx, NPV_FAIL_IOCTL, 3), 0);
    ck_assert_int_eq(npv_failpoint_check(ctx, NPV_FAIL_IOCTL), 0);
    ck_assert_int_eq(npv_failpoint_check(ctx, NPV_FAIL_MMAP), 0);
    ck_assert_int_eq(npv_failpoint_check(ctx, NPV_FAIL_IOCTL), 0);
    errno = 0;
    ck_assert_int_eq(npv_failpoint_check(ctx, NPV_FAIL_IOCTL), -EIO);
    ck_assert_int_eq(errno, EIO);
    ck_assert_int_eq(npv_failpoint_check(ctx, NPV_FAIL_IOCTL), 0);
    ck_assert_uint_eq(npv_failpoint_calls(ctx, NPV_FAIL_IOCTL), 4);
    ck_assert_uint_eq(npv_failpoint_calls(ctx, NPV_FAIL_MMAP), 1);
    npv_ctx_free(ctx);
}
END_TEST

START_TEST(failpoint_arm_resets_counts_and_disarm_stops_failures)
{
    struct npv_ctx *ctx = new_ctx();
    npv_failpoint_check(ctx, NPV_FAIL_ALLOC);
    ck_assert_int_eq(npv_failpoint_arm(ctx, NPV_FAIL_ALLOC, 1), 0);
    ck_assert_uint_eq(npv_failpoint_calls(ctx, NPV_FAIL_ALLOC), 0);
    ck_assert_int_eq(npv_failpoint_disarm(ctx), 0);
    ck_assert_int_eq(npv_failpoint_check(ctx, NPV_FAIL_ALLOC), 0);
    ck_assert_uint_eq(npv_failpoint_calls(ctx, NPV_FAIL_ALLOC), 1);
    npv_ctx_free(ctx);
}
END_TEST

START_TEST(failpoint_rejects_bad_class_and_zero_nth)
{
    struct npv_ctx *ctx = new_ctx();
    ck_assert_int_eq(npv_failpoint_arm(ctx, NPV_FAIL_CLASS_COUNT, 1), -EINVAL);
    ck_assert_int_eq(npv_failpoint_arm(ctx, NPV_FAIL_ALLOC, 0), -EINVAL);
    ck_assert_int_eq(npv_failpoint_arm(NULL, NPV_FAIL_ALLOC, 1), -EINVAL);
    ck_assert_int_eq(npv_failpoint_check(NULL, NPV_FAIL_ALLOC), 0);
    ck_assert_ptr_null(npv_failpoint_class_name(NPV_FAIL_CLASS_COUNT));
    ck_assert_str_eq(npv_failpoint_class_name(NPV_FAIL_SOCKET), "socket");
    npv_ctx_free(ctx);
}
END_TEST

START_TEST(failpoint_state_is_per_context)
{
    struct npv_ctx *a = new_ctx(), *b = new_ctx();
    ck_assert_int_eq(npv_failpoint_arm(a, NPV_FAIL_ALLOC, 1), 0);
    ck_assert_int_eq(npv_failpoint_check(b, NPV_FAIL_ALLOC), 0);
    ck_assert_int_eq(npv_failpoint_check(a, NPV_FAIL_ALLOC), -ENOMEM);
    npv_ctx_free(a);
    npv_ctx_free(b);
}
END_TEST

/* A library call of the class fails as the real call would, and leaves nothing behind. */
START_TEST(failpoint_library_allocation_fails_with_enomem)
{
    struct npv_ctx *ctx = new_ctx();
    struct npv_domain *dom = NULL;
    ck_assert_int_eq(npv_failpoint_arm(ctx, NPV_FAIL_ALLOC, 1), 0);
    ck_assert_int_eq(npv_domain_new(ctx, NULL, &dom), -ENOMEM);
    ck_assert_uint_ge(npv_failpoint_calls(ctx, NPV_FAIL_ALLOC), 1);
    ck_assert_int_eq(npv_domain_new(ctx, NULL, &dom), 0);
    npv_domain_put(dom);
    npv_ctx_free(ctx);
}
END_TEST

#else

START_TEST(failpoint_without_build_option_is_not_supported)
{
    struct npv_ctx *ctx = new_ctx();
    ck_assert_int_eq(npv_failpoint_arm(ctx, NPV_FAIL_ALLOC, 1), -ENOTSUP);
    ck_assert_int_eq(npv_failpoint_disarm(ctx), -ENOTSUP);
    ck_assert_int_eq(npv_failpoint_check(ctx, NPV_FAIL_ALLOC), 0);
    ck_assert_uint_eq(npv_failpoint_calls(ctx, NPV_FAIL_ALLOC), 0);
    npv_ctx_free(ctx);
}
END_TEST

#endif

static Suite *failpoint_suite(void)
{
    Suite *s = suite_create("failpoint");
    TCase *tc = tcase_create("core");
#if NPV_HAVE_FAILPOINTS
    tcase_add_test(tc, failpoint_fails_the_nth_call_once);
    tcase_add_test(tc, failpoint_arm_resets_counts_and_disarm_stops_failures);
    tcase_add_test(tc, failpoint_rejects_bad_class_and_zero_nth);
    tcase_add_test(tc, failpoint_state_is_per_context);
    tcase_add_test(tc, failpoint_library_allocation_fails_with_enomem);
#else
    tcase_add_test(tc, failpoint_without_build_option_is_not_supported);
#endif
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(failpoint_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

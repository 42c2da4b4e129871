/* SPDX-License-Identifier: MIT */
/*
 * Whether the running kernel's vfio region pread/pwrite keeps an 8-byte
 * access whole (npv_bar_whole64), decided from the kernel release and
 * machine, and the Edge TPU driver's refusal where it would not.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>

#include "vfio_device_internal.h"
#include "edgetpu/status_decode.h"

START_TEST(x86_needs_6_14_for_whole_8_byte_region_accesses)
{
    ck_assert(!npv_vfio_rw64_whole_for("5.15.0-91-generic", "x86_64", NULL));
    ck_assert(!npv_vfio_rw64_whole_for("6.12.12+bpo-amd64", "x86_64", NULL));
    ck_assert(!npv_vfio_rw64_whole_for("6.13.7", "x86_64", NULL));
    ck_assert(npv_vfio_rw64_whole_for("6.14.0", "x86_64", NULL));
    ck_assert(npv_vfio_rw64_whole_for("6.18.44-fc-v1045", "x86_64", NULL));
    ck_assert(npv_vfio_rw64_whole_for("7.0.1", "x86_64", NULL));
}
END_TEST

START_TEST(other_machines_have_them_from_6_10)
{
    ck_assert(!npv_vfio_rw64_whole_for("6.9.12", "aarch64", NULL));
    ck_assert(npv_vfio_rw64_whole_for("6.10.0", "aarch64", NULL));
    ck_assert(npv_vfio_rw64_whole_for("6.12.1-rpi", "aarch64", NULL));
    ck_assert(!npv_vfio_rw64_whole_for("6.1.0", "s390x", NULL));
}
END_TEST

START_TEST(unknown_releases_count_as_split_and_the_override_wins)
{
    ck_assert(!npv_vfio_rw64_whole_for(NULL, "x86_64", NULL));
    ck_assert(!npv_vfio_rw64_whole_for("", "x86_64", NULL));
    ck_assert(!npv_vfio_rw64_whole_for("linux", NULL, NULL));
    ck_assert(npv_vfio_rw64_whole_for("5.10.0", "x86_64", "whole"));
    ck_assert(!npv_vfio_rw64_whole_for("6.18.0", "x86_64", "split"));
    ck_assert(npv_vfio_rw64_whole_for("6.18.0", "x86_64", "bogus"));
}
END_TEST

START_TEST(the_edgetpu_driver_refuses_a_kernel_that_splits)
{
    ck_assert_int_eq(edgetpu_decode_whole64(1), 0);
    ck_assert_int_eq(edgetpu_decode_whole64(0), -EOPNOTSUPP);
    ck_assert_int_eq(edgetpu_decode_whole64(-ERANGE), -ERANGE);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kernel_vfio_rw64");
    TCase *tc = tcase_create("rw64");
    tcase_add_test(tc, x86_needs_6_14_for_whole_8_byte_region_accesses);
    tcase_add_test(tc, other_machines_have_them_from_6_10);
    tcase_add_test(tc, unknown_releases_count_as_split_and_the_override_wins);
    tcase_add_test(tc, the_edgetpu_driver_refuses_a_kernel_that_splits);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* SPDX-License-Identifier: MIT */
/* The device table the CLI and the bench find devices in (devices/registry.c). */
#include <check.h>
#include <errno.h>
#include <string.h>

#include <npuvfio/testdev.h>

#include "registry.h"

START_TEST(table_finds_devices_by_name_and_pci_id)
{
    const struct npv_device_entry *e = npv_device_find("testdev");
    ck_assert_ptr_nonnull(e);
    ck_assert_ptr_eq(npv_device_by_pci_id(NPV_TESTDEV_VENDOR_ID, NPV_TESTDEV_DEVICE_ID), e);
    ck_assert_str_eq(npv_device_by_pci_id(0x1ac1, 0x089a)->name, "edgetpu");
    ck_assert_str_eq(npv_device_by_pci_id(0x19e5, 0xd100)->name, "aicore");
    ck_assert_str_eq(npv_device_by_pci_id(0x19e5, 0xd801)->name, "aicore");
    /* The stand-in model of the AICore part, under ids no shipping device has. */
    ck_assert_str_eq(npv_device_by_pci_id(0x1234, 0x4e41)->name, "aicore");
    ck_assert_ptr_null(npv_device_by_pci_id(0x8086, 0x10d3));
    ck_assert_ptr_null(npv_device_by_pci_id(NPV_TESTDEV_VENDOR_ID, 0x1111));
    /* The 0:0 that ends an id list is no device. */
    ck_assert_ptr_null(npv_device_by_pci_id(0, 0));
    ck_assert_ptr_null(npv_device_find("nosuch"));
}
END_TEST

START_TEST(every_entry_is_complete_for_what_it_offers)
{
    size_t n = 0;
    for (const struct npv_device_entry *e; (e = npv_device_at(n)) != NULL; n++) {
        ck_assert_ptr_nonnull(e->name);
        ck_assert_ptr_nonnull(e->summary);
        ck_assert_ptr_eq(npv_device_find(e->name), e);
        ck_assert_msg((e->model_create == NULL) == (e->model_destroy == NULL), "%s", e->name);
        /* The small model is the same device's, freed by the same model_destroy. */
        ck_assert_msg(e->model_create_small == NULL || e->model_create != NULL, "%s", e->name);
        ck_assert_msg((e->driver_open == NULL) == (e->driver_close == NULL), "%s", e->name);
        /* The failure walk opens every driver with short deadlines. */
        ck_assert_msg((e->driver_open == NULL) == (e->driver_open_deadline == NULL), "%s", e->name);
        /* A sample runs on a driver. */
        ck_assert_msg(e->sample_run == NULL || e->driver_open != NULL, "%s", e->name);
    }
    ck_assert_uint_ge(n, 3);
    const struct npv_device_entry *td = npv_device_find("testdev");
    ck_assert_ptr_nonnull(td->model_create);
    ck_assert_ptr_nonnull(td->driver_open);
    ck_assert_ptr_nonnull(td->sample_run);
    ck_assert_uint_eq(td->class_code, NPV_TESTDEV_CLASS);
}
END_TEST

START_TEST(serving_a_device_without_a_model_is_enotsup)
{
    for (size_t i = 0; npv_device_at(i) != NULL; i++)
        if (npv_device_at(i)->model_create == NULL) {
            ck_assert_int_eq(npv_device_serve(npv_device_at(i), "/nonexistent/sock", true),
                             -ENOTSUP);
            ck_assert_int_eq(npv_device_serve_small(npv_device_at(i), "/nonexistent/sock", true),
                             -ENOTSUP);
        }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("device table");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, table_finds_devices_by_name_and_pci_id);
    tcase_add_test(tc, every_entry_is_complete_for_what_it_offers);
    tcase_add_test(tc, serving_a_device_without_a_model_is_enotsup);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

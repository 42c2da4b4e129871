/* SPDX-License-Identifier: MIT */
/*
 * The PCI capability walk the kernel transports rely on to find the PCIe
 * capability (and clear Enable No Snoop), over config spaces a device or a
 * buggy bridge could present: it must end on loops and stop on pointers into
 * the header.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ctx_internal.h"
#include "dev_internal.h"

static uint8_t cfg[256];
static int read_error;

static int fake_read(struct npv_dev *dev, uint32_t index, uint64_t off, void *buf, size_t len)
{
    (void)dev;
    if (read_error)
        return read_error;
    if (index != NPV_PCI_CONFIG_REGION || off > sizeof(cfg) || len > sizeof(cfg) - off)
        return -EINVAL;
    memcpy(buf, cfg + off, len);
    return 0;
}

/* A PCI function with a config space: the walk runs only on those. */
static int fake_info(struct npv_dev *dev, struct npv_dev_info *info)
{
    (void)dev;
    memset(info, 0, sizeof(*info));
    info->flags = NPV_DEV_FLAG_PCI;
    info->num_regions = NPV_PCI_CONFIG_REGION + 2;
    return 0;
}

static const struct npv_dev_ops fake_ops = {.get_info = fake_info, .region_read = fake_read};

static struct npv_ctx *ctx;
static struct npv_dev *dev;

static void setup(void)
{
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    dev = npv_dev_alloc(ctx, &fake_ops, NPV_TRANSPORT_VFIO_USER, "fake", NULL);
    ck_assert_ptr_nonnull(dev);
    memset(cfg, 0, sizeof(cfg));
    read_error = 0;
    cfg[0x06] = 0x10; /* Status: Capabilities List */
}

static void teardown(void)
{
    npv_dev_free_shell(dev);
    npv_ctx_free(ctx);
}

static void cap(uint8_t at, uint8_t id, uint8_t next)
{
    cfg[at] = id;
    cfg[at + 1] = next;
}

START_TEST(walk_finds_pcie_cap_after_others)
{
    uint32_t off = 1;
    cfg[0x34] = 0x40;
    cap(0x40, 0x01, 0x50); /* power management */
    cap(0x50, 0x05, 0x60); /* MSI */
    cap(0x60, 0x10, 0x00); /* PCI Express */
    ck_assert_int_eq(npv_dev_find_pci_cap(dev, 0x10, &off), 0);
    ck_assert_uint_eq(off, 0x60);
}
END_TEST

START_TEST(walk_without_cap_list_bit_finds_nothing)
{
    uint32_t off = 1;
    cfg[0x06] = 0;
    cfg[0x34] = 0x40;
    cap(0x40, 0x10, 0x00);
    ck_assert_int_eq(npv_dev_find_pci_cap(dev, 0x10, &off), 0);
    ck_assert_uint_eq(off, 0);
}
END_TEST

START_TEST(walk_ends_on_self_loop)
{
    uint32_t off = 1;
    cfg[0x34] = 0x40;
    cap(0x40, 0x01, 0x40);
    ck_assert_int_eq(npv_dev_find_pci_cap(dev, 0x10, &off), 0);
    ck_assert_uint_eq(off, 0);
}
END_TEST

START_TEST(walk_ends_on_two_cap_loop)
{
    uint32_t off = 1;
    cfg[0x34] = 0x40;
    cap(0x40, 0x01, 0x80);
    cap(0x80, 0x05, 0x40);
    ck_assert_int_eq(npv_dev_find_pci_cap(dev, 0x10, &off), 0);
    ck_assert_uint_eq(off, 0);
}
END_TEST

START_TEST(walk_stops_at_pointer_into_header)
{
    uint32_t off = 1;
    cfg[0x34] = 0x40;
    cap(0x40, 0x01, 0x10); /* into the BARs */
    cfg[0x10] = 0x10;      /* which would look like a PCIe cap */
    ck_assert_int_eq(npv_dev_find_pci_cap(dev, 0x10, &off), 0);
    ck_assert_uint_eq(off, 0);
}
END_TEST

START_TEST(walk_ignores_reserved_pointer_bits)
{
    uint32_t off = 1;
    cfg[0x34] = 0x43;
    cap(0x40, 0x01, 0xfb);
    cap(0xf8, 0x10, 0x00);
    ck_assert_int_eq(npv_dev_find_pci_cap(dev, 0x10, &off), 0);
    ck_assert_uint_eq(off, 0xf8);
}
END_TEST

START_TEST(walk_reports_config_read_errors)
{
    uint32_t off = 1;
    read_error = -EIO;
    ck_assert_int_eq(npv_dev_find_pci_cap(dev, 0x10, &off), -EIO);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("kernel_pci_cap_walk");
    TCase *tc = tcase_create("walk");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, walk_finds_pcie_cap_after_others);
    tcase_add_test(tc, walk_without_cap_list_bit_finds_nothing);
    tcase_add_test(tc, walk_ends_on_self_loop);
    tcase_add_test(tc, walk_ends_on_two_cap_loop);
    tcase_add_test(tc, walk_stops_at_pointer_into_header);
    tcase_add_test(tc, walk_ignores_reserved_pointer_bits);
    tcase_add_test(tc, walk_reports_config_read_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

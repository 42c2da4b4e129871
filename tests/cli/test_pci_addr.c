/* SPDX-License-Identifier: MIT */
/* npv_pci_addr_parse/format, the known-NPU table and hugepage sizes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <npuvfio/hugepages.h>
#include <npuvfio/pci.h>

START_TEST(addr_parse_accepts_full_form)
{
    struct npv_pci_addr a;
    ck_assert_int_eq(npv_pci_addr_parse("0000:01:00.0", &a), 0);
    ck_assert_uint_eq(a.domain, 0);
    ck_assert_uint_eq(a.bus, 1);
    ck_assert_uint_eq(a.dev, 0);
    ck_assert_uint_eq(a.fn, 0);
    ck_assert_int_eq(npv_pci_addr_parse("abcd:ff:1f.7", &a), 0);
    ck_assert_uint_eq(a.domain, 0xabcd);
    ck_assert_uint_eq(a.bus, 0xff);
    ck_assert_uint_eq(a.dev, 0x1f);
    ck_assert_uint_eq(a.fn, 7);
    ck_assert_int_eq(npv_pci_addr_parse("0000:AB:0C.1", &a), 0);
    ck_assert_uint_eq(a.bus, 0xab);
    ck_assert_uint_eq(a.dev, 0x0c);
}
END_TEST

START_TEST(addr_parse_accepts_short_form_as_domain_zero)
{
    struct npv_pci_addr a = {.domain = 99};
    ck_assert_int_eq(npv_pci_addr_parse("3a:00.2", &a), 0);
    ck_assert_uint_eq(a.domain, 0);
    ck_assert_uint_eq(a.bus, 0x3a);
    ck_assert_uint_eq(a.fn, 2);
}
END_TEST

START_TEST(addr_parse_accepts_vmd_domains)
{
    struct npv_pci_addr a;
    ck_assert_int_eq(npv_pci_addr_parse("10000:00:02.0", &a), 0);
    ck_assert_uint_eq(a.domain, 0x10000);
}
END_TEST

START_TEST(addr_parse_rejects_malformed)
{
    static const char *const bad[] = {
        "0000:zz:00.0",   "",
        "0000:01:00",     "0000:01:00.8",
        "0000:01:20.0",   "0000:1:00.0",
        "0000:01:0.0",    "0000:01:00.00",
        "000:01:00.0",    "12345678:01:00.0",
        "0000:01:00.0 ",  " 0000:01:00.0",
        "0000:01:00.0\n", "-000:01:00.0",
        "0000-01-00.0",   "0000:01:00:0",
        "0000:01:00.",    "0x00:01:00.0",
        "0000::00.0",     "g000:01:00.0",
        "0000:01:00.-1",
    };
    struct npv_pci_addr a;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(npv_pci_addr_parse(bad[i], &a) == -EINVAL, "accepted '%s'", bad[i]);
    ck_assert_int_eq(npv_pci_addr_parse(NULL, &a), -EINVAL);
    ck_assert_int_eq(npv_pci_addr_parse("0000:01:00.0", NULL), -EINVAL);
}
END_TEST

START_TEST(addr_format_is_canonical)
{
    struct npv_pci_addr a;
    char buf[NPV_PCI_ADDR_LEN];
    ck_assert_int_eq(npv_pci_addr_parse("0A:1F.3", &a), 0);
    npv_pci_addr_format(&a, buf, sizeof(buf));
    ck_assert_str_eq(buf, "0000:0a:1f.3");
    ck_assert_int_eq(npv_pci_addr_parse("fffffff:ff:1f.7", &a), 0);
    npv_pci_addr_format(&a, buf, sizeof(buf));
    ck_assert_str_eq(buf, "fffffff:ff:1f.7");
}
END_TEST

START_TEST(hugepage_size_parse_forms)
{
    uint64_t b;
    ck_assert_int_eq(npv_hugepage_size_parse("2M", &b), 0);
    ck_assert_uint_eq(b, NPV_HUGEPAGE_2M);
    ck_assert_int_eq(npv_hugepage_size_parse("2048kB", &b), 0);
    ck_assert_uint_eq(b, NPV_HUGEPAGE_2M);
    ck_assert_int_eq(npv_hugepage_size_parse("1g", &b), 0);
    ck_assert_uint_eq(b, NPV_HUGEPAGE_1G);
    ck_assert_int_eq(npv_hugepage_size_parse("1GB", &b), 0);
    static const char *const bad[] = {"", "M", "3M", "2", "2T", "-2M", "0M", " 2M", "2M "};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(npv_hugepage_size_parse(bad[i], &b) == -EINVAL, "accepted '%s'", bad[i]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pci_addr");
    TCase *t = tcase_create("parse");
    tcase_add_test(t, addr_parse_accepts_full_form);
    tcase_add_test(t, addr_parse_accepts_short_form_as_domain_zero);
    tcase_add_test(t, addr_parse_accepts_vmd_domains);
    tcase_add_test(t, addr_parse_rejects_malformed);
    tcase_add_test(t, addr_format_is_canonical);
    tcase_add_test(t, hugepage_size_parse_forms);
    suite_add_tcase(s, t);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

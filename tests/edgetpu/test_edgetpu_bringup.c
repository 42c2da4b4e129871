/* SPDX-License-Identifier: MIT */
/*
 * Edge TPU bring-up and the rules the chip forces, without running
 * instructions: queue memory and level-1 tables below 4 GiB of IOVA, a page
 * table of IOVAs only, No Snoop as the library's coherency rule decides,
 * reset and reopen, extended-space mapping. Against the model in a child
 * process, or a real chip named by NPUVFIO_TEST_EDGETPU=ADDR (checks that read
 * the model's test port are left out there).
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/dev.h>
#include <npuvfio/domain.h>

#include "driver_internal.h"
#include "etpu_harness.h"

START_TEST(queue_status_block_and_level1_tables_lie_below_4gib)
{
    struct etpu t;
    etpu_open(&t, NULL);
    struct npv_edgetpu_layout l;
    npv_edgetpu_layout(t.tpu, &l);
    ck_assert_uint_lt(l.ring_iova + 4096, 1ull << 32);
    ck_assert_uint_lt(l.status_block_iova + 4096, 1ull << 32);
    ck_assert_uint_ge(l.nr_l1_tables, 1);
    ck_assert_uint_lt(l.l1_iova_max + 4096, 1ull << 32);
    /* What the chip itself holds: the simple slots of the ring and status block. */
    uint64_t pte;
    ck_assert_int_eq(npv_bar_read(t.bar2, EDGETPU_PAGE_TABLE + 8 * (l.ring_va >> 12), 8, &pte), 0);
    ck_assert_uint_eq(pte, l.ring_iova | 1);
    ck_assert_int_eq(
        npv_bar_read(t.bar2, EDGETPU_PAGE_TABLE + 8 * (l.status_block_va >> 12), 8, &pte), 0);
    ck_assert_uint_eq(pte, l.status_block_iova | 1);
    if (!t.hardware)
        ck_assert_uint_eq(etpu_port_read(&t, EDGETPU_MODEL_HIGH_DMA_COUNT), 0);
    etpu_close(&t);
}
END_TEST
START_TEST(page_table_holds_only_iovas_of_the_domain)
{
    struct etpu t;
    etpu_open(&t, NULL);
    unsigned valid = 0;
    for (uint32_t slot = 0; slot < EDGETPU_PAGE_TABLE_ENTRIES; slot++) {
        uint64_t pte;
        ck_assert_int_eq(npv_bar_read(t.bar2, EDGETPU_PAGE_TABLE + 8ull * slot, 8, &pte), 0);
        if (!(pte & EDGETPU_PTE_VALID))
            continue;
        valid++;
        void *host;
        ck_assert_msg(npv_domain_iova_to_vaddr(t.dom, pte & EDGETPU_PTE_ADDR_MASK, &host) == 0,
                      "slot %u holds 0x%llx, not an IOVA of the domain", slot,
                      (unsigned long long)pte);
        if (slot < 6144)
            continue;
        const uint64_t *l1 = host;
        for (unsigned i = 0; i < EDGETPU_L1_ENTRIES; i++) {
            if (!(l1[i] & EDGETPU_PTE_VALID))
                continue;
            void *h2;
            ck_assert_msg(npv_domain_iova_to_vaddr(t.dom, l1[i] & EDGETPU_PTE_ADDR_MASK, &h2) == 0,
                          "level-1 entry 0x%llx is not an IOVA", (unsigned long long)l1[i]);
        }
    }
    ck_assert_uint_ge(valid, 3); /* ring, status block, at least one level-1 table */
    if (!t.hardware)
        ck_assert_uint_eq(etpu_port_read(&t, EDGETPU_MODEL_BAD_PTE_COUNT), 0);
    etpu_close(&t);
}
END_TEST
START_TEST(no_snoop_is_left_as_the_library_coherency_rule_decides)
{
    struct etpu t;
    etpu_open(&t, NULL);
    /* Walk the capability list to the PCI Express capability. */
    uint8_t pos = 0;
    ck_assert_int_eq(npv_dev_config_read(t.dev, 0x34, &pos, 1), 0);
    while (pos != 0) {
        uint8_t id = 0;
        ck_assert_int_eq(npv_dev_config_read(t.dev, pos, &id, 1), 0);
        if (id == 0x10)
            break;
        ck_assert_int_eq(npv_dev_config_read(t.dev, pos + 1u, &pos, 1), 0);
    }
    ck_assert_uint_ne(pos, 0);
    uint16_t devctl = 0;
    ck_assert_int_eq(npv_dev_config_read(t.dev, pos + 8u, &devctl, 2), 0);
    bool no_snoop = (devctl & 0x0800) != 0;
    /* Cleared only when the IOMMU does not enforce coherency; the driver never touches it. */
    ck_assert_int_eq(no_snoop, !npv_dev_no_snoop_cleared(t.dev));
    ck_assert_int_eq(npv_dev_coherent(t.dev), !npv_dev_no_snoop_cleared(t.dev));
    etpu_close(&t);
}
END_TEST

START_TEST(reset_and_reopen_cycles_leave_the_chip_usable)
{
    struct etpu t;
    etpu_open(&t, NULL);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(npv_edgetpu_reset(t.tpu), 0);
    npv_edgetpu_unload(t.exe);
    t.exe = NULL;
    for (int i = 0; i < 3; i++) {
        npv_edgetpu_close(t.tpu);
        t.tpu = NULL;
        ck_assert_int_eq(npv_edgetpu_open(t.dev, NULL, &t.tpu), 0);
    }
    ck_assert_int_eq(npv_edgetpu_load(t.tpu, &t.sample.desc, &t.exe), 0);
    ck_assert_int_eq(npv_edgetpu_map(t.tpu, t.in, 0, EDGETPU_SAMPLE_INPUT_BYTES, &t.in_va), 0);
    ck_assert_int_eq(npv_edgetpu_map(t.tpu, t.out, 0, EDGETPU_SAMPLE_OUTPUT_BYTES, &t.out_va), 0);
    if (!t.hardware)
        ck_assert_uint_eq(etpu_port_read(&t, EDGETPU_MODEL_SPLIT_ACCESSES), 0);
    etpu_close(&t);
}
END_TEST

START_TEST(extended_mappings_keep_page_offsets_and_refuse_bad_unmaps)
{
    struct etpu t;
    etpu_open(&t, NULL);
    struct npv_dma *big;
    ck_assert_int_eq(npv_dma_alloc(t.ctx, 5u << 20, NULL, &big), 0);
    ck_assert_int_eq(npv_dma_map(big, t.dom, NPV_DMA_RW, NULL), 0);
    uint64_t va, va2;
    /* 5 MiB at an odd offset: three level-0 slots, the offset kept in the VA. */
    ck_assert_int_eq(npv_edgetpu_map(t.tpu, big, 100, (5u << 20) - 100, &va), 0);
    ck_assert_uint_eq(va & EDGETPU_VA_EXTENDED, EDGETPU_VA_EXTENDED);
    ck_assert_uint_eq(va & 0xfff, 100);
    ck_assert_int_eq(npv_edgetpu_unmap(t.tpu, va + (8u << 20), 4096), -EINVAL);
    ck_assert_int_eq(npv_edgetpu_unmap(t.tpu, va, (5u << 20) - 100), 0);
    ck_assert_int_eq(npv_edgetpu_unmap(t.tpu, va, (5u << 20) - 100), -EINVAL);
    /* A buffer not mapped into the domain has no IOVA to give the chip. */
    ck_assert_int_eq(npv_dma_unmap(big, t.dom), 0);
    ck_assert_int_eq(npv_edgetpu_map(t.tpu, big, 0, 4096, &va2), -ENOENT);
    npv_dma_free(big);
    etpu_close(&t);
}
END_TEST

START_TEST(instruction_fields_are_patched_bit_granular_lsb_first)
{
    uint8_t buf[12];
    memset(buf, 0xff, sizeof(buf));
    edgetpu_patch32(buf, 3, 0x80000001u);
    /* Bit 3 of byte 0 gets bit 0 of the value; bits 0-2 and 35+ stay. */
    ck_assert_uint_eq(buf[0], 0x0f);
    ck_assert_uint_eq(buf[1], 0x00);
    ck_assert_uint_eq(buf[2], 0x00);
    ck_assert_uint_eq(buf[3], 0x00);
    ck_assert_uint_eq(buf[4], 0xfc);
    ck_assert_uint_eq(buf[5], 0xff);
    memset(buf, 0, sizeof(buf));
    edgetpu_patch32(buf, 32, 0x11223344u);
    ck_assert_uint_eq(buf[4], 0x44);
    ck_assert_uint_eq(buf[7], 0x11);
    ck_assert_uint_eq(buf[8], 0x00);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("edgetpu_bringup");
    TCase *tc = tcase_create("bringup");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, queue_status_block_and_level1_tables_lie_below_4gib);
    tcase_add_test(tc, page_table_holds_only_iovas_of_the_domain);
    tcase_add_test(tc, no_snoop_is_left_as_the_library_coherency_rule_decides);
    tcase_add_test(tc, reset_and_reopen_cycles_leave_the_chip_usable);
    tcase_add_test(tc, extended_mappings_keep_page_offsets_and_refuse_bad_unmaps);
    suite_add_tcase(s, tc);
    TCase *unit = tcase_create("unit");
    tcase_add_test(unit, instruction_fields_are_patched_bit_granular_lsb_first);
    suite_add_tcase(s, unit);
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

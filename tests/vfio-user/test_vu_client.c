/* SPDX-License-Identifier: MIT */
/*
 * The vfio-user client against the testdev model in another process:
 * negotiation, DMA mapping, shared and trapped region access, interrupts,
 * reset, and moving the device between domains.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include <npuvfio/irq.h>

#include "harness.h"

static struct vu_server srv;
static struct td t;

static void setup(void)
{
    vu_server_start(&srv, vu_serve_testdev, NULL);
    td_open(&t, srv.path);
}

static void teardown(void)
{
    td_close(&t);
    vu_server_kill(&srv);
}

START_TEST(open_negotiates_and_reads_the_device_identity)
{
    struct npv_dev_info info;
    ck_assert_int_eq(npv_dev_info(t.dev, &info), 0);
    ck_assert(info.flags & NPV_DEV_FLAG_PCI);
    ck_assert(info.flags & NPV_DEV_FLAG_RESET);
    ck_assert_uint_ge(info.num_regions, NPV_PCI_CONFIG_REGION + 1);
    ck_assert_uint_eq(info.vendor_id, NPV_TESTDEV_VENDOR_ID);
    ck_assert_uint_eq(info.device_id, NPV_TESTDEV_DEVICE_ID);
    ck_assert_uint_eq(info.class_code, NPV_TESTDEV_CLASS);
    ck_assert_int_eq(npv_dev_transport(t.dev), NPV_TRANSPORT_VFIO_USER);
    ck_assert_str_eq(npv_dev_name(t.dev), srv.path);
    ck_assert(npv_dev_coherent(t.dev));
    ck_assert_ptr_eq(npv_dev_domain(t.dev), t.dom);
    /* Bus mastering was switched on at open. */
    uint16_t cmd;
    ck_assert_int_eq(npv_dev_config_read(t.dev, 0x04, &cmd, 2), 0);
    ck_assert_uint_eq(cmd & 0x4, 0x4);
    ck_assert_uint_eq(npv_bar_read32(t.bar, TESTDEV_REG_ID), TESTDEV_ID_VALUE);
}
END_TEST

START_TEST(region_info_offers_the_doorbell_page_and_traps_the_rest)
{
    struct npv_region_info ri;
    ck_assert_int_eq(npv_dev_region_info(t.dev, 0, &ri), 0);
    ck_assert_uint_eq(ri.size, TESTDEV_BAR0_SIZE);
    ck_assert(ri.flags & NPV_REGION_MMAP);
    ck_assert_uint_eq(ri.nr_mmap_areas, 1);
    ck_assert_uint_eq(ri.mmap_areas[0].offset, TESTDEV_DOORBELL_PAGE);
    ck_assert_int_eq(npv_bar_is_direct(t.bar, TESTDEV_REG_DOORBELL, 4), 1);
    ck_assert_int_eq(npv_bar_is_direct(t.bar, TESTDEV_REG_ID, 4), 0);
    ck_assert_int_eq(npv_bar_is_direct(t.bar, TESTDEV_MSIX_TABLE_OFFSET, 16), 0);
    ck_assert_int_eq(npv_dev_region_info(t.dev, 200, &ri), -EINVAL);
}
END_TEST

START_TEST(trapped_64bit_access_arrives_as_one_8_byte_access)
{
    npv_bar_write64(t.bar, TESTDEV_REG_SCRATCH64, 0x0123456789abcdefull);
    ck_assert_uint_eq(npv_bar_read32(t.bar, TESTDEV_REG_LAST_WIDTH), 8);
    ck_assert_uint_eq(npv_bar_read64(t.bar, TESTDEV_REG_SCRATCH64), 0x0123456789abcdefull);
    ck_assert_uint_eq(npv_bar_read32(t.bar, TESTDEV_REG_LAST_WIDTH), 8);
    npv_bar_write32(t.bar, TESTDEV_REG_SCRATCH64 + 4, 0xfeedface);
    ck_assert_uint_eq(npv_bar_read32(t.bar, TESTDEV_REG_LAST_WIDTH), 4);
    uint64_t v;
    ck_assert_int_eq(npv_bar_read(t.bar, TESTDEV_REG_SCRATCH64, 8, &v), 0);
    ck_assert_uint_eq(v, 0xfeedface89abcdefull);
    /* The model refuses a 16-bit access to a 32-bit register: its errno comes back. */
    ck_assert_int_eq(npv_bar_read(t.bar, TESTDEV_REG_CTRL, 2, &v), -EINVAL);
}
END_TEST

START_TEST(doorbell_is_a_plain_store_the_model_sees)
{
    td_enable(&t, false);
    struct npv_testdev_desc d = npv_testdev_nop(0);
    td_submit(&t, &d);
    td_submit(&t, &d);
    struct npv_cpl c;
    ck_assert_int_eq(td_wait(&t, GENEROUS_NS, &c), 0);
    ck_assert_int_eq(c.status, 0);
    struct npv_ring_stats st;
    npv_ring_stats(t.ring, &st);
    ck_assert_uint_eq(st.completed, 2);
    ck_assert_uint_eq(st.doorbells, 2);
}
END_TEST

START_TEST(dma_map_and_unmap_reach_the_server)
{
    struct npv_dma *buf;
    npv_iova_t iova;
    ck_assert_int_eq(npv_dma_alloc(t.ctx, 4096, NULL, &buf), 0);
    ck_assert_int_eq(npv_dma_map(buf, t.dom, NPV_DMA_RW, &iova), 0);
    td_enable(&t, false);
    struct npv_testdev_desc fill = npv_testdev_fill(iova, 0x5a, 4096, 0);
    td_submit(&t, &fill);
    struct npv_cpl c;
    ck_assert_int_eq(td_wait(&t, GENEROUS_NS, &c), 0);
    ck_assert_int_eq(c.status, 0);
    ck_assert_uint_eq(((uint8_t *)npv_dma_vaddr(buf))[4095], 0x5a);

    /* After the unmap the same IOVA is an IOMMU fault for the model. */
    ck_assert_int_eq(npv_dma_unmap(buf, t.dom), 0);
    memset(npv_dma_vaddr(buf), 0, 4096);
    td_enable(&t, false);
    td_submit(&t, &fill);
    ck_assert_int_eq(td_wait(&t, GENEROUS_NS, &c), 0);
    ck_assert_int_eq(c.status, -EIO);
    ck_assert_uint_eq(c.dev_error, NPV_TESTDEV_ERR_DMA);
    ck_assert_uint_eq(td_state(&t).fault_iova, iova);
    ck_assert_uint_eq(((uint8_t *)npv_dma_vaddr(buf))[0], 0);
    npv_dma_free(buf);
}
END_TEST

START_TEST(irq_reaches_an_eventfd_waited_through_io_uring)
{
    struct npv_irq_info ii;
    ck_assert_int_eq(npv_dev_irq_info(t.dev, NPV_IRQ_MSIX, &ii), 0);
    ck_assert_uint_eq(ii.count, TESTDEV_MSIX_VECTORS);
    /* The driver routes vector 0, the one the device raises. */
    td_enable(&t, true);
    struct npv_irq *irq = npv_testdev_irq(t.drv);
    ck_assert_ptr_nonnull(irq);
    struct npv_irq_waitset *ws;
    ck_assert_int_eq(npv_irq_waitset_new(t.ctx, 4, &ws), 0);
    ck_assert_int_eq(npv_irq_waitset_add(ws, irq, 0, 0xa0), 0);

    struct npv_testdev_desc d = npv_testdev_nop(NPV_TESTDEV_DESC_IRQ);
    td_submit(&t, &d);
    uint64_t cookies[4];
    ck_assert_int_eq(npv_irq_waitset_wait(ws, GENEROUS_NS, cookies, 4), 1);
    ck_assert_uint_eq(cookies[0], 0xa0);
    /* Nothing else is coming: the deadline expires. */
    ck_assert_int_eq(npv_irq_waitset_wait(ws, 50 * MS, cookies, 4), -ETIMEDOUT);
    ck_assert_int_eq(npv_irq_wait(irq, 0, 20 * MS), -ETIMEDOUT);

    /* A masked vector stays pending and fires on unmask. */
    ck_assert_int_eq(npv_irq_mask(irq, 0), 0);
    td_submit(&t, &d);
    struct npv_cpl c;
    ck_assert_int_eq(td_wait(&t, GENEROUS_NS, &c), 0);
    ck_assert_int_eq(npv_irq_wait(irq, 0, 20 * MS), -ETIMEDOUT);
    ck_assert_int_eq(npv_irq_unmask(irq, 0), 0);
    ck_assert_int_ge(npv_irq_wait(irq, 0, GENEROUS_NS), 1);

    npv_irq_waitset_free(ws);
}
END_TEST

START_TEST(reset_returns_the_device_to_idle)
{
    ck_assert(npv_dev_reset(t.dev) == 0);
    td_enable(&t, false);
    ck_assert_int_eq(npv_dev_reset(t.dev), 0);
    struct npv_testdev_state st = td_state(&t);
    ck_assert(!st.running && !st.fault);
    /* A reset the device fails comes back as its errno. */
    ck_assert_int_eq(npv_testdev_inject_fault(t.drv, NPV_TESTDEV_FAULT_FAIL_RESET), 0);
    ck_assert_int_eq(npv_dev_reset(t.dev), -EIO);
    ck_assert_int_eq(npv_dev_reset(t.dev), 0);
}
END_TEST

static void *read_registers(void *arg)
{
    const struct npv_bar *bar = arg;
    for (int i = 0; i < 200; i++) {
        if (npv_bar_read32(bar, TESTDEV_REG_ID) != TESTDEV_ID_VALUE ||
            npv_bar_read32(bar, TESTDEV_REG_DESC_SIZE) != sizeof(struct npv_testdev_desc))
            return (void *)1;
    }
    return NULL;
}

START_TEST(requests_from_many_threads_get_their_own_replies)
{
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, read_registers, t.bar), 0);
    for (int i = 0; i < 4; i++) {
        void *bad;
        pthread_join(th[i], &bad);
        ck_assert_ptr_null(bad);
    }
}
END_TEST

START_TEST(attach_to_the_same_domain_is_a_noop)
{
    ck_assert_int_eq(npv_dev_attach(t.dev, t.dom), 0);
    ck_assert_ptr_eq(npv_dev_domain(t.dev), t.dom);
    ck_assert_int_eq(npv_dev_attach(t.dev, NULL), -EINVAL);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("vfio-user client");
    TCase *tc = tcase_create("testdev");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, open_negotiates_and_reads_the_device_identity);
    tcase_add_test(tc, region_info_offers_the_doorbell_page_and_traps_the_rest);
    tcase_add_test(tc, trapped_64bit_access_arrives_as_one_8_byte_access);
    tcase_add_test(tc, doorbell_is_a_plain_store_the_model_sees);
    tcase_add_test(tc, dma_map_and_unmap_reach_the_server);
    tcase_add_test(tc, irq_reaches_an_eventfd_waited_through_io_uring);
    tcase_add_test(tc, reset_returns_the_device_to_idle);
    tcase_add_test(tc, attach_to_the_same_domain_is_a_noop);
    tcase_add_test(tc, requests_from_many_threads_get_their_own_replies);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
